"""Read a launch script the way bash would expand it, without running anything.

Teams launch MaxText and Megatron from shell scripts: ``TP=8`` ... ``--tensor-model-parallel-size ${TP}``,
arrays (``GPT_ARGS=(--num-layers 96 ...)`` ... ``torchrun ... pretrain_gpt.py "${GPT_ARGS[@]}"``),
defaults (``ICI_FSDP=${4:-${ICI_FSDP:-64}}``), ``if [ $AC = full ]`` branches and calls of other scripts
with positional arguments. :func:`read_script` walks the script with a small evaluator over the tokens of
:mod:`bot.configs.shlex_spans`: it records variables and arrays, expands words (field splitting included),
evaluates ``[ ... ]`` tests on known values, runs ``for`` loops over known lists, follows ``source`` and
calls of scripts it can find, and collects every command line that looks like a training launch.

Every expanded character remembers where it was written (file and offset), so a value that is one
literal in the file can later be edited in place (:mod:`bot.configs.launch`). A value that cannot be
known without running something (``$(...)``, an unset positional argument, a variable from the
environment, an ``if`` whose test depends on one) is an *unknown* with the reason, never a guess.
"""

from __future__ import annotations

import ast
import fnmatch
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bot.configs.shell_parse import Node, Parser
from bot.configs.shlex_spans import Part, Scanner, Token
from bot.errors import ConfigError

MAX_DEPTH = 4  # nested script calls / sources / function calls
MAX_LOOP = 64  # items a for-loop body is walked for
MAX_STEPS = 20_000  # statements walked in all (nested loops, calls): beyond this the script is refused


# ------------------------------------------------------------------------------------------------ values
@dataclass(frozen=True)
class Piece:
    """Text and where it was written: ``file`` and offset ``start`` (-1: not a literal in any file)."""

    text: str
    file: str | None
    start: int


@dataclass(frozen=True)
class Val:
    """An expanded word: its pieces, or ``unknown`` saying why its value cannot be known."""

    pieces: tuple[Piece, ...] = ()
    unknown: str | None = None
    assumed: str | None = None  # the value is a default taken because an environment variable is unset

    @property
    def text(self) -> str | None:
        return None if self.unknown else "".join(p.text for p in self.pieces)

    def span(self) -> tuple[str | None, int, int] | None:
        """(file, start, end) when the whole value is one contiguous literal in a file, else None."""
        ps = [p for p in self.pieces if p.text]
        if self.unknown or not ps or ps[0].start < 0:
            return None
        for a, b in zip(ps, ps[1:], strict=False):
            if b.file != a.file or b.start != a.start + len(a.text):
                return None
        return ps[0].file, ps[0].start, ps[-1].start + len(ps[-1].text)

    def slice(self, start: int, end: int | None = None) -> Val:
        """The value's characters [start:end], keeping each one's origin."""
        if self.unknown:
            return self
        out: list[Piece] = []
        pos = 0
        stop = len(self.text or "") if end is None else end
        for p in self.pieces:
            a, b = max(start - pos, 0), min(stop - pos, len(p.text))
            if a < b:
                out.append(Piece(p.text[a:b], p.file, p.start + a if p.start >= 0 else -1))
            pos += len(p.text)
        return Val(tuple(out), None, self.assumed)


HOLE = "\x00?\x00"  # stands where an unknown part sits, so the known text around it keeps its place


def unknown(why: str) -> Val:
    return Val((Piece(HOLE, "?" + why, -1),), why)  # the hole's "file" keeps the reason


def hole_reason(pieces: tuple[Piece, ...]) -> str | None:
    """Why the first unknown part of these pieces is unknown (None when all are known)."""
    return next(((p.file or "?")[1:] for p in pieces if p.text == HOLE or (p.file or "").startswith("?")), None)


