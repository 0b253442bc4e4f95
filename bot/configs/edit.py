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
from pathlib import Path

from bot.configs import deepspeed, llmfoundry, maxtext, megatron, plainmesh, torchtitan, torchtitan_edit
from bot.configs.common import apply_splices, replace_value
from bot.configs.detect import parse_config
from bot.configs.mesh import Mesh, unfold_devices
from bot.configs.sharding import ConfigKey, ShardingConfig
from bot.configs.stale_comments import HASH_COMMENT_FORMATS, stale_comment_notes
from bot.configs.yamlscan import compose
from bot.errors import ConfigError

_PLANNERS = {"maxtext": maxtext.plan, "ici_mesh": plainmesh.plan, "megatron": megatron.plan,
             "deepspeed": deepspeed.plan, "torchtitan": torchtitan.plan, "llmfoundry": llmfoundry.plan}


def apply_mesh(config: ShardingConfig, mesh: Mesh) -> str:
    """The config's text rewritten so it describes ``mesh`` on ``mesh.num_devices`` chips.

    MaxText and plain-mesh files get the mesh's ICI and DCN sizes; Megatron files get its total
    tensor/pipeline/context/expert sizes (data parallelism stays implicit; node placement follows
    Megatron's rank order); torchtitan TOML files get their ``*_degree`` values (``key = value`` lines
    changed in place, placement follows torchtitan's rank order, a mesh placed otherwise is refused). Raises :class:`ConfigError` when the mesh has a non-positive axis or an
    axis the format cannot express (FSDP for Megatron), and when the change must be written in another
    file (a base_config file or a called script): use :func:`apply_mesh_files` for those.
    """
    return _primary(config, apply_mesh_files(config, mesh))


def _primary(config: ShardingConfig, texts: dict[str, str]) -> str:
    others = [f for f in texts if f != config.source]
    if others:
        raise ConfigError(
            f"the change must be written in {', '.join(others)}, where the winning value is set",
            source=config.source, field="mesh", hint="use the multi-file edit (apply_mesh_files / config_diff)",
        )
    return texts.get(config.source, config.text)


def apply_mesh_files(config: ShardingConfig, mesh: Mesh) -> dict[str, str]:
    """Every file the edit changes (path -> new text): the value is changed where it wins (launch override,
    shell variable, YAML key, or the base_config file that sets it when nothing overrides it)."""
    for where, axes in (("ici", mesh.ici), ("dcn", mesh.dcn)):
        for axis, size in axes.items():
            if isinstance(size, bool) or size < 1:
                raise ConfigError(f"axis size must be a positive integer, got {size}", source=config.source,
                                  field=f"mesh.{where}.{axis}")
    bad = sorted(a for a, v in mesh.sizes().items() if v > 1 and a not in config.allowed_axes())
    if bad and config.format == "maxtext":
        raise ConfigError(
            f"this config's framework has no {', '.join(bad)} axis"
            + (f" ({config.vintage}; mesh_axes: {', '.join(config.mesh_axes)})" if config.mesh_axes else ""),
            source=config.source, field="mesh",
        )
    root = None if config.launch or config.format in ("deepspeed", "torchtitan") else compose(config.text, config.source)
    # MaxText's sizes count JAX devices (two per TPU7x chip): the chip mesh is written as its device mesh
    written = unfold_devices(mesh, config.jax_per_chip())
    splices = _PLANNERS[config.format](config, root, written)  # type: ignore[arg-type]
    texts = _apply_by_file(config, splices)
    _verify(config, texts, mesh)
    return texts


def _apply_by_file(config: ShardingConfig, splices: list) -> dict[str, str]:  # type: ignore[type-arg]
    """Apply splices to the file each belongs to; only changed files are returned."""
    by_file: dict[str, list] = {}  # type: ignore[type-arg]
    for sp in splices:
        by_file.setdefault(sp.file or config.source, []).append(sp)
    out: dict[str, str] = {}
    for file, group in by_file.items():
        new = apply_splices(config.text_of(file), group)
        if new != config.text_of(file):
            out[file] = new
    return out


