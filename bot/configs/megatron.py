"""Megatron-style settings: tensor / pipeline / context / expert model-parallel sizes (+ batch, recompute).

The keys may sit at the top level (Megatron-LM YAML) or nested (NeMo and Megatron-Bridge put them under
``model:``); each must occur once. Megatron has no data-parallel key: data parallelism is what is left,
``dp = world / (tp x pp x cp)``. Expert parallelism is carved out of the data-parallel ranks, so ASAP's
mesh has ``expert = ep`` and ``data = dp / ep`` (which needs ``dp % ep == 0``). Ranks are laid out in
Megatron's default order ``tp-cp-ep-dp-pp`` (tensor fastest), which decides which axes stay inside a
node (ICI/NVLink in the mesh) and which cross nodes (DCN/InfiniBand).
"""

from __future__ import annotations

import math

from yaml.nodes import Node

from bot.configs.common import (
    Splice,
    config_key,
    insert_after_entry,
    is_flow,
    replace_value,
    settings,
    size_value,
    unique,
)
from bot.configs.mesh import Axis, Mesh
from bot.configs.sharding import ConfigKey, ShardingConfig
from bot.configs.yamlscan import walk
from bot.errors import ConfigError

AXIS_OF: dict[str, Axis] = {
    "tensor_model_parallel_size": "tensor",
    "pipeline_model_parallel_size": "pipeline",
    "context_parallel_size": "sequence",
    "expert_model_parallel_size": "expert",
}
KEY_OF: dict[Axis, str] = {axis: key for key, axis in AXIS_OF.items()}
# A size a settings edit may write: the MoE layers' expert group, which Megatron-Core folds over tensor / context ranks
# beyond the data ranks (the whole-experts move grows it with expert_tensor_parallel_size 1). The edit is re-read and
# refused unless the mesh stays the same (bot.configs.edit.apply_settings).
GRID_KEYS: tuple[str, ...] = ("expert_model_parallel_size",)
KEYS: tuple[str, ...] = tuple(AXIS_OF)
MODEL_SECTION = "model"  # NeMo / Megatron-Bridge: the model config holds the parallel sizes (ModelParallelConfig)
# Megatron-Bridge ConfigContainer sections that repeat a size for padding (packed sequences, the vocabulary)
PADDING_SECTIONS: tuple[str, ...] = ("dataset", "tokenizer")
SHORT = {"tensor_model_parallel_size": "tp", "pipeline_model_parallel_size": "pp",
         "context_parallel_size": "cp", "expert_model_parallel_size": "ep"}
LAYOUT: tuple[Axis, ...] = ("tensor", "sequence", "expert", "data", "pipeline")  # Megatron 'tp-cp-ep-dp-pp'
NVLINK_DOMAIN = 8  # GPUs joined by NVLink in one HGX/DGX node

