"""MaxText-style sharding keys: ``ici_<axis>_parallelism`` and ``dcn_<axis>_parallelism``.

Semantics follow MaxText's ``configs/base.yml``: the ``ici_*`` sizes multiply to the chips of one slice,
the ``dcn_*`` sizes multiply to the number of slices, and each group may hold one ``-1`` ("the rest").
A key absent from the file takes base.yml's default: ``ici_fsdp_parallelism: -1`` and
``dcn_data_parallelism: -1``, every other axis 1. MaxText's twelve mesh axes fold onto ASAP's six
canonical axes (see :data:`AXIS_OF` and ``docs/config-formats.md``); several keys on one axis multiply.
"""

from __future__ import annotations

from yaml.nodes import Node

from bot.configs.common import (
    Slot,
    Splice,
    axis_sizes,
    config_key,
    insert_after_entry,
    is_flow,
    plan_group,
    replace_value,
    resolve,
    settings,
    size_value,
    unique,
)
from bot.configs.mesh import AXES, Axis, Mesh
from bot.configs.sharding import ConfigKey, ShardingConfig
from bot.configs.yamlscan import walk
from bot.errors import ConfigError

# MaxText key middle (``ici_<middle>_parallelism``) -> canonical axis. Every axis MaxText has or had;
# which of them a given MaxText reads is its ``mesh_axes`` (see :func:`slots`). The first middle of each
# canonical axis is its primary key, the one an edit writes when it has to add a key.
AXIS_OF: dict[str, Axis] = {
    "data": "data",
    "diloco": "data",  # DiLoCo replicas (MaxText 2026+): data parallelism with an infrequent outer sync
    "fsdp": "fsdp",
    "fsdp_transpose": "fsdp",  # a second FSDP axis (2-D weight sharding)
    "tensor": "tensor",
    "tensor_transpose": "tensor",  # tensor parallelism over the other matmul dimension
    "tensor_sequence": "tensor",  # tensor parallelism that also splits the sequence around norms
    "autoregressive": "tensor",  # decode-time head sharding (inference)
    "context": "sequence",  # context parallelism (ring/all-gather attention); MaxText 2025+ reads it
    "sequence": "sequence",  # the old axis, removed from mesh_axes in mid-2026 MaxText
    "context_usp_ulysses": "sequence",  # Ulysses (all-to-all head exchange) part of context parallelism
    "context_autoregressive": "sequence",  # decode-time context sharding (inference)
    "expert": "expert",
    "pipeline": "pipeline",  # MaxText's "stage" mesh axis
}
KEY_OF_MESH_AXIS: dict[str, str] = {"stage": "pipeline", "model": "tensor"}  # mesh axis -> key middle
FIXED_ONE = ("attn_dp", "attn_dp_expert", "worker")  # mesh axes MaxText sizes itself (not from a key)
ORDER: tuple[str, ...] = tuple(sorted(AXIS_OF, key=lambda m: AXES.index(AXIS_OF[m])))
ICI_KEYS: tuple[str, ...] = tuple(f"ici_{m}_parallelism" for m in ORDER)
DCN_KEYS: tuple[str, ...] = tuple(f"dcn_{m}_parallelism" for m in ORDER)
KEYS: tuple[str, ...] = ICI_KEYS + DCN_KEYS
DETECT_KEYS: tuple[str, ...] = KEYS + ("mesh_axes", "base_config")

# base.yml defaults for keys absent from the file.
DEFAULTS: dict[str, int] = {"ici_fsdp_parallelism": -1, "dcn_data_parallelism": -1}
NEVER_OVER_DCN = ("sequence", "tensor", "tensor_sequence", "autoregressive")  # base.yml: "never recommended"
INFERENCE_ONLY = ("autoregressive", "context_autoregressive")

# remat_policy 'custom': each named tensor's choice (remat | device | offload; base.yml and decoders.py)
REMAT_TENSOR_KEYS: tuple[str, ...] = ("decoder_layer_input", "query_proj", "key_proj", "value_proj", "context",
                                      "out_proj", "mlpwi", "mlpwi_0", "mlpwi_1", "mlpwo")
