"""The run record: ``<runs dir>/<run id>/run.yaml``, documented in ``docs/run-format.md``.

A run names the hardware (chip, chip count, slices), optionally the model and training shape, the
sharding config file, and the profile files beside it. Everything about the model is optional: with
only the mesh, chip and profile known the analysis still runs and says what it could not compute.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, PositiveFloat, PositiveInt, model_validator

from bot.runs.layer_pattern import LayerCounts, parse_layer_pattern

# Megatron-Core TransformerConfig defaults for Mamba-2 layers (megatron/core/transformer/transformer_config.py;
# MambaMixer expand=2: d_inner = 2 x d_model when mamba_num_heads is not given).
MAMBA_DEFAULTS = {"mamba_head_dim": 64, "mamba_state_dim": 128, "mamba_groups": 8}
MAMBA_EXPAND = 2
MAMBA_CONV_KERNEL = 4


class ModelSpec(BaseModel):
    """The model being trained. Every field is optional; give what you know."""

    model_config = ConfigDict(extra="forbid")
    name: str | None = Field(default=None, description="free-form model name, e.g. llama3-8b")
    params: PositiveFloat | None = Field(
        default=None, description="total parameter count; derived from the dimensions when omitted"
    )
    layers: PositiveInt | None = Field(
        default=None, description="transformer blocks; with layer_pattern, Megatron layers (the pattern's length, "
        "taken from it when omitted)")
    d_model: PositiveInt | None = Field(default=None, description="hidden size")
    d_ff: PositiveInt | None = Field(default=None, description="MLP intermediate size (per expert for MoE)")
    heads: PositiveInt | None = Field(default=None, description="attention (query) heads")
    kv_heads: PositiveInt | None = Field(default=None, description="key/value heads (GQA); defaults to heads")
    head_dim: PositiveInt | None = Field(default=None, description="per-head size; defaults to d_model / heads")
    vocab: PositiveInt | None = Field(default=None, description="vocabulary size")
    mlp_matrices: Literal[2, 3] = Field(default=3, description="3 for gated MLPs (SwiGLU), 2 for plain")
    experts: PositiveInt | None = Field(default=None, description="MoE experts per layer (omit for dense)")
    experts_per_token: PositiveInt | None = Field(default=None, description="MoE top-k")
    tied_embeddings: bool | None = Field(
        default=None, description="the input embedding and the output layer share one vocab x d_model matrix (Gemma; "
        "GPT in Megatron unless --untie-embeddings-and-output-weights); default: two matrices")
    sliding_window: PositiveInt | None = Field(
        default=None, description="local attention window in tokens (Mistral 7B 4096, Gemma 2 4096, Gemma 3 1024, "
        "GPT-OSS 128): a local layer attends to at most this many keys; omit for global attention everywhere")
    global_every: PositiveInt | None = Field(
        default=None, description="with sliding_window: one layer in this many attends over the whole sequence "
        "(Gemma 2 and GPT-OSS alternate: 2; Gemma 3: 6); omit when every layer is local (Mistral 7B)")
    # --- DeepSeek-V3-style MoE (DeepSeek-V3 technical report, arXiv 2412.19437 §2.1; config_671B.json) ----------
    shared_experts: NonNegativeInt | None = Field(
        default=None, description="always-active experts per MoE layer, each of width d_ff, computed for every token "
        "besides the top-k routed ones (DeepSeek-V3: 1; Qwen2-MoE style); Megatron --moe-shared-expert-intermediate-size "
        "= shared_experts x d_ff")
    dense_layers: NonNegativeInt | None = Field(
        default=None, description="MoE models: the first k layers use a dense MLP of width dense_d_ff instead of experts "
        "(DeepSeek-V3: 3; Megatron --moe-layer-freq ([0]*3+[1]*58))")
    dense_d_ff: PositiveInt | None = Field(
        default=None, description="MLP width of the dense_layers (DeepSeek-V3: 18432); defaults to d_ff")
    moe_latent_size: PositiveInt | None = Field(
        default=None, description="LatentMoE (Nemotron 3 Super / Ultra; Megatron-Core and Hugging Face "
        "moe_latent_size): the routed experts run in this width. Each MoE layer projects a token d_model -> latent "
        "before dispatch and latent -> d_model after combine (two dense matmuls); the router and the shared experts "
        "see the full d_model. Omit for experts of width d_model")
    q_lora_rank: PositiveInt | None = Field(
        default=None, description="multi-head latent attention (MLA): rank of the compressed query (DeepSeek-V3: 1536); "
        "omit for a full-rank query projection (DeepSeek-V2-Lite)")
    kv_lora_rank: PositiveInt | None = Field(
        default=None, description="MLA: rank of the compressed key/value latent (DeepSeek-V3: 512); setting it makes the "
        "attention MLA")
    qk_nope_head_dim: PositiveInt | None = Field(
        default=None, description="MLA: per-head query/key size without rotary embedding (DeepSeek-V3: 128)")
    qk_rope_head_dim: PositiveInt | None = Field(
        default=None, description="MLA: per-head query/key rotary part, the key's shared by all heads (DeepSeek-V3: 64)")
    v_head_dim: PositiveInt | None = Field(
        default=None, description="MLA: per-head value size (DeepSeek-V3: 128)")
    # --- hybrid Mamba stacks (Megatron-Core --hybrid-layer-pattern; Nemotron-H, Nemotron 3) -------------------
    layer_pattern: str | None = Field(
        default=None, max_length=10_000, description="Megatron hybrid layer pattern, one character per layer: M "
        "Mamba-2, * attention, - MLP, E MoE (Nemotron 3 Nano: MEMEM*EMEMEM*...); | between pipeline stages is "
        "ignored; each /-separated part after the main stack is one multi-token-prediction module (its layers "
        "priced, plus an eh_proj and another output-layer pass). With a pattern, layers counts the main stack's "
        "characters")
    mamba_heads: PositiveInt | None = Field(
        default=None, description="Mamba-2 heads per layer (Megatron mamba_num_heads); default 2 x d_model / "
        "mamba_head_dim")
    mamba_head_dim: PositiveInt | None = Field(default=None, description="Mamba-2 head size (Megatron default 64)")
    mamba_state_dim: PositiveInt | None = Field(default=None, description="Mamba-2 state size (Megatron default 128)")
    mamba_groups: PositiveInt | None = Field(
        default=None, description="Mamba-2 B/C groups (Megatron mamba_num_groups, default 8)")
    mtp_layers: NonNegativeInt | None = Field(
        default=None, description="multi-token-prediction modules after the main stack (DeepSeek-V3: 1; Megatron "
        "mtp_num_layers, MaxText mtp_num_layers, Hugging Face num_nextn_predict_layers). Each is one more decoder "
        "layer of the last layer's kind, a 2 d_model -> d_model projection, and another pass of the shared output "
        "layer and loss; Megatron places them on the last pipeline stage. Not counted in layers")

    @model_validator(mode="after")
    def _layout_fits(self) -> ModelSpec:
        if self.dense_layers and self.layers and self.dense_layers >= self.layers:
            raise ValueError(f"dense_layers {self.dense_layers} must be fewer than layers {self.layers}")
        self._pattern_fits()
        if self.moe_latent_size and not (self.experts and self.experts > 1):
            raise ValueError(f"moe_latent_size {self.moe_latent_size} is a MoE setting, but experts is not given")
        if self.kv_lora_rank and not (self.qk_nope_head_dim and self.qk_rope_head_dim and self.v_head_dim):
            raise ValueError("kv_lora_rank (multi-head latent attention) needs qk_nope_head_dim, qk_rope_head_dim and "
                             "v_head_dim")
        return self

    def _pattern_fits(self) -> None:
        """A hybrid pattern must be readable and agree with layers, experts and dense_layers."""
        counts = self.layer_counts()
        if counts is None:
            return
        if self.layers and self.layers != counts.layers:
            raise ValueError(f"layers {self.layers} disagrees with layer_pattern, which holds {counts.layers} layers "
                             "(Megatron takes the pattern's length as the layer count)")
        if counts.moe and not (self.experts and self.experts > 1):
            raise ValueError(f"layer_pattern has {counts.moe} MoE layers (E) but experts is not given")
        if self.experts and self.experts > 1 and not counts.moe:
            raise ValueError(f"experts {self.experts} given but layer_pattern has no MoE layer (E)")
        if self.dense_layers:
            raise ValueError("dense_layers does not apply with layer_pattern: its - layers are the dense MLPs")
        if self.mtp_layers:
            raise ValueError("mtp_layers does not apply with layer_pattern: a hybrid stack describes its MTP layers "
                             "after '/' in the pattern")
        if self.layers is None:
            self.layers = counts.layers

    def layer_counts(self) -> LayerCounts | None:
        """Layers of each kind in ``layer_pattern`` (None without one: every layer is attention + MLP)."""
        return parse_layer_pattern(self.layer_pattern) if self.layer_pattern else None

    @property
    def attention_layers(self) -> int:
        """Layers with self-attention: every layer of a transformer, the ``*`` of a hybrid pattern."""
        counts = self.layer_counts()
        return counts.attention if counts else (self.layers or 0)

    @property
    def mlp_layers(self) -> int:
        """Layers with an MLP or MoE block: every layer of a transformer, the ``-`` and ``E`` of a hybrid pattern."""
        counts = self.layer_counts()
        return counts.mlp + counts.moe if counts else (self.layers or 0)

    @property
    def mamba_layers(self) -> int:
        counts = self.layer_counts()
        return counts.mamba if counts else 0

    def mamba_dims(self) -> dict[str, int] | None:
        """Mamba-2 sizes (heads, head_dim, d_inner, state, groups, in_proj width), Megatron's defaults filled in;
        None without Mamba layers or d_model."""
        if not (self.mamba_layers and self.d_model):
            return None
        head_dim = self.mamba_head_dim or MAMBA_DEFAULTS["mamba_head_dim"]
        heads = self.mamba_heads or MAMBA_EXPAND * self.d_model // head_dim
        inner = heads * head_dim
        state = self.mamba_state_dim or MAMBA_DEFAULTS["mamba_state_dim"]
        groups = self.mamba_groups or MAMBA_DEFAULTS["mamba_groups"]
        # MambaMixer in_proj packs z, x, B, C, dt: 2 d_inner + 2 groups x state + heads outputs
        return {"heads": heads, "head_dim": head_dim, "inner": inner, "state": state, "groups": groups,
                "in_proj": 2 * inner + 2 * groups * state + heads}

    def mamba_params(self) -> float:
        """Parameters of one Mamba-2 layer: in_proj, depthwise conv over x/B/C, A/D/dt-bias per head, the gated
        norm over d_inner, out_proj (Megatron-Core MambaMixer); 0 without Mamba layers."""
        m = self.mamba_dims()
        if m is None:
            return 0.0
        conv = (m["inner"] + 2 * m["groups"] * m["state"]) * (MAMBA_CONV_KERNEL + 1)
        return float(self.d_model * m["in_proj"] + conv + 3 * m["heads"] + m["inner"] + m["inner"] * self.d_model)  # type: ignore[operator]

    def attention_keys(self, seq_len: int | float) -> float:
        """Keys each query attends to, averaged over the layers: seq_len, or the window on local layers."""
        if not self.sliding_window:
            return float(seq_len)
        local_keys = float(min(self.sliding_window, seq_len))
        if not self.global_every or self.global_every <= 1:
            return float(seq_len) if self.global_every == 1 else local_keys
        layers = self.layers or self.global_every
        global_layers = layers // self.global_every
        return (global_layers * float(seq_len) + (layers - global_layers) * local_keys) / layers

    @property
    def is_moe(self) -> bool:
        return bool(self.experts and self.experts > 1)

    @property
    def is_hybrid(self) -> bool:
        """A Megatron hybrid stack (``layer_pattern``): layers are single Mamba, attention, MLP or MoE blocks."""
        return bool(self.layer_pattern)

    @property
    def is_mla(self) -> bool:
        """Multi-head latent attention (DeepSeek-V2/V3): keys and values up-projected from a compressed latent."""
        return bool(self.kv_lora_rank)

    @property
    def moe_layers(self) -> int:
        """Layers with experts: all of them, less the leading dense_layers (0 for a dense model)."""
        if not self.is_moe or not self.layers:
            return 0
        counts = self.layer_counts()
        return counts.moe if counts else self.layers - (self.dense_layers or 0)

    def attention_head_dims(self) -> tuple[int, int] | None:
        """(query/key size, value size) per head: MLA's qk_nope + qk_rope and v_head_dim, else head_dim twice."""
        if self.is_mla:
            assert self.qk_nope_head_dim and self.qk_rope_head_dim and self.v_head_dim  # validated
            return self.qk_nope_head_dim + self.qk_rope_head_dim, self.v_head_dim
        if not self.heads or not (self.head_dim or self.d_model):
            return None
        hd = self.head_dim or self.d_model // self.heads  # type: ignore[operator]
        return hd, hd

    def attention_params(self) -> int | None:
        """Attention projection parameters of one layer (norm weights left out).

        Standard / GQA: q and o of heads x head_dim, k and v of kv_heads x head_dim. MLA (DeepSeek-V3 inference/
        model.py MLA): wq_a d x q_lora, wq_b q_lora x heads (qk_nope + qk_rope) (or one d x heads (qk) matrix without
        q_lora_rank), wkv_a d x (kv_lora + qk_rope), wkv_b kv_lora x heads (qk_nope + v), wo heads v x d.
        """
        if not (self.d_model and self.heads):
            return None
        d, h = self.d_model, self.heads
        if self.is_mla:
            qk, v = self.attention_head_dims()  # type: ignore[misc]
            q = d * self.q_lora_rank + self.q_lora_rank * h * qk if self.q_lora_rank else d * h * qk
            kv = d * (self.kv_lora_rank + self.qk_rope_head_dim) + self.kv_lora_rank * h * (self.qk_nope_head_dim + v)  # type: ignore[operator]
            return q + kv + h * v * d
        head_dim = self.head_dim or d // h
        return d * head_dim * (2 * h + 2 * (self.kv_heads or h))

    @property
    def mtp_moe_layers(self) -> int:
        """MTP layers with experts. A transformer's MTP module has one decoder layer of the last layer's kind
        (Megatron training.py num_floating_point_operations: ``last_layer_is_moe``; a MoE model's leading
        dense_layers leave its last layer a MoE layer); a hybrid stack's are the ``E`` after ``/`` in its pattern."""
        counts = self.layer_counts()
        if counts is not None:
            return counts.mtp_moe
        return (self.mtp_layers or 0) if self.is_moe else 0

    @property
    def mtp_modules(self) -> int:
        """MTP modules (depths), each running the output layer again: ``mtp_layers``, or the ``/``-separated parts
        of a hybrid pattern."""
        counts = self.layer_counts()
        return counts.mtp_modules if counts is not None else (self.mtp_layers or 0)

    @property
    def mtp_attention_layers(self) -> int:
        """MTP layers with self-attention: one per module of a transformer, the ``*`` after ``/`` of a hybrid one."""
        counts = self.layer_counts()
        return counts.mtp_attention if counts is not None else (self.mtp_layers or 0)

    def _hybrid_mtp_params(self, routed: bool) -> float:
        """A hybrid pattern's MTP modules: their layers by kind and one eh_proj (2 d_model -> d_model) each."""
        counts = self.layer_counts()
        attn = self.attention_params()
        if counts is None or not counts.mtp_modules or not (self.d_model and self.d_ff) or attn is None:
            return 0.0
        moe = self.moe_layer_dense_params() + (self.routed_params_per_layer() if routed else 0.0)
        mlp = float(self.mlp_matrices * self.d_model * self.d_ff)
        return float(counts.mtp_attention * attn + counts.mtp_moe * moe + counts.mtp_mlp * mlp
                     + counts.mtp_mamba * self.mamba_params() + counts.mtp_modules * 2 * self.d_model * self.d_model)

    def mtp_params(self, routed: bool = True) -> float:
        """Parameters of the MTP modules (Megatron-Core MultiTokenPredictionLayer; DeepSeek-V3 §2.2): per module
        one decoder layer of the last layer's kind and the eh_proj (2 d_model -> d_model); the embedding and the
        output layer are shared with the main model, norms left out as elsewhere. ``routed=False`` leaves out
        their routed experts (counted with the others in :meth:`routed_expert_params`). A hybrid stack's modules
        are the layers its pattern gives after ``/``. 0 without MTP."""
        if self.layer_pattern:
            return self._hybrid_mtp_params(routed)
        k = self.mtp_layers or 0
        attn = self.attention_params()
        if not (k and self.d_model and self.d_ff and attn is not None):
            return 0.0
        mlp = float(self.mlp_matrices * self.d_model * self.d_ff)
        if self.is_moe:
            mlp = self.moe_layer_dense_params() + (self.routed_params_per_layer() if routed else 0.0)
        return float(k * (attn + mlp + 2 * self.d_model * self.d_model))

    @property
    def expert_width(self) -> int:
        """Width the routed experts' matmuls run in: moe_latent_size under LatentMoE, else d_model."""
        return self.moe_latent_size or self.d_model or 0

    def routed_params_per_layer(self) -> float:
        """One MoE layer's routed experts: experts x mlp_matrices x expert width x d_ff."""
        return float((self.experts or 0) * self.mlp_matrices * self.expert_width * (self.d_ff or 0))

    def moe_layer_dense_params(self) -> float:
        """One MoE layer's weights every token passes through besides the routed experts: the shared experts
        (full d_model) and, under LatentMoE, the d_model -> latent and latent -> d_model projections."""
        shared = self.mlp_matrices * (self.d_model or 0) * (self.d_ff or 0) * (self.shared_experts or 0)
        latent = 2 * (self.d_model or 0) * (self.moe_latent_size or 0)
        return float(shared + latent)

    def routed_expert_params(self) -> float:
        """Parameters of the routed experts, MTP modules' included (sharded over the expert axis; 0 for a dense
        model)."""
        if not (self.is_moe and self.d_model and self.d_ff):
            return 0.0
        return (self.moe_layers + self.mtp_moe_layers) * self.routed_params_per_layer()

    def mlp_params(self) -> float | None:
        """All MLP parameters: dense layers' MLPs, shared experts and routed experts (router weights left out)."""
        if not (self.layers and self.d_model and self.d_ff):
            return None
        if not self.is_moe:
            return float(self.mlp_layers * self.mlp_matrices * self.d_model * self.d_ff)
        dense_layers = self.mlp_layers - self.moe_layers  # the leading dense_layers, or a pattern's - layers
        dense = dense_layers * self.mlp_matrices * self.d_model * (self.dense_d_ff or self.d_ff)
        shared = self.moe_layers * self.moe_layer_dense_params()  # shared experts and LatentMoE's projections
        return float(dense + shared) + self.routed_expert_params()

    def derived_params(self) -> float | None:
        """Parameter count from the dimensions (attention + MLP + embeddings), or ``params`` if given."""
        if self.params:
            return float(self.params)
        attn, mlp = self.attention_params(), self.mlp_params()
        if not (self.layers and attn is not None and mlp is not None):
            return None
        emb = (1 if self.tied_embeddings else 2) * (self.vocab or 0) * (self.d_model or 0)
        mtp = self.mtp_params(routed=False)  # their routed experts are in mlp
        return float(self.attention_layers * attn + self.mamba_layers * self.mamba_params() + mlp + emb + mtp)

    def active_params(self) -> float | None:
        """Parameters touched per token (MoE: the top-k routed experts' MLPs; shared experts and dense layers in full)."""
        total = self.derived_params()
        if total is None or not self.is_moe:
            return total
        if not (self.layers and self.d_model and self.d_ff and self.experts):
            return None
        k = self.experts_per_token or 1
        routed = self.routed_expert_params()
        return total - routed + routed * k / self.experts


