"""Megatron-LM / Pai-Megatron-Patch launch lines read as argparse reads them (the last flag wins).

:func:`megatron_from_command` turns the training command a script runs (``torchrun ... pretrain_gpt.py
--tensor-model-parallel-size 8 ...``) into a ``megatron`` :class:`ShardingConfig`: the tp/pp/cp/ep sizes
(each with the span where its value is written, for in-place edits), the settings that matter (batch,
virtual pipeline, sequence parallel, recompute, distributed optimizer, flash attention, fp8, model sizes)
and the device count from the launcher's ``--nproc_per_node x --nnodes``. :func:`with_megatron_command`
lays a recorded command (run.yaml ``command:``) over a Megatron/NeMo YAML.
"""

from __future__ import annotations

import re

from bot.configs import megatron
from bot.configs.sharding import ConfigKey, Scalar, ShardingConfig
from bot.configs.shell import Command, Script, Val, read_script
from bot.errors import ConfigError


def yaml_value(text: str | None) -> Scalar:
    import yaml

    if text is None:
        return None
    try:
        v = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    return v if isinstance(v, str | int | float | bool) or v is None else text

def megatron_launch(cmd: Command) -> int | None:
    """Index of the training script word (``pretrain_gpt.py``...) when ``cmd`` launches Megatron, else None."""
    words = [w.text or "" for w in cmd.words]
    flags = any(w.startswith("--tensor-model-parallel-size") or w.startswith("--pipeline-model-parallel-size")
                or w.startswith("--micro-batch-size") for w in words)
    for i, w in enumerate(words):
        if w.endswith(".py") and (re.search(r"(pretrain|finetune|train)[\w-]*\.py$", w) or flags):
            return i
    return None


def launcher_counts(words: list[str]) -> tuple[int | None, int | None]:
    """GPUs per node and nodes from torchrun / torch.distributed flags (``--nproc_per_node 8 --nnodes 2``)."""
    per = nodes = None
    for i, w in enumerate(words):
        name, _, val = w.partition("=")
        if not val and i + 1 < len(words):
            val = words[i + 1]
        if name in ("--nproc_per_node", "--nproc-per-node"):
            per = to_int(val)
        elif name in ("--nnodes",):
            nodes = to_int(val.split(":")[-1])
    return per, nodes


def to_int(text: str) -> int | None:
    return int(text) if re.fullmatch(r"\d+", text or "") else None

def insert_point(cmd: Command, source: str) -> int | None:
    """Offset just past the launch line's last token in the config's own text, where a new override or flag
    goes (None when the launch sits in another file, e.g. a script the config calls)."""
    return cmd.end if cmd.file == source and cmd.end >= 0 else None

