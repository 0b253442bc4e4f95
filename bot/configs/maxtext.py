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

# MaxText mesh axis (the middle of the key) -> canonical axis; the first key of each axis is its
# primary key, the one an edit writes when it has to add a key.
AXIS_OF: dict[str, Axis] = {
    "data": "data",
    "fsdp": "fsdp",
    "fsdp_transpose": "fsdp",  # a second FSDP axis (2-D weight sharding)
    "tensor": "tensor",
    "tensor_transpose": "tensor",  # tensor parallelism over the other matmul dimension
    "tensor_sequence": "tensor",  # tensor parallelism that also splits the sequence around norms
    "autoregressive": "tensor",  # decode-time head sharding (inference)
    "sequence": "sequence",
    "context": "sequence",  # context parallelism (ring/all-gather attention)
    "context_autoregressive": "sequence",  # decode-time context sharding (inference)
    "expert": "expert",
    "pipeline": "pipeline",  # MaxText's "stage" mesh axis
}
ORDER: tuple[str, ...] = tuple(sorted(AXIS_OF, key=lambda m: AXES.index(AXIS_OF[m])))
ICI_KEYS: tuple[str, ...] = tuple(f"ici_{m}_parallelism" for m in ORDER)
DCN_KEYS: tuple[str, ...] = tuple(f"dcn_{m}_parallelism" for m in ORDER)
KEYS: tuple[str, ...] = ICI_KEYS + DCN_KEYS

# base.yml defaults for keys absent from the file.
DEFAULTS: dict[str, int] = {"ici_fsdp_parallelism": -1, "dcn_data_parallelism": -1}
NEVER_OVER_DCN = ("sequence", "tensor", "tensor_sequence", "autoregressive")  # base.yml: "never recommended"
INFERENCE_ONLY = ("autoregressive", "context_autoregressive")

SETTINGS: tuple[str, ...] = (
    "remat_policy",
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
    "num_pipeline_microbatches",
    "num_layers_per_pipeline_stage",
    "num_pipeline_repeats",
    "optimizer_memory_host_offload",
    "parameter_memory_host_offload",
    "compile_topology",
    "compile_topology_num_slices",
    "steps",
)


def _mesh_axis(key: str) -> str:
    return key[4 : -len("_parallelism")]


def read(root: Node, text: str, source: str) -> ShardingConfig:
    """Parse the MaxText keys of a composed document (format already detected)."""
    found = unique(root, KEYS, source)
    keys: list[ConfigKey] = []
    for name, hit in sorted(found.items(), key=lambda kv: kv[1].key_node.start_mark.index):
        value = size_value(hit, source, allow_rest=True)
        group = "ici" if name.startswith("ici_") else "dcn"
        keys.append(config_key(hit, group=group, axis=AXIS_OF[_mesh_axis(name)], value=value, text=text))
    return ShardingConfig(format="maxtext", source=source, text=text, keys=keys, settings=settings(root, SETTINGS))


def slots(config: ShardingConfig, group: str) -> list[Slot]:
    """Every key of one group, present or defaulted, primary key of each axis first."""
    names = ICI_KEYS if group == "ici" else DCN_KEYS
    present = {k.key: k for k in config.keys}
    return [Slot(n, AXIS_OF[_mesh_axis(n)], present.get(n), DEFAULTS.get(n, 1)) for n in names]


def _resolve(config: ShardingConfig, num_devices: int, num_slices: int) -> tuple[dict[str, int], dict[str, int]]:
    per_slice = num_devices // num_slices
    slice_word = "slice" if num_slices == 1 else "slices"
    ici = resolve(
        slots(config, "ici"),
        per_slice,
        group="ici",
        source=config.source,
        mismatch=lambda parts, p: f"{parts} = {p} devices per slice, but the run has {num_devices} chips "
        f"in {num_slices} {slice_word} ({per_slice} per slice)",
    )
    dcn = resolve(
        slots(config, "dcn"),
        num_slices,
        group="dcn",
        source=config.source,
        mismatch=lambda parts, p: f"{parts} = {p} slices, but the run has {num_slices} {slice_word}",
    )
    return ici, dcn


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
        if dcn[f"dcn_{m}_parallelism"] > 1:
            out.append(f"dcn_{m}_parallelism={dcn[f'dcn_{m}_parallelism']}: MaxText's base.yml marks {m} "
                       f"parallelism over DCN as never recommended (per-layer traffic on the slow network)")
    for m in INFERENCE_ONLY:
        for group, resolved in (("ici", ici), ("dcn", dcn)):
            key = f"{group}_{m}_parallelism"
            if resolved[key] > 1:
                out.append(f"{key}={resolved[key]} is a decode-time (inference) axis in MaxText")
    declared = config.setting("num_slices")
    if isinstance(declared, int) and not isinstance(declared, bool) and declared > 0 and declared != num_slices:
        out.append(f"the file sets num_slices: {declared}, but the run has {num_slices}")
    return out


def plan(config: ShardingConfig, root: Node, target: Mesh) -> list[Splice]:
    """Splices that make the file describe ``target`` (see :func:`bot.configs.common.plan_group`)."""
    present = {k.key: k for k in config.keys}
    anchors = {h.key: h for h in walk(root, KEYS)}
    splices: list[Splice] = []
    inserts: dict[str, list[tuple[str, int]]] = {}  # anchor key -> new entries
    for group, total, want in (
        ("ici", target.num_devices // target.num_slices, target.ici),
        ("dcn", target.num_slices, target.dcn),
    ):
        group_slots = slots(config, group)
        for name, value in plan_group(group_slots, want, total).items():
            if name in present:
                splices.append(replace_value(config.text, present[name], value))
            else:
                anchor = _anchor(config, group)
                inserts.setdefault(anchor.key, []).append((name, value))
    for anchor_name, entries in inserts.items():
        hit = anchors[anchor_name]
        splices.append(insert_after_entry(config.text, hit.key_node, hit.value_node, is_flow(hit.parent), entries))
    return splices


def _anchor(config: ShardingConfig, group: str) -> ConfigKey:
    """Where new keys go: after the last key of the same group, else after the last parallelism key."""
    same = [k for k in config.keys if k.group == group]
    return max(same or config.keys, key=lambda k: k.start)
