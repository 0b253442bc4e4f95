"""Training settings the cost model reads from the run's own sharding config (what the job actually ran).

``settings_from_config(config)`` reads, wherever they sit in the file (top level or nested as NeMo and
Megatron-Bridge do), the settings that change memory and step time but are not the mesh:

* rematerialization: MaxText ``remat_policy``; Megatron ``recompute_granularity`` / ``recompute_method`` /
  ``recompute_num_layers`` (NeMo 1.x ``activations_checkpoint_*``); plain trainers ``remat``;
* batch split: Megatron / plain ``micro_batch_size``; MaxText ``per_device_batch_size`` and
  ``gradient_accumulation_steps``; plain ``microbatches`` / ``grad_accum_steps``; global batch
  (``global_batch_size``) and sequence length (``seq_length``, ``max_target_length``, ``seq_len``);
* optimizer-state and gradient placement: Megatron ``use_distributed_optimizer`` (or NeMo's
  ``optim.name: distributed_fused_adam``), ``grad_reduce_in_fp32``; MaxText ``weight_dtype`` / plain
  ``param_dtype``, ``optimizer_memory_host_offload``;
* activation layout: Megatron ``sequence_parallel``; attention kernel (Megatron ``use_flash_attention``,
  MaxText ``attention``, plain ``attention_kernel``); fused cross-entropy; dropout.
* torchtitan TOML: activation checkpointing, local / global batch, pipeline micro-batches, seq_len and Float8
  in torchtitan's own terms (:mod:`knowledge.cost_settings_titan`).

Values come from :mod:`bot.configs` (the same YAML reader the mesh uses), so a setting ASAP edits in a
proposal is the very key read here. ``TrainingSettings`` is a frozen pydantic model so a proposal can
carry a changed copy (``model_copy(update=...)``) and the Calibration can remember the baseline's.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from bot.configs.common import as_bool, find_by_name, positive_int, trained_seq_length
from bot.configs.common import settings as read_settings
from bot.configs.maxtext import REMAT_TENSOR_KEYS
from bot.configs.model_dims import MAXTEXT_BASE_SEQ_LEN, ModelDims, read_model_dims
from bot.configs.pipeline_layout import parse_pipeline_layout
from bot.configs.precision_recipe import Rule, read_rules
from bot.configs.sharding import ShardingConfig
from bot.configs.yamlscan import compose
from knowledge.cost_act_offload import NAMES as ACT_OFFLOAD_NAMES
from knowledge.cost_act_offload import offload_layers, offload_settings
from knowledge.cost_cuda_graph import LIST_NAMES as GRAPH_LISTS
from knowledge.cost_cuda_graph import NAMES as GRAPH_NAMES
from knowledge.cost_cuda_graph import graph_settings
from knowledge.cost_fp8_recipe import fp8_recipe_stated
from knowledge.cost_packing import NAMES as PACKING_NAMES
from knowledge.cost_packing import packing_settings
from knowledge.cost_peft import LIST_NAMES as PEFT_LISTS
from knowledge.cost_peft import NAMES as PEFT_NAMES
from knowledge.cost_peft import peft_settings

# Megatron keys that change what a mesh costs beyond its sizes (read by :func:`overlap_settings`): the
# attention kernel flag as Megatron-LM spells it (``--use-flash-attn``), TP communication overlap
# (``--tp-comm-overlap``), interleaved stages (``--virtual-pipeline-model-parallel-size`` or
# ``--num-layers-per-virtual-pipeline-stage``), overlapped pipeline sends (``--overlap-p2p-communication``,
# TransformerConfig ``overlap_p2p_comm``), and the layer / stage counts the per-stage form needs.
OVERLAP_NAMES: tuple[str, ...] = (
    "use_flash_attn", "tp_comm_overlap", "overlap_moe_expert_parallel_comm", "moe_token_dispatcher_type",
    "moe_enable_deepep", "moe_flex_dispatcher_backend", "virtual_pipeline_model_parallel_size",
    "num_layers_per_virtual_pipeline_stage", "overlap_p2p_comm", "overlap_p2p_communication", "num_layers",
    "pipeline_model_parallel_size", "pipeline_model_parallel_layout", "expert_tensor_parallel_size",
)

# Every key this module reads (the config readers' own SETTINGS lists do not hold all of them).
NAMES: tuple[str, ...] = OVERLAP_NAMES + (
    "remat_policy", "remat", "recompute_granularity", "recompute_method", "recompute_num_layers", "recompute_modules",
    "activations_checkpoint_granularity", "activations_checkpoint_method", "activations_checkpoint_num_layers",
    "micro_batch_size", "per_device_batch_size", "gradient_accumulation_steps", "microbatches",
    "num_microbatches", "grad_accum_steps", "global_batch_size", "seq_length", "sequence_length", "max_target_length",
    "seq_len",
    "use_distributed_optimizer", "grad_reduce_in_fp32", "accumulate_allreduce_grads_in_fp32", "weight_dtype",
    "param_dtype", "optimizer_memory_host_offload", "parameter_memory_host_offload", "sequence_parallel",
    "use_flash_attention", "attention", "attention_kernel", "cross_entropy_loss_fusion", "hidden_dropout",
    "attention_dropout", "num_pipeline_microbatches", "num_vocab_tiling", "name", "main_grads_dtype", "main_params_dtype",
    "exp_avg_dtype", "exp_avg_sq_dtype", "account_for_embedding_in_pipeline_split",
    "account_for_loss_in_pipeline_split", "num_layers_in_first_pipeline_stage", "num_layers_in_last_pipeline_stage",
    "mtp_num_layers", *REMAT_TENSOR_KEYS, "capacity_factor", "sparse_matmul",
    "decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers", "quantization",
    # DeepSpeed (bot.configs.deepspeed: canonical names of a ds_config's keys; Megatron-DeepSpeed flags)
    "deepspeed", "zero_stage", "offload_optimizer", "offload_param", "precision", "zero_hpz_partition_size",
    "zero_quantized_weights",
    # Megatron precision and Megatron-FSDP (knowledge.cost_shapes._model_state)
    "grad_reduce_in_bf16", "fp8_param_gather", "fp8_params", "fp8", "fp8_recipe", "mixed_precision", "fp4", "fp8_output_proj",
    "first_last_layers_bf16", "num_layers_at_start_in_bf16", "num_layers_at_end_in_bf16",
    "fp4_param_gather", "fp4_param", "use_precision_aware_optimizer",
    "use_megatron_fsdp",
    "data_parallel_sharding_strategy",
    "num_distributed_optimizer_instances",
    "outer_dp_sharding_strategy",
    "overlap_grad_reduce", "overlap_param_gather", "overlap_grad_sync", "overlap_param_sync",
    "optimizer",  # Megatron --optimizer / Megatron-Bridge optimizer.optimizer: adam, sgd, muon, dist_muon
    "sharding_strategy", "fsdp_sharding_strategy",  # PyTorch FSDP (llm-foundry fsdp_config, Accelerate)
) + PEFT_NAMES + PACKING_NAMES + ACT_OFFLOAD_NAMES + GRAPH_NAMES

# Megatron-FSDP --data-parallel-sharding-strategy -> the ZeRO stage it matches (arguments.py choices; default
# optim_grads_params): optimizer state, + gradients, + parameters sharded over the data-parallel ranks.
MEGATRON_FSDP_STAGE: dict[str, int] = {"no_shard": 0, "optim": 1, "optim_grads": 2, "optim_grads_params": 3}

UNEVEN_PIPELINE_KEYS = ("account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split",
                        "num_layers_in_first_pipeline_stage", "num_layers_in_last_pipeline_stage",
                        "decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers",
                        "pipeline_model_parallel_layout")
"""Megatron-Core settings that let pipeline stages hold unequal layer counts."""

# Logical setting -> the keys that hold it, by config format, first match wins (also the key an edit writes).
KEYS: dict[str, dict[str, tuple[str, ...]]] = {
    "remat": {
        "maxtext": ("remat_policy",),
        "megatron": ("recompute_granularity", "activations_checkpoint_granularity"),
        "ici_mesh": ("remat_policy", "remat"),
    },
    "micro_batch": {"megatron": ("micro_batch_size",), "ici_mesh": ("micro_batch_size",), "maxtext": (),
                    "llmfoundry": ("micro_batch_size",)},  # bot.configs.llmfoundry: device_train_microbatch_size
    "per_device_batch": {"maxtext": ("per_device_batch_size",), "ici_mesh": ("per_device_batch_size",),
                         "megatron": ()},
    "grad_accum": {"maxtext": ("gradient_accumulation_steps",),
                   "ici_mesh": ("gradient_accumulation_steps", "microbatches", "num_microbatches", "grad_accum_steps"),
                   "megatron": ()},
    "tp_comm_overlap": {"megatron": ("tp_comm_overlap",)},
    "ep_comm_overlap": {"megatron": ("overlap_moe_expert_parallel_comm",)},
    "expert_tensor_parallel": {"megatron": ("expert_tensor_parallel_size",)},
    "sequence_parallel": {"megatron": ("sequence_parallel",)},
    "dp_replicas": {"megatron": ("num_distributed_optimizer_instances",)},
    "optimizer_over_replicas": {"megatron": ("outer_dp_sharding_strategy",)},
    "grad_reduce_overlap": {"megatron": ("overlap_grad_reduce", "overlap_grad_sync")},
    "param_gather_overlap": {"megatron": ("overlap_param_gather", "overlap_param_sync")},
}


class TrainingSettings(BaseModel):
    """Settings read from the run's config; ``None`` = the file does not say."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    source: str | None = Field(default=None, description="config file the settings were read from")
    format: str | None = Field(default=None, description="maxtext | ici_mesh | megatron | torchtitan")
    launch_defaults: bool = Field(
        default=False,
        description="a Megatron launch command (flags): a flag it omits takes Megatron's arguments.py default "
        "(--use-distributed-optimizer, --sequence-parallel off; no --recompute-granularity: no recompute)",
    )
    remat_policy: str | None = None
    remat_key: str | None = Field(default=None, description="the key that set the remat policy")
    moe_dense_capacity: float | None = Field(default=None, description="MaxText MoE with token dropping on its dense "
                                             "path (capacity_factor > 0, sparse_matmul false): the capacity factor")
    remat_tensors: str | None = Field(default=None, description="MaxText remat_policy custom: the per-tensor "
                                      "choices the config states, 'key=remat|device|offload' comma-separated")
    recompute_method: str | None = None
    recompute_num_layers: int | None = None
    recompute_modules: str | None = Field(default=None, description="Megatron-Core selective recompute_modules as "
                                          "written, comma-separated (None: Megatron's default core_attn)")
    micro_batch: int | None = Field(default=None, description="sequences per micro-batch per data-parallel rank")
    per_device_batch: float | None = Field(default=None, description="MaxText per_device_batch_size")
    grad_accum: int | None = Field(default=None, description="micro-batches accumulated per optimizer step")
    local_batch: int | None = Field(default=None, description="torchtitan local_batch_size: sequences per "
                                    "data-parallel rank (dp_replicate x dp_shard) per forward")
    batch_divisor: int | None = Field(default=None, description="torchtitan: GPUs per data-parallel rank (tp x cp "
                                      "x pp); with no global_batch_size, global batch = local_batch x chips / this")
    global_batch: int | None = None
    seq_len: int | None = None
    distributed_optimizer: bool | None = None
    sequence_parallel: bool | None = None
    flash_attention: bool | None = None
    fsdp_sharding_strategy: str | None = Field(
        default=None, description="PyTorch FSDP's sharding_strategy as a config states it (lower case): "
        "shard_grad_op keeps the gathered weights from forward to backward (ZeRO-2-like); None = not stated")
    attention_kernel: str | None = Field(default=None, description="the attention kernel a config names (``attention`` "
                                         "/ ``attention_kernel``, lower case): decides FlashAttention-2 vs cuDNN / "
                                         "FlashAttention-3 rates on Hopper (knowledge.cost_core.attention_rate)")
    virtual_pipeline: int | None = Field(default=None, description="interleaved model chunks per pipeline stage "
                                         "(Megatron virtual pipeline); None = not stated")
    tp_comm_overlap: bool | None = Field(default=None, description="Megatron --tp-comm-overlap; None = not stated")
    overlap_p2p: bool | None = Field(default=None, description="Megatron --overlap-p2p-communication; None = not stated")
    ep_node_dedup: bool | None = Field(default=None, description="Megatron-Core moe_token_dispatcher_type: flex (DeepEP "
                                       "/ HybridEP) or moe_enable_deepep: tokens cross nodes once per destination node")
    ep_comm_overlap: bool | None = Field(default=None, description="Megatron-Core overlap_moe_expert_parallel_comm "
                                         "(--overlap-moe-expert-parallel-comm): the expert all-to-alls overlap another "
                                         "micro-batch's compute; None = not stated")
    cp_load_balance: bool | None = Field(default=None, description="causal context parallelism split in balanced "
                                         "chunks; None = not stated (Megatron-Core always balances)")
    fused_cross_entropy: bool | None = None
    loss_compiled: bool | None = Field(default=None, description="torchtitan compiles the loss with torch.compile "
                                       "(since April 2025, #1033, when compile is on): inductor fuses the cross-entropy; "
                                       "None = not stated")
    loss_parallel: bool | None = Field(default=None, description="torchtitan computes the cross-entropy on the "
                                       "vocab-sharded logits under tensor parallelism (loss_parallel; off with "
                                       "training.disable_loss_parallel); None = not stated")
    grad_fp32: bool | None = None
    bf16_layers: tuple[int, int] | None = Field(default=None, description="Megatron-Core first_last_layers_bf16: (layers at the start, layers at the end) whose linear layers stay in bf16 under fp8 / fp4; (0, 0) when off, None when not stated")
    precision_rules: list[Rule] | None = Field(default=None, description="Megatron --te-precision-config-file: the per-module precision matchers, in order (bot.configs.precision_recipe); None when the config names no such file")
    fp8_output_proj: bool | None = Field(default=None, description="Megatron-Core TransformerConfig.fp8_output_proj: the LM head runs under MXFP8 (TELMHeadColumnParallelLinear); off or unstated it is a plain bf16 linear")
    grad_dtype: str | None = Field(default=None, description="Megatron optimizer main_grads_dtype")
    master_dtype: str | None = Field(default=None, description="Megatron optimizer main_params_dtype")
    moment_dtype: str | None = Field(default=None, description="Megatron optimizer exp_avg(_sq)_dtype (the wider)")
    weight_dtype: str | None = None
    optimizer_offload: bool | None = None
    optimizer: str | None = Field(default=None, description="Megatron --optimizer / Megatron-Bridge optimizer.optimizer "
                                  "(adam, sgd, muon, dist_muon), lower-cased")
    deepspeed: bool = Field(default=False, description="DeepSpeed's engine runs the optimizer (a ds_config.json, or "
                            "a Megatron-DeepSpeed launch with --deepspeed)")
    zero_stage: int | None = Field(default=None, description="DeepSpeed ZeRO stage 0-3 (ZeRO §5: 1 shards optimizer "
                                   "state, 2 also gradients, 3 also parameters), or the stage a Megatron-FSDP "
                                   "sharding strategy matches; None = not stated / neither")
    megatron_fsdp: bool = Field(default=False, description="Megatron-FSDP (--use-megatron-fsdp): the data-parallel "
                                "ranks shard model state as zero_stage says")
    dp_replicas: int | None = Field(default=None, description="Megatron --num-distributed-optimizer-instances: the "
                                    "data-parallel ranks form this many groups, each holding the sharded model state "
                                    "whole (partial distributed optimizer; Megatron-FSDP's hybrid sharding, HSDP)")
    grad_reduce_overlap: bool | None = Field(default=None, description="Megatron --overlap-grad-reduce (NeMo 1.x "
                                             "optim.overlap_grad_sync): the data-parallel gradient reduce runs under "
                                             "the backward pass; None = not stated")
    param_gather_overlap: bool | None = Field(default=None, description="Megatron --overlap-param-gather (NeMo 1.x "
                                              "optim.overlap_param_sync): the distributed optimizer's parameter "
                                              "all-gather runs under the next forward; None = not stated")
    dp_replicas_problem: str | None = Field(default=None, description="why num_distributed_optimizer_instances was "
                                            "not read")
    optimizer_over_replicas: bool = Field(default=False, description="Megatron-FSDP HSDP --outer-dp-sharding-strategy "
                                          "optim: the optimizer state is sharded across the groups too")
    fp8_params: bool | None = Field(default=None, description="Megatron --fp8-param-gather (NeMo fp8_params): the "
                                    "model's weights are kept in fp8; None = not stated")
    fp8: bool | None = Field(default=None, description="the config runs its linear layers in fp8 (Megatron "
                             "--fp8-format, NeMo / Megatron YAML fp8); None = not stated")
    fp8_recipe: str | None = Field(default=None, description="how fp8 tensors are scaled (knowledge.cost_fp8_recipe): "
                                   "tensorwise, delayed, mxfp8, blockwise, rowwise (torchao); None = not stated")
    fp4: bool | None = Field(default=None, description="the config runs its linear layers in NVFP4 (Megatron-Core "
                             "--fp4-format e2m1 / TransformerConfig fp4); None = not stated")
    fp4_params: bool | None = Field(default=None, description="Megatron --fp4-param-gather (TransformerConfig "
                                    "fp4_param): the model's weights are kept in NVFP4; None = not stated")
    param_offload: bool | None = Field(default=None, description="DeepSpeed offload_param to cpu/nvme (ZeRO-3 only)")
    hpz_partition: int | None = Field(default=None, description="DeepSpeed ZeRO++ hpZ zero_hpz_partition_size: ranks "
                                      "holding a second copy of the weights, gathered there in backward (ZeRO-3)")
    quantized_weights: bool | None = Field(default=None, description="DeepSpeed ZeRO++ qwZ zero_quantized_weights: "
                                           "ZeRO-3's weight all-gathers move int8 blocks")
    dropout: bool | None = None
    pipeline_microbatches: int | None = None
    vocab_tiling: int | None = Field(default=None, description="MaxText num_vocab_tiling: the loss computed in that "
                                     "many chunks of the logits")
    quantization: str | None = Field(default=None, description="MaxText quantization (int8, fp8, ...); None or '' = "
                                     "not quantized (bf16 matmuls)")
    pipeline_layout: tuple[str, ...] | None = Field(
        default=None, description="Megatron-Core pipeline_model_parallel_layout unrolled into its virtual stages "
        "(bot.configs.pipeline_layout); None when the config states none")
    pipeline_layout_problem: str | None = Field(
        default=None, description="why the config's pipeline_model_parallel_layout could not be read")
    pipeline_edges: tuple[int | None, int | None, int] | None = Field(
        default=None, description="Megatron's explicit first / last pipeline-stage layer counts and the pipeline size "
        "they were written for (decoder_first/last_pipeline_num_layers, num_layers_in_first/last_pipeline_stage); "
        "None when the config states none, or states virtual stages")
    uneven_pipeline: dict[str, Any] | None = Field(
        default=None, description="Megatron uneven pipeline-stage settings the config states (key -> value); "
        "None when it states none")
    global_batch_factor: float = Field(
        default=1.0, description="a proposal that raises the per-device batch or accumulation scales the global batch"
    )
    changed: dict[str, Any] = Field(
        default_factory=dict, description="settings a proposal changed vs the run's config: logical name -> new value"
    )
    model_dims: ModelDims | None = Field(
        default=None, description="the model the config states (bot.configs.model_dims); run.yaml's model: wins")
    peft: str | None = Field(default=None, description="'lora' (frozen base, adapters train) or 'none' (every weight "
                             "trains); None = not stated (knowledge.cost_peft)")
    lora_rank: int | None = Field(default=None, description="LoRA adapter rank (Megatron-Bridge peft.dim)")
    lora_targets: tuple[str, ...] | None = Field(default=None, description="adapted linears (peft.target_modules)")
    peft_problem: str | None = Field(default=None, description="what of the config's PEFT settings is not priced")
    packed_sequences: bool | None = Field(default=None, description="fine-tuning samples packed into each sequence "
                                          "(knowledge.cost_packing); None = not stated")
    activation_offload_layers: int | None = Field(default=None, description="layers whose saved activations go to "
                                                  "host memory (Megatron cpu_offloading_num_layers); None = not stated")
    full_iteration_graph: bool | None = Field(default=None, description="Megatron-Core captures the whole training "
                                              "step in one CUDA graph (knowledge.cost_cuda_graph); None = not stated")
    expert_parallel: int | None = Field(default=None, description="Megatron expert_model_parallel_size as configured: "
                                        "larger than the data ranks, it folds over tensor / context ranks "
                                        "(knowledge.cost_moe_grid); None = not stated")
    expert_tensor_parallel: int | None = Field(default=None, description="Megatron expert_tensor_parallel_size; None "
                                               "= not stated (Megatron-LM then uses the tensor size)")


