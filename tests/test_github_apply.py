"""``@asap apply N`` through the real server against the REST double: authorization, one PR whose diff touches
only the mesh lines, idempotence, one open apply per config, and a person's push stopping the bot."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bot.configs.detect import parse_config
from tests.doubles.github_rest_double import GitHubRestDouble, WebhookHarness, comment_event

REPO = "acme/llm"
CFG = (Path(__file__).resolve().parents[1] / "examples" / "runs" / "123" / "maxtext.yml").read_text()
SETTINGS = 'runs:\n  configs/llama3-8b.yml: "123"\napply:\n  teams: ["acme/ml-infra"]\n'
MESH_KEYS = ("ici_data_parallelism", "ici_fsdp_parallelism", "ici_tensor_parallelism", "ici_sequence_parallelism",
             "ici_expert_parallelism", "ici_pipeline_parallelism", "dcn_data_parallelism", "dcn_fsdp_parallelism",
             "dcn_tensor_parallelism")


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
    status, _ = await h.deliver("issue_comment", comment_event(REPO, number, text, login=login, comment_id=cid))
    assert status == 202
    await h.drain()


def apply_pulls(d: GitHubRestDouble) -> list[dict]:
    return [p for p in d.repos[REPO].pulls.values() if p["head"].startswith("asap/")]


def assert_only_mesh_lines_changed(before: str, after: str) -> None:
    b, a = before.split("\n"), after.split("\n")
    assert len(b) == len(a)  # no line added or removed here: every key exists already
    changed = [(x, y) for x, y in zip(b, a, strict=True) if x != y]
    assert changed
    for x, y in changed:
        key_b, key_a = x.split(":", 1)[0], y.split(":", 1)[0]
        assert key_b == key_a and key_b in MESH_KEYS, (x, y)


def test_writer_applies_one_pr_with_only_mesh_lines_and_reapplying_updates_it(tmp_path):
    d = make_double()
    try:
        async def go():
            async with WebhookHarness(d, tmp_path) as h:
                await say(h, "@asap apply 1 of run 123", "alice", 1)
                first = [dict(p) for p in apply_pulls(d)]
                refs_after_first = dict(d.repos[REPO].refs)
                await say(h, "@asap apply 1", "alice", 2)  # run remembered for this PR thread
                return first, refs_after_first

        first, refs1 = asyncio.run(go())
        pulls = apply_pulls(d)
        assert len(first) == 1 and len(pulls) == 1 and pulls[0]["number"] == first[0]["number"]
        pr = pulls[0]
        assert pr["head"] == "asap/123-p1" and pr["base"] == "main" and pr["user"] == "asap-bot"
        assert d.repos[REPO].refs == refs1  # nothing new to commit: the branch was not rewritten
        after = d.file_at(REPO, "asap/123-p1", "configs/llama3-8b.yml")
        assert_only_mesh_lines_changed(CFG, after)
        assert parse_config(after).mesh(64, 1).short() != parse_config(CFG).mesh(64, 1).short()
        # one commit on top of main, written by the bot
        repo = d.repos[REPO]
        head = repo.commits[repo.refs["heads/asap/123-p1"]]
        assert head["parents"] == [repo.refs["heads/main"]]
        assert head["author"]["email"] == head["committer"]["email"] == "asap-bot@users.noreply.github.com"
        body = pr["body"]
        for part in ("<!-- asap:apply run=123 proposal=1 config=configs/llama3-8b.yml -->", "**Diagnosis**",
                     "**Predicted impact**", "**Confidence**", "**Citations**", "**Compare against**: run `123`",
                     "```diff", "Requested by @alice via github"):
            assert part in body, part
        replies = [c["body"] for c in d.comments_on(REPO, 1)]
        assert len(replies) == 2  # one per request
        assert "opened https://github.example/acme/llm/pull/" in replies[0]
        assert "up to date" in replies[1]
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
                await say(h, "@asap apply 1 of run 123", "carol", 1)

        asyncio.run(go())
        assert len(apply_pulls(d)) == 1
    finally:
        d.__exit__()


def test_second_apply_for_the_same_config_points_to_the_open_pr(tmp_path):
    d = make_double()
    try:
        async def go():
            async with WebhookHarness(d, tmp_path) as h:
                await say(h, "@asap apply 1 of run 123", "alice", 1)
                await say(h, "@asap apply 2 of run 123", "alice", 2)

        asyncio.run(go())
        pulls = apply_pulls(d)
        assert [p["head"] for p in pulls] == ["asap/123-p1"]
        assert "heads/asap/123-p2" not in d.repos[REPO].refs
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