SETTINGS: tuple[str, ...] = (
    "micro_batch_size",
    "global_batch_size",
    "virtual_pipeline_model_parallel_size",
    "num_layers_per_virtual_pipeline_stage",
    "sequence_parallel",
    "recompute_granularity",
    "recompute_method",
    "recompute_num_layers",
    "recompute_modules",  # Megatron-Core selective recompute_modules (a list: read as comma-separated text)
    "activations_checkpoint_granularity",  # NeMo 1.x names for recompute
    "activations_checkpoint_method",
    "activations_checkpoint_num_layers",
    "use_distributed_optimizer",
    "expert_tensor_parallel_size",
    "num_moe_experts",
    "num_layers",
    "seq_length",
    "encoder_seq_length",
    "devices",
    "num_nodes",
    "num_attention_heads",
    "num_query_groups",
    "hidden_size",
    "recompute_activations",
    "use_flash_attn",
    "attention_backend",
    "use_flash_attention",  # NeMo
    "fp8",
    "fp8_format",
    "fp8_hybrid",
    "fp8_recipe",  # --fp8-recipe {tensorwise, delayed, mxfp8, blockwise}; Megatron-Bridge mixed_precision.fp8_recipe
    "mixed_precision",  # Megatron-Bridge: a preset name (bf16_with_mxfp8_mixed) where the config names one
    "fp8_param_gather",  # Megatron-Bridge mixed_precision.fp8_param_gather
    "fp8_params",  # NeMo 1.x model.fp8_params
    "fp8_output_proj",  # TransformerConfig.fp8_output_proj: the LM head under MXFP8 (else it runs in bf16)
    "first_last_layers_bf16",  # TransformerConfig: the first / last layers stay in bf16 under fp8 / fp4
    "te_precision_config_file",  # --te-precision-config-file: per-module precision (bot.configs.precision_recipe)
    "quant_recipe",  # TransformerConfig.quant_recipe, where a config writes it as that file's path
    "num_layers_at_start_in_bf16",
    "num_layers_at_end_in_bf16",
    "fp4",  # Megatron-Core TransformerConfig.fp4 (--fp4-format e2m1: NVFP4 through Transformer Engine)
    "fp4_format",
    "fp4_param_gather",  # --fp4-param-gather (TransformerConfig.fp4_param)
    "fp4_param",
    "grad_reduce_in_fp32",  # Megatron-Bridge ddp.grad_reduce_in_fp32
    "use_precision_aware_optimizer",  # optimizer.use_precision_aware_optimizer: gates the state dtypes below
    "main_grads_dtype",
    "main_params_dtype",
    "exp_avg_dtype",
    "exp_avg_sq_dtype",
    "use_megatron_fsdp",  # Megatron-Bridge ddp.use_megatron_fsdp
    "data_parallel_sharding_strategy",
    # partial distributed optimizer / Megatron-FSDP HSDP: model state sharded within each of this many groups of
    # data-parallel ranks, replicated across them (ddp.num_distributed_optimizer_instances, ddp.outer_dp_sharding_strategy)
    "num_distributed_optimizer_instances",
    "outer_dp_sharding_strategy",
    # data-parallel overlap: the gradient reduce under backward, the distributed optimizer's parameter gather under
    # forward (DistributedDataParallelConfig; NeMo 1.x optim.overlap_grad_sync / overlap_param_sync)
    "overlap_grad_reduce",
    "overlap_param_gather",
    "overlap_grad_sync",
    "overlap_param_sync",
    "overlap_moe_expert_parallel_comm",  # Megatron-Bridge comm_overlap.overlap_moe_expert_parallel_comm
    "tp_comm_overlap",  # ModelParallelConfig.tp_comm_overlap (--tp-comm-overlap)
    "ub_tp_comm_overlap",  # NeMo 1.x: Transformer Engine userbuffers TP overlap (not priced: docs/cost-model.md)
    "transformer_impl",  # transformer_engine (default) | local: TP overlap needs Transformer Engine's userbuffers
    "moe_token_dispatcher_type",  # alltoall | allgather | flex (DeepEP / HybridEP)
    "moe_enable_deepep",
    "moe_flex_dispatcher_backend",
    "bf16",
    "fp16",
    "num_experts",
    # what each pipeline stage builds (knowledge.cost_settings UNEVEN_PIPELINE_KEYS; bot.configs.pipeline_layout)
    "pipeline_model_parallel_layout",
    "account_for_embedding_in_pipeline_split",
    "account_for_loss_in_pipeline_split",
    "decoder_first_pipeline_num_layers",
    "decoder_last_pipeline_num_layers",
    # CUDA graphs (knowledge.cost_cuda_graph)
    "cuda_graph_impl",
    "cuda_graph_scope",  # a list: read as comma-separated text
    "enable_cuda_graph",
    "external_cuda_graph",
)


def read(root: Node, text: str, source: str) -> ShardingConfig:
    """Parse the Megatron parallel sizes (positive integers; Megatron has no -1).

    In a Megatron-Bridge ConfigContainer (its run_config.yaml) the sizes are the ``model:`` section's (nested
    under ``model.transformer:`` since the builder-backed model configs of 2026); the same names under its
    ``dataset:`` and ``tokenizer:`` sections pad samples and the vocabulary and are not read."""
    _refuse_teacher(root, source)
    found = unique(root, KEYS, source, normalize=True, owner=MODEL_SECTION, unrelated=PADDING_SECTIONS)
    keys: list[ConfigKey] = []
    for name, hit in sorted(found.items(), key=lambda kv: kv[1].key_node.start_mark.index):
        value = size_value(hit, source, allow_rest=False)
        keys.append(config_key(hit, group="world", axis=AXIS_OF[name], value=value, text=text))
    got = settings(root, SETTINGS, normalize=True, lists=("recompute_modules", "cuda_graph_scope"))
    if any(k.endswith("recompute_activations") and v is True for k, v in got.items()):
        got.setdefault("recompute_granularity", "selective")
    cfg = ShardingConfig(format="megatron", source=source, text=text, keys=keys, settings=got)
    devices, nodes = cfg.setting("devices"), cfg.setting("num_nodes")
    if _pos_int(devices):
        n = nodes if _pos_int(nodes) else 1
        cfg = cfg.model_copy(update={"devices": devices * n, "nodes": n})  # type: ignore[operator]
    return cfg


