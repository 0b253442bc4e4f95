"""TOML reading that keeps source positions, for parsing and byte-exact editing of TOML configs (torchtitan).

Python's :mod:`tomllib` gives the values but no positions. To edit one value without touching any other byte
ASAP also needs its exact character span, so :func:`scan` walks the text line by line and records the span of
every single-line ``key = value`` (table headers, dotted and quoted keys, strings, numbers, booleans, one-line
arrays and inline tables). Lines inside multi-line strings and multi-line arrays are skipped, and a span is kept
only when its text, parsed on its own, equals the value :mod:`tomllib` read at that key: a span ASAP cannot
trust is not editable, never guessed. Every parse failure is a :class:`ConfigError` with line and column.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from typing import Any

from bot.configs.yamlscan import check_size
from bot.errors import ConfigError

_BARE = re.compile(r"[A-Za-z0-9_-]+")
_HEADER = re.compile(r"\s*(\[\[?)")


@dataclass(frozen=True)
class Span:
    """Where one ``key = value`` sits: its full key path (table + key), the value's text and position."""

    path: tuple[str, ...]
    raw: str
    line: int  # 1-based line of the key
    column: int  # 1-based column of the key
    key_start: int  # offset of the key's first character (line indentation precedes it)
    start: int  # offset where the value's text starts
    end: int  # offset just past the value's text

    @property
    def dotted(self) -> str:
        return ".".join(self.path)


def load(text: str, source: str) -> dict[str, Any]:
    """The TOML document as a dict; ConfigError (with line and column) for anything tomllib refuses."""
    check_size(text, source)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"not valid TOML: {exc}", source=source,
                          hint="torchtitan reads this file with tomllib too; fix the line named") from None
    except RecursionError:
        raise ConfigError("not valid TOML: arrays or inline tables nested too deeply", source=source) from None


def value_at(data: dict[str, Any], path: tuple[str, ...]) -> tuple[bool, Any]:
    """(found, value) at a key path in a loaded document."""
    node: Any = data
    for part in path:
        if not isinstance(node, dict) or part not in node:
            return False, None
        node = node[part]
    return True, node


def scan(text: str, data: dict[str, Any]) -> dict[tuple[str, ...], Span]:
    """Spans of every single-line ``key = value`` whose text reads back as ``data`` holds it."""
    out: dict[tuple[str, ...], Span] = {}
    table: tuple[str, ...] | None = ()
    pos = 0
    lineno = 0
    pending: str | None = None  # closing delimiter of a multi-line string, or "]" / "}" depth marker
    depth = 0
    for line in text.splitlines(keepends=True):
        lineno += 1
        start, pos = pos, pos + len(line)
        body = line.rstrip("\r\n")
        if pending is not None:  # inside a multi-line string: wait for its closing quotes
            if pending in body:
                pending = None
            continue
        if depth > 0:  # inside a multi-line array or inline table
            depth, pending = _depth_after(body, 0, depth)
            continue
        m = _HEADER.match(body)
        if m and not body.lstrip().startswith(("[=", "[ =")):
            table = _header(body, m)
            continue
        parsed = _key_value(body)
        if parsed is None:
            continue
        keys, key_col, vstart = parsed
        vend, depth, pending = _value_end(body, vstart)
        if table is None or vend is None:
            continue  # an array of tables' keys, or a value spanning lines: not editable
        path = table + keys
        raw = body[vstart:vend]
        if _reads_back(raw, data, path):
            out[path] = Span(path, raw, lineno, key_col + 1, start + key_col, start + vstart, start + vend)
    return out


def _reads_back(raw: str, data: dict[str, Any], path: tuple[str, ...]) -> bool:
    found, want = value_at(data, path)
    if not found:
        return False
    try:
        return tomllib.loads(f"v = {raw}\n")["v"] == want
    except (tomllib.TOMLDecodeError, RecursionError):
        return False


def _header(body: str, m: re.Match[str]) -> tuple[str, ...] | None:
    """The table a ``[a.b]`` header opens; None for ``[[array.of.tables]]`` (its keys are not edited)."""
    if m.group(1) == "[[":
        return None
    keys = _keys(body, m.end())
    return keys[0] if keys is not None else None


def _key_value(body: str) -> tuple[tuple[str, ...], int, int] | None:
    """(key parts, key column, value start) of a ``key = value`` line; None for other lines."""
    col = len(body) - len(body.lstrip(" \t"))
    if col >= len(body) or body[col] in "#[":
        return None
    parsed = _keys(body, col)
    if parsed is None:
        return None
    keys, i = parsed
    if i >= len(body) or body[i] != "=":
        return None
    i += 1
    while i < len(body) and body[i] in " \t":
        i += 1
    return keys, col, i


def _keys(body: str, i: int) -> tuple[tuple[str, ...], int] | None:
    """Dotted key parts starting at ``i`` (bare or quoted) and the index after them and trailing blanks."""
    parts: list[str] = []
    while True:
        while i < len(body) and body[i] in " \t":
            i += 1
        if i < len(body) and body[i] in "\"'":
            q = body[i]
            j = body.find(q, i + 1)
            if j < 0 or (q == '"' and "\\" in body[i + 1:j]):
                return None  # escaped quoted keys: not worth reading here
            parts.append(body[i + 1:j])
            i = j + 1
        else:
            m = _BARE.match(body, i)
            if m is None:
                return None
            parts.append(m.group(0))
            i = m.end()
        while i < len(body) and body[i] in " \t":
            i += 1
        if i < len(body) and body[i] == ".":
            i += 1
            continue
        if i < len(body) and body[i] == "]":  # a table header's end
            i += 1
        return tuple(parts), i


