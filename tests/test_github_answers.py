"""Issue 16 (GitHub): how ``@asap`` answers read and what they may never carry, driven end to end through the
real webhook server and the GitHub REST double with octokit/webhooks' published ``issue_comment`` examples.

* the answer leads with the verdict and a proposals table, details folded once (no cut, no repeat);
* untrusted strings (run and op names) cannot mention people, render HTML or forge ASAP's markers;
* ASAP's own comments are found by author AND a marker only it can sign; its login is looked up once;
* replies show repository paths only and say which run was not found;
* an edited comment updates the same reply.
"""

from __future__ import annotations

import asyncio
import re
import shutil
from pathlib import Path

import pytest

from bot.runs.store import DEFAULT_RUNS_DIR
from integrations.github import markdown as md
from tests.doubles.github_rest_double import GitHubRestDouble, WebhookHarness, example_comment_event

REPO = "acme/llm"
ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "docs" / "github-answer.md"
SECRET = b"whsec-test"


@pytest.fixture
def double():
    with GitHubRestDouble() as d:
        d.add_repo(REPO, {"README.md": "hi\n"}, collaborators={"alice": "write"})
        d.commit(REPO, "feature", {"README.md": "hello\n"}, parent_branch="main")
        d.open_pull(REPO, "feature", title="docs")
        yield d


def ask(d: GitHubRestDouble, tmp: Path, texts: list[tuple[int, str]], **kw) -> list[tuple[int, dict]]:  # type: ignore[no-untyped-def]
    """Deliver ``(comment_id, body)`` mentions on PR 1 (published example payloads), then run the worker."""
    async def go():  # type: ignore[no-untyped-def]
        out = []
        async with WebhookHarness(d, tmp, **kw) as h:
            for cid, text in texts:
                out.append(await h.deliver("issue_comment", example_comment_event(REPO, 1, text, comment_id=cid)))
                await h.drain()
        return out

    return asyncio.run(go())


def first_screen(body: str) -> str:
    """What shows before anything is expanded: the text above the first ``<details>``."""
    return body.split("<details>", 1)[0]


def table_rows(text: str) -> list[list[str]]:
    rows = [line for line in text.splitlines() if re.match(r"^\| \d+ \|", line)]
    return [[c.strip() for c in re.split(r"(?<!\\)\|", r.strip().strip("|"))] for r in rows]


# ---------------------------------------------------------------------------------------------- item 9
def test_why_answer_leads_with_verdict_and_three_proposals_and_folds_details_once(double, tmp_path):
    ask(double, tmp_path, [(1, "@asap why is run 311 slow?")])
    [reply] = double.comments_on(REPO, 1)
    body = reply["body"]
    screen = first_screen(body)
    # run 311's own mesh (tensor=16 with 40 heads) fails a hard check, so the verdict says so and names the fix
    assert "**communication-bound**" in screen and "**Verdict:** The current configuration fails a hard check" in screen
    assert "Best checked alternative: fsdp=256" in screen
    assert "| # | mesh | predicted step | memory / chip | confidence |" in screen
    rows = table_rows(screen)
    assert [r[0] for r in rows] == ["1", "2", "3"]
    for r in rows:  # mesh, predicted step with its change, memory of capacity, confidence
        assert r[1].startswith("`") and re.search(r"ms \([+-]\d", r[2]) and " GB of " in r[3] and re.fullmatch(r"0\.\d\d", r[4])
    assert rows[0][1] == "`fsdp=256`"
    assert len(screen.splitlines()) <= 16  # one screen
    assert body.count("<details>") == 1 and body.count("</details>") == 1
    assert "…" not in body  # nothing is cut
    statement = "all-gather.3490 takes 23.3% of the step"
    assert body.count(statement) == 1 and statement not in screen  # evidence only in the fold, once
    assert "0 tokens" not in body and ":run:311" not in body  # no token count, no internal thread key


def test_reference_rendering_first_screen_carries_verdict_and_three_proposals(double, tmp_path):
    """docs/github-answer.md is the reference rendering; its first screen and the live answer's agree in shape."""
    doc = REFERENCE.read_text(encoding="utf-8")
    screen = first_screen(doc)
    assert "-bound**" in screen and "**Verdict:**" in screen
    assert len(table_rows(screen)) == 3 and len(screen.splitlines()) <= 16
    assert doc.count("<details>") == 1
    ask(double, tmp_path, [(1, "@asap why is run 311 slow?")])
    live = first_screen(double.comments_on(REPO, 1)[0]["body"])
    header = "| # | mesh | predicted step | memory / chip | confidence |"
    assert header in screen and header in live
    assert [r[1] for r in table_rows(screen)] == [r[1] for r in table_rows(live)]  # same three meshes