FLAG_SETTINGS: dict[str, str] = {
    "micro_batch_size": "micro_batch_size", "global_batch_size": "global_batch_size",
    "num_layers_per_virtual_pipeline_stage": "num_layers_per_virtual_pipeline_stage",
    "virtual_pipeline_model_parallel_size": "virtual_pipeline_model_parallel_size",
    "num_virtual_stages_per_pipeline_rank": "virtual_pipeline_model_parallel_size",
    "pipeline_model_parallel_layout": "pipeline_model_parallel_layout",  # bot.configs.pipeline_layout
    "sequence_parallel": "sequence_parallel", "recompute_granularity": "recompute_granularity",
    "recompute_method": "recompute_method", "recompute_num_layers": "recompute_num_layers",
    "recompute_activations": "recompute_granularity", "recompute_modules": "recompute_modules",
    "use_distributed_optimizer": "use_distributed_optimizer",
    "use_flash_attn": "use_flash_attn", "attention_backend": "attention_backend", "fp8_format": "fp8",
    "fp8": "fp8", "fp8_hybrid": "fp8", "fp8_e4m3": "fp8", "fp8_recipe": "fp8_recipe", "expert_tensor_parallel_size": "expert_tensor_parallel_size",
    "num_experts": "num_moe_experts", "num_moe_experts": "num_moe_experts", "num_layers": "num_layers",
    "num_attention_heads": "num_attention_heads", "num_query_groups": "num_query_groups",
    "seq_length": "seq_length", "hidden_size": "hidden_size", "bf16": "bf16", "fp16": "fp16",
    # model dimensions (bot.configs.model_dims)
    "ffn_hidden_size": "ffn_hidden_size", "kv_channels": "kv_channels", "swiglu": "swiglu",
    "group_query_attention": "group_query_attention", "vocab_size": "vocab_size",
    "make_vocab_size_divisible_by": "make_vocab_size_divisible_by", "moe_router_topk": "moe_router_topk",
    "tokenizer_type": "tokenizer_type", "tokenizer_model": "tokenizer_model", "vocab_file": "vocab_file",
    "untie_embeddings_and_output_weights": "untie_embeddings_and_output_weights",
    # Megatron-DeepSpeed (bot.configs.deepspeed_launch)
    "deepspeed": "deepspeed", "deepspeed_config": "deepspeed_config", "zero_stage": "zero_stage",
    "no_pipeline_parallel": "no_pipeline_parallel",
    # model state and loss (knowledge.cost_shapes._model_state): arguments.py --grad-reduce-in-bf16,
    # --fp8-param-gather, --cross-entropy-loss-fusion, Megatron-FSDP --use-megatron-fsdp and its
    # --data-parallel-sharding-strategy (no_shard | optim | optim_grads | optim_grads_params)
    "grad_reduce_in_bf16": "grad_reduce_in_bf16", "fp8_param_gather": "fp8_param_gather",
    # TransformerConfig.fp8_output_proj (an ArgumentGroupFactory flag): the LM head under MXFP8
    "fp8_output_proj": "fp8_output_proj",
    # --first-last-layers-bf16 with --num-layers-at-start-in-bf16 / --num-layers-at-end-in-bf16 (arguments.py)
    "first_last_layers_bf16": "first_last_layers_bf16",
    # --te-precision-config-file FILE: per-module precision overrides (bot.configs.precision_recipe)
    "te_precision_config_file": "te_precision_config_file",
    "num_layers_at_start_in_bf16": "num_layers_at_start_in_bf16",
    "num_layers_at_end_in_bf16": "num_layers_at_end_in_bf16",
    # NVFP4 (Megatron-Core transformer_config.py: fp4 <- --fp4-format e2m1, fp4_param <- --fp4-param-gather)
    "fp4_format": "fp4", "fp4_param_gather": "fp4_param_gather",
    "cross_entropy_loss_fusion": "cross_entropy_loss_fusion", "use_megatron_fsdp": "use_megatron_fsdp",
    "data_parallel_sharding_strategy": "data_parallel_sharding_strategy",
    "num_distributed_optimizer_instances": "num_distributed_optimizer_instances",
    "overlap_grad_reduce": "overlap_grad_reduce", "overlap_param_gather": "overlap_param_gather",
    "outer_dp_sharding_strategy": "outer_dp_sharding_strategy",
    "overlap_moe_expert_parallel_comm": "overlap_moe_expert_parallel_comm",
    # TP communication overlap (ModelParallelConfig.tp_comm_overlap, a store_true flag ArgumentGroupFactory makes)
    "tp_comm_overlap": "tp_comm_overlap", "transformer_impl": "transformer_impl",
    "moe_token_dispatcher_type": "moe_token_dispatcher_type", "moe_enable_deepep": "moe_enable_deepep",
    "moe_flex_dispatcher_backend": "moe_flex_dispatcher_backend",
    "window_size": "window_size", "window_attn_skip_freq": "window_attn_skip_freq",
    # DeepSeek-V3-style MoE and MLA dimensions (bot.configs.model_dims._megatron_moe_layout / _megatron_mla)
    "moe_ffn_hidden_size": "moe_ffn_hidden_size",
    "moe_shared_expert_intermediate_size": "moe_shared_expert_intermediate_size", "moe_layer_freq": "moe_layer_freq",
    "moe_latent_size": "moe_latent_size",  # LatentMoE (Nemotron 3 Super / Ultra)
    "squared_relu": "squared_relu",  # Megatron-LM --squared-relu: a plain (2-matrix) MLP with ReLU^2
    "multi_latent_attention": "multi_latent_attention", "q_lora_rank": "q_lora_rank", "kv_lora_rank": "kv_lora_rank",
    "qk_head_dim": "qk_head_dim", "qk_pos_emb_head_dim": "qk_pos_emb_head_dim", "v_head_dim": "v_head_dim",
    # hybrid Mamba stacks (bot.configs.model_dims._megatron_hybrid): --hybrid-override-pattern is the deprecated name
    # Megatron-LM forwards to --hybrid-layer-pattern (arguments.py)
    "hybrid_layer_pattern": "hybrid_layer_pattern", "hybrid_override_pattern": "hybrid_layer_pattern",
    "mamba_num_heads": "mamba_num_heads", "mamba_head_dim": "mamba_head_dim", "mamba_state_dim": "mamba_state_dim",
    "mamba_num_groups": "mamba_num_groups",
    "mtp_num_layers": "mtp_num_layers",  # multi-token prediction (bot.configs.model_dims._megatron)
    "optimizer": "optimizer",  # --optimizer adam | sgd | muon | dist_muon (knowledge.cost_muon)
    "mtp_hybrid_override_pattern": "mtp_hybrid_override_pattern",
    # uneven pipeline stages (bot.configs.checks._stage_layers, knowledge.cost_settings UNEVEN_PIPELINE_KEYS)
    "account_for_embedding_in_pipeline_split": "account_for_embedding_in_pipeline_split",
    "account_for_loss_in_pipeline_split": "account_for_loss_in_pipeline_split",
    "decoder_first_pipeline_num_layers": "decoder_first_pipeline_num_layers",
    "decoder_last_pipeline_num_layers": "decoder_last_pipeline_num_layers",
    # CUDA graphs (knowledge.cost_cuda_graph): --cuda-graph-impl, --cuda-graph-scope (several words), the deprecated
    # --enable-cuda-graph (local) and --external-cuda-graph (transformer_engine)
    "cuda_graph_impl": "cuda_graph_impl", "cuda_graph_scope": "cuda_graph_scope",
    "enable_cuda_graph": "enable_cuda_graph", "external_cuda_graph": "external_cuda_graph",
    # optimizer-state dtypes (knowledge.cost_settings grad/master/moment dtypes): in effect only with
    # --use-precision-aware-optimizer (arguments.py: "Dtype of exp_avg when enabling precision-aware optimizer")
    "use_precision_aware_optimizer": "use_precision_aware_optimizer", "main_grads_dtype": "main_grads_dtype",
    "main_params_dtype": "main_params_dtype", "exp_avg_dtype": "exp_avg_dtype", "exp_avg_sq_dtype": "exp_avg_sq_dtype",
}
_STATE_DTYPE_FLAGS = ("main_grads_dtype", "main_params_dtype", "exp_avg_dtype", "exp_avg_sq_dtype")


