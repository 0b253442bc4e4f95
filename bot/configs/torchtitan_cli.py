"""torchtitan launch overrides in a recorded command (run.yaml ``command:``), read as torchtitan reads them.

torchtitan lays its command line over the TOML file, the command winning (pytorch/torchtitan, BSD-3-Clause):

* 2025 - February 2026 (``torchtitan/config/manager.py`` @238fa99, ``ConfigManager``: "CLI args > TOML file >
  JobConfig defaults"): tyro flags ``--section.key value`` or ``--section.key=value`` (``-`` and ``_`` alike in
  names); a boolean is a bare flag (``--compile.enable``), ``--compile.no_enable`` / ``--compile.no-enable`` sets
  it false and ``--compile.enable=False`` is refused (``docs/debugging.md``); a ``list[str]`` is comma-separated.
* 2024 (``torchtitan/config_manager.py`` @9dec370, ``JobConfig.parse_args``): argparse flags of the same
  ``--section.key`` names merged over the TOML; booleans are ``store_true`` flags.

Launches look like ``CONFIG_FILE=./train_configs/llama3_8b.toml ./run_train.sh --training.steps 10`` (the script
passes ``"$@"`` on to ``torchrun ... -m torchtitan.train --job.config_file ...``) or the ``torchrun`` line itself.
Every ``--a.b`` word of the command is read (torchrun's own flags have no dot); the last occurrence of a flag wins,
as in argparse and tyro. Only flags ASAP reads (``known``) are kept; the rest (``--training.steps``) are skipped.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from bot.errors import ConfigError

Kinds = tuple[type, ...]
CHOICES: dict[tuple[str, ...], tuple[str, ...]] = {
    # JobConfig.ActivationCheckpoint.mode Literal @238fa99 (2024: none / full / selective, checked in apply_ac)
    ("activation_checkpoint", "mode"): ("none", "selective", "full", "memory_budget"),
}
CONFIG_FILE = ("job", "config_file")
_EXAMPLE = {int: "2", str: "VALUE", list: "A,B"}


@dataclass(frozen=True)
class Flag:
    """One override as it wins: the flag as written, the key path it sets and the typed value."""

    name: str  # "--activation_checkpoint.mode" as written
    path: tuple[str, ...]  # ("activation_checkpoint", "mode")
    value: Any
    written: str  # "--activation_checkpoint.mode full", for messages

    @property
    def dotted(self) -> str:
        return ".".join(self.path)

    @property
    def via(self) -> str:
        return f"set by the recorded launch command (run.yaml command: {self.written}), which wins over the TOML"


def flags(command: str, source: str, known: Callable[[tuple[str, ...]], Kinds | None]) -> dict[tuple[str, ...], Flag]:
    """The ``--section.key`` overrides of ``command`` that ``known`` types (path -> accepted types), last one
    winning; ConfigError naming the flag and the form torchtitan expects for one ASAP cannot read."""
    words = _words(command, source)
    out: dict[tuple[str, ...], Flag] = {}
    i = 0
    while i < len(words):
        word = words[i]
        name, eq, inline = word.partition("=")
        if not name.startswith("--") or "." not in name:
            i += 1
            continue
        path, kinds, negated = _path(name, known)
        if kinds is not None and bool in kinds:
            if eq:
                raise ConfigError(f"{name} is a true/false flag and takes no value, got {word!r}", source=source,
                                  field="command", hint=f"write {_on(path)} to turn it on, {_off(path)} to turn it off")
            flag = Flag(name, path, not negated, word)
            i += 1
        else:
            raw, i = (inline, i + 1) if eq else _next_value(words, i)
            if kinds is None:
                continue
            value = _typed(name, raw, kinds, path, source)
            flag = Flag(name, path, value, f"{name}={raw}" if eq else f"{name} {raw}")
        out.pop(path, None)
        out[path] = flag
    return out


def _words(command: str, source: str) -> list[str]:
    from bot.configs.common import command_words

    # a backslash-newline continuation leaves a lone newline
    return [w for w in command_words(command, source) if w.strip()]


def _path(name: str, known: Callable[[tuple[str, ...]], Kinds | None]) -> tuple[tuple[str, ...], Kinds | None, bool]:
    """(key path, accepted types or None when ASAP does not read it, negated) of a flag name; tyro's
    ``--section.no_key`` turns a boolean off."""
    path = tuple(part.replace("-", "_") for part in name[2:].split("."))
    kinds = known(path)
    if kinds is None and path[-1].startswith("no_"):
        plain = path[:-1] + (path[-1][3:],)
        if known(plain) == (bool,):
            return plain, (bool,), True
    return path, kinds, False


def _next_value(words: list[str], i: int) -> tuple[str | None, int]:
    """The word after flag ``i`` when it is its value (not another ``--flag``), and the index after both."""
    if i + 1 < len(words) and not words[i + 1].startswith("--"):
        return words[i + 1], i + 2
    return None, i + 1


def _typed(name: str, raw: str | None, kinds: Kinds, path: tuple[str, ...], source: str) -> Any:
    """The override's value as torchtitan types it; ConfigError naming the flag and the expected form."""
    example = next(iter(CHOICES.get(path, ())), None) or _EXAMPLE.get(kinds[0], "VALUE")
    form = f"{name} {example} or {name}={example}"
    if raw is None or not raw.strip():
        raise ConfigError(f"{name} on the recorded launch command has no value", source=source, field="command",
                          hint=f"write {form}")
    if "$" in raw or "`" in raw:
        raise ConfigError(f"{name} {raw}: the shell fills this value in when the job starts, so ASAP cannot read it",
                          source=source, field="command", hint=f"record the command with the value itself: {form}")
    if kinds == (int,):
        if not re.fullmatch(r"[+-]?\d+", raw.strip()):
            raise ConfigError(f"{name} expects an integer, got {raw!r}", source=source, field="command",
                              hint=f"write {form}")
        return int(raw)
    if list in kinds:
        return [part.strip() for part in raw.split(",") if part.strip()]
    choices = CHOICES.get(path)
    if choices and raw not in choices:
        raise ConfigError(f"{name} expects one of {', '.join(choices)}, got {raw!r}", source=source,
                          field="command", hint=f"write {form}")
    return raw


