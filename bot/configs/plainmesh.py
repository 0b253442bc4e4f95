"""Plain mesh mappings: ``ici_mesh: {data: 8, model: 4, seq: 2, replica: 1}`` and ``dcn_mesh: {...}``.

The ``ici_mesh`` sizes multiply to the chips of one slice and the ``dcn_mesh`` sizes to the number of
slices; either may hold one ``-1`` ("the rest"). An absent mapping means ``{data: -1}``: all of that
network's devices replicate (data parallelism), as MaxText's ``dcn_data_parallelism: -1`` default does.
Inside a mapping an absent axis is 1. Axis names and their aliases are in :data:`AXIS_OF`.
"""

from __future__ import annotations

from yaml.nodes import MappingNode, Node, ScalarNode

from bot.configs.common import (
    Slot,
    Splice,
    axis_sizes,
    config_key,
    insert_after_entry,
    insert_into_empty_flow,
    is_flow,
    line_ending,
    plan_group,
    replace_value,
    resolve,
    settings,
    size_value,
    unique,
)
from bot.configs.maxtext import SETTINGS as MAXTEXT_SETTINGS
from bot.configs.mesh import AXES, Axis, Mesh
from bot.configs.sharding import ConfigKey, ShardingConfig
from bot.configs.yamlscan import Found, describe, scalar
from bot.errors import ConfigError

KEYS: tuple[str, ...] = ("ici_mesh", "dcn_mesh")

# axis name as written -> canonical axis. "replica" is pure replication = data parallelism.
AXIS_OF: dict[str, Axis] = {
    "data": "data",
    "replica": "data",
    "fsdp": "fsdp",
    "model": "tensor",
    "tensor": "tensor",
    "seq": "sequence",
    "sequence": "sequence",
    "context": "sequence",
    "expert": "expert",
    "pipeline": "pipeline",
}
SETTINGS = MAXTEXT_SETTINGS + ("micro_batch_size", "global_batch_size", "remat", "batch_size", "cross_entropy_loss_fusion",
                               "sharding_strategy", "attention_kernel")


def read(root: Node, text: str, source: str) -> ShardingConfig:
    """Parse ``ici_mesh`` / ``dcn_mesh`` wherever they sit (each at most once)."""
    found = unique(root, KEYS, source)
    keys: list[ConfigKey] = []
    for group_key in KEYS:
        hit = found.get(group_key)
        if hit is None:
            continue
        group = "ici" if group_key == "ici_mesh" else "dcn"
        for name_node, value_node in _entries(hit, source):
            name = name_node.value
            entry = Found(hit.path + (name,), name, name_node, value_node, hit.value_node)  # type: ignore[arg-type]
            value = size_value(entry, source, allow_rest=True)
            keys.append(config_key(entry, group=group, axis=AXIS_OF[name], value=value, text=text))
    keys.sort(key=lambda k: k.start)
    return ShardingConfig(
        format="ici_mesh",
        source=source,
        text=text,
        keys=keys,
        settings=settings(root, SETTINGS),
        mappings=[k for k in KEYS if k in found],
    )


def _entries(hit: Found, source: str) -> list[tuple[ScalarNode, Node]]:
    node = hit.value_node
    if not isinstance(node, MappingNode):
        raise ConfigError(
            f"must be a mapping of axis name to size (e.g. {{data: 8, model: 4}}), got {describe(scalar(node))} "
            f"(line {hit.line})",
            source=source,
            field=hit.dotted,
        )
    seen: dict[str, int] = {}
    out: list[tuple[ScalarNode, Node]] = []
    for name_node, value_node in node.value:
        name = name_node.value if isinstance(name_node, ScalarNode) else None
        line = name_node.start_mark.line + 1
        if not isinstance(name, str) or name not in AXIS_OF or name_node.tag != "tag:yaml.org,2002:str":
            shown = describe(scalar(name_node)) if isinstance(name_node, ScalarNode) else "a collection"
            raise ConfigError(
                f"unknown axis {shown} (line {line}); expected one of: {', '.join(AXIS_OF)}",
                source=source,
                field=hit.dotted,
            )
        if name in seen:
            raise ConfigError(
                f"axis {name} appears twice (lines {seen[name]} and {line})", source=source, field=f"{hit.dotted}.{name}"
            )
        seen[name] = line
        out.append((name_node, value_node))
    return out


def slots(config: ShardingConfig, group: str) -> list[Slot]:
    """Per canonical axis: the names written for it (file order), or one virtual slot if none."""
    present = [k for k in config.keys if k.group == group]
    has_mapping = _mapping_present(config, group)
    out: list[Slot] = []
    for axis in AXES:
        written = [k for k in present if k.axis == axis]
        if written:
            out.extend(Slot(k.key, axis, k) for k in written)
        else:
            default = -1 if (axis == "data" and not has_mapping) else 1
            out.append(Slot(axis, axis, None, default))
    return out