def _value_end(body: str, i: int) -> tuple[int | None, int, str | None]:
    """(end of the value's text or None when it spans lines, bracket depth left open, open multi-line quote)."""
    if i >= len(body):
        return None, 0, None
    for quote in ('"""', "'''"):
        if body.startswith(quote, i):
            close = body.find(quote, i + 3)
            if close < 0:
                return None, 0, quote
            return close + 3, 0, None
    c = body[i]
    if c == '"':
        j = i + 1
        while j < len(body) and body[j] != '"':
            j += 2 if body[j] == "\\" else 1
        return (j + 1 if j < len(body) else None), 0, None
    if c == "'":
        j = body.find("'", i + 1)
        return (j + 1 if j >= 0 else None), 0, None
    if c in "[{":
        depth, pending = _depth_after(body, i, 0)
        if depth or pending:
            return None, depth, pending
        return _closing(body, i) + 1, 0, None
    m = re.compile(r"[^\s#,\]}]+").match(body, i)
    return (m.end() if m else None), 0, None


def _past_string(body: str, j: int) -> int:
    """Index just past the one-line string opening at ``body[j]`` (a basic string's ``\\"`` does not close it)."""
    c = body[j]
    close = j + 1
    while close < len(body) and body[close] != c:
        close += 2 if (c == '"' and body[close] == "\\") else 1
    return close + 1


def _depth_after(body: str, i: int, depth: int) -> tuple[int, str | None]:
    """Bracket depth after scanning ``body[i:]`` (strings and comments skipped), and an open multi-line quote."""
    j = i
    while j < len(body):
        c = body[j]
        if c == "#":
            break
        if body.startswith('"""', j) or body.startswith("'''", j):
            q = body[j:j + 3]
            close = body.find(q, j + 3)
            if close < 0:
                return depth, q
            j = close + 3
            continue
        if c in "\"'":
            j = _past_string(body, j)
            continue
        if c in "[{":
            depth += 1
        elif c in "]}":
            depth -= 1
        j += 1
    return max(depth, 0), None


def _closing(body: str, i: int) -> int:
    """Index of the bracket closing the one at ``i`` (the value is known to close on this line)."""
    depth = 0
    j = i
    while j < len(body):
        c = body[j]
        if c in "\"'":
            j = _past_string(body, j)
            continue
        if c in "[{":
            depth += 1
        elif c in "]}":
            depth -= 1
            if depth == 0:
                return j
        j += 1
    return len(body) - 1


def line_ending(text: str) -> str:
    """The file's line ending (its first one), ``\\n`` for a one-line file."""
    nl = text.find("\n")
    return "\r\n" if nl > 0 and text[nl - 1] == "\r" else "\n"


def insert_key(text: str, spans: dict[tuple[str, ...], Span], table: tuple[str, ...],
               entries: list[tuple[str, str]]) -> tuple[int, str]:
    """(offset, text) adding ``key = value`` lines (``entries``: key, value text) to ``table``: after its last
    single-line key, at that key's indentation; under its header when it has none; a table the file lacks is
    added at the end as ``[table]`` with the keys under it."""
    eol = line_ending(text)
    mine = [s for s in spans.values() if s.path[:-1] == table and len(s.path) == len(table) + 1]
    if mine:
        last = max(mine, key=lambda s: s.end)
        line_start = text.rfind("\n", 0, last.key_start) + 1
        indent = text[line_start:last.key_start] + _dotted_prefix(text, last)
        nl = text.find("\n", last.end)
        lines = eol.join(f"{indent}{k} = {v}" for k, v in entries)
        if nl == -1:
            return len(text), f"{eol}{lines}"
        return nl + 1, f"{lines}{eol}"
    header = re.compile(r"^[ \t]*\[[ \t]*" + r"[ \t]*\.[ \t]*".join(re.escape(p) for p in table) + r"[ \t]*\][^\n]*\n?",
                        re.MULTILINE)
    m = header.search(text)
    lines = eol.join(f"{k} = {v}" for k, v in entries)
    if m is not None:  # the table is there but holds no single-line key: right under its header
        lead = "" if m.group(0).endswith("\n") else eol
        return m.end(), f"{lead}{lines}{eol}"
    lead = "" if not text or text.endswith("\n") else eol
    return len(text), f"{lead}{eol}[{'.'.join(table)}]{eol}{lines}{eol}"


def _dotted_prefix(text: str, span: Span) -> str:
    """The ``table.`` a key was written with (``activation_checkpoint.mode = ...`` outside its table): a new key
    next to it needs the same prefix to land in the same table; '' for a plain key."""
    written = text[span.key_start:text.index("=", span.key_start)].rstrip()
    last = span.path[-1]
    return written[:-len(last)] if written.endswith(last) and written[:-len(last)].endswith(".") else ""
