"""Model text is checked before any front end shows it: figures, meshes and claimed actions (agents/verify.py).

A scripted model that lies, through the real openai client against a local OpenAI-compatible double and
through autogen's ReplayChatCompletionClient, and the check on a real sample run's computed results.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from autogen_core import FunctionCall
from autogen_core.models import CreateResult, RequestUsage
from autogen_ext.models.replay import ReplayChatCompletionClient
from doubles.agents_backend import FakeBackend
from doubles.openai_double import OpenAIDouble, Reply
from test_agents_openai import env_for, tool_policy

from agents.conversation import Conversation
from agents.figures import meshes_in, quantities
from agents.models import ModelSetup, PriceSettings, build_model
from agents.verify import Evidence, check_model_text, check_reply
from agents.workspace import Workspace
from bot.store.sqlite_store import SQLiteStore

LIES = ("Proposal 1 will run at 120.0 ms per step and needs only 0.5 GB per chip. "
        "I have applied proposal 3 and opened pull request #42. "
        "Collectives take 41.5% of the step, so start with fsdp=32 tensor=2 at 108.0 ms (1.15x faster).")


def lying_policy(body: dict[str, Any]) -> Reply:
    """A tool-calling model that does the work, then states figures and actions of its own."""
    reply = tool_policy(body)
    return Reply.say(LIES) if reply.text is not None else reply


def test_figures_units_and_meshes_are_read_as_written() -> None:
    qs = {(q.dimension, round(q.value, 6)) for q in quantities(
        "4,898.8 ms; 4.9 s; 6.1 GB and 5.7 GiB; 12.5%; 1.43x; 459 TFLOP/s; 2.8 TB/s; 64 chips; 2-3 s; 64 x TPU v5p")}
    assert ("time", 4898.8) in qs and ("time", 4900.0) in qs and ("bytes", 6.1e9) in qs
    assert ("bytes", round(5.7 * 2**30, 6)) in qs and ("percent", 12.5) in qs and ("ratio", 1.43) in qs
    assert ("flops", 4.59e14) in qs and ("bandwidth", 2.8e12) in qs and ("chips", 64.0) in qs
    assert ("time", 2000.0) in qs and ("time", 3000.0) in qs  # both ends of a range
    assert not quantities("3 slices, 2 steps, proposal 1, 8x4x2, 164 FLOP/byte")  # words, meshes, ratios of units
    per = {(q.dimension, q.value) for q in quantities("120.0 ms/step and 0.5 GB/chip, a x1.9 gain")}
    assert per == {("time", 120.0), ("bytes", 0.5e9), ("ratio", 1.9)}  # "per step" and prefix forms too
    found = dict(meshes_in("try fsdp=16 tensor=4, not data:8 model:4 or 8x4x2 | dcn data=2 after fsdp=64"))
    assert found["fsdp=16 tensor=4"] == ((("fsdp", 16), ("tensor", 4)), ())
    assert found["data:8 model:4"] == ((("data", 8), ("tensor", 4)), ())  # ici_mesh names, canonical axes
    assert found["8x4x2"] == (8, 4, 2) and found["fsdp=64"] == ((("fsdp", 64),), ())


def test_an_axis_of_a_computed_mesh_may_be_named_alone() -> None:
    ev = Evidence(meshes={((("fsdp", 16), ("tensor", 16)), ()), ((("fsdp", 16),), (("data", 8),))})
    ev.rejected[((("fsdp", 4), ("tensor", 64)), ())] = "tensor 64 does not divide the 40 heads"
    kept = "Dropping tensor=16 to fsdp=16 alone removes the per-layer all-gathers. With data=8 across slices it scales."
    assert not check_model_text(kept, ev).removed
    removed = check_model_text("Try tensor=32 instead. Or fsdp=4 tensor=64.", ev).removed
    assert [r.why for r in removed] == ["mesh", "rejected_mesh"]


def test_display_rounding_and_units_decide_what_matches() -> None:
    ev = Evidence()
    ev.add("time", 4898.8)
    ev.add("bytes", 6.1e9)
    kept = check_model_text("It runs at 4898.8 ms, about 4.9 s or roughly 5 s, with 6.1 GB (5.7 GiB) per chip.", ev)
    assert not kept.removed
    for lie in ("It runs at 120.0 ms.", "It runs at 4.8 s.", "It needs 0.5 GB per chip.", "It needs 6.3 GB."):
        assert check_model_text(lie, ev).removed, lie


def test_lying_model_through_the_openai_client(tmp_path: Path) -> None:
    """The issue's scripted model: invented figures and actions are removed with a note; true ones stay."""
    progress: list[str] = []
    with OpenAIDouble(lying_policy) as d:
        conv = Conversation(store=SQLiteStore(tmp_path / "s.db"), model=build_model(env_for(d, tmp_path)),
                            backend=FakeBackend(tmp_path))
        a = asyncio.run(conv.ask("why is job 123 slow?", thread_id="t1", progress=progress.append))
    assert a.fallback is None and a.mode == "compatible"
    assert "1. fsdp=32 tensor=2: step 108.0 ms" in a.text  # the computed part is untouched
    assert "120.0 ms" not in a.text and "0.5 GB" not in a.text
    assert "applied proposal 3" not in a.text and "#42" not in a.text
    assert a.model_note and a.model_note.startswith(
        "Collectives take 41.5% of the step, so start with fsdp=32 tensor=2 at 108.0 ms (1.15x faster).\n\nNote: 2 sentences")
    assert ("Note: 2 sentences of the model's text were removed: 1 with figures no computed result supports; "
            "1 claiming actions that were not taken. The figures above are the computed ones.") in a.text
    assert not any("120.0 ms" in line or "#42" in line for line in progress)  # progress lines are checked too
    checks = [e for e in conv.log("t1") if e["kind"] == "model_text_check"]
    assert [r["why"] for r in checks[0]["removed"]] == ["figure", "action"]
    # every front end shows the checked text and the note: Slack's cards are built from model_note
    from integrations.slack.blocks import answer_blocks

    slack = json.dumps(answer_blocks(a.to_dict(), conv.store.get_thread("t1")["workspace"]))  # type: ignore[index]
    assert "Note: 2 sentences of the model" in slack and "120.0 ms" not in slack and "#42" not in slack