def _refuse_teacher(root: Node, source: str) -> None:
    """A knowledge-distillation config (Megatron-Bridge's ``model.teacher``) trains a student beside a teacher's
    forward pass, which ASAP does not price: say so by name instead of calling the teacher's sizes duplicates."""
    teacher = next((h for h in walk(root, KEYS, normalize=True) if h.dotted.startswith(f"{MODEL_SECTION}.teacher.")),
                   None)
    if teacher is not None:
        raise ConfigError(
            f"{teacher.dotted} (line {teacher.line}) belongs to a knowledge-distillation run: a student trained beside "
            "a teacher's forward pass, which ASAP does not price (it predicts one model's training step)",
            source=source,
            field=f"{MODEL_SECTION}.teacher",
            hint="give the student's own training config (its model: section without teacher:) and read the "
            "prediction as a lower bound: the teacher's forward pass comes on top",
        )


def sizes(config: ShardingConfig) -> dict[str, int]:
    """tp, pp, cp, ep as set (1 where absent), by full key name."""
    present = {k.key: k.value for k in config.keys}
    return {key: present.get(key, 1) for key in KEYS}


def parallel_sizes(config: ShardingConfig, num_devices: int) -> dict[Axis, int]:
    """Total size per canonical axis, with dp derived; ConfigError with the arithmetic when impossible."""
    s = sizes(config)
    tp, pp, cp, ep = (s[k] for k in KEYS)
    model = tp * pp * cp
    if num_devices % model:
        parts = " x ".join(f"{k}={v}" for k, v in s.items() if v != 1 and k != "expert_model_parallel_size")
        raise ConfigError(
            f"{parts} = {model} GPUs per model replica, but the world size {num_devices} is not a multiple of it "
            f"(data parallel size = {num_devices} / {model} is not an integer)",
            source=config.source,
            field=_path(config, next(k for k, v in s.items() if v != 1 and k != "expert_model_parallel_size")),
        )
    dp = num_devices // model
    fold = expert_fold(tp, cp, dp, ep)
    if fold is None:
        raise ConfigError(
            f"expert_model_parallel_size={ep} divides neither the data parallel size {dp} "
            f"(= {num_devices} GPUs / (tp x pp x cp = {model})) nor data x tensor x context = {dp * tp * cp}: "
            "Megatron-Core places experts across the data-parallel ranks, folded over tensor and context ranks at most",
            source=config.source,
            field=_path(config, "expert_model_parallel_size"),
            hint="Megatron-Core MoE parallel folding needs expert_model_parallel_size x expert_tensor_parallel_size to "
            "divide tp x cp x dp",
        )
    return {"tensor": tp, "sequence": cp, "expert": fold, "data": dp // fold, "pipeline": pp}


def expert_fold(tp: int, cp: int, dp: int, ep: int) -> int | None:
    """The expert axis of the mesh for ``ep`` expert-parallel ranks: ep when it divides the data-parallel size;
    else, under Megatron-Core's MoE parallel folding (expert layers on their own EP x ETP x EDP grid over the same
    tp x cp x dp ranks; Liu et al. 2025, arXiv 2504.14960), the part of ep the data ranks hold, the rest spanning
    tensor / context ranks. None when ep divides neither."""
    if dp % ep == 0:
        return ep
    fold = math.gcd(ep, dp)
    return fold if (tp * cp) % (ep // fold) == 0 else None


def kept_expert_size(configured: int, expert: int, data: int, tensor: int, context: int) -> int:
    """expert_model_parallel_size for a mesh with these ``expert`` / ``data`` / ``tensor`` / ``context`` axes when the
    run's config sets ``configured``: the configured size where Megatron-Core would fold it over this mesh with the
    mesh's expert axis as the data ranks' part (so the written config reads back as the mesh), else the mesh's expert
    axis. A candidate keeps a folded expert grid it can run, and the size written is the one the cost model prices
    (knowledge.cost_moe_grid.expert_grid applies the same rule)."""
    if configured != expert and expert_fold(tensor, context, data * expert, configured) == expert:
        return configured
    return expert


def expert_size_on(configured: int, mesh: Mesh) -> int:
    """:func:`kept_expert_size` for ``mesh``'s axes: the expert_model_parallel_size a config setting ``configured``
    runs with on that mesh."""
    s = mesh.sizes()
    return kept_expert_size(configured, s["expert"], s["data"], s["tensor"], s["sequence"])


def expert_grid_change(configured: int | None, base: Mesh, mesh: Mesh) -> str | None:
    """What a move from ``base`` to ``mesh`` does to a folded expert grid, in the config's own terms, or None when
    neither folds (the mesh's expert axis then says it all). A mesh's expert axis counts only the data ranks experts
    span; a run whose expert_model_parallel_size also spans tensor ranks keeps that size where it can, so ``expert
    1->4`` alone would misstate a move that leaves expert parallelism at 4."""
    if not configured or configured <= 1:
        return None
    b, m = base.sizes(), mesh.sizes()
    old, new = expert_size_on(configured, base), expert_size_on(configured, mesh)
    old_fold, new_fold = old // b["expert"], new // m["expert"]
    if old_fold == 1 and new_fold == 1:
        return None
    return (f"expert_model_parallel_size {old}->{new} (experts folded over {old_fold}->{new_fold} tensor/context "
            f"ranks x {b['expert']}->{m['expert']} data ranks)")


def _path(config: ShardingConfig, key: str) -> str:
    k = config.key(key)
    return k.path if k is not None else key


def layout(total: dict[Axis, int], num_devices: int, num_slices: int,
           order: tuple[Axis, ...] = LAYOUT) -> tuple[Mesh, list[Axis]]:
    """Split each axis between inside-node (ici) and across-node (dcn) in a rank order (``order``, fastest-varying
    first; default Megatron's).

    Returns the mesh and the axes that straddle node boundaries unevenly (such an axis keeps only its
    common factor with the node's remaining room inside the node; every later axis goes across nodes).
    """
    room = num_devices // num_slices
    ici: dict[Axis, int] = {}
    dcn: dict[Axis, int] = {}
    straddling: list[Axis] = []
    for axis in order:
        v = total.get(axis, 1)
        if v == 1:
            continue
        if room % v == 0:  # fits inside the node's remaining room
            ici[axis] = v
            room //= v
            continue
        inside = room if v % room == 0 else math.gcd(v, room)
        if v % room:
            straddling.append(axis)
        if inside > 1:
            ici[axis] = inside
        dcn[axis] = v // inside
        room = 1  # every later (slower-varying) axis is across nodes
    return Mesh(ici=ici, dcn=dcn), straddling


def mesh(config: ShardingConfig, num_devices: int, num_slices: int) -> Mesh:
    """The canonical mesh, axes split over nodes in Megatron's rank order."""
    return layout(parallel_sizes(config, num_devices), num_devices, num_slices)[0]


def notes(config: ShardingConfig, num_devices: int, num_slices: int) -> list[str]:
    """Legal but notable: TP beyond one NVLink domain, axes across nodes, settings that do nothing."""
    total = parallel_sizes(config, num_devices)
    m, straddling = layout(total, num_devices, num_slices)
    out: list[str] = []
    tp = total["tensor"]
    if tp > NVLINK_DOMAIN:
        out.append(
            f"tensor_model_parallel_size={tp} spans more than one {NVLINK_DOMAIN}-GPU NVLink domain of a DGX/HGX node: "
            f"its per-layer all-reduces cross the slower node network (legal, rarely fast; a GB200 / GB300 NVL72 rack "
            f"keeps up to 72 GPUs on NVLink, which the cost model prices from the chip)"
        )
    ep = sizes(config)["expert_model_parallel_size"]
    for axis in ("tensor", "sequence", "expert"):
        if m.dcn.get(axis, 1) > 1 and not (axis == "tensor" and tp > NVLINK_DOMAIN):
            what = (f"{KEY_OF[axis]}={total[axis]}" if axis != "expert" or ep == total[axis] else
                    f"expert_model_parallel_size={ep} (its {total[axis]} data ranks)")
            out.append(f"{what} crosses nodes ({m.dcn[axis]} nodes): per-layer traffic on the network")
    for axis in straddling:
        out.append(f"{axis} parallelism ({total[axis]}) does not split evenly over nodes of {num_devices // num_slices} GPUs")
    st = config.setting
    if st("sequence_parallel") is True and tp == 1:
        out.append("sequence_parallel is on but tensor_model_parallel_size=1: it has no effect")
    vpp = st("virtual_pipeline_model_parallel_size")
    if isinstance(vpp, int) and not isinstance(vpp, bool) and vpp > 1 and total["pipeline"] == 1:
        out.append("virtual_pipeline_model_parallel_size is set but pipeline_model_parallel_size=1: no interleaving")
    if ep != total["expert"]:
        rest = ep // total["expert"]
        out.append(
            f"expert_model_parallel_size={ep} is larger than the data parallel size: Megatron-Core folds it over "
            f"data {total['expert']} x {rest} tensor/context ranks (MoE parallel folding). The mesh shows the dense "
            f"layers' grid (expert={total['expert']}); the MoE layers are priced on their own, the token all-to-all "
            f"over all {ep} expert ranks")
    etp = st("expert_tensor_parallel_size")
    if isinstance(etp, int) and not isinstance(etp, bool) and etp != tp and ep > 1:
        out.append(f"expert_tensor_parallel_size={etp} differs from tp={tp}: each expert's matrices are split over "
                   f"{etp} rank(s), the dense layers' over {tp}")
    mbs, gbs = st("micro_batch_size"), st("global_batch_size")
    dp = total["data"] * total["expert"]
    if _pos_int(mbs) and _pos_int(gbs) and gbs % (mbs * dp):  # type: ignore[operator]
        out.append(
            f"global_batch_size={gbs} is not a multiple of micro_batch_size={mbs} x data parallel size {dp} "
            f"= {mbs * dp}: Megatron refuses to start"  # type: ignore[operator]
        )
    return out


def _pos_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


def plan(config: ShardingConfig, root: Node, target: Mesh) -> list[Splice]:
    """Set tp/pp/cp/ep to the target's sizes; dp stays implicit and must equal world / (tp x pp x cp)."""
    t = target.sizes()
    if t["fsdp"] != 1:
        raise ConfigError(
            f"the mesh has fsdp={t['fsdp']}, but Megatron settings have no FSDP axis",
            source=config.source,
            field="mesh",
            hint="express it as data parallelism with use_distributed_optimizer: true",
        )
    world = target.num_devices
    dp = world // (t["tensor"] * t["pipeline"] * t["sequence"])
    if dp != t["data"] * t["expert"]:  # cannot happen for a valid mesh; kept as the stated invariant
        raise ConfigError(f"mesh data x expert = {t['data'] * t['expert']}, but world / (tp x pp x cp) = {dp}",
                          source=config.source, field="mesh")
    present = {k.key: k for k in config.keys}
    splices: list[Splice] = []
    new_entries: list[tuple[str, int]] = []
    ep = sizes(config)["expert_model_parallel_size"]
    for key, axis in AXIS_OF.items():
        want = expert_size_on(ep, target) if axis == "expert" else t[axis]
        if key in present:
            if present[key].value != want:
                splices.append(replace_value(config.text_of(present[key].file), present[key], want))
        elif want != 1:
            new_entries.append((key, want))
    if new_entries:
        splices.append(_insert(config, root, new_entries))
    return splices


def pipeline_followers(config: ShardingConfig, target: Mesh) -> dict[str, object]:
    """Settings whose valid values depend on the pipeline size, as they must read for ``target``'s ({} if unchanged).

    Megatron derives the virtual-stage count from ``pipeline_model_parallel_layout`` (stages / pipeline size) and
    Megatron-Core asserts a stated ``virtual_pipeline_model_parallel_size`` equals it; without pipelining there are no
    stages to lay out (arguments.py refuses interleaving below pipeline 2 or 3). So a new pipeline size rewrites the
    virtual-stage count, drops both at pipeline 1, and a layout whose stage count the new size does not divide is
    refused (ConfigError: the candidate is not expressible). A launch script's flags cannot be set to null: there
    the change is refused with the flags to remove by hand.
    """
    want = target.sizes()["pipeline"]
    if want == sizes(config)["pipeline_model_parallel_size"]:
        return {}
    from bot.configs.pipeline_layout import parse_pipeline_layout

    layout, vpp = config.setting("pipeline_model_parallel_layout"), config.setting("virtual_pipeline_model_parallel_size")
    uneven = [k for k in ("decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers",
                          "num_layers_in_first_pipeline_stage", "num_layers_in_last_pipeline_stage")
              if config.setting(k) is not None]
    out: dict[str, object] = {}
    if isinstance(layout, str) and layout.strip():
        stages = len(parse_pipeline_layout(layout))
        if want > 1 and stages % want:
            raise ConfigError(f"pipeline_model_parallel_layout lays out {stages} stages, which pipeline={want} does "
                              "not divide (Megatron asserts it)", source=config.source,
                              field="pipeline_model_parallel_layout", hint=f"write a layout for {want} x v stages")
        if want == 1:
            out["pipeline_model_parallel_layout"] = None
        if vpp is not None:
            out["virtual_pipeline_model_parallel_size"] = stages // want if want > 1 and stages // want > 1 else None
    elif isinstance(vpp, int) and not isinstance(vpp, bool) and vpp > 1 and want == 1:
        out["virtual_pipeline_model_parallel_size"] = None
    out.update(_layers_per_virtual_stage(config, want))
    if want == 1:
        out.update({k: None for k in uneven})
    if out and config.insert_style == "flag":
        raise ConfigError(f"pipeline={want} needs {', '.join(out)} changed with it, which a launch line's flags "
                          "cannot carry as null", source=config.source, field=next(iter(out)),
                          hint="remove or rewrite those flags by hand with the new pipeline size")
    return out


def _layers_per_virtual_stage(config: ShardingConfig, want: int) -> dict[str, object]:
    """Megatron-LM's ``--num-layers-per-virtual-pipeline-stage`` under a new pipeline size: dropped at pipeline 1; a
    per-stage layer count it does not divide is refused, as arguments.py asserts."""
    per = config.setting("num_layers_per_virtual_pipeline_stage")
    if not isinstance(per, int) or isinstance(per, bool) or per < 1:
        return {}
    if want == 1:
        return {"num_layers_per_virtual_pipeline_stage": None}
    layers = config.setting("num_layers")
    if isinstance(layers, int) and not isinstance(layers, bool):
        slots = layers + sum(1 for k in ("account_for_embedding_in_pipeline_split",
                                         "account_for_loss_in_pipeline_split") if config.setting(k) is True)
        if slots % want or (slots // want) % per:
            raise ConfigError(f"num_layers_per_virtual_pipeline_stage={per} does not divide the {slots} / {want} "
                              f"layers per stage at pipeline={want} (Megatron asserts it)", source=config.source,
                              field="num_layers_per_virtual_pipeline_stage",
                              hint="pick a layers-per-virtual-stage count that divides the new stage size")
    return {}


def _insert(config: ShardingConfig, root: Node | None, entries: list[tuple[str, int]]) -> Splice:
    """New sizes: ``--flag N`` at the launch line's end, else a YAML line after the last size key, written in
    the file's own spelling (``--tensor-model-parallel-size:``, ``trainer.strategy.x:`` or plain)."""
    if config.insert_style == "flag" and config.insert_at is not None:
        return Splice(config.insert_at, config.insert_at,
                      "".join(f" --{n.replace('_', '-')} {v}" for n, v in entries))
    own = [k for k in config.keys if k.file is None and k.editable]
    if root is None or not own:
        raise ConfigError("the config sets none of the parallel sizes, so ASAP does not know where to add "
                          + ", ".join(n for n, _ in entries), source=config.source, field=entries[0][0],
                          hint="add the key(s) by hand where your trainer reads them")
    anchor_key = max(own, key=lambda k: k.start)
    hit = next(h for h in walk(root, KEYS, normalize=True) if h.key_node.start_mark.index <= anchor_key.start
               and h.value_node.start_mark.index == anchor_key.start)
    written = hit.key_node.value
    prefix = written[: len(written) - len(written.split(".")[-1])]
    flag = written.split(".")[-1].startswith("--")
    named = [((prefix + "--" + n.replace("_", "-")) if flag else prefix + n, v) for n, v in entries]
    return insert_after_entry(config.text, hit.key_node, hit.value_node, is_flow(hit.parent), named)


def allowed_axes(config: ShardingConfig) -> set[Axis]:
    """Megatron sizes tensor, pipeline, context and expert parallelism; data parallelism is the rest; no FSDP."""
    return {"data", "tensor", "pipeline", "sequence", "expert"}
