"""The PR review's verdict as a GitHub check run (REST double, GitHub App auth), and its commit-status fallback."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from bot.errors import AsapError
from integrations.codehost.github import GitHubAuthSettings, GitHubClients
from integrations.github.checkrun import CheckReport, publish_verdict
from integrations.github.config import GitHubIntegration
from tests.doubles.github_rest_double import GitHubRestDouble, WebhookHarness, example_pull_event

REPO = "acme/llm"
CFG = "configs/llama.yml"
CFG_311 = (Path(__file__).resolve().parents[1] / "examples" / "runs" / "311" / "maxtext.yml").read_text()
LINKED = f'runs:\n  {CFG}: "311"\n'


def mesh(data: int, fsdp: int, tensor: int) -> str:
    """Run 311's MaxText config (fsdp=16 tensor=16 on 256 chips) with another ici mesh."""
    return (CFG_311.replace("ici_data_parallelism: 1", f"ici_data_parallelism: {data}")
            .replace("ici_fsdp_parallelism: 16", f"ici_fsdp_parallelism: {fsdp}")
            .replace("ici_tensor_parallelism: 16", f"ici_tensor_parallelism: {tensor}"))


def line_of(text: str, key: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if line.startswith(key + ":"))


@pytest.fixture(scope="module")
def app_key() -> tuple[str, str]:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    priv = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()
    pub = key.public_key().public_bytes(serialization.Encoding.PEM,
                                        serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    return priv, pub


def app_auth(d: GitHubRestDouble, app_key: tuple[str, str]) -> GitHubAuthSettings:
    d.enable_app(42, app_key[1], {1: REPO}, slug="asap")  # installation 1: the published pull_request example's
    return GitHubAuthSettings(api_url=d.base_url, app_id="42", private_key=app_key[0], bot_login="asap[bot]", retry=False)


def review_pushes(d: GitHubRestDouble, tmp_path: Path, texts: list[str], auth: GitHubAuthSettings | None = None,
                  **kw: object) -> list[str]:
    """Open a PR changing CFG to texts[0], push the others; one review per push. Returns the head shas."""
    d.add_repo(REPO, {CFG: CFG_311, ".asap.yml": LINKED}, collaborators={"alice": "write"})

    async def go() -> list[str]:
        shas: list[str] = []
        async with WebhookHarness(d, tmp_path, auth=auth, bot_login=auth.bot_login if auth else "asap-bot", **kw) as h:
            for i, text in enumerate(texts):
                sha = d.commit(REPO, "change", {CFG: text}, parent_branch="main" if i == 0 else "change")
                if i == 0:
                    d.open_pull(REPO, "change", title="mesh change")
                status, _ = await h.deliver("pull_request", example_pull_event(REPO, 1, sha, "opened" if i == 0 else "synchronize"))
                assert status == 202
                await h.drain()
                shas.append(sha)
        return shas

    return asyncio.run(go())


def runs_on(d: GitHubRestDouble, sha: str) -> list[dict]:
    return [r for r in d.repos[REPO].check_runs.values() if r["head_sha"] == sha]


def test_a_pr_keeping_only_a_pre_existing_problem_gets_a_neutral_check_run(tmp_path, app_key):
    with GitHubRestDouble() as d:
        # data=2 fsdp=8 tensor=16: tensor=16 still does not divide the 40 heads, as on the base branch
        [sha] = review_pushes(d, tmp_path, [mesh(2, 8, 16)], app_auth(d, app_key))
        [run] = runs_on(d, sha)
        assert d.repos[REPO].statuses == []  # the check run replaces the commit status
    assert run["name"] == "asap/sharding-review" and run["status"] == "completed"
    assert run["conclusion"] == "neutral" and run["app"]["slug"] == "asap"
    summary = run["output"]["summary"]
    assert summary.startswith("**neutral**") and "pre-existing" in summary and "does not introduce" in summary
    assert "configs/llama.yml" in summary and "tensor=16 does not divide heads=40" in run["output"]["text"]
    [note] = run["annotations"]
    assert note["annotation_level"] == "warning" and note["title"] == "divisibility (pre-existing)"
    assert note["path"] == CFG and note["start_line"] == line_of(CFG_311, "ici_data_parallelism")


def test_an_out_of_memory_mesh_fails_with_an_annotation_on_the_changed_line(tmp_path, app_key):
    new = mesh(16, 1, 16)  # data 1->16, fsdp 16->1: no more sharded weights/optimizer state: out of memory
    with GitHubRestDouble() as d:
        [sha] = review_pushes(d, tmp_path, [new], app_auth(d, app_key))
        [run] = runs_on(d, sha)
    assert run["conclusion"] == "failure" and run["output"]["title"].startswith("Problems introduced")
    failures = [a for a in run["annotations"] if a["annotation_level"] == "failure"]
    assert [a["title"] for a in failures] == ["memory (problem)"] and "out of memory" in failures[0]["message"]
    assert failures[0]["path"] == CFG
    assert failures[0]["start_line"] == line_of(new, "ici_data_parallelism")
    assert failures[0]["end_line"] == line_of(new, "ici_fsdp_parallelism")  # the two lines the change sets
    assert "/tmp" not in str(run) and "asap-review" not in str(run)  # repository paths only


def test_a_refused_check_run_falls_back_to_a_commit_status_exactly_once(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="asap.github")
    with GitHubRestDouble() as d:  # the harness's default credentials: a token, not a GitHub App
        shas = review_pushes(d, tmp_path, [mesh(16, 1, 16), mesh(2, 8, 16)])
        posts = [r for r in d.requests if r[0] == "POST" and r[1].endswith("/check-runs")]
        statuses = [(s["sha"], s["state"], s["context"]) for s in d.repos[REPO].statuses]
        assert d.repos[REPO].check_runs == {}
    assert len(posts) == 1  # refused once, then remembered for the repository
    assert statuses == [(shas[0], "failure", "asap/sharding-review"), (shas[1], "success", "asap/sharding-review")]
    refusals = [r.getMessage() for r in caplog.records if "refused check runs" in r.getMessage()]
    assert len(refusals) == 1 and "You must authenticate via a GitHub App" in refusals[0]


def test_status_mode_never_asks_for_a_check_run(tmp_path, app_key):
    with GitHubRestDouble() as d:
        [sha] = review_pushes(d, tmp_path, [mesh(16, 1, 16)], app_auth(d, app_key), review_report="status")
        assert not [r for r in d.requests if r[1].endswith("/check-runs")]
        assert [s["state"] for s in d.repos[REPO].statuses if s["sha"] == sha] == ["failure"]


def test_a_review_crash_is_a_neutral_check_run_never_a_failure(tmp_path, app_key, monkeypatch):
    import integrations.github.review as review_mod

    def crash(*_a: object, **_k: object) -> None:
        raise RuntimeError("the review exploded")

    monkeypatch.setattr(review_mod, "review_pull", crash)
    with GitHubRestDouble() as d:
        [sha] = review_pushes(d, tmp_path, [mesh(16, 1, 16)], app_auth(d, app_key))
        [run] = runs_on(d, sha)
        comments = d.comments_on(REPO, 1)
    assert run["conclusion"] == "neutral" and "could not review" in run["output"]["summary"]
    assert run["output"]["title"].startswith("Could not review")
    assert len(comments) == 1 and "could not run" in comments[0]["body"]


def test_annotations_go_50_per_request_and_long_text_is_cut(app_key):
    report = CheckReport(conclusion="failure", title="Problems introduced", summary="x" * 70000,
                         text="y" * 100, annotations=[{"path": CFG, "start_line": i, "end_line": i,
                                                       "annotation_level": "failure", "message": f"m{i}"}
                                                      for i in range(1, 121)])
    with GitHubRestDouble() as d:
        d.add_repo(REPO, {CFG: CFG_311})
        auth = app_auth(d, app_key)
        host = GitHubClients(auth).host(REPO)
        gi = GitHubIntegration(webhook_secret=b"s", auth=auth)
        assert publish_verdict(host, gi, name="asap/sharding-review", head_sha="a" * 40, report=report,
                               state="failure", description="d") == "checks"
        [run] = d.repos[REPO].check_runs.values()
        writes = [m for m, p, _ in d.requests if "/check-runs" in p]
    assert writes == ["POST", "PATCH", "PATCH"]  # 50 + 50 + 20
    assert [a["message"] for a in run["annotations"]] == [f"m{i}" for i in range(1, 121)]
    assert len(run["output"]["summary"]) == 65535 and "cut to GitHub's check-run limit" in run["output"]["summary"]


def test_the_report_setting_is_read_from_the_environment():
    env = {"GITHUB_WEBHOOK_SECRET": "s"}
    assert GitHubIntegration.from_env(env).review_report == "checks"
    assert GitHubIntegration.from_env({**env, "ASAP_GITHUB_REVIEW_REPORT": "status"}).review_report == "status"
    with pytest.raises(AsapError) as exc:
        GitHubIntegration.from_env({**env, "ASAP_GITHUB_REVIEW_REPORT": "both"})
    assert exc.value.field == "ASAP_GITHUB_REVIEW_REPORT" and "'both'" in exc.value.message


def test_the_review_comment_names_the_check_runs_conclusion(tmp_path, app_key):
    with GitHubRestDouble() as d:
        review_pushes(d, tmp_path, [mesh(2, 8, 16)], app_auth(d, app_key))
        [comment] = d.comments_on(REPO, 1)
    last = comment["body"].strip().splitlines()[-1]
    assert last.startswith("<sub>Check `asap/sharding-review`: neutral") and "pre-existing" in last