def _on(path: tuple[str, ...]) -> str:
    return "--" + ".".join(path)


def _off(path: tuple[str, ...]) -> str:
    return "--" + ".".join(path[:-1] + ("no_" + path[-1],))


def merged(data: dict[str, Any], given: dict[tuple[str, ...], Flag]) -> dict[str, Any]:
    """The loaded TOML with each override written over it (tables created as needed); ``data`` is not changed."""
    out = _copy(data)
    for path, flag in given.items():
        if path == CONFIG_FILE:
            continue
        node = out
        for part in path[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {}
            node = child
        node[path[-1]] = flag.value
    return out


def _copy(node: Any) -> Any:
    return {k: _copy(v) for k, v in node.items()} if isinstance(node, dict) else node


def notes(given: dict[tuple[str, ...], Flag], before: Callable[[tuple[str, ...]], str], source: str) -> list[str]:
    """The reading notes: each override and what it replaced (``before(path)``: 'x in the file (line n)'), and a
    ``--job.config_file`` that names another file than the one ASAP read."""
    out: list[str] = []
    for path, flag in given.items():
        if path == CONFIG_FILE:
            if PurePath(str(flag.value)).name != PurePath(source).name:
                out.append(f"the recorded command reads {flag.value} ({flag.name}), not {PurePath(source).name}: "
                           f"ASAP read {source}")
            continue
        out.append(f"{flag.dotted} = {_shown(flag.value)} comes from the recorded launch command ({flag.written}), "
                   f"over {before(path)}")
    return out


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return repr(",".join(value))
    return repr(value)


__all__ = ["CHOICES", "CONFIG_FILE", "Flag", "flags", "merged", "notes"]