def dtype_bytes(name: str | None) -> float:
    """Bytes per element of a dtype as configs write it (torch.bfloat16, bf16, float32, fp8 ...); 4 if unknown."""
    n = (name or "").lower().replace("torch.", "").replace("jnp.", "")
    if any(x in n for x in ("bf16", "bfloat16", "fp16", "float16", "half")):
        return 2.0
    if any(x in n for x in ("fp8", "float8", "e4m3", "e5m2", "uint8", "int8")):
        return 1.0
    return 4.0


_int = positive_int


def _num(v: object) -> float | None:
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, int | float):
        return float(v) if v > 0 else None
    try:
        f = float(str(v))
    except ValueError:
        return None
    return f if f > 0 else None


_bool = as_bool
_lookup = find_by_name


def all_settings(config: ShardingConfig) -> dict[str, Any]:
    """Every setting in :data:`NAMES` found in the file, dotted path -> scalar value."""
    if config.launch or config.files or config.format in ("deepspeed", "torchtitan", "llmfoundry"):
        # a launch script / base_config chain: the reader resolved the settings; a JSON / TOML file: its reader read them
        return dict(config.settings)
    root = compose(config.text, config.source)
    if root is None:
        return dict(config.settings)
    values = read_settings(root, NAMES, lists=PEFT_LISTS + GRAPH_LISTS)
    merged = dict(config.settings)
    merged.update(values)
    return merged