SETTINGS: tuple[str, ...] = (
    "remat_policy",
    *REMAT_TENSOR_KEYS,
    "per_device_batch_size",
    "gradient_accumulation_steps",
    "max_target_length",
    "num_slices",
    "hardware",
    "model_name",
    "base_config",
    "dtype",
    "weight_dtype",
    "scan_layers",
    "shard_mode",
    "num_experts",
    "num_experts_per_tok",
    "capacity_factor",
    "sparse_matmul",
    "num_pipeline_microbatches",
    "num_layers_per_pipeline_stage",
    "num_pipeline_repeats",
    "optimizer_memory_host_offload",
    "parameter_memory_host_offload",
    "compile_topology",
    "compile_topology_num_slices",
    "steps",
    "base_num_decoder_layers",
    "base_num_query_heads",
    "base_num_kv_heads",
    "base_emb_dim",
    "base_mlp_dim",
    "global_parameter_scale",
    "base_moe_mlp_dim",
    "head_dim",
    "vocab_size",
    "mlp_activations",
    "attention",
    "quantization",
    "num_vocab_tiling",
    "decoder_block",
    "logits_via_embedding",
    "context_parallel_strategy",
)

# Newest first: (mesh axes that must be present, axes that must be absent, description).
VINTAGES: tuple[tuple[frozenset[str], frozenset[str], str], ...] = (
    (frozenset({"diloco", "context_usp_ulysses"}), frozenset({"sequence"}),
     "MaxText of August 2026 or later (diloco and context_usp_ulysses axes, no sequence axis)"),
    (frozenset({"diloco"}), frozenset({"sequence"}), "MaxText of June-August 2026 (diloco axis, sequence axis removed)"),
    (frozenset({"diloco", "sequence"}), frozenset(), "MaxText of April-June 2026 (diloco axis added, sequence still read)"),
    (frozenset({"context", "context_autoregressive"}), frozenset({"diloco"}),
     "MaxText of April 2025 - early 2026 (context and context_autoregressive axes)"),
    (frozenset({"tensor_sequence"}), frozenset({"context", "diloco"}), "MaxText of early 2025 (tensor_sequence axis)"),
    (frozenset({"expert"}), frozenset({"tensor_sequence"}), "MaxText of late 2024 (expert axis)"),
    (frozenset({"stage"}), frozenset({"expert"}), "MaxText of mid 2024 (stage axis for pipelining)"),
    (frozenset({"sequence"}), frozenset({"stage"}), "MaxText of 2023 - early 2024 (data, fsdp, sequence, tensor)"),
    (frozenset(), frozenset({"sequence"}), "MaxText of 2023 or earlier (no sequence axis yet)"),
)


def _mesh_axis(key: str) -> str:
    return key[4 : -len("_parallelism")]


def key_middle(mesh_axis: str) -> str:
    """The key middle MaxText reads for a mesh axis (``stage`` -> ``pipeline``)."""
    return KEY_OF_MESH_AXIS.get(mesh_axis, mesh_axis)


def vintage(mesh_axes: list[str] | None, keys: list[str] = ()) -> str:  # type: ignore[assignment]
    """Which MaxText the config looks like, from its mesh_axes (else from the keys it sets)."""
    if mesh_axes is None:
        middles = {_mesh_axis(k) for k in keys}
        if "context_usp_ulysses" in middles:
            return "unknown MaxText version (no mesh_axes in the config chain); its Ulysses key needs August 2026 or later"
        if "diloco" in middles:
            return "unknown MaxText version (no mesh_axes in the config chain); its diloco key needs 2026 or later"
        return "unknown MaxText version (no mesh_axes in the config chain): every axis MaxText has had is read"
    axes = set(mesh_axes)
    for need, absent, label in VINTAGES:
        if need <= axes and not (absent & axes):
            return label
    return "a MaxText whose mesh_axes ASAP does not recognise: " + ", ".join(mesh_axes)


def middles(config: ShardingConfig) -> list[str]:
    """The key middles this config's MaxText reads, primary key of each canonical axis first."""
    if config.mesh_axes is None:
        return list(ORDER)
    wanted = {key_middle(a) for a in config.mesh_axes}
    return [m for m in ORDER if m in wanted]


def allowed_axes(config: ShardingConfig) -> set[Axis]:
    """Canonical axes this MaxText's mesh_axes can express (``sequence`` only with a sequence/context axis)."""
    return {AXIS_OF[m] for m in middles(config)}


def read(root: Node, text: str, source: str) -> ShardingConfig:
    """Parse the MaxText keys of one composed document (format already detected), no chain, no overrides."""
    found = unique(root, KEYS, source)
    keys: list[ConfigKey] = []
    for name, hit in sorted(found.items(), key=lambda kv: kv[1].key_node.start_mark.index):
        value = size_value(hit, source, allow_rest=True)
        group = "ici" if name.startswith("ici_") else "dcn"
        keys.append(config_key(hit, group=group, axis=AXIS_OF[_mesh_axis(name)], value=value, text=text))
    axes = mesh_axes_of(root, source)
    return ShardingConfig(format="maxtext", source=source, text=text, keys=keys, settings=settings(root, SETTINGS),
                          mesh_axes=axes, vintage=vintage(axes, [k.key for k in keys]))


