"""Configs as the framework resolves them: MaxText ``base_config`` chains and launch overrides, Megatron /
Pai-Megatron-Patch / NeMo launch scripts and flag-style YAML.

:func:`read` is what :func:`bot.configs.detect.parse_config` calls. It takes the config's text plus, when
known, its path (to find ``base_config`` files and scripts the launch calls) and the launch command
(run.yaml ``command:``), and returns one :class:`ShardingConfig` whose keys are the *winning* values,
each remembering the file and span where it is written (so an edit changes the place that wins).

MaxText precedence (``pyconfig``): the ``base_config`` chain (a child's keys override its parent's; the
path is relative to the file), then ``key=value`` arguments of the launch command, later ones winning.
Megatron precedence (argparse): the last occurrence of a flag wins.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from yaml.nodes import MappingNode, Node

from bot.configs import maxtext
from bot.configs.common import config_key, size_value, unique
from bot.configs.megatron_launch import (
    insert_point,
    megatron_from_command,
    megatron_launch,
    not_editable,
    to_int,
    yaml_value,
)
from bot.configs.sharding import ConfigKey, Scalar, ShardingConfig
from bot.configs.shell import Command, Script, Val, hole_reason, read_script, remap
from bot.configs.yamlscan import compose, scalar
from bot.errors import ConfigError

MAX_CHAIN = 16


# -------------------------------------------------------------------------------------------- file access
@dataclass
class Files:
    """Where other files come from: an overlay of texts (edits being verified) over the disk, confined to
    ``root``.

    A launch script or YAML may name other files (``base_config:``, ``source x.sh``, ``bash x.sh``). They
    are read only when they resolve (symlinks followed) inside ``root``: the config's git repository, else
    its own folder. A PR's script that names ``/etc/passwd`` or ``../../secret`` reads nothing.
    """

    base: Path | None
    overlay: dict[str, str]
    root: Path | None = None

    def __post_init__(self) -> None:
        if self.root is None and self.base is not None:
            self.root = repo_root(self.base)

    def inside(self, path: Path) -> bool:
        if str(path) in self.overlay:
            return True
        if self.root is None:
            return False
        try:
            real, root = path.resolve(), self.root.resolve()
        except (OSError, RuntimeError):
            return False
        return (real == root or root in real.parents) and real.is_file()

    def text(self, path: Path) -> str:
        key = str(path)
        if key in self.overlay:
            return self.overlay[key]
        if not self.inside(path):
            raise ConfigError("is outside the folder ASAP may read for this config", source=key)
        from bot.configs.detect import read_config_text

        return read_config_text(path)

    def find(self, written: str, from_file: str) -> Path | None:
        """A path as written in ``from_file``: relative to that file's folder, then to each folder above it
        up to ``root`` (scripts are often run from the repository root or ``src/``)."""
        if not written or written.startswith(("gs://", "s3://", "http")):
            return None
        p = Path(written)
        if p.is_absolute():
            return p if self.inside(p) else None
        start = Path(from_file).parent if from_file else (self.base.parent if self.base else None)
        if start is None:
            return None
        for folder in [start, *start.parents][:12]:
            cand = folder / p
            if self.inside(cand):
                return cand
            if self.root is not None and folder.resolve() == self.root.resolve():
                break
        return None


def repo_root(path: Path) -> Path:
    """The git repository holding ``path`` (a folder with ``.git``), else ``path``'s own folder."""
    start = Path(path).resolve().parent
    for folder in [start, *start.parents]:
        if (folder / ".git").exists():
            return folder
    return start


# ------------------------------------------------------------------------------------------------- MaxText
@dataclass
class Override:
    """``key=value`` on a MaxText launch command."""

    key: str
    value: Val
    line: int
    file: str


