"""A run.yaml that leaves `framework` out is priced as the framework its config is written for."""

from __future__ import annotations

from pathlib import Path

from test_proposals_support import make_report, make_run, maxtext_config

from bot.proposals.engine import baseline_mesh, propose


def test_maxtext_config_without_framework_is_not_charged_a_pytorch_allocator_reserve(tmp_path: Path) -> None:
    # The MaxText YAML is what ran: an XLA program has no caching allocator, so no 'allocator_reserve' term
    # (the torchtitan-fitted reserve belongs to eager PyTorch runs) may appear in its memory breakdown.
    text = maxtext_config({"fsdp": 64}, per_device_batch=4).replace("remat_policy: full", "remat_policy: none")
    run = make_run(tmp_path, num_chips=64, ici={"fsdp": 64}, step_ms=2500, config_text=text,
                   training={"global_batch": 256, "seq_len": 4096, "remat": "none"})
    assert run.record.framework == "other"
    base, _ = baseline_mesh(run, None)
    ps = propose(run, make_report(run, base, "compute", step_ms=2500, collective_pct=3))
    assert ps.verdict != "current_fails"
    assert "allocator_reserve" not in ps.summary + " ".join(str(p.model_dump()) for p in ps.proposals)