# The linears of a Megatron-Core transformer layer that LoRA can adapt (Megatron-Bridge LoRA target_modules).
LoraTarget = Literal["linear_qkv", "linear_proj", "linear_fc1", "linear_fc2"]


class TrainingSpec(BaseModel):
    """The training shape. Optional fields unlock MFU, memory and cost predictions."""

    model_config = ConfigDict(extra="forbid")
    global_batch: PositiveInt | None = Field(default=None, description="sequences per optimizer step")
    seq_len: PositiveInt | None = Field(default=None, description="tokens per sequence")
    micro_batch: PositiveInt | None = Field(default=None, description="sequences per micro-batch per data-parallel rank")
    dtype: Literal["bf16", "fp16", "fp32", "fp8", "fp4"] = Field(
        default="bf16", description="compute dtype of the linear layers' matmuls (fp8: FP8 / MXFP8; fp4: NVFP4)"
    )
    fp8_recipe: Literal["tensorwise", "delayed", "mxfp8", "blockwise"] | None = Field(
        default=None, description="how fp8 tensors are scaled (Transformer Engine recipe; a config's fp8_recipe wins): "
        "tensorwise (FP8-CS), delayed, mxfp8 (FP8-MX, 1x32 blocks), blockwise; None = not stated"
    )
    remat: Literal["none", "minimal", "dots", "full"] | None = Field(
        default=None, description="activation rematerialization policy"
    )
    optimizer: Literal["adamw", "adam", "adafactor", "sgd", "lion", "muon"] = Field(
        default="adamw", description="muon: Newton–Schulz-orthogonalized momentum (Kimi K2; knowledge.cost_muon): "
        "one moment per parameter, and its orthogonalization priced in the step")
    peft: Literal["none", "lora"] = Field(
        default="none", description="parameter-efficient fine-tuning: lora = the base weights are frozen and low-rank "
        "adapters train (Megatron-Bridge / NeMo peft)"
    )
    lora_rank: PositiveInt | None = Field(default=None, description="LoRA adapter rank (Megatron-Bridge LoRA dim; "
                                          "default 32)")
    lora_targets: list[LoraTarget] | None = Field(
        default=None, min_length=1, description="linears that get adapters (Megatron-Bridge LoRA target_modules; "
        "default all four)"
    )

    activation_offload_layers: NonNegativeInt = Field(
        default=0, description="layers per pipeline stage whose saved activations are offloaded to host memory "
        "(Megatron cpu_offloading with cpu_offloading_num_layers); a config that states it wins"
    )
    packed_sequences: bool = Field(
        default=False, description="fine-tuning samples packed into each sequence, attending only within themselves "
        "(Megatron-Bridge packed_sequence_specs); attention is then priced as an upper bound"
    )

    @model_validator(mode="after")
    def _lora_fields_need_lora(self) -> TrainingSpec:
        """An adapter rank or target list describes a LoRA run: without ``peft: lora`` it is a contradiction."""
        for name in ("lora_rank", "lora_targets"):
            if getattr(self, name) is not None and self.peft != "lora":
                raise ValueError(f"training.{name} is set but training.peft is {self.peft!r}: set peft: lora, or "
                                 f"remove {name}")
        return self

    @property
    def tokens_per_step(self) -> int | None:
        if self.global_batch and self.seq_len:
            return self.global_batch * self.seq_len
        return None