def reparse(config: ShardingConfig, texts: dict[str, str]) -> ShardingConfig:
    """Read the config again with some files' texts replaced (to verify an edit means what was asked)."""
    overlay = {f: t for f, t in texts.items() if f != config.source}
    return _same_run(config, parse_config(texts.get(config.source, config.text), config.source,
                                          path=Path(config.source) if config.has_path else None,
                                          command=config.command, overlay=overlay or None,
                                          root=Path(config.root) if config.root else None))


def _same_run(config: ShardingConfig, again: ShardingConfig) -> ShardingConfig:
    """A re-read config for the same run's hardware as ``config`` (its JAX devices per chip)."""
    return again.model_copy(update={"devices_per_chip": config.devices_per_chip})


def _verify(config: ShardingConfig, texts: dict[str, str], mesh: Mesh) -> None:
    """Parse the edited text again; it must give exactly the requested mesh."""
    got = reparse(config, texts).mesh(mesh.num_devices, mesh.num_slices)
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
_FLOAT_TEXT = __import__("re").compile(r"[+-]?([0-9]+\.[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?|[+-]?[0-9]+[eE][+-]?[0-9]+")


def _setting_text(value: object, raw: str) -> str:
    """YAML text for a new setting value, keeping the old value's quote style for strings."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float) and not isinstance(value, bool) and _FLOAT_TEXT.fullmatch(raw.strip("'\"")):
        return str(float(value))  # the file wrote a float (12.0): keep it a float (24.0, not 24)
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
    ConfigError naming it. A torchtitan TOML gets the key under its table (added at the end when the file
    lacks the table); a value its recorded launch command sets is refused (:mod:`bot.configs.torchtitan_edit`).
    """
    from yaml.nodes import ScalarNode

    from bot.configs.common import Splice, insert_after_entry
    from bot.configs.common import settings as read_settings
    from bot.configs.yamlscan import walk

    if not values:
        return config.text
    if config.format == "torchtitan":  # TOML: its own spans and tables (bot.configs.torchtitan_edit)
        return torchtitan_edit.apply_settings(config, values)
    _check_framework_keys(config, values)
    if _by_origin(config):
        return _primary(config, apply_settings_files(config, values))
    root = compose(config.text, config.source)
    names = {path.rsplit(".", 1)[-1] for path in values}
    dashed = config.format == "megatron"  # Megatron's functional-test YAML writes its keys as --flag-names
    hits = list(walk(root, names, normalize=dashed))
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
        anchor = next(h for h in walk(root, [anchor_key.key], normalize=dashed) if h.dotted == anchor_key.path)
        if anchor.key_node.value.split(".")[-1].startswith("--"):  # new keys in the file's own spelling
            new_entries = [("--" + n.replace("_", "-"), v) for n, v in new_entries]
        splices.append(insert_after_entry(config.text, anchor.key_node, anchor.value_node, is_flow_node(anchor.parent),
                                          new_entries))  # type: ignore[arg-type]
    new_text = apply_splices(config.text, splices)
    _verify_settings(config, new_text, values, lambda r, n: read_settings(r, n, normalize=dashed))
    return new_text


def is_flow_node(node: object) -> bool:
    from bot.configs.common import is_flow

    return is_flow(node)  # type: ignore[arg-type]


def _verify_settings(config: ShardingConfig, new_text: str, values: dict[str, object], read_settings) -> None:  # type: ignore[no-untyped-def]
    """The edited file must parse, keep its mesh keys (but a grid size the edit sets, ``GRID_KEYS``), and read back
    every requested value."""
    new_cfg = _same_run(config, parse_config(new_text, config.source))
    grid = {p.rsplit(".", 1)[-1] for p in values} & set(config.grid_keys())

    def mesh_keys(cfg: ShardingConfig) -> list[tuple[str, object]]:
        return [(k.key, k.value) for k in cfg.keys if k.key not in grid]

    if mesh_keys(new_cfg) != mesh_keys(config):
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
    """Mesh and settings together: :func:`apply_mesh`, then :func:`apply_settings` on the result (a DeepSpeed
    JSON's ZeRO stage first: :func:`edit_texts`). A Megatron pipeline-size change carries its followers
    (:func:`bot.configs.megatron.pipeline_followers`)."""
    if config.format == "megatron":
        values = {**megatron.pipeline_followers(config, mesh), **values}
    if _mesh_deciding(config, values):
        return _primary(config, edit_texts(config, mesh, values))
    text = apply_mesh(config, mesh)
    if not values:
        return text
    # a torchtitan TOML is read again with its recorded command (the command's values win over the file)
    edited = reparse(config, {config.source: text}) if config.format == "torchtitan" else \
        _same_run(config, parse_config(text, config.source))
    return apply_settings(edited, values)


