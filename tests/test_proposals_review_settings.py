"""asap review prices a PR that changes training settings (micro-batch, remat, per-device batch) with them."""

from __future__ import annotations

from pathlib import Path

from bot.proposals.review import review
from bot.runs.store import LocalRunStore

RUNS = Path(__file__).resolve().parents[1] / "examples" / "runs"


def test_larger_micro_batch_on_the_hbm_bound_run_is_predicted_faster(tmp_path: Path) -> None:
    run = LocalRunStore(RUNS).get("204")
    old = RUNS / "204" / "megatron.yaml"
    new = tmp_path / "megatron.yaml"
    new.write_text(old.read_text().replace("micro_batch_size: 1", "micro_batch_size: 4"))
    result = review(old, new, run)
    assert result.ok and not result.mesh_changed
    assert result.change is not None and result.change.step_time_percent < -10  # type: ignore[operator]
    assert result.change.tokens_per_step_factor == 1.0
    assert result.new.predicted.memory_per_chip_bytes > result.old.predicted.memory_per_chip_bytes  # type: ignore[union-attr]


def test_dropping_remat_and_doubling_the_batch_is_caught_out_of_memory(tmp_path: Path) -> None:
    run = LocalRunStore(RUNS).get("123")
    old = RUNS / "123" / "maxtext.yml"
    new = tmp_path / "maxtext.yml"
    new.write_text(old.read_text().replace('remat_policy: "full"', 'remat_policy: "none"')
                   .replace("per_device_batch_size: 2", "per_device_batch_size: 4"))
    result = review(old, new, run)
    assert not result.ok
    assert any(f.check == "memory" and f.severity == "problem" for f in result.findings)
    # the global batch doubled: flagged, and time compared per token
    assert result.change is not None and result.change.tokens_per_step_factor == 2.0
    assert any(f.check == "batch" and "global batch" in f.message for f in result.findings)