def _dense_capacity(values: dict[str, Any]) -> float | None:
    """MaxText's MoE layer drops tokens beyond ``capacity_factor`` x the balanced load only on its dense path
    (``sparse_matmul: false``; base.yml: true, capacity_factor -1 = dropless): the capacity factor there, else None."""
    cf = _num(_lookup(values, "capacity_factor")[1])
    if cf is None or cf <= 0 or _bool(_lookup(values, "sparse_matmul")[1]) is not False:
        return None
    return cf


def _precision_rules(config: ShardingConfig) -> list[Rule] | None:
    """The enabled matchers of the per-module precision recipe the config read (bot.configs.precision_recipe), in
    order; None when it names none or it was not found."""
    path = getattr(config, "precision_recipe", None)
    if not path or path not in config.files:
        return None
    return read_rules(config.files[path], path)[0]


def settings_from_config(config: ShardingConfig) -> TrainingSettings:
    """The training settings a parsed config states (see the module docstring)."""
    v = all_settings(config)
    # the pipeline size is a mesh key (bot.configs.megatron KEYS); the layout's virtual stages are derived from it
    v = {**{k.path: k.value for k in config.keys if k.key == "pipeline_model_parallel_size"}, **v}
    fmt = config.format
    out: dict[str, Any] = {"source": config.source, "format": fmt}
    # A launch command is the whole argument list Megatron parses: what it leaves out is argparse's default.
    # A YAML summary (a recipe, a NeMo config, a published table) may leave things out that its launcher set.
    out["launch_defaults"] = fmt == "megatron" and getattr(config, "launch", None) is not None
    out["precision_rules"] = _precision_rules(config)

    key, remat = _lookup(v, "remat_policy", "recompute_granularity", "activations_checkpoint_granularity", "remat")
    if key is not None:
        out["remat_key"] = key
        out["remat_policy"] = "none" if remat is None or remat is False else str(remat)
    if fmt == "maxtext":
        out["moe_dense_capacity"] = _dense_capacity(v)
        tensors = [f"{k}={v[path]}" for k in REMAT_TENSOR_KEYS for path in v if path == k or path.endswith("." + k)]
        out["remat_tensors"] = ",".join(tensors) or None
    _, method = _lookup(v, "recompute_method", "activations_checkpoint_method")
    out["recompute_method"] = None if method is None else str(method)
    _, layers = _lookup(v, "recompute_num_layers", "activations_checkpoint_num_layers")
    out["recompute_num_layers"] = _int(layers)
    _, modules = _lookup(v, "recompute_modules")
    out["recompute_modules"] = None if modules is None else str(modules)

    out["micro_batch"] = _int(_lookup(v, "micro_batch_size")[1])
    out["per_device_batch"] = _num(_lookup(v, "per_device_batch_size")[1])
    out["grad_accum"] = _int(_lookup(v, "gradient_accumulation_steps", "grad_accum_steps", "num_microbatches",
                                     "microbatches")[1])
    out["global_batch"] = _int(_lookup(v, "global_batch_size")[1])
    out["seq_len"] = _int(trained_seq_length(v, "seq_length", "max_target_length", "seq_len")[1])
    if out["seq_len"] is None and fmt == "maxtext":  # pyconfig fills in base.yml's max_target_length
        out["seq_len"] = MAXTEXT_BASE_SEQ_LEN

    dist = _bool(_lookup(v, "use_distributed_optimizer")[1])
    if dist is None and fmt == "megatron":
        optim = [str(val).lower() for path, val in v.items() if path.endswith(("optim.name", "optimizer.name"))]
        if optim:
            dist = any("distributed" in o for o in optim)
    out["distributed_optimizer"] = dist
    out["sequence_parallel"] = _bool(_lookup(v, "sequence_parallel")[1])
    out.update(precision_settings(v))

    out["attention_kernel"] = _name(_lookup(v, "attention", "attention_kernel")[1])
    out["flash_attention"] = _flash_attention(v, out["attention_kernel"])
    out["fsdp_sharding_strategy"] = _name(_lookup(v, "sharding_strategy", "fsdp_sharding_strategy")[1])
    out.update(overlap_settings(v))
    # the configured expert size, as the mesh reader took it (a launch script's flag or the model section's key):
    # larger than the data ranks, the MoE layers fold it over tensor / context ranks (knowledge.cost_moe_grid)
    ep_key = config.key("expert_model_parallel_size") if fmt == "megatron" else None
    out["expert_parallel"] = ep_key.value if ep_key is not None and isinstance(ep_key.value, int) else None
    out["fused_cross_entropy"] = _bool(_lookup(v, "cross_entropy_loss_fusion")[1])
    _, wd = _lookup(v, "weight_dtype", "param_dtype")
    out["weight_dtype"] = None if wd is None else str(wd).lower()
    out["optimizer_offload"] = _bool(_lookup(v, "optimizer_memory_host_offload")[1])
    _, optimizer = _lookup(v, "optimizer")
    out["optimizer"] = _name(optimizer)
    drops = [_num(_lookup(v, k)[1]) for k in ("hidden_dropout", "attention_dropout")]
    present = [_lookup(v, k)[0] is not None for k in ("hidden_dropout", "attention_dropout")]
    out["dropout"] = any(d for d in drops) if any(present) else None
    out["pipeline_microbatches"] = _int(_lookup(v, "num_pipeline_microbatches")[1])
    out["vocab_tiling"] = _int(_lookup(v, "num_vocab_tiling")[1])
    _, quant = _lookup(v, "quantization")
    out["quantization"] = (str(quant).strip().lower() or None) if quant not in (None, False) else None
    uneven = {k: _lookup(v, k)[1] for k in UNEVEN_PIPELINE_KEYS if _lookup(v, k)[0] is not None}
    out["uneven_pipeline"] = uneven or None
    out["model_dims"] = _model_dims(config)
    out.update(deepspeed_settings(v, fmt))
    out.update(megatron_fsdp_settings(v, fmt))
    out.update(optimizer_instance_settings(v, fmt))
    out.update(data_parallel_overlap_settings(v))
    out.update(peft_settings(v))
    out.update(packing_settings(v))
    out.update(offload_settings(v))
    out.update(graph_settings(v))
    if fmt == "torchtitan":
        from knowledge.cost_settings_titan import torchtitan_settings

        out.update(torchtitan_settings(config))
    return TrainingSettings(**out)


