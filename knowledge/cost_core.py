"""The cost model's formulas, vectorized over many meshes with numpy.

One function, :func:`evaluate`, computes every term (compute, HBM, each axis' collectives, pipeline
bubble, memory per chip) for an ``[M, 6]`` batch of meshes. ``predict`` calls it with one mesh and
``score_meshes`` with thousands, so the two can never disagree.

Units: seconds and bytes per chip per optimizer step. Sources are cited next to each formula:
  [SB]  "How to Scale Your Model" (the JAX scaling book, Austin et al., 2025), parts "How to Think About
        Collectives", "Sharded Matrices", "How to Parallelize a Transformer for Training".
  [PaLM] Chowdhery et al., 2022, Appendix B (model FLOPs incl. attention).
  [MLM] Shoeybi et al., 2019, Megatron-LM §3 (tensor-parallel all-reduces per layer).
  [PTD] Narayanan et al., 2021, Efficient Large-Scale Training on GPU Clusters (pipeline bubble, 1F1B).
  [KOR] Korthikanti et al., 2022, Reducing Activation Recomputation in Large Transformer Models
        (activation bytes per layer, sequence parallelism, recompute cost).
  [ZeRO] Rajbhandari et al., 2019 (model-state bytes per parameter, ZeRO-3 communication volume).
  [GPipe] Huang et al., 2019 (bubble negligible when micro-batches M >= 4 x stages).
  [GS]  Lepikhin et al., 2020, GShard (two all-to-alls per MoE layer forward).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from knowledge.cost_act_offload import kept_layers, offload_copy_seconds
from knowledge.cost_fp8_recipe import MXFP8_DENSE_GEMM_SLOWDOWN
from knowledge.cost_module_precision import group_multipliers
from knowledge.cost_moe_grid import ExpertGrid, expert_grid, expert_network
from knowledge.cost_muon import muon_step_s
from knowledge.cost_network import (
    AxisNetwork,
    allreduce_time,
    alltoall_time,
    axis_networks,
    gather_time,
    group_gather_time,
    p2p_bandwidth,
    ring_latency,
    strided_allreduce_time,
)
from knowledge.cost_offload import offload_seconds
from knowledge.cost_remat import (
    Dims,
    everything_bytes,
    recompute_module_bytes,
    recompute_params_per_layer,
    recompute_routed_share,
    score_bytes,
    tensor_bytes,
)
from knowledge.cost_shapes import ROWWISE_FP8_SPEEDUP, XLA_FUSING, Shape
from knowledge.cost_stages import Stages, stages
from knowledge.hardware import Chip

DATA, FSDP, TENSOR, SEQUENCE, EXPERT, PIPELINE = range(6)
AXIS_KEYS = ("data", "fsdp", "tensor", "sequence", "expert", "pipeline")

BF16 = 2.0  # bytes per bf16 value

# Uncalibrated defaults; calibration on the run's own profile replaces them.
# Achieved / peak FLOP/s (and HBM B/s) of large, well-shaped work, before the per-chip shape factor
# (shape_factor) and elementwise HBM traffic (EW_BYTES); a chip's fitted ``matmul_efficiency`` replaces it.
# 0.75 keeps a typical training step (shape factor ~0.75) near the 55% the model assumed before shapes counted.
DEFAULT_EFFICIENCY = 0.75
# Share of the overlappable-but-not-forced-exposed collective time that still shows up in the step:
# 0 = perfect overlap (the lower bound), 1 = none (the upper bound). A middle-low guess; calibrated.
DEFAULT_OVERLAP_MISS = 0.25

# Extra FLOPs from rematerialization come from knowledge.cost_remat (per policy: which projections and
# whether the attention core are re-run in backward) [KOR §5: full recompute ~ +1/3 of the step's FLOPs].


@dataclass(frozen=True)
class Terms:
    """All modelled terms for M meshes (arrays of shape [M])."""

    compute_s: np.ndarray
    hbm_s: np.ndarray
    comm_s: dict[str, np.ndarray]  # raw collective seconds per axis (before overlap)
    exposed_s: dict[str, np.ndarray]  # exposed seconds per axis at the point estimate
    exposed_low_s: np.ndarray
    exposed_high_s: np.ndarray
    nonoverlap_s: np.ndarray  # part of exposed that sits on the critical path (tensor, expert a2a)
    bubble_frac: np.ndarray  # (p-1)/m: bubble time per unit of per-stage busy time [PTD eq. 1]
    micro_batches: np.ndarray
    micro_batch: np.ndarray
    memory: dict[str, np.ndarray]  # bytes per chip: weights, gradients, optimizer, activations
    model_flops_per_chip: np.ndarray
    notes: tuple[str, ...]
    stages: dict[str, np.ndarray] | None = None  # first/last stage memory (bytes), slowest / mean stage time
    offload_s: np.ndarray | None = None  # DeepSpeed ZeRO offload: host-link and CPU-optimizer wait (cost_offload)
    moe_host_s: np.ndarray | None = None  # the fixed per-MoE-layer time included in compute_s (MOE_LAYER_HOST_S)
    moe_dispatch_s: np.ndarray | None = None  # MaxText's routed-expert path on TPU beyond its FLOPs, in compute_s
    optimizer_s: np.ndarray | None = None  # Muon's Newton–Schulz orthogonalizations (knowledge.cost_muon), outside compute_s

    def step_s(
        self, compute_scale: float = 1.0, comm_scale: float = 1.0, fixed_s: float = 0.0
    ) -> np.ndarray:
        """Step time: scaled device work + scaled exposed comm + pipeline bubble + fixed time."""
        device = compute_scale * (self.compute_s + self.hbm_s)
        exposed = comm_scale * sum(self.exposed_s.values())
        bubble = self.bubble_frac * (device + comm_scale * self.nonoverlap_s)
        offload = self.offload_s if self.offload_s is not None else 0.0
        optimizer = compute_scale * self.optimizer_s if self.optimizer_s is not None else 0.0
        return device + exposed + bubble + offload + optimizer + fixed_s


def _intensity(tokens: np.ndarray, d_in: float, d_out: np.ndarray) -> np.ndarray:
    """FLOPs per HBM byte of a bf16 matmul [tokens, d_in] x [d_in, d_out].

    FLOPs 2·t·a·b over bytes 2·(t·a + a·b + t·b) = 1 / (1/t + 1/a + 1/b): with few tokens per chip the
    weight load dominates and intensity ~ tokens [SB "All About Rooflines": bf16 matmul intensity ~ B].
    """
    t = np.maximum(tokens, 1e-9)
    return 1.0 / (1.0 / t + 1.0 / d_in + 1.0 / np.maximum(d_out, 1e-9))


def _dims(shape: Shape) -> Dims:
    return Dims(
        d_model=float(shape.d_model), d_ff=float(shape.d_ff), heads=float(shape.heads),
        kv_heads=float(shape.kv_heads), head_dim=float(shape.head_dim), mlp_matrices=float(shape.mlp_matrices),
        top_k=float(shape.top_k), seq_len=float(shape.seq_len),
        v_head_dim=float(shape.v_head_dim), mla_latent=float(shape.mla_latent), attn_proj=float(shape.attn_params),
        mlp_width=_mlp_width(shape), routed_share=_routed_mlp_share(shape), shared_share=_shared_mlp_share(shape),
        **_hybrid_dims(shape),
    )


def _hybrid_dims(shape: Shape) -> dict[str, float]:
    """Dims fields of a hybrid Mamba stack, as shares of the layers ({} for a transformer: the defaults)."""
    if shape.attn_layers < 0 and shape.mlp_layers < 0 and not shape.mamba_layers:
        return {}
    L = max(float(shape.layers), 1.0)
    return {"attn_share": shape.n_attn / L, "block_share": shape.block_share, "mamba_share": shape.mamba_layers / L,
            "mamba_inner": float(shape.mamba_inner), "mamba_in_proj": float(shape.mamba_in_proj),
            "mamba_bc": float(shape.mamba_bc)}


def _mlp_width(shape: Shape) -> float:
    """MLP width a token passes through per layer, averaged over the layers: d_ff x top_k for a plain MoE or dense
    model; DeepSeek-V3-style: the dense_layers' dense_d_ff and the MoE layers' d_ff x (top_k + shared_experts)."""
    if not shape.is_moe:
        return float(shape.d_ff) * shape.n_mlp / max(shape.layers, 1)
    dense = shape.dense_layers * float(shape.dense_d_ff or shape.d_ff)
    moe = shape.moe_layers * float(shape.d_ff) * (shape.top_k + shape.shared_experts)
    return (dense + moe) / max(shape.layers, 1)


def _routed_mlp_share(shape: Shape) -> float:
    """Share of the per-token MLP work done by routed experts (1 for a plain MoE model, 0 for a dense one)."""
    if not shape.is_moe:
        return 0.0
    width = _mlp_width(shape)
    return shape.moe_layers * float(shape.d_ff) * shape.top_k / max(shape.layers * width, 1.0)


def _shared_mlp_share(shape: Shape) -> float:
    """Share of the per-token MLP work done by shared experts (DeepSeek-V3 style; 0 without them)."""
    if not shape.is_moe or not shape.shared_experts:
        return 0.0
    return shape.moe_layers * float(shape.d_ff) * shape.shared_experts / max(shape.layers * _mlp_width(shape), 1.0)


def activation_bytes_per_token_layer(shape: Shape) -> dict[str, float]:
    """Stored activation bytes per token per layer (tensor = 1) for the run.yaml policy vocabulary.

    Kept for callers that compare policies; :func:`activation_bytes_per_token` is what the model uses.
    """
    from knowledge.cost_remat import runyaml_policy

    out = {}
    for name in ("none", "dots", "minimal", "full"):
        spec = runyaml_policy(name, "maxtext", source="comparison")
        stored, _ = _stored_transient(shape, spec, np.ones(1), np.ones(1) * shape.layers)
        out[name] = float(stored[0])
    return out


def activation_bytes_per_token(shape: Shape, nt: np.ndarray, local_layers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(stored per token per layer, transient per token) activation bytes per chip for the run's remat policy."""
    return _stored_transient(shape, shape.spec, nt, local_layers)