def concat(vals: list[Val]) -> Val:
    """Join values; an unknown part makes the whole unknown (its known pieces are kept, e.g. a key name)."""
    pieces = tuple(p for v in vals for p in v.pieces)
    why = next((v.unknown for v in vals if v.unknown), None)
    return Val(pieces, why, next((v.assumed for v in vals if v.assumed), None))


def split_fields(v: Val) -> list[Val]:
    """Field splitting of an unquoted expansion on blanks and newlines, origins kept."""
    known = Val(v.pieces, None, v.assumed)
    text = "".join(p.text for p in v.pieces)
    out = [known.slice(m.start(), m.end()) for m in re.finditer(r"[^ \t\n]+", text)]
    return [Val(f.pieces, hole_reason(f.pieces) or v.unknown) if v.unknown and HOLE in "".join(p.text for p in f.pieces)
            else f for f in out]


# --------------------------------------------------------------------------------------------- the result
@dataclass
class Command:
    """One simple command as bash would run it: its words after expansion, file and line."""

    words: list[Val]
    file: str
    line: int
    env: dict[str, Val] = field(default_factory=dict)
    uncertain: str | None = None  # set when the command sits in a branch ASAP could not decide
    end: int = -1  # offset just past the command's last token in ``file`` (where a new argument goes)


@dataclass
class Script:
    """What a script does that matters: the commands it runs (in order) and the notes of the reading."""

    commands: list[Command] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)  # every file read: path -> text
    variables: dict[str, str] = field(default_factory=dict)  # known variables when the script ends: name -> text


# ---------------------------------------------------------------------------------------------- evaluating
_ASSIGN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(\+?)=")
_PARAM = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#?$!])(?P<index>\[[^\]]*\])?(?P<op>:-|-|:=|=|:\+|\+)?(?P<rest>.*)$", re.S)
_IGNORED = {"echo", "printf", "set", "unset", "cd", "mkdir", "rm", "cp", "mv", "chmod", "ls", "exit", "true", "false",
            "sleep", "wait", "pip", "pip3", "ulimit", "trap", "date", "cat", "tee", "nvidia-smi", "hostname",
            "shopt", "return", "touch", "gsutil", "ln", "pushd", "popd", "read", "kill", "pkill", "which"}