# Megatron-Bridge mixed-precision presets that keep edge layers in bf16, as a config naming the preset gets them
# (src/megatron/bridge/training/mixed_precision.py @ 067f987df): (layers at the start, layers at the end)
BF16_EDGE_PRESETS: dict[str, tuple[int, int]] = {
    "bf16_with_fp8_current_scaling_mixed": (1, 1), "fp16_with_fp8_current_scaling_mixed": (1, 1),
    "nemotron_h_bf16_with_fp8_current_scaling_mixed": (2, 2), "nanov2_bf16_with_fp8_current_scaling_mixed": (2, 2),
    "nemotron_3_super_bf16_with_nvfp4_mixed": (0, 14),
}


def _bf16_layers(v: dict[str, Any]) -> tuple[int, int] | None:
    """(start, end) layers Megatron-Core keeps in bf16 (``first_last_layers_bf16``; fp8_utils.py
    ``is_first_last_bf16_layer``); (0, 0) when the flag is off; None when the config does not say.

    An unstated count defaults as the place that states the flag does: 1 in Megatron-Core's TransformerConfig (and
    Megatron-LM's flags), 0 in Megatron-Bridge's ``mixed_precision`` section (MixedPrecisionConfig). A config that
    only names a Megatron-Bridge preset (``mixed_precision: bf16_with_fp8_current_scaling_mixed``) gets the preset's.
    """
    path, on_raw = _lookup(v, "first_last_layers_bf16")
    on = _bool(on_raw)
    if on is None:
        preset = _lookup(v, "mixed_precision")[1]
        return BF16_EDGE_PRESETS.get(preset.strip().lower().replace("-", "_")) if isinstance(preset, str) else None
    if not on:
        return (0, 0)
    default = 0 if path is not None and "mixed_precision" in path.split(".")[:-1] else 1
    counts = []
    for key in ("num_layers_at_start_in_bf16", "num_layers_at_end_in_bf16"):
        raw = _lookup(v, key)[1]
        counts.append(int(raw) if not isinstance(raw, bool) and str(raw).strip().isdigit() else default)
    return (counts[0], counts[1])