def _fc(name: str, args: dict[str, Any]) -> CreateResult:
    return CreateResult(finish_reason="function_calls", content=[FunctionCall(id=f"c-{name}", name=name,
                        arguments=json.dumps(args))], usage=RequestUsage(prompt_tokens=10, completion_tokens=5),
                        cached=False)


def _txt(text: str) -> CreateResult:
    return CreateResult(finish_reason="stop", content=text, usage=RequestUsage(prompt_tokens=10, completion_tokens=5),
                        cached=False)


INFO = {"vision": False, "function_calling": True, "json_output": False, "family": "unknown", "structured_output": False}


def _setup(script: list[CreateResult]) -> ModelSetup:
    return ModelSetup(client=ReplayChatCompletionClient(script, model_info=INFO), mode="compatible", model="scripted",
                      token_budget=100_000, price=PriceSettings(input_per_mtok=1.0, output_per_mtok=2.0), timeout_s=5.0)


def test_replayed_model_naming_a_rejected_mesh_has_it_removed_not_annotated(tmp_path: Path) -> None:
    backend = FakeBackend(tmp_path)
    store = SQLiteStore(tmp_path / "s.db")
    first = [_fc("analyze_run", {"run_id": "123"}), _txt("Communication-bound."),
             _fc("propose_meshes", {"run_id": "123"}), _txt("Three candidates."),
             _fc("critique_candidates", {"run_id": "123"}), _txt("All pass."), _txt("Start with proposal 1.")]
    asyncio.run(Conversation(store=store, model=_setup(first), backend=backend).ask("why is job 123 slow?", thread_id="t"))
    follow = [_fc("suggest_mesh", {"run_id": "123", "ici": {"fsdp": 4, "tensor": 16}}), _txt("Checked."),
              _fc("critique_candidates", {"run_id": "123"}), _txt("It fails."),
              _txt("fsdp=4 tensor=16 would remove the all-gathers entirely. Proposal 1 (fsdp=32 tensor=2) stays "
                   "the better first try at 108.0 ms.")]
    a = asyncio.run(Conversation(store=store, model=_setup(follow), backend=backend)
                    .ask("what about fsdp=4 tensor=16?", thread_id="t"))
    assert a.fallback is None and a.intent == "suggest"
    assert "suggested fsdp=4 tensor=16: dropped" in a.text  # the computed verdict is shown ...
    assert "would remove the all-gathers" not in a.text  # ... the model's praise of the rejected mesh is not,
    assert "mentioned above fails its checks" not in a.text  # and it is removed, not annotated
    assert a.model_note and a.model_note.startswith("Proposal 1 (fsdp=32 tensor=2) stays the better first try at 108.0 ms.")
    assert "1 naming meshes the Critic rejected (fsdp=4 tensor=16)" in a.text