class Evaluator:
    """Walks a parsed script with a variable table; collects commands (see module docstring)."""

    def __init__(self, result: Script, resolve: Callable[[str, str], Path | None]) -> None:
        self.result = result
        self.resolve = resolve
        self.vars: dict[str, Val] = {"PWD": Val((Piece(".", None, -1),))}  # paths relative to the launch folder
        self.arrays: dict[str, list[Val]] = {}
        self.exported_from_env: set[str] = set()
        self.funcs: dict[str, Node] = {}
        self.uncertain: str | None = None
        self.depth = 0
        self.steps = 0
        self._eval_end = -1

    # ---- expansion ----------------------------------------------------------------------------------
    def param(self, body: str, file: str, pos: dict[str, list[Val]]) -> list[Val]:
        """Expand one ``${...}`` body (or ``$NAME``) into fields (arrays give several)."""
        m = _PARAM.match(body)
        if m is None or (m.group("rest") and not m.group("op")):
            return [unknown(f"'${{{body}}}' uses a parameter expansion ASAP does not evaluate")]
        name, index, op, rest = m.group("name"), m.group("index"), m.group("op"), m.group("rest")
        if name in ("@", "*") or index in ("[@]", "[*]"):
            if name in ("@", "*"):
                return list(pos["@"])
            if name in self.arrays:
                return list(self.arrays[name])
            v = self.get(name, pos)
            return [v] if v is not None else []
        if index:
            key = index[1:-1]
            if name in self.arrays and key.isdigit() and int(key) < len(self.arrays[name]):
                return [self.arrays[name][int(key)]]
            if name in self.arrays or key not in ("0",):
                return [unknown(f"'${{{body}}}' (an array element ASAP cannot tell)")]
        if name == "#":
            return [Val((Piece(str(len(pos["@"])), None, -1),))]
        if name in ("?", "$", "!"):
            return [unknown(f"'${name}' is only known while the script runs")]
        value = self.get(name, pos)
        if op is None:
            if value is None:
                return [unknown(self._unset_why(name))]
            return [value]
        is_set = value is not None and (not op.startswith(":") or (value.text or "") != "" or bool(value.unknown))
        if op in (":-", "-", ":=", "="):
            if is_set:
                return [value]  # type: ignore[list-item]
            default = self.expand_text(rest, file, pos, body_offset=None)
            if value is None and not name.isdigit() and default.unknown is None:
                default = Val(default.pieces, None, default.assumed or
                              f"${name} is not set in the script, so its default '{default.text}' is assumed")
            if op in (":=", "="):
                self.vars[name] = default
            return [default]
        return [self.expand_text(rest, file, pos, body_offset=None)] if is_set else [Val(())]

    def _unset_why(self, name: str) -> str:
        if name.isdigit():
            return f"positional argument ${name} is not given to the script (record the full launch command)"
        return f"${name} is not set in the script (it comes from the environment)"

    def get(self, name: str, pos: dict[str, list[Val]]) -> Val | None:
        if name.isdigit():
            n = int(name)
            args = pos["@"]
            if n == 0:
                return Val((Piece("script", None, -1),))
            return args[n - 1] if n <= len(args) else None
        if name in self.arrays:
            return self.arrays[name][0] if self.arrays[name] else Val(())
        return self.vars.get(name)

    def expand_text(self, body: str, file: str, pos: dict[str, list[Val]], body_offset: int | None) -> Val:
        """Expand text found inside ``${X:-...}`` (a default): scan it as a word, then expand without splitting."""
        toks = Scanner(body, file).tokens() if body else []
        if not toks:
            return Val(())
        vals: list[Val] = []
        for tok in toks:
            if tok.op is not None:
                vals.append(Val((Piece(tok.op, None, -1),)))
                continue
            vals.append(self.join(tok, file, pos, offset_known=False))
        return concat(vals)

    def join(self, tok: Token, file: str, pos: dict[str, list[Val]], *, offset_known: bool = True,
             skip: int = 0) -> Val:
        """A word expanded without field splitting (assignments, test operands)."""
        vals: list[Val] = []
        for n, part in enumerate(tok.parts):
            vals.extend(self.expand_part(part, file, pos, offset_known, skip=skip if n == 0 else 0, joined=True))
        return concat(vals)

    def expand_part(self, part: Part, file: str, pos: dict[str, list[Val]], offset_known: bool,
                    *, skip: int = 0, joined: bool = False) -> list[Val]:
        if part.kind == "lit":
            start = part.start if (offset_known and part.start >= 0) else -1
            return [Val((Piece(part.text, file, start),)).slice(skip) if skip else Val((Piece(part.text, file, start),))]
        if part.kind == "param":
            got = self.param(part.text, file, pos)
            return [concat(_interleave(got))] if joined and len(got) > 1 else got
        if part.kind == "arith":
            return [self.arith(part.text, file, pos)]
        return [unknown(f"'$({part.text.strip()[:40]})' is a command ASAP does not run")]

    def arith(self, body: str, file: str, pos: dict[str, list[Val]]) -> Val:
        """``$(( ... ))`` over known integers (+ - * / % and parentheses only)."""
        def sub(m: re.Match[str]) -> str:
            name = m.group(1) or m.group(2) or m.group(3)
            v = self.get(name, pos)
            if v is None or v.unknown or not re.fullmatch(r"-?\d+", (v.text or "").strip()):
                raise ValueError(name)
            return (v.text or "").strip()
        try:
            expr = re.sub(r"\$\{([A-Za-z_0-9]+)\}|\$([A-Za-z_0-9]+)|\b([A-Za-z_][A-Za-z0-9_]*)\b", sub, body)
            return Val((Piece(str(_safe_int_eval(expr)), None, -1),))
        except (ValueError, SyntaxError, ZeroDivisionError) as exc:
            return unknown(f"'$(({body.strip()}))' depends on {exc} which ASAP cannot evaluate")

    def words(self, toks: list[Token], file: str, pos: dict[str, list[Val]]) -> list[Val]:
        """Expand command words: field splitting of unquoted expansions, "$@" and arrays into several words."""
        out: list[Val] = []
        for tok in toks:
            fields: list[list[Val]] = [[]]
            for part in tok.parts:
                got = self.expand_part(part, file, pos, True)
                if part.kind == "lit":
                    fields[-1].extend(got)
                    continue
                pieces: list[Val] = []
                for v in got:
                    pieces.extend(split_fields(v) if not part.quoted else [v])
                if not pieces:
                    continue
                fields[-1].append(pieces[0])
                for extra in pieces[1:]:
                    fields.append([extra])
            for f in fields:
                if f:
                    out.append(concat(f))
        return out

    # ---- statements ---------------------------------------------------------------------------------
    def run(self, nodes: list[Node], file: str, pos: dict[str, list[Val]]) -> None:
        for node in nodes:
            self.run_node(node, file, pos)

    def run_node(self, node: Node, file: str, pos: dict[str, list[Val]]) -> None:
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise ConfigError(f"the script walks more than {MAX_STEPS:,} statements (nested loops or calls): too "
                              "complex to read without running it", source=file)
        if node.kind == "simple":
            self.simple(node, file, pos)
        elif node.kind == "group":
            self.run(node.body, file, pos)
        elif node.kind == "func":
            self.funcs[node.name] = node
        elif node.kind == "if":
            self.if_(node, file, pos)
        elif node.kind == "for":
            self.for_(node, file, pos)
        elif node.kind == "case":
            self.case(node, file, pos)
        elif node.kind == "while":
            self.branches([node.body, []], file, pos, f"a while loop (line {node.line})")

    def if_(self, node: Node, file: str, pos: dict[str, list[Val]]) -> None:
        undecided: list[list[Node]] = []
        for cond, body in node.branches:
            verdict = True if cond is None else self.test(cond, file, pos)
            if verdict is None:
                undecided.append(body)
                continue
            if verdict:
                if not undecided:
                    self.run(body, file, pos)
                    return
                undecided.append(body)
                break
        else:
            undecided.append([])
        if len(undecided) == 1:
            self.run(undecided[0], file, pos)
            return
        self.branches(undecided, file, pos, f"the if at line {node.line}, whose test ASAP cannot decide")

    def branches(self, bodies: list[list[Node]], file: str, pos: dict[str, list[Val]], why: str) -> None:
        """Walk each branch from the same state; keep values they agree on, mark the rest unknown."""
        saved = (dict(self.vars), {k: list(v) for k, v in self.arrays.items()}, self.uncertain)
        outcomes: list[tuple[dict[str, Val], dict[str, list[Val]]]] = []
        for body in bodies:
            self.vars, self.arrays = dict(saved[0]), {k: list(v) for k, v in saved[1].items()}
            self.uncertain = saved[2] or why
            self.run(body, file, pos)
            outcomes.append((self.vars, self.arrays))
        self.uncertain = saved[2]
        self.vars, self.arrays = {}, {}
        for name in {n for o in outcomes for n in o[0]}:
            vals = [o[0].get(name) for o in outcomes]
            texts = {None if v is None else v.text for v in vals}
            first = vals[0]
            if all(v == first for v in vals) and first is not None:
                self.vars[name] = first  # untouched by every branch (or set alike), known or not
            elif len(texts) == 1 and first is not None and all(v is not None and v.unknown is None for v in vals):
                self.vars[name] = first
            elif len(texts) == 1 and first is None:
                continue
            else:
                self.vars[name] = unknown(f"${name} is set differently in the branches of {why}")
        for name in {n for o in outcomes for n in o[1]}:
            arrs = [o[1].get(name) for o in outcomes]
            if all(a is not None and [v.text for v in a] == [v.text for v in arrs[0]] for a in arrs):  # type: ignore[union-attr]
                self.arrays[name] = arrs[0]  # type: ignore[assignment]
            else:
                self.arrays[name] = [unknown(f"${{{name}[@]}} is set differently in the branches of {why}")]

    def for_(self, node: Node, file: str, pos: dict[str, list[Val]]) -> None:
        name = node.name.lstrip("@")
        items = list(pos["@"]) if node.name.startswith("@") else self.words(node.words, file, pos)
        if any(v.unknown for v in items) or len(items) > MAX_LOOP:
            self.branches([node.body, []], file, pos, f"the for loop at line {node.line}")
            return
        for item in items:
            self.vars[name] = item
            self.run(node.body, file, pos)

    def case(self, node: Node, file: str, pos: dict[str, list[Val]]) -> None:
        subject = self.join(node.words[0], file, pos)
        if subject.unknown is None:
            for pats, body in node.branches:
                for pat in (pats or [Node("simple", 0)])[0].words:
                    p = self.join(pat, file, pos)
                    if p.text is not None and fnmatch.fnmatchcase(subject.text or "", p.text):
                        self.run(body, file, pos)
                        return
            return
        self.branches([b for _, b in node.branches] + [[]], file, pos, f"the case at line {node.line}")

    def test(self, cond: list[Node], file: str, pos: dict[str, list[Val]]) -> bool | None:
        """Evaluate ``[ ... ]`` / ``[[ ... ]]`` / ``test`` conditions joined by && (True/False/None=unknown)."""
        result: bool | None = True
        for node in cond:
            if node.kind != "simple":
                return None
            words = [self.join(t, file, pos) for t in node.words]
            texts = [w.text for w in words]
            while texts and texts[0] in ("[", "[[", "test"):
                texts = texts[1:]
            while texts and texts[-1] in ("]", "]]"):
                texts = texts[:-1]
            negate = bool(texts) and texts[0] == "!"
            if negate:
                texts = texts[1:]
            one = _test(texts)
            if one is None:
                return None
            result = result and (not one if negate else one)
        return result

    def simple(self, node: Node, file: str, pos: dict[str, list[Val]]) -> None:
        toks = node.words
        env: dict[str, Val] = {}
        i = 0
        while i < len(toks) and _assignment(toks[i]):
            self.assign(toks[i], node.arrays.get(i), file, pos, env if i + 1 < len(toks) and
                        not _all_assignments(toks[i + 1:]) else None)
            i += 1
        if i == len(toks):
            return
        head = toks[i].literal
        if head in ("export", "declare", "local", "readonly", "typeset"):
            for j in range(i + 1, len(toks)):
                if _assignment(toks[j]):
                    self.assign(toks[j], node.arrays.get(j), file, pos, None)
                elif head == "export" and toks[j].literal and toks[j].literal in self.vars:
                    continue
            return
        if head == "shift":
            n = int(toks[i + 1].literal or "1") if i + 1 < len(toks) and (toks[i + 1].literal or "").isdigit() else 1
            pos["@"] = pos["@"][n:]
            return
        words = self.words(toks[i:], file, pos)
        if not words:
            return
        name = words[0].text
        if name in self.funcs and self.depth < MAX_DEPTH:
            self.depth += 1
            self.run(self.funcs[name].body, file, {"@": words[1:]})
            self.depth -= 1
            return
        if name in ("source", "."):
            self.source(words, file, pos, node.line)
            return
        if name == "eval":
            self._eval_end = toks[-1].end
            self.eval_(words[1:], file, pos, node.line)
            return
        if name in _IGNORED:
            return
        if self.call_script(words, file, node.line):
            return
        self.result.commands.append(Command(words, file, node.line, env, self.uncertain, toks[-1].end))

    def assign(self, tok: Token, elems: list[Token] | None, file: str, pos: dict[str, list[Val]],
               env: dict[str, Val] | None) -> None:
        text0 = tok.parts[0].text
        m = _ASSIGN.match(text0)
        assert m is not None
        name, append = m.group(1), m.group(2) == "+"
        if elems is not None:
            vals = self.words(elems, file, pos)
            self.arrays[name] = (self.arrays.get(name, []) if append else []) + vals
            self.vars.pop(name, None)
            return
        value = self.join(tok, file, pos, skip=m.end())
        if append and name in self.vars:
            value = concat([self.vars[name], value])
        if env is not None:
            env[name] = value
            return
        if self.uncertain and value.unknown is None:
            pass  # merged by branches()
        self.arrays.pop(name, None)
        self.vars[name] = value

    def eval_(self, words: list[Val], file: str, pos: dict[str, list[Val]], line: int) -> None:
        """``eval "$cmd"``: the joined words are read as script text; their characters keep their origins."""
        joined = concat(_interleave(words))
        text = "".join(p.text for p in joined.pieces)
        origin: list[tuple[str | None, int]] = []
        for p in joined.pieces:
            origin.extend((p.file, p.start + k if p.start >= 0 else -1) for k in range(len(p.text)))
        virtual = f"eval@{file}:{line}"
        before = len(self.result.commands)
        nodes = Parser(Scanner(text, virtual).tokens(), virtual, text).parse_list(set())
        self.run(nodes, virtual, pos)
        end = self._eval_end
        for cmd in self.result.commands[before:]:
            cmd.end = end
            cmd.words = [remap(w, virtual, origin) for w in cmd.words]
            cmd.words = [Val(w.pieces, hole_reason(w.pieces) or w.unknown or joined.unknown or "unknown")
                         if HOLE in "".join(p.text for p in w.pieces) or w.unknown else w for w in cmd.words]
            cmd.file, cmd.line = file, line

    def source(self, words: list[Val], file: str, pos: dict[str, list[Val]], line: int) -> None:
        target = words[1].text if len(words) > 1 else None
        path = self.resolve(target, file) if target else None
        if path is None or self.depth >= MAX_DEPTH:
            self.result.notes.append(f"{Path(file).name}:{line} sources {target or 'a file'}, which ASAP could not find: "
                                     "values it sets are unknown")
            return
        self._run_file(path, pos if len(words) <= 2 else {"@": words[2:]})

    def call_script(self, words: list[Val], file: str, line: int) -> bool:
        """``bash x.sh args`` / ``./x.sh args``: walk the called script (with its positional arguments)."""
        idx = 1 if words[0].text in ("bash", "sh", "source") else 0
        if idx >= len(words):
            return False
        target = words[idx].text
        if not target or not target.endswith(".sh"):
            return False
        path = self.resolve(target, file)
        if path is None or self.depth >= MAX_DEPTH:
            self.result.notes.append(f"{Path(file).name}:{line} runs {target}, which ASAP could not find (not read)")
            return True
        saved = (self.vars, self.arrays, self.funcs)
        self.vars = {k: v for k, v in self.vars.items()}  # exported or not, a child sees the same values here
        self.arrays, self.funcs = {}, {}
        self._run_file(path, {"@": words[idx + 1:]})
        self.vars, self.arrays, self.funcs = saved
        return True

    def _run_file(self, path: Path, pos: dict[str, list[Val]]) -> None:
        key = str(path)
        text = self.result.files.get(key)
        if text is None:
            text = read_text(path)
            self.result.files[key] = text
        nodes = Parser(Scanner(text, key).tokens(), key, text).parse_list(set())
        self.depth += 1
        self.run(nodes, key, pos)
        self.depth -= 1


