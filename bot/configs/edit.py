"""Round-trip editing of sharding configs: change only the mesh values, keep every other byte.

Public API::

    apply_mesh(config: ShardingConfig, mesh: Mesh) -> str
    diff_text(old: str, new: str, path: str) -> str

``apply_mesh`` never re-dumps YAML. It locates each value's exact character span in the original text
(``yaml.compose`` marks) and splices the new number in, keeping quotes; a key that must be added
becomes one new line after the last existing parallelism key, at its indentation and with the file's
line ending (or ``, key: v`` inside a flow mapping). Comments, key order, quoting, indentation, blank
lines, trailing whitespace and CRLF endings of every other line stay byte-identical. Before returning,
the new text is parsed again and must resolve to the requested mesh, so an edit that would not mean
what was asked is refused instead of written.
"""

from __future__ import annotations

import difflib

from bot.configs import maxtext, megatron, plainmesh
from bot.configs.common import apply_splices
from bot.configs.detect import parse_config
from bot.configs.mesh import Mesh
from bot.configs.sharding import ShardingConfig
from bot.configs.yamlscan import compose
from bot.errors import ConfigError

_PLANNERS = {"maxtext": maxtext.plan, "ici_mesh": plainmesh.plan, "megatron": megatron.plan}


def apply_mesh(config: ShardingConfig, mesh: Mesh) -> str:
    """The config's text rewritten so it describes ``mesh`` on ``mesh.num_devices`` chips.

    MaxText and plain-mesh files get the mesh's ICI and DCN sizes; Megatron files get its total
    tensor/pipeline/context/expert sizes (data parallelism stays implicit; node placement follows
    Megatron's rank order). Raises :class:`ConfigError` when the mesh has a non-positive axis or an
    axis the format cannot express (FSDP for Megatron).
    """
    for where, axes in (("ici", mesh.ici), ("dcn", mesh.dcn)):
        for axis, size in axes.items():
            if isinstance(size, bool) or size < 1:
                raise ConfigError(f"axis size must be a positive integer, got {size}", source=config.source,
                                  field=f"mesh.{where}.{axis}")
    root = compose(config.text, config.source)
    splices = _PLANNERS[config.format](config, root, mesh)
    new_text = apply_splices(config.text, splices)
    _verify(config, new_text, mesh)
    return new_text


def _verify(config: ShardingConfig, new_text: str, mesh: Mesh) -> None:
    """Parse the edited text again; it must give exactly the requested mesh."""
    got = parse_config(new_text, config.source).mesh(mesh.num_devices, mesh.num_slices)
    if config.format == "megatron":
        ok = got.sizes() == mesh.sizes()
    else:
        ok = got == mesh.normalized()
    if not ok:
        raise ConfigError(
            f"internal error: the edited file resolves to {got.short()}, not the requested {mesh.normalized().short()}",
            source=config.source,
            field="mesh",
        )


def diff_text(old: str, new: str, path: str) -> str:
    """A unified diff (``a/path`` -> ``b/path``, 3 lines of context), empty when nothing changed.

    A last line without a newline is marked ``\\ No newline at end of file`` as git does.
    """
    if old == new:
        return ""

    def lines(text: str) -> list[str]:
        out = text.split("\n")
        out = [line + "\n" for line in out[:-1]] + ([out[-1]] if out[-1] else [])
        if out and not out[-1].endswith("\n"):
            out[-1] += "\n\\ No newline at end of file\n"
        return out

    return "".join(difflib.unified_diff(lines(old), lines(new), fromfile=f"a/{path}", tofile=f"b/{path}"))


# ------------------------------------------------------------------------------------------------------
# Settings besides the mesh (additive): micro-batch, remat policy, per-device batch, accumulation steps.

_SETTING_PLAIN = __import__("re").compile(r"^[A-Za-z0-9_.+-]+$")


