"""Muon (Megatron --optimizer muon / dist_muon; Kimi K2's optimizer): one moment per parameter, and the Newton–Schulz
orthogonalization of every hidden weight matrix priced in the step.

Kimi K2's dimensions are the Hugging Face config of moonshotai/Kimi-K2 (hidden 7168, 61 layers with the first dense of
18432, 384 routed experts of 2048 top-8 plus one shared, 64 MLA heads with q / kv ranks 1536 / 512, vocabulary
163840), the model Megatron-Bridge's kimi_k2 recipe builds through AutoBridge and trains with distributed Muon
(src/megatron/bridge/recipes/kimi/h100/kimi_k2.py::_apply_kimi_k2_optimizer @ 4ab94dfad). Moonshot AI states 1.04T
parameters with 32B activated (Kimi K2 technical report, 2025).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.configs.detect import load_config
from bot.runs.record import ModelSpec, RunRecord
from knowledge import costmodel
from knowledge.cost_muon import _per_param
from knowledge.cost_settings import settings_from_config
from knowledge.meshsearch import Mesh

KIMI_K2 = dict(name="kimi-k2", vocab=163840, layers=61, d_model=7168, d_ff=2048, heads=64, experts=384,
               experts_per_token=8, shared_experts=1, dense_layers=1, dense_d_ff=18432, mlp_matrices=3,
               q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128)
MESH = Mesh(ici={"expert": 64}, dcn={"pipeline": 4})


def _kimi(tmp_path: Path, optimizer: str) -> RunRecord:
    (tmp_path / "train.sh").write_text(
        "torchrun --nproc-per-node 4 pretrain_gpt.py --tensor-model-parallel-size 1 --pipeline-model-parallel-size 4 "
        f"--expert-model-parallel-size 64 --micro-batch-size 2 --global-batch-size 4096 --optimizer {optimizer} "
        "--bf16 --fp8-format e4m3\n")
    return RunRecord(id="k2", chip="gb300", num_chips=256, num_slices=4, framework="megatron",
                     model=ModelSpec(**KIMI_K2), training={"global_batch": 4096, "seq_len": 4096, "micro_batch": 2},
                     config=str(tmp_path / "train.sh"))


def _predict(run: RunRecord) -> costmodel.Prediction:
    return costmodel.predict(run, MESH, settings=settings_from_config(load_config(Path(run.config or ""))))


def test_kimi_k2_counts_its_published_size() -> None:
    m = ModelSpec(**KIMI_K2)
    assert 1.00e12 < m.derived_params() < 1.05e12 and 32.0e9 < m.active_params() < 33.5e9


def test_newton_schulz_flops_per_parameter_follow_the_iteration() -> None:
    # one iteration on an m x n matrix (m <= n): X Xt (2 m^2 n), the m x m polynomial (2 m^3), its product with X
    # (2 m^2 n); five iterations, per parameter (m n): 5 (4 m + 2 m^2 / n), whichever way the matrix is stored
    assert _per_param(2048, 7168) == pytest.approx(5 * (4 * 2048 + 2 * 2048**2 / 7168))
    assert _per_param(7168, 2048) == _per_param(2048, 7168)


def test_dist_muon_holds_one_moment_and_prices_its_orthogonalization(tmp_path: Path) -> None:
    adam = _predict(_kimi(tmp_path, "adam"))
    muon = _predict(_kimi(tmp_path, "dist_muon"))
    # fp32 master + one fp32 momentum (8 B) instead of master + two Adam moments (12 B)
    assert muon.memory_breakdown_bytes["optimizer"] == pytest.approx(adam.memory_breakdown_bytes["optimizer"] * 8 / 12)
    # ~49 PFLOP of Newton-Schulz per step over 256 GPUs: a fraction of a second, named in the breakdown
    step = muon.breakdown_ms["optimizer_step"]
    assert 50 < step < 1000 and "optimizer_step" not in adam.breakdown_ms
    assert muon.step_time_ms == pytest.approx(adam.step_time_ms + step, rel=1e-6)
    assert any("Muon (config: optimizer dist_muon)" in a for a in muon.assumptions)


def test_plain_muon_repeats_the_work_each_replica_holds(tmp_path: Path) -> None:
    spread = _predict(_kimi(tmp_path, "dist_muon")).breakdown_ms["optimizer_step"]
    repeated = _predict(_kimi(tmp_path, "muon")).breakdown_ms["optimizer_step"]
    # the dense weights are replicated over the 64 expert ranks: without the layer-wise distribution each repeats them
    assert repeated > 1.2 * spread