def _check_framework_keys(config: ShardingConfig, values: dict[str, object]) -> None:
    """Refuse a setting the config's framework does not read (no micro_batch_size in MaxText)."""
    known = set(config.framework_keys())
    for path in values:
        name = path.rsplit(".", 1)[-1]
        if name not in known and config.setting(name) is None:
            raise ConfigError(
                f"{config.format} has no {name} setting; ASAP does not add keys a framework does not read",
                source=config.source, field=name,
                hint="MaxText's per-chip batch is per_device_batch_size" if config.format == "maxtext" else None,
            )


def apply_settings_files(config: ShardingConfig, values: dict[str, object]) -> dict[str, str]:
    """Settings of a launch/chain config changed where each value wins (changed files only)."""
    from bot.configs.common import Splice

    splices: list[Splice] = []
    new_entries: list[tuple[str, str]] = []
    for path, value in values.items():
        name = path.rsplit(".", 1)[-1]
        origin = config.origins.get(name)
        size = _grid_key(config, name)
        if size is not None:  # a grid size the launch states as a mesh key (Megatron's --expert-model-parallel-size)
            splices.append(replace_value(config.text_of(size.file), size, int(value)))  # type: ignore[call-overload]
        elif origin is not None and origin.start >= 0:
            raw = config.text_of(origin.file)[origin.start:origin.end]
            splices.append(Splice(origin.start, origin.end, _setting_text(value, raw), origin.file))
        elif origin is not None:
            raise ConfigError(f"{name} is set by {origin.via or 'a computed value'}, which ASAP cannot edit in place",
                              source=config.source, field=name, hint=f"set {name} to {value!r} by hand")
        elif config.format == "deepspeed":  # a JSON member: inserted into the object it belongs in
            splices.append(deepspeed.member_splice(config, name, value))
        else:
            new_entries.append((name, _setting_text(value, "")))
    if new_entries:
        if config.insert_at is None:
            raise ConfigError(f"ASAP does not know where to add {new_entries[0][0]} in this launch",
                              source=config.source, field=new_entries[0][0])
        if config.insert_style == "flag":
            added = "".join(f" --{n.replace('_', '-')}" + ("" if v == "true" else f" {v}") for n, v in new_entries)
        else:
            added = "".join(f" {n}={v}" for n, v in new_entries)
        splices.append(Splice(config.insert_at, config.insert_at, added))
    texts = _apply_by_file(config, splices)
    again = reparse(config, texts)
    for path, want in values.items():
        name = path.rsplit(".", 1)[-1]
        size = _grid_key(again, name)
        have = size.value if size is not None else again.setting(name)
        expect = int(want) if isinstance(want, float) and want.is_integer() else want
        if have != expect:
            raise ConfigError(f"internal error: the edited launch reads {name} as {have!r}, not {expect!r}",
                              source=config.source, field=name)
    return texts


def _grid_key(config: ShardingConfig, name: str) -> ConfigKey | None:
    """The mesh key a settings edit may write (``ShardingConfig.grid_keys``), as the launch states it; else None."""
    return config.key(name) if name in config.grid_keys() else None


def config_diff(config: ShardingConfig, mesh: Mesh, settings: dict[str, object] | None, label: str) -> str:
    """Unified diff of every file the change touches (``label`` names the config's own file)."""
    return config_diff_notes(config, mesh, settings, label)[0]