def remap(v: Val, virtual: str, origin: list[tuple[str | None, int]]) -> Val:
    """Pieces that point into ``virtual`` (an eval'd string, a script written inside another file) point back to
    where each character was written (``origin[i]``: file and offset of the string's character i, -1: nowhere)."""
    out: list[Piece] = []
    for p in v.pieces:
        if p.file != virtual or p.start < 0:
            out.append(p)
            continue
        for k, ch in enumerate(p.text):
            f, at = origin[p.start + k] if p.start + k < len(origin) else (None, -1)
            prev = out[-1] if out else None
            if prev is not None and prev.file == f and at >= 0 and prev.start >= 0 and prev.start + len(prev.text) == at:
                out[-1] = Piece(prev.text + ch, f, prev.start)
            else:
                out.append(Piece(ch, f, at))
    return Val(tuple(out), v.unknown or hole_reason(tuple(out)), v.assumed)


def _interleave(vals: list[Val]) -> list[Val]:
    out: list[Val] = []
    for i, v in enumerate(vals):
        if i:
            out.append(Val((Piece(" ", None, -1),)))
        out.append(v)
    return out


def _assignment(tok: Token) -> bool:
    return bool(tok.parts) and tok.parts[0].kind == "lit" and not tok.parts[0].quoted \
        and _ASSIGN.match(tok.parts[0].text) is not None