def layers(text: str, source: str, root: Node, files: Files, notes: list[str], top: str | None = None,
           ) -> list[tuple[str | None, str, Node]]:
    """The base_config chain, top file first: (file, or ``top`` = None for the config's own text; text; root)."""
    out: list[tuple[str | None, str, Node]] = [(top, text, root)]
    seen = [str(Path(source).resolve()) if files.base else source]
    current, current_file = root, source
    while True:
        base = _top_scalar(current, "base_config")
        if not isinstance(base, str) or not base:
            return out
        path = _base_path(base, current_file, files)
        if path is None:
            notes.append(f"base_config: {base} (in {Path(current_file).name}) was not found next to it: values it would set "
                         "take MaxText's defaults, and the MaxText version is unknown")
            return out
        real = str(path.resolve())
        if real in seen:
            chain = " -> ".join([*seen, real])
            raise ConfigError(f"base_config chain loops back: {chain}", source=source, field="base_config")
        if len(seen) >= MAX_CHAIN:
            raise ConfigError(f"base_config chain is longer than {MAX_CHAIN} files", source=source, field="base_config")
        seen.append(real)
        t = files.text(path)
        r = compose(t, str(path))
        if not isinstance(r, MappingNode):
            raise ConfigError("base_config file is not a YAML mapping", source=str(path))
        out.append((str(path), t, r))
        current, current_file = r, str(path)


def _base_path(base: str, from_file: str, files: Files) -> Path | None:
    """pyconfig's lookup: relative to the file, else in MaxText's own ``configs`` folder above it."""
    p = Path(base)
    if p.is_absolute():
        return p if files.inside(p) else None
    cand = Path(from_file).parent / p
    if files.inside(cand):
        return cand
    for folder in Path(from_file).parents:
        if folder.name == "configs" and files.inside(folder / p):
            return folder / p
    return None


def _top_level(root: Node, names: tuple[str, ...], source: str) -> dict:  # type: ignore[type-arg]
    """Keys of ``names`` at the top level only (pyconfig reads no nested keys; nested copies, e.g. a
    distillation config's ``student_overrides.model_name``, are not MaxText's), each at most once."""
    return {n: h for n, h in unique(root, names, source).items() if len(h.path) == 1} if _flat_unique(
        root, names) else _top_only(root, names, source)


def _flat_unique(root: Node, names: tuple[str, ...]) -> bool:
    from bot.configs.yamlscan import walk

    seen: set[str] = set()
    for h in walk(root, names):
        if h.key in seen:
            return False
        seen.add(h.key)
    return True


def _top_only(root: Node, names: tuple[str, ...], source: str) -> dict:  # type: ignore[type-arg]
    from bot.configs.yamlscan import Found

    out: dict[str, Found] = {}
    if isinstance(root, MappingNode):
        for k, v in root.value:
            name = getattr(k, "value", None)
            if name in names:
                if name in out:
                    raise ConfigError(f"{name} appears 2 times (line {out[name].line} ({name}), line "
                                      f"{k.start_mark.line + 1} ({name})); ASAP needs exactly one value to read "
                                      "and edit", source=source, field=name)
                out[name] = Found((name,), name, k, v, root)
    return out


def _top_scalar(root: Node, name: str) -> object:
    if isinstance(root, MappingNode):
        for k, v in root.value:
            if getattr(k, "value", None) == name:
                return scalar(v)
    return None


def maxtext_config(text: str, source: str, chain: list[tuple[str | None, str, Node]], overrides: list[Override],
                   *, launch: str | None = None, insert_at: int | None = None, notes: list[str] | None = None,
                   script_files: dict[str, str] | None = None) -> ShardingConfig:
    """MaxText resolved like pyconfig: the chain (base first), then the launch overrides (later wins)."""
    notes = list(notes or [])
    winners: dict[str, ConfigKey] = {}
    settings: dict[str, Scalar] = {}
    origins: dict[str, ConfigKey] = {}
    mesh_axes: list[str] | None = None
    other: dict[str, str] = dict(script_files or {})
    for file, t, r in reversed(chain):  # base first, so children override
        label = file or source
        if file is not None:
            other[file] = t
        for name, hit in _top_level(r, maxtext.KEYS, label).items():
            value = size_value(hit, label, allow_rest=True)
            key = config_key(hit, group="ici" if name.startswith("ici_") else "dcn",
                             axis=maxtext.AXIS_OF[name[4:-12]], value=value, text=t)
            _win(winners, name, key.model_copy(update={"file": file}), label, notes)
        axes = maxtext.mesh_axes_of(r, label)
        if axes is not None:
            mesh_axes = axes
        for name, hit in _top_level(r, maxtext.SETTINGS, label).items():
            settings[name] = scalar(hit.value_node)  # type: ignore[assignment]
            origins[name] = _origin(hit, t, file)
    for ov in overrides:
        _apply_override(ov, source, winners, settings, origins, notes)
        if ov.key == "mesh_axes" and ov.value.text:
            mesh_axes = [a.strip(" '\"") for a in ov.value.text.strip("[]").split(",") if a.strip()]
    keys = sorted(winners.values(), key=lambda k: (k.file is not None, k.file or "", k.start))
    cfg = ShardingConfig(
        format="maxtext", source=source, text=text, keys=keys, settings=settings, origins=origins, files=other,
        mesh_axes=mesh_axes, vintage=maxtext.vintage(mesh_axes, list(winners)), launch=launch, insert_at=insert_at,
        insert_style="override" if insert_at is not None else None, reading=notes,
        nodes=_int(settings.get("num_slices")) if _int(settings.get("num_slices")) not in (None, -1) else None,
    )
    return cfg