def config_diff_notes(config: ShardingConfig, mesh: Mesh, settings: dict[str, object] | None,
                      label: str) -> tuple[str, list[str]]:
    """The unified diff of :func:`config_diff`, and the edited lines whose kept ``#`` comment still names a value
    the edit changed (:mod:`bot.configs.stale_comments`): the reviewer is told to update them by hand."""
    texts = edit_texts(config, mesh, settings or {})
    out: list[str] = []
    notes: list[str] = []
    for file, new in texts.items():
        name = label if file == config.source else file
        out.append(diff_text(config.text_of(file), new, name))
        if config.format in HASH_COMMENT_FORMATS:
            notes.extend(stale_comment_notes(config.text_of(file), new, name))
    return "".join(out), notes


def edit_texts(config: ShardingConfig, mesh: Mesh, settings: dict[str, object]) -> dict[str, str]:
    """Every file a mesh and settings change touches (path -> new text).

    A setting that decides how the file reads as a mesh, a DeepSpeed JSON's ZeRO stage (stage 3 = parameters
    sharded over every GPU, the fsdp axis), is written first, so the mesh is planned from the stage the file will
    state; the edited file must then still state that stage (a mesh that needs another stage is refused).
    """
    if config.format == "megatron":  # the virtual-stage count and layout follow the pipeline size (stated ones win)
        settings = {**megatron.pipeline_followers(config, mesh), **settings}
    first = _mesh_deciding(config, settings)
    texts = _stage_texts(config, first) if first else {}
    texts = {**texts, **apply_mesh_files(reparse(config, texts) if texts else config, mesh)}
    rest = {k: v for k, v in settings.items() if k not in first}
    if rest:
        edited = reparse(config, texts)
        more = apply_settings_files(edited, rest) if _by_origin(edited) else {edited.source: apply_settings(edited, rest)}
        texts = {**texts, **more}
    if first:
        want = int(next(iter(first.values())))  # type: ignore[call-overload]
        got = deepspeed.stage_of(reparse(config, texts))
        if got != want:
            raise ConfigError(f"the mesh {mesh.short()} needs ZeRO stage {got} in a DeepSpeed config, not {want}",
                              source=config.source, field="zero_optimization.stage")
    return texts


def _mesh_deciding(config: ShardingConfig, values: dict[str, object]) -> dict[str, object]:
    """The settings in ``values`` that decide how ``config`` reads as a mesh: a DeepSpeed JSON's ZeRO stage."""
    if config.format != "deepspeed":
        return {}
    return {k: v for k, v in values.items() if k.rsplit(".", 1)[-1] == "zero_stage"}


def _stage_texts(config: ShardingConfig, values: dict[str, object]) -> dict[str, str]:
    """A DeepSpeed JSON with its ZeRO stage written (in place, or inserted where the file has none)."""
    stage = next(iter(values.values()))
    if isinstance(stage, bool) or not isinstance(stage, int) or stage not in deepspeed.STAGES:
        raise ConfigError(f"must be 0, 1, 2 or 3 (the ZeRO stage), got {stage!r}", source=config.source,
                          field="zero_optimization.stage")
    return _apply_by_file(config, [deepspeed.stage_splice(config, stage)])


def settings_applied(config: ShardingConfig, values: dict[str, object]) -> ShardingConfig:
    """The config as it reads after ``values`` are written where they win (for pricing a settings change)."""
    first = _mesh_deciding(config, values)
    if first:
        texts = _stage_texts(config, first)
        rest = {k: v for k, v in values.items() if k not in first}
        edited = reparse(config, texts) if texts else config
        return settings_applied(edited, rest) if rest else edited
    if _by_origin(config):
        return reparse(config, apply_settings_files(config, values))
    if config.format == "torchtitan":
        return reparse(config, {config.source: apply_settings(config, values)})
    return _same_run(config, parse_config(apply_settings(config, values), config.source))


def _by_origin(config: ShardingConfig) -> bool:
    """Settings are edited where the reader recorded them (launch scripts, base_config chains, JSON); a torchtitan
    TOML's origins are the recorded command's overrides, which its own edit refuses to write over."""
    if config.format == "torchtitan":
        return False
    return bool(config.launch or config.origins or config.format == "deepspeed")
