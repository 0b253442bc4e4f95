"""``@asap apply N`` through the real server against the REST double: authorization, one PR whose diff touches
only the lines the proposal changes (mesh keys for a mesh proposal, its settings keys for a settings proposal),
idempotence, one open apply per config, and a person's push stopping the bot."""

from __future__ import annotations

import asyncio
import difflib
import functools
from pathlib import Path

import pytest

from bot.configs.detect import parse_config
from integrations.github import markdown as md
from tests.doubles.github_rest_double import GitHubRestDouble, WebhookHarness, example_comment_event

REPO = "acme/llm"
CFG = (Path(__file__).resolve().parents[1] / "examples" / "runs" / "123" / "maxtext.yml").read_text()
SETTINGS = 'runs:\n  configs/llama3-8b.yml: "123"\napply:\n  teams: ["acme/ml-infra"]\n'
MESH_KEYS = frozenset(f"{net}_{axis}_parallelism" for net in ("ici", "dcn")
                      for axis in ("data", "fsdp", "tensor", "sequence", "expert", "pipeline"))


@functools.cache
def proposals_123():  # type: ignore[no-untyped-def]
    """Run 123's proposals from the deterministic engine, to pick a mesh one and a settings one by what they do."""
    from bot.analysis.analyze import analyze_run
    from bot.proposals.engine import propose
    from bot.runs.store import LocalRunStore

    run = LocalRunStore().get("123")
    return propose(run, analyze_run(run))


def mesh_proposal():  # type: ignore[no-untyped-def]
    ps = proposals_123()
    return next(p for p in ps.proposals if p.mesh != ps.baseline.mesh and not p.settings)


def settings_proposal():  # type: ignore[no-untyped-def]
    ps = proposals_123()
    return next(p for p in ps.proposals if p.settings and p.mesh == ps.baseline.mesh)


def make_double() -> GitHubRestDouble:
    d = GitHubRestDouble()
    d.__enter__()
    d.add_repo(REPO, {"configs/llama3-8b.yml": CFG, ".asap.yml": SETTINGS, "README.md": "hi\n"},
               collaborators={"alice": "write", "mallory": "read", "carol": "triage"})
    d.add_team("acme", "ml-infra", ["carol"])
    d.commit(REPO, "question", {"README.md": "q\n"}, parent_branch="main")
    d.open_pull(REPO, "question", title="where do we stand")
    return d


async def say(h: WebhookHarness, text: str, login: str, cid: int, number: int = 1) -> None:
    status, _ = await h.deliver("issue_comment", example_comment_event(REPO, number, text, login=login, comment_id=cid))
    assert status == 202
    await h.drain()


def apply_pulls(d: GitHubRestDouble) -> list[dict]:
    return [p for p in d.repos[REPO].pulls.values() if p["head"].startswith("asap/")]


def changed_keys(before: str, after: str) -> list[str]:
    """The YAML key of every removed or added line (difflib, line by line)."""
    return [line[2:].split(":", 1)[0].strip() for line in difflib.ndiff(before.split("\n"), after.split("\n"))
            if line[:2] in ("- ", "+ ")]


def assert_only_proposal_lines(before: str, after: str, settings: dict) -> list[str]:
    """Every changed line holds a mesh key or one of the proposal's settings keys; returns the changed keys."""
    keys = changed_keys(before, after)
    assert keys, "nothing changed"
    allowed = MESH_KEYS | {str(k).rsplit(".", 1)[-1] for k in settings}
    assert set(keys) <= allowed, sorted(set(keys) - allowed)
    return keys


def test_writer_applies_one_pr_with_only_mesh_lines_and_reapplying_updates_it(tmp_path):
    p = mesh_proposal()
    n, branch = p.rank, f"asap/123-p{p.rank}"
    d = make_double()
    try:
        async def go():
            async with WebhookHarness(d, tmp_path) as h:
                await say(h, f"@asap apply {n} of run 123", "alice", 1)
                first = [dict(p) for p in apply_pulls(d)]
                refs_after_first = dict(d.repos[REPO].refs)
                await say(h, f"@asap apply {n}", "alice", 2)  # run remembered for this PR thread
                return first, refs_after_first

        first, refs1 = asyncio.run(go())
        pulls = apply_pulls(d)
        assert len(first) == 1 and len(pulls) == 1 and pulls[0]["number"] == first[0]["number"]
        pr = pulls[0]
        assert pr["head"] == branch and pr["base"] == "main" and pr["user"] == "asap-bot"
        assert d.repos[REPO].refs == refs1  # nothing new to commit: the branch was not rewritten
        after = d.file_at(REPO, branch, "configs/llama3-8b.yml")
        keys = assert_only_proposal_lines(CFG, after, {})
        assert set(keys) <= MESH_KEYS  # a mesh proposal: mesh lines only
        assert parse_config(after).mesh(64, 1).short() == p.mesh_short
        # one commit on top of main, written by the bot
        repo = d.repos[REPO]
        head = repo.commits[repo.refs[f"heads/{branch}"]]
        assert head["parents"] == [repo.refs["heads/main"]]
        assert head["author"]["email"] == head["committer"]["email"] == "asap-bot@users.noreply.github.com"
        body = pr["body"]
        for part in (f"<!-- asap:apply run=123 proposal={n} config=configs/llama3-8b.yml -->", "**Diagnosis**",
                     "**Predicted impact**", "**Confidence**", "**Citations**", "**Compare against**: run `123`",
                     "```diff", "Requested by @alice via github",
                     "Only the lines this proposal changes are edited (the mesh lines)", f"`{p.mesh_short}`",
                     f'`derived_from: {{run: "123", proposal: {n}}}`'):
            assert part in body, part
        cited = [c.ref for c in p.citations if c.kind == "playbook"]
        assert cited and all(f"`{ref}`" in body for ref in cited)  # the playbook sections it rests on
        replies = [c["body"] for c in d.comments_on(REPO, 1)]
        assert len(replies) == 2  # one per request
        assert "opened https://github.example/acme/llm/pull/" in replies[0]
        assert "up to date" in replies[1]
    finally:
        d.__exit__()