def precision_settings(v: dict[str, Any]) -> dict[str, Any]:
    """Gradient-reduction dtype, fp8 / fp4 linear layers and their recipe and weights, and the optimizer-state dtypes
    a Megatron-family config states."""
    out: dict[str, Any] = {}
    out["grad_fp32"] = _bool(_lookup(v, "grad_reduce_in_fp32", "accumulate_allreduce_grads_in_fp32")[1])
    if _bool(_lookup(v, "grad_reduce_in_bf16")[1]):  # arguments.py: it turns accumulate_allreduce_grads_in_fp32 off
        out["grad_fp32"] = False
    out["fp8_params"] = _bool(_lookup(v, "fp8_param_gather", "fp8_params")[1])
    out["fp8_output_proj"] = _bool(_lookup(v, "fp8_output_proj")[1])
    out["bf16_layers"] = _bf16_layers(v)
    out["fp8"] = fp8_stated(_lookup(v, "fp8")[1])
    out["fp8_recipe"] = fp8_recipe_stated(_lookup(v, "fp8_recipe")[1], _lookup(v, "mixed_precision")[1])
    out["fp4"] = fp8_stated(_lookup(v, "fp4")[1])  # a format name (e2m1) or true is on, null / false off
    out["fp4_params"] = _bool(_lookup(v, "fp4_param_gather", "fp4_param")[1])
    # Megatron-Core's optimizer-state dtypes apply only with the precision-aware optimizer (OptimizerConfig); a config
    # that turns it off keeps fp32 states whatever the dtype fields say
    precision_aware = _bool(_lookup(v, "use_precision_aware_optimizer")[1]) is not False
    for field_name, keys in (("grad_dtype", ("main_grads_dtype",)), ("master_dtype", ("main_params_dtype",)),
                             ("moment_dtype", ("exp_avg_dtype", "exp_avg_sq_dtype"))):
        found = [str(_lookup(v, k)[1]).lower() for k in keys if _lookup(v, k)[0] is not None]
        if found and precision_aware:
            out[field_name] = max(found, key=dtype_bytes)
    return out


def deepspeed_settings(values: dict[str, Any], fmt: str) -> dict[str, Any]:
    """ZeRO stage, offload and precision of a DeepSpeed run ({} when the run does not use DeepSpeed).

    Precision (bf16 / fp16 / fp32) lands in ``weight_dtype``; an offload device (cpu, nvme) means the state is
    not in HBM; a value the config leaves "auto" stays None (unknown).
    """
    ds = fmt == "deepspeed" or _bool(_lookup(values, "deepspeed")[1]) is True
    if not ds:
        return {}
    out: dict[str, Any] = {"deepspeed": True}
    stage = _lookup(values, "zero_stage")[1]
    out["zero_stage"] = stage if isinstance(stage, int) and not isinstance(stage, bool) and 0 <= stage <= 3 else None
    for field_name, key in (("optimizer_offload", "offload_optimizer"), ("param_offload", "offload_param")):
        path, dev = _lookup(values, key)
        out[field_name] = None if dev is None and path is not None else (dev in ("cpu", "nvme") if dev else False)
    precision = _lookup(values, "precision")[1]
    if isinstance(precision, str):
        out["weight_dtype"] = precision
    out["hpz_partition"] = _int(_lookup(values, "zero_hpz_partition_size")[1])
    out["quantized_weights"] = _bool(_lookup(values, "zero_quantized_weights")[1])
    return out