def _origin(hit, text: str, file: str | None) -> ConfigKey:  # noqa: ANN001 - a yamlscan.Found
    node = hit.value_node
    return ConfigKey(key=hit.key, path=hit.dotted, group="world", axis="data", value=0,
                     raw=text[node.start_mark.index:node.end_mark.index], line=hit.line, column=1,
                     start=node.start_mark.index, end=node.end_mark.index, file=file)


def _win(winners: dict[str, ConfigKey], name: str, key: ConfigKey, label: str, notes: list[str]) -> None:
    old = winners.get(name)
    if old is not None and old.value != key.value:
        notes.append(f"{name}: {key.value} in {Path(label).name} (line {key.line}) overrides {old.value} in "
                     f"{Path(old.file).name if old.file else 'the config'} (line {old.line})")
    winners[name] = key


def _apply_override(ov: Override, source: str, winners: dict[str, ConfigKey], settings: dict[str, Scalar],
                    origins: dict[str, ConfigKey], notes: list[str]) -> None:
    span = ov.value.span()
    file = None if span is None or span[0] in (None, source) else span[0]
    start, end = (span[1], span[2]) if span is not None else (-1, -1)
    via = f"the launch command ({Path(ov.file).name} line {ov.line})"
    if ov.key in maxtext.KEYS:
        if ov.value.unknown:
            raise ConfigError(f"{ov.key} on the launch command (line {ov.line}) cannot be read: {ov.value.unknown}",
                              source=source, field=ov.key)
        raw = (ov.value.text or "").strip()
        try:
            value = int(raw)
        except ValueError:
            raise ConfigError(f"must be a positive integer or -1 (the rest), got {raw!r} on the launch command "
                              f"(line {ov.line})", source=source, field=ov.key) from None
        if value == 0 or value < -1:
            raise ConfigError(f"must be a positive integer or -1 (the rest), got {value} (line {ov.line})",
                              source=source, field=ov.key)
        key = ConfigKey(key=ov.key, path=ov.key, group="ici" if ov.key.startswith("ici_") else "dcn",
                        axis=maxtext.AXIS_OF[ov.key[4:-12]], value=value, raw=raw, line=ov.line, column=1,
                        start=start, end=end, file=file, via=via if span is None else None)
        _win(winners, ov.key, key, f"{Path(ov.file).name} launch command", notes)
    elif ov.key in maxtext.SETTINGS:
        settings[ov.key] = yaml_value(ov.value.text) if not ov.value.unknown else None
        origins[ov.key] = ConfigKey(key=ov.key, path=ov.key, group="world", axis="data", value=0,
                                    raw=ov.value.text or "", line=ov.line, column=1, start=start, end=end,
                                    file=file, via=via)


