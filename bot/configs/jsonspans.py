"""JSON read with limits and positions: a config that is valid JSON, not too large or deep, no duplicate keys,
and the exact character span of every object member's value (for byte-preserving edits and line numbers).

:func:`load` validates with the standard library's decoder (its messages carry line and column) and then
walks the text once more with a small scanner that records, for every dotted member path, where its value
starts and ends. Every problem is a :class:`ConfigError` naming the file (and the key where there is one).
"""

from __future__ import annotations

import bisect
import json
import re
from dataclasses import dataclass
from typing import Any

from bot.configs.yamlscan import MAX_CONFIG_BYTES
from bot.errors import ConfigError

MAX_DEPTH = 32  # nesting of objects/arrays: DeepSpeed configs nest 3 deep; deeper is not a config


@dataclass(frozen=True)
class Span:
    """Where one member's value is written: ``text[start:end]``, with the 1-based line of its key."""

    start: int
    end: int
    line: int
    key_start: int  # offset of the member's key (its opening quote)


@dataclass(frozen=True)
class JsonDoc:
    """A parsed JSON object and the span of every member value by dotted path (``zero_optimization.stage``)."""

    data: dict[str, Any]
    spans: dict[str, Span]
    text: str
    source: str

    def line_of(self, index: int) -> int:
        return self.text.count("\n", 0, index) + 1


def load(text: str, source: str) -> JsonDoc:
    """Parse ``text`` as one JSON object; ConfigError (file, line, what was expected) on anything else."""
    if len(text) > MAX_CONFIG_BYTES:
        raise ConfigError(f"config is {len(text):,} characters; JSON configs larger than {MAX_CONFIG_BYTES:,} bytes "
                          "(1 MiB) are refused", source=source)
    _check_depth(text, source)
    try:
        data = json.loads(text.lstrip("\ufeff"), object_pairs_hook=_no_duplicates(source))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})", source=source,
                          hint="the trainer reads the file with json.load: fix the syntax at that line and column") from None
    except RecursionError:  # _check_depth bounds nesting; kept so no traceback can escape
        raise ConfigError(f"JSON nested deeper than {MAX_DEPTH} levels; refused", source=source) from None
    if not isinstance(data, dict):
        raise ConfigError(f"expected a JSON object ({{...}}) at the top level, got {type(data).__name__}",
                          source=source)
    spans: dict[str, Span] = {}
    offset = len(text) - len(text.lstrip("\ufeff"))
    _Walker(text, spans).value(offset + _skip_ws(text[offset:], 0), "")
    return JsonDoc(data=data, spans=spans, text=text, source=source)


def _no_duplicates(source: str):  # noqa: ANN202 - a json object_pairs_hook
    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out:
                raise ConfigError(f'"{key}" appears twice in one object; json.load keeps the last silently, so ASAP '
                                  "cannot tell which value was meant", source=source, field=key)
            out[key] = value
        return out

    return hook


_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')  # a string (skipped whole) or a bracket
_WS = re.compile(r"[ \t\r\n]*")


def _check_depth(text: str, source: str) -> None:
    """Refuse nesting deeper than :data:`MAX_DEPTH` before parsing (brackets inside strings do not count)."""
    depth = 0
    for m in _TOKENS.finditer(text):
        c = m.group()
        if c in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                line = text.count("\n", 0, m.start()) + 1
                raise ConfigError(f"JSON nested deeper than {MAX_DEPTH} levels (line {line}); a DeepSpeed config "
                                  "nests 3 deep: refused", source=source)
        elif c in "]}":
            depth -= 1


def _skip_ws(text: str, i: int) -> int:
    return _WS.match(text, i).end()  # type: ignore[union-attr]  # matches the empty string at worst


class _Walker:
    """Second pass over text already validated by ``json.loads``: records member value spans."""

    def __init__(self, text: str, spans: dict[str, Span]) -> None:
        self.text = text
        self.spans = spans
        self.scan = json.JSONDecoder().scan_once
        self.newlines = [i for i, c in enumerate(text) if c == "\n"]  # line of an offset by bisection

    def value(self, i: int, path: str) -> int:
        t = self.text
        if t[i] == "{":
            return self._object(i, path)
        if t[i] == "[":
            i = _skip_ws(t, i + 1)
            n = 0
            while t[i] != "]":
                i = _skip_ws(t, self.value(i, f"{path}[{n}]"))
                n += 1
                if t[i] == ",":
                    i = _skip_ws(t, i + 1)
            return i + 1
        _, end = self.scan(t, i)
        return end

    def _object(self, i: int, path: str) -> int:
        t = self.text
        i = _skip_ws(t, i + 1)
        while t[i] != "}":
            key_start = i
            key, i = json.decoder.scanstring(t, i + 1)  # type: ignore[attr-defined]
            i = _skip_ws(t, i)
            i = _skip_ws(t, i + 1)  # past ':'
            start = i
            end = self.value(i, f"{path}.{key}" if path else key)
            dotted = f"{path}.{key}" if path else key
            self.spans[dotted] = Span(start, end, bisect.bisect_left(self.newlines, key_start) + 1, key_start)
            i = _skip_ws(t, end)
            if t[i] == ",":
                i = _skip_ws(t, i + 1)
        return i + 1