def fp8_stated(value: object) -> bool | None:
    """Whether a Megatron ``fp8`` setting turns fp8 on: a format name (``hybrid``, ``e4m3``) or true is on; false
    or ``null`` (the Megatron-Bridge / NeMo default) is off; absent is unknown."""
    if value is None:
        return None
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("", "none", "null", "false", "no", "0"):
        return False
    return True


def megatron_fsdp_settings(values: dict[str, Any], fmt: str) -> dict[str, Any]:
    """Megatron-FSDP: the ZeRO stage its sharding strategy matches ({} when the config does not use it).

    ``--use-megatron-fsdp`` with ``--data-parallel-sharding-strategy`` (default ``optim_grads_params``,
    Megatron-LM arguments.py): optim shards the optimizer state over the data-parallel ranks, optim_grads also
    the gradients, optim_grads_params also the parameters (gathered per layer as needed) — ZeRO stages 1-3.
    """
    if fmt != "megatron" or _bool(_lookup(values, "use_megatron_fsdp")[1]) is not True:
        return {}
    strategy = _lookup(values, "data_parallel_sharding_strategy")[1]
    stage = MEGATRON_FSDP_STAGE.get(str(strategy).strip().lower()) if strategy is not None else 3
    return {"megatron_fsdp": True, "zero_stage": stage}


def _name(value: Any) -> str | None:
    """A named choice as a config states it (``attention: Flash``, ``sharding_strategy: SHARD_GRAD_OP``), lower case;
    None when it is not a non-empty string."""
    return value.strip().lower() if isinstance(value, str) and value.strip() else None


def _flash_attention(values: dict[str, Any], kernel: str | None) -> bool | None:
    """Whether the attention runs a flash kernel: ``use_flash_attention`` / ``use_flash_attn``, or a named ``kernel``
    (``attention`` / ``attention_kernel``) other than the dot-product ones (MaxText ``attention: dot_product``); None
    when not stated."""
    if kernel is not None:
        return kernel not in ("dot_product", "dot-product", "vanilla", "xla", "eager")
    return _bool(_lookup(values, "use_flash_attention", "use_flash_attn")[1])


def data_parallel_overlap_settings(values: dict[str, Any]) -> dict[str, Any]:
    """Megatron's data-parallel overlap flags as stated (None: not stated): ``overlap_grad_reduce`` (NeMo 1.x
    ``optim.overlap_grad_sync``) and ``overlap_param_gather`` (``overlap_param_sync``); what an unstated flag means
    is decided where the state is priced (knowledge.cost_shapes._dp_exposed_share)."""
    return {"grad_reduce_overlap": _bool(_lookup(values, "overlap_grad_reduce", "overlap_grad_sync")[1]),
            "param_gather_overlap": _bool(_lookup(values, "overlap_param_gather", "overlap_param_sync")[1])}


def dp_overlap_off(settings: TrainingSettings) -> tuple[bool, bool]:
    """(gradient reduce, parameter gather) overlap known to be off: stated false, or omitted from a Megatron launch
    command, where both store_true flags default to off (Megatron-LM arguments.py). A YAML that does not say is not
    known to be off (Megatron-Bridge's pretraining recipes turn both on)."""
    reduce, gather = settings.grad_reduce_overlap, settings.param_gather_overlap
    if settings.launch_defaults:
        return not reduce, not gather
    return reduce is False, gather is False


def optimizer_instance_settings(values: dict[str, Any], fmt: str) -> dict[str, Any]:
    """Megatron's partial distributed optimizer and Megatron-FSDP's hybrid sharding ({} when the config does not say).

    ``--num-distributed-optimizer-instances I`` (DistributedDataParallelConfig: "the factor by which the DP domain is
    sharded to have the partial DistOpt enabled"; default 1) splits the data-parallel ranks into I groups of
    consecutive ranks: the distributed optimizer (and Megatron-FSDP's sharded gradients and parameters) shards over
    one group and replicates across groups. Under Megatron-FSDP, ``--outer-dp-sharding-strategy optim`` shards the
    optimizer state across the groups as well (Megatron-LM arguments.py; ``no_shard``, the default, replicates it).
    """
    if fmt != "megatron":
        return {}
    raw = _lookup(values, "num_distributed_optimizer_instances")[1]
    if raw is None:
        return {}
    replicas = _int(raw)
    if replicas is None:
        return {"dp_replicas_problem": f"num_distributed_optimizer_instances {raw!r} is not a positive integer (Megatron "
                                       "needs one that divides the data-parallel size): not read, the model state is "
                                       "priced sharded over every data-parallel rank"}
    outer = _lookup(values, "outer_dp_sharding_strategy")[1]
    return {"dp_replicas": replicas, "optimizer_over_replicas": str(outer).strip().lower() == "optim"}


def _model_dims(config: ShardingConfig) -> ModelDims | None:
    """The config's model; a model file that cannot be read becomes a named problem, never an exception."""
    from bot.errors import AsapError

    try:
        return read_model_dims(config)
    except AsapError as exc:
        return ModelDims(source=config.source, problems=[f"its model cannot be read: {exc.message}"])


def matmul_dtype(training_dtype: str | None, quantization: str | None) -> str:
    """The dtype the linear layers' matmuls run in: int8 / fp8 when the config quantizes them (MaxText
    ``quantization: int8`` dynamic-range int8, ``fp8`` / ``nanoo_fp8`` / ``fp8_full``; torchtitan ``mxfp8``),
    fp8 / fp4 for run.yaml ``training.dtype: fp8`` / ``fp4`` (MXFP8 is an fp8 format and runs at the fp8 peak;
    NVFP4 is fp4), else bf16. Weight-only schemes (``int8w``, ``int4w``) and ``intmp`` (inference) keep bf16
    matmuls."""
    q = (quantization or "").strip().lower()
    if "fp8" in q:
        return "fp8"
    if q == "int8":
        return "int8"
    return training_dtype if training_dtype in ("fp8", "fp4") else "bf16"


