"""Replies use the configured mention word (ASAP_GITHUB_MENTION), never a hard-coded "@asap": a team that
renamed the bot must be told commands it can actually type."""

from __future__ import annotations

import asyncio

from integrations.github.commands import parse_command
from tests.doubles.github_rest_double import GitHubRestDouble, WebhookHarness
from tests.doubles.github_rest_double import example_comment_event as comment_event  # octokit/webhooks examples

REPO = "acme/llm"
WORD = "infra-bot"


def test_parse_errors_show_the_configured_word():
    assert parse_command("apply", WORD).error == f"say which proposal, e.g. `@{WORD} apply 2`"
    assert parse_command("explain", WORD).error == f"say which proposal, e.g. `@{WORD} explain 2`"
    assert "@asap explain 2" in (parse_command("explain").error or "")  # the default word stays asap


def test_replies_name_the_configured_mention_word(tmp_path):
    with GitHubRestDouble() as d:
        d.add_repo(REPO, {"README.md": "hi\n"}, collaborators={"alice": "write"})
        d.commit(REPO, "f", {"README.md": "x\n"}, parent_branch="main")
        d.open_pull(REPO, "f")
        d.commit(REPO, "g", {"README.md": "y\n"}, parent_branch="main")
        d.open_pull(REPO, "g")  # a fresh thread with no run remembered

        async def go():
            async with WebhookHarness(d, tmp_path) as h:
                h.ctx.extras["github"].mention = WORD  # as ASAP_GITHUB_MENTION=infra-bot would set it
                texts = [(1, f"@{WORD} apply"), (1, f"@{WORD} explain 1 of run 311"),
                         (1, "@asap apply 1 of run 311"),  # the old word is no longer a mention: ignored
                         (2, f"@{WORD} what is slow here?")]
                for i, (number, text) in enumerate(texts, 1):
                    status, _ = await h.deliver("issue_comment", comment_event(REPO, number, text, comment_id=i))
                    assert status in (200, 202)
                await h.drain()

        asyncio.run(go())
        replies = [c["body"] for c in d.comments_on(REPO, 1)] + [c["body"] for c in d.comments_on(REPO, 2)]
        assert len(replies) == 3, replies
        apply_reply, explain_reply, which_run = replies
        assert f"`@{WORD} apply 2`" in apply_reply and "Nothing was changed" in apply_reply
        assert f"Apply it with `@{WORD} apply 1`" in explain_reply and "Proposal 1 for run 311" in explain_reply
        assert f"`@{WORD} why is run 123 slow?`" in which_run
        assert not any("@asap" in r for r in replies), replies
