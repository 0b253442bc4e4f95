"""A POSIX-shell word scanner that keeps source positions, for reading (never running) launch scripts.

Python's :mod:`shlex` splits words but forgets where each character came from, and it does not
separate ``$VAR`` expansions from literal text. ASAP needs both: to edit ``TP=8`` or
``ici_tensor_parallelism=4`` in place it must know the exact span of the ``8``, and to resolve
``--tensor-model-parallel-size ${TP}`` it must know which part of a word is an expansion. (``bashlex``
keeps positions but cannot parse bash arrays, which Megatron-LM's examples use.) This module scans the
text into tokens: words made of :class:`Part` s (literal text with its offset, or an expansion), and
operators (newline, ``;``, ``&&``, ``||``, ``|``, ``&``, ``(``, ``)``, ``;;``). Comments, line
continuations, single/double quotes, ``$VAR``, ``${...}``, ``$(...)``, ``$((...))`` and backticks
are understood; here-documents are skipped. Nothing is executed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bot.errors import ConfigError


@dataclass(frozen=True)
class Part:
    """One piece of a word: ``lit`` text (``start`` = its offset in the file, or -1 when not editable in
    place, e.g. after a backslash escape), or an expansion ``kind`` = ``param`` (``${...}`` body),
    ``cmd`` (``$(...)`` / backticks), ``arith`` (``$((...))``). ``quoted`` is true inside quotes."""

    kind: str
    text: str
    start: int
    quoted: bool


@dataclass
class Token:
    """A word (``parts``) or an operator (``op``), with the offset and line where it starts."""

    start: int
    line: int
    parts: list[Part] = field(default_factory=list)
    op: str | None = None
    end: int = 0

    @property
    def literal(self) -> str | None:
        """The word's text when it has no expansion (quotes removed), else None."""
        if self.op is not None or any(p.kind != "lit" for p in self.parts):
            return None
        return "".join(p.text for p in self.parts)


_OPS = ("&&", "||", ";;", "|&", ">>", "<<<", "<<", ">&", "<&", "&>", ";", "|", "&", "(", ")", "<", ">")
_META = set(" \t\r\n;&|()<>")


