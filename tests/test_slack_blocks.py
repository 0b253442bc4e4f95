"""Block Kit within Slack's limits, escaping of untrusted text, button values, intake parsing and settings."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bot.errors import AsapError
from integrations.slack import blocks as bk
from integrations.slack.intake import clean_text, command_job, event_job, parse_command
from integrations.slack.settings import SlackSettings
from tests.doubles.slack_double import block_kit_errors, mention_body


def _proposal(i: int, mesh: str = "data=2 fsdp=32", rationale: str = "The run is compute-bound.") -> dict[str, Any]:
    return {"rank": i, "mesh_short": mesh, "mesh": {"ici": {"data": 2}, "dcn": {}}, "labels": ["within noise"],
            "predicted": {"step_time_ms": 3287.3, "memory_per_chip_bytes": 22.7e9, "memory_capacity_bytes": 96e9},
            "change": {"step_time_percent": 0.01}, "confidence": 0.24, "rationale": rationale, "tradeoffs": ["t"],
            "critic": [{"name": "memory", "passed": True, "reason": "fits"}]}


def _workspace(evidence: int = 5, statement: str = "x", mesh: str = "data=2 fsdp=32", name: str = "demo") -> dict[str, Any]:
    report = {"run": {"id": "123", "name": name, "num_chips": 64, "chip_name": "TPU v5p", "mesh_short": "fsdp=64",
                      "profile_sources": ["hlo_stats.json"]},
              "diagnosis": {"bottleneck": "compute", "confidence": 0.95, "summary": "s",
                            "evidence": [{"statement": f"{statement} {i}"} for i in range(evidence)]},
              "kpis": {"step_time_ms": 3287.0, "mfu_percent": 66.3}}
    return {"run_id": "123", "report": report, "verdicts": {},
            "proposals": {"verdict": "improvable", "summary": "three meshes", "advice": [{"text": "remat"}],
                          "proposals": [_proposal(i, mesh) for i in (1, 2, 3)]}}


ANSWER = {"intent": "first", "run_id": "123", "thread_id": "slack:C1:1.2", "mode": "analyst", "model": "asap-analyst",
          "usage": {"total_tokens": 0}, "text": "", "model_note": None, "fallback": None}


def test_answer_with_hundreds_of_critic_notes_splits_within_every_limit() -> None:
    ws = _workspace(evidence=1200, statement="fusion.1234 takes 0.1% of the step, bound by HBM bandwidth (profile)" * 2)
    ws["verdicts"] = {f"data={i} fsdp=2": {"ok": False, "checks": [
        {"passed": False, "hard": True, "reason": f"fusion.1234 takes 0.1% of the step (profile) {i} " * 6}]}
        for i in range(1200)}
    blocks = bk.answer_blocks(ANSWER, ws)
    evidence = next(b for b in blocks if "*Evidence*" in b.get("text", {}).get("text", ""))
    assert evidence["text"]["text"].count("\n• ") == bk.EVIDENCE_BULLETS  # three bullets, not 1200
    assert len(blocks) > bk.MAX_BLOCKS
    pages = bk.paginate(blocks, bk.fallback_text(ANSWER, ws))
    assert len(pages) >= 2
    for page in pages:
        assert block_kit_errors(page.blocks) == [], block_kit_errors(page.blocks)[:3]
        assert len(page.text) <= bk.MAX_FALLBACK_TEXT
    # nothing was cut: every evidence line is in some page, and each card keeps its buttons
    joined = json.dumps([p.blocks for p in pages])
    assert all(f"(profile) {i} " in joined for i in (0, 599, 1199))
    for page in pages:
        for n, b in enumerate(page.blocks):
            if b.get("block_id", "").startswith("proposal:"):
                assert page.blocks[n + 1]["type"] == "actions"


def test_untrusted_text_cannot_mention_or_link() -> None:
    ws = _workspace(statement="<!channel> <@U999> <https://evil.example|click>", name="<!here> run")
    out = json.dumps(bk.answer_blocks(ANSWER, ws))
    assert "<!channel>" not in out and "<@U999>" not in out and "<https://evil" not in out and "<!here>" not in out
    assert "&lt;!channel&gt;" in out


def test_long_labels_are_clipped_to_the_button_and_header_limits() -> None:
    mesh = "data=2 fsdp=16 tensor=2 sequence=2 expert=4 pipeline=2 dcn_data=8 dcn_fsdp=4"
    ws = _workspace(mesh=mesh, name="n" * 400)
    blocks = bk.answer_blocks(ANSWER, ws)
    assert block_kit_errors(blocks) == []
    buttons = [e for b in blocks if b["type"] == "actions" for e in b["elements"]]
    assert all(len(e["text"]["text"]) <= 75 for e in buttons)


def test_action_values_round_trip_and_anything_else_is_refused() -> None:
    value = bk.action_value("run-7.b", 3)
    assert bk.parse_action("asap_apply:3", value) == ("apply", "run-7.b", 3)
    assert bk.parse_action("asap_explain:3", value) == ("explain", "run-7.b", 3)
    bad = [("asap_apply:2", value), ("asap_delete:3", value), ("asap_apply:3", '{"run":"../x","i":3}'),
           ("asap_apply:3", '{"run":"1","i":true}'), ("asap_apply:3", '{"run":"1","i":3,"path":"x"}'),
           ("asap_apply:4", '{"run":"1","i":4}'), ("asap_apply:3", "[]")]
    for action_id, v in bad:
        with pytest.raises(AsapError):
            bk.parse_action(action_id, v)


def test_split_text_keeps_lines_and_limits() -> None:
    text = "\n".join(["short line"] * 500 + ["word " * 1000])
    parts = bk.split_text(text, 3000)
    assert all(len(p) <= 3000 for p in parts)
    assert " ".join(" ".join(parts).split()) == " ".join(text.split())


def test_double_refuses_what_slack_refuses() -> None:
    """The validator the tests rely on must itself fail on over-limit payloads."""
    assert block_kit_errors([bk.section("x")] * 51)
    assert block_kit_errors([bk.section("x" * 3001)])
    assert block_kit_errors([{"type": "header", "text": {"type": "plain_text", "text": "h" * 151}}])
    assert block_kit_errors([{"type": "actions", "elements": [
        {"type": "button", "action_id": "a", "text": {"type": "plain_text", "text": "b" * 76}}]}])
    assert block_kit_errors([{"type": "actions", "elements": [
        {"type": "button", "action_id": "a", "text": {"type": "plain_text", "text": "b"}},
        {"type": "button", "action_id": "a", "text": {"type": "plain_text", "text": "c"}}]}])
    assert block_kit_errors([{"type": "section", "fields": [{"type": "mrkdwn", "text": "f"}] * 11}])
    assert block_kit_errors([{"type": "section", "text": {"type": "mrkdwn", "text": ""}}])
    assert block_kit_errors([bk.section("ok"), bk.context("ok")]) == []


def test_intake_builds_jobs_keyed_by_event_and_thread() -> None:
    body = mention_body("<@UASAPBOT> why is job 123 slow? &lt;3", event_id="Ev9", thread_ts="1.5", ts="1.7")
    job = event_job(body, bot_user_id="UASAPBOT")
    assert job is not None and job.id == "slack:Ev9" and job.thread == "slack:C0DATA:1.5"
    assert job.text == "why is job 123 slow? <3" and job.reply_to["message_ts"] == "1.7"
    bot_post = mention_body("hi", event_id="Ev10")
    bot_post["event"]["bot_id"] = "B1"
    assert event_job(bot_post, bot_user_id="UASAPBOT") is None
    assert clean_text("<@UASAPBOT|asap>  see <https://x.io/a|here>", "UASAPBOT") == "see https://x.io/a"


@pytest.mark.parametrize("text, run", [("why 123", "123"), ("why is job 123 slow?", "123"), ("123", "123"),
                                       ("why run-abc.7", "abc.7"), ("", None), ("help", None),
                                       ("why is everything slow today", None)])
def test_slash_command_grammar(text: str, run: str | None) -> None:
    assert parse_command(text) == run
    job = command_job({"text": text, "channel_id": "C1", "user_id": "U1", "trigger_id": "t1"})
    assert (job.run if job else None) == run


ENV = {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_SIGNING_SECRET": "8f742231b10e8888abcd11122285a5ab"}


@pytest.mark.parametrize("change, field", [
    ({"SLACK_BOT_TOKEN": ""}, "SLACK_BOT_TOKEN"),
    ({"SLACK_BOT_TOKEN": "xoxp-user"}, "SLACK_BOT_TOKEN"),
    ({"SLACK_SIGNING_SECRET": "", "SLACK_APP_TOKEN": ""}, "SLACK_APP_TOKEN"),
    ({"SLACK_APP_TOKEN": "xoxb-wrong"}, "SLACK_APP_TOKEN"),
    ({"SLACK_SIGNING_SECRET": "not a secret!"}, "SLACK_SIGNING_SECRET"),
    ({"ASAP_APPLY_SLACK_USERS": "U012ABC,alice"}, "ASAP_APPLY_SLACK_USERS"),
    ({"ASAP_APPLY_SLACK_GROUPS": "@infra"}, "ASAP_APPLY_SLACK_GROUPS"),
    ({"SLACK_API_URL": "ftp://x"}, "SLACK_API_URL"),
])
def test_bad_settings_name_the_variable(change: dict[str, str], field: str) -> None:
    with pytest.raises(AsapError) as e:
        SlackSettings.from_env({**ENV, **change})
    assert e.value.field == field


def test_settings_modes_and_appliers() -> None:
    s = SlackSettings.from_env({**ENV, "SLACK_APP_TOKEN": "xapp-1", "ASAP_APPLY_SLACK_USERS": "U012ABC, W0XYZ"})
    assert s.modes == ["http", "socket"] and s.appliers == {"U012ABC", "W0XYZ"}
    assert "xoxb" not in repr(s)
    both = SlackSettings.from_env({**ENV, "ASAP_APPLY_SLACK_USERS": "U2BB", "ASAP_APPLY_SLACK_GROUPS": "S2BB,S3CC"})
    assert both.appliers == {"U2BB"} and both.applier_groups == {"S2BB", "S3CC"}
    assert both.policy().check_slack("U2BB").allowed and not both.policy().check_slack("U9ZZ").allowed
    assert SlackSettings.enabled({"SLACK_APP_TOKEN": "xapp-1"}) and not SlackSettings.enabled({"SLACK_BOT_TOKEN": "x"})