def _setting_text(value: object, raw: str) -> str:
    """YAML text for a new setting value, keeping the old value's quote style for strings."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int | float):
        return str(value)
    text = str(value)
    quote = raw[:1] if raw[:1] in ("'", '"') else ""
    if not quote and not _SETTING_PLAIN.match(text):
        quote = '"'
    if quote == "'":
        return "'" + text.replace("'", "''") + "'"
    if quote == '"':
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return text


def apply_settings(config: ShardingConfig, values: dict[str, object]) -> str:
    """The config's text with each setting in ``values`` (key name or dotted path -> new value) rewritten.

    Same mechanism as :func:`apply_mesh`: a present key's value span is replaced in place (quotes kept);
    an absent key becomes one new line after the file's last mesh key (MaxText, Megatron), at its
    indentation and with the file's line ending. The edited text is parsed again: it must describe the
    same mesh and read back every requested value, or the edit is refused. ``ici_mesh`` files keep their
    trainer settings in free-form sections, so a setting they do not already hold is refused with a
    ConfigError naming it.
    """
    from yaml.nodes import ScalarNode

    from bot.configs.common import Splice, insert_after_entry
    from bot.configs.common import settings as read_settings
    from bot.configs.yamlscan import walk

    if not values:
        return config.text
    root = compose(config.text, config.source)
    names = {path.rsplit(".", 1)[-1] for path in values}
    hits = list(walk(root, names))
    splices: list[Splice] = []
    new_entries: list[tuple[str, str]] = []
    for path, value in values.items():
        name = path.rsplit(".", 1)[-1]
        found = [h for h in hits if h.dotted == path] or [h for h in hits if h.key == name and "." not in path]
        if len(found) > 1:
            raise ConfigError(f"{name} appears {len(found)} times; ASAP needs exactly one value to edit",
                              source=config.source, field=name)
        if found:
            node = found[0].value_node
            if not isinstance(node, ScalarNode):
                raise ConfigError(f"{path} is not a single value (line {node.start_mark.line + 1})",
                                  source=config.source, field=path)
            start, end = node.start_mark.index, node.end_mark.index
            raw = config.text[start:end]
            splices.append(Splice(start, end, _setting_text(value, raw)))
        else:
            if config.format == "ici_mesh" or not config.keys:
                raise ConfigError(
                    f"the config has no {name} setting to change, and ASAP does not know where the trainer reads it",
                    source=config.source, field=path,
                    hint=f"set {name} to {value!r} where your trainer reads it",
                )
            new_entries.append((name, _setting_text(value, "")))
    if new_entries:
        anchor_key = max(config.keys, key=lambda k: k.start)
        anchor = next(h for h in walk(root, [anchor_key.key]) if h.dotted == anchor_key.path)
        splices.append(insert_after_entry(config.text, anchor.key_node, anchor.value_node, is_flow_node(anchor.parent),
                                          new_entries))  # type: ignore[arg-type]
    new_text = apply_splices(config.text, splices)
    _verify_settings(config, new_text, values, read_settings)
    return new_text


def is_flow_node(node: object) -> bool:
    from bot.configs.common import is_flow

    return is_flow(node)  # type: ignore[arg-type]


def _verify_settings(config: ShardingConfig, new_text: str, values: dict[str, object], read_settings) -> None:  # type: ignore[no-untyped-def]
    """The edited file must parse, keep its mesh keys, and read back every requested value."""
    new_cfg = parse_config(new_text, config.source)
    if [(k.key, k.value) for k in new_cfg.keys] != [(k.key, k.value) for k in config.keys]:
        raise ConfigError("internal error: a settings edit changed the mesh keys", source=config.source, field="mesh")
    root = compose(new_text, config.source)
    got = read_settings(root, {p.rsplit(".", 1)[-1] for p in values})
    for path, want in values.items():
        name = path.rsplit(".", 1)[-1]
        have = [v for p, v in got.items() if p == path or p.rsplit(".", 1)[-1] == name]
        expect = int(want) if isinstance(want, float) and want.is_integer() else want
        if not have or have[0] != expect:
            raise ConfigError(
                f"internal error: the edited file reads {name} as {have[0] if have else 'missing'!r}, not {expect!r}",
                source=config.source, field=path,
            )


def apply_changes(config: ShardingConfig, mesh: Mesh, values: dict[str, object]) -> str:
    """Mesh and settings together: :func:`apply_mesh`, then :func:`apply_settings` on the result."""
    text = apply_mesh(config, mesh)
    if not values:
        return text
    edited = parse_config(text, config.source)
    return apply_settings(edited, values)
