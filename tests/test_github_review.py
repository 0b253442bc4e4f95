"""PR auto-review against the REST double: one comment per PR edited in place, a commit status per push."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from integrations.github.review import REVIEW_MARKER
from tests.doubles.github_rest_double import GitHubRestDouble, WebhookHarness, pull_event

REPO = "acme/llm"
RUNS = Path(__file__).resolve().parents[1] / "examples" / "runs"
CFG_311 = (RUNS / "311" / "maxtext.yml").read_text()  # communication-bound, fsdp=16 tensor=16 on 256 chips
LINKED = 'runs:\n  configs/llama.yml: "311"\n'


def mesh(text: str, fsdp: int, tensor: int) -> str:
    out = text.replace("ici_fsdp_parallelism: 16", f"ici_fsdp_parallelism: {fsdp}")
    return out.replace("ici_tensor_parallelism: 16", f"ici_tensor_parallelism: {tensor}")


def setup_repo(d: GitHubRestDouble, settings: str | None = LINKED) -> None:
    files = {"configs/llama.yml": CFG_311, "README.md": "hi\n"}
    if settings is not None:
        files[".asap.yml"] = settings
    d.add_repo(REPO, files, collaborators={"alice": "write"})


async def _push_and_review(h: WebhookHarness, d: GitHubRestDouble, files: dict[str, str], action: str,
                           number: int | None = None, body: str = "") -> tuple[int, str]:
    sha = d.commit(REPO, "change", files, parent_branch="main" if number is None else "change")
    if number is None:
        number = d.open_pull(REPO, "change", title="mesh change", body=body)
    status, _ = await h.deliver("pull_request", pull_event(REPO, number, sha, action))
    assert status == 202
    await h.drain()
    return number, sha


def review_comments(d: GitHubRestDouble, number: int) -> list[dict]:
    return [c for c in d.comments_on(REPO, number) if REVIEW_MARKER in c["body"]]


def test_one_review_comment_updated_in_place_and_a_status_per_push(tmp_path):
    with GitHubRestDouble() as d:
        setup_repo(d)

        async def go():
            async with WebhookHarness(d, tmp_path) as h:
                n, sha1 = await _push_and_review(h, d, {"configs/llama.yml": mesh(CFG_311, 8, 32)}, "opened")
                first = [dict(c) for c in review_comments(d, n)]
                _, sha2 = await _push_and_review(h, d, {"configs/llama.yml": mesh(CFG_311, 32, 8)}, "synchronize", n)
                return n, sha1, sha2, first

        n, sha1, sha2, first = asyncio.run(go())
        assert len(first) == 1
        body1 = first[0]["body"]
        assert "tensor=32" in body1 and "communication" in body1
        # More tensor parallelism on a communication-bound run is a rule of thumb: a warning weighed against the
        # prediction, not a failure; tensor=32 not dividing 40 heads was already so with tensor=16: pre-existing.
        assert "⚠️ **diagnosis**" in body1 and "model-parallel degree" in body1
        assert "🔸 **divisibility**" in body1 and "already so before this change" in body1
        assert "❌" not in body1
        final = review_comments(d, n)
        assert len(final) == 1 and final[0]["edits"] >= 1 and final[0]["body"] != body1
        assert "tensor=8" in final[0]["body"] and sha2[:10] in final[0]["body"]
        st = {(s["sha"], s["state"]) for s in d.repos[REPO].statuses if s["context"] == "asap/sharding-review"}
        assert (sha1, "success") in st and (sha2, "success") in st


def test_invalid_mesh_is_a_problem_and_fails_the_status(tmp_path):
    with GitHubRestDouble() as d:
        setup_repo(d)

        async def go():
            async with WebhookHarness(d, tmp_path) as h:
                return await _push_and_review(h, d, {"configs/llama.yml": mesh(CFG_311, 16, 3)}, "opened")

        n, sha = asyncio.run(go())
        body = review_comments(d, n)[0]["body"]
        assert "product" in body and "❌" in body
        assert [s["state"] for s in d.repos[REPO].statuses if s["sha"] == sha] == ["failure"]


def test_settings_come_from_the_default_branch_not_the_pr(tmp_path):
    with GitHubRestDouble() as d:
        setup_repo(d)
        off = "review:\n  enabled: false\n"

        async def go():
            async with WebhookHarness(d, tmp_path) as h:
                return await _push_and_review(h, d, {".asap.yml": off, "configs/llama.yml": mesh(CFG_311, 16, 3)}, "opened")

        n, sha = asyncio.run(go())
        assert len(review_comments(d, n)) == 1  # the PR could not switch its own review off
        assert [s["state"] for s in d.repos[REPO].statuses if s["sha"] == sha] == ["failure"]


def test_run_named_in_the_pr_body_calibrates_the_review(tmp_path):
    with GitHubRestDouble() as d:
        setup_repo(d, settings=None)

        async def go():
            async with WebhookHarness(d, tmp_path) as h:
                return await _push_and_review(h, d, {"configs/llama.yml": mesh(CFG_311, 32, 8)}, "opened",
                                              body="Less TP.\n\nrun: 311\n")

        n, _ = asyncio.run(go())
        body = review_comments(d, n)[0]["body"]
        assert "run `311`" in body and "ms/step" in body


def test_pr_without_sharding_configs_gets_no_comment(tmp_path):
    with GitHubRestDouble() as d:
        setup_repo(d)

        async def go():
            async with WebhookHarness(d, tmp_path) as h:
                return await _push_and_review(h, d, {"README.md": "docs\n", "other.yml": "name: ci\n"}, "opened")

        n, _ = asyncio.run(go())
        assert d.comments_on(REPO, n) == [] and d.repos[REPO].statuses == []


def test_invalid_settings_file_is_reported_with_its_field(tmp_path):
    with GitHubRestDouble() as d:
        setup_repo(d, settings="reviw:\n  enabled: false\n")

        async def go():
            async with WebhookHarness(d, tmp_path) as h:
                return await _push_and_review(h, d, {"configs/llama.yml": mesh(CFG_311, 32, 8)}, "opened")

        n, sha = asyncio.run(go())
        body = review_comments(d, n)[0]["body"]
        assert ".asap.yml" in body and "reviw" in body
        assert [s["state"] for s in d.repos[REPO].statuses if s["sha"] == sha] == ["error"]


@pytest.mark.parametrize("action", ["closed", "edited", "labeled"])
def test_other_pull_request_actions_are_ignored(tmp_path, action):
    with GitHubRestDouble() as d:
        setup_repo(d)

        async def go():
            async with WebhookHarness(d, tmp_path) as h:
                return await h.deliver("pull_request", pull_event(REPO, 1, "a" * 40, action))

        status, body = asyncio.run(go())
        assert status == 200 and "not reviewed" in body["ignored"]
