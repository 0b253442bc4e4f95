"""GitHub auto-review of changed launch scripts (issue 13): a script matched by .asap.yml is reviewed like a
YAML config, and a change Megatron would refuse to start fails the commit status with Megatron's rule."""

from __future__ import annotations

import asyncio

from integrations.github.review import REVIEW_MARKER
from tests.doubles.github_rest_double import GitHubRestDouble, WebhookHarness, pull_event

REPO = "acme/llm"
SCRIPT = """#!/bin/bash
GPUS_PER_NODE=8
NUM_NODES=2
TP=2
ARGS=(
    --tensor-model-parallel-size ${TP}
    --micro-batch-size 1
    --global-batch-size 64
)
torchrun --nproc_per_node $GPUS_PER_NODE --nnodes $NUM_NODES pretrain_gpt.py "${ARGS[@]}"
"""
HELPER = "#!/bin/bash\nset -e\necho 'not a training launch'\n"


def _review(tmp_path, files: dict[str, str], settings: str) -> tuple[str, list[str]]:
    with GitHubRestDouble() as d:
        d.add_repo(REPO, {"scripts/train.sh": SCRIPT, "scripts/util.sh": HELPER, ".asap.yml": settings},
                   collaborators={"alice": "write"})

        async def go() -> tuple[int, str]:
            async with WebhookHarness(d, tmp_path) as h:
                sha = d.commit(REPO, "change", files, parent_branch="main")
                number = d.open_pull(REPO, "change", title="launch change", body="")
                status, _ = await h.deliver("pull_request", pull_event(REPO, number, sha, "opened"))
                assert status == 202
                await h.drain()
                return number, sha

        number, sha = asyncio.run(go())
        bodies = [c["body"] for c in d.comments_on(REPO, number) if REVIEW_MARKER in c["body"]]
        states = [s["state"] for s in d.repos[REPO].statuses if s["sha"] == sha]
        return (bodies[0] if bodies else ""), states


def test_changed_launch_script_megatron_would_refuse_fails_the_status(tmp_path):
    body, states = _review(tmp_path, {"scripts/train.sh": SCRIPT.replace("--micro-batch-size 1", "--micro-batch-size 3")},
                           'configs: ["scripts/*.sh"]\n')
    body = body.replace("\\_", "_")  # the comment escapes Markdown
    assert "scripts/train.sh" in body
    assert "global_batch_size=64 is not a multiple of micro_batch_size=3" in body and "refuses to start" in body
    assert states == ["failure"]


def test_script_without_a_launch_is_not_reviewed(tmp_path):
    body, _ = _review(tmp_path, {"scripts/util.sh": HELPER + "echo more\n"}, 'configs: ["scripts/*.sh"]\n')
    assert "util.sh" not in body