def _mapping_present(config: ShardingConfig, group: str) -> bool:
    return f"{group}_mesh" in config.mappings


def _resolve(config: ShardingConfig, num_devices: int, num_slices: int) -> tuple[dict[str, int], dict[str, int]]:
    per_slice = num_devices // num_slices
    slice_word = "slice" if num_slices == 1 else "slices"
    ici = resolve(
        slots(config, "ici"), per_slice, group="ici_mesh", source=config.source,
        mismatch=lambda parts, p: f"ici_mesh {parts} = {p} devices per slice, but the run has {num_devices} chips "
        f"in {num_slices} {slice_word} ({per_slice} per slice)",
    )
    dcn = resolve(
        slots(config, "dcn"), num_slices, group="dcn_mesh", source=config.source,
        mismatch=lambda parts, p: f"dcn_mesh {parts} = {p} slices, but the run has {num_slices} {slice_word}",
    )
    return ici, dcn


def mesh(config: ShardingConfig, num_devices: int, num_slices: int) -> Mesh:
    ici, dcn = _resolve(config, num_devices, num_slices)
    return Mesh(ici=axis_sizes(slots(config, "ici"), ici), dcn=axis_sizes(slots(config, "dcn"), dcn))


def notes(config: ShardingConfig, num_devices: int, num_slices: int) -> list[str]:
    ici, dcn = _resolve(config, num_devices, num_slices)
    out: list[str] = []
    for group, resolved in (("ici", ici), ("dcn", dcn)):
        if not _mapping_present(config, group) and resolved.get("data", 1) != 1:
            out.append(f"no {group}_mesh in the file: its {resolved['data']} devices are used as data parallelism")
    for axis in ("tensor", "sequence"):
        size = 1
        for s in slots(config, "dcn"):
            if s.axis == axis:
                size *= dcn[s.name]
        if size > 1:
            out.append(f"dcn_mesh puts {axis} parallelism ({size}) across slices: per-layer traffic on the slow network")
    return out


def plan(config: ShardingConfig, root: Node, target: Mesh) -> list[Splice]:
    """Replace changed sizes in place; add new axes to their mapping; add a missing mapping as one line."""
    found = unique(root, KEYS, config.source)
    present = {(k.group, k.key): k for k in config.keys}
    splices: list[Splice] = []
    for group, total, want in (
        ("ici", target.num_devices // target.num_slices, target.ici),
        ("dcn", target.num_slices, target.dcn),
    ):
        new_entries: list[tuple[str, int]] = []
        for name, value in plan_group(slots(config, group), want, total).items():
            if (group, name) in present:
                splices.append(replace_value(config.text, present[(group, name)], value))
            else:
                new_entries.append((name, value))
        if not new_entries:
            continue
        hit = found.get(f"{group}_mesh")
        if hit is not None:
            mapping = hit.value_node
            assert isinstance(mapping, MappingNode)
            last = mapping.value[-1] if mapping.value else None
            if last is None:
                splices.append(insert_into_empty_flow(mapping, new_entries))
            else:
                splices.append(insert_after_entry(config.text, last[0], last[1], is_flow(mapping), new_entries))
        else:
            splices.append(_new_mapping_line(config.text, found, f"{group}_mesh", new_entries, target, group))
    return splices


def _new_mapping_line(
    text: str, found: dict[str, Found], name: str, entries: list[tuple[str, int]], target: Mesh, group: str
) -> Splice:
    """Add ``name: {axis: size, ...}`` on a new line after the other mapping, listing every axis not 1."""
    other = found["dcn_mesh" if name == "ici_mesh" else "ici_mesh"]
    sizes = target.ici if group == "ici" else target.dcn
    body = ", ".join(f"{a}: {v}" for a, v in sizes.items() if v != 1) or ", ".join(f"{n}: {v}" for n, v in entries)
    key_start = other.key_node.start_mark.index
    line_start = text.rfind("\n", 0, key_start) + 1
    indent = text[line_start:key_start]
    if indent.strip():
        indent = " " * len(indent)
    mapping = other.value_node
    # after the other mapping's last entry (a block mapping's own end mark can sit lines further on)
    end = mapping.value[-1][1].end_mark.index if isinstance(mapping, MappingNode) and mapping.value else mapping.end_mark.index
    nl = text.find("\n", end)
    eol = line_ending(text, end)
    line = f"{indent}{name}: {{{body}}}"
    if nl == -1:
        return Splice(len(text), len(text), eol + line)
    return Splice(nl + 1, nl + 1, line + eol)


def allowed_axes(config: ShardingConfig) -> set[Axis]:
    """A plain mesh mapping can name every canonical axis."""
    return set(AXES)