def mesh_axes_of(root: Node, source: str) -> list[str] | None:
    """The document's ``mesh_axes`` list (top level), or None."""
    from yaml.nodes import MappingNode, ScalarNode, SequenceNode

    if not isinstance(root, MappingNode):
        return None
    for k, v in root.value:
        if isinstance(k, ScalarNode) and k.value == "mesh_axes":
            if not isinstance(v, SequenceNode) or not all(isinstance(x, ScalarNode) for x in v.value):
                raise ConfigError(f"mesh_axes must be a list of axis names (line {v.start_mark.line + 1})",
                                  source=source, field="mesh_axes")
            return [x.value for x in v.value]
    return None


def slots(config: ShardingConfig, group: str) -> list[Slot]:
    """Every key of one group that this MaxText reads, present or defaulted, primary key of each axis first."""
    present = {k.key: k for k in config.keys}
    names = [f"{group}_{m}_parallelism" for m in middles(config)]
    return [Slot(n, AXIS_OF[_mesh_axis(n)], present.get(n), DEFAULTS.get(n, 1)) for n in names]


def ignored(config: ShardingConfig) -> list[str]:
    """Keys set to something other than 1 that this MaxText does not read (its mesh_axes lack the axis)."""
    read_names = {s.name for g in ("ici", "dcn") for s in slots(config, g)}
    return [f"{k.key}={k.value} is ignored: this MaxText's mesh_axes have no '{_mesh_axis(k.key)}' axis "
            f"({', '.join(config.mesh_axes or [])})" for k in config.keys if k.key not in read_names and k.value != 1]


def _resolve(config: ShardingConfig, num_devices: int, num_slices: int) -> tuple[dict[str, int], dict[str, int]]:
    per_slice = num_devices // num_slices
    slice_word = "slice" if num_slices == 1 else "slices"
    ici = resolve(
        slots(config, "ici"),
        per_slice,
        group="ici",
        source=config.source,
        mismatch=lambda parts, p: f"{parts} = {p} devices per slice, but the run has {_count(config, num_devices)} "
        f"in {num_slices} {slice_word} ({per_slice} per slice)",
    )
    if num_slices == 1:  # MaxText builds no DCN mesh for one slice: every dcn_* value is ignored
        return ici, {s.name: 1 for s in slots(config, "dcn")}
    dcn = resolve(
        slots(config, "dcn"),
        num_slices,
        group="dcn",
        source=config.source,
        mismatch=lambda parts, p: f"{parts} = {p} slices, but the run has {num_slices} {slice_word}",
    )
    return ici, dcn


def _count(config: ShardingConfig, num_devices: int) -> str:
    """The run's size in the words of its hardware: chips, or chips and the JAX devices they are (TPU7x)."""
    k = config.jax_per_chip()
    return f"{num_devices} chips" if k == 1 else f"{num_devices // k} chips = {num_devices} devices"


def mesh(config: ShardingConfig, num_devices: int, num_slices: int) -> Mesh:
    """The canonical mesh; keys on one canonical axis multiply."""
    ici, dcn = _resolve(config, num_devices, num_slices)
    return Mesh(ici=axis_sizes(slots(config, "ici"), ici), dcn=axis_sizes(slots(config, "dcn"), dcn))


def notes(config: ShardingConfig, num_devices: int, num_slices: int) -> list[str]:
    """Defaults that took effect, DCN axes base.yml calls never recommended, inference-only axes."""
    ici, dcn = _resolve(config, num_devices, num_slices)
    out: list[str] = []
    for group, resolved in (("ici", ici), ("dcn", dcn)):
        for s in slots(config, group):
            if s.key is None and s.default == -1 and resolved[s.name] != 1:
                out.append(
                    f"{s.name} is not set, so MaxText's default -1 gives it the rest: {resolved[s.name]}"
                )
    for m in NEVER_OVER_DCN:
        if dcn.get(f"dcn_{m}_parallelism", 1) > 1:
            out.append(f"dcn_{m}_parallelism={dcn[f'dcn_{m}_parallelism']}: MaxText's base.yml marks {m} "
                       f"parallelism over DCN as never recommended (per-layer traffic on the slow network)")
    for m in INFERENCE_ONLY:
        for group, resolved in (("ici", ici), ("dcn", dcn)):
            key = f"{group}_{m}_parallelism"
            if resolved.get(key, 1) > 1:
                out.append(f"{key}={resolved[key]} is a decode-time (inference) axis in MaxText")
    out.extend(ignored(config))
    if num_slices == 1:
        out.extend(f"{k.key}={k.value} has no effect: MaxText builds no DCN mesh for one slice"
                   for k in config.keys if k.group == "dcn" and k.value not in (1, -1))
    diloco = dcn.get("dcn_diloco_parallelism", 1) * ici.get("ici_diloco_parallelism", 1)
    if diloco > 1:
        out.append(f"diloco={diloco}: DiLoCo replicas synchronise only every few steps; ASAP prices them as data "
                   "parallelism, which overstates their network traffic")
    declared = config.setting("num_slices")
    if isinstance(declared, int) and not isinstance(declared, bool) and declared > 0 and declared != num_slices:
        out.append(f"the file sets num_slices: {declared}, but the run has {num_slices}")
    return out


