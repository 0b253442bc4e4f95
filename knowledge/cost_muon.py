"""Muon's optimizer step: the Newton–Schulz orthogonalization of every hidden weight matrix's update.

Muon (Jordan et al. 2024; Moonshot AI's "Muon is Scalable for LLM Training", 2025, used for Kimi K2) replaces Adam's
update of each 2-D hidden weight with its momentum orthogonalized by five Newton–Schulz iterations. One iteration on an
m x n matrix (m <= n) is X·Xᵀ (2·m²·n FLOPs), a polynomial in that m x m product (2·m³) and its product with X (2·m²·n):
4·m²·n + 2·m³ FLOPs, that is params x (4·m + 2·m²/n). Embeddings, the output layer and norms stay on Adam inside it
(Megatron-Core's Muon), so they are left out here. Megatron-Core's ``dist_muon`` (LayerWiseDistributedOptimizer)
gives each data-parallel rank whole matrices to orthogonalize, so the work spreads over every chip; plain ``muon``
repeats it on every data-parallel replica. The iterations run in bf16 at the matmul rate, after the backward pass,
outside the pipeline schedule: priced as their own term of the step.

Attention matrices are counted at min(d_model, heads x head_dim) for m; multi-head latent attention's low-rank
projections are narrower, so there it is an upper bound.
"""

from __future__ import annotations

import numpy as np

from knowledge.cost_shapes import Shape

NS_STEPS = 5.0  # Newton–Schulz iterations per update (Muon's reference implementation and Megatron-Core's default)


def _per_param(m: float, n: float) -> float:
    """Newton–Schulz FLOPs per parameter of an m x n matrix, all iterations (m, n in either order)."""
    a, b = min(m, n), max(m, n)
    return NS_STEPS * (4.0 * a + 2.0 * a * a / max(b, 1.0)) if a > 0 else 0.0


def newton_schulz_flops(shape: Shape) -> tuple[float, float]:
    """FLOPs of one Muon step's orthogonalizations over the whole model: (dense weights, routed-expert weights)."""
    D, F = float(shape.d_model), float(shape.d_ff)
    dense = shape.n_attn * shape.attn_params * _per_param(D, float(shape.heads * shape.head_dim))
    dense += shape.dense_mlp_params * _per_param(D, float(shape.dense_d_ff or F) if shape.is_moe else F)
    if shape.mamba_layers:
        dense += shape.mamba_layers * D * float(shape.mamba_in_proj + shape.mamba_inner) * _per_param(
            D, float(shape.mamba_inner))
    expert = shape.params_expert * _per_param(float(shape.expert_width), F) if shape.is_moe else 0.0
    return float(dense), float(expert)


def muon_step_s(shape: Shape, chips: np.ndarray, dense_shards: np.ndarray, expert_shards: np.ndarray,
                peak_flops: float) -> np.ndarray:
    """Seconds per step each chip spends orthogonalizing (0 without Muon), at ``peak_flops``. ``dist_muon``
    spreads the model's matrices over every chip; plain ``muon`` leaves each chip the matrices it holds: the dense
    ones split ``dense_shards`` ways (tensor x pipeline x fsdp), the experts ``expert_shards`` ways."""
    if not shape.muon:
        return np.zeros_like(np.asarray(chips, dtype=np.float64))
    dense, expert = newton_schulz_flops(shape)
    per_chip = (dense + expert) / chips if shape.muon_distributed else dense / dense_shards + expert / expert_shards
    return per_chip / peak_flops