class Scanner:
    """Scan ``text`` (from ``source``) into tokens; ConfigError with line numbers on unclosed quotes."""

    def __init__(self, text: str, source: str) -> None:
        self.text = text
        self.source = source
        self.i = 0
        self.heredocs: list[str] = []

    def line_of(self, index: int) -> int:
        return self.text.count("\n", 0, index) + 1

    def fail(self, what: str, at: int) -> ConfigError:
        return ConfigError(f"{what} (line {self.line_of(at)})", source=self.source)

    def tokens(self) -> list[Token]:
        out: list[Token] = []
        t = self.text
        while True:
            self._skip_blanks()
            if self.i >= len(t):
                return out
            c = t[self.i]
            if c == "#":
                nl = t.find("\n", self.i)
                self.i = len(t) if nl == -1 else nl
                continue
            if c == "\n":
                out.append(Token(self.i, self.line_of(self.i), op="\n", end=self.i + 1))
                self.i += 1
                self._skip_heredocs()
                continue
            op = next((o for o in _OPS if t.startswith(o, self.i)), None)
            if op is not None:
                start = self.i
                self.i += len(op)
                if op in ("<<", "<<<"):
                    self._redirect_target(op, start)
                    continue
                if op in ("<", ">", ">>", ">&", "<&", "&>"):
                    self._redirect_target(op, start)
                    continue
                out.append(Token(start, self.line_of(start), op=op, end=self.i))
                continue
            out.append(self._word())

    def _skip_blanks(self) -> None:
        t = self.text
        while self.i < len(t):
            if t[self.i] in " \t\r":
                self.i += 1
            elif t.startswith("\\\n", self.i):
                self.i += 2
            elif t.startswith("\\\r\n", self.i):
                self.i += 3
            else:
                return

    def _redirect_target(self, op: str, start: int) -> None:
        """Skip a redirection's target word; remember a here-document's delimiter."""
        self._skip_blanks()
        if self.i >= len(self.text) or self.text[self.i] in "\n;&|()":
            return
        word = self._word()
        if op == "<<":
            delim = "".join(p.text for p in word.parts).lstrip("-")
            self.heredocs.append(delim)

    def _skip_heredocs(self) -> None:
        while self.heredocs:
            delim = self.heredocs.pop(0)
            t = self.text
            while self.i < len(t):
                nl = t.find("\n", self.i)
                line = t[self.i: len(t) if nl == -1 else nl]
                self.i = len(t) if nl == -1 else nl + 1
                if line.strip() == delim:
                    break

    def _word(self) -> Token:
        t = self.text
        tok = Token(self.i, self.line_of(self.i))
        parts = tok.parts
        while self.i < len(t):
            c = t[self.i]
            if c in _META:
                break
            if t.startswith("\\\n", self.i):
                self.i += 2
            elif c == "\\":
                if self.i + 1 < len(t):
                    parts.append(Part("lit", t[self.i + 1], -1, False))
                self.i += 2
            elif c == "'":
                end = t.find("'", self.i + 1)
                if end == -1:
                    raise self.fail("unclosed single quote", self.i)
                parts.append(Part("lit", t[self.i + 1:end], self.i + 1, True))
                self.i = end + 1
            elif c == '"':
                self._double(parts)
            elif c == "$" or c == "`":
                parts.append(self._dollar(quoted=False))
            else:
                j = self.i
                while j < len(t) and t[j] not in _META and t[j] not in "\\'\"$`":
                    j += 1
                parts.append(Part("lit", t[self.i:j], self.i, False))
                self.i = j
        tok.end = self.i
        tok.parts = _merge(parts)
        return tok

    def _double(self, parts: list[Part]) -> None:
        t = self.text
        open_at = self.i
        self.i += 1
        lit_start = self.i
        while True:
            if self.i >= len(t):
                raise self.fail("unclosed double quote", open_at)
            c = t[self.i]
            if c == '"' or c in "$`" or c == "\\":
                if self.i > lit_start:
                    parts.append(Part("lit", t[lit_start:self.i], lit_start, True))
                if c == '"':
                    self.i += 1
                    return
                if c == "\\":
                    nxt = t[self.i + 1:self.i + 2]
                    if nxt == "\n":
                        self.i += 2
                    elif nxt in '$`"\\':
                        parts.append(Part("lit", nxt, -1, True))
                        self.i += 2
                    else:
                        parts.append(Part("lit", "\\", self.i, True))
                        self.i += 1
                else:
                    parts.append(self._dollar(quoted=True))
                lit_start = self.i
            else:
                self.i += 1

    def _dollar(self, quoted: bool) -> Part:
        t = self.text
        start = self.i
        if t[self.i] == "`":
            end = t.find("`", self.i + 1)
            if end == -1:
                raise self.fail("unclosed backquote", start)
            self.i = end + 1
            return Part("cmd", t[start + 1:end], start, quoted)
        nxt = t[self.i + 1:self.i + 2]
        if t.startswith("$((", self.i):
            end = self._balanced(self.i + 1, "(", ")")
            self.i = end + 1
            return Part("arith", t[start + 3:end - 1], start, quoted)
        if nxt == "(":
            end = self._balanced(self.i + 1, "(", ")")
            self.i = end + 1
            return Part("cmd", t[start + 2:end], start, quoted)
        if nxt == "{":
            end = self._balanced(self.i + 1, "{", "}")
            self.i = end + 1
            return Part("param", t[start + 2:end], start, quoted)
        j = self.i + 1
        if j < len(t) and (t[j].isdigit() or t[j] in "@*#?$!-"):
            self.i = j + 1
            return Part("param", t[j], start, quoted)
        while j < len(t) and (t[j].isalnum() or t[j] == "_"):
            j += 1
        if j == self.i + 1:  # a lone '$'
            self.i += 1
            return Part("lit", "$", start, quoted)
        self.i = j
        return Part("param", t[start + 1:j], start, quoted)

    def _balanced(self, at: int, open_c: str, close_c: str) -> int:
        """Index of the bracket closing the one at ``at`` (quotes inside are skipped)."""
        t = self.text
        depth = 0
        i = at
        while i < len(t):
            c = t[i]
            if c == "\\":
                i += 2
                continue
            if c == "'" and open_c == "(":
                end = t.find("'", i + 1)
                i = (len(t) if end == -1 else end) + 1
                continue
            if c == open_c:
                depth += 1
            elif c == close_c:
                depth -= 1
                if depth == 0:
                    return i
            i += 1
        raise self.fail(f"unclosed '{open_c}'", at)


def _merge(parts: list[Part]) -> list[Part]:
    """Join adjacent literal parts that are contiguous in the file (so a value keeps one span)."""
    out: list[Part] = []
    for p in parts:
        prev = out[-1] if out else None
        if (prev is not None and prev.kind == "lit" and p.kind == "lit" and prev.quoted == p.quoted
                and prev.start >= 0 and p.start == prev.start + len(prev.text)):
            out[-1] = Part("lit", prev.text + p.text, prev.start, prev.quoted)
        else:
            out.append(p)
    return out
