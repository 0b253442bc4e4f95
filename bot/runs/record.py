"""The run record: ``<runs dir>/<run id>/run.yaml``, documented in ``docs/run-format.md``.

A run names the hardware (chip, chip count, slices), optionally the model and training shape, the
sharding config file, and the profile files beside it. Everything about the model is optional: with
only the mesh, chip and profile known the analysis still runs and says what it could not compute.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt, model_validator


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

    def derived_params(self) -> float | None:
        """Parameter count from the dimensions (attention + MLP + embeddings), or ``params`` if given."""
        if self.params:
            return float(self.params)
        if not (self.layers and self.d_model and self.d_ff and self.heads):
            return None
        head_dim = self.head_dim or self.d_model // self.heads
        kv = self.kv_heads or self.heads
        attn = self.d_model * head_dim * (2 * self.heads + 2 * kv)
        mlp = self.mlp_matrices * self.d_model * self.d_ff * (self.experts or 1)
        emb = (1 if self.tied_embeddings else 2) * (self.vocab or 0) * self.d_model
        return float(self.layers * (attn + mlp) + emb)

    def active_params(self) -> float | None:
        """Parameters touched per token (MoE: only the routed experts' MLPs)."""
        total = self.derived_params()
        if total is None or not self.is_moe:
            return total
        if not (self.layers and self.d_model and self.d_ff and self.experts):
            return None
        k = self.experts_per_token or 1
        mlp_all = self.layers * self.mlp_matrices * self.d_model * self.d_ff * self.experts
        return total - mlp_all + mlp_all * k / self.experts


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