def _layout(values: dict[str, Any]) -> dict[str, Any]:
    """The config's ``pipeline_model_parallel_layout`` unrolled (or why it could not be)."""
    path, text = _lookup(values, "pipeline_model_parallel_layout")
    if path is None or text in (None, "", "null", "None"):
        return {}
    if not isinstance(text, str):
        return {"pipeline_layout_problem": f"{path} is not a layout string (a list form is not read): stages priced "
                                           "as an even split"}
    try:
        return {"pipeline_layout": parse_pipeline_layout(text)}
    except ValueError as exc:
        return {"pipeline_layout_problem": f"{path}: {exc}"}


def _edges(values: dict[str, Any], pp: int | None, vpp: int | None) -> dict[str, Any]:
    """Megatron's explicit first / last pipeline-stage sizes with the pipeline size they apply to (no virtual
    stages: with them Megatron-Core splits each stage's layers over its chunks, which is not priced); {} when none."""
    first = _int(_lookup(values, "decoder_first_pipeline_num_layers", "num_layers_in_first_pipeline_stage")[1])
    last = _int(_lookup(values, "decoder_last_pipeline_num_layers", "num_layers_in_last_pipeline_stage")[1])
    if (first is None and last is None) or not pp or pp < 2:
        return {}
    if (vpp or 1) > 1:
        return {"pipeline_layout_problem": f"first / last pipeline-stage sizes ({first} / {last}) with {vpp} virtual "
                                           "stages are not priced (Megatron-Core divides each stage over its chunks)"}
    return {"pipeline_edges": (first, last, pp)}


def overlap_settings(values: dict[str, Any]) -> dict[str, Any]:
    """Megatron's interleaving and overlap settings (:data:`OVERLAP_NAMES`), as TrainingSettings fields.

    ``virtual_pipeline`` is ``virtual_pipeline_model_parallel_size`` when given, else ``num_layers /
    (pipeline_model_parallel_size x num_layers_per_virtual_pipeline_stage)`` (Megatron-LM's arguments.py
    derives it the same way); an absent key stays ``None`` (not stated).
    """
    out: dict[str, Any] = {}
    vpp = _int(_lookup(values, "virtual_pipeline_model_parallel_size")[1])
    per_stage = _int(_lookup(values, "num_layers_per_virtual_pipeline_stage")[1])
    layers = _int(_lookup(values, "num_layers")[1])
    pp = _int(_lookup(values, "pipeline_model_parallel_size")[1])
    if vpp is None and per_stage and layers and pp and layers % (pp * per_stage) == 0:
        vpp = layers // (pp * per_stage)
    out.update(_layout(values))
    stages = out.get("pipeline_layout")
    if vpp is None and stages and pp and len(stages) % pp == 0:  # Megatron-Core: the layout sets the chunks per rank
        vpp = len(stages) // pp if len(stages) > pp else None
    out["virtual_pipeline"] = vpp
    if not stages:
        out.update(_edges(values, pp, vpp))
    out["tp_comm_overlap"] = _bool(_lookup(values, "tp_comm_overlap")[1])
    out["overlap_p2p"] = _bool(_lookup(values, "overlap_p2p_comm", "overlap_p2p_communication")[1])
    out["ep_comm_overlap"] = _bool(_lookup(values, "overlap_moe_expert_parallel_comm")[1])
    out["expert_tensor_parallel"] = _int(_lookup(values, "expert_tensor_parallel_size")[1])
    dispatcher = _lookup(values, "moe_token_dispatcher_type")[1]
    deepep = _bool(_lookup(values, "moe_enable_deepep")[1])
    backend = _lookup(values, "moe_flex_dispatcher_backend")[1]
    if dispatcher is not None or deepep is not None:
        # flex runs DeepEP (the default backend) or HybridEP, both node-level forwarding; NCCL EP is not known to
        flex = str(dispatcher).strip().lower() == "flex" or bool(deepep)
        out["ep_node_dedup"] = flex and str(backend or "deepep").strip().lower() in ("deepep", "hybridep")
    return out


def placeable_key(settings: TrainingSettings, logical: str, config: ShardingConfig) -> str | None:
    """:func:`key_for` where an edit can put the key: any key of a launch command (a new flag goes on the command),
    but only a key a YAML already holds. A YAML's new key would land beside its mesh keys, and Megatron-Bridge reads
    these (``ddp.*``) from another section, so a lever that would add one there is not offered."""
    key = key_for(settings, logical, config)
    if key is None or config.launch is not None:
        return key
    present = any(path == key or path.rsplit(".", 1)[-1] == key.rsplit(".", 1)[-1] for path in all_settings(config))
    return key if present else None


def key_for(settings: TrainingSettings, logical: str, config: ShardingConfig) -> str | None:
    """The key an edit writes for a logical setting: the one present in the file, else the format's first."""
    if config.format == "torchtitan":
        return None  # a torchtitan change writes several TOML keys: bot.configs.torchtitan_edit names them
    candidates = KEYS.get(logical, {}).get(config.format, ())
    values = all_settings(config)
    for name in candidates:
        for path in values:
            if path.rsplit(".", 1)[-1] == name:
                return path
    if logical == "remat" and settings.remat_key:
        return settings.remat_key
    return candidates[0] if candidates else None


def settings_for_run(run: Any) -> TrainingSettings | None:
    """Settings of a :class:`bot.runs.store.Run`'s own config; None when it names none or it cannot be read.

    A config that cannot be parsed is reported where the mesh is read (``asap why``); here it only means
    the cost model falls back to run.yaml.
    """
    from bot.configs.detect import load_run_config
    from bot.errors import AsapError

    record = getattr(run, "record", None)
    if record is None or not record.config:
        return None
    try:
        # as the launch resolves it (run.yaml ``command:`` included), the same reading the mesh comes from
        return settings_from_config(load_run_config(run))
    except AsapError:
        return None


# ------------------------------------------------------------------------------------------------------------
# Unstated settings are uncertainty, not the worst case.