def megatron_from_command(cmd: Command, text: str, source: str, script: Script, notes: list[str],
                          where: str) -> ShardingConfig:
    """Megatron flags after the training script word; the launcher's flags give the device count."""
    at = megatron_launch(cmd)
    assert at is not None
    words = cmd.words
    per, nodes = launcher_counts([w.text or "" for w in words[:at]])
    assumed = [w.assumed for w in words[:at] if w.assumed and (w.text or "").isdigit()]
    if assumed and per:
        notes.append(f"the launcher's device count is not fixed by the script ({assumed[0]}): "
                     "the run's chip count decides")
        per = nodes = None
    keys: dict[str, ConfigKey] = {}
    settings: dict[str, Scalar] = {}
    origins: dict[str, ConfigKey] = {}
    i = at + 1
    while i < len(words):
        w = words[i]
        t = w.text or ""
        if not t.startswith("--"):
            i += 1
            continue
        name, eq, inline = t[2:].partition("=")
        norm = name.replace("-", "_")
        if eq:
            val = w.slice(len(name) + 3)
            i += 1
        elif norm in _LIST_FLAGS:  # nargs="*": every word up to the next flag
            j = i + 1
            while j < len(words) and not (words[j].text or "").startswith("--"):
                j += 1
            _megatron_list_flag(norm, t, words[i + 1:j], cmd, settings, notes)
            i = j
            continue
        elif i + 1 < len(words) and not (words[i + 1].text or "").startswith("--") and norm not in _BOOL_FLAGS:
            val = words[i + 1]
            i += 2
        else:
            val = None
            i += 1
        _megatron_flag(norm, t, val, w, cmd, source, keys, settings, origins, notes)
    _inert_state_dtypes(settings, origins, notes)
    return _megatron_cfg(text, source, keys, settings, origins, notes, per, nodes,
                         f"{' '.join((x.text or '?') for x in words[:1])} ... {words[at].text} ({where})",
                         insert_point(cmd, source), script.files)