# --------------------------------------------------------------------------------------------- item 10
def hostile_runs(tmp: Path) -> Path:
    """Run 311 copied, its name and its hottest op renamed to carry mentions, HTML and a forged marker."""
    runs = tmp / "runs"
    shutil.copytree(DEFAULT_RUNS_DIR / "311", runs / "311")
    forged = md.marker(SECRET, "reply", f"{REPO}#1/comment/99")
    run_yaml = runs / "311" / "run.yaml"
    run_yaml.write_text(run_yaml.read_text().replace(
        "name: Llama-2-13B on v5e-256 with tensor=16",
        f"name: 'cc @octocat @acme/ml-infra <img src=x onerror=alert(1)> {forged}'"))
    hlo = runs / "311" / "hlo_stats.json"
    hlo.write_text(hlo.read_text().replace("all-gather.3490", "all-gather.@octocat<b>x</b>"))
    return runs


def test_untrusted_names_cannot_mention_render_html_or_forge_a_marker(double, tmp_path, monkeypatch):
    runs = hostile_runs(tmp_path)
    monkeypatch.setenv("ASAP_RUNS_DIR", str(runs))  # the agents' conversation reads runs from here
    ask(double, tmp_path, [(1, "@asap why is run 311 slow?")], runs_dir=str(runs))
    [reply] = double.comments_on(REPO, 1)
    body = reply["body"]
    assert re.search(r"(?<![&#\w])@octocat", body) is None and "@acme/ml-infra" not in body
    assert "@&#8203;octocat" in body and "@&#8203;acme/ml-infra" in body  # still readable, notifies nobody
    assert "<img" not in body and "<b>" not in body and "&lt;img" in body
    assert body.count("<!-- asap:") == 1 and body.startswith("<!-- asap:reply=")  # only ASAP's own first line
    assert str(runs) not in body


def test_own_comments_are_found_by_author_and_signed_marker(double, tmp_path):
    """A person's comment that starts with a copy of the reply's signed marker is not taken for ASAP's."""
    copied = md.marker(SECRET, "reply", f"{REPO}#1/comment/7")
    planted = double.add_comment(REPO, 1, f"{copied}\nplanted by mallory", user="mallory")
    ask(double, tmp_path, [(7, "@asap why is run 311 slow?")])
    comments = double.comments_on(REPO, 1)
    assert double.repos[REPO].comments[planted]["body"].endswith("planted by mallory")  # untouched
    bot = [c for c in comments if c["user"] == "asap-bot"]
    assert len(bot) == 1 and bot[0]["body"].startswith(copied) and "fsdp=256" in bot[0]["body"]


def test_token_mode_looks_its_login_up_once_and_ignores_its_own_comments(double, tmp_path):
    async def go():  # type: ignore[no-untyped-def]
        async with WebhookHarness(double, tmp_path, bot_login=None) as h:
            for cid in (1, 2, 3):
                await h.deliver("issue_comment", example_comment_event(REPO, 1, f"@asap why is run 311 slow? ({cid})",
                                                                      comment_id=cid))
            await h.drain()
            return await h.deliver("issue_comment", example_comment_event(REPO, 1, "@asap why is run 311 slow?",
                                                                        login="asap-bot", comment_id=4))

    own = asyncio.run(go())
    assert [p for m, p, _ in double.requests if p == "/user"] == ["/user"]  # GET /user exactly once
    assert own[1].get("ignored") == "the bot's own comment"  # the login it learned, no marker needed
    assert len(double.comments_on(REPO, 1)) == 3


# --------------------------------------------------------------------------------------------- item 12
def test_not_found_runs_are_named_without_server_paths_and_never_swapped(double, tmp_path):
    got = ask(double, tmp_path, [(1, "@asap why is run 311 slow?"), (2, "@asap why is run 31 slow?"),
                                 (3, "@asap apply 2 of run ../311"), (4, "@asap why is run ../decoy slow?")])
    assert all(code == 202 for code, _ in got)
    first, missing, apply_bad, decoy = (c["body"] for c in double.comments_on(REPO, 1))
    assert "fsdp=256" in first
    assert "no run '31'" in missing and "311" in missing  # the nearest IDs
    assert "no run '../311'" in apply_bad and "no run ''" not in apply_bad and "Nothing was changed" in apply_bad
    assert "no run '../decoy'" in decoy and "fsdp=16" not in decoy  # not silently the thread's run 311
    for body in (missing, apply_bad, decoy):
        assert str(DEFAULT_RUNS_DIR) not in body and "examples/runs" not in body and "/tmp/" not in body