def test_settings_proposal_opens_a_pr_that_changes_only_its_settings_lines(tmp_path):
    p = settings_proposal()
    branch = f"asap/123-p{p.rank}"
    d = make_double()
    try:
        async def go():
            async with WebhookHarness(d, tmp_path) as h:
                await say(h, f"@asap apply {p.rank} of run 123", "alice", 1)

        asyncio.run(go())
        pulls = apply_pulls(d)
        assert [x["head"] for x in pulls] == [branch]
        after = d.file_at(REPO, branch, "configs/llama3-8b.yml")
        keys = assert_only_proposal_lines(CFG, after, p.settings)
        assert not set(keys) & MESH_KEYS  # same mesh: no mesh line is touched
        assert parse_config(after).mesh(64, 1) == parse_config(CFG).mesh(64, 1)
        for key, value in p.settings.items():
            line = next(x for x in after.split("\n") if x.split(":", 1)[0].strip() == key.rsplit(".", 1)[-1])
            assert str(value) in line, (key, line)
        repo = d.repos[REPO]
        head = repo.commits[repo.refs[f"heads/{branch}"]]
        assert head["parents"] == [repo.refs["heads/main"]]
        body, title = pulls[0]["body"], pulls[0]["title"]
        setting_keys = [k.rsplit(".", 1)[-1] for k in p.settings]
        assert all(k in title for k in setting_keys), title
        assert f"- mesh unchanged: `{p.mesh_short}`" in body
        assert all(f"- setting `{t}`" in body for t in p.settings_changes)
        assert ("Only the lines this proposal changes are edited (" + ", ".join(f"`{k}`" for k in setting_keys)) in body
        assert "the mesh lines" not in body
        reply = d.comments_on(REPO, 1)[-1]["body"]
        assert "opened https://github.example/acme/llm/pull/" in reply and md.plain(p.settings_changes[0]) in reply
    finally:
        d.__exit__()


def test_read_only_user_is_refused_with_a_reply_and_nothing_changes(tmp_path):
    d = make_double()
    try:
        refs = dict(d.repos[REPO].refs)

        async def go():
            async with WebhookHarness(d, tmp_path) as h:
                await say(h, "@asap apply 1 of run 123", "mallory", 1)
                await say(h, "@asap apply 1 of run 123", "stranger", 2)

        asyncio.run(go())
        assert apply_pulls(d) == [] and d.repos[REPO].refs == refs
        replies = [c["body"] for c in d.comments_on(REPO, 1)]
        assert len(replies) == 2
        assert "cannot apply" in replies[0] and "you have read" in replies[0] and "acme/ml-infra" in replies[0]
        assert "you have none" in replies[1]
        asked = [p for m, p, _ in d.requests if "/permission" in p]
        assert asked == [f"/repos/{REPO}/collaborators/mallory/permission", f"/repos/{REPO}/collaborators/stranger/permission"]
    finally:
        d.__exit__()


def test_listed_team_member_may_apply(tmp_path):
    d = make_double()
    try:
        async def go():
            async with WebhookHarness(d, tmp_path) as h:
                await say(h, f"@asap apply {settings_proposal().rank} of run 123", "carol", 1)

        asyncio.run(go())
        assert [p["head"] for p in apply_pulls(d)] == [f"asap/123-p{settings_proposal().rank}"]
    finally:
        d.__exit__()


def test_second_apply_for_the_same_config_points_to_the_open_pr(tmp_path):
    d = make_double()
    try:
        async def go():
            async with WebhookHarness(d, tmp_path) as h:
                await say(h, f"@asap apply {first} of run 123", "alice", 1)
                await say(h, f"@asap apply {second} of run 123", "alice", 2)

        first, second = mesh_proposal().rank, settings_proposal().rank
        asyncio.run(go())
        pulls = apply_pulls(d)
        assert [p["head"] for p in pulls] == [f"asap/123-p{first}"]
        assert f"heads/asap/123-p{second}" not in d.repos[REPO].refs
        reply = d.comments_on(REPO, 1)[-1]["body"]
        assert "already open" in reply and f"/pull/{pulls[0]['number']}" in reply
    finally:
        d.__exit__()


