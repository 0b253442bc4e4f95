"""An edit keeps a value's comment; when that comment names the old value, the reviewer is told to fix it.

Real material: torchtitan's ``llama3_70b.toml`` (pytorch/torchtitan, BSD-3-Clause; in the eval case
``torchtitan-asynctp-h100-llama3-70b-bf16-vanilla``, source in its expected.yaml) writes
``tensor_parallel_degree = 8  # 8-way TP``. Every proposal that changes the TP degree keeps that comment, byte for
byte, so the answer and the "apply" pull request must say the comment is now wrong.
"""

from __future__ import annotations

from pathlib import Path

from bot.analysis.analyze import analyze_run
from bot.configs.detect import load_run_config
from bot.configs.edit import config_diff_notes
from bot.configs.mesh import Mesh
from bot.configs.stale_comments import stale_comment_notes
from bot.proposals.engine import propose
from bot.runs.store import LocalRunStore

EVAL = Path(__file__).resolve().parents[1] / "examples" / "eval"
VANILLA = "torchtitan-asynctp-h100-llama3-70b-bf16-vanilla"


def test_a_kept_comment_naming_the_old_value_is_named_with_its_line() -> None:
    old = "[parallelism]\ndata_parallel_shard_degree = -1\ntensor_parallel_degree = 8  # 8-way TP\n"
    new = "[parallelism]\ndata_parallel_shard_degree = -1\ntensor_parallel_degree = 2  # 8-way TP\n"
    [note] = stale_comment_notes(old, new, "llama3_70b.toml")
    assert "llama3_70b.toml line 3" in note and "'# 8-way TP'" in note and "old value 8" in note


def test_comments_that_do_not_name_the_old_value_are_left_alone() -> None:
    # a comment about something else, a number only in the new value, a value without a comment, an added line
    old = "ici_tensor_parallelism: 4  # keep inside a host\nici_fsdp_parallelism: 16 # 2 slices later\nx: 3\n"
    new = "ici_tensor_parallelism: 2  # keep inside a host\nici_fsdp_parallelism: 32 # 2 slices later\nx: 6\ny: 1\n"
    assert stale_comment_notes(old, new, "a.yml") == []
    # the same block with a stale comment: still found when the edit adds a key after it
    [note] = stale_comment_notes(old.replace("# 2 slices", "# 16-way"), new.replace("# 2 slices", "# 16-way"), "a.yml")
    assert "a.yml line 2" in note and "old value 16" in note
    # the number must be gone from the line's code: 8 -> 8 stays true (only the other value changed)
    old2 = "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 4  # TP 8, PP 4\n"
    new2 = "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 2  # TP 8, PP 4\n"
    [note] = stale_comment_notes(old2, new2, "run.sh")
    assert "old value 4" in note and "old value 8" not in note


def test_a_hash_inside_the_changed_value_is_not_a_comment() -> None:
    old = 'mesh: "8#x"  \n'
    new = 'mesh: "2#x"  \n'
    assert stale_comment_notes(old, new, "a.yml") == []


def test_the_edit_reports_it_and_leaves_the_persons_comment_as_written() -> None:
    run = LocalRunStore(EVAL).get(VANILLA)
    cfg = load_run_config(run)
    mesh = Mesh(ici={"tensor": 2, "sequence": 4}, dcn={"fsdp": 32})
    diff, notes = config_diff_notes(cfg, mesh, {}, "llama3_70b.toml")
    assert "+tensor_parallel_degree = 2  # 8-way TP" in diff  # byte-preserving: the comment is not rewritten
    assert len(notes) == 1 and "'# 8-way TP'" in notes[0] and "old value 8" in notes[0]


def test_the_answer_tells_the_reviewer_which_comment_went_stale() -> None:
    run = LocalRunStore(EVAL).get(VANILLA)
    pset = propose(run, analyze_run(run))
    changed_tp = [p for p in pset.proposals if "-tensor_parallel_degree = 8" in (p.diff or "")]
    assert changed_tp, "the vanilla-TP row's answer changes the TP degree"
    for p in changed_tp:
        assert any("'# 8-way TP'" in t and "update the comment by hand" in t for t in p.tradeoffs)
    untouched = [p for p in pset.proposals if p.diff and "-tensor_parallel_degree" not in p.diff]
    assert all(not any("8-way TP" in t for t in p.tradeoffs) for p in untouched)