class Measured(BaseModel):
    """Numbers recorded by the training job itself (logs, metrics), used when the profile lacks them."""

    model_config = ConfigDict(extra="forbid")
    step_time_ms: PositiveFloat | None = Field(default=None, description="average step time, milliseconds")
    tokens_per_second: PositiveFloat | None = Field(default=None, description="global throughput")
    hbm_peak_bytes: PositiveFloat | None = Field(default=None, description="peak HBM in use per chip, bytes")
    mfu_percent: float | None = Field(default=None, ge=0, le=100, description="as reported by the job")
    oom: bool | None = Field(
        default=None,
        description="true: the job ran out of device memory with this config (a fact the Critic uses); "
        "false: it ran",
    )


class DerivedFrom(BaseModel):
    """The ASAP proposal this run applied: ``asap propose <run>`` answer, proposal ``proposal`` (1 = first)."""

    model_config = ConfigDict(extra="forbid")
    run: str = Field(min_length=1, description="ID of the run whose proposal this run uses")
    proposal: PositiveInt = Field(description="rank of that proposal in the run's `asap propose` answer")


# what people call their training stack -> the framework ASAP prices it as (Megatron-Core under NeMo and
# Megatron-Bridge; the PyTorch trainers are "other", whose config format tells them apart)
FRAMEWORK_ALIASES: dict[str, str] = {
    "torchtitan": "other", "pytorch": "other", "fsdp": "other", "deepspeed": "other", "llm-foundry": "other",
    "llmfoundry": "other", "composer": "other", "nemo": "megatron", "megatron-lm": "megatron",
    "megatron-core": "megatron", "megatron-bridge": "megatron", "max-text": "maxtext",
}


