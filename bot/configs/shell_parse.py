"""The statement tree of a launch script: simple commands, ``if``/``for``/``while``/``case``, functions.

:class:`Parser` turns the tokens of :mod:`bot.configs.shlex_spans` into :class:`Node` s that
:mod:`bot.configs.shell` walks. Constructs ASAP does not read (``for ((...))``, ``(( ... ))``) and
unfinished ones are a :class:`ConfigError` naming the construct and the line; the parser never loops on
input it does not understand (every step consumes a token or raises).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from bot.configs.shlex_spans import Token
from bot.errors import ConfigError


@dataclass
class Node:
    kind: str  # simple | if | for | while | case | func | group
    line: int
    words: list[Token] = field(default_factory=list)
    arrays: dict[int, list[Token]] = field(default_factory=dict)  # word index -> array elements
    body: list[Node] = field(default_factory=list)
    branches: list[tuple[list[Node] | None, list[Node]]] = field(default_factory=list)
    name: str = ""


_RESERVED_END = {"then", "fi", "else", "elif", "do", "done", "esac", "}", "in"}


class Parser:
    """Turns tokens into a small tree of commands and compound statements."""

    def __init__(self, tokens: list[Token], source: str, text: str = "") -> None:
        self.toks = tokens
        self.i = 0
        self.source = source
        self.text = text  # the scanned text: tells <(...) / >(...) process substitution from a bare "("

    def fail(self, what: str, line: int) -> ConfigError:
        return ConfigError(f"{what} (line {line}): ASAP reads launch scripts without running them and does not "
                           f"support this construct", source=self.source)

    def need(self, line: int) -> Token:
        """The current token; an unfinished construct at the end of the script is an error."""
        if self.i >= len(self.toks):
            raise self.fail("the script ends inside a construct", line)
        return self.toks[self.i]

    def peek_word(self) -> str | None:
        if self.i < len(self.toks) and self.toks[self.i].op is None:
            return self.toks[self.i].literal
        return None

    def skip_seps(self) -> None:
        while self.i < len(self.toks) and self.toks[self.i].op in ("\n", ";", "&", "&&", "||", "|", "|&"):
            self.i += 1

    def parse_list(self, stop: set[str]) -> list[Node]:
        out: list[Node] = []
        while True:
            self.skip_seps()
            if self.i >= len(self.toks):
                return out
            tok = self.toks[self.i]
            if tok.op == ")" and ")" in stop:
                return out
            if tok.op == ";;" and ";;" in stop:
                return out
            word = self.peek_word()
            if word in stop:
                return out
            out.append(self.parse_command())

    def expect(self, word: str, line: int) -> None:
        self.skip_seps()
        if self.peek_word() != word:
            raise self.fail(f"expected '{word}'", line)
        self.i += 1

    def parse_command(self) -> Node:
        tok = self.toks[self.i]
        word = self.peek_word()
        line = tok.line
        if word == "if":
            return self._if(line)
        if word in ("for", "select"):
            return self._for(line)
        if word in ("while", "until"):
            self.i += 1
            cond = self.parse_list({"do"})
            self.expect("do", line)
            body = self.parse_list({"done"})
            self.expect("done", line)
            return Node("while", line, body=cond + body)
        if word == "case":
            return self._case(line)
        if word == "{":
            self.i += 1
            body = self.parse_list({"}"})
            self.expect("}", line)
            return Node("group", line, body=body)
        if word == "function":
            self.i += 1
            name = self.peek_word() or ""
            self.need(line)
            self.i += 1
            if self.i + 1 < len(self.toks) and self.toks[self.i].op == "(" and self.toks[self.i + 1].op == ")":
                self.i += 2
            return self._func_body(name, line)
        if tok.op == "(":
            if self.i + 1 < len(self.toks) and self.toks[self.i + 1].op == "(":
                raise self.fail("arithmetic command (( ... ))", line)
            self.i += 1
            body = self.parse_list({")"})
            self.need(line)
            self.i += 1
            return Node("group", line, body=body)
        if word in _RESERVED_END:
            raise self.fail(f"unexpected '{word}'", line)
        if tok.op is not None:  # ';;' or ')' where no command can start
            raise self.fail(f"unexpected '{tok.op}'", line)
        return self._simple(line)

    def _func_body(self, name: str, line: int) -> Node:
        self.skip_seps()
        self.need(line)
        body = [self.parse_command()]
        return Node("func", line, body=body, name=name)

    def _if(self, line: int) -> Node:
        self.i += 1
        node = Node("if", line)
        cond = self.parse_list({"then"})
        self.expect("then", line)
        body = self.parse_list({"elif", "else", "fi"})
        node.branches.append((cond, body))
        while True:
            self.skip_seps()
            w = self.peek_word()
            if w == "elif":
                self.i += 1
                cond = self.parse_list({"then"})
                self.expect("then", line)
                node.branches.append((cond, self.parse_list({"elif", "else", "fi"})))
            elif w == "else":
                self.i += 1
                node.branches.append((None, self.parse_list({"fi"})))
            else:
                self.expect("fi", line)
                return node

    def _for(self, line: int) -> Node:
        self.i += 1
        if self.need(line).op == "(":
            raise self.fail("C-style for (( ... ))", line)
        name = self.peek_word() or ""
        self.i += 1
        words: list[Token] = []
        while self.i < len(self.toks) and self.toks[self.i].op not in ("\n", ";"):
            words.append(self.toks[self.i])
            self.i += 1
        if words and words[0].literal == "in":
            words = words[1:]
        else:
            words = []  # "for x" alone iterates over "$@"
            name = "@" + name
        self.expect("do", line)
        body = self.parse_list({"done"})
        self.expect("done", line)
        return Node("for", line, words=words, body=body, name=name)

    def _case(self, line: int) -> Node:
        self.i += 1
        subject = self.need(line)
        if subject.op is not None:
            raise self.fail("case without a word", line)
        self.i += 1
        self.expect("in", line)
        node = Node("case", line, words=[subject])
        while True:
            self.skip_seps()
            if self.peek_word() == "esac":
                self.i += 1
                return node
            if self.i < len(self.toks) and self.toks[self.i].op == "(":
                self.i += 1
            pats: list[Token] = []
            while self.i < len(self.toks) and self.toks[self.i].op != ")":
                if self.toks[self.i].op is None:
                    pats.append(self.toks[self.i])
                self.i += 1
            self.i += 1
            body = self.parse_list({";;", "esac"})
            if self.i < len(self.toks) and self.toks[self.i].op == ";;":
                self.i += 1
            node.branches.append(([Node("simple", line, words=pats)], body))
            if self.i >= len(self.toks):
                raise self.fail("unclosed case", line)

    def _simple(self, line: int) -> Node:
        node = Node("simple", line)
        while self.i < len(self.toks):
            tok = self.toks[self.i]
            if tok.op is not None:
                if tok.op == "(" and node.words and _ends_with_eq(node.words[-1]):
                    self.i += 1
                    elems: list[Token] = []
                    while self.i < len(self.toks) and self.toks[self.i].op != ")":
                        if self.toks[self.i].op is None:
                            elems.append(self.toks[self.i])
                        self.i += 1
                    self.i += 1
                    node.arrays[len(node.words) - 1] = elems
                    continue
                if tok.op == "(" and len(node.words) == 1 and self.i + 1 < len(self.toks) \
                        and self.toks[self.i + 1].op == ")":
                    self.i += 2
                    return self._func_body(node.words[0].literal or "", line)
                if tok.op in ("(", ")") and node.words[:1] and node.words[0].literal == "[[":
                    node.words.append(Token(tok.start, tok.line, parts=[], op=None, end=tok.end))  # [[ ( a ) ]] grouping
                    self.i += 1
                    continue
                if tok.op == "(" and self._bare_paren(tok):
                    raise self._unquoted_paren(node, tok)
                break
            node.words.append(tok)
            self.i += 1
        return node


    def _bare_paren(self, tok: Token) -> bool:
        """A "(" bash refuses after a command's words: not ``name ()`` (a function), not ``<(`` / ``>(`` (process
        substitution); unknown text is given the benefit of the doubt."""
        if self.i + 1 < len(self.toks) and self.toks[self.i + 1].op == ")":
            return False
        return 0 < tok.start <= len(self.text) and self.text[tok.start - 1] not in "<>"

    def _unquoted_paren(self, node: Node, tok: Token) -> ConfigError:
        """An unquoted ``(`` inside a command (``--moe-layer-freq ([0]*3+[1]*58)``, as Megatron docs print it):
        bash refuses the line, and reading on would silently lose every flag after it."""
        after = node.words[-1].literal or "the previous word"
        inner = []
        for t in self.toks[self.i + 1:]:
            if t.op is not None:
                break
            inner.append(t.literal or "...")
        return ConfigError(
            f"unquoted '(' after {after!r} (line {tok.line}): bash refuses this command (syntax error near "
            "unexpected token '('), so the flags after it would never reach the program; quote the value: "
            f"{after} \"({' '.join(inner)})\"", source=self.source)


def _ends_with_eq(tok: Token) -> bool:
    return bool(tok.parts) and tok.parts[-1].kind == "lit" and tok.parts[-1].text.endswith("=") \
        and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*\+?=", "".join(p.text for p in tok.parts)) is not None
