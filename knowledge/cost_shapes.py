"""The model and training shape the cost model works from, with every default it had to assume.

``resolve_shape(run)`` reads a :class:`~bot.runs.record.RunRecord` once and returns a frozen
:class:`Shape`: the dimensions the formulas need (layers, widths, heads, experts, batch, sequence,
remat policy, optimizer) plus the plain-language list of what was assumed because the run did not say.
Everything downstream (the vectorized formulas, ``predict``, ``score_meshes``) reads only this object,
so one mesh and ten thousand meshes are costed from the same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bot.errors import AsapError
from bot.runs.record import RunRecord

RematPolicy = str  # "none" | "minimal" | "dots" | "full"

# Bytes per parameter held for the optimizer (master weights + moments), fp32 unless noted.
# Source: ZeRO (Rajbhandari et al., 2019, §3.1 "Model States"): mixed-precision Adam keeps fp32 master
# weights, momentum and variance = 12 bytes/param, on top of 2 B bf16 weights and 2 B bf16 gradients
# ("16 Psi" in total). Adafactor keeps factored second moments (~0 per param) and, in MaxText and T5X,
# no first moment: fp32 master only. SGD (no momentum): master only. Lion: master + one fp32 moment.
OPTIMIZER_BYTES_PER_PARAM: dict[str, float] = {"adamw": 12.0, "adam": 12.0, "adafactor": 4.0, "sgd": 4.0, "lion": 8.0}

# What the unspecified remat policy defaults to per framework, and why (documented defaults):
#   MaxText base.yml: remat_policy: 'full'.  Megatron-LM: activation recomputation is off unless
#   --recompute-granularity is given.  Plain JAX: no jax.checkpoint unless the user adds it -> "none",
#   but generic training loops very often wrap blocks in jax.checkpoint, so for "other" we take MaxText's
#   conservative "full" (over-estimates compute slightly, never under-estimates memory much).
DEFAULT_REMAT: dict[str, str] = {"maxtext": "full", "megatron": "none", "jax": "none", "other": "full"}


@dataclass(frozen=True)
class Shape:
    """Dimensions of the model and training step, all resolved to numbers."""

    layers: int
    d_model: int
    d_ff: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    experts: int  # 1 for dense models
    top_k: int  # experts per token (1 for dense)
    mlp_matrices: int
    params_total: float
    params_expert: float  # MoE expert MLP parameters (0 for dense)
    params_active: float  # parameters touched per token
    global_batch: int
    seq_len: int
    micro_batch: int | None  # sequences per micro-batch per data-parallel rank, None = not given
    remat: RematPolicy
    optimizer: str
    framework: str
    distributed_optimizer: bool
    assumptions: tuple[str, ...] = ()
    guessed: frozenset[str] = field(default_factory=frozenset)

    @property
    def is_moe(self) -> bool:
        return self.experts > 1

    @property
    def params_dense(self) -> float:
        """Parameters that are not MoE expert weights (attention, norms, embeddings, dense MLPs)."""
        return self.params_total - self.params_expert

    @property
    def tokens_per_step(self) -> int:
        return self.global_batch * self.seq_len


def missing_for_prediction(run: RunRecord) -> list[str]:
    """Which run.yaml fields an absolute prediction still needs ([] when enough is known)."""
    missing: list[str] = []
    m, t = run.model, run.training
    if m is None:
        missing.append("model (layers, d_model, d_ff, heads, ...)")
    else:
        for name in ("layers", "d_model", "heads"):
            if getattr(m, name) is None:
                missing.append(f"model.{name}")
        if m.d_ff is None and m.params is None:
            missing.append("model.d_ff (or model.params)")
    if t is None:
        missing.append("training (global_batch, seq_len)")
    else:
        for name in ("global_batch", "seq_len"):
            if getattr(t, name) is None:
                missing.append(f"training.{name}")
    return missing


def resolve_shape(run: RunRecord) -> Shape:
    """Resolve the run's model and training shape, recording each default taken.

    Raises :class:`AsapError` naming the missing run.yaml fields when the model is too unknown to cost.
    """
    missing = missing_for_prediction(run)
    if missing:
        raise AsapError(
            f"cannot predict step time or memory: run {run.id!r} does not give {', '.join(missing)}",
            source="run.yaml",
            field="model" if run.model is None or any(x.startswith("model") for x in missing) else "training",
            hint="add the model dimensions and training.global_batch / seq_len to run.yaml; "
            "proposals then come with computed step-time and memory predictions",
        )
    m, t = run.model, run.training
    assert m is not None and t is not None and m.layers and m.d_model and m.heads  # checked above
    assumptions: list[str] = []
    guessed: set[str] = set()

    heads = m.heads
    kv_heads = m.kv_heads or heads
    if m.kv_heads is None:
        assumptions.append(f"kv_heads not given: assumed equal to heads ({heads}), i.e. no grouped-query attention")
    head_dim = m.head_dim or m.d_model // heads
    experts = m.experts or 1
    top_k = (m.experts_per_token or 1) if experts > 1 else 1
    if experts > 1 and m.experts_per_token is None:
        assumptions.append("experts_per_token not given: assumed top-1 routing")
    vocab = m.vocab or 0
    if m.vocab is None:
        assumptions.append("vocab not given: embedding/unembedding parameters and logits memory left out")
        guessed.add("vocab")
    attn_per_layer = m.d_model * head_dim * (2 * heads + 2 * kv_heads)
    d_ff = m.d_ff
    if d_ff is None:
        # Invert ModelSpec.derived_params: params = L*(attn + mats*d*d_ff*E) + 2*V*d.
        assert m.params is not None
        per_layer = (m.params - 2 * vocab * m.d_model) / m.layers
        d_ff = max(1, int(round((per_layer - attn_per_layer) / (m.mlp_matrices * m.d_model * experts))))
        assumptions.append(f"d_ff not given: derived from params as {d_ff}")
        guessed.add("d_ff")
    params_total = m.derived_params() or 0.0
    if m.d_ff is None or m.params is not None:
        # Params given directly: keep the user's total; expert share from the dimensions.
        params_total = float(m.params) if m.params else params_total
    params_expert = float(m.layers * m.mlp_matrices * m.d_model * d_ff * experts) if experts > 1 else 0.0
    params_expert = min(params_expert, params_total)
    params_active = params_total - params_expert + params_expert * top_k / experts

    remat = t.remat
    if remat is None:
        remat = DEFAULT_REMAT.get(run.framework, "full")
        assumptions.append(
            f"remat policy not given: assumed '{remat}' (the {run.framework} default); "
            "it changes activation memory and recompute FLOPs"
        )
        guessed.add("remat")
    if t.micro_batch is None:
        assumptions.append(
            "micro_batch not given: assumed one micro-batch per step without pipelining (no gradient "
            "accumulation); with pipeline > 1, min(per-rank batch, 4 x stages) micro-batches (GPipe: bubble "
            "negligible at M >= 4K)"
        )
        guessed.add("micro_batch")
    tags = {x.lower() for x in run.tags}
    distributed_optimizer = run.framework == "megatron" and bool(
        tags & {"distributed-optimizer", "use-distributed-optimizer", "zero1", "zero-1"}
    )
    if distributed_optimizer:
        assumptions.append("Megatron distributed optimizer (ZeRO-1): optimizer state sharded over data-parallel ranks")
    if t.dtype != "bf16":
        assumptions.append(f"dtype {t.dtype}: memory and FLOP rates still use the bf16 figures")
    return Shape(
        layers=m.layers,
        d_model=m.d_model,
        d_ff=d_ff,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        vocab=vocab,
        experts=experts,
        top_k=top_k,
        mlp_matrices=m.mlp_matrices,
        params_total=params_total,
        params_expert=params_expert,
        params_active=params_active,
        global_batch=t.global_batch or 1,
        seq_len=t.seq_len or 1,
        micro_batch=t.micro_batch,
        remat=remat,
        optimizer=t.optimizer,
        framework=run.framework,
        distributed_optimizer=distributed_optimizer,
        assumptions=tuple(assumptions),
        guessed=frozenset(guessed),
    )