class RunRecord(BaseModel):
    """One training run as stored in ``run.yaml``."""

    model_config = ConfigDict(extra="forbid")
    id: str = Field(min_length=1, description="run ID as people refer to it (\"123\", \"llama-8b-v5p\")")
    name: str | None = Field(default=None, description="short human title")
    description: str | None = None
    framework: Literal["maxtext", "megatron", "jax", "other"] = Field(default="other")
    chip: str = Field(description="hardware catalog name or alias, e.g. tpu-v5p, h100")
    num_chips: PositiveInt = Field(description="total chips in the job")
    num_slices: PositiveInt = Field(default=1, description="TPU slices / GPU node groups joined by DCN")
    config: str | None = Field(default=None, description="sharding config file, relative to the run folder")
    command: str | None = Field(
        default=None,
        description="the launch command line as run (python3 -m MaxText.train base.yml key=value ..., torchrun ... "
        "pretrain_gpt.py --flags, or bash train.sh ARGS): its overrides win over the config file",
    )
    profile: list[str] | None = Field(
        default=None, description="profile files/folders relative to the run folder; discovered when omitted"
    )
    model: ModelSpec | None = None
    training: TrainingSpec | None = None
    measured: Measured | None = None
    links: dict[str, str] = Field(default_factory=dict, description="name -> URL (dashboard, job, PR)")
    tags: list[str] = Field(default_factory=list)
    derived_from: DerivedFrom | None = Field(
        default=None,
        description="the proposal this run applied; when it is analysed, predicted vs measured is recorded as history",
    )

    @model_validator(mode="before")
    @classmethod
    def _framework_alias(cls, data: Any) -> Any:
        """The names people write for their stack (``framework: torchtitan``, ``nemo``, ``deepspeed``) read as the
        framework ASAP prices them by; ``torchtitan`` also tags the run (its eager-PyTorch memory behaviour)."""
        if not isinstance(data, dict) or not isinstance(data.get("framework"), str):
            return data
        name = data["framework"].strip().lower()
        if name not in FRAMEWORK_ALIASES:
            return data
        out = {**data, "framework": FRAMEWORK_ALIASES[name]}
        tags = out.get("tags")
        if name == "torchtitan" and (tags is None or isinstance(tags, list)) and "torchtitan" not in (tags or []):
            out["tags"] = [*(tags or []), "torchtitan"]
        return out

    @model_validator(mode="after")
    def _slices_divide(self) -> RunRecord:
        if self.num_chips % self.num_slices:
            raise ValueError(f"num_chips {self.num_chips} is not divisible by num_slices {self.num_slices}")
        return self

    @property
    def chips_per_slice(self) -> int:
        return self.num_chips // self.num_slices

    @property
    def jax_devices_per_chip(self) -> int:
        """Devices JAX counts per chip of this run's hardware (2 on TPU7x; 1 elsewhere or for an unknown chip):
        what MaxText's mesh sizes and per_device_batch_size count."""
        from bot.errors import UnknownChip
        from knowledge.hardware import get_chip

        try:
            return get_chip(self.chip).jax_devices_per_chip
        except UnknownChip:
            return 1