def _stored_transient(shape: Shape, spec, nt: np.ndarray, local_layers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # type: ignore[no-untyped-def]
    """See knowledge.cost_remat for what each policy keeps.

    Per chip, tensor parallelism divides the head, MLP and (MaxText/GSPMD, or Megatron with sequence
    parallelism) embedding-sized tensors; KV heads replicate once tensor exceeds kv_heads; without sequence
    parallelism Megatron replicates the norm inputs/outputs and the layer input [KOR Table 2].
    """
    d = _dims(shape)
    tb = tensor_bytes(d)
    # Transformer Engine (Megatron) keeps fp8 copies of the linear layers' inputs for backward; torchao Float8
    # (torchtitan) saves the bf16 inputs and re-casts them, so its activations stay as in bf16.
    te_fp8 = shape.fp8 and shape.framework == "megatron"
    rep, shd = everything_bytes(d, dropout=shape.dropout, fp8_inputs=te_fp8)
    nt = np.asarray(nt, dtype=np.float64)
    emb_div = nt if shape.sequence_parallel else np.ones_like(nt)
    kv_div = np.minimum(nt, max(d.kv_heads, 1.0))
    everything = rep / emb_div + shd / nt
    scores = 0.0 if shape.flash_attention else score_bytes(d, dropout=shape.dropout) / nt
    layer_input = tb["input"] / emb_div
    if spec.stores_everything:
        # Megatron selective recompute_modules: what they discard is rebuilt one layer at a time in backward
        rep_off, shd_off = recompute_module_bytes(d, spec.megatron_modules, fp8_inputs=te_fp8)
        dropped = rep_off / emb_div + shd_off / nt
        if spec.recompute_attention_core:  # selective: scores recomputed, one layer's at a time
            return everything - dropped, scores + dropped
        return everything - dropped + scores, dropped
    if spec.megatron_full:
        n = float(spec.megatron_layers)
        full_layer = everything + scores
        if spec.megatron_method == "block":
            ll = np.asarray(local_layers, dtype=np.float64)
            recomputed = np.minimum(n, ll)
            per_layer = (recomputed * layer_input + np.maximum(ll - n, 0.0) * full_layer) / np.maximum(ll, 1.0)
            return per_layer, full_layer
        return layer_input / n, n * full_layer
    if spec.layer_every:  # torchtitan selective layer: one block in k keeps only its input
        k = float(spec.layer_every)
        return layer_input / k + (1.0 - 1.0 / k) * (everything + scores), everything + scores
    # every layer's input stays in HBM for the backward pass to restart from, unless it is offloaded to host memory
    # (MaxText custom decoder_layer_input: offload): then only the layer being recomputed holds it (the transient)
    saved = np.zeros_like(layer_input) if spec.input_offloaded else layer_input.copy()
    if spec.every_other_mm:  # torchtitan selective op: wq, wv, w1 (half the MLP input matmuls) and SDPA's output
        saved = saved + tb["q"] / nt + tb["v"] / kv_div + 0.5 * tb["mlpwi"] / nt
    for name in spec.saved:
        if name in ("k", "v"):
            saved = saved + tb[name] / kv_div
        elif name in ("input", "o"):
            saved = saved + tb[name] / emb_div
        else:
            saved = saved + tb[name] / nt
    transient = np.maximum(everything + scores - saved, 0.0)
    return saved, transient


# HBM bytes of elementwise work per token per layer per unit of width (fitted across the published tables in
# docs/cost-model.md; ~40 read+write passes of bf16 over the layer's d_model-wide tensors in forward+backward).
EW_BYTES = 160.0
# XLA:TPU fuses norms, activations and residual adds into the neighbouring matmul/reduction fusions, so little of
# that traffic is left on its own (fitted across the MaxText v4 / v5e / v5p README tables of the eval corpus).
# XLA:GPU calls cuBLAS for the matmuls and fuses only their epilogues: the norms and residual adds stay kernels of
# their own, as in eager frameworks (EW_BYTES). MaxText's A3 H100 table: one VM measured / predicted 1.45 -> 1.01.
EW_BYTES_XLA = 10.0
# PyTorch trainers outside Megatron (framework ``other``: llm-foundry, torchtitan, torchao, DeepSpeed) measure about
# half the elementwise cost Megatron-Core's Transformer Engine path does at the same width: the 1/d_model falloff in
# llm-foundry's MPT tables (125M-70B, d_model 768-8192, 216 rows) is half as steep. Fitted across the PyTorch
# trainers' tables of the eval corpus together, llm-foundry's, torchtitan's and torchao's (docs/cost-model.md,
# "PyTorch trainers: elementwise cost and FSDP overlap").
EW_BYTES_PYTORCH = 80.0

# Share of a PyTorch trainer's FSDP all-gathers and reduce-scatters (framework ``other``: FSDP1 / FSDP2, DeepSpeed
# ZeRO-3 read onto the fsdp axis), and of its data-parallel gradient reduction, that lands on the critical path however
# much compute there is to hide it behind: across the llm-foundry and torchtitan tables the rows that move the most
# weight bytes per FLOP (big models at a few thousand tokens per GPU) measure 10-25% slower than a fully overlappable
# FSDP gives. Fitted across those tables together with EW_BYTES_PYTORCH (docs/cost-model.md, "PyTorch trainers:
# elementwise cost and FSDP overlap"); Megatron's and XLA's are unchanged.
FSDP_EXPOSED_PYTORCH = 0.5

# Tensor-parallel collectives per layer that XLA leaves on the critical path: the forward pass's pair. XLA's
# latency-hiding scheduler (async collectives; MaxText's launch scripts also set --xla_tpu_enable_async_collective_fusion
# and --xla_tpu_overlap_compute_collective_tc) runs a collective beside compute that does not depend on it. In
# backward, the activation-gradient all-reduce (reduce-scatter) runs beside the weight-gradient matmuls of the same
# layer; a rematerialized forward (full remat) has no consumer until its layer's backward, so its collectives run
# beside the layer above's backward. The forward pass's collectives feed the next matmul directly: exposed.
# Checked across the MaxText v5e / v5p README tables (TP 4-16; docs/cost-model.md "TPU tensor parallelism under XLA").
XLA_TP_EXPOSED = 2.0

# HBM bytes per attention-score element per layer (forward + backward) without a flash kernel: forward
# writes QK^T (2 B), softmax reads and writes (4 B), dropout reads, writes and masks (5 B), AV reads (2 B);
# backward about twice that.
SCORE_BYTES = 39.0

# torchao Float8Linear (torchtitan's float8 converter) casts each linear's input and output gradient to fp8 in
# kernels of their own: an amax read (2 B), a scaled cast (read 2 B, write 1 B), and for the weight-gradient GEMM a
# transposed fp8 copy (read 1 B, write 1 B): ~7 bytes of HBM traffic per cast element, with torch.compile fusing the
# scale arithmetic (torchao float8 README: "E2E speedups increase as M,K,N (GEMM dimensions) increase").
FP8_CAST_BYTES = 7.0
# torchao's rowwise recipe scales each operand along the axis its GEMM reduces over, so the weight-gradient GEMM needs
# the input and the output gradient scaled along the token axis as well: a second cast of each from its saved bf16
# copy, with its own amax (torchao float8_linear.py backward, ``axiswise_dim=0``; recipe ROWWISE keeps
# cast_config_input_for_grad_weight = cast_config_input). Two casts of an amax read (2 B) and a scaled cast (read 2 B,
# write 1 B), and no transposed copy: 10 bytes per cast element. The tensorwise recipe's two casts of one tensor share
# one scale, so torch.compile keeps the forward's fp8 copy and only transposes it (7 bytes). Counted, not fitted.
ROWWISE_CAST_BYTES = 10.0

# Share of the tensor-parallel collectives torchtitan's async TP takes off the critical path (the rest stays
# exposed: the first and last chunks of each decomposed all-gather / reduce-scatter, and the SMs the copies take
# from the matmuls). Fitted across the async-vs-vanilla pairs of torchtitan's June 2025 async TP benchmark
# (docs/cost-model.md, "Async TP").
ASYNC_TP_SHARE = 0.5

# Per-chip matmul shape efficiency: eff(m, k, n) = 1 / (1 + c/m + c/k + c/n), c fitted across the published
# tables in docs/cost-model.md ("Matmul efficiency"); peaks and the per-family efficiency stay separate.
SHAPE_TILE = 256.0

# The attention core's head-dimension term (attention_core_factor): SHAPE_TILE / (4 x 128) = 0.5 at head_dim 128, as
# the matmul form gave before, so 128-wide heads price as fitted. Its exponent, fitted across the published tables
# (MPT-125M / 350M at head_dim 64 against 760M-70B at 128 in llm-foundry's, 512 to 65k tokens; docs/cost-model.md,
# "Attention core: head dimension"), makes head_dim 64 0.88x and 256 1.11x of 128's rate at long sequences.
ATTN_HEAD_EXPONENT = 0.5

# Fixed seconds per MoE layer per micro-batch (forward + backward) beyond the layer's FLOPs, bytes and all-to-all:
# the router, the token-count exchange that sizes the all-to-all (a device-to-host sync in Megatron-Core's
# alltoall dispatcher), permutation and the many small kernels of fine-grained experts. Fitted across every MoE row
# of the eval corpus together (14 rows: Qwen3, GPT-OSS and DeepSeek-V3 in six Megatron-Bridge tables on H100 / B200 /
# GB200 / GB300; docs/cost-model.md, "Mixture-of-experts"): the median |log(measured / predicted)| is 0.33 at 0,
# 0.16 at 2 ms, 0.105 at 3 ms, 0.088 at 3.5 ms, 0.115 at 4 ms, 0.098 at 5 ms. CUDA graphs over the router and dispatch
# lower it; that is not modelled.
MOE_LAYER_HOST_S = 3.5e-3

# The same fixed time under a whole-iteration CUDA graph with MoE paged stashing (knowledge.cost_cuda_graph): no host
# launches and no token-count sync, the GPU work of routing and permutation left. Fitted across the two
# Megatron-Bridge 26.08 tables (GB200 and GB300, MXFP8), whose eight MoE rows all run that way (docs/cost-model.md,
# "Whole-iteration CUDA graphs").
MOE_LAYER_GRAPHED_S = 1.0e-3


# Expert count at and above which a MoE layer pays the whole fixed time. Megatron-Core's router and dispatcher work
# on [tokens, experts] tensors (router logits and probabilities, the routing map the permutation sorts tokens by, the
# auxiliary loss) and launch kernels per expert group, so a coarse expert set pays a share: experts /
# MOE_FINE_EXPERTS, the threshold TPU_SPARSE_MOE_EXPERTS uses for MaxText's path. Checked, not fitted, on the corpus's
# three Megatron Mixtral rows (8 experts; NeMo 25.02 DGX-B200 8x7B and 8x22B at 64K, NeMo 25.04 DGX-GB200 8x7B):
# measured / predicted 0.84 / 0.95 / 0.78 -> 1.05 / 1.07 / 1.02; every row with 128 or more experts is unchanged
# (docs/cost-model.md, "Mixture-of-experts").
MOE_FINE_EXPERTS = 128.0


def moe_layer_s(shape: Shape) -> float:
    """Fixed seconds per MoE layer per micro-batch for this run: graphed or not, and a coarse expert set's share."""
    full = MOE_LAYER_GRAPHED_S if shape.full_iteration_graph else MOE_LAYER_HOST_S
    return full * min(1.0, float(shape.experts) / MOE_FINE_EXPERTS)


# MaxText's dropless (sparse_matmul) MoE on TPU: the routed-expert path (argsort of token x expert pairs, the sorted
# gather, ragged grouped matmuls in megablox / tokamax kernels, the unsort and the weighted sum, each with its
# backward) costs TPU_SPARSE_MOE_EXTRA x the routed experts' GEMM time at the bf16 rate beyond that GEMM time, the
# same in fp8 (the fp8 rows gain only their dense matmuls' share). Fitted across every sparse-MoE TPU row of the
# corpus together (tpu-recipes Ironwood: DeepSeek-V3, Qwen3 235B, Gemma 4 26B, GPT-OSS 120B in bf16 and fp8; v5p:
# DeepSeek-V3, Llama 4 Maverick and Scout; docs/cost-model.md "MaxText MoE on TPU"). Coarse expert sets pay less:
# the term scales by E / TPU_SPARSE_MOE_EXPERTS below that many experts (Scout's 16 experts ran as priced without it).
TPU_SPARSE_MOE_EXTRA = 1.0
TPU_SPARSE_MOE_EXPERTS = 128.0

# Share of MOE_LAYER_HOST_S that a re-run MoE forward repeats: its forward half (routing, the token-count exchange
# and the dispatch's permutation run in forward; backward repeats the kernels but not the routing). Not fitted.
MOE_RERUN_HOST_SHARE = 0.5

# Forward FLOPs per token per Mamba-2 layer per (d_inner x state) of the chunked scan: Megatron-LM's estimate
# (megatron/training/training.py, mamba_layer_flops: "7 * total_tokens * d_in * state_dim"; Megatron-Bridge's
# flop_utils.py counts the same), which its own note calls small against the projections.
SSM_SCAN_FLOPS = 7.0


def shape_factor(m: np.ndarray | float, k: np.ndarray | float, n: np.ndarray | float) -> np.ndarray:
    """Relative efficiency (0..1] of a [m, k] x [k, n] matmul on one chip: small dimensions waste tiles.

    Each dimension is floored at ``SHAPE_TILE``: below it (a few tokens per chip) loading the weights from HBM
    dominates, which the roofline term (``_intensity``) prices; counting it here too would double it.
    """
    c = SHAPE_TILE
    if c <= 0:
        return np.ones_like(np.asarray(m, dtype=np.float64) * 1.0)
    return 1.0 / (1.0 + c / np.maximum(m, c) + c / np.maximum(k, c) + c / np.maximum(n, c))


def attention_core_factor(tokens: np.ndarray | float, keys: np.ndarray | float, head_dim: float) -> np.ndarray:
    """Relative efficiency (0..1] of the fused attention core: the tokens and keys terms of :func:`shape_factor`, and a
    head-dimension term, the matmul form's n-term at n = 4 x 128 scaled by ``(128 / head_dim) ** ATTN_HEAD_EXPONENT``.

    Each tile of QK^T and PV does work in proportion to the head dimension against a fixed softmax and rescaling cost,
    so a narrower head runs a flash kernel somewhat below a wider one; ``SHAPE_TILE / (4 x head_dim)`` (the matmul
    form with n = 4 x head_dim) made head_dim 64 1.33x slower than 128 at long sequences, where the PyTorch trainers'
    tables measure about a tenth (docs/cost-model.md, "Attention core: head dimension")."""
    head = SHAPE_TILE / (4.0 * 128.0) * (128.0 / max(head_dim, 1.0)) ** ATTN_HEAD_EXPONENT
    return 1.0 / (1.0 / shape_factor(tokens, keys, np.inf) + head)


def _matmul_shares(shape: Shape) -> dict[str, float]:
    """Share of the dense matmul FLOPs in MLPs, attention projections, Mamba-2 projections and the output layer (per
    token)."""
    D = float(shape.d_model)
    # MoE: the routed experts are priced apart; dense_layers' MLPs and shared experts are dense matmuls
    mlp = shape.dense_mlp_params
    attn = shape.n_attn * shape.attn_params
    mamba = shape.mamba_layers * D * float(shape.mamba_in_proj + shape.mamba_inner)  # in_proj + out_proj
    out = float(shape.vocab) * D * (1.0 + shape.mtp_outputs)  # each MTP module runs the shared output layer again
    total = max(mlp + attn + mamba + out, 1.0)
    return {"mlp": mlp / total, "attn": attn / total, "mamba": mamba / total, "out": out / total}


# Bytes per logit element at the loss's peak. Megatron's fused cross-entropy keeps the bf16 logits only; its
# unfused path the bf16 logits and an fp32 softmax (6). Eager PyTorch trainers (torchtitan's loss_fn:
# ``cross_entropy(pred.flatten(0, 1).float(), labels)``) hold the bf16 logits, their fp32 copy and the fp32
# log-softmax in forward, and in backward the saved log-softmax, its fp32 gradient and the fp32 input
# gradient: 12 bytes per element (counted from torchtitan train.py @ 9dec370, the commit of its H100 tables).
EAGER_LOSS_BYTES = 12.0
# torchtitan under tensor parallelism runs the loss in torch's loss_parallel on the vocab-sharded fp32 logits
# (torch/distributed/tensor/parallel/loss.py): its log-softmax is decomposed, so the forward holds the bf16
# logits, the fp32 copy, ``shifted`` and ``exp(shifted)`` (14), and the fused nll + log-softmax backward holds
# the saved log-softmax, ``zeros_like`` grad_input, ``exp(x)`` and their sum (16 bytes per element) where
# the fused aten kernels hold 12.
LOSS_PARALLEL_BYTES = 16.0
# torchtitan compiles its loss with torch.compile when compile is on (April 2025 on, #1033): inductor fuses the
# fp32 upcast, log-softmax and nll into kernels that read the bf16 logits, keep them (and a per-row logsumexp) for
# backward and write the bf16 gradient in one pass: 2 bytes forward, 4 at the backward's peak.
COMPILED_LOSS_BYTES = 4.0
# PyTorch's caching allocator reserves more than the live tensors (block rounding, fragmentation between
# differently sized activations); torchtitan reports that reserved peak ("memory: X GiB", max_reserved).
# Fitted across the twelve torchtitan H100 rows of the eval corpus together (docs/cost-model.md, "Memory").
ALLOCATOR_RESERVE = 0.20
RESERVING = frozenset({"other"})  # frameworks whose published peaks are the allocator's reserved memory


def logit_bytes(shape: Shape) -> float:
    """Bytes per logit element at the loss's peak (see :data:`EAGER_LOSS_BYTES`)."""
    if shape.fused_cross_entropy:
        # Megatron's fused cross-entropy keeps the bf16 logits only; a PyTorch trainer's fused kernel (flash-attn's
        # xentropy, as llm-foundry's fused_crossentropy; Liger; torch.compile) keeps them and their bf16 gradient
        return COMPILED_LOSS_BYTES if shape.framework == "other" else 2.0
    if shape.loss_compiled:
        return COMPILED_LOSS_BYTES
    return EAGER_LOSS_BYTES if shape.framework == "other" else 6.0


def reduce_bytes(shape: Shape) -> float:
    """Bytes per gradient element in the data-parallel reduction: MaxText's grad_dtype, torchtitan's fp32
    (FSDP2 ``reduce_dtype``), else bf16."""
    if shape.reduce_fp32:
        return 4.0
    return shape.grad_bytes if shape.framework in XLA_FUSING else BF16


def _workspace(shape: Shape, transient: np.ndarray, logits: np.ndarray) -> np.ndarray:
    """Peak of the per-layer recompute workspace and the loss buffers on top of the stored activations.

    Eager PyTorch frees the loss buffers before the first layer's backward re-runs its forward, so the two
    peaks do not coincide there; the other frameworks keep the earlier (additive) estimate.
    """
    if shape.framework == "other":
        return np.maximum(transient, logits)
    return transient + logits


def _fsdp_unsharded_with_pp(shape: Shape) -> bool:
    """torchtitan's FSDP2 under pipelining: weights stay gathered and gradients unsharded for the step
    (read from the run's ``torchtitan`` tag by knowledge.cost_shapes; other trainers re-gather per micro-batch)."""
    return shape.fsdp_gathered_under_pp


def _stage_memory(shape: Shape, mm: _MeshSplit, local_layers: np.ndarray, st: Stages) -> dict[str, np.ndarray]:
    """Memory per chip of the fullest pipeline stage (the OOM check is the maximum over stages).

    Model state [ZeRO §3.1] in the bytes per parameter of the run's framework and config, divided by the
    axes that shard it (fsdp, tensor, pipeline; expert for expert weights); Megatron's distributed optimizer
    shards the optimizer state over data x context (x expert for dense weights). With pipelining, Megatron
    places the embedding on the first stage and the output layer on the last [PTD §2.2]: each holds
    layers/p plus one vocab x d_model matrix; frameworks that keep them outside the pipeline replicate both
    on every stage. Activations: 1F1B keeps min(m, p) micro-batches in flight on the first stage (one on
    the last) [PTD §2.2; KOR §4.2.3]; the interleaved schedule (v chunks) adds (p-1)/(p·v) [KOR §4.2.3];
    the last stage also holds the logits (bf16 + fp32 softmax, bf16 only with a fused cross-entropy).
    """
    nd, nf, nt, ns, ne, npp = mm.nd, mm.nf, mm.nt, mm.ns, mm.ne, mm.npp
    V, D, L = float(shape.vocab), float(shape.d_model), float(shape.layers)
    P_ne, P_e = shape.params_dense, shape.params_expert
    emb = V * D
    # tied embeddings count one vocab x d_model matrix in the parameters; Megatron still keeps a copy on the first
    # and the last pipeline stage (kept in sync by an all-reduce), so the per-stage layout below is unchanged
    copies = 1.0 if shape.tied_embeddings else 2.0
    layers_dense = max(P_ne - copies * emb, 0.0)
    pp = npp > 1
    # Each stage's share of the layers' weights (knowledge.cost_stages: an even split or the config's layout, the MTP
    # modules, priced as average layers, on the last stage, whose MTP rank also builds its own input embedding:
    # Megatron-Core GPTModel ``if self.pre_process or self.mtp_process: self.embedding = ...``).
    first_share, last_share = st.first / L, st.last / L
    if shape.pipeline_output_on_last:
        mtp_emb = emb if shape.mtp_layers and not shape.tied_embeddings else 0.0
        first_dense = np.where(pp, layers_dense * first_share + emb, P_ne)
        last_dense = np.where(pp, layers_dense * last_share + emb + mtp_emb, P_ne)
    else:
        first_dense = last_dense = layers_dense / npp + copies * emb
    # expert weights over the MoE layers' grid: expert x expert-tensor ranks (the mesh's expert x tensor unless the
    # config folds experts over tensor ranks or sets expert_tensor_parallel_size; knowledge.cost_moe_grid)
    ep, etp = mm.grid.ep, mm.grid.etp
    w_exp = P_e / (nf * etp * ep)  # x a stage's share below

    # Sequence/context ranks shard the weights FSDP-style in MaxText (logical axis 'embed' -> fsdp, sequence,
    # context) and torchtitan (FSDP over dp_shard x cp); Megatron's context ranks replicate them (its
    # distributed optimizer shards the optimizer state over data x context instead).
    seq_shard = ns if shape.framework != "megatron" else np.ones_like(ns)
    w_exp = w_exp / seq_shard
    dense_shard = seq_shard * (ne if shape.fsdp_over_expert else 1.0)  # beyond fsdp x tensor
    first_exp, last_exp = w_exp * first_share, w_exp * last_share

    # FSDP keeps ~2 layers' gathered bf16 weights live (current + prefetched next).
    # (fp8 parameters, Megatron --fp8-param-gather, are gathered in fp8.)
    gathered_layer = min(BF16, shape.weight_bytes) * (layers_dense / L / nt + P_e / L / (etp * ep))
    # DeepSpeed ZeRO over the data ranks [ZeRO §5]: stage 2 shards the gradients, stage 3 the parameters
    # too (gathered per layer like FSDP); offload_param keeps only the gathered layers in HBM.
    zero3 = shape.zero_stage >= 3
    replicas = dp_replicas(shape, nd)
    sh = _StateSharding(
        mm=mm, dense_shard=dense_shard, replicas=replicas,
        hpz=np.clip(float(shape.hpz_partition), 1.0, np.maximum(nf * nd * ns * ne, 1.0)),  # ZeRO++ hpZ group
        sharded=(nf * dense_shard > 1) | (zero3 & (nd * ns * ne > replicas)), gathered_layer=gathered_layer)
    first_acts, last_acts, logits = _stage_activations(shape, mm, local_layers, st)
    first, last = _state_bytes(shape, sh, first_dense, first_exp), _state_bytes(shape, sh, last_dense, last_exp)
    first["activations"], last["activations"] = first_acts, last_acts
    if shape.framework in RESERVING:
        for held in (first, last):
            held["allocator_reserve"] = ALLOCATOR_RESERVE * sum(held.values())
    first_total = sum(first.values())
    last_total = sum(last.values())
    pick_first = first_total >= last_total
    out = {k: np.where(pick_first, first[k], last[k]) for k in first}
    out["_first_stage_total"], out["_last_stage_total"] = first_total, last_total
    out["_logits"] = np.where(pick_first, np.where(pp, 0.0, logits), logits)  # the loss buffers in that peak
    # the prefetched (second) gathered layer in that peak; not where torchtitan + PP keeps the stage gathered
    prefetched = np.where(sh.sharded | shape.param_offload, gathered_layer, 0.0)
    out["_prefetched_layer"] = np.where(pp & _fsdp_unsharded_with_pp(shape), 0.0, prefetched)
    return out


@dataclass(frozen=True)
class _StateSharding:
    """How a mesh shards one pipeline stage's model state (arrays of shape [M]): the mesh's split (axis sizes and
    expert grid), the dense weights' shard beyond fsdp x tensor, Megatron's distributed-optimizer groups, the ZeRO++
    hpZ group, whether the weights are gathered per layer, and one gathered layer's bytes."""

    mm: _MeshSplit
    dense_shard: np.ndarray
    replicas: np.ndarray
    hpz: np.ndarray
    sharded: np.ndarray
    gathered_layer: np.ndarray


def _state_bytes(shape: Shape, sh: _StateSharding, dense: np.ndarray, w_exp: np.ndarray) -> dict[str, np.ndarray]:
    """Weights, gradients and optimizer state per chip of a stage holding ``dense`` dense parameters and ``w_exp``
    expert parameters per chip (after fsdp, expert and sequence sharding) [ZeRO §3.1, §5]."""
    nd, nf, nt, ns, ne, npp = sh.mm.nd, sh.mm.nf, sh.mm.nt, sh.mm.ns, sh.mm.ne, sh.mm.npp
    ep, etp = sh.mm.grid.ep, sh.mm.grid.etp
    trained = shape.trainable_share  # LoRA: gradients and optimizer state are the adapters' alone
    zero3 = shape.zero_stage >= 3
    w_dense = dense / (nf * nt * sh.dense_shard)
    w_shard = w_dense + w_exp
    # over the data-parallel ranks; expert weights over the expert-data ranks (data x context on the mesh's grid)
    zero_shard = w_dense / (nd * ns * ne) + w_exp / (nd * ns) * (ep * etp) / (ne * nt)
    # Megatron's distributed-optimizer instances: sharded within one of `replicas` groups of data ranks only
    group_shard = zero_shard * sh.replicas
    opt_shard = (zero_shard if shape.optimizer_over_replicas else group_shard) if shape.distributed_optimizer \
        else w_shard
    held = 0.0 if shape.param_offload else shape.weight_bytes * (group_shard if zero3 else w_shard)
    held = held * (1.0 + trained) if shape.frozen_base else held
    if zero3 and shape.hpz_partition > 1:  # ZeRO++ hpZ: a second copy of the weights over the hpZ group
        held = held + np.minimum(shape.weight_bytes, BF16) * zero_shard * (nd * ns * ne) * nf / sh.hpz
    weights = held + np.where(sh.sharded | shape.param_offload, 2.0 * sh.gathered_layer, 0.0)
    grads = trained * shape.grad_bytes * (group_shard if shape.zero_stage >= 2 else w_shard)
    full = dense / nt + shape.params_expert / (nt * npp * ne)  # the stage's weights per chip, gathered
    if shape.fsdp_keep_gathered:
        # SHARD_GRAD_OP: every layer's gathered bf16 weights live from its forward to its backward
        weights = weights + np.where(sh.sharded, BF16 * full - 2.0 * sh.gathered_layer, 0.0)
    if _fsdp_unsharded_with_pp(shape):
        # torchtitan + PP: FSDP2 keeps the stage's bf16 weights gathered for the whole step
        # (reshard_after_forward=False) and accumulates its unsharded gradients in the fp32 reduce dtype
        # until the last micro-batch (torch.distributed.pipelining defers the reduce-scatter).
        pp = npp > 1
        weights = weights + np.where(pp & sh.sharded, BF16 * full - 2.0 * sh.gathered_layer, 0.0)
        grads = grads + np.where(pp & sh.sharded, 4.0 * full, 0.0)
    return {
        "weights": weights,
        "gradients": grads,
        "optimizer": (0.0 if shape.optimizer_offload else shape.optimizer_bytes) * trained * opt_shard,
    }


def _stage_activations(shape: Shape, mm: _MeshSplit, local_layers: np.ndarray,
                       st: Stages) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(first stage's activations, last stage's, the logits) per chip: 1F1B keeps min(m, p) micro-batches in flight
    on the first stage (the interleaved schedule adds (p-1)/(p·v)) and one on the last, which also holds the logits
    [PTD §2.2; KOR §4.2.3]."""
    nt, npp, m, tok_mb = mm.nt, mm.npp, mm.m, mm.tok_mb
    pp = npp > 1
    stored, transient = activation_bytes_per_token(shape, nt, local_layers)
    v = float(max(shape.virtual_stages, 1))
    interleave = np.where(pp & (v > 1), 1.0 + (npp - 1.0) / (npp * v), 1.0)
    in_flight = np.minimum(m, npp) * interleave
    # MaxText num_vocab_tiling computes the loss over that many chunks of the batch-sequence axis, so only one
    # chunk's logits are live (base.yml: "reducing peak memory usage"; 8 in the v4 22B/52B recipes)
    parallel = shape.loss_parallel and not shape.loss_compiled  # a compiled loss_parallel is fused like the rest
    per_logit = np.where(parallel & (nt > 1), max(LOSS_PARALLEL_BYTES, logit_bytes(shape)), logit_bytes(shape))
    logits = per_logit * tok_mb * float(shape.vocab) / nt / float(shape.vocab_tiling)
    # the MTP modules' losses are computed in forward beside the main one: their logits live until backward too
    logits = logits * (1.0 + shape.mtp_outputs)
    # activation offloading (knowledge.cost_act_offload): the offloaded layers' saved activations are in host memory
    k = shape.activation_offload_layers
    first_acts = stored * tok_mb * kept_layers(st.first, k) * in_flight + _workspace(
        shape, transient * tok_mb, np.where(pp, 0.0, logits))
    last_acts = stored * tok_mb * kept_layers(st.last, k) + _workspace(shape, transient * tok_mb, logits)
    return first_acts, last_acts, logits


def chip_efficiency(chip: Chip) -> float:
    """The base matmul efficiency for ``chip``: its fitted figure, else the default."""
    return chip.matmul_efficiency or DEFAULT_EFFICIENCY


@dataclass(frozen=True)
class _MeshSplit:
    """Per-mesh axis sizes and how the batch splits over them (arrays of shape [M])."""

    nd: np.ndarray
    nf: np.ndarray
    nt: np.ndarray
    ns: np.ndarray
    ne: np.ndarray
    npp: np.ndarray
    chips: np.ndarray
    dp: np.ndarray  # data-parallel ranks (data x fsdp x expert)
    m: np.ndarray  # micro-batches per step
    mb: np.ndarray  # sequences per micro-batch per data rank
    tok_mb: np.ndarray  # tokens one chip processes per micro-batch
    net: AxisNetwork
    grid: ExpertGrid  # the MoE layers' own grid (Megatron-Core parallel folding; the mesh's axes otherwise)
    moe_net: AxisNetwork  # net with the expert axis widened to the MoE layers' all-to-all group


def _split(shape: Shape, net: AxisNetwork, n: np.ndarray) -> _MeshSplit:
    """Axis sizes, data-parallel ranks and the micro-batching of each mesh."""
    nd, nf, nt, ns, ne, npp = (n[:, i] for i in range(6))
    chips = n.prod(axis=1)
    S, B = float(shape.seq_len), float(shape.global_batch)
    # --- batch, micro-batches ------------------------------------------------------------------
    # The batch is split over data x fsdp (x expert: expert-parallel ranks are data-parallel for the
    # dense layers, as in GShard/MaxText). Sequences per data-parallel rank per step:
    dp = nd * nf * ne
    per_rank = B / dp
    if shape.micro_batch is not None:
        mb = np.minimum(float(shape.micro_batch), per_rank)
    else:
        m_guess = np.where(npp > 1, np.minimum(per_rank, 4.0 * npp), 1.0)  # [GPipe] M >= 4K
        if shape.grad_accum is not None:
            # MaxText: gradient_accumulation_steps micro-batches per step; a pipeline splits each further into
            # num_pipeline_microbatches (unset: GPipe's 4 x stages, at most one sequence per data rank each).
            pp_mb = float(shape.pipeline_microbatches) if shape.pipeline_microbatches else 4.0 * npp
            m_guess = np.where(
                npp > 1,
                np.minimum(per_rank, float(shape.grad_accum) * pp_mb),
                np.minimum(per_rank, float(shape.grad_accum)),
            )
        mb = per_rank / np.maximum(m_guess, 1.0)
    m = np.maximum(per_rank / np.maximum(mb, 1e-12), 1.0)
    tok_mb = mb * S / ns  # tokens one chip processes per micro-batch (tensor ranks share them)
    grid = expert_grid(shape.moe_ep, shape.moe_etp, nd, nt, ns, ne)

    return _MeshSplit(nd, nf, nt, ns, ne, npp, chips, dp, m, mb, tok_mb, net, grid, expert_network(net, grid.fold))


@dataclass(frozen=True)
class _Device:
    compute_s: np.ndarray  # slowest stage's compute time per step
    hbm_s: np.ndarray  # its HBM time beyond the compute
    model_flops: float
    moe_host_s: np.ndarray  # the fixed per-MoE-layer time inside compute_s (zero for dense models)
    stages: Stages  # which layers each pipeline stage runs (knowledge.cost_stages)
    moe_dispatch_s: np.ndarray  # TPU_SPARSE_MOE_EXTRA's time inside compute_s (zero but on MaxText's sparse path)


def attention_rate(shape: Shape, chip: Chip) -> float:
    """The attention core's achieved rate relative to the matmuls' on this chip, for the run's kernels.

    PyTorch trainers (``framework: other``: torchtitan's SDPA, llm-foundry's flash-attn; ``shape.attention_fa2``)
    run FlashAttention-2 on Hopper, which reaches about 35% of an H100's peak where cuDNN's fused attention
    (Megatron's Transformer Engine, XLA on GPU) and FlashAttention-3 use wgmma and TMA and reach 1.5-2x that (Shah
    et al. 2024, FlashAttention-3, arXiv 2407.08608, section 1): the catalog's ``attention_rate_fa2``, fitted across
    the PyTorch trainers' H100 / H200 tables (docs/cost-model.md, "FlashAttention-2 on Hopper").
    """
    if shape.attention_fa2 and chip.attention_rate_fa2 is not None:
        return chip.attention_rate_fa2
    return chip.attention_rate or 1.0


def _device_time(shape: Shape, chip: Chip, efficiency: float, mm: _MeshSplit) -> _Device:
    """Compute and HBM time of the slowest stage: FLOPs, per-chip matmul shapes, elementwise and score traffic."""
    L, D, F = float(shape.layers), float(shape.d_model), float(shape.d_ff)
    S, B = float(shape.seq_len), float(shape.global_batch)
    V = float(shape.vocab)
    E, K = float(shape.experts), float(shape.top_k)
    nt, ns, npp = mm.nt, mm.ns, mm.npp
    chips, tok_mb = mm.chips, mm.tok_mb
    # --- compute -------------------------------------------------------------------------------
    # Training FLOPs = 6 x active params x tokens + attention 12·L·H·hd·S per token [PaLM App. B].
    # The input embedding is a lookup, not a matmul, so V·d is left out of the 6N term.
    tokens = B * S
    # the input embedding is a lookup, not a matmul: leave its matrix out (tied: the one matrix is the output layer)
    matmul_params = max(shape.params_active - (0.0 if shape.tied_embeddings else V * D), 0.0)
    matmul_params += shape.mtp_outputs * V * D  # each MTP module runs the shared output layer again
    expert_active = shape.params_expert * K / E if shape.is_moe else 0.0
    dense_params = matmul_params - expert_active
    # 3 x (2·H·qk·S for QK^T + 2·H·v·S for AV) per layer per token: 12·L·H·hd·S when qk = v = head_dim (MLA: qk_nope +
    # qk_rope and v_head_dim; the projections are in the 6N term); sliding-window (local) layers attend to at most
    # their window of keys (Mistral, Gemma 2/3, GPT-OSS)
    keys = shape.attention_keys or S
    attn_flops = 6.0 * shape.n_attn * shape.heads * (shape.head_dim + shape.v_dim) * keys * tokens
    # Mamba-2's chunked scan (SSD) outside its projections: Megatron's estimate 7 x d_inner x state FLOPs per token
    # per layer forward (training.py num_floating_point_operations, mamba_layer_flops), x 3 for training
    ssm_flops = 3.0 * SSM_SCAN_FLOPS * shape.mamba_layers * shape.mamba_inner * shape.mamba_state * tokens
    # Rematerialization re-runs part of the forward in backward: 2 FLOPs per re-run matmul parameter per
    # token per layer, and the attention core's forward (1/3 of its training FLOPs) when it is recomputed
    # (knowledge.cost_remat.recompute_params_per_layer; [KOR §5]: full recompute ~ +1/3).
    spec = shape.spec
    dims = _dims(shape)
    re_attn, re_mlp, re_core = recompute_params_per_layer(spec, dims)
    moe_mlp = re_mlp * recompute_routed_share(spec, dims)  # shared experts and dense_layers recompute as dense matmuls
    # LoRA: frozen base weights run forward (2) and pass the gradient to their input (2) but compute no weight
    # gradient (knowledge.cost_peft); the adapters train as usual (6 FLOPs per parameter per token, at the dense rate)
    per_param = 4.0 if shape.frozen_base else 6.0
    adapters = 6.0 * shape.lora_active * tokens
    dense_flops = per_param * dense_params * tokens + 2.0 * L * (re_attn + re_mlp - moe_mlp) * tokens + adapters
    expert_flops = per_param * expert_active * tokens + 2.0 * L * moe_mlp * tokens
    if shape.moe_dense_capacity and shape.is_moe:
        dense_flops = dense_flops + _dense_dispatch_flops(shape, tokens, rerun=moe_mlp > 0)
        expert_flops = expert_flops * shape.moe_dense_capacity  # capacity-sized buffers, padding computed too
    core_share = spec.core_recompute_share if re_core else 0.0
    attn_hw = attn_flops * (1.0 + core_share / 3.0)
    model_flops = per_param * matmul_params * tokens + adapters + attn_flops + ssm_flops
    peak = chip.peak_bf16_flops * efficiency
    bw = chip.hbm_bandwidth * efficiency

    # Per-chip matmul efficiency follows the per-chip matmul shapes: tokens per micro-batch per chip, d_model,
    # and the tensor-sharded widths (d_ff / t, heads x head_dim / t, vocab / t): narrower matmuls lose
    # efficiency (tile and wave quantization, fixed per-kernel cost), fitted across published tables
    # (docs/cost-model.md, "Matmul efficiency").
    f_mlp = shape_factor(tok_mb, D, F / nt)
    f_att = shape_factor(tok_mb, D, shape.heads * shape.head_dim / nt)
    f_out = shape_factor(tok_mb, D, max(V, 1.0) / nt)
    f_core = attention_core_factor(tok_mb, S / ns, float(shape.head_dim))
    share = _matmul_shares(shape)
    slow_dense = share["mlp"] / f_mlp + share["attn"] / f_att + share["out"] / f_out
    if share["mamba"]:
        slow_dense = slow_dense + share["mamba"] / shape_factor(tok_mb, D, float(shape.mamba_in_proj) / nt)

    # Roofline per matmul group: time = max(FLOPs / peak, bytes / HBM BW) with bytes = FLOPs / intensity.
    # Intensity follows tokens per chip per micro-batch (weights re-read every micro-batch) [SB rooflines].
    i_dense = _intensity(tok_mb, D, F / nt)
    # Tokens each local expert sees per micro-batch: a chip's share of the routed token-passes over its E / ep
    # experts, each split over etp ranks (tok_mb x K x ne / E on the mesh's own grid, etp = tensor, ep = expert).
    ep, etp = mm.grid.ep, mm.grid.etp
    tok_expert = tok_mb * K * ep * etp / (E * nt)
    W = float(shape.expert_width)  # the routed experts' input width: d_model, or LatentMoE's latent
    i_expert = _intensity(tok_expert, W, F / etp)
    # fp8 linear layers (Transformer Engine, torchao Float8) run the dense matmuls at the fp8 peak; the
    # attention core stays in bf16.
    # Quantized int8 matmuls (MaxText quantization: int8, AQT) run at the int8 peak where one is published.
    mm_peak = peak * (chip.peak_fp8_flops / chip.peak_bf16_flops) if shape.fp8 and chip.peak_fp8_flops else peak
    if shape.fp8_rowwise and chip.peak_fp8_flops:  # torchao's rowwise recipe: a fitted fraction of the fp8 gain
        mm_peak = peak * min(ROWWISE_FP8_SPEEDUP, chip.peak_fp8_flops / chip.peak_bf16_flops)
    # NVFP4 linear layers run at the dense fp4 peak only where the vendor publishes one (Blackwell), else bf16.
    if shape.fp4 and chip.peak_fp4_flops:
        mm_peak = peak * (chip.peak_fp4_flops / chip.peak_bf16_flops)
    if shape.int8 and chip.peak_int8_ops:
        mm_peak = peak * (chip.peak_int8_ops / chip.peak_bf16_flops)
    f_expert = shape_factor(tok_expert, W, F / etp)
    f_mamba = shape_factor(tok_mb, D, float(shape.mamba_in_proj) / nt) if share["mamba"] else 1.0
    t_dense_c, t_expert_c = _matmul_times(shape, chip, peak, mm_peak, dense_flops / chips, expert_flops / chips, share,
                                          {"mlp": f_mlp, "attn": f_att, "mamba": f_mamba, "out": f_out}, f_expert)
    # Flash attention: compute-bound at any practical S. Causal context parallelism without load balancing
    # leaves the last rank the whole lower triangle: 2·cp/(cp+1) of the mean [Megatron-Core context
    # parallelism docs; Liu et al. 2023, ring attention] unless the sequence is split in balanced chunks.
    cp_imbalance = 1.0 if shape.cp_load_balanced else 2.0 * ns / (ns + 1.0)
    # The attention core's kernels reach another fraction of peak than the GEMMs on some generations (a fitted
    # attention_rate in the catalog: Blackwell), else the matmul rate times its own shape factor.
    t_attn = attn_hw / chips / (peak * attention_rate(shape, chip)) / f_core * cp_imbalance
    # MaxText's dropless routed-expert path on TPU (sort, ragged grouped matmuls, unsort) costs a fitted multiple of
    # the routed experts' GEMM time at the bf16 rate beyond it, whatever the matmul dtype (TPU_SPARSE_MOE_EXTRA)
    dispatch = _tpu_sparse_moe_extra(shape, chip, expert_flops / chips / peak / f_expert)
    compute_s = t_dense_c + t_expert_c + t_attn + dispatch
    if ssm_flops:  # the scan runs in bf16 whatever the linear layers' dtype (re-run too under full recompute)
        compute_s = compute_s + ssm_flops * (1.0 + (1.0 / 3.0 if spec.megatron_full else 0.0)) / chips / peak
    hbm_s = np.maximum(0.0, dense_flops / chips / (i_dense * bw) - t_dense_c) + np.maximum(
        0.0, expert_flops / chips / (i_expert * bw) - t_expert_c
    )
    hbm_s = hbm_s + _hbm_extras(shape, mm, bw, core_share, xla_tpu=shape.framework in XLA_FUSING and chip.family == "tpu")
    # MoE layers cost a fixed time per micro-batch beyond their FLOPs and bytes: routing, the token-count exchange
    # the all-to-all is sized by, permutation and many small kernels (MOE_LAYER_HOST_S, fitted across all MoE rows).
    # (only the layers with experts: a model's leading dense_layers have no router)
    # A re-run MoE forward (RematSpec.reruns_moe_layer) repeats its forward share (MOE_RERUN_HOST_SHARE) of that time.
    rerun = 1.0 + (MOE_RERUN_HOST_SHARE if spec.reruns_moe_layer else 0.0)
    per_moe_layer = rerun * moe_layer_s(shape) * mm.m if shape.is_moe else np.zeros_like(compute_s)
    # Pipeline stages: the slowest stage sets the step. Megatron puts the output layer + loss on the last
    # stage (the embedding lookup on the first costs little time but its weights live there) [PTD §2.2;
    # Megatron-Core pipeline layout]; frameworks that keep them outside the pipeline spread them evenly.
    out_share = share["out"] * f_out ** -1 / slow_dense * dense_flops / max(
        dense_flops + expert_flops + attn_hw + ssm_flops, 1.0)  # the output layer's share of the device time
    st = stages(shape, npp, out_share, compute_s + hbm_s, per_moe_layer)
    compute_s = compute_s * st.factor
    hbm_s = hbm_s * st.factor
    moe_host = per_moe_layer * st.slow_moe
    compute_s = compute_s + moe_host

    return _Device(compute_s, hbm_s, model_flops, moe_host, st, dispatch * st.factor)


# Share of the chip's HBM a prediction may fill (the rest: allocator fragmentation and runtime workspace);
# knowledge.costmodel's fit check uses the same figure.
MEMORY_HEADROOM = 0.1


def _muon_s(shape: Shape, mm: _MeshSplit, peak: float) -> np.ndarray:
    """Muon's orthogonalization time per chip: the weights a chip holds are split over tensor x pipeline x fsdp,
    the routed experts over the MoE grid's expert and expert-tensor ranks as well."""
    dense_shards = mm.nt * mm.npp * mm.nf
    expert_shards = mm.grid.ep * mm.grid.etp * mm.npp * mm.nf
    return muon_step_s(shape, mm.chips, dense_shards, expert_shards, peak)


def _prefetch_blocked(shape: Shape, chip: Chip, memory: dict[str, np.ndarray]) -> np.ndarray:
    """Meshes where XLA cannot gather the next layer's FSDP weights while the current one computes.

    The memory point prices two gathered layers (the one in use and the prefetched next); when that does not fit the
    usable HBM, XLA's latency-hiding scheduler, which keeps its schedule within the memory limit, starts each
    all-gather only when the previous layer's weights are freed: the forward and backward all-gathers wait on compute
    and sit on the critical path (the gradient reduce-scatter still overlaps). MaxText's GPT-3 175B and Llama 3.1
    405B recipes on 32 GB v6e chips (predicted 36 / 32 GB with two gathered layers) measured 22-25% slower than
    their table's roomier rows relative to the prediction; the mechanism, not a fit. PyTorch FSDP prefetches by
    its own setting and is left as it was.
    """
    total = np.maximum(memory["_first_stage_total"], memory["_last_stage_total"])
    if shape.framework not in XLA_FUSING:
        return np.zeros_like(total, dtype=bool)
    return total > chip.hbm_bytes * (1.0 - MEMORY_HEADROOM)


def tpu_sparse_moe(shape: Shape, chip: Chip) -> bool:
    """MaxText's dropless (sparse_matmul) MoE on a TPU: the runs TPU_SPARSE_MOE_EXTRA prices."""
    return shape.is_moe and shape.framework in XLA_FUSING and chip.family == "tpu" and not shape.moe_dense_capacity


def _tpu_sparse_moe_extra(shape: Shape, chip: Chip, expert_bf16_s: np.ndarray) -> np.ndarray:
    """Seconds MaxText's dropless MoE path on TPU costs beyond its routed experts' FLOPs (``TPU_SPARSE_MOE_EXTRA``
    x their GEMM time at the bf16 rate, scaled down by E / ``TPU_SPARSE_MOE_EXPERTS`` for coarser expert sets);
    zero elsewhere: GPU frameworks carry MOE_LAYER_HOST_S, and MaxText's dense dropping path is priced as FLOPs."""
    if not tpu_sparse_moe(shape, chip):
        return np.zeros_like(expert_bf16_s)
    share = min(1.0, float(shape.experts) / TPU_SPARSE_MOE_EXPERTS)
    return TPU_SPARSE_MOE_EXTRA * share * expert_bf16_s


def _dense_dispatch_flops(shape: Shape, tokens: float, *, rerun: bool) -> float:
    """FLOPs of MaxText's dense MoE dispatch and combine (layers/moe.py dense_matmul, capacity_factor > 0): per
    sequence, ``BSM,BSEC -> EBCM`` and back with capacity C = S x top_k x cf / E, 2 x E x C x d = 2 x S x top_k x cf x
    d FLOPs per token each, forward (x 3 with backward; x 4 when remat re-runs the experts' forward)."""
    passes = 4.0 if rerun else 3.0
    per_token = 2.0 * 2.0 * float(shape.seq_len) * float(shape.top_k) * shape.moe_dense_capacity * float(shape.d_model)
    return passes * per_token * float(shape.moe_layers) * tokens


def _matmul_times(shape: Shape, chip: Chip, peak: float, mm_peak: float, dense: np.ndarray, expert: np.ndarray,
                  share: dict[str, float], f: dict[str, Any], f_expert: Any) -> tuple[Any, Any]:
    """Seconds of the dense and the routed-expert matmuls per chip (``dense`` / ``expert``: their FLOPs per chip),
    each part at its precision: the run's low-precision rate ``mm_peak``; bf16 where the framework or the config
    keeps a part there (the LM head, Megatron's edge layers); a per-module precision recipe's rates
    (knowledge.cost_module_precision); MXFP8's dense kernel ratio (knowledge.cost_fp8_recipe)."""
    # The output layer stays in bf16 under low-precision linear layers where the framework leaves it out:
    # torchtitan's float8 converter (module_filter_fn fqn != "output" @9dec370; [float8] filter_fqns = ["output"])
    # and Megatron-Core, whose LM head is not a Transformer Engine module (cost_shapes._lm_head_bf16)
    out_bf16 = (shape.fp8_casts or shape.lm_head_bf16) and mm_peak > peak
    # MXFP8's block-scaled dense GEMMs run slower than per-tensor fp8 ones; expert grouped GEMMs do not
    # (knowledge.cost_fp8_recipe: Transformer Engine's kernel benchmark, checked on published pairs)
    mx = MXFP8_DENSE_GEMM_SLOWDOWN if shape.fp8 and shape.fp8_recipe == "mxfp8" and mm_peak > peak else 1.0
    # a per-module recipe's precisions as matmul time against the run's own rate: the dense GEMMs' (MXFP8's kernel
    # ratio ``mx`` included for an MXFP8 run, a class moved to MXFP8 paying it) and the experts' (which never do)
    ratio = {"fp8": chip.peak_fp8_flops, "fp4": chip.peak_fp4_flops}
    base = {"bf16": mm_peak / peak, **{k: mm_peak / (peak * (v / chip.peak_bf16_flops) if v else peak)
                                       for k, v in ratio.items()}}
    mods = group_multipliers(shape, {**{k: v / mx for k, v in base.items()}, "mxfp8": MXFP8_DENSE_GEMM_SLOWDOWN},
                             {**base, "mxfp8": 1.0})
    g = mods[0] if mods is not None else {"mlp": 1.0, "attn": 1.0, "mamba": 1.0}
    layers = {k: share[k] / f[k] for k in ("mlp", "attn", "mamba")}
    low = sum(layers[k] * g[k] for k in layers) + (0.0 if out_bf16 else share["out"] / f["out"])
    # Megatron-Core's first_last_layers_bf16 keeps some whole layers in bf16 (cost_shapes._bf16_layer_share)
    b16 = shape.bf16_layer_share if mm_peak > peak else 0.0
    t_dense = dense / mm_peak * low * (1.0 - b16) * mx + dense / peak * (sum(layers.values()) + (
        0.0 if out_bf16 else share["out"] / f["out"])) * b16
    if out_bf16:
        t_dense = t_dense + dense / peak * share["out"] / f["out"]
    e = mods[1] if mods is not None else 1.0
    return t_dense, expert / f_expert * ((1.0 - b16) * e / mm_peak + b16 / peak)


def _hbm_extras(shape: Shape, mm: _MeshSplit, bw: float, core_share: float, *, xla_tpu: bool) -> np.ndarray:
    """HBM time outside the matmuls: elementwise work, and the attention scores without a flash kernel."""
    L, D = float(shape.layers), float(shape.d_model)
    S, B = float(shape.seq_len), float(shape.global_batch)
    nt, ns, npp, dp = mm.nt, mm.ns, mm.npp, mm.dp
    spec = shape.spec
    # Elementwise work (norms, residual adds, activation functions, dropout, bias) streams HBM: ~EW_BYTES x
    # width bytes per token per layer, on the d_model-sized tensors (replicated over tensor ranks unless
    # Megatron sequence parallelism / GSPMD shards them [KOR §4.2]) and the MLP activations over tensor ranks: a MoE
    # token passes through top_k experts (and any shared ones), so its activation function runs over d_ff x top_k
    # (_mlp_width), not one expert's d_ff.
    # Its share of the step falls as 1/d_model against the matmuls (d_model^2): why measured efficiency rises
    # with hidden size in published scaling tables. Re-run in backward under full recompute.
    emb_div = nt if shape.sequence_parallel else np.ones_like(nt)
    ew = EW_BYTES_XLA if xla_tpu else EW_BYTES_PYTORCH if shape.framework == "other" else EW_BYTES
    ew_passes = ew * (1.0 + spec.elementwise_recompute / 3.0)
    # (a hybrid stack's layer holds one norm + residual block, an MLP only on its - / E layers, and Mamba's
    # gating, convolution and norm over d_inner on its M layers)
    width = shape.block_share * D / emb_div + 0.5 * _mlp_width(shape) / nt
    if shape.mamba_layers:
        width = width + 0.5 * float(shape.mamba_inner) / nt * (shape.mamba_layers / max(L, 1.0))
    ew_bytes = ew_passes * (L / npp) * (B * S / (dp * ns)) * width
    extra = ew_bytes / bw
    # Without a flash kernel the [heads, S, S] attention scores go through HBM: written by the QK^T matmul,
    # read and written by the fused scale-mask-softmax and dropout, read by the AV matmul, and about twice that
    # in backward (~SCORE_BYTES per score element, counted from Megatron's unfused path; +1/3 when the
    # forward is recomputed). Flash attention keeps them on chip.
    if not shape.flash_attention:
        score_elems = (shape.n_attn / npp) * (B * S / (dp * ns)) * (shape.heads / nt) * S
        extra = extra + SCORE_BYTES * (1.0 + core_share / 3.0) * score_elems / bw
    if shape.fp8_casts:
        sharded, gathered = _cast_elements(shape)
        # tensorwise TP casts the column-parallel inputs on the sequence shard, then gathers fp8; the rowwise
        # recipes gather in bf16 and cast the gathered input on every tensor rank (torchtitan parallelize_llama)
        per_token = sharded / nt + np.where(shape.fp8_rowwise, gathered, gathered / nt)
        cast_bytes = ROWWISE_CAST_BYTES if shape.fp8_rowwise else FP8_CAST_BYTES
        extra = extra + cast_bytes * per_token * (L / npp) * (B * S / (dp * ns)) / bw
    return extra


def _cast_elements(shape: Shape) -> tuple[float, float]:
    """Elements per token per layer that torchao's Float8Linear casts to fp8, split into those cast on a tensor
    rank's shard and the column-parallel inputs (gathered over tensor ranks): every linear's input (q, k and v are
    separate linears in torchtitan's llama, each casting the same input) and its output gradient."""
    D, F = float(shape.d_model), float(shape.d_ff)
    q = float(shape.heads * shape.head_dim)
    kv = float(shape.kv_heads * shape.head_dim)
    column_inputs = 3.0 * D + (shape.mlp_matrices - 1) * D  # wq, wk, wv, w1 (w3)
    row_inputs = q + F  # wo, w2: already sharded on their input features
    grads = q + 2.0 * kv + D + (shape.mlp_matrices - 1) * F + D
    return row_inputs + grads, column_inputs


def node_dedup_share(experts: float, top_k: float, nodes: np.ndarray) -> np.ndarray:
    """Share of a token's cross-node all-to-all bytes left when the dispatcher sends it once per destination node.

    DeepSeek-V3 (technical report §3.2.2) and DeepEP's normal kernels send each token over IB once to every node
    holding one of its experts, then forward it over NVLink; Megatron-Core's flex dispatcher (DeepEP / HybridEP
    backends) does the same. With the top-k experts spread evenly (the published MoE benchmarks force-balance
    routing) over ``nodes`` groups of experts/nodes, a token reaches (nodes - 1)(1 - P(no expert on a node)) remote
    nodes instead of sending top_k (nodes - 1)/nodes copies across.
    """
    nodes = np.maximum(np.asarray(nodes, dtype=np.float64), 1.0)
    per_node = experts / nodes
    p_none = np.ones_like(nodes)
    for i in range(int(top_k)):
        p_none = p_none * np.clip((experts - per_node - i) / max(experts - i, 1.0), 0.0, 1.0)
    remote_nodes = (nodes - 1.0) * (1.0 - p_none)
    remote_copies = top_k * (nodes - 1.0) / nodes
    return np.where(nodes > 1, remote_nodes / np.maximum(remote_copies, 1e-12), 1.0)


def _collectives(shape: Shape, chip: Chip, mm: _MeshSplit, st: Stages,
                 fsdp_ring_s: np.ndarray) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Raw collective seconds per axis: (overlappable with compute, on the critical path). ``fsdp_ring_s``: the fsdp
    axis's ring latency per step (:func:`fsdp_latency`)."""
    zeros = np.zeros_like(mm.nd)
    comm_ovl = {k: zeros.copy() for k in AXIS_KEYS}  # overlappable with compute
    comm_crit = {k: zeros.copy() for k in AXIS_KEYS}  # on the critical path
    _weight_collectives(shape, mm, comm_ovl, fsdp_ring_s)
    _exposed_gradient_sync(shape, comm_ovl, comm_crit)
    _xla_cross_slice_sync(shape, mm, comm_ovl, comm_crit)
    _activation_collectives(shape, chip, mm, st, comm_ovl, comm_crit)
    return comm_ovl, comm_crit


def _fsdp_passes(shape: Shape) -> float:
    """FSDP's traffic per micro-batch in units of one all-gather of the layer weights: the forward and backward
    all-gathers, and the gradient reduce-scatter (only the adapters' under LoRA; twice the bytes in fp32)."""
    gathers = 1.0 if shape.fsdp_keep_gathered else 2.0  # SHARD_GRAD_OP: no backward all-gather
    return gathers + shape.trainable_share * (reduce_bytes(shape) / BF16 if shape.reduce_fp32 else 1.0)


def fsdp_calls(shape: Shape) -> float:
    """FSDP's collectives per layer per micro-batch: the forward and backward all-gathers (one under SHARD_GRAD_OP)
    and the gradient reduce-scatter (none when nothing of the layer trains)."""
    return (1.0 if shape.fsdp_keep_gathered else 2.0) + (1.0 if shape.trainable_share > 0 else 0.0)


def _fsdp_rounds(shape: Shape, mm: _MeshSplit) -> np.ndarray:
    """FSDP's passes over the weights per step, in micro-batches: one per micro-batch, except torchtitan under
    pipelining, which keeps the weights gathered and defers the reduce-scatter to the last micro-batch (see
    _stage_memory): one all-gather and one reduce-scatter per step, 2/3 of a micro-batch's three passes."""
    return np.where(mm.npp > 1, 2.0 / 3.0, mm.m) if _fsdp_unsharded_with_pp(shape) else mm.m


def fsdp_latency(shape: Shape, mm: _MeshSplit, axis: int = FSDP, group: np.ndarray | None = None) -> np.ndarray:
    """Seconds per step of ring latency in FSDP's (or ZeRO-3's) collectives on GPUs: each layer is one unit (PyTorch
    FSDP's transformer-block wrapping, Megatron-FSDP's per-layer buckets) whose gathers and reduce-scatter each pay
    NCCL's ring latency over the axis's ranks, or a ``group`` of them (knowledge.cost_network.ring_latency), per
    micro-batch, for the layers of one pipeline stage."""
    return _fsdp_rounds(shape, mm) * fsdp_calls(shape) * float(shape.layers) / mm.npp * ring_latency(mm.net, axis, group)


def dp_replicas(shape: Shape, nd: np.ndarray) -> np.ndarray:
    """Per mesh, the groups of data ranks that each hold the sharded model state whole (Megatron
    ``num_distributed_optimizer_instances``): as configured, at most the mesh's data ranks (a proposal with fewer
    data ranks cannot keep more groups than it has ranks); 1 without the setting."""
    return np.clip(float(shape.dp_replicas), 1.0, np.maximum(nd, 1.0))


def _zeropp(shape: Shape) -> bool:
    """Whether ZeRO++ changes the ZeRO-3 weight gathers (hpZ or qwZ; knowledge.cost_shapes._zeropp)."""
    return shape.hpz_partition > 1 or shape.quantized_weight_gather


def _zeropp_gathers(shape: Shape, net: AxisNetwork, axis: int, weights: np.ndarray, grads: np.ndarray) -> np.ndarray:
    """One micro-batch of ZeRO-3 traffic over ``axis`` under ZeRO++ (Wang et al. 2023): the forward gather over
    every rank of the axis (int8 under qwZ: half the bytes), the backward gather inside the hpZ group when there is
    one (consecutive ranks: a node's), and the gradient reduce-scatter (``grads``: its full bytes) over every rank."""
    scale = 0.5 if shape.quantized_weight_gather else 1.0
    ranks = net.n_fast[:, axis] * net.n_slow[:, axis]
    hpz = np.clip(float(shape.hpz_partition), 1.0, np.maximum(ranks, 1.0))
    backward = group_gather_time(scale * weights, net, axis, hpz) if shape.hpz_partition > 1 \
        else gather_time(scale * weights, net, axis)
    return gather_time(scale * weights, net, axis) + backward + gather_time(grads, net, axis)


def _weight_collectives(shape: Shape, mm: _MeshSplit, comm_ovl: dict[str, np.ndarray], fsdp_ring_s: np.ndarray) -> None:
    """Weight and gradient traffic, once per step or micro-batch: FSDP / ZeRO gathers, gradient reductions, and the
    fsdp axis's ring latency ``fsdp_ring_s``."""
    nf, nt, npp = mm.nf, mm.nt, mm.npp
    m, net = mm.m, mm.net
    P_ne, P_e = shape.params_dense, shape.params_expert
    # FSDP: per micro-batch, all-gather the weights in forward and again in backward, reduce-scatter
    # the gradients: 3 x (gathered bytes) [ZeRO §7.2.2: 1.5x the 2Ψ of data parallelism; SB
    # "FSDP": AllGather fwd + AllGather bwd + ReduceScatter, each V/W]. Prefetch overlaps with compute.
    ep, etp = mm.grid.ep, mm.grid.etp  # expert weights live on the MoE layers' grid (knowledge.cost_moe_grid)
    gathered = BF16 * (P_ne / (nt * npp) + P_e / (etp * npp * ep))
    fsdp_rounds = _fsdp_rounds(shape, mm)
    # torchtitan reduce-scatters in fp32 (reduce_dtype float32): the third gather moves twice the bytes
    # LoRA: the gradient reduce-scatter moves only the adapters' gradients (trainable_share of the bytes)
    trained = shape.trainable_share
    comm_ovl["fsdp"] = fsdp_rounds * _fsdp_passes(shape) * gather_time(gathered, net, FSDP)
    if shape.zero_stage >= 3 and _zeropp(shape):  # DeepSpeed ZeRO-3 read onto the fsdp axis
        comm_ovl["fsdp"] = fsdp_rounds * _zeropp_gathers(shape, net, FSDP, gathered,
                                                         (_fsdp_passes(shape) - 2.0) * gathered)
    comm_ovl["fsdp"] = comm_ovl["fsdp"] + fsdp_ring_s  # NCCL's ring latency, per layer per collective

    # Data: one gradient all-reduce per step of the (FSDP-sharded) bf16 gradient, 2V/W [SB; DESIGN.md].
    # Sequence ranks hold replicated weights (Megatron context parallel), so their gradients are
    # all-reduced too; expert ranks replicate the dense weights, so dense gradients reduce over them.
    weight_shard = BF16 * (P_ne / (nf * nt * npp) + P_e / (nf * etp * npp * ep))
    grad_shard = trained * weight_shard
    # MaxText reduces the gradients in grad_dtype (base.yml: float32, as its fp32 weights), torchtitan in fp32
    # (FSDP2 reduce_dtype); the other PyTorch trainers here in bf16 (Megatron's DDP bucket when
    # --grad-reduce-in-bf16 ...).
    g = reduce_bytes(shape)
    comm_ovl["data"] = allreduce_time(grad_shard * g / BF16, net, DATA)
    # DeepSpeed ZeRO-1/2 move the same bytes as the all-reduce (reduce-scatter + all-gather, ZeRO §7.2.1);
    # ZeRO-3 over data ranks gathers the weights in forward and backward per micro-batch and reduce-scatters
    # the gradients: 1.5x data parallelism's volume [ZeRO §7.2.2], priced as the fsdp axis is.
    # ZeRO-2 reduce-scatters at every micro-batch, not only at the accumulation boundary (DeepSpeed
    # engine.py allreduce_gradients: "ZeRO stage >= 2 communicates during non gradient accumulation
    # boundaries as well"), then all-gathers the updated parameters once: (m + 1) V/W, 2V/W at m = 1.
    if shape.zero_stage == 2:
        comm_ovl["data"] = (m + 1.0) * gather_time(grad_shard, net, DATA)
    if shape.zero_stage >= 3:
        comm_ovl["data"] = m * (2.0 + trained) * gather_time(weight_shard, net, DATA)
        if _zeropp(shape):
            comm_ovl["data"] = m * _zeropp_gathers(shape, net, DATA, weight_shard, grad_shard * g / BF16)
        ring = fsdp_latency(shape, mm, DATA)
        if shape.dp_replicas > 1:
            # Megatron-FSDP HSDP: the per-micro-batch gathers and reduce-scatters stay inside one group of data
            # ranks; once per step the group's gradient shard is all-reduced across the groups
            groups = dp_replicas(shape, mm.nd)
            group = mm.nd / groups
            comm_ovl["data"] = m * (2.0 + trained) * group_gather_time(weight_shard, net, DATA, group) + \
                strided_allreduce_time(grad_shard * g / BF16 / group, net, DATA, group, groups)
            ring = fsdp_latency(shape, mm, DATA, group)
        comm_ovl["data"] = comm_ovl["data"] + ring  # NCCL's ring latency, per layer per collective, as on fsdp
    if shape.framework == "megatron":
        comm_ovl["sequence"] = allreduce_time(grad_shard, net, SEQUENCE)
    else:  # sequence ranks shard the weights too: gather and reduce-scatter them like FSDP (see _stage_memory)
        comm_ovl["sequence"] = fsdp_rounds * _fsdp_passes(shape) * gather_time(gathered / nf, net, SEQUENCE)
    comm_ovl["expert"] = allreduce_time(trained * BF16 * P_ne / (nf * nt * npp), net, EXPERT)


def _exposed_gradient_sync(shape: Shape, comm_ovl: dict[str, np.ndarray], comm_crit: dict[str, np.ndarray]) -> None:
    """Move the share of the data-parallel gradient sync that Megatron runs outside compute onto the critical path.

    Megatron overlaps the gradient reduce with the backward pass only under ``--overlap-grad-reduce``, and the
    distributed optimizer's parameter all-gather with the next forward only under ``--overlap-param-gather``; both
    default to off (Megatron-LM arguments.py, DistributedDataParallelConfig). Off, they run after backward / before
    forward: ``shape.dp_exposed_share`` of the data-parallel terms (the reduce over data, context and, for the dense
    weights, expert ranks) is exposed whatever the compute."""
    share = shape.dp_exposed_share
    if share <= 0.0:
        return
    for k in ("data", "sequence", "expert"):
        comm_crit[k] = comm_crit[k] + share * comm_ovl[k]
        comm_ovl[k] = comm_ovl[k] * (1.0 - share)


def _pytorch_fsdp_exposed(shape: Shape, comm_ovl: dict[str, np.ndarray], comm_crit: dict[str, np.ndarray]) -> None:
    """Move ``FSDP_EXPOSED_PYTORCH`` of a PyTorch trainer's FSDP traffic onto the critical path.

    The model's overlap bound lets FSDP's per-layer all-gathers and reduce-scatters hide behind compute up to what the
    compute time allows; PyTorch's FSDP measures about half of that hidden. The mechanisms that would give it are
    known though not separately measured here: NCCL's kernels take SMs and HBM bandwidth from the GEMMs they overlap,
    FSDP copies each gathered flat buffer in and out and each gradient into its reduce-scatter buffer on the compute
    side, and the first gather of each pass and the last reduce-scatter have nothing to hide behind. The data-parallel
    gradient reduction of the same trainers (DDP's bucketed all-reduce, HSDP's all-reduce across replicas, DeepSpeed
    ZeRO's collectives) shares the mechanisms and gets the same share, so that a proposal never trades FSDP traffic for
    replica traffic only because one was priced as better hidden."""
    if shape.framework != "other":
        return
    for axis in ("fsdp", "data"):  # the data axis's gradient all-reduce (DDP, HSDP's replicas, ZeRO) runs the same way
        moved = FSDP_EXPOSED_PYTORCH * comm_ovl[axis]
        comm_crit[axis] = comm_crit[axis] + moved
        comm_ovl[axis] = comm_ovl[axis] - moved


def xla_data_sync_exposed(shape: Shape, net: AxisNetwork) -> np.ndarray:
    """Per mesh, whether the data-parallel gradient reduction runs on the critical path as ``_xla_cross_slice_sync``
    prices it: an XLA-compiled trainer whose data axis crosses the slow network."""
    if shape.framework not in XLA_FUSING:
        return np.zeros(net.n_slow.shape[0], dtype=bool)
    return net.n_slow[:, DATA] > 1


def _xla_cross_slice_sync(shape: Shape, mm: _MeshSplit, comm_ovl: dict[str, np.ndarray],
                          comm_crit: dict[str, np.ndarray]) -> None:
    """Put an XLA-compiled trainer's data-parallel gradient reduction on the critical path where it crosses the slow
    network (DCN between TPU slices, the inter-host network between GPU VMs).

    MaxText's multi-slice tables (TPU v4, v5e, v5p READMEs; the A3 H100 table over 1-16 VMs) measure each added slice
    at or above the time of the whole ring all-reduce of the gradient shard at the NIC's line rate (30 of 37 rows),
    where an overlapped reduction would cost a quarter of it or less: the data rule out hiding it behind the backward
    pass (docs/cost-model.md, "Cross-slice gradient reduction under XLA"). Over ICI / NVLink nothing changes."""
    slow = xla_data_sync_exposed(shape, mm.net)
    comm_crit["data"] = np.where(slow, comm_crit["data"] + comm_ovl["data"], comm_crit["data"])
    comm_ovl["data"] = np.where(slow, 0.0, comm_ovl["data"])


def _activation_collectives(shape: Shape, chip: Chip, mm: _MeshSplit, st: Stages, comm_ovl: dict[str, np.ndarray],
                            comm_crit: dict[str, np.ndarray]) -> None:
    """Activation traffic inside every layer or stage boundary: tensor, context K/V, expert all-to-all, pipeline."""
    D = float(shape.d_model)
    S, K = float(shape.seq_len), float(shape.top_k)
    nt, npp = mm.nt, mm.npp
    m, mb, tok_mb, net = mm.m, mm.mb, mm.tok_mb, mm.net
    local_layers = st.slow  # the slowest stage's layers (L / p for an even split without MTP)
    full = shape.spec.is_full
    # Tensor: 2 all-reduces of the [tokens, d_model] activations in forward and 2 in backward per
    # layer [MLM §3, Fig. 4]; with sequence parallelism each becomes AG + RS of the same cost [KOR §4.2.2];
    # full remat re-runs the forward's two [KOR §5]. Hard to overlap: on the critical path.
    n_ar = 6.0 if full else 4.0
    act = BF16 * tok_mb * D
    # (a hybrid stack's layer is one block: one collective pair, not a transformer layer's two)
    tp_comm = m * local_layers * shape.block_share * n_ar * allreduce_time(act, net, TENSOR)
    if shape.is_moe:
        # A MoE layer's MLP half (its gather before and scatter after the experts) runs over the expert-tensor
        # group: none when experts are whole (expert_tensor_parallel_size 1), the ring's (etp-1)/etp share else.
        etp = mm.grid.etp
        ring = np.divide((etp - 1.0) / etp, (nt - 1.0) / nt, out=np.ones_like(nt), where=nt > 1)
        moe_share = np.divide(st.slow_moe, local_layers, out=np.zeros_like(nt), where=local_layers > 0)
        tp_comm = tp_comm * (1.0 - 0.5 * moe_share * (1.0 - ring))
    if shape.tp_fp8_gather:
        # the forward's two all-gathers per layer (of the 2·n_ar gathers / reduce-scatters) move fp8: half the bytes
        forward_passes = 2.0 if full else 1.0
        tp_comm = tp_comm * (1.0 - 0.5 * 2.0 * forward_passes / (2.0 * n_ar))
    # Exposed by default; overlapped with the GEMMs only where the framework does it (Megatron
    # --tp-comm-overlap, Transformer Engine userbuffers).
    # torchtitan's async TP (micro-pipelined through symmetric memory) hides only part of it: ASYNC_TP_SHARE.
    # XLA's scheduler overlaps what has independent work beside it: all but the forward pass's pair.
    if shape.tp_comm_overlap:
        share = ASYNC_TP_SHARE if shape.async_tp else 1.0
    elif shape.framework in XLA_FUSING:
        share = (n_ar - XLA_TP_EXPOSED) / n_ar
    else:
        share = 0.0
    comm_ovl["tensor"] = share * tp_comm
    comm_crit["tensor"] = (1.0 - share) * tp_comm

    # Sequence/context: attention needs every chip's K and V: all-gather (or ring-pass) K,V in forward,
    # again in backward, reduce-scatter dK,dV: 3 gathers of the full-sequence K,V for the local KV heads
    # per layer (ring attention / Megatron context parallel). Overlaps with blockwise attention compute.
    kv_local = np.maximum(shape.kv_heads / nt, 1.0)  # KV heads replicate when tensor > kv_heads
    kv_bytes = BF16 * mb * S * kv_local * (shape.head_dim + shape.v_dim)  # K and V (MLA: as up-projected per head)
    comm_ovl["sequence"] = comm_ovl["sequence"] + m * (shape.n_attn / npp) * (4.0 if full else 3.0) * gather_time(
        kv_bytes, net, SEQUENCE
    )
    # Mamba-2 layers under context parallelism: Megatron-Core's MambaContextParallel turns the sequence-sharded
    # in_proj output into head-sharded full sequences by an all-to-all before the scan and back after it (z, x, B, C,
    # dt in; the scan output back), in forward and again in backward; blocking inside the layer, so on the critical
    # path (megatron/core/ssm/mamba_context_parallel.py).
    if shape.mamba_layers:
        mamba_a2a = BF16 * tok_mb * float(shape.mamba_in_proj + shape.mamba_inner) / nt
        passes = 3.0 if full else 2.0
        comm_crit["sequence"] = comm_crit["sequence"] + m * (shape.mamba_layers / npp) * passes * alltoall_time(
            mamba_a2a, net, SEQUENCE)

    # Expert: dispatch + combine all-to-all per MoE layer in forward and their transposes in backward
    # (4 per layer) [GS §2; SB "MoE"], each chip sending its routed tokens (top-k copies). With sequence
    # parallelism each tensor rank dispatches only its 1/t of the tokens (Megatron-Core MoEAlltoAllTokenDispatcher:
    # "A2A(EP)" on the rank's own tokens, then "AG(TP)"). On the critical path unless the framework overlaps it
    # with another micro-batch's compute (Megatron-Core overlap_moe_expert_parallel_comm).
    if shape.is_moe:
        # (LatentMoE dispatches the projected tokens: expert_width, not d_model)
        a2a = BF16 * tok_mb * K * float(shape.expert_width) / (nt if shape.sequence_parallel else 1.0)
        # over the MoE layers' all-to-all group: the expert axis, widened by ranks folded out of tensor / context
        moe_net = mm.moe_net
        share = node_dedup_share(float(shape.experts), K, moe_net.n_slow[:, EXPERT]) if shape.ep_node_dedup else 1.0
        # per MoE layer: the leading dense_layers dispatch nothing
        # (a re-run MoE forward, full recompute or Megatron's ``moe`` module, dispatches and combines again)
        rerun = shape.spec.reruns_moe_layer
        ep_comm = m * st.slow_moe * (6.0 if rerun else 4.0) * alltoall_time(a2a, moe_net, EXPERT, share)
        if shape.ep_comm_overlap:
            comm_ovl["expert"] = comm_ovl["expert"] + ep_comm
        else:
            comm_crit["expert"] = ep_comm

    # Pipeline: send activations forward and gradients back at each stage boundary, (m + p - 1) steps
    # each way on the critical schedule; Megatron's scatter/gather sends 1/t of the activation per
    # tensor rank [PTD §4.1]. Async sends overlap with the next micro-batch's compute.
    # Blocking in 1F1B (Megatron overlaps them only in the interleaved schedule, --overlap-p2p-communication);
    # interleaving with v model chunks per stage sends v times as often [PTD §2.2.2].
    v = float(max(shape.virtual_stages, 1))
    p2p = BF16 * tok_mb * D / nt
    sends = np.where(npp > 1, 2.0 * v * (m + npp - 1.0) * p2p / p2p_bandwidth(chip, net, PIPELINE), 0.0)
    if shape.p2p_overlap:
        comm_ovl["pipeline"] = sends
    else:
        comm_crit["pipeline"] = sends


def evaluate(
    shape: Shape,
    chip: Chip,
    chips_per_slice: int,
    ici: np.ndarray,
    dcn: np.ndarray,
    *,
    efficiency: float | None = None,
    overlap_miss: float = DEFAULT_OVERLAP_MISS,
) -> Terms:
    """Every cost term for each mesh in ``ici``/``dcn`` (int arrays [M, 6] in AXES order).

    ``efficiency`` defaults to the chip's fitted ``matmul_efficiency``, else :data:`DEFAULT_EFFICIENCY`.
    """
    if efficiency is None:
        efficiency = chip_efficiency(chip)
    # column-major: every term reads one axis's column ([:, a]) of these arrays, contiguous this way
    ici = np.asfortranarray(np.atleast_2d(np.asarray(ici, dtype=np.int64)))
    dcn = np.asfortranarray(np.atleast_2d(np.asarray(dcn, dtype=np.int64)))
    net: AxisNetwork = axis_networks(chip, chips_per_slice, ici, dcn)
    n = (ici * dcn).astype(np.float64)
    mm = _split(shape, net, n)
    dev = _device_time(shape, chip, efficiency, mm)
    fsdp_ring_s = fsdp_latency(shape, mm)
    comm_ovl, comm_crit = _collectives(shape, chip, mm, dev.stages, fsdp_ring_s)
    nt, npp = mm.nt, mm.npp
    m, mb, tok_mb = mm.m, mm.mb, mm.tok_mb
    compute_s, hbm_s, stage_factor = dev.compute_s, dev.hbm_s, dev.stages.factor
    local_layers = float(shape.layers) / npp
    v = float(max(shape.virtual_stages, 1))


    # --- memory per chip -------------------------------------------------------------------------
    # Model state [ZeRO §3.1]: weights, gradients and optimizer state in the bytes per parameter the run's
    # framework and config give (knowledge.cost_shapes._model_state), divided by the axes that shard them:
    # fsdp, tensor, pipeline, and expert for expert weights; data/sequence replicate. Megatron's distributed
    # optimizer shards the optimizer state over data x context (x expert for dense weights) as well.
    memory = _stage_memory(shape, mm, local_layers, dev.stages)
    blocked = _prefetch_blocked(shape, chip, memory)
    gather_part = np.where(blocked, comm_ovl["fsdp"] * 2.0 / _fsdp_passes(shape), 0.0)
    comm_ovl["fsdp"], comm_crit["fsdp"] = comm_ovl["fsdp"] - gather_part, comm_crit["fsdp"] + gather_part
    _pytorch_fsdp_exposed(shape, comm_ovl, comm_crit)

    # --- overlap bounds --------------------------------------------------------------------------
    device = compute_s + hbm_s
    ovl = sum(comm_ovl.values())
    crit = sum(comm_crit.values())
    # Lower bound: overlappable traffic hides behind compute up to the compute time; the data-parallel
    # gradient all-reduce can only hide behind the backward pass (~2/3 of the step's compute).
    low_ovl = np.maximum(np.maximum(0.0, ovl - device), comm_ovl["data"] - 2.0 / 3.0 * device)
    point_ovl = low_ovl + overlap_miss * (ovl - low_ovl)
    share = np.divide(point_ovl, ovl, out=np.zeros_like(ovl), where=ovl > 0)
    exposed = {k: comm_ovl[k] * share + comm_crit[k] for k in AXIS_KEYS}
    offload = offload_seconds(shape, chip, mm.chips, m, device, overlap_miss)  # DeepSpeed ZeRO offload
    if shape.activation_offload_layers:  # Megatron activation offloading: copies beyond what compute covers
        stored, _ = activation_bytes_per_token(shape, nt, dev.stages.slow)
        offload = offload + offload_copy_seconds(stored * tok_mb, dev.stages.slow, shape.activation_offload_layers,
                                                 m, chip.host_link_bandwidth, device)

    # Pipeline bubble: (p-1)/(v·m) of the slowest stage's busy time [PTD eq. 1; §2.2.2 interleaved: /v].
    bubble_frac = (npp - 1.0) / (v * m)

    stages = {
        "first_stage_memory": memory.pop("_first_stage_total"),
        "last_stage_memory": memory.pop("_last_stage_total"),
        "logits_bytes": memory.pop("_logits"),
        "prefetched_layer_bytes": memory.pop("_prefetched_layer"),
        "slowest_over_mean_stage": stage_factor,
        "fsdp_prefetch_blocked": blocked.astype(np.float64),
        "data_sync_exposed": xla_data_sync_exposed(shape, mm.net).astype(np.float64),
        "fsdp_ring_latency_s": fsdp_ring_s,
    }
    return Terms(
        compute_s=compute_s,
        hbm_s=hbm_s,
        comm_s={k: comm_ovl[k] + comm_crit[k] for k in AXIS_KEYS},
        exposed_s=exposed,
        exposed_low_s=low_ovl + crit,
        exposed_high_s=ovl + crit,
        nonoverlap_s=crit,
        bubble_frac=bubble_frac,
        micro_batches=m,
        micro_batch=mb,
        memory=memory,
        model_flops_per_chip=dev.model_flops / mm.chips,
        notes=net.notes,
        stages=stages,
        offload_s=offload,
        moe_host_s=dev.moe_host_s,
        moe_dispatch_s=dev.moe_dispatch_s,
        # the optimizer step runs once per step after the backward pass, outside the pipeline schedule
        optimizer_s=_muon_s(shape, mm, chip.peak_bf16_flops * efficiency) if shape.muon else None,
    )