_BOOL_FLAGS = {"sequence_parallel", "use_distributed_optimizer", "use_flash_attn", "recompute_activations",
               "fp8_hybrid", "fp8_e4m3", "bf16", "fp16", "overlap_grad_reduce", "overlap_param_gather",
               "swiglu", "group_query_attention", "untie_embeddings_and_output_weights", "deepspeed",
               "no_pipeline_parallel", "deepspeed_activation_checkpointing", "grad_reduce_in_bf16",
               "fp8_param_gather", "cross_entropy_loss_fusion", "use_megatron_fsdp", "overlap_moe_expert_parallel_comm",
               "moe_enable_deepep", "tp_comm_overlap", "enable_cuda_graph", "external_cuda_graph",
               "account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split",
               "use_precision_aware_optimizer", "squared_relu", "fp8_output_proj", "first_last_layers_bf16"}


def _inert_state_dtypes(settings: dict[str, Scalar], origins: dict[str, ConfigKey], notes: list[str]) -> None:
    """Optimizer-state dtype flags without --use-precision-aware-optimizer do nothing in Megatron-LM: drop them
    (the states stay fp32) and say so, rather than price a memory saving the run does not get."""
    given = [k for k in _STATE_DTYPE_FLAGS if k in settings]
    if not given or settings.get("use_precision_aware_optimizer") is True:
        return
    for k in given:
        settings.pop(k, None)
        origins.pop(k, None)
    notes.append(f"--{given[0].replace('_', '-')} is set but not --use-precision-aware-optimizer: Megatron-LM keeps "
                 "the optimizer states and main gradients in fp32 (the dtype flags apply only with that optimizer)")


# Megatron-LM flags that take several values (argparse nargs="*"): --recompute-modules core_attn moe_act ...
_LIST_FLAGS = frozenset({"recompute_modules", "cuda_graph_scope"})


def _megatron_list_flag(norm: str, written: str, vals: list[Val], cmd: Command, settings: dict[str, Scalar],
                        notes: list[str]) -> None:
    """A several-valued flag as comma-separated text; a value the script computes is named, not guessed."""
    unknown = [v.unknown for v in vals if v.unknown]
    if unknown:
        notes.append(f"{written} (line {cmd.line}): {unknown[0]}")
        settings[FLAG_SETTINGS[norm]] = None
        return
    settings[FLAG_SETTINGS[norm]] = ",".join((v.text or "").strip() for v in vals if (v.text or "").strip())


