"""The cross-entropy kernel of a PyTorch trainer decides memory for small models with large vocabularies.

MosaicML's llm-foundry trained MPT-125M (d_model 768, 12 layers, vocabulary 50,368) at 26 sequences of 2,048 tokens
per GPU on A100 40GB (scripts/train/benchmarking/README.md @ 495218376, table "A100 40GB", row 125m / 2048 / 8 GPUs:
136,334 tokens/s per GPU). Its logits are 26 x 2,048 x 50,368 = 2.7e9 elements per GPU: 32 GB at eager PyTorch's
12 bytes per logit (bf16 logits, fp32 copy, log-softmax and their gradients), 11 GB at a fused kernel's 4 (MPT's
default loss_fn fused_crossentropy, flash-attn's CrossEntropyLoss). A plain mesh file that does not say which one
the trainer runs is uncertainty, not the eager worst case: before this, ASAP called 72 of llm-foundry's 210
FULL_SHARD rows (all of which ran) out of memory.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from bot.proposals.critic import critique
from bot.runs.store import LocalRunStore
from knowledge import costmodel
from knowledge.cost_settings import settings_for_run

MPT_125M = {"name": "mpt-125m", "layers": 12, "d_model": 768, "d_ff": 3072, "heads": 12, "kv_heads": 12,
            "head_dim": 64, "vocab": 50368, "mlp_matrices": 2, "tied_embeddings": True}


def _run(tmp_path: Path, fused: bool | None) -> object:
    folder = tmp_path / "runs" / "mpt"
    folder.mkdir(parents=True)
    mesh = "ici_mesh: {fsdp: 8}\nattention: flash\n"  # MPT's attn_impl: flash
    if fused is not None:
        mesh += f"cross_entropy_loss_fusion: {str(fused).lower()}\n"
    (folder / "mesh.yml").write_text(mesh)
    (folder / "run.yaml").write_text(yaml.safe_dump({
        "id": "mpt", "framework": "other", "chip": "a100-40gb", "num_chips": 8, "config": "mesh.yml", "profile": [],
        "model": MPT_125M,
        "training": {"global_batch": 624, "seq_len": 2048, "micro_batch": 26, "dtype": "bf16", "remat": "none"}}))
    return LocalRunStore(tmp_path / "runs").get("mpt")


def _memory_check(run: object):  # type: ignore[no-untyped-def]
    from bot.proposals.engine import baseline_mesh

    mesh, _ = baseline_mesh(run, None)  # type: ignore[arg-type]
    return next(c for c in critique(run, mesh, settings=settings_for_run(run)).checks if c.name == "memory"), mesh


def test_a_stated_fused_loss_fits_where_an_eager_one_does_not(tmp_path: Path) -> None:
    fused, eager = _run(tmp_path / "f", True), _run(tmp_path / "e", False)
    gb = {}
    for name, run in (("fused", fused), ("eager", eager)):
        check, mesh = _memory_check(run)
        pred = costmodel.predict(run.record, mesh, settings=settings_for_run(run))  # type: ignore[attr-defined]
        gb[name] = pred.memory_per_chip_bytes / 1e9
        if name == "fused":
            assert check.passed or not check.hard, check.reason  # it ran on a 40 GB A100
            assert any("cross-entropy fused" in a for a in pred.assumptions)
        else:
            assert not check.passed and check.hard, check.reason  # 12 bytes per logit cannot fit
    # the logits alone differ by 8 bytes x 2.7e9 elements (x the allocator's reserve)
    assert 20.0 < gb["eager"] - gb["fused"] < 35.0


def test_an_unstated_loss_is_named_not_assumed_eager(tmp_path: Path) -> None:
    check, _ = _memory_check(_run(tmp_path, None))
    assert check.hard is False or check.passed, check.reason
    assert "a fused cross-entropy kernel" in check.reason  # the warning names the setting that decides the fit
