"""PR auto-review against the REST double: one comment per PR edited in place, a commit status per push."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from integrations.github.review import REVIEW_MARKER
from tests.doubles.github_rest_double import GitHubRestDouble, WebhookHarness, example_pull_event, pull_event

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
    status, _ = await h.deliver("pull_request", example_pull_event(REPO, number, sha, action))
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


# ------------------------------------------------------------------------ issue 16, items 11 and 12
NEW = "configs/new-13b.yml"


def _new_file_review(d: GitHubRestDouble, tmp_path, settings: str | None, text: str) -> tuple[str, list[str]]:
    setup_repo(d, settings=settings)

    async def go():
        async with WebhookHarness(d, tmp_path) as h:
            sha = d.commit(REPO, "change", {NEW: text}, parent_branch="main")
            n = d.open_pull(REPO, "change", title="a new config")
            status, _ = await h.deliver("pull_request", example_pull_event(REPO, n, sha, "opened"))
            assert status == 202
            await h.drain()
            return n, sha

    n, sha = asyncio.run(go())
    body = review_comments(d, n)[0]["body"]
    return body, [s["state"] for s in d.repos[REPO].statuses if s["sha"] == sha]


def test_new_config_without_run_or_declared_chips_is_not_a_green_review(tmp_path):
    """fsdp=16 tensor=8 multiplies to 128: checked against itself it would always pass."""
    with GitHubRestDouble() as d:
        body, states = _new_file_review(d, tmp_path, None, mesh(CFG_311, 16, 8))
    assert states == ["pending"]  # commit statuses have no neutral state; never "success"
    assert "chip count unknown" in body and "❔" in body and "chips:" in body
    assert "product" not in body.split("chip count unknown", 1)[0]  # no product check is claimed


def test_new_config_is_checked_against_the_chips_declared_in_asap_yml(tmp_path):
    with GitHubRestDouble() as d:
        body, states = _new_file_review(d, tmp_path, f"chips:\n  {NEW}: 256\n", mesh(CFG_311, 16, 8))
    assert states == ["failure"]
    assert "256 chips declared in .asap.yml" in body and "128" in body
    assert "/tmp" not in body and "asap-review" not in body and "/new/" not in body  # repository paths only
    assert f"`{NEW}`" in body
    with GitHubRestDouble() as d:
        body, states = _new_file_review(d, tmp_path, 'chips:\n  "configs/*.yml": {chips: 128}\n', mesh(CFG_311, 16, 8))
    assert states == ["success"] and "128 chips declared in .asap.yml" in body


def test_review_findings_name_repository_paths_only(tmp_path):
    with GitHubRestDouble() as d:
        setup_repo(d)

        async def go():
            async with WebhookHarness(d, tmp_path) as h:
                return await _push_and_review(h, d, {"configs/llama.yml": mesh(CFG_311, 16, 3)}, "opened")

        n, _ = asyncio.run(go())
        body = review_comments(d, n)[0]["body"]
    assert "product" in body and "configs/llama.yml" in body
    assert "/tmp" not in body and "asap-review" not in body and "examples/runs" not in body


def test_a_review_comment_from_an_older_asap_is_updated_not_duplicated(tmp_path):
    with GitHubRestDouble() as d:
        setup_repo(d)
        d.commit(REPO, "change", {"configs/llama.yml": mesh(CFG_311, 32, 8)}, parent_branch="main")
        n = d.open_pull(REPO, "change", title="mesh change")
        old = d.add_comment(REPO, n, "<!-- asap:review -->\n### ASAP sharding review (old)", user="asap-bot")
        fake = d.add_comment(REPO, n, "<!-- asap:review -->\nnot the bot", user="mallory")

        async def go():
            async with WebhookHarness(d, tmp_path) as h:
                await _push_and_review(h, d, {"configs/llama.yml": mesh(CFG_311, 8, 32)}, "synchronize", n)

        asyncio.run(go())
        comments = d.comments_on(REPO, n)
        assert len(comments) == 2 and d.repos[REPO].comments[fake]["body"].endswith("not the bot")
        assert d.repos[REPO].comments[old]["body"].startswith("<!-- asap:review=") and "tensor=32" in d.repos[REPO].comments[old]["body"]