def _megatron_flag(norm: str, written: str, val: Val | None, flag: Val, cmd: Command, source: str,
                   keys: dict[str, ConfigKey], settings: dict[str, Scalar], origins: dict[str, ConfigKey],
                   notes: list[str]) -> None:
    span = val.span() if val is not None else None
    file = None if span is None or span[0] in (None, source) else span[0]
    start, end = (span[1], span[2]) if span is not None else (-1, -1)
    if norm in megatron.AXIS_OF:
        if val is None or val.unknown:
            raise ConfigError(f"{written} (line {cmd.line}) cannot be read: "
                              f"{val.unknown if val is not None else 'it has no value'}", source=source, field=norm)
        raw = (val.text or "").strip()
        if not re.fullmatch(r"\d+", raw) or int(raw) < 1:
            raise ConfigError(f"must be a positive integer, got {raw!r} (line {cmd.line})", source=source, field=norm)
        if norm in keys and keys[norm].value != int(raw):
            notes.append(f"{written} is given twice: {int(raw)} (the last, line {cmd.line}) wins over {keys[norm].value}")
        keys[norm] = ConfigKey(key=norm, path=written.split("=")[0], group="world", axis=megatron.AXIS_OF[norm],
                               value=int(raw), raw=raw, line=cmd.line, column=1, start=start, end=end,
                               file=file, via=None if span else f"a computed value on the launch line {cmd.line}")
        return
    target = FLAG_SETTINGS.get(norm)
    if target is None:
        return
    if norm == "recompute_activations":
        value: Scalar = "selective"
    elif val is None:
        value = True
    elif val.unknown:
        value = None
        notes.append(f"{written} (line {cmd.line}): {val.unknown}")
    else:
        value = yaml_value(val.text)
    if target == "fp8" and norm != "fp8_format":
        value = value if isinstance(value, str) else "hybrid" if norm == "fp8_hybrid" else value
    settings[target] = value
    origins[target] = ConfigKey(key=target, path=written.split("=")[0], group="world", axis="data", value=0,
                                raw=(val.text or "") if val is not None else "", line=cmd.line, column=1,
                                start=start, end=end, file=file)


def _megatron_cfg(text: str, source: str, keys: dict[str, ConfigKey], settings: dict[str, Scalar],
                  origins: dict[str, ConfigKey], notes: list[str], per: int | None, nodes: int | None, launch: str,
                  insert_at: int | None, files: dict[str, str]) -> ShardingConfig:
    devices = per * (nodes or 1) if per else None
    if per:
        settings.setdefault("devices", per)
    if nodes:
        settings.setdefault("num_nodes", nodes)
    return ShardingConfig(
        format="megatron", source=source, text=text, keys=sorted(keys.values(), key=lambda k: k.start),
        settings=settings, origins=origins, files=files, devices=devices, nodes=nodes or (1 if per else None),
        launch=launch, insert_at=insert_at, insert_style="flag" if insert_at is not None else None, reading=notes,
    )

def not_editable(v: Val) -> Val:
    from bot.configs.shell import Piece

    return Val(tuple(Piece(p.text, p.file, -1) for p in v.pieces), v.unknown)


def with_megatron_command(cfg: ShardingConfig, command: str) -> ShardingConfig:
    """Flags of a recorded Megatron launch command win over the YAML's values (argparse: the last wins)."""
    script = read_script(command, "run.yaml command", resolve=lambda _p, _f: None)
    cmd = next((c for c in reversed(script.commands) if megatron_launch(c) is not None), None)
    if cmd is None:
        raise ConfigError("the recorded command is not a Megatron launch ('torchrun ... pretrain_gpt.py --flags')",
                          source=cfg.source, field="command")
    cmd = Command([not_editable(w) for w in cmd.words], cmd.file, cmd.line)
    flags = megatron_from_command(cmd, cfg.text, cfg.source, script, [], "run.yaml command")
    keys = {k.key: k for k in cfg.keys}
    notes = list(cfg.reading)
    for k in flags.keys:
        if k.key in keys and keys[k.key].value != k.value:
            notes.append(f"{k.key}: {k.value} on the recorded command overrides {keys[k.key].value} in the file "
                         f"(line {keys[k.key].line})")
        keys[k.key] = k.model_copy(update={"via": "the recorded launch command (run.yaml command:)"})
    given = {k: v for k, v in flags.settings.items() if k not in ("devices", "num_nodes")}
    settings = {**{p: v for p, v in cfg.settings.items() if p.rsplit(".", 1)[-1] not in given}, **given}
    return cfg.model_copy(update={
        "keys": sorted(keys.values(), key=lambda k: (k.start < 0, k.start)), "settings": settings, "reading": notes,
        "devices": flags.devices or cfg.devices, "nodes": flags.nodes or cfg.nodes,
    })