def _all_assignments(toks: list[Token]) -> bool:
    return all(_assignment(t) for t in toks)


def _test(t: list[str | None]) -> bool | None:
    if any(x is None for x in t):
        return None
    w = [x or "" for x in t]
    if len(w) == 1:
        return w[0] != ""
    if len(w) == 2 and w[0] in ("-n", "-z"):
        return (w[1] != "") if w[0] == "-n" else (w[1] == "")
    if len(w) == 2 and w[0] in ("-f", "-d", "-e", "-x", "-r", "-s"):
        return None  # file tests depend on the machine
    if len(w) == 3:
        a, op, b = w
        if op in ("=", "=="):
            return fnmatch.fnmatchcase(a, b)
        if op == "!=":
            return not fnmatch.fnmatchcase(a, b)
        ints = {"-eq": operator.eq, "-ne": operator.ne, "-gt": operator.gt, "-lt": operator.lt,
                "-ge": operator.ge, "-le": operator.le}
        if op in ints:
            try:
                return ints[op](int(a), int(b))
            except ValueError:
                return None
    return None


def _safe_int_eval(expr: str) -> int:
    """Integer arithmetic over literals: + - * / % ** and parentheses (bash semantics: / truncates)."""
    tree = ast.parse(expr.strip(), mode="eval")

    def ev(n: ast.AST) -> int:
        if isinstance(n, ast.Expression):
            return ev(n.body)
        if isinstance(n, ast.Constant) and isinstance(n.value, int) and not isinstance(n.value, bool):
            return n.value
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
            return -ev(n.operand)
        if isinstance(n, ast.BinOp):
            a, b = ev(n.left), ev(n.right)
            if isinstance(n.op, ast.Add):
                return a + b
            if isinstance(n.op, ast.Sub):
                return a - b
            if isinstance(n.op, ast.Mult):
                return a * b
            if isinstance(n.op, ast.Div | ast.FloorDiv):
                return int(a / b)
            if isinstance(n.op, ast.Mod):
                return a % b
        raise ValueError("an operator")

    return ev(tree)


def read_text(path: Path) -> str:
    from bot.configs.detect import read_config_text

    return read_config_text(path)


def read_script(text: str, source: str, *, args: list[str] | None = None,
                resolve: Callable[[str, str], Path | None] | None = None,
                files: dict[str, str] | None = None) -> Script:
    """Walk a script's text (``source`` names it) with positional ``args``; see the module docstring.

    ``resolve(path_as_written, from_file)`` finds scripts it calls or sources (None: not found).
    """
    result = Script(files={source: text, **(files or {})})
    ev = Evaluator(result, resolve or (lambda _p, _f: None))
    nodes = Parser(Scanner(text, source).tokens(), source, text).parse_list(set())
    pos = {"@": [Val((Piece(a, None, -1),)) for a in (args or [])]}
    ev.run(nodes, source, pos)
    result.variables = {k: v.text for k, v in ev.vars.items() if v.text is not None}
    return result
