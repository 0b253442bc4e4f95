"""The model and training shape the cost model works from, with every default it had to assume.

``resolve_shape(run)`` reads a :class:`~bot.runs.record.RunRecord` once and returns a frozen
:class:`Shape`: the dimensions the formulas need (layers, widths, heads, experts, batch, sequence,
remat policy, optimizer) plus the plain-language list of what was assumed because the run did not say.
Everything downstream (the vectorized formulas, ``predict``, ``score_meshes``) reads only this object,
so one mesh and ten thousand meshes are costed from the same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bot.configs.common import as_bool
from bot.configs.pipeline_layout import check_layout, edge_stage_layout, rank_layers
from bot.errors import AsapError, UnknownChip
from bot.runs.record import RunRecord, TrainingSpec
from knowledge.cost_act_offload import offload_layers
from knowledge.cost_fp8_recipe import recipe_note
from knowledge.cost_model_source import config_model
from knowledge.cost_module_precision import module_precision, mtp_count, present_classes, run_precision
from knowledge.cost_packing import packing_note
from knowledge.cost_peft import ALL_TARGETS, DEFAULT_RANK, adapter_params_per_layer
from knowledge.cost_remat import RematSpec, config_policy, megatron_policy, runyaml_policy
from knowledge.cost_settings import TrainingSettings, dp_overlap_off, dtype_bytes, matmul_dtype, torchtitan_run
from knowledge.hardware import get_chip

RematPolicy = str  # the policy as written: "none", "full", "minimal", "save_dot_except_mlpwi", "selective", ...

# Bytes per parameter held for the optimizer (master weights + moments), fp32 unless noted.
# Source: ZeRO (Rajbhandari et al., 2019, §3.1 "Model States"): mixed-precision Adam keeps fp32 master
# weights, momentum and variance = 12 bytes/param, on top of 2 B bf16 weights and 2 B bf16 gradients
# ("16 Psi" in total). Adafactor keeps factored second moments (~0 per param) and, in MaxText and T5X,
# no first moment: fp32 master only. SGD (no momentum): master only. Lion: master + one fp32 moment.
# Muon (knowledge.cost_muon): master + one fp32 momentum.
OPTIMIZER_BYTES_PER_PARAM: dict[str, float] = {"adamw": 12.0, "adam": 12.0, "adafactor": 4.0, "sgd": 4.0, "lion": 8.0,
                                               "muon": 8.0}
MUON_NAMES = frozenset({"muon", "dist_muon"})  # Megatron --optimizer values that run Muon

# What the unspecified remat policy defaults to per framework, and why (documented defaults):
#   MaxText base.yml: remat_policy: 'full'.  Megatron-LM: activation recomputation is off unless
#   --recompute-granularity is given.  Plain JAX: no jax.checkpoint unless the user adds it -> "none",
#   but generic training loops very often wrap blocks in jax.checkpoint, so for "other" we take MaxText's
#   conservative "full" (over-estimates compute slightly, never under-estimates memory much).
# Megatron requires --micro-batch-size (arguments.py validate_args); a config summary that leaves it out is priced
# at 1, the Megatron-Bridge recipes' default, with the band spanning NeMo 1.x's megatron_gpt_config.yaml default of 4
# (knowledge.cost_settings.unknown_settings). Fitted nowhere: on the Megatron-Core H100 weak-scaling table (MBS not
# stated) it moved Spearman 0.73 -> 0.88 against the earlier "one micro-batch, GPipe 4 x stages" guess.
MEGATRON_MICRO_BATCH = 1

DEFAULT_REMAT: dict[str, str] = {"maxtext": "full", "megatron": "none", "jax": "none", "other": "full"}


# Frameworks compiled by XLA: elementwise work fused into its neighbours, collectives scheduled asynchronously
# (knowledge.cost_core EW_BYTES_XLA, XLA_TP_EXPOSED).
XLA_FUSING = frozenset({"maxtext", "jax"})

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
    # --- read from the run's config (knowledge.cost_settings); the defaults are the run.yaml-only behaviour --
    remat_spec: RematSpec | None = None  # resolved policy (None: built from ``remat`` on demand)
    grad_accum: int | None = None  # micro-batches per step per data rank (MaxText gradient_accumulation_steps)
    pipeline_microbatches: int | None = None  # MaxText num_pipeline_microbatches (None: 4 x stages, GPipe)
    tied_embeddings: bool = False  # one vocab x d_model matrix serves the input lookup and the output layer
    vocab_tiling: int = 1  # MaxText num_vocab_tiling: logits and loss computed in that many chunks (1: whole)
    sequence_parallel: bool = True  # Megatron sequence_parallel; MaxText/GSPMD shard every activation over tensor
    flash_attention: bool = True  # attention scores not stored
    attention_fa2: bool = False  # a PyTorch trainer's FlashAttention-2 kernels (knowledge.cost_core.attention_rate)
    attention_kernel_stated: bool = False  # the config names the attention kernel (else the band spans cuDNN's rate)
    dropout: bool = False  # dropout masks stored
    fused_cross_entropy: bool = False  # logits kept in bf16 only (Megatron cross_entropy_loss_fusion)
    weight_bytes: float = 2.0  # bytes per parameter of the persistent weights
    grad_bytes: float = 2.0  # bytes per parameter of the gradient buffer
    optimizer_bytes: float = 12.0  # bytes per parameter of the optimizer state (before sharding)
    muon: bool = False  # Muon: Newton–Schulz orthogonalization priced in the step (knowledge.cost_muon)
    muon_distributed: bool = False  # dist_muon: each data rank orthogonalizes its share of the matrices
    optimizer_offload: bool = False  # optimizer state in host memory (MaxText optimizer_memory_host_offload)
    ep_comm_overlap: bool = False  # Megatron-Core overlap_moe_expert_parallel_comm: expert A2A off the critical path
    full_iteration_graph: bool = False  # Megatron-Core whole-step CUDA graph: MoE layers without host launches / syncs
    attention_keys: float = 0.0  # keys per query averaged over layers (the window on local layers); 0 = seq_len
    ep_node_dedup: bool = False  # the dispatcher sends a token once per destination node (DeepEP / HybridEP, flex)
    moe_ep: int = 0  # Megatron expert_model_parallel_size as configured (0: the mesh's expert axis; cost_moe_grid)
    moe_etp: int = 0  # Megatron expert_tensor_parallel_size (0: the mesh's tensor axis, Megatron-LM's default)
    moe_dense_capacity: float = 0.0  # MaxText dense MoE path with token dropping: the capacity factor (0: dropless)
    zero_stage: int = 0  # DeepSpeed ZeRO over the data ranks: 1 optimizer, 2 + gradients, 3 + parameters [ZeRO §5]
    param_offload: bool = False  # DeepSpeed ZeRO-3 offload_param: only the gathered layers live in HBM
    # Megatron --num-distributed-optimizer-instances: the data ranks shard model state within this many groups and
    # replicate it across them (partial distributed optimizer; Megatron-FSDP HSDP). 1: one group, every data rank.
    dp_replicas: int = 1
    # DeepSpeed ZeRO++ (Wang et al. 2023): hpZ keeps a second copy of the ZeRO-3 weights sharded over this many
    # consecutive data ranks, gathered there in backward (1: off); qwZ gathers the weights as int8 blocks
    hpz_partition: int = 1
    # Megatron without --overlap-grad-reduce / --overlap-param-gather: the share of the data-parallel gradient sync on
    # the critical path (knowledge.cost_core._exposed_gradient_sync); 0 = overlappable like any collective
    dp_exposed_share: float = 0.0
    quantized_weight_gather: bool = False
    optimizer_over_replicas: bool = False  # Megatron-FSDP HSDP outer "optim": optimizer state sharded across groups too
    settings: TrainingSettings | None = None  # what the config said (for notes and edits)
    # --- what meshes change beyond the even split (issue 12; docs/cost-model.md) -----------------------------
    virtual_stages: int = 1  # interleaved 1F1B: model chunks per pipeline stage (Megatron virtual_pipeline_model_parallel_size)
    pipeline_output_on_last: bool = True  # Megatron layout: embedding on the first stage, output layer + loss on the last
    # Megatron-Core account_for_embedding / account_for_loss_in_pipeline_split: the embedding (loss) takes one layer's
    # slot in the split, so the first (last) rank builds one decoder layer fewer (knowledge.cost_stages)
    pipeline_embedding_slot: bool = False
    pipeline_loss_slot: bool = False
    p2p_overlap: bool = False  # pipeline sends overlapped (Megatron --overlap-p2p-communication, interleaved only)
    tp_comm_overlap: bool = False  # tensor-parallel collectives overlapped with GEMMs (Megatron --tp-comm-overlap)
    cp_load_balanced: bool = True  # causal attention split in balanced chunks over context ranks (Megatron CP default)
    fsdp_gathered_under_pp: bool = False  # torchtitan: FSDP2 weights kept gathered, gradients unsharded under PP
    fsdp_keep_gathered: bool = False  # PyTorch FSDP SHARD_GRAD_OP: weights gathered once per micro-batch, kept to backward
    loss_parallel: bool = False  # torchtitan: under TP the cross-entropy runs on vocab-sharded logits (loss_parallel)
    loss_compiled: bool = False  # torchtitan with torch.compile (2025 layout): inductor fuses the cross-entropy
    reduce_fp32: bool = False  # torchtitan: FSDP2 reduce-scatters / all-reduces gradients in fp32 (mixed_precision_reduce)
    fsdp_over_expert: bool = False  # torchtitan: FSDP2 shards dense weights over dp_shard, expert ranks included
    fp8_rowwise: bool = False  # torchao's rowwise-scaled float8 recipe (torchtitan [float8] recipe_name rowwise*)
    tp_fp8_gather: bool = False  # torchtitan float8 tensorwise: the TP all-gathers of the linears' inputs in fp8
    fp8_casts: bool = False  # torchao Float8Linear (torchtitan float8): separate fp8 cast kernels per linear
    lm_head_bf16: bool = False  # the output layer stays a bf16 matmul under fp8 / fp4 linear layers (_lm_head_bf16)
    bf16_layer_share: float = 0.0  # share of the main stack's layers whose linear layers stay bf16 (_bf16_layer_share)
    # per-module precision recipe (cost_module_precision.module_precision): class -> ((precision, share of its
    # layers), ...); empty without one
    module_precision: tuple[tuple[str, tuple[tuple[str, float], ...]], ...] = ()
    async_tp: bool = False  # torchtitan async TP: its TP overlap hides ASYNC_TP_SHARE of the collectives
    fp8: bool = False  # linear layers in fp8 (training.dtype fp8): matmuls at the chip's fp8 peak where it has one
    fp8_recipe: str | None = None  # tensorwise / delayed / mxfp8 / blockwise / rowwise (cost_fp8_recipe); None: unstated
    fp4: bool = False  # linear layers in NVFP4 (training.dtype fp4): at the chip's published fp4 peak, else bf16
    int8: bool = False  # linear layers quantized to int8 (MaxText quantization: int8): at the chip's int8 peak
    # --- DeepSeek-V3-style MoE (ModelSpec shared_experts / dense_layers / MLA fields); defaults: plain MoE / MHA ---
    dense_layers: int = 0  # MoE models: the first k layers have a dense MLP of width dense_d_ff, no experts
    dense_d_ff: int = 0  # their MLP width (0: d_ff)
    shared_experts: int = 0  # always-active experts of width d_ff per MoE layer: dense compute, replicated weights
    moe_latent: int = 0  # LatentMoE: routed experts run in this width, behind d_model <-> latent projections (0: none)
    v_head_dim: int = 0  # per-head value / attention-output size (0: head_dim; MLA: v_head_dim, head_dim = qk_nope + rope)
    mla_latent: int = 0  # MLA: per-token width of the compressed latents (q_lora + kv_lora + the shared rope key)
    attn_params_layer: float = 0.0  # attention projection parameters per layer (0: the standard / GQA count)
    # --- hybrid Mamba stacks (ModelSpec.layer_pattern: every layer is one Mamba, attention, MLP or MoE block) -----
    attn_layers: int = -1  # layers with self-attention (-1: every layer, a transformer)
    mlp_layers: int = -1  # layers with an MLP or MoE block (-1: every layer)
    mamba_layers: int = 0  # Mamba-2 layers
    mamba_inner: int = 0  # d_inner = mamba heads x head dim
    mamba_in_proj: int = 0  # in_proj output width: 2 d_inner + 2 groups x state + heads (z, x, B, C, dt)
    mamba_bc: int = 0  # 2 x groups x state (the B and C channels)
    mamba_state: int = 0  # state size per head channel
    # --- multi-token prediction (ModelSpec.mtp_layers): ``layers`` counts them; they sit on the last pipeline stage
    mtp_layers: int = 0  # MTP layers (a transformer's: one per module; a hybrid pattern's: its layers after '/')
    mtp_modules: int = -1  # MTP modules, each another pass of the output layer and loss (-1: one per MTP layer)
    mtp_moe: int = -1  # MTP layers with experts (-1: every MTP layer of a MoE model)
    pipeline_layout: tuple[str, ...] = ()  # Megatron-Core pipeline_model_parallel_layout's virtual stages (unrolled)
    # --- LoRA fine-tuning (training.peft: lora; knowledge.cost_peft): the base weights are frozen -----------------
    lora_params: float = 0.0  # adapter parameters that train (0: full training, every weight trains)
    lora_active: float = 0.0  # adapter parameters a token passes through (routed experts' adapters: top-k of them)
    # --- packed fine-tuning sequences (knowledge.cost_packing): attention within each sample, lengths unknown -----
    packed: bool = False  # attention priced over the whole sequence (upper bound); the band's low edge takes ~none
    # --- activation offloading (knowledge.cost_act_offload): saved activations of that many layers per stage in host
    activation_offload_layers: int = 0

    @property
    def spec(self) -> RematSpec:
        """The resolved remat policy (built from the run.yaml label when no config said)."""
        if self.remat_spec is not None:
            return self.remat_spec
        label = self.remat if self.remat in ("none", "minimal", "dots", "full") else "full"
        return runyaml_policy(label, self.framework, source="run.yaml")

    @property
    def is_moe(self) -> bool:
        return self.experts > 1

    @property
    def mtp_outputs(self) -> int:
        """Extra passes of the output layer and loss: one per MTP module."""
        return self.mtp_layers if self.mtp_modules < 0 else self.mtp_modules

    @property
    def mtp_moe_layers(self) -> int:
        """MTP layers with experts."""
        if self.mtp_moe >= 0:
            return self.mtp_moe
        return self.mtp_layers if self.is_moe else 0

    @property
    def frozen_base(self) -> bool:
        """LoRA: the base weights compute no weight gradient and hold no gradient or optimizer state."""
        return self.lora_params > 0

    @property
    def trainable_share(self) -> float:
        """Trainable parameters per parameter held: 1 for full training, the adapters' share under LoRA (their
        gradients, optimizer state and gradient traffic scale by it)."""
        return self.lora_params / max(self.params_total, 1.0) if self.frozen_base else 1.0

    @property
    def n_attn(self) -> int:
        """Layers with self-attention (all of a transformer's)."""
        return self.layers if self.attn_layers < 0 else self.attn_layers

    @property
    def n_mlp(self) -> int:
        """Layers with an MLP or MoE block (all of a transformer's)."""
        return self.layers if self.mlp_layers < 0 else self.mlp_layers

    @property
    def block_share(self) -> float:
        """Norm + residual blocks per layer relative to a transformer layer's two (attention, MLP): 1 for a
        transformer, 1/2 for a hybrid stack, whose layers each hold one block (one norm, one tensor-parallel
        collective pair)."""
        return (self.n_attn + self.n_mlp + self.mamba_layers) / max(2.0 * self.layers, 1.0)

    @property
    def moe_layers(self) -> int:
        """Layers with experts (the leading dense_layers have none); 0 for a dense model."""
        return self.n_mlp - self.dense_layers if self.is_moe else 0

    @property
    def v_dim(self) -> int:
        """Per-head value size (MLA's v_head_dim, else head_dim)."""
        return self.v_head_dim or self.head_dim

    @property
    def attn_params(self) -> float:
        """Attention projection parameters per layer (MLA: down and up projections; else q, k, v, o)."""
        if self.attn_params_layer:
            return self.attn_params_layer
        return float(self.d_model * self.head_dim * (2 * self.heads + 2 * self.kv_heads))

    @property
    def dense_mlp_params(self) -> float:
        """MLP parameters computed for every token outside the routed experts: a dense model's MLPs, or a MoE
        model's dense_layers and shared experts (dense compute, weights replicated over the expert axis)."""
        if not self.is_moe:
            return float(self.n_mlp * self.mlp_matrices * self.d_model * self.d_ff)
        dense = self.dense_layers * self.mlp_matrices * self.d_model * (self.dense_d_ff or self.d_ff)
        shared = self.shared_experts * self.mlp_matrices * self.d_model * self.d_ff
        latent = 2 * self.d_model * self.moe_latent  # LatentMoE's down and up projections, run for every token
        return float(dense + self.moe_layers * (shared + latent))

    @property
    def expert_width(self) -> int:
        """Width the routed experts' matmuls run in and their tokens are dispatched at: the latent under
        LatentMoE, else d_model."""
        return self.moe_latent or self.d_model

    @property
    def params_dense(self) -> float:
        """Parameters that are not MoE expert weights (attention, norms, embeddings, dense MLPs)."""
        return self.params_total - self.params_expert

    @property
    def tokens_per_step(self) -> int:
        return self.global_batch * self.seq_len


def missing_for_prediction(run: RunRecord, settings: TrainingSettings | None = None) -> list[str]:
    """Which run.yaml fields an absolute prediction still needs ([] when enough is known).

    The global batch, sequence length and model dimensions may also come from the run's config (``settings``).
    """
    missing: list[str] = []
    cm = config_model(run, settings)
    why = f"; the config: {'; '.join(cm.problems)}" if cm.problems else ""
    m, t = cm.record.model, run.training
    if m is None:
        missing.append(f"model (layers, d_model, d_ff, heads, ...{why})")
    else:
        for name in ("layers", "d_model", "heads"):
            if getattr(m, name) is None:
                missing.append(f"model.{name}")
        if m.d_ff is None and m.params is None:
            missing.append("model.d_ff (or model.params)")
        if why and any(x.startswith("model.") for x in missing):
            missing[-1] += why
    batch = (t.global_batch if t else None) or config_global_batch(run, settings)
    seq = (t.seq_len if t else None) or (settings.seq_len if settings else None)
    if t is None and not (batch and seq):
        missing.append("training (global_batch, seq_len)")
    else:
        if not batch:
            missing.append("training.global_batch")
        if not seq:
            missing.append("training.seq_len")
    return missing


def config_global_batch(run: RunRecord, settings: TrainingSettings | None) -> int | None:
    """Global batch as the config states it (Megatron global_batch_size; MaxText per_device x chips x accum;
    torchtitan local_batch_size x data-parallel degree)."""
    if settings is None:
        return None
    if settings.global_batch:
        return settings.global_batch
    if settings.per_device_batch:
        # MaxText counts JAX devices: two per TPU7x chip (RunRecord.jax_devices_per_chip)
        total = settings.per_device_batch * run.num_chips * run.jax_devices_per_chip * (settings.grad_accum or 1)
        if total >= 1 and float(total).is_integer():
            return int(total)
    if settings.local_batch and settings.batch_divisor and run.num_chips % settings.batch_divisor == 0:
        # torchtitan: global_batch_size -1 = local_batch_size x data-parallel degree (train.py)
        return settings.local_batch * (run.num_chips // settings.batch_divisor)
    return None


def effective_global_batch(run: RunRecord, settings: TrainingSettings | None) -> int | None:
    """Sequences per optimizer step: what the config states (it is what the job ran), else run.yaml's,
    scaled by a proposal's ``global_batch_factor`` when the config cannot state it itself."""
    stated = config_global_batch(run, settings)
    if stated:
        return stated
    t = run.training
    if t is None or not t.global_batch:
        return None
    factor = settings.global_batch_factor if settings is not None else 1.0
    return max(1, int(round(t.global_batch * factor)))


def resolve_shape(run: RunRecord, settings: TrainingSettings | None = None) -> Shape:
    """Resolve the run's model and training shape, recording each default taken.

    ``settings`` (read from the run's own config by :func:`knowledge.cost_settings.settings_from_config`)
    take precedence over run.yaml's ``training`` section and the framework defaults: the config is what
    the job ran. Where the two disagree the assumptions say so.

    Raises :class:`AsapError` naming the missing run.yaml fields when the model is too unknown to cost.
    """
    _require_known(run, settings)
    cm = config_model(run, settings)
    run = cm.record
    m = run.model
    t = run.training or TrainingSpec()
    assert m is not None and m.layers and m.d_model and m.heads  # checked above
    assumptions: list[str] = list(cm.notes)
    guessed: set[str] = set()

    dims = _model_numbers(m, assumptions, guessed)
    heads, kv_heads, head_dim, mla = dims["heads"], dims["kv_heads"], dims["head_dim"], dims["mla"]
    experts, top_k, vocab, d_ff = dims["experts"], dims["top_k"], dims["vocab"], dims["d_ff"]
    params_total, params_expert, params_active = dims["params_total"], dims["params_expert"], dims["params_active"]

    cfg = settings
    spec, remat_notes, remat_guessed = _resolve_remat(run, t.remat, cfg)
    assumptions.extend(remat_notes)
    if remat_guessed:
        guessed.add("remat")

    micro_batch, grad_accum = _batch_split(run, t, cfg, assumptions, guessed)

    stated = config_global_batch(run, cfg)
    global_batch = effective_global_batch(run, cfg) or 1
    if t.global_batch and stated and stated != t.global_batch and not (cfg is not None and cfg.changed):
        assumptions.append(f"run.yaml global_batch {t.global_batch} differs from the config's {stated}: using the config")
    seq_len = t.seq_len or (cfg.seq_len if cfg else None) or 1
    state = _model_state(run, cfg, assumptions)
    mm = _matmul_dtype(run, t, cfg, assumptions)
    recipe = _fp8_recipe(t, cfg, mm, assumptions, guessed)
    behaviour = _mesh_behaviour(run, cfg, assumptions)  # before the Shape: its notes belong in the assumptions
    keep_gathered = _fsdp_keep_gathered(run, cfg, assumptions)  # likewise
    hybrid = _hybrid_dims(m, assumptions)  # likewise
    rowwise = mm == "fp8" and cfg is not None and cfg.quantization == "fp8_rowwise"
    lm_head_bf16 = _lm_head_bf16(effective_framework(run.framework, cfg), mm, recipe, cfg, assumptions)
    bf16_share = _bf16_layer_share(m.layers, mm, cfg, assumptions)
    modules = module_precision(cfg.precision_rules if cfg is not None else None, m.layers, mtp_count(m),
                               run_precision(mm, recipe), bool(m.is_mla), assumptions, present_classes(m))
    if rowwise:
        assumptions.append(
            f"float8 rowwise recipe (torchao, config [float8] recipe_name): per-row scaling costs more than the "
            f"tensorwise recipe; its matmuls are priced at {ROWWISE_FP8_SPEEDUP:.2f}x the bf16 rate, not the fp8 "
            "peak (fitted across published rowwise rows, docs/cost-model.md), its TP all-gathers run in bf16, and it "
            "casts each linear's input and output gradient twice (per row for the forward, per column for the weight "
            "gradient); rowwise_with_gw_hp is priced the same (its bf16 weight-gradient GEMM is not priced apart)")
    mtp = _mtp(m, assumptions)  # likewise
    counts = m.layer_counts()
    mtp_layers = counts.mtp_layers if counts is not None else mtp  # a hybrid module may hold several layers
    layout = _pipeline_layout(m, cfg, mtp_layers, int(behaviour["virtual_stages"]), assumptions)
    lora = resolve_lora(t, cfg, m, dims, assumptions)
    packed = _packed(t, cfg, seq_len, assumptions)
    return Shape(
        lora_params=lora[0],
        lora_active=lora[1],
        packed=packed,
        activation_offload_layers=offload_layers(cfg, t.activation_offload_layers),
        layers=m.layers + mtp_layers,
        mtp_layers=mtp_layers,
        mtp_modules=mtp,
        mtp_moe=m.mtp_moe_layers,
        pipeline_layout=layout,
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
        global_batch=global_batch,
        seq_len=seq_len,
        attention_keys=m.attention_keys(seq_len),
        micro_batch=micro_batch,
        remat=spec.policy,
        optimizer=t.optimizer,
        framework=effective_framework(run.framework, cfg),
        distributed_optimizer=state["distributed_optimizer"],
        assumptions=tuple(assumptions),
        guessed=frozenset(guessed),
        remat_spec=spec,
        grad_accum=grad_accum,
        pipeline_microbatches=cfg.pipeline_microbatches if cfg is not None else None,
        vocab_tiling=max(1, cfg.vocab_tiling or 1) if cfg is not None else 1,
        tied_embeddings=bool(m.tied_embeddings),
        sequence_parallel=state["sequence_parallel"],
        flash_attention=state["flash_attention"],
        attention_fa2=_fa2_attention(run, cfg),
        fsdp_keep_gathered=keep_gathered,
        attention_kernel_stated=cfg is not None and cfg.attention_kernel is not None,
        dropout=state["dropout"],
        fused_cross_entropy=state["fused_cross_entropy"],
        weight_bytes=state["weight_bytes"],
        grad_bytes=state["grad_bytes"],
        optimizer_bytes=state["optimizer_bytes"],
        optimizer_offload=state["optimizer_offload"],
        muon=state["muon"],
        muon_distributed=state["muon_distributed"],
        zero_stage=state["zero_stage"],
        param_offload=state["param_offload"],
        dp_replicas=state.get("dp_replicas", 1),
        hpz_partition=state.get("hpz_partition", 1),
        dp_exposed_share=state.get("dp_exposed_share", 0.0),
        quantized_weight_gather=state.get("quantized_weight_gather", False),
        optimizer_over_replicas=state.get("optimizer_over_replicas", False),
        settings=cfg,
        fp8=mm == "fp8",
        fp8_recipe=recipe,
        fp8_rowwise=rowwise,
        # torchtitan: Float8ColwiseParallel / RowwiseParallel gather the tensorwise-scaled inputs in fp8
        # (enable_float8_tensorwise_tp, parallelize_llama.py @820504e); rowwise recipes gather in bf16
        tp_fp8_gather=mm == "fp8" and not rowwise and bool(behaviour["fsdp_gathered_under_pp"]),
        # a PyTorch trainer's fp8 linears cast inputs and output gradients in kernels of their own: torchao's
        # Float8Linear (torchtitan) and Transformer Engine's te.Linear (llm-foundry's fc_type: te); Megatron fuses the
        # casts into TE's LayerNormLinear and activation kernels (docs/cost-model.md, "fp8 casts of PyTorch trainers")
        fp8_casts=mm == "fp8" and (bool(behaviour["fsdp_gathered_under_pp"])
                                   or effective_framework(run.framework, cfg) == "other"),
        lm_head_bf16=lm_head_bf16,
        bf16_layer_share=bf16_share,
        module_precision=modules,
        async_tp=bool(behaviour["tp_comm_overlap"]) and bool(behaviour["fsdp_gathered_under_pp"]),
        fp4=mm == "fp4",
        int8=mm == "int8",
        dense_layers=(m.mlp_layers - m.moe_layers) if experts > 1 else 0,  # leading dense_layers / a pattern's -
        dense_d_ff=(m.dense_d_ff or 0) if experts > 1 else 0,
        shared_experts=(m.shared_experts or 0) if experts > 1 else 0,
        moe_latent=(m.moe_latent_size or 0) if experts > 1 else 0,
        **mla,
        **hybrid,
        **behaviour,
    )


def _mtp(m: Any, assumptions: list[str]) -> int:
    """Multi-token-prediction modules (ModelSpec.mtp_layers), priced as Megatron-Core builds them, with the sentence
    that says so; 0 without."""
    k = int(m.mtp_modules)
    counts = m.layer_counts()
    if k and counts is not None:
        assumptions.append(
            f"{k} multi-token-prediction module{'s' if k > 1 else ''} after '/' in the layer pattern: "
            f"{counts.mtp_layers} more layers ({counts.mtp_attention} attention, {counts.mtp_moe} MoE, "
            f"{counts.mtp_mlp} MLP, {counts.mtp_mamba} Mamba-2), a 2 x d_model -> d_model projection each and "
            "another pass of the output layer and loss per module, on the last pipeline stage (Megatron-Core's "
            "hybrid MultiTokenPredictionBlock; counted in model FLOPs as Megatron counts them)")
    elif k:
        kind = "MoE" if m.is_moe else "dense"
        assumptions.append(
            f"{k} multi-token-prediction module{'s' if k > 1 else ''}: each priced as one more {kind} decoder layer, "
            "a 2 x d_model -> d_model projection and another pass of the output layer and loss, all on the last "
            "pipeline stage (Megatron-Core MultiTokenPredictionBlock; counted in model FLOPs as Megatron counts them)")
    return k


def _pipeline_layout(m: Any, cfg: TrainingSettings | None, mtp: int, virtual: int,
                     assumptions: list[str]) -> tuple[str, ...]:
    """The config's pipeline layout (Megatron-Core pipeline_model_parallel_layout) checked against the model, with
    what each rank holds; () without one. A layout Megatron-Core would refuse is refused by name."""
    if cfg is None:
        return ()
    if cfg.pipeline_layout_problem:
        assumptions.append(f"{cfg.pipeline_layout_problem}; stages priced as an even split")
    stages, derived = cfg.pipeline_layout, False
    if not stages and cfg.pipeline_edges:
        first, last, pipe = cfg.pipeline_edges
        stages, derived = edge_stage_layout(m.layers, pipe, first, last, mtp), True
        if stages is None:
            assumptions.append(f"the config's first / last pipeline-stage sizes ({first} / {last}) do not split "
                               f"{m.layers} layers over pipeline {pipe} (Megatron refuses to start): stages priced as "
                               "an even split")
    if not stages:
        return ()
    problems = check_layout(stages, m.layers, mtp)
    if problems and derived:  # built here from first / last sizes: say so, price an even split
        assumptions.append(f"the config's first / last pipeline-stage sizes do not fit the model ({'; '.join(problems)}):"
                           " stages priced as an even split")
        return ()
    if problems:
        raise AsapError(f"pipeline_model_parallel_layout does not fit the model: {'; '.join(problems)} "
                        "(Megatron-Core validate_layer_layout refuses it)", source=cfg.source,
                        field="pipeline_model_parallel_layout",
                        hint="check num_layers / mtp_num_layers against the layout's t and m")
    if len(stages) % max(virtual, 1):
        assumptions.append(f"pipeline layout has {len(stages)} stages, not a multiple of {virtual} virtual stages: "
                           "stages priced as an even split")
        return ()
    pipe = len(stages) // max(virtual, 1)
    ranks = rank_layers(stages, pipe)
    held = "/".join(str(r.decoder + r.mtp) for r in ranks)
    how = "first / last stage sizes" if derived else "layout"
    assumptions.append(f"pipeline {how} from the config ({len(stages)} stages = pipeline {pipe} x {max(virtual, 1)} "
                       f"virtual): the ranks hold {held} decoder + MTP layers; it prices pipeline {pipe}, other "
                       "pipeline sizes get an even split")
    return stages


def _hybrid_dims(m: Any, assumptions: list[str]) -> dict[str, Any]:
    """Shape fields of a Megatron hybrid stack (ModelSpec.layer_pattern), with what is not priced; {} for a
    transformer."""
    counts = m.layer_counts()
    if counts is None:
        return {}
    if m.layers != counts.layers:  # run.yaml's layers beside a config's pattern (ModelSpec checks each file alone)
        raise AsapError(f"model.layers {m.layers} disagrees with the layer pattern, which holds {counts.layers} layers "
                        "(Megatron takes the pattern's length as the layer count)", source="run.yaml",
                        field="model.layers", hint="drop layers from run.yaml or make it the pattern's length")
    # (MTP layers after '/' included: Shape.layers counts them too)
    out: dict[str, Any] = {"attn_layers": counts.attention + counts.mtp_attention,
                           "mlp_layers": counts.mlp + counts.moe + counts.mtp_mlp + counts.mtp_moe,
                           "mamba_layers": counts.mamba + counts.mtp_mamba}
    mamba = m.mamba_dims()
    if mamba:
        out.update(mamba_inner=mamba["inner"], mamba_in_proj=mamba["in_proj"], mamba_state=mamba["state"],
                   mamba_bc=2 * mamba["groups"] * mamba["state"])
    assumptions.append(
        f"hybrid layer pattern: {counts.mamba} Mamba-2, {counts.attention} attention, {counts.mlp} MLP and "
        f"{counts.moe} MoE layers, each one norm + residual block; Mamba-2 layers priced as their in/out projections "
        "(dense matmuls) plus Megatron's SSD scan estimate (7 x d_inner x state FLOPs per token, forward) at the bf16 "
        "peak")
    return out


def _model_numbers(m: Any, assumptions: list[str], guessed: set[str]) -> dict[str, Any]:
    """Attention, MoE and vocabulary sizes with their defaults, and the total / routed / active parameters."""
    heads = m.heads
    kv_heads = m.kv_heads or heads
    if m.kv_heads is None and not m.is_mla:
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
    attn_per_layer = m.attention_params() or m.d_model * head_dim * (2 * heads + 2 * kv_heads)
    mla = _mla_dims(m, assumptions)
    if mla:  # MLA: every head has its own key and value (up-projected); head_dim is the query/key size
        head_dim, kv_heads = m.attention_head_dims()[0], heads
    d_ff = m.d_ff
    if d_ff is None and m.is_hybrid:
        raise AsapError("cannot derive model.d_ff from model.params with a layer_pattern: give d_ff (the MLP width; "
                        "per expert for MoE layers)", source="run.yaml", field="model.d_ff")
    if d_ff is None:
        # Invert ModelSpec.derived_params: params = L*(attn + mats*d*d_ff*E) + 2*V*d.
        assert m.params is not None
        per_layer = (m.params - (1 if m.tied_embeddings else 2) * vocab * m.d_model) / m.layers
        d_ff = max(1, int(round((per_layer - attn_per_layer) / (m.mlp_matrices * m.d_model * experts))))
        assumptions.append(f"d_ff not given: derived from params as {d_ff}")
        guessed.add("d_ff")
    params_total = m.derived_params() or 0.0
    if m.d_ff is None or m.params is not None:
        # Params given directly: keep the user's total; expert share from the dimensions.
        params_total = float(m.params) if m.params else params_total
    # routed experts only: shared experts and dense_layers' MLPs are dense weights (replicated over the expert axis)
    routed_layers = m.moe_layers + m.mtp_moe_layers
    params_expert = float(routed_layers * m.mlp_matrices * m.expert_width * d_ff * experts) if experts > 1 else 0.0
    if m.moe_latent_size and experts > 1:
        assumptions.append(
            f"LatentMoE: routed experts run in a {m.moe_latent_size}-wide latent (d_model {m.d_model} projected down "
            "before dispatch and back up after combine, two dense matmuls per MoE layer); tokens are dispatched at "
            "the latent width, the router and shared experts see d_model")
    params_expert = min(params_expert, params_total)
    params_active = params_total - params_expert + params_expert * top_k / experts
    return {"heads": heads, "kv_heads": kv_heads, "head_dim": head_dim, "mla": mla, "experts": experts,
            "top_k": top_k, "vocab": vocab, "d_ff": d_ff, "params_total": params_total,
            "params_expert": params_expert, "params_active": params_active}


def _require_known(run: RunRecord, settings: TrainingSettings | None) -> None:
    """AsapError naming the missing run.yaml fields when the model or batch is too unknown to cost."""
    missing = missing_for_prediction(run, settings)
    if missing:
        raise AsapError(
            f"cannot predict step time or memory: run {run.id!r} does not give {', '.join(missing)}",
            source="run.yaml",
            field="model" if run.model is None or any(x.startswith("model") for x in missing) else "training",
            hint="add the model dimensions and training.global_batch / seq_len to run.yaml (or point config: at a "
            "launch / config that states them); proposals then come with computed step-time and memory predictions",
        )


def _batch_split(run: RunRecord, t: TrainingSpec, cfg: TrainingSettings | None, assumptions: list[str],
                 guessed: set[str]) -> tuple[int | None, int | None]:
    """(micro-batch size, gradient-accumulation steps): the config's, else run.yaml's, else the framework's rule."""
    micro_batch = t.micro_batch
    grad_accum: int | None = None
    if cfg is not None and cfg.changed:
        assumptions.append(
            "proposed settings: " + ", ".join(f"{k} = {v}" for k, v in cfg.changed.items())
            + " (the rest as the run's config and run.yaml say)"
        )
    if cfg is not None and cfg.micro_batch:
        if t.micro_batch and t.micro_batch != cfg.micro_batch and "micro_batch" not in cfg.changed:
            assumptions.append(f"run.yaml says micro_batch {t.micro_batch}, the config {cfg.micro_batch}: using the config")
        micro_batch = cfg.micro_batch
    elif cfg is not None and effective_framework(run.framework, cfg) != "megatron" and (
            cfg.grad_accum or cfg.per_device_batch):
        # MaxText: global batch = per_device_batch_size x devices x gradient_accumulation_steps, so a step
        # holds exactly gradient_accumulation_steps micro-batches whatever the mesh (MaxText pyconfig).
        grad_accum = cfg.grad_accum or 1
        micro_batch = None
    if micro_batch is None and grad_accum is None and effective_framework(run.framework, cfg) == "megatron":
        micro_batch = MEGATRON_MICRO_BATCH
        assumptions.append(
            f"micro_batch_size not stated: priced at {MEGATRON_MICRO_BATCH} sequence per micro-batch, the Megatron-Bridge "
            "recipes' default and the published NeMo / Megatron-Bridge tables' usual value; Megatron always splits a "
            "rank's batch into micro-batches of that size (gradient accumulation; 1F1B with pipelining)"
        )
        guessed.add("micro_batch")
    if micro_batch is None and grad_accum is None:
        assumptions.append(
            "micro_batch not given: assumed one micro-batch per step without pipelining (no gradient "
            "accumulation); with pipeline > 1, min(per-rank batch, 4 x stages) micro-batches (GPipe: bubble "
            "negligible at M >= 4K)"
        )
        guessed.add("micro_batch")
    return micro_batch, grad_accum


def fp8_recipe_of(run: RunRecord, settings: TrainingSettings | None) -> str | None:
    """The stated fp8 scaling recipe of a run whose linear layers run in fp8, as the cost model prices it (the
    config's, else run.yaml's); None when the run is not fp8 or does not say."""
    t = run.training or TrainingSpec()
    return _fp8_recipe(t, settings, _matmul_dtype(run, t, settings, []), [], set())


def _fp8_recipe(t: TrainingSpec, cfg: TrainingSettings | None, mm: str, assumptions: list[str],
                guessed: set[str]) -> str | None:
    """The fp8 scaling recipe of an fp8 run: the config's, else run.yaml's; unstated is marked guessed (the step band
    widens on chips where MXFP8 runs, knowledge.costmodel)."""
    if mm != "fp8":
        return None
    recipe = (cfg.fp8_recipe if cfg is not None else None) or t.fp8_recipe
    if recipe is None:
        guessed.add("fp8_recipe")
    note = recipe_note(recipe)
    if note:
        assumptions.append(note)
    return recipe


def _matmul_dtype(run: RunRecord, t: TrainingSpec, cfg: TrainingSettings | None, assumptions: list[str]) -> str:
    """The dtype the linear layers' matmuls run in (bf16 / fp8 / fp4 / int8), with what it assumes."""
    # A config that turns fp8 on (Megatron --fp8-format, NeMo fp8: true) is what ran; one that says false does not
    # override a run.yaml stating fp8 (NeMo launcher YAMLs carry fp8: False and the launch turns it on).
    config_fp8 = cfg is not None and cfg.fp8 is True and t.dtype not in ("fp8", "fp4")
    # Megatron-Core --fp4-format (NVFP4) is what ran, whatever run.yaml's dtype says
    config_fp4 = cfg is not None and cfg.fp4 is True and t.dtype != "fp4"
    stated = "fp4" if config_fp4 else "fp8" if config_fp8 else t.dtype
    mm = matmul_dtype(stated, cfg.quantization if cfg is not None else None)
    if cfg is not None and cfg.quantization and mm != "bf16":
        assumptions.append(
            f"quantization {cfg.quantization} (config): the linear layers' matmuls run at the chip's {mm} peak where "
            "the catalog has one, else at bf16 (attention, elementwise work and memory stay as in bf16)"
        )
    elif mm == "fp8":
        te = effective_framework(run.framework, cfg) == "megatron"
        assumptions.append(
            f"{'fp8 (config)' if config_fp8 else 'dtype fp8'}: the linear layers' matmuls run at the chip's fp8 peak "
            "where it has one (attention and elementwise work stay in bf16)"
            + ("; Transformer Engine keeps the linear layers' saved inputs in fp8" if te else "")
        )
    elif mm == "fp4":
        assumptions.append(
            f"{'fp4 (config: --fp4-format)' if config_fp4 else 'dtype fp4'} (NVFP4): the linear layers' matmuls run at the chip's published dense fp4 peak, at its bf16 "
            "peak where the catalog has none (attention and elementwise work stay in bf16; saved activations are "
            "priced as bf16)"
        )
    elif t.dtype != "bf16":
        assumptions.append(f"dtype {t.dtype}: memory and FLOP rates still use the bf16 figures")
    return mm


def _lm_head_bf16(framework: str, mm: str, recipe: str | None, cfg: TrainingSettings | None, notes: list[str]) -> bool:
    """Whether the output layer stays a bf16 matmul while the linear layers run in fp8 / fp4.

    Megatron-Core builds the LM head as its own ``tensor_parallel.ColumnParallelLinear``, outside Transformer Engine,
    so TE's fp8 / fp4 autocast does not reach it; only ``fp8_output_proj`` with the MXFP8 recipe makes it a
    ``TELMHeadColumnParallelLinear`` (megatron/core/models/gpt/gpt_model.py and fp8_utils.py
    ``is_mxfp8_output_proj_active`` @ d98e8a64dd). With a large vocabulary that matmul is a real share of the step.
    """
    if framework != "megatron" or mm not in ("fp8", "fp4"):
        return False
    if mm == "fp8" and recipe == "mxfp8" and cfg is not None and cfg.fp8_output_proj:
        return False
    notes.append(f"output layer (LM head) priced in bf16: Megatron-Core runs it outside Transformer Engine's {mm} "
                 "(fp8_output_proj with MXFP8 opts it in)")
    return True


def _bf16_layer_share(layers: int, mm: str, cfg: TrainingSettings | None, notes: list[str]) -> float:
    """Share of the main stack's layers whose linear layers Megatron-Core runs in bf16 under fp8 / fp4
    (``first_last_layers_bf16``: the first ``num_layers_at_start_in_bf16`` and last ``num_layers_at_end_in_bf16``
    layers by global layer number, fp8_utils.py / fp4_utils.py ``is_first_last_bf16_layer`` @ d98e8a64dd).
    Megatron-Bridge's FP8 current-scaling presets keep 1 + 1 layers so (bf16_with_fp8_current_scaling_mixed), its
    Nemotron presets 2 + 2."""
    if mm not in ("fp8", "fp4") or cfg is None or not cfg.bf16_layers or layers <= 0:
        return 0.0
    start, end = cfg.bf16_layers
    kept = min(layers, start + end)
    if kept <= 0:
        return 0.0
    which = " and ".join(f"{where} {n}" for where, n in (("first", start), ("last", end)) if n)
    notes.append(f"first_last_layers_bf16: the {which} of {layers} layers run their linear layers in bf16, not {mm} "
                 f"({kept / layers:.0%} of the layers' matmuls); under pipeline parallelism they sit on the first and "
                 "last stages, priced here as spread evenly")
    return kept / layers


def _mla_dims(m: Any, notes: list[str]) -> dict[str, Any]:
    """Shape fields of multi-head latent attention (DeepSeek-V2/V3), {} for standard attention.

    MLA up-projects one key and value per head from a compressed latent, so the attention core runs at
    heads x (qk_nope + qk_rope) for QK^T and heads x v_head_dim for AV [DeepSeek-V3 report §2.1.1]: head_dim
    becomes the query/key size and kv_heads the query heads.
    """
    if not m.is_mla:
        return {}
    qk, v = m.attention_head_dims()
    notes.append(f"multi-head latent attention: q/k {qk} per head (nope {m.qk_nope_head_dim} + rope "
                 f"{m.qk_rope_head_dim}), v {v}, latent ranks q {m.q_lora_rank or 'full'} / kv {m.kv_lora_rank}")
    return {"v_head_dim": v,
            "mla_latent": (m.q_lora_rank or 0) + m.kv_lora_rank + m.qk_rope_head_dim,
            "attn_params_layer": float(m.attention_params())}


def effective_framework(stated: str, cfg: Any) -> str:
    """run.yaml's framework, or, when it leaves it at ``other``, the framework the config's own format names.

    A MaxText YAML or a Megatron launch is what ran, so its runtime's memory behaviour applies (an XLA program
    has no caching allocator to reserve memory; a Megatron/PyTorch one does).
    """
    fmt = getattr(cfg, "format", None)
    if stated == "other" and fmt in ("maxtext", "megatron"):
        return str(fmt)
    return stated


def _mesh_behaviour(run: RunRecord, cfg: TrainingSettings | None, notes: list[str]) -> dict[str, Any]:
    """How the framework places pipeline stages and overlaps TP / pipeline traffic.

    Read from the config's settings when they carry them (``virtual_pipeline``, ``tp_comm_overlap``,
    ``overlap_p2p``, ``cp_load_balance``; absent attributes mean "not stated"), else the framework's
    documented default: Megatron-LM puts the embedding on the first stage and the output layer + loss on the
    last, leaves TP communication exposed unless ``--tp-comm-overlap``, overlaps pipeline sends only in the
    interleaved schedule, and load-balances causal context parallelism; MaxText runs the embedding and
    output layer outside the pipeline (spread over all stages) and has no TP overlap by default.
    """
    framework = effective_framework(run.framework, cfg)  # the config's framework when run.yaml says "other"
    megatron = framework == "megatron"
    v = getattr(cfg, "virtual_pipeline", None) if cfg is not None else None
    virtual = int(v) if isinstance(v, int) and v > 1 else 1
    tp_overlap = getattr(cfg, "tp_comm_overlap", None) if cfg is not None else None
    p2p = getattr(cfg, "overlap_p2p", None) if cfg is not None else None
    balance = getattr(cfg, "cp_load_balance", None) if cfg is not None else None
    ep_overlap = getattr(cfg, "ep_comm_overlap", None) if cfg is not None else None
    dedup = bool(getattr(cfg, "ep_node_dedup", None)) if cfg is not None else False
    graph = bool(getattr(cfg, "full_iteration_graph", None)) if cfg is not None else False
    dense_cf = float(getattr(cfg, "moe_dense_capacity", None) or 0.0) if cfg is not None else 0.0
    if dense_cf:
        notes.append(f"MoE on MaxText's dense path with token dropping (capacity_factor {dense_cf:g}, sparse_matmul "
                     "off): experts run on capacity-sized buffers and tokens reach them through one-hot dispatch / "
                     "combine einsums over the sequence (MaxText layers/moe.py dense_matmul)")
    uneven = (getattr(cfg, "uneven_pipeline", None) or {}) if cfg is not None and megatron else {}
    if dedup:
        notes.append("MoE dispatch once per destination node (config: flex token dispatcher / DeepEP): a token crosses "
                     "the node network once per node holding its experts, then NVLink [DeepSeek-V3 §3.2.2]")
    if ep_overlap:
        notes.append("expert all-to-alls overlapped with another micro-batch's compute (config: "
                     "overlap_moe_expert_parallel_comm)")
    titan_config = getattr(cfg, "format", None) == "torchtitan"
    titan = torchtitan_run(run.tags, cfg)
    if titan and tp_overlap:
        notes.append("tensor-parallel collectives overlapped with the matmuls (config: torchtitan "
                     "enable_async_tensor_parallel with torch.compile, micro-pipelined async TP)")
    if tp_overlap is None and framework in XLA_FUSING:
        notes.append(
            "tensor-parallel collectives under XLA's async scheduling: the forward pass's exposed; the backward's "
            "(beside the weight-gradient matmuls) and a rematerialized forward's (beside the layer above's backward) "
            "overlapped"
        )
    elif tp_overlap is None:
        notes.append(
            "tensor-parallel collectives priced exposed (not overlapped): the config does not enable TP "
            "communication overlap (Megatron --tp-comm-overlap)"
        )
    if titan:
        notes.append(
            f"torchtitan ({'its TOML config' if titan_config else 'run tag'}): under pipelining FSDP2 keeps each stage's weights gathered for the step and its "
            "gradients unsharded until the last micro-batch (torchtitan apply_fsdp, reshard_after_forward=False)"
        )
    stated_lp = getattr(cfg, "loss_parallel", None) if cfg is not None else None
    compiled_loss = titan and bool(getattr(cfg, "loss_compiled", None))
    if compiled_loss:
        notes.append("loss compiled with torch.compile (torchtitan build_cross_entropy_loss with compile on, since "
                     "April 2025): the fused cross-entropy keeps the bf16 logits and their bf16 gradient, 4 bytes per "
                     "logit at its peak instead of eager PyTorch's 12")
    return {
        "fsdp_gathered_under_pp": titan,
        "loss_parallel": titan and stated_lp is not False,
        "loss_compiled": compiled_loss,
        # torchtitan's MixedPrecisionPolicy reduce_dtype: float32 (parallelize_llama.py @04133643 hard-codes it;
        # training.mixed_precision_reduce @9dec370 offers only "float32"; configs.py 2026: Literal["float32"])
        "reduce_fp32": titan,
        # torchtitan's expert ranks are carved out of dp_shard (the efsdp x ep mesh): the dense weights are still
        # fully sharded over all of dp_shard (parallelize.py applies fully_shard on the dp_shard_cp mesh)
        "fsdp_over_expert": titan,
        "virtual_stages": virtual,
        "pipeline_output_on_last": framework != "maxtext",
        "pipeline_embedding_slot": bool(as_bool(uneven.get("account_for_embedding_in_pipeline_split"))),
        "pipeline_loss_slot": bool(as_bool(uneven.get("account_for_loss_in_pipeline_split"))),
        "p2p_overlap": bool(p2p) if p2p is not None else (megatron and virtual > 1),
        "tp_comm_overlap": bool(tp_overlap),
        "ep_comm_overlap": bool(ep_overlap),
        "ep_node_dedup": dedup,
        "moe_ep": _stated_size(cfg, "expert_parallel") if megatron else 0,
        "moe_etp": _stated_size(cfg, "expert_tensor_parallel") if megatron else 0,
        "full_iteration_graph": graph,
        "moe_dense_capacity": dense_cf,
        "cp_load_balanced": True if balance is None else bool(balance),
    }


def _stated_size(cfg: TrainingSettings | None, field: str) -> int:
    """A parallel size the config states (0 when it does not)."""
    v = getattr(cfg, field, None) if cfg is not None else None
    return int(v) if isinstance(v, int) and not isinstance(v, bool) and v > 0 else 0


def _resolve_remat(
    run: RunRecord, runyaml: str | None, cfg: TrainingSettings | None
) -> tuple[RematSpec, list[str], bool]:
    """The remat policy: the config's setting, else run.yaml's, else the framework default (guessed)."""
    notes: list[str] = []
    if cfg is not None and cfg.remat_key is not None:
        where = f"config {cfg.remat_key}"
        spec = config_policy(cfg, megatron=run.framework == "megatron" or cfg.format == "megatron", source=where)
        if spec is None:  # only a named policy can be unreadable (megatron_policy always answers)
            notes.append(f"remat policy {cfg.remat_policy!r} ({where}) not understood")
        if spec is not None:
            notes.extend(spec.notes)
            if runyaml is not None:
                mine = runyaml_policy(runyaml, run.framework, source="run.yaml")
                if "remat" not in cfg.changed and (mine.saved, mine.stores_everything, mine.megatron_full) != (
                    spec.saved, spec.stores_everything, spec.megatron_full
                ):
                    notes.append(f"run.yaml says remat '{runyaml}', the config {spec.policy!r}: using the config")
            return spec, notes, False
    # A Megatron launch or MaxText YAML is what ran: its framework's default applies when run.yaml says "other".
    framework = effective_framework(run.framework, cfg)
    if runyaml is not None:
        return runyaml_policy(runyaml, framework, source="run.yaml training.remat"), notes, False
    if cfg is not None and cfg.launch_defaults and framework == "megatron":
        # a launch command is Megatron's whole argument list: no --recompute-* flag is argparse's default
        notes.append("no --recompute-granularity / --recompute-activations in the launch: Megatron-LM's default, "
                     "no activation recomputation")
        return megatron_policy(None, source="launch default"), notes, False
    default = DEFAULT_REMAT.get(framework, "full")
    notes.append(
        f"remat policy not given: assumed '{default}' (the {framework} default); "
        "it changes activation memory and recompute FLOPs"
    )
    return runyaml_policy(default, framework, source="default"), notes, True


def _model_state(run: RunRecord, cfg: TrainingSettings | None, notes: list[str]) -> dict[str, Any]:
    """Bytes per parameter of weights / gradients / optimizer state, and the activation-layout flags.

    Megatron-LM (bf16): bf16 weights 2 B, fp32 main gradients 4 B (Megatron forces fp32 gradient
    accumulation with bf16: ``accumulate_allreduce_grads_in_fp32``; Megatron-Bridge ``grad_reduce_in_fp32``),
    fp32 master weights + Adam moments 12 B; the distributed optimizer shards those 12 B over the
    data-parallel ranks including context parallelism (Megatron-Core docs, "Distributed Optimizer":
    6 + 12/d bytes per parameter; ``get_data_parallel_group(with_context_parallel=True)``).
    MaxText / JAX: parameters stored in ``weight_dtype`` (MaxText base.yml default float32), gradients in the
    same dtype, Adam's two moments likewise: 16 B per parameter for fp32 parameters (ZeRO §3.1's mixed-
    precision "16 Psi"), 8 B for bf16.
    """
    tags = {x.lower() for x in run.tags}
    out: dict[str, Any] = {"zero_stage": 0, "param_offload": False}
    # A Megatron launch or NeMo YAML is Megatron even when run.yaml leaves framework at "other".
    megatron = effective_framework(run.framework, cfg) == "megatron"
    if cfg is not None and cfg.deepspeed:
        out.update(_deepspeed_state(run, cfg, notes))
        out["sequence_parallel"] = _megatron_sequence_parallel(cfg, notes) if megatron else True
        out["fused_cross_entropy"] = bool(cfg.fused_cross_entropy) if megatron else False
    elif megatron:
        dist = _megatron_distributed_optimizer(cfg, tags, notes)
        out["distributed_optimizer"] = dist
        if dist:
            notes.append("Megatron distributed optimizer: optimizer state sharded over the data (x context) ranks")
        out.update(_megatron_precision(cfg, notes, moments=1.0 if _optimizer_name(run, cfg) in MUON_NAMES else 2.0))
        if cfg is not None and cfg.megatron_fsdp and cfg.zero_stage is not None:
            out["zero_stage"] = cfg.zero_stage
            out["distributed_optimizer"] = cfg.zero_stage >= 1
            notes.append(f"Megatron-FSDP: {_ZERO_SHARDS[cfg.zero_stage]} sharded over the data-parallel ranks "
                         f"(--data-parallel-sharding-strategy, as ZeRO stage {cfg.zero_stage})")
        out.update(_optimizer_instances(cfg, out, notes))
        out["dp_exposed_share"] = _dp_exposed_share(cfg, out, notes)
        out["sequence_parallel"] = _megatron_sequence_parallel(cfg, notes)
        out["fused_cross_entropy"] = bool(cfg.fused_cross_entropy) if cfg is not None else False
    else:
        out["distributed_optimizer"] = False
        wd = cfg.weight_dtype if cfg is not None else None
        opt = OPTIMIZER_BYTES_PER_PARAM.get(run.training.optimizer if run.training else "adamw", 12.0)
        if wd is not None and ("bf16" in wd or "bfloat16" in wd):
            out.update(weight_bytes=2.0, grad_bytes=2.0, optimizer_bytes=(opt - 4.0) / 2.0)
        else:
            out.update(weight_bytes=4.0, grad_bytes=4.0, optimizer_bytes=opt - 4.0)
        out["sequence_parallel"] = True
        stated = cfg.fused_cross_entropy if cfg is not None else None
        out["fused_cross_entropy"] = _xla_tpu_loss_fused(run, cfg) if stated is None else bool(stated)
        if stated:
            notes.append("cross-entropy fused (config: cross_entropy_loss_fusion): the bf16 logits and their bf16 "
                         "gradient at the loss's peak, 4 bytes per logit instead of eager PyTorch's 12")
    flash = True if cfg is None or cfg.flash_attention is None else cfg.flash_attention
    out["flash_attention"] = flash
    if not flash:
        notes.append("attention without a flash kernel (config): the attention scores are stored [KOR 5as]")
    out["dropout"] = bool(cfg.dropout) if cfg is not None and cfg.dropout is not None else False
    out["optimizer_offload"] = bool(cfg.optimizer_offload) if cfg is not None else False
    if out["optimizer_offload"] and not (cfg is not None and cfg.deepspeed):
        notes.append("optimizer_memory_host_offload: optimizer state kept in host memory, not HBM")
    out.update(_muon(run, cfg, bool(out.get("distributed_optimizer")), notes))
    return out


# Attention kernels named in a config that use Hopper's own instructions (wgmma, TMA): cuDNN's fused attention
# (Transformer Engine, XLA on GPU, PyTorch's SDPA cuDNN backend) and FlashAttention-3.
HOPPER_NATIVE_ATTENTION = frozenset({"cudnn", "cudnn_flash", "cudnn_flash_te", "te", "fused", "flash3", "fa3",
                                     "flash_attention_3", "flash_attn_3"})


# PyTorch FSDP sharding strategies that keep a micro-batch's gathered weights until its backward (FSDP1 names; FSDP2's
# reshard_after_forward=False): no second all-gather in backward, every layer's weights live at the peak.
KEEP_GATHERED = frozenset({"shard_grad_op", "_hybrid_shard_zero2", "hybrid_shard_zero2"})


def _fsdp_keep_gathered(run: RunRecord, cfg: TrainingSettings | None, notes: list[str]) -> bool:
    """A PyTorch trainer's config states FSDP's SHARD_GRAD_OP (ZeRO-2-like): the weights gathered in forward stay
    gathered through backward, so one all-gather per micro-batch instead of two, and the whole gathered model at the
    peak (PyTorch FSDP docs, ShardingStrategy.SHARD_GRAD_OP)."""
    strategy = cfg.fsdp_sharding_strategy if cfg is not None else None
    if strategy not in KEEP_GATHERED or effective_framework(run.framework, cfg) == "megatron":
        return False
    notes.append(f"FSDP sharding_strategy {strategy.upper()} (config): each micro-batch gathers the weights once and "
                 "keeps them to its backward (one all-gather and one reduce-scatter per micro-batch, the whole "
                 "gathered model in memory at the peak)")
    return True


def _fa2_attention(run: RunRecord, cfg: TrainingSettings | None) -> bool:
    """A PyTorch trainer (``framework: other``) runs FlashAttention-2 kernels: PyTorch's SDPA flash backend or the
    flash-attn 2 package, unless its config names a cuDNN / FlashAttention-3 kernel. Megatron (Transformer Engine's
    cuDNN attention) and MaxText / JAX (XLA's cuDNN flash attention on GPU) do not."""
    if effective_framework(run.framework, cfg) != "other":
        return False
    kernel = cfg.attention_kernel if cfg is not None else None
    return kernel not in HOPPER_NATIVE_ATTENTION


def _optimizer_name(run: RunRecord, cfg: TrainingSettings | None) -> str:
    """The optimizer the config names (Megatron --optimizer), else run.yaml's training.optimizer."""
    if cfg is not None and cfg.optimizer:
        return cfg.optimizer
    return run.training.optimizer if run.training else "adamw"


def _muon(run: RunRecord, cfg: TrainingSettings | None, distributed: bool, notes: list[str]) -> dict[str, bool]:
    """Whether the run trains with Muon, and whether its orthogonalizations are spread over the data ranks
    (Megatron's dist_muon, or run.yaml's muon with a distributed optimizer)."""
    name = _optimizer_name(run, cfg)
    if name not in MUON_NAMES:
        return {"muon": False, "muon_distributed": False}
    spread = name == "dist_muon" or (name == "muon" and cfg is None and distributed)
    source = f"config: optimizer {name}" if cfg is not None and cfg.optimizer else "run.yaml: optimizer muon"
    notes.append(
        f"Muon ({source}): one momentum per parameter beside the fp32 master weights (Adam keeps two moments); "
        "five Newton–Schulz iterations per hidden weight matrix each step, at the bf16 matmul rate, "
        + ("spread over the data-parallel ranks (each orthogonalizes whole matrices: LayerWiseDistributedOptimizer)"
           if spread else "repeated on every data-parallel replica")
        + "; embeddings and the output layer run Adam inside it, their second moment not counted (knowledge.cost_muon)")
    return {"muon": True, "muon_distributed": spread}


def _xla_tpu_loss_fused(run: RunRecord, cfg: TrainingSettings | None) -> bool:
    """MaxText / JAX on TPU: XLA fuses the fp32 softmax into the loss reduction, so only the bf16 logits stay live.

    Evidence, not a default: Google's Ironwood recipes run gpt-oss-120b (201,088-token vocabulary, 163,840 tokens
    per chip) and gemma4-26b (262,144, 131,072 tokens per chip) with ``num_vocab_tiling=1`` on 192 GiB chips, and the
    materialized softmax (6 bytes per logit) alone would take 198 and 206 GB (tpu-recipes training/ironwood @
    c8cfe2f); MaxText's Gemma 2 / 3 recipes on 32 GB v6e likewise. The band's high edge keeps the materialized
    softmax (costmodel._materialized_loss_excess, which also says so). XLA:GPU has no such evidence here and keeps
    the materialized point.
    """
    if effective_framework(run.framework, cfg) not in XLA_FUSING:
        return False
    try:
        return get_chip(run.chip).family == "tpu"
    except UnknownChip:
        return False


_ZERO_SHARDS = {0: "nothing (plain data parallelism)", 1: "the optimizer state", 2: "optimizer state and gradients",
                3: "optimizer state, gradients and parameters"}


# torchao's float8 *rowwise* recipe: its matmuls run at this multiple of the bf16 rate, not at the fp8 peak (per-row
# scaling kernels, rowwise-scaled GEMMs, bf16 TP all-gathers: torchao calls the recipes "different points on the
# accuracy vs performance curve"). Fitted across every published rowwise row of the eval corpus together
# (docs/cost-model.md, "Float8 recipes"); 1.0 would be no gain over bf16, 2.0 the H100's fp8 peak.
ROWWISE_FP8_SPEEDUP = 1.4

# NVFP4: 4-bit e2m1 values with one e4m3 scale per block of 16 (NVIDIA Transformer Engine NVFP4BlockScaling)
NVFP4_BYTES = 0.5 + 1.0 / 16.0


def _megatron_precision(cfg: TrainingSettings | None, notes: list[str], moments: float = 2.0) -> dict[str, float]:
    """Megatron's bytes per parameter: weights, main gradients, optimizer state (master + two Adam moments; Muon
    keeps one, ``moments``).

    Gradients live in the DDP gradient buffer, whose dtype the gradient-reduction setting fixes
    (``grad_reduce_in_fp32``, ``--accumulate-allreduce-grads-in-fp32``, ``--grad-reduce-in-bf16``): the
    precision-aware optimizer reads its shard of that buffer in place (Megatron-Core distrib_optimizer.py
    ``_copy_model_grads_to_main_grads``: ``decoupled_grad = shard_model_grad``), so a ``main_grads_dtype`` does not
    resize it. Only where the config leaves the reduction unstated does ``main_grads_dtype`` decide it, as
    Megatron-LM's arguments.py does (fp32 turns accumulate_allreduce_grads_in_fp32 on, bf16 leaves it off);
    neither stated: fp32. ``--fp8-param-gather`` keeps the model's weights in fp8
    ("Keep the compute param in fp8 ... and perform the param all-gather in fp8"): 1 B, the fp32 master copy
    staying in the optimizer state; ``--fp4-param-gather`` keeps them in NVFP4 (:data:`NVFP4_BYTES`).
    """
    if cfg is not None and cfg.grad_fp32 is not None:
        grad = 4.0 if cfg.grad_fp32 else 2.0
    else:
        grad = dtype_bytes(cfg.grad_dtype) if cfg is not None and cfg.grad_dtype else 4.0
    master = dtype_bytes(cfg.master_dtype) if cfg is not None and cfg.master_dtype else 4.0
    moment = dtype_bytes(cfg.moment_dtype) if cfg is not None and cfg.moment_dtype else 4.0
    weight = 1.0 if cfg is not None and cfg.fp8_params else 2.0
    if cfg is not None and cfg.fp4_params:
        weight = NVFP4_BYTES
    if (grad, master, moment) != (4.0, 4.0, 4.0):
        notes.append(
            f"optimizer precision from the config: gradients {grad:.0f} B, master weights {master:.0f} B, "
            f"{'Adam moments' if moments == 2.0 else 'the momentum'} {moment:.0f} B per parameter"
        )
    if weight == 1.0:
        notes.append("fp8 parameters (--fp8-param-gather / fp8_params): weights held in fp8, 1 B per parameter")
    if weight == NVFP4_BYTES:
        notes.append("NVFP4 parameters (--fp4-param-gather): weights held and gathered in NVFP4, 4 bits + one fp8 "
                     "scale per 16 values = 0.5625 B per parameter")
    return {"weight_bytes": weight, "grad_bytes": grad, "optimizer_bytes": master + moments * moment}


def _deepspeed_state(run: RunRecord, cfg: TrainingSettings, notes: list[str]) -> dict[str, Any]:
    """DeepSpeed's model state per parameter and what ZeRO shards over the data ranks.

    ZeRO (Rajbhandari et al. 2019) §3.1: mixed-precision (bf16/fp16) Adam holds 2 B weights + 2 B gradients +
    K = 12 B optimizer state (fp32 master weights, momentum, variance); fp32 training 4 + 4 + 8 (Adam's two
    moments, no separate master copy). §5 / Figure 1, over N_d data ranks: P_os (stage 1) 4Ψ + KΨ/N_d,
    P_os+g (stage 2) 2Ψ + (2+K)Ψ/N_d, P_os+g+p (stage 3) (4+K)Ψ/N_d. An unstated stage is priced at 0
    (DeepSpeed's default, ZeRO off) and stays an unknown setting whose band spans 0 to 3.
    """
    stage = cfg.zero_stage
    if stage is None:
        notes.append("DeepSpeed ZeRO stage not stated: priced at stage 0 (DeepSpeed's default; the memory band spans "
                     "stages 0 to 3)")
        stage = 0
    half = cfg.weight_dtype in (None, "bf16", "fp16") or bool(cfg.weight_dtype and "16" in cfg.weight_dtype)
    opt = OPTIMIZER_BYTES_PER_PARAM.get(run.training.optimizer if run.training else "adamw", 12.0)
    state = {"weight_bytes": 2.0, "grad_bytes": 2.0, "optimizer_bytes": opt} if half else \
        {"weight_bytes": 4.0, "grad_bytes": 4.0, "optimizer_bytes": opt - 4.0}
    if cfg.weight_dtype is None:
        notes.append("DeepSpeed precision not stated (\"auto\"): priced as bf16/fp16 mixed precision")
    shards = _ZERO_SHARDS[stage]
    notes.append(f"DeepSpeed ZeRO stage {stage}: {shards} sharded over the data-parallel ranks [ZeRO §5]")
    offload = bool(cfg.optimizer_offload)
    params_off = bool(cfg.param_offload) and stage == 3
    if offload:
        notes.append("DeepSpeed offload_optimizer: optimizer state in host memory, not HBM; the CPU optimizer step "
                     "and the host-link transfers are priced (knowledge.cost_offload, assumptions below)")
    if params_off:
        notes.append("DeepSpeed offload_param: parameters in host memory; HBM holds the gathered layers only; "
                     "their host-link fetches are priced (knowledge.cost_offload, assumptions below)")
    return {**state, "distributed_optimizer": stage >= 1, "zero_stage": stage, "optimizer_offload": offload,
            "param_offload": params_off, **_zeropp(cfg, stage, notes)}


def _zeropp(cfg: TrainingSettings, stage: int, notes: list[str]) -> dict[str, Any]:
    """ZeRO++'s weight-side optimizations (Wang et al. 2023, arXiv:2306.10209; DeepSpeed's ZeRO++ tutorial), which
    act on ZeRO-3's parameter all-gathers only.

    hpZ (``zero_hpz_partition_size`` h): after the forward all-gather each rank keeps a second, bf16/fp16 copy of the
    weights sharded over its group of h ranks ("ideal is number of ranks (gpus) per node"), and the backward gathers
    from it inside the group: memory + weight bytes / h per parameter, no backward gather across nodes. qwZ
    (``zero_quantized_weights``): the gathers move int8 blocks with their scales, about half of bf16.
    """
    out: dict[str, Any] = {}
    hpz, qwz = cfg.hpz_partition, bool(cfg.quantized_weights)
    if stage < 3:
        if (hpz or 1) > 1 or qwz:
            notes.append("ZeRO++ hpZ / qwZ act on ZeRO-3's weight gathers; at ZeRO stage "
                         f"{stage} they change nothing")
        return out
    if hpz is not None and hpz > 1:
        out["hpz_partition"] = hpz
        notes.append(f"ZeRO++ hpZ (zero_hpz_partition_size={hpz}): a second copy of the weights sharded over groups of "
                     f"{hpz} ranks, gathered there in backward (+1/{hpz} of the weights per GPU)")
    if qwz:
        out["quantized_weight_gather"] = True
        notes.append("ZeRO++ qwZ (zero_quantized_weights): the weight all-gathers move int8 blocks, half of bf16")
    return out


def _dp_exposed_share(cfg: TrainingSettings | None, state: dict[str, Any], notes: list[str]) -> float:
    """Share of Megatron's data-parallel gradient sync that runs outside compute (0 when it all overlaps).

    ``--overlap-grad-reduce`` (NeMo 1.x ``optim.overlap_grad_sync``) hides the gradient reduce under backward and
    ``--overlap-param-gather`` (``overlap_param_sync``) the distributed optimizer's parameter all-gather under the
    next forward; both are off unless set (Megatron-LM arguments.py: store_true, default False; Megatron-Core
    DistributedDataParallelConfig: False). A launch command states them by having the flag or not; a YAML that
    leaves them out is priced overlapped, as Megatron-Bridge's pretraining recipes set them (recipes/common.py
    ``_pretrain_common``). The distributed optimizer's sync is a reduce-scatter plus an all-gather (half each);
    without it, one all-reduce that the gradient flag alone governs. Megatron-FSDP schedules its own.
    """
    if cfg is None or state.get("zero_stage", 0) >= 2:
        return 0.0
    reduce_off, gather_off = dp_overlap_off(cfg)
    dist = bool(state.get("distributed_optimizer"))
    exposed = (0.5 * reduce_off + 0.5 * gather_off) if dist else float(reduce_off)
    if exposed > 0.0:
        off = [f for f, v in (("--overlap-grad-reduce", reduce_off), ("--overlap-param-gather", gather_off and dist))
               if v]
        notes.append(f"{' and '.join(off)} off: {exposed:.0%} of the data-parallel gradient sync runs outside compute "
                     "(Megatron overlaps it only under these flags)")
    return exposed


def _optimizer_instances(cfg: TrainingSettings | None, state: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """Megatron's ``num_distributed_optimizer_instances``: how many groups of data ranks each hold the sharded state.

    With the distributed optimizer it shards over one group of consecutive data ranks and replicates across groups
    (partial DistOpt); under Megatron-FSDP the sharded gradients and parameters do too (hybrid sharding, HSDP), and
    ``outer_dp_sharding_strategy: optim`` shards the optimizer state across the groups as well. Without either, the
    setting shards nothing and is said to do nothing.
    """
    if cfg is None:
        return {}
    if cfg.dp_replicas_problem:
        notes.append(cfg.dp_replicas_problem)
        return {}
    n = cfg.dp_replicas
    if n is None or n <= 1:
        return {}
    if not state.get("distributed_optimizer"):
        notes.append(f"num_distributed_optimizer_instances {n} is set without the distributed optimizer or "
                     "Megatron-FSDP: nothing is sharded, so it changes nothing here")
        return {}
    fsdp = state.get("zero_stage", 0) >= 2
    outer = cfg.optimizer_over_replicas and fsdp
    held = {2: "gradients", 3: "gradients and parameters"}.get(state["zero_stage"], "") if outer else \
        _ZERO_SHARDS[state["zero_stage"]] if fsdp else "optimizer state"
    how = "num_distributed_optimizer_instances" + (", Megatron-FSDP HSDP" if fsdp else "")
    opt = "; the optimizer state over every data-parallel rank (outer_dp_sharding_strategy optim)" if outer else ""
    notes.append(f"{n} distributed-optimizer instances: {held} sharded within each of {n} groups of data-parallel "
                 f"ranks and replicated across them ({how}){opt}")
    return {"dp_replicas": n, "optimizer_over_replicas": outer}


def _megatron_distributed_optimizer(cfg: TrainingSettings | None, tags: set[str], notes: list[str]) -> bool:
    """Megatron's distributed optimizer as the point estimate prices it.

    Stated (``use_distributed_optimizer``, NeMo's ``optim.name: distributed_fused_adam``): as stated. A run tag
    (legacy). A Megatron-LM launch command: argparse's default, off. A Megatron-format YAML (NeMo, Megatron-Bridge)
    that leaves it out: the convention of the recipes that format is written for, on (Megatron-Bridge's recipes
    build ``DistributedDataParallelConfig(use_distributed_optimizer=True)``; NeMo-Framework-Launcher's GPT-3 configs
    set ``optim.name: distributed_fused_adam``). It stays an unknown setting
    (:func:`knowledge.cost_settings.unknown_settings`): the band and the memory check span both options.
    """
    if cfg is not None and cfg.distributed_optimizer is not None:
        return bool(cfg.distributed_optimizer)
    if tags & {"distributed-optimizer", "use-distributed-optimizer", "zero1", "zero-1"}:
        return True
    if cfg is None or cfg.launch_defaults:
        return False
    notes.append(
        "distributed optimizer not stated: priced on, as Megatron-Bridge / NeMo recipes set it (the band and the "
        "memory check also span it off)"
    )
    return True


def _megatron_sequence_parallel(cfg: TrainingSettings | None, notes: list[str]) -> bool:
    """Megatron sequence parallelism as the point estimate prices it.

    Stated: as stated. A Megatron-LM launch command: argparse's default, off. A Megatron-format YAML (NeMo,
    Megatron-Bridge, Megatron's functional-test configs) that leaves it out: the convention of the recipes
    that format is written for, on whenever tensor parallelism is used (NeMo-Framework-Launcher's GPT-3
    configs set ``sequence_parallel: False`` at TP 1 and ``True`` at TP 2 and above, e.g. conf/training/gpt3/
    5b.yaml vs 20b.yaml in tests/data/real/nemo/). Sequence parallelism only changes anything at tensor > 1,
    so "on" prices exactly that convention. It stays an unknown setting
    (:func:`knowledge.cost_settings.unknown_settings`): the step-time band and the memory check span both
    options, and the answer names it.
    """
    if cfg is None:
        return False
    if cfg.sequence_parallel is not None:
        return bool(cfg.sequence_parallel)
    if cfg.launch_defaults:
        return False
    notes.append(
        "sequence parallelism not stated: priced on at tensor > 1, as NeMo / Megatron-Bridge recipes set it "
        "(the band and the memory check also span it off)"
    )
    return True


def _packed(t: TrainingSpec, cfg: TrainingSettings | None, seq_len: int, assumptions: list[str]) -> bool:
    """Whether the run packs fine-tuning samples: the config's setting, else run.yaml's (named when it is on)."""
    stated = cfg.packed_sequences if cfg is not None else None
    packed = t.packed_sequences if stated is None else stated
    if packed:
        assumptions.append(packing_note(seq_len))
    return packed


def resolve_lora(t: TrainingSpec, cfg: TrainingSettings | None, m: Any, dims: dict[str, Any],
                 assumptions: list[str]) -> tuple[float, float]:
    """(adapter parameters, adapter parameters per token) of a LoRA run, (0, 0) for full training.

    The config's PEFT settings win over run.yaml's (the config is what ran); rank and targets default to
    Megatron-Bridge's LoRA (dim 32, all four linears), each default named in the assumptions.
    """
    stated = cfg.peft if cfg is not None else None
    if cfg is not None and cfg.peft_problem:
        assumptions.append(cfg.peft_problem)
    peft = stated or t.peft
    if stated and t.peft != "none" and stated != t.peft:
        assumptions.append(f"run.yaml says peft {t.peft}, the config {stated}: using the config")
    if peft != "lora":
        return 0.0, 0.0
    rank = (cfg.lora_rank if cfg is not None else None) or t.lora_rank
    targets = (cfg.lora_targets if cfg is not None else None) or (tuple(t.lora_targets) if t.lora_targets else None)
    defaults = []
    if rank is None:
        rank = DEFAULT_RANK
        defaults.append(f"rank {DEFAULT_RANK}")
    if targets is None:
        targets = ALL_TARGETS
        defaults.append("all four linears")
    heads, kv, hd = float(dims["heads"]), float(dims["kv_heads"]), float(dims["head_dim"])
    v = float(dims["mla"].get("v_head_dim") or hd)
    d_ff = float(dims["d_ff"])
    per = adapter_params_per_layer(tuple(targets), int(rank), {
        "d_model": float(m.d_model), "q": heads * hd, "kv": kv * (hd + v), "o": heads * v,
        "fc1": d_ff * (2.0 if m.mlp_matrices >= 3 else 1.0), "d_ff": d_ff})
    attn = (per.get("linear_qkv", 0.0) + per.get("linear_proj", 0.0)) * float(m.attention_layers)
    mlp = per.get("linear_fc1", 0.0) + per.get("linear_fc2", 0.0)
    experts, top_k = float(dims["experts"]), float(dims["top_k"])
    moe_layers = float(m.moe_layers) if experts > 1 else 0.0
    dense_layers = float(m.mlp_layers) - moe_layers
    total = attn + mlp * (dense_layers + moe_layers * experts)
    active = attn + mlp * (dense_layers + moe_layers * top_k)
    assumptions.append(
        f"LoRA fine-tuning (rank {rank} on {', '.join(targets)}"
        f"{'; defaults taken: ' + ', '.join(defaults) if defaults else ''}): {total / 1e6:.1f}M adapter parameters "
        "train; the frozen base weights compute no weight gradient (4 FLOPs per parameter per token instead of 6, as "
        "Megatron-Bridge counts LoRA model FLOPs) and hold no gradient or optimizer state; the data-parallel gradient "
        "reduction moves only the adapters. Activations are kept as in full training (an upper bound: a framework may "
        "skip saving the inputs only a frozen weight's gradient would need)")
    return total, active