def test_a_real_sample_runs_figures_are_the_only_ones_kept(tmp_path: Path) -> None:
    """On the real analysis of a bundled sample: the computed prediction in any unit stays, invented ones go."""
    conv = Conversation(store=SQLiteStore(tmp_path / "s.db"), model=build_model({}))
    answer = asyncio.run(conv.ask("why is run 311 slow?", thread_id="real"))  # the run: 4898.8 ms, 6.1 GB
    ws = Workspace.from_dict(conv.store.get_thread("real")["workspace"])  # type: ignore[index]
    p = ws.proposal_list()[0]
    step_ms, mem = p["predicted"]["step_time_ms"], p["predicted"]["memory_per_chip_bytes"]
    now_ms = ws.report["kpis"]["step_time_ms"]  # type: ignore[index]
    chips = ws.report["run"]["num_chips"]  # type: ignore[index]
    truth = (f"Proposal 1 ({p['mesh_short']}) is predicted at {step_ms:.1f} ms per step, about {step_ms / 1000:.1f} s, "
             f"saving {now_ms - step_ms:.0f} ms, using {mem / 1e9:.1f} GB ({mem / 2**30:.1f} GiB) per chip on {chips} chips.")
    lie = "Proposal 1 will run at 120.0 ms with 0.5 GB per chip."
    checked = check_reply(f"{truth} {lie} Opening a pull request for it now: I've opened PR #7.", ws, answer.computed)
    assert checked.text == truth
    assert [r.why for r in checked.removed] == ["figure", "action"]
    assert checked.note and "120.0" not in checked.note and "1 with figures no computed result supports" in checked.note


@pytest.mark.parametrize("text", ["We have deployed fsdp=32 tensor=2 to the cluster.",
                                  "Proposal 2 has been applied.", "See PR #12 for the change."])
def test_claimed_actions_without_a_record_are_removed(text: str) -> None:
    ws = Workspace(run_id="123", report={"run": {"mesh": {"ici": {"fsdp": 32, "tensor": 2}, "dcn": {}}}})
    checked = check_reply(f"{text} The rest stays.", ws)
    assert checked.text == "The rest stays." and checked.removed[0].why == "action"


def test_a_recorded_action_may_be_named_but_only_that_one() -> None:
    ws = Workspace(run_id="123")
    done = [{"kind": "apply", "ref": "#12"}]
    assert check_reply("I opened PR #12 with proposal 1.", ws, actions=done).text == "I opened PR #12 with proposal 1."
    assert check_reply("I opened PR #13 with proposal 1.", ws, actions=done).text == ""
