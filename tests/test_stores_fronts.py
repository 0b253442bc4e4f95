"""Slack and GitHub mentions find runs where the team keeps them: the same ``ASAP_RUNS`` stores as the CLI.

A run kept only in S3 (MaxText output layout, on a real moto server) is answered by name from a Slack
mention (signed request, worker, Slack Web API double) and from a GitHub PR comment (published
octokit/webhooks payload, REST double).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from store_servers import write_maxtext_output

from tests.doubles.github_rest_double import GitHubRestDouble, WebhookHarness, example_comment_event
from tests.doubles.slack_double import SlackRig, mention_body

pytestmark = pytest.mark.slow
REPO = "acme/llm"


@pytest.fixture
def s3_runs(moto_s3: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    import boto3
    import s3fs

    for k, v in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                 "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL_S3": moto_s3}.items():
        monkeypatch.setenv(k, v)
    s3fs.S3FileSystem.clear_instance_cache()
    bucket = f"fronts-{os.urandom(3).hex()}"
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket=bucket)
    local = write_maxtext_output(tmp_path / "src" / "llama-cpu")
    for path in local.rglob("*"):
        if path.is_file():
            s3.upload_file(str(path), bucket, f"maxtext/llama-cpu/{path.relative_to(local).as_posix()}")
    url = f"s3://{bucket}/maxtext"
    return url


def test_slack_mention_answers_a_run_kept_in_s3(s3_runs: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async def go() -> str:
        async with SlackRig(tmp_path, monkeypatch) as rig:
            monkeypatch.setenv("ASAP_RUNS", s3_runs)
            status, _ = await rig.post_event(mention_body("<@UASAPBOT> why is job llama-cpu slow?", event_id="EvS3"))
            assert status == 200
            await rig.idle()
            assert rig.double.violations == []
            root = "1710000000.000100"
            msgs = [m for m in rig.double.thread("C0DATA", root) if m.ts != root]
            return "\n".join(str(m.blocks) + (m.text or "") for m in msgs)

    text = asyncio.run(go())
    assert "llama-cpu" in text and "communication" in text.lower()
    assert "no run" not in text.lower()


def test_github_comment_answers_a_run_kept_in_s3(s3_runs: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASAP_RUNS", s3_runs)
    with GitHubRestDouble() as d:
        d.add_repo(REPO, {"README.md": "hi\n"}, collaborators={"alice": "write"})
        d.commit(REPO, "feature", {"README.md": "hello\n"}, parent_branch="main")
        d.open_pull(REPO, "feature", title="docs")

        async def go() -> None:
            async with WebhookHarness(d, tmp_path) as h:
                await h.deliver("issue_comment", example_comment_event(REPO, 1, "@asap why is run llama-cpu slow?", comment_id=7))
                await h.drain()

        asyncio.run(go())
        bodies = [c["body"] for c in d.comments_on(REPO, 1)]
    joined = "\n".join(bodies)
    assert "llama-cpu" in joined and "communication" in joined.lower(), joined[:500]