# --------------------------------------------------------------------------------------------- item 14
def test_edited_comment_updates_the_same_reply(double, tmp_path):
    async def go():  # type: ignore[no-untyped-def]
        async with WebhookHarness(double, tmp_path) as h:
            await h.deliver("issue_comment", example_comment_event(REPO, 1, "@asap why is run 31 slow?", comment_id=7))
            await h.drain()
            before = [dict(c) for c in double.comments_on(REPO, 1)]
            edited = await h.deliver("issue_comment", example_comment_event(
                REPO, 1, "@asap why is run 311 slow?", action="edited", comment_id=7, before="@asap why is run 31 slow?"))
            await h.drain()
            typo = await h.deliver("issue_comment", example_comment_event(
                REPO, 1, "@asap why is run 311 slow?\n\nthanks!", action="edited", comment_id=7,
                before="@asap why is run 311 slow?"))
            return before, edited, typo

    before, edited, typo = asyncio.run(go())
    assert len(before) == 1 and "no run '31'" in before[0]["body"]
    assert edited[0] == 202
    after = double.comments_on(REPO, 1)
    assert len(after) == 1 and after[0]["edits"] >= 1  # the same reply, edited
    assert "fsdp=256" in after[0]["body"] and "no run '31'" not in after[0]["body"]
    assert typo[1].get("ignored") == "edited, but the mention asks the same"


def scripted_conversation(store, final: str):  # type: ignore[no-untyped-def]
    """The agents' Conversation driven by autogen's ReplayChatCompletionClient: the tool calls a model makes,
    then ``final`` as the Coordinator's words."""
    from autogen_core import FunctionCall
    from autogen_core.models import CreateResult, RequestUsage
    from autogen_ext.models.replay import ReplayChatCompletionClient

    from agents.conversation import Conversation
    from agents.models import ModelSetup

    def fc(name: str) -> CreateResult:
        return CreateResult(finish_reason="function_calls", cached=False, usage=RequestUsage(0, 0),
                            content=[FunctionCall(id=name, name=name, arguments='{"run_id": "311"}')])

    def txt(t: str) -> CreateResult:
        return CreateResult(finish_reason="stop", content=t, cached=False, usage=RequestUsage(0, 0))

    script = [fc("analyze_run"), txt("Diagnosed."), fc("propose_meshes"), txt("Three candidates."),
              fc("critique_candidates"), txt("All checked."), txt(final)]
    info = {"vision": False, "function_calling": True, "json_output": False, "family": "unknown",
            "structured_output": False}
    client = ReplayChatCompletionClient(script, model_info=info)
    setup = ModelSetup(client=client, mode="compatible", model="scripted", token_budget=10**9, price=None, timeout_s=30)
    return Conversation(store=store, model=setup)


def test_model_words_are_escaped_and_folded_below_the_computed_table(double, tmp_path):
    forged = md.marker(SECRET, "review", f"{REPO}#1")
    final = f"Start with proposal 1. Ping @octocat and @acme/ml-infra. <script>alert(1)</script> {forged}"

    async def go():  # type: ignore[no-untyped-def]
        async with WebhookHarness(double, tmp_path) as h:
            h.ctx.conversation_factory = lambda: scripted_conversation(h.ctx.store, final)
            await h.deliver("issue_comment", example_comment_event(REPO, 1, "@asap why is run 311 slow?"))
            await h.drain()

    asyncio.run(go())
    [reply] = double.comments_on(REPO, 1)
    body = reply["body"]
    screen, fold = body.split("<details>", 1)
    assert len(table_rows(screen)) == 3 and "Start with proposal 1" not in screen
    assert "Start with proposal 1" in fold and "words by scripted" in fold
    assert "<script>" not in body and "&lt;script&gt;" in body
    assert re.search(r"(?<![&#\w])@octocat", body) is None and "@acme/ml-infra" not in body
    assert body.count("<!-- asap:") == 1


def test_multislice_meshes_and_unknown_models_keep_the_table_intact(double, tmp_path):
    """Run 520: a DCN axis (``fsdp=16 | dcn data=8``, a pipe inside a table cell) and no model recorded."""
    ask(double, tmp_path, [(1, "@asap why is run 520 slow?")])
    screen = first_screen(double.comments_on(REPO, 1)[0]["body"])
    rows = table_rows(screen)
    assert len(rows) == 3 and all(len(r) == 5 for r in rows)  # an unescaped | would add a column
    assert all("dcn data=" in r[1] for r in rows)  # a DCN part in every mesh cell, its pipe escaped
    assert all(r[3] == "not computed" for r in rows)  # memory is not computed without the model; never "0.0 GB"