class UnknownSetting(BaseModel):
    """A setting that moves memory (and time) which neither the config, run.yaml nor a documented framework
    default states: the memory band spans its options and the answer names it when it decides a verdict."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = Field(description="logical name: distributed_optimizer | sequence_parallel | remat | micro_batch | ...")
    lean: dict[str, Any] = Field(description="TrainingSettings fields of the least memory-hungry option")
    hungry: dict[str, Any] = Field(description="TrainingSettings fields of the most memory-hungry option")
    fix: str = Field(description="what to set for the lean option, in the config's words")
    words: str = Field(description="the setting, as a person names it")


def _megatron_unknowns(settings: TrainingSettings) -> list[UnknownSetting]:
    out: list[UnknownSetting] = []
    if settings.distributed_optimizer is None:
        out.append(UnknownSetting(
            name="distributed_optimizer", lean={"distributed_optimizer": True}, hungry={"distributed_optimizer": False},
            fix="set use_distributed_optimizer: true", words="the distributed optimizer",
        ))
    if settings.micro_batch is None:
        # Megatron requires --micro-batch-size; a summary without it: priced at 1 (knowledge.cost_shapes), the band
        # spans NeMo 1.x's megatron_gpt_config.yaml default of 4 (more activation memory per micro-batch)
        out.append(UnknownSetting(
            name="micro_batch", lean={"micro_batch": 1}, hungry={"micro_batch": 4},
            fix="set micro_batch_size: 1", words="the micro-batch size",
        ))
    if settings.sequence_parallel is None:
        out.append(UnknownSetting(
            name="sequence_parallel", lean={"sequence_parallel": True}, hungry={"sequence_parallel": False},
            fix="set sequence_parallel: true", words="sequence parallelism",
        ))
    return out


def _deepspeed_unknowns(settings: TrainingSettings) -> list[UnknownSetting]:
    """A DeepSpeed run whose ZeRO stage or optimizer offload ASAP could not read (an unexpanded or "auto" ds_config)."""
    out: list[UnknownSetting] = []
    if not settings.deepspeed:
        return out
    if settings.zero_stage is None:
        out.append(UnknownSetting(
            name="zero_stage", lean={"zero_stage": 3}, hungry={"zero_stage": 0},
            fix='set "zero_optimization": {"stage": 3} in the ds_config (or a lower stage that fits)',
            words="the DeepSpeed ZeRO stage",
        ))
    if settings.optimizer_offload is None:
        out.append(UnknownSetting(
            name="optimizer_offload", lean={"optimizer_offload": True}, hungry={"optimizer_offload": False},
            fix='set "offload_optimizer": {"device": "cpu"} in zero_optimization', words="optimizer offload to CPU",
        ))
    return out


REMAT_KEY = {"megatron": "recompute_granularity"}


def torchtitan_run(tags: Iterable[str], settings: TrainingSettings | None) -> bool:
    """The run trains with torchtitan: its TOML config, or a ``torchtitan`` tag on a plain mesh file."""
    return getattr(settings, "format", None) == "torchtitan" or "torchtitan" in {t.lower() for t in tags}


def _loss_unknown(s: TrainingSettings, framework: str, torchtitan: bool) -> list[UnknownSetting]:
    """A PyTorch trainer other than torchtitan whose config does not say how it computes the cross-entropy.

    The loss's peak is where small models with large vocabularies peak: eager PyTorch holds 12 bytes per logit (the
    bf16 logits, an fp32 copy, log-softmax and their gradients), a fused kernel 4 (flash-attn's xentropy, which
    llm-foundry's MPT uses by default; Liger; torch.compile). Neither is a documented default across trainers.
    """
    if framework != "other" or torchtitan or s.format in ("megatron", "maxtext"):
        return []
    if s.fused_cross_entropy is not None or s.loss_compiled:
        return []
    return [UnknownSetting(
        name="cross_entropy", lean={"fused_cross_entropy": True}, hungry={"fused_cross_entropy": False},
        fix="state cross_entropy_loss_fusion: true when the trainer fuses it, e.g. flash-attn's xentropy, Liger, "
            "torch.compile; false for eager PyTorch",
        words="a fused cross-entropy kernel",
    )]


def unknown_settings(settings: TrainingSettings | None, framework: str, runyaml_remat: str | None,
                     runyaml_offload: int = 0, *, torchtitan: bool = False) -> list[UnknownSetting]:
    """The memory-moving settings this run leaves unstated (module section docstring).

    Stated means: the config sets it, run.yaml sets it (``training.remat``), or the framework documents a
    default that applies to every version ASAP reads: MaxText ``remat_policy: full``, optimizer offload off
    and weight dtype in base.yml; flash attention on in MaxText (``attention: autoselected``) and
    Megatron-Core (Transformer Engine fused attention); sequence parallelism is how MaxText/GSPMD shard
    activations anyway. For other trainers (plain JAX, PyTorch) the attention kernel is unknown unless stated,
    and for PyTorch trainers other than torchtitan (``torchtitan``) the cross-entropy kernel too. Megatron's distributed optimizer and sequence parallelism differ between
    Megatron-LM (off unless flagged) and the NeMo / Megatron-Bridge recipes (on), and activation recompute
    between Megatron-LM (off) and recipes (selective or full): unstated, they are unknown. With activation offloading
    on (the config's ``cpu_offloading``, or run.yaml's ``training.activation_offload_layers``: ``runyaml_offload``)
    recompute is known to be off: Megatron-Core refuses the two together.
    """
    s = settings or TrainingSettings()
    out: list[UnknownSetting] = _deepspeed_unknowns(s)  # DeepSpeed's stage lives in its JSON, not in argparse
    if s.launch_defaults:
        return out  # a Megatron launch command: every omitted flag is argparse's documented default
    if framework == "megatron" or s.format == "megatron":
        out.extend(_megatron_unknowns(s))
    if s.flash_attention is None and framework in ("jax", "other") and s.format not in ("maxtext", "megatron"):
        # No documented default: plain JAX attention materialises the scores unless a flash/splash kernel is
        # used; PyTorch trainers (torchtitan) default to SDPA's flash kernel. MaxText ('autoselected') and
        # Megatron-Core (Transformer Engine fused attention) document a fused default.
        out.append(UnknownSetting(
            name="flash_attention", lean={"flash_attention": True}, hungry={"flash_attention": False},
            fix="use a fused/flash attention kernel (e.g. attention: flash)", words="a flash attention kernel",
        ))
    out.extend(_loss_unknown(s, framework, torchtitan))
    offloading = bool(offload_layers(s, runyaml_offload))
    remat_stated = s.remat_key is not None or runyaml_remat is not None or framework == "maxtext" or offloading
    if not remat_stated:
        key = REMAT_KEY.get(framework, "remat_policy")
        if framework == "megatron" or s.format == "megatron":
            lean = {"remat_policy": "full", "remat_key": key, "recompute_method": "uniform", "recompute_num_layers": 1}
            hungry = {"remat_policy": "none", "remat_key": key}
            fix = "set recompute_granularity: selective (or full)"
        else:
            lean, hungry = {"remat_policy": "full", "remat_key": key}, {"remat_policy": "none", "remat_key": key}
            fix = f"set {key}: full (or a policy that saves less)"
        out.append(UnknownSetting(name="remat", lean=lean, hungry=hungry, fix=fix, words="activation recompute"))
    return out


def with_options(settings: TrainingSettings | None, unknowns: list[UnknownSetting], which: str,
                 *, only: str | None = None) -> TrainingSettings:
    """``settings`` with every unknown at its ``lean`` or ``hungry`` option (``only``: that one lean, the
    rest hungry), leaving stated settings as they are."""
    base = settings or TrainingSettings()
    update: dict[str, Any] = {}
    for u in unknowns:
        pick = u.lean if (which == "lean" if only is None else u.name == only) else u.hungry
        update.update(pick)
    return base.model_copy(update=update)