def _int(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


# ------------------------------------------------------------------------------------------- launch lines
_MAXTEXT_MODULE = re.compile(r"(^|\.)(train|train_compile|sft_trainer|pre_train\.\w+)$", re.I)
_PY = re.compile(r"(^|/)python(3(\.\d+)?)?$")


def maxtext_launch(cmd: Command) -> tuple[int, int] | None:
    """(index of the config word, index of the first override) when ``cmd`` launches MaxText training."""
    words = [w.text or "" for w in cmd.words]
    for i, w in enumerate(words):
        if _PY.search(w) and i + 2 < len(words) and words[i + 1] == "-m" and "maxtext" in words[i + 2].lower() \
                and _MAXTEXT_MODULE.search(words[i + 2]):
            return i + 3, i + 4
        if _PY.search(w) and i + 1 < len(words) and re.search(r"(maxtext|MaxText).*/(train|train_compile)\.py$",
                                                             words[i + 1]):
            return i + 2, i + 3
    return None


def pick_launch(script: Script, source: str) -> tuple[Command, str]:
    """The training launch command of a script: the last MaxText or Megatron launch ASAP finds."""
    found: list[tuple[Command, str]] = []
    for cmd in script.commands:
        if maxtext_launch(cmd) is not None:
            found.append((cmd, "maxtext"))
        elif megatron_launch(cmd) is not None:
            found.append((cmd, "megatron"))
        elif _xpk_command(cmd) is not None:
            found.append((cmd, "xpk"))
    if not found:
        ran = ", ".join(sorted({(c.words[0].text or "?") for c in script.commands if c.words}))[:200]
        raise ConfigError(
            "no training launch found in the script: expected a 'python3 -m MaxText.train <config> key=value ...' "
            "line or a Megatron 'torchrun ... pretrain_gpt.py --tensor-model-parallel-size N ...' line"
            + (f" (commands seen: {ran})" if ran else ""),
            source=source,
        )
    return found[-1]


def _recipe_hint(text: str) -> str | None:
    """Megatron-Bridge's ``scripts/training/run_recipe.py --recipe NAME key=value ...`` builds its config in Python
    from the recipe function, so the launch line alone does not hold it: say what to give instead."""
    if "run_recipe.py" in text:
        return ("Megatron-Bridge's run_recipe.py builds the config from its --recipe function in Python, so the "
                "launch line does not hold it; point config: at the run_config.yaml Megatron-Bridge writes next to "
                "every checkpoint (or the file logger.save_config_filepath names), which holds the run's resolved "
                "values and is read as a Megatron config")
    return None


def _xpk_command(cmd: Command) -> int | None:
    """Index of the value of ``--command`` in an ``xpk workload create`` line.

    Words are matched on their known text: a ``--command`` string that holds one unknown part (the recipes'
    ``run_name=${WORKLOAD_NAME}``, built with ``$(date ...)``) is still the command.
    """
    words = [_known_text(w) for w in cmd.words]
    if "workload" not in words or not any(w.endswith("xpk") or w.endswith("xpk.py") for w in words[:3]):
        return None
    for i, w in enumerate(words):
        if w == "--command" and i + 1 < len(words):
            return i + 1
        if w.startswith("--command="):
            return i
    return None


def script_config(text: str, source: str, files: Files, args: list[str] | None, command_text: str | None,
                  ) -> ShardingConfig:
    """A launch script read without running it: its launch line resolved into a MaxText or Megatron config."""
    script = read_script(text, source, args=args, resolve=files.find, files={})
    script.files.pop(source, None)
    return _config_from_script(script, text, source, files)


def _config_from_script(script: Script, text: str, source: str, files: Files) -> ShardingConfig:
    """The config of a script already walked: its (last) launch line resolved."""
    try:
        cmd, kind = pick_launch(script, source)
    except ConfigError as exc:
        hint = _recipe_hint(text)
        if hint is None or exc.hint is not None:
            raise
        raise ConfigError(exc.message, source=source, hint=hint) from None
    if kind == "xpk":
        return _xpk_config(cmd, text, source, files, script)
    where = f"{Path(cmd.file).name} line {cmd.line}"
    notes = list(script.notes)
    if cmd.uncertain:
        notes.append(f"the launch at {where} sits in {cmd.uncertain}: read as if that branch runs")
    others = [c for c in script.commands if c is not cmd and (maxtext_launch(c) or megatron_launch(c) is not None)]
    if others:
        notes.append(f"the script has {len(others) + 1} launch lines; ASAP reads the last one ({where})")
    if kind == "maxtext":
        return _maxtext_from_command(cmd, text, source, files, script, notes, where)
    from bot.configs.deepspeed_launch import with_ds_config
    from bot.configs.precision_recipe import with_precision_recipe

    cfg = megatron_from_command(cmd, text, source, script, notes, where)
    cfg = with_precision_recipe(cfg, files.find, files.text)  # --te-precision-config-file
    return with_ds_config(cfg, script, files.find, files.text)  # Megatron-DeepSpeed: the ds_config's ZeRO stage


def _maxtext_from_command(cmd: Command, text: str, source: str, files: Files, script: Script, notes: list[str],
                          where: str) -> ShardingConfig:
    cfg_i, first = maxtext_launch(cmd)  # type: ignore[misc]
    overrides: list[Override] = []
    words = cmd.words
    config_word = words[cfg_i] if cfg_i < len(words) else None
    for w in words[first:] if config_word is not None and _is_yaml_word(config_word) else words[cfg_i:]:
        head = "".join(p.text for p in w.pieces) if w.unknown else (w.text or "")
        m = re.match(r"([A-Za-z_][A-Za-z0-9_]*)=", head)
        if m and w.unknown:
            overrides.append(Override(m.group(1), w, cmd.line, cmd.file))
        elif m:
            overrides.append(Override(m.group(1), w.slice(m.end()), cmd.line, cmd.file))
    root = None
    yaml_text, yaml_source = "", source
    if config_word is not None and _is_yaml_word(config_word):
        written = config_word.text or _literal_tail(config_word)
        path = files.find(_strip_env_prefix(written), cmd.file) if written else None
        if path is not None:
            yaml_text, yaml_source = files.text(path), str(path)
            root = compose(yaml_text, yaml_source)
        else:
            notes.append(f"the launch's config {written or '(computed path)'} was not found: MaxText's base.yml "
                         "defaults assumed (ici_fsdp_parallelism=-1, dcn_data_parallelism=-1, others 1)")
    insert_at = insert_point(cmd, source)
    chain = layers(yaml_text, yaml_source, root, files, notes, top=yaml_source) if root is not None else []
    return maxtext_config(text, source, chain, overrides, notes=notes, script_files=script.files,
                          launch=f"{' '.join((w.text or '?') for w in words[:3])} ({where})", insert_at=insert_at)


def _is_yaml_word(w: Val) -> bool:
    t = w.text if not w.unknown else _literal_tail(w)
    return bool(t) and t.endswith((".yml", ".yaml")) and "=" not in (t or "")


def _literal_tail(w: Val) -> str:
    """The literal text after the last expansion of a word (``"${DIR:-$PWD/x}"/base.yml`` -> ``/base.yml``)."""
    from bot.configs.shell import HOLE

    return "".join(p.text for p in w.pieces).split(HOLE)[-1]


def _strip_env_prefix(path: str) -> str:
    return path.lstrip("/") if path.startswith("/") and not Path(path).is_file() else path


def _xpk_config(cmd: Command, text: str, source: str, files: Files, script: Script) -> ShardingConfig:
    """``xpk workload create ... --num-slices N --command "python3 -m MaxText.train ..."``."""
    i = _xpk_command(cmd)
    assert i is not None
    words = [_known_text(w) for w in cmd.words]
    inner = cmd.words[i]
    if words[i].startswith("--command="):
        inner = inner.slice(len("--command=")) if not inner.unknown else _after(inner, len("--command="))
    span = inner.span()
    cfg = _inner_script(inner, text, source, files) if span is not None and span[0] == source else \
        _inner_from_pieces(inner, text, source, files, script.files)  # built from variables, or in another file
    slices = _flag_value(words, "--num-slices")
    if slices:
        cfg = cfg.model_copy(update={"nodes": slices})
    return cfg


def _known_text(w: Val) -> str:
    """A word's text with any unknown part left as its hole (``shell.HOLE``)."""
    return "".join(p.text for p in w.pieces)


def _after(w: Val, n: int) -> Val:
    """The word without its first ``n`` characters, unknown parts kept unknown."""
    cut = Val(w.pieces, None, w.assumed).slice(n)
    return Val(cut.pieces, hole_reason(cut.pieces), w.assumed)


def _flag_value(words: list[str], flag: str) -> int | None:
    """``--flag N`` or ``--flag=N`` as an integer (the last one wins, as argparse does), else None."""
    found = None
    for j, w in enumerate(words):
        if w == flag and j + 1 < len(words):
            found = to_int(words[j + 1])
        elif w.startswith(flag + "="):
            found = to_int(w[len(flag) + 1:])
    return found


_INNER = "<xpk --command>"


def _inner_from_pieces(inner: Val, text: str, source: str, files: Files, read: dict[str, str]) -> ShardingConfig:
    """The --command string read as a script when it is built from variables (``--command="... ${MAXTEXT_ARGS}"``).

    Each character of the string keeps where it was written, so a key set in ``MAXTEXT_ARGS="..."`` is read, and
    edited, where that assignment writes it. A part bash would only know at run time (``run_name=${WORKLOAD_NAME}``
    with ``$(date ...)``) stays unknown to that one word instead of hiding the whole command.
    """
    origin = [(p.file, p.start + k if p.start >= 0 else -1) for p in inner.pieces for k in range(len(p.text))]
    return embedded_script(_known_text(inner), origin, text, source, files, _INNER, read)


def embedded_script(inner: str, origin: list[tuple[str | None, int]], text: str, source: str, files: Files,
                    name: str, read: dict[str, str] | None = None) -> ShardingConfig:
    """A script written inside another file (an XPK ``--command`` string, a Kubernetes container's command), read
    with each of its characters taken back to where ``text`` writes it (``origin``), so a value is read, and edited,
    in place, and a new override goes after the launch line's last word in the file. ``read``: the other files the
    outer script read (path -> text), where some of those characters may be written."""
    script = read_script(inner, name, resolve=files.find, files={})
    script.files.pop(name, None)
    script.files = {**(read or {}), **script.files}
    script.files.pop(source, None)
    for c in script.commands:
        if c.file != name:  # a script the embedded one calls or sources keeps its own positions
            continue
        c.words = [remap(w, name, origin) for w in c.words]
        c.env = {k: remap(v, name, origin) for k, v in c.env.items()}
        written = next((q.start for w in c.words for q in w.pieces if q.file == source and q.start >= 0), None)
        c.file, c.line = source, (text.count("\n", 0, written) + 1) if written is not None else c.line
        c.end = _written_end(c.words, text, source)
    cfg = _config_from_script(script, text, source, files)
    return cfg.model_copy(update={"text": text})


def _written_end(words: list[Val], text: str, source: str) -> int:
    """Where a new override goes for a launch written inside ``source``: just past the last word ``source`` writes
    as one whole literal token (``steps=30``; ``run_name=${WORKLOAD_NAME}`` and ``x=${EMPTY}`` are passed over: the
    value's end is not where the token ends), -1 when there is none."""
    for w in reversed(words):
        span = w.span()
        if span is not None and span[0] == source and (span[2] == len(text) or text[span[2]] in " \t\r\n\\\"'"):
            return span[2]
    return -1


def _inner_script(inner: Val, text: str, source: str, files: Files) -> ShardingConfig:
    """The --command string read as a script, with its positions mapped back into the file."""
    span = inner.span()
    assert span is not None
    _, start, end = span
    padded = "".join(c if c == "\n" else " " for c in text[:start]) + text[start:end]
    cfg = script_config(padded, source, files, None, None)
    return cfg.model_copy(update={"text": text})


def devices_of(cfg: ShardingConfig) -> int | None:
    """Devices the config states by itself (Megatron launcher / NeMo trainer), else None."""
    if cfg.devices:
        return cfg.devices
    dev, nodes = cfg.setting("devices"), cfg.setting("num_nodes")
    if _int(dev) and _int(dev) > 0:  # type: ignore[operator]
        return dev * (_int(nodes) or 1)  # type: ignore[operator]
    return None


__all__ = ["Files", "maxtext_config", "script_config", "devices_of"]


# ------------------------------------------------------------------------------------------ YAML entries
def yaml_maxtext(text: str, source: str, root: Node, files: Files, command: str | None) -> ShardingConfig:
    """A MaxText YAML: its base_config chain, then the recorded launch command's overrides (if any)."""
    notes: list[str] = []
    chain = layers(text, source, root, files, notes)
    overrides: list[Override] = []
    if command:
        script = read_script(command, "run.yaml command", resolve=lambda _p, _f: None)
        cmd = next((c for c in reversed(script.commands) if maxtext_launch(c) is not None), None)
        if cmd is None:
            raise ConfigError("the recorded command is not a MaxText launch ('python3 -m MaxText.train <config> "
                              "key=value ...')", source=source, field="command")
        cfg_i, first = maxtext_launch(cmd)  # type: ignore[misc]
        start = first if cfg_i < len(cmd.words) and _is_yaml_word(cmd.words[cfg_i]) else cfg_i
        for w in cmd.words[start:]:
            m = re.match(r"([A-Za-z_][A-Za-z0-9_]*)=", "".join(p.text for p in w.pieces))
            if m:
                overrides.append(Override(m.group(1), not_editable(w.slice(m.end()) if not w.unknown else w),
                                          1, "run.yaml command"))
    return maxtext_config(text, source, chain, overrides, notes=notes)