def plan(config: ShardingConfig, root: Node, target: Mesh) -> list[Splice]:
    """Splices that make the config describe ``target`` (see :func:`bot.configs.common.plan_group`).

    Each value is changed where it wins: a launch override, a shell variable, the top YAML file, or the
    base_config file that sets it when nothing overrides it (``splice.file``). A key set nowhere becomes a
    new override on the launch command, or a new line after the config's last parallelism key.
    """
    present = {k.key: k for k in config.keys}
    splices: list[Splice] = []
    inserts: list[tuple[str, int]] = []
    for group, total, want in (
        ("ici", target.num_devices // target.num_slices, target.ici),
        ("dcn", target.num_slices, target.dcn),
    ):
        if group == "dcn" and target.num_slices == 1:
            continue  # MaxText ignores dcn_* on one slice; leave them as written
        for name, value in plan_group(slots(config, group), want, total).items():
            if name in present:
                splices.append(replace_value(config.text_of(present[name].file), present[name], value))
            else:
                inserts.append((name, value))
    if inserts and config.insert_style == "override" and config.insert_at is not None:
        splices.append(Splice(config.insert_at, config.insert_at, "".join(f" {n}={v}" for n, v in inserts)))
    elif inserts and config.launch is not None:  # a launch line with no place in this file for a new override
        raise ConfigError(
            f"cannot add {', '.join(f'{n}={v}' for n, v in inserts)}: the launch line's words are not written in "
            f"{config.source} (they come from another file or are known only at run time)", source=config.source,
            field="mesh", hint="add the override to the launch command by hand")
    elif inserts:
        splices.extend(_insert_yaml(config, root, inserts))
    return splices


def _insert_yaml(config: ShardingConfig, root: Node | None, entries: list[tuple[str, int]]) -> list[Splice]:
    """New keys as YAML lines after the last own key of the same group (ici/dcn), else of the file."""
    own = [k for k in config.keys if k.file is None and k.editable]
    hits = {h.key: h for h in walk(root, KEYS)} if root is not None else {}
    if not own:
        text = config.text
        eol = "\r\n" if "\r\n" in text else "\n"
        lead = "" if not text or text.endswith("\n") else eol
        return [Splice(len(text), len(text), lead + "".join(f"{n}: {v}{eol}" for n, v in entries))]
    by_anchor: dict[str, list[tuple[str, int]]] = {}
    for name, value in entries:
        same = [k for k in own if k.group == name[:3]]
        by_anchor.setdefault(max(same or own, key=lambda k: k.start).key, []).append((name, value))
    out: list[Splice] = []
    for anchor, items in by_anchor.items():
        hit = hits[anchor]
        out.append(insert_after_entry(config.text, hit.key_node, hit.value_node, is_flow(hit.parent), items))
    return out


def native(config: ShardingConfig, num_devices: int, num_slices: int) -> dict[str, dict[str, int]]:
    """The mesh in MaxText's own axes, as ``create_device_mesh`` builds it: {"ici": {axis: size}, "dcn": ...}
    in ``mesh_axes`` order (the legacy union when the config chain has no mesh_axes)."""
    ici, dcn = _resolve(config, num_devices, num_slices)
    axes = config.mesh_axes or [("stage" if m == "pipeline" else m) for m in ORDER]
    out: dict[str, dict[str, int]] = {"ici": {}, "dcn": {}}
    for a in axes:
        m = key_middle(a)
        if m not in AXIS_OF:
            continue
        out["ici"][a] = ici.get(f"ici_{m}_parallelism", 1)
        out["dcn"][a] = dcn.get(f"dcn_{m}_parallelism", 1)
    return out
