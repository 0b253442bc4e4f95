"""Per-module precision (Megatron ``--te-precision-config-file``): which linear layers run in which precision, and
what that does to their matmul time.

A recipe file (bot.configs.precision_recipe) picks a precision per module path with ordered glob matchers. ASAP
prices linear layers by class, so each class is given the module paths Megatron-Core builds for it
(``decoder.layers.<i>.self_attention.linear_qkv``, ``...mlp.experts.linear_fc1``, ``...mixer.in_proj``, the MTP
modules under ``mtp.layers.<j>``) and the matchers are run over every layer's path: a class's share of layers at each
precision. Layer numbers are global (as with one pipeline stage); a pattern that names layer numbers is read that way.

Time: a class's matmuls run at its precision's peak (bf16, fp8 with MXFP8's dense kernel ratio, fp4), weighted by
parameters within each dense group (attention: QKV against the output projection; MLP: dense / shared-expert fc1 and
fc2, LatentMoE's projections; Mamba: in and out projections) and for the routed experts (fc1, fc2). The output layer
is not a Transformer Engine module and keeps its own rule (cost_shapes._lm_head_bf16).
"""

from __future__ import annotations

from typing import Any

from bot.configs.precision_recipe import BF16, Rule, precision_of

# class -> the module path suffix Megatron-Core gives it inside a layer (MLA's query / key-value projections stand in
# for linear_qkv: an MLA model has no linear_qkv)
SUFFIX: dict[str, str] = {
    "attn_qkv": "self_attention.linear_qkv", "attn_proj": "self_attention.linear_proj",
    "mlp_fc1": "mlp.linear_fc1", "mlp_fc2": "mlp.linear_fc2",
    "shared_fc1": "mlp.shared_experts.linear_fc1", "shared_fc2": "mlp.shared_experts.linear_fc2",
    "latent_fc1": "mlp.fc1_latent_proj", "latent_fc2": "mlp.fc2_latent_proj",
    "mamba_in": "mixer.in_proj", "mamba_out": "mixer.out_proj",
    "expert_fc1": "mlp.experts.linear_fc1", "expert_fc2": "mlp.experts.linear_fc2",
}
MLA_QKV = "self_attention.linear_kv_up_proj"


def run_precision(mm: str, recipe: str | None) -> str:
    """The run's own precision in the recipe's terms: bf16, fp8:<recipe> or fp4:nvfp4."""
    if mm == "fp8":
        return f"fp8:{recipe or 'tensorwise'}"
    if mm == "fp4":
        return "fp4:nvfp4"
    return BF16


def mtp_count(m: Any) -> int:
    """Layers of the multi-token-prediction modules (a hybrid pattern's layers after '/', else one per module)."""
    counts = m.layer_counts()
    return int(counts.mtp_layers) if counts is not None else int(m.mtp_modules or 0)


def present_classes(m: Any) -> frozenset[str]:
    """The classes of linear layer the model has (ModelSpec ``m``): a recipe's note names only those."""
    has = {"attn": m.attention_layers > 0, "mlp": m.mlp_layers > m.moe_layers, "shared": bool(m.shared_experts),
           "latent": bool(m.moe_latent_size), "mamba": m.mamba_layers > 0, "expert": (m.experts or 0) > 1}
    return frozenset(c for c in SUFFIX if has[c.split("_")[0]])


def module_precision(rules: list[Rule] | None, layers: int, mtp: int, default: str, mla: bool,
                     notes: list[str], present: frozenset[str] = frozenset(SUFFIX),
                     ) -> tuple[tuple[str, tuple[tuple[str, float], ...]], ...]:
    """Per class, the share of its layers at each precision under ``rules`` (empty without rules), with the
    sentence that says which of the model's classes (``present``) a recipe moves."""
    if not rules or layers <= 0:
        return ()
    out: list[tuple[str, tuple[tuple[str, float], ...]]] = []
    moved: list[str] = []
    for cls, suffix in SUFFIX.items():
        if mla and cls == "attn_qkv":
            suffix = MLA_QKV
        paths = [f"decoder.layers.{i}.{suffix}" for i in range(layers)]
        paths += [f"mtp.layers.{j}.transformer_layer.{suffix}" for j in range(mtp)]
        tally: dict[str, int] = {}
        for path in paths:
            p = precision_of(path, rules, default)
            tally[p] = tally.get(p, 0) + 1
        shares = tuple(sorted((p, n / len(paths)) for p, n in tally.items()))
        out.append((cls, shares))
        if shares != ((default, 1.0),) and cls in present:
            moved.append(f"{cls} " + ", ".join(f"{100 * s:.0f}% {p}" for p, s in shares))
    notes.append("per-module precision (--te-precision-config-file): " + ("; ".join(moved) if moved else
                 f"no linear layer moves from {default}") + "; the output layer keeps its own rule")
    return tuple(out)


def _multiplier(shares: tuple[tuple[str, float], ...], rate: dict[str, float]) -> float:
    return sum(s * rate[p.split(":")[0]] * (rate["mxfp8"] if p == "fp8:mxfp8" else 1.0) for p, s in shares)


def group_multipliers(shape: Any, dense_rate: dict[str, float], expert_rate: dict[str, float],
                      ) -> tuple[dict[str, float], float] | None:
    """Per dense group (attn, mlp, mamba) and for the routed experts, the matmul time against the run's own rate
    (1.0: unchanged). Each rate maps bf16 / fp8 / fp4 to that time ratio and ``mxfp8`` to the kernel ratio a class
    moved to MXFP8 pays (the dense GEMMs': MXFP8's; the experts': 1). None without a recipe."""
    if not shape.module_precision:
        return None
    by = dict(shape.module_precision)
    D = float(shape.d_model)
    qkv = float(shape.attn_params) - D * float(shape.heads) * float(shape.v_head_dim or shape.head_dim)
    proj = D * float(shape.heads) * float(shape.v_head_dim or shape.head_dim)
    fc1 = float(shape.mlp_matrices - 1) / shape.mlp_matrices
    dense_ff = float(shape.dense_d_ff or shape.d_ff)
    mlp_parts = {"mlp": float(shape.dense_layers if shape.is_moe else shape.n_mlp) * shape.mlp_matrices * D * dense_ff,
                 "shared": float(shape.moe_layers * shape.shared_experts) * shape.mlp_matrices * D * float(shape.d_ff),
                 "latent": float(shape.moe_layers) * 2.0 * D * float(shape.moe_latent)}
    weights = {
        "attn": {"attn_qkv": max(qkv, 0.0), "attn_proj": proj},
        "mlp": {"mlp_fc1": mlp_parts["mlp"] * fc1, "mlp_fc2": mlp_parts["mlp"] * (1 - fc1),
                "shared_fc1": mlp_parts["shared"] * fc1, "shared_fc2": mlp_parts["shared"] * (1 - fc1),
                "latent_fc1": mlp_parts["latent"] / 2, "latent_fc2": mlp_parts["latent"] / 2},
        "mamba": {"mamba_in": D * float(shape.mamba_in_proj), "mamba_out": D * float(shape.mamba_inner)},
    }
    out: dict[str, float] = {}
    for group, parts in weights.items():
        total = sum(parts.values())
        out[group] = (sum(w * _multiplier(by[c], dense_rate) for c, w in parts.items()) / total) if total > 0 else 1.0
    expert = fc1 * _multiplier(by["expert_fc1"], expert_rate) + (1 - fc1) * _multiplier(by["expert_fc2"], expert_rate)
    return out, expert
