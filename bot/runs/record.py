"""The run record: ``<runs dir>/<run id>/run.yaml``, documented in ``docs/run-format.md``.

A run names the hardware (chip, chip count, slices), optionally the model and training shape, the
sharding config file, and the profile files beside it. Everything about the model is optional: with
only the mesh, chip and profile known the analysis still runs and says what it could not compute.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, PositiveFloat, PositiveInt, model_validator


class ModelSpec(BaseModel):
    """The model being trained. Every field is optional; give what you know."""

    model_config = ConfigDict(extra="forbid")
    name: str | None = Field(default=None, description="free-form model name, e.g. llama3-8b")
    params: PositiveFloat | None = Field(
        default=None, description="total parameter count; derived from the dimensions when omitted"
    )
    layers: PositiveInt | None = Field(default=None, description="transformer blocks")
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

    @model_validator(mode="after")
    def _layout_fits(self) -> ModelSpec:
        if self.dense_layers and self.layers and self.dense_layers >= self.layers:
            raise ValueError(f"dense_layers {self.dense_layers} must be fewer than layers {self.layers}")
        if self.kv_lora_rank and not (self.qk_nope_head_dim and self.qk_rope_head_dim and self.v_head_dim):
            raise ValueError("kv_lora_rank (multi-head latent attention) needs qk_nope_head_dim, qk_rope_head_dim and "
                             "v_head_dim")
        return self

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
    def is_mla(self) -> bool:
        """Multi-head latent attention (DeepSeek-V2/V3): keys and values up-projected from a compressed latent."""
        return bool(self.kv_lora_rank)

    @property
    def moe_layers(self) -> int:
        """Layers with experts: all of them, less the leading dense_layers (0 for a dense model)."""
        if not self.is_moe or not self.layers:
            return 0
        return self.layers - (self.dense_layers or 0)

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

    def routed_expert_params(self) -> float:
        """Parameters of the routed experts (sharded over the expert axis; 0 for a dense model)."""
        if not (self.is_moe and self.d_model and self.d_ff):
            return 0.0
        return float(self.moe_layers * self.mlp_matrices * self.d_model * self.d_ff * self.experts)  # type: ignore[operator]

    def mlp_params(self) -> float | None:
        """All MLP parameters: dense layers' MLPs, shared experts and routed experts (router weights left out)."""
        if not (self.layers and self.d_model and self.d_ff):
            return None
        if not self.is_moe:
            return float(self.layers * self.mlp_matrices * self.d_model * self.d_ff)
        dense = (self.dense_layers or 0) * self.mlp_matrices * self.d_model * (self.dense_d_ff or self.d_ff)
        shared = self.moe_layers * self.mlp_matrices * self.d_model * self.d_ff * (self.shared_experts or 0)
        return float(dense + shared) + self.routed_expert_params()

    def derived_params(self) -> float | None:
        """Parameter count from the dimensions (attention + MLP + embeddings), or ``params`` if given."""
        if self.params:
            return float(self.params)
        attn, mlp = self.attention_params(), self.mlp_params()
        if not (self.layers and attn is not None and mlp is not None):
            return None
        emb = (1 if self.tied_embeddings else 2) * (self.vocab or 0) * (self.d_model or 0)
        return float(self.layers * attn + mlp + emb)

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


class TrainingSpec(BaseModel):
    """The training shape. Optional fields unlock MFU, memory and cost predictions."""

    model_config = ConfigDict(extra="forbid")
    global_batch: PositiveInt | None = Field(default=None, description="sequences per optimizer step")
    seq_len: PositiveInt | None = Field(default=None, description="tokens per sequence")
    micro_batch: PositiveInt | None = Field(default=None, description="sequences per micro-batch per data-parallel rank")
    dtype: Literal["bf16", "fp16", "fp32", "fp8", "fp4"] = Field(
        default="bf16", description="compute dtype of the linear layers' matmuls (fp8: FP8 / MXFP8; fp4: NVFP4)"
    )
    remat: Literal["none", "minimal", "dots", "full"] | None = Field(
        default=None, description="activation rematerialization policy"
    )
    optimizer: Literal["adamw", "adam", "adafactor", "sgd", "lion"] = Field(default="adamw")

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

    @model_validator(mode="after")
    def _slices_divide(self) -> RunRecord:
        if self.num_chips % self.num_slices:
            raise ValueError(f"num_chips {self.num_chips} is not divisible by num_slices {self.num_slices}")
        return self

    @property
    def chips_per_slice(self) -> int:
        return self.num_chips // self.num_slices