def test_a_persons_push_to_the_bot_branch_stops_rewriting(tmp_path):
    d = make_double()
    try:
        async def go():
            async with WebhookHarness(d, tmp_path) as h:
                await say(h, "@asap apply 1 of run 123", "alice", 1)
                human = d.commit(REPO, "asap/123-p1", {"README.md": "tuned by hand\n"}, email="alice@acme.dev")
                await say(h, "@asap apply 1 of run 123", "alice", 2)
                return human

        human = asyncio.run(go())
        assert d.repos[REPO].refs["heads/asap/123-p1"] == human
        reply = d.comments_on(REPO, 1)[-1]["body"]
        assert "no longer rewrites" in reply and "alice@acme.dev" in reply
    finally:
        d.__exit__()


def test_apply_without_a_number_or_with_a_bad_one_does_nothing(tmp_path):
    d = make_double()
    try:
        async def go():
            async with WebhookHarness(d, tmp_path) as h:
                await say(h, "@asap apply", "alice", 1)
                await say(h, "@asap apply 7 of run 123", "alice", 2)

        asyncio.run(go())
        assert apply_pulls(d) == []
        replies = [c["body"] for c in d.comments_on(REPO, 1)]
        assert "say which proposal" in replies[0]
        assert "there is no proposal 7" in replies[1]
    finally:
        d.__exit__()


# ------------------------------------------------------------------------ issue 16, items 13 and 16
BOT_EMAIL = "asap-bot@users.noreply.github.com"


def test_pr_body_leads_with_the_predicted_impact(tmp_path):
    p = mesh_proposal()
    d = make_double()
    try:
        async def go():
            async with WebhookHarness(d, tmp_path) as h:
                await say(h, f"@asap apply {p.rank} of run 123", "alice", 1)

        asyncio.run(go())
        body = apply_pulls(d)[0]["body"]
        sections = [line for line in body.splitlines() if line.startswith("**")]
        assert sections[0] == "**Predicted impact**", sections[:3]
        impact = body.split("**Predicted impact**", 1)[1].split("\n\n", 1)[0]
        assert "step time" in impact and "ms" in impact and "memory per chip" in impact
        assert body.index("**Predicted impact**") < body.index("**Diagnosis**") < body.index("**Confidence**")
    finally:
        d.__exit__()


@pytest.mark.parametrize("moment", ["POST /repos/acme/llm/git/refs", "POST /repos/acme/llm/pulls"])
def test_simultaneous_apply_loses_the_race_and_answers_with_the_winners_pr(tmp_path, moment):
    """The other apply creates the branch (-> 422 Reference already exists) or the PR (-> 422 A pull request
    already exists) just before this one: one PR, and this request answers with it instead of an error."""
    p = mesh_proposal()
    branch = f"asap/123-p{p.rank}"
    d = make_double()
    fired: list[int] = []

    def other_apply(method: str, path: str, body: object) -> None:
        if f"{method} {path}" != moment or fired:
            return
        fired.append(1)
        if branch not in {r.split("heads/", 1)[-1] for r in d.repos[REPO].refs}:
            d.commit(REPO, branch, {"configs/llama3-8b.yml": CFG.replace("\n", "\n", 1)}, email=BOT_EMAIL,
                     parent_branch="main", message="asap: the other apply")
        d.open_pull(REPO, branch, title="ASAP: the other apply", user="asap-bot",
                    body=f"<!-- asap:apply run=123 proposal={p.rank} config=configs/llama3-8b.yml -->")

    d.before.append(other_apply)
    try:
        async def go():
            async with WebhookHarness(d, tmp_path) as h:
                await say(h, f"@asap apply {p.rank} of run 123", "alice", 1)

        asyncio.run(go())
        assert fired == [1]
        pulls = apply_pulls(d)
        assert len(pulls) == 1 and pulls[0]["title"] == "ASAP: the other apply"
        reply = d.comments_on(REPO, 1)[-1]["body"]
        assert "got there first" in reply and f"/pull/{pulls[0]['number']}" in reply
        assert "422" not in reply and "⚠️" not in reply
    finally:
        d.__exit__()


def test_a_config_line_cannot_break_out_of_the_pr_bodys_diff_fence(tmp_path):
    """The diff shows the config's own lines: a comment holding ``` and a mention stays inside the code block."""
    p = mesh_proposal()
    d = make_double()
    hostile = CFG.replace("ici_fsdp_parallelism: -1", "# see ``` then @octocat <b>x</b>\nici_fsdp_parallelism: -1", 1)
    d.commit(REPO, "main", {"configs/llama3-8b.yml": hostile})
    try:
        async def go():
            async with WebhookHarness(d, tmp_path) as h:
                await say(h, f"@asap apply {p.rank} of run 123", "alice", 1)

        asyncio.run(go())
        body = apply_pulls(d)[0]["body"]
        diff_block = body.split("<summary>Diff</summary>", 1)[1]
        assert diff_block.lstrip().startswith("````diff") and "# see ``` then @octocat" in diff_block
        assert diff_block.rstrip().endswith("````\n\n</details>".rstrip())
    finally:
        d.__exit__()
