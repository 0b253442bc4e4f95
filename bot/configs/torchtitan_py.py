"""torchtitan config functions (torchtitan of March 2026 on), read from their Python source without running it.

Since pytorch/torchtitan #2386 (February 2026) a run is configured by a Python function returning ``Trainer.Config``
(``torchtitan/models/<model>/config_registry.py``, ``torchtitan_recipes/<model>.py``) and launched with
``--module <module> --config <function>`` (``run_train.sh``: ``MODULE=llama3 CONFIG=llama3_70b``); the
``--section.key`` flags still win over it (``torchtitan/config/README.md`` @ b5bcd76c, BSD-3-Clause). A pre-flight
answer, or the review of a pull request that edits such a function, has only that source: this module reads it.

The file is parsed with :mod:`ast` and never executed (it is untrusted text: importing it would run it). The function
named by the command's ``--config`` (or ``CONFIG=``; else the file's only ``-> Trainer.Config`` function) is read
statement by statement, as it would build its config:

* ``return Trainer.Config(parallelism=ParallelismConfig(...), training=TrainingConfig(...), ...)``;
* ``config = llama3_70b()`` (another function of the same file, read the same way) and then
  ``config.parallelism.tensor_parallel_degree = 4`` / ``config.compile = CompileConfig(...)``;
* local names (``model_spec = model_registry("70B", converters=[...])``), module constants, and integer arithmetic
  (``8 * 8192``).

Values are taken only from literals; a degree or batch written as anything else (``int(os.environ["TP"])``, a call
ASAP does not know) is an error naming its line, and a statement ASAP does not evaluate (``if`` / ``for``) is named in
the reading. What is read lands in the names torchtitan's JSON record uses (:mod:`bot.configs.torchtitan_json`), so
the cost model reads both alike; the model is ``model_registry``'s flavor of the module's model
(:mod:`bot.configs.torchtitan_models`). A proposal is written as assignments in the launched function
(``config.parallelism.tensor_parallel_degree = 4``), as torchtitan's README says a run is changed
(:mod:`bot.configs.torchtitan_py_edit`).
"""

from __future__ import annotations

import ast
import copy
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from bot.configs import torchtitan_cli
from bot.configs.common import command_words
from bot.configs.jsonspans import JsonDoc
from bot.configs.sharding import ConfigKey, ShardingConfig
from bot.configs.torchtitan import AXIS_OF, KEYS
from bot.configs.torchtitan_json import FUNCTION_SOURCE, settings_of
from bot.errors import ConfigError

MAX_DEPTH = 8  # config functions deriving from one another; deeper is refused (a cycle, or not a config registry)
RETURNS = "Trainer.Config"
# keyword sections of Trainer.Config that ASAP reads, and the config classes that build them
_SECTIONS = {"parallelism", "training", "compile", "activation_checkpoint", "model_spec"}
_AC = {"FullAC": {}, "SelectiveAC": {"force_recompute_mm_shapes_by_fqns": []},
       "MemoryBudgetAC": {"memory_budget": None}}
# quantization converters (torchtitan.components.quantization @ b5bcd76c) -> the TOML era's converter names
_CONVERTERS = {"Float8LinearConverter": "float8", "Float8GroupedExpertsConverter": "float8",
               "MXFP8LinearConverter": "mx", "MXFP8GroupedExpertsConverter": "mx", "NVFP4LinearConverter": "nvfp4"}
# command-line flags torchtitan still takes over the function (``--parallelism.tensor_parallel_degree 8``)
FLAG_KINDS: dict[tuple[str, ...], tuple[type, ...]] = {
    **{("parallelism", k): (int,) for k in KEYS},
    ("parallelism", "num_pp_microbatches"): (int,),
    ("training", "num_tokens_per_microbatch_per_dp_rank"): (int,),
    ("training", "max_context_length"): (int,),
    ("training", "num_tokens_per_train_step"): (int,),
    ("compile", "enable"): (bool,),
}
_INT_FIELDS = {*(f"parallelism.{k}" for k in KEYS), "parallelism.num_pp_microbatches",
               "training.num_tokens_per_microbatch_per_dp_rank", "training.max_context_length",
               "training.num_tokens_per_train_step"}


class _Opaque:
    """A value ASAP does not evaluate (a call it does not know, an attribute of a module): its source text."""

    def __init__(self, text: str) -> None:
        self.text = text


@dataclass
class _Call:
    """A call ASAP reads by name (``ParallelismConfig(...)``, ``model_registry("8B")``): its arguments."""

    name: str
    args: list[Any]
    kwargs: dict[str, Any]
    spans: dict[str, ast.expr] = field(default_factory=dict)


@dataclass
class _Built:
    """A config under construction: the JSON-record-shaped tree, where each value was written, what was skipped."""

    data: dict[str, Any]
    where: dict[str, tuple[str, int, int]]  # dotted -> (function, line, column) of the value's literal
    notes: list[str]


def _builds_config(fn: ast.FunctionDef | None) -> bool:
    """``fn`` is annotated ``-> Trainer.Config``: a config function torchtitan can launch or derive from."""
    return fn is not None and fn.returns is not None and ast.unparse(fn.returns) == RETURNS


def looks_like(text: str, source: str) -> bool:
    """A Python file that builds torchtitan's ``Trainer.Config``."""
    return source.lower().endswith(".py") and RETURNS in text


# (module as imported, the importing file) -> (text, source) of that module inside the repository, or None
Loader = Callable[[str, str], "tuple[str, str] | None"]


def read(text: str, source: str, command: str | None = None, load: Loader | None = None) -> ShardingConfig:
    """The degrees and settings the function the launch names builds (module docstring); ConfigError when the file
    does not parse, names no such function, or writes a degree ASAP cannot evaluate. ``load`` finds a module the
    file imports a base config function from (``from torchtitan.models.llama3.config_registry import llama3_8b``)
    inside the repository; without it such a base is an error naming the import."""
    module = parse_module(text, source)
    try:
        reader = _Reader(text, source, module, load)
        name = chosen_function(reader.functions, command, source)
        built = reader.function(name, 0)
    except RecursionError:  # an expression nested past Python's own limit (1+1+...): not a config anyone wrote
        raise ConfigError("nests expressions too deeply to read", source=source) from None
    given = torchtitan_cli.flags(command, source, FLAG_KINDS.get) if command else {}
    data = _with_defaults(torchtitan_cli.merged(built.data, given), built.notes)
    spec = data.setdefault("model_spec", {})
    spec["name"] = spec.get("name") or reader.model_name()
    doc = JsonDoc(data=data, spans={}, text=text, source=source)
    settings, notes = settings_of(doc, record=False)
    settings.update(_converter_settings(data))
    keys = [_key(name_, data["parallelism"][name_], built.where.get(f"parallelism.{name_}"), given, source)
            for name_ in KEYS if name_ in data.get("parallelism", {})]
    keys.sort(key=lambda k: k.line)
    reading = [f"read as {FUNCTION_SOURCE}: function {name}", *built.notes, *notes, *_dependents(reader, name)]
    reading += torchtitan_cli.notes(given, lambda path: _before(built, path), source)
    if "data_parallel_shard_degree" not in data.get("parallelism", {}):
        reading.append("data_parallel_shard_degree not set: torchtitan's default -1 (the rest of the GPUs) applies")
    return ShardingConfig(format="torchtitan", source=source, text=text, keys=keys, settings=settings,
                          vintage=FUNCTION_SOURCE, reading=reading)


def _dependents(reader: _Reader, name: str) -> list[str]:
    """A note when other config functions of the module derive from the launched one: an edit of it is theirs too."""
    users = sorted(f.name for f in reader.functions.values() if f.name != name and any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == name for n in ast.walk(f)))
    if not users:
        return []
    return [f"{name} is also the base of {len(users)} other config function(s) in this module "
            f"({', '.join(users[:6])}{', ...' if len(users) > 6 else ''}): an edit of it changes them too"]


def review_command(old_text: str, new_text: str, source: str, command: str | None) -> str | None:
    """The launch a review of a change to this module reads both sides with: the linked run's (it names its
    function), else ``--config F`` for the one config function the change touches (a function whose body changed, or
    one that derives from it in the module). ConfigError naming them when the change touches several and no run says
    which one runs."""
    if _named_in_command(command, source) is not None:
        return command
    old_fns, new_fns = _config_functions(old_text, source), _config_functions(new_text, source)
    touched = sorted(n for n in new_fns if old_fns.get(n) != new_fns[n])
    if len(touched) == 1:
        return f"{command or ''} --config {touched[0]}".strip()
    if not touched:
        return command
    raise ConfigError(f"the change touches {len(touched)} config functions ({', '.join(touched[:8])}) and no linked run "
                      "names the one it launches", source=source, field="command",
                      hint="link the run that launches it (its command: names --config <function>), or review one "
                           "function per change")


def _config_functions(text: str, source: str) -> dict[str, str]:
    """Each ``-> Trainer.Config`` function of the module and a fingerprint of its body (``ast.dump``: comments and
    layout do not count)."""
    module = parse_module(text, source)
    return {n.name: ast.dump(n) for n in module.body if isinstance(n, ast.FunctionDef) and _builds_config(n)}


def _with_defaults(data: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """What ``Trainer.Config`` fills in where the function is silent (torchtitan/trainer.py, config/configs.py @
    b5bcd76c): SelectiveAC, and torch.compile's components ``["model", "loss"]``; the JSON record has them written."""
    if "activation_checkpoint" not in data:
        data["activation_checkpoint"] = dict(_AC["SelectiveAC"])
        notes.append("activation_checkpoint not set: Trainer.Config's default SelectiveAC applies")
    comp = data.get("compile")
    if isinstance(comp, dict) and not isinstance(comp.get("components"), list):
        comp["components"] = ["model", "loss"]
    return data


def module_loader(files: Any) -> Loader:
    """A :data:`Loader` over ``files`` (:class:`bot.configs.launch.Files`: reads confined to the repository): a
    dotted module as a ``.py`` file or package ``__init__.py``, relative to the importing file (``from .x import``)
    or searched from its folder up to the repository root (``torchtitan.models.llama3.config_registry``)."""

    def load(written: str, importer: str) -> tuple[str, str] | None:
        level = len(written) - len(written.lstrip("."))
        parts = [p for p in written[level:].split(".") if p]
        if not all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", p) for p in parts):
            return None
        rel = "/".join(parts)
        names = [f"{rel}.py", f"{rel}/__init__.py"] if rel else ["__init__.py"]
        if level:
            folder = PurePath(importer).parent
            for _ in range(level - 1):
                folder = folder.parent
            names = [str(folder / n) for n in names]
        for name in names:
            found = files.find(name, importer)
            if found is not None:
                return files.text(found), str(found)
        return None

    return load


def parse_module(text: str, source: str) -> ast.Module:
    try:
        return ast.parse(text, filename=source)
    except SyntaxError as exc:
        raise ConfigError(f"not valid Python: {exc.msg} (line {exc.lineno})", source=source,
                          hint="the torchtitan config module must parse as Python") from None
    except (ValueError, RecursionError) as exc:
        raise ConfigError(f"cannot be parsed as Python: {exc}", source=source) from None


def chosen_function(functions: dict[str, ast.FunctionDef], command: str | None, source: str) -> str:
    """The config function the launch names (``--config NAME`` / ``CONFIG=NAME``), else the only one returning
    ``Trainer.Config``."""
    named = _named_in_command(command, source)
    builders = [n for n, f in functions.items() if _builds_config(f)]
    if named is not None:
        if named not in functions:
            shown = ", ".join(builders[:12]) or "none"
            raise ConfigError(f"the recorded command names config function {named!r}, which {PurePath(source).name} "
                              f"does not define (its config functions: {shown})", source=source, field="command")
        return named
    if len(builders) == 1:
        return builders[0]
    raise ConfigError(f"{len(builders)} functions return Trainer.Config ({', '.join(builders[:12])}) and the run "
                      "names none of them", source=source, field="command",
                      hint="record the launch in run.yaml command: with --config <function> (torchtitan's own flag)")


def _named_in_command(command: str | None, source: str) -> str | None:
    """``--config NAME`` / ``--config=NAME`` of ``-m torchtitan.train``, or run_train.sh's ``CONFIG=NAME``."""
    if not command:
        return None
    words = command_words(command, source)
    found = None
    for i, word in enumerate(words):
        if word == "--config" and i + 1 < len(words):
            found = words[i + 1]
        elif word.startswith("--config="):
            found = word.split("=", 1)[1]
        elif word.startswith("CONFIG=") and found is None:
            found = word.split("=", 1)[1]
    if found is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", found):
        raise ConfigError(f"--config {found!r} is not a Python function name", source=source, field="command")
    return found


class _Reader:
    """Reads config functions of one module (module docstring): never runs them."""

    def __init__(self, text: str, source: str, module: ast.Module, load: Loader | None = None,
                 readers: dict[str, _Reader] | None = None) -> None:
        self.text, self.source, self.module, self.load = text, source, module, load
        self.readers = readers if readers is not None else {source: self}  # one reader per module file
        self.built: dict[str, _Built] = {}  # config functions already read
        self.functions = {n.name: n for n in module.body if isinstance(n, ast.FunctionDef)}
        # ``from torchtitan.models.llama3.config_registry import llama3_8b``: name -> (module as written, its name)
        self.imported = {(a.asname or a.name): ("." * n.level + (n.module or ""), a.name)
                         for n in module.body if isinstance(n, ast.ImportFrom) for a in n.names}
        # subclasses of Trainer.Config the module defines (``class _KimiTrainerConfig(Trainer.Config)``)
        self.builders = {RETURNS} | {n.name for n in module.body if isinstance(n, ast.ClassDef)
                                     and any(ast.unparse(b) == RETURNS for b in n.bases)}
        self.constants: dict[str, Any] = {}
        for node in module.body:  # module-level NAME = literal (SEQ_LEN = 8192)
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                value = self.value(node.value, {}, node.targets[0].id)
                if isinstance(value, (int, str, bool, float)):
                    self.constants[node.targets[0].id] = value

    def model_name(self) -> str | None:
        """The model whose ``model_registry`` the module uses: ``from torchtitan.models.llama3 import
        model_registry``, or ``from . import model_registry`` inside ``torchtitan/models/llama3/``."""
        for node in self.module.body:
            if isinstance(node, ast.ImportFrom) and any(a.name == "model_registry" for a in node.names):
                if node.level:
                    return PurePath(self.source).parent.name or None
                parts = (node.module or "").split(".")
                return parts[-1] if parts[:2] == ["torchtitan", "models"] and len(parts) >= 3 else None
        return None

    # ---------------------------------------------------------------------------------------------- statements
    def function(self, name: str, depth: int) -> _Built:
        """The config ``name`` builds (read once per module: a function calling its bases many times, or bases
        calling theirs, would otherwise be read exponentially often), a copy the caller may change."""
        if name not in self.built:
            self.built[name] = self._read_function(name, depth)
        return copy.deepcopy(self.built[name])

    def _read_function(self, name: str, depth: int) -> _Built:
        """The config ``name`` builds, read statement by statement."""
        if depth > MAX_DEPTH:
            raise ConfigError(f"config function {name} derives from others more than {MAX_DEPTH} deep (a cycle?)",
                              source=self.source, field=name)
        fn = self.functions[name]
        env: dict[str, Any] = {}
        for stmt in fn.body:
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
                continue  # docstring
            if isinstance(stmt, ast.Return):
                return self._returned(stmt, env, name, depth)
            if isinstance(stmt, ast.ImportFrom):  # a base imported inside the function
                env.setdefault("__imports__", {}).update(
                    {(a.asname or a.name): ("." * stmt.level + (stmt.module or ""), a.name) for a in stmt.names})
                continue
            if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
                self._assign(stmt, env, name, depth)
                continue
            env.setdefault("__notes__", []).append(
                f"{name}, line {stmt.lineno}: a {type(stmt).__name__.lower()} statement ASAP does not evaluate "
                "(the config is read as the assignments before and after it set it)")
        raise ConfigError(f"config function {name} has no return statement ASAP can read", source=self.source,
                          field=name)

    def _base(self, node: ast.expr | None, depth: int, env: dict[str, Any], bound: str | None = None) -> _Built | None:
        """``llama3_8b()``: the config a base function of this module, or one it imports, builds. None when the call
        is not a call of a function annotated ``-> Trainer.Config``; its arguments are not followed: a parameter is an
        unknown value inside it); an import ASAP cannot find inside the repository is remembered, to be named if the
        function then returns what it built."""
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            return None
        name = node.func.id
        if name in self.functions:
            return self.function(name, depth + 1) if _builds_config(self.functions[name]) else None
        imported = {**self.imported, **env.get("__imports__", {})}
        if name not in imported:
            return None
        written, original = imported[name]
        other = self._module(written)
        if other is None:
            if bound is not None:
                env.setdefault("__unresolved__", {})[bound] = f"{written}.{original}"
            return None
        return other.function(original, depth + 1) if _builds_config(other.functions.get(original)) else None

    def _module(self, written: str) -> _Reader | None:
        """The reader of an imported module's file inside the repository (None when ASAP cannot find it there)."""
        found = self.load(written, self.source) if self.load is not None else None
        if found is None:
            return None
        text, source = found
        if source not in self.readers:
            self.readers[source] = _Reader(text, source, parse_module(text, source), self.load, self.readers)
        return self.readers[source]

    def _returned(self, stmt: ast.Return, env: dict[str, Any], fn: str, depth: int) -> _Built:
        value = stmt.value
        built: _Built | None
        if isinstance(value, ast.Name) and isinstance(env.get(value.id), _Built):
            built = env[value.id]
        elif isinstance(value, ast.Call) and ast.unparse(value.func) in self.builders:
            built = self._trainer_config(value, env, fn)
        else:
            built = self._base(value, depth, env)
        if built is None:
            shown = ast.unparse(value) if value is not None else "nothing"
            missing = env.get("__unresolved__", {}).get(value.id) if isinstance(value, ast.Name) else None
            if missing is not None:
                raise ConfigError(f"config function {fn} derives its config from {missing} (line {stmt.lineno}), "
                                  "which ASAP cannot find inside the repository it reads", source=self.source,
                                  field=fn, hint="keep the module (the run's torchtitan checkout) in that repository")
            raise ConfigError(f"config function {fn} returns {shown[:80]} (line {stmt.lineno}), not a "
                              f"{RETURNS} ASAP can read", source=self.source, field=fn)
        built.notes.extend(env.get("__notes__", []))
        return built

    def _assign(self, stmt: ast.Assign | ast.AnnAssign, env: dict[str, Any], fn: str, depth: int) -> None:
        """``name = <value>`` binds a local (a base's config, a Trainer.Config, any value); ``config.x.y = <value>``
        sets a field of a config being built."""
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        if stmt.value is None or len(targets) != 1:
            return
        target, value = targets[0], stmt.value
        if isinstance(target, ast.Name):
            base = self._base(value, depth, env, target.id)
            if base is not None:
                env[target.id] = base
            elif isinstance(value, ast.Call) and ast.unparse(value.func) in self.builders:
                env[target.id] = self._trainer_config(value, env, fn)
            else:
                env[target.id] = self.value(value, env, fn)
            return
        chain = attribute_chain(target)
        if chain and isinstance(env.get(chain[0]), _Built):
            self._set(env[chain[0]], chain[1:], value, env, fn)

    # ---------------------------------------------------------------------------------------------- config tree
    def _trainer_config(self, call: ast.Call, env: dict[str, Any], fn: str) -> _Built:
        built = _Built(data={}, where={}, notes=[])
        for kw in call.keywords:
            if kw.arg in _SECTIONS:
                self._set(built, [kw.arg], kw.value, env, fn)
        return built

    def _set(self, built: _Built, path: list[str], node: ast.expr, env: dict[str, Any], fn: str) -> None:
        """``config.<path> = node``: a section replaced whole, or one field of it."""
        if not path or path[0] not in _SECTIONS:
            return
        section = path[0]
        if len(path) == 1:
            built.data[section] = self._section(section, node, env, fn, built)
            return
        if len(path) != 2 or section in ("activation_checkpoint", "model_spec"):
            return
        holder = built.data.setdefault(section, {})
        if isinstance(holder, dict):
            holder[path[1]] = self._field(f"{section}.{path[1]}", node, env, fn, built)

    def _section(self, section: str, node: ast.expr, env: dict[str, Any], fn: str, built: _Built) -> Any:
        value = self.value(node, env, fn)
        if section == "activation_checkpoint":
            return _activation_checkpoint(value, fn, node, self.source)
        if section == "model_spec":  # the model is the one whose model_registry this module imports
            return {**_model_spec(value), "name": self.model_name()}
        if not isinstance(value, _Call):
            raise ConfigError(f"{section} is {ast.unparse(node)[:80]} (function {fn}, line {node.lineno}), which ASAP "
                              "cannot read without running the file", source=self.source, field=section)
        return {key: self._checked(f"{section}.{key}", v, value.spans[key], fn, built) for key, v in value.kwargs.items()}

    def _field(self, dotted: str, node: ast.expr, env: dict[str, Any], fn: str, built: _Built) -> Any:
        return self._checked(dotted, self.value(node, env, fn), node, fn, built)

    def _checked(self, dotted: str, value: Any, node: ast.expr, fn: str, built: _Built) -> Any:
        """``value`` (written at ``node``) for field ``dotted``, an integer where torchtitan takes one; its place is
        recorded for the reading."""
        if dotted in _INT_FIELDS and (isinstance(value, bool) or not isinstance(value, int)):
            shown = value.text if isinstance(value, _Opaque) else ast.unparse(node)
            raise ConfigError(f"{dotted} is {shown[:80]} (function {fn}, line {node.lineno}): ASAP reads only integer "
                              "literals and arithmetic on them, without running the file", source=self.source,
                              field=dotted, hint=f"write it as a number, or state it on the launch command "
                                                 f"(--{dotted} N), which torchtitan lets win")
        built.where[dotted] = (fn, node.lineno, node.col_offset + 1)
        return value

    # ---------------------------------------------------------------------------------------------- values
    def value(self, node: ast.expr, env: dict[str, Any], fn: str) -> Any:
        """A literal, integer arithmetic, a name bound to one, a call read by name; else an opaque value."""
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, (ast.List, ast.Tuple)):
            return [self.value(e, env, fn) for e in node.elts]
        if isinstance(node, ast.Name):
            if node.id in env:
                return env[node.id]
            if node.id in self.constants:
                return self.constants[node.id]
        if isinstance(node, ast.BinOp):
            return _arith(node.op, self.value(node.left, env, fn), self.value(node.right, env, fn), node)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            inner = self.value(node.operand, env, fn)
            return -inner if isinstance(inner, int) and not isinstance(inner, bool) else _opaque(node)
        if isinstance(node, ast.Call):
            name = ast.unparse(node.func)
            return _Call(name=name, args=[self.value(a, env, fn) for a in node.args],
                         kwargs={k.arg: self.value(k.value, env, fn) for k in node.keywords if k.arg},
                         spans={k.arg: k.value for k in node.keywords if k.arg})
        return _opaque(node)


def _opaque(node: ast.expr) -> _Opaque:
    return _Opaque(ast.unparse(node))


def _arith(op: ast.operator, left: Any, right: Any, node: ast.expr) -> Any:
    ints = all(isinstance(v, int) and not isinstance(v, bool) for v in (left, right))
    if not ints or abs(left) > 2**62 or abs(right) > 2**62:
        return _opaque(node)
    if isinstance(op, ast.Mult):
        return left * right
    if isinstance(op, ast.Add):
        return left + right
    if isinstance(op, ast.Sub):
        return left - right
    if isinstance(op, ast.FloorDiv) and right:
        return left // right
    return _opaque(node)


def attribute_chain(node: ast.expr) -> list[str]:
    """``config.parallelism.tensor_parallel_degree`` -> ["config", "parallelism", "tensor_parallel_degree"]."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return []
    return [node.id, *reversed(parts)]


def _activation_checkpoint(value: Any, fn: str, node: ast.expr, source: str) -> Any:
    """The policy as the JSON record serialises it: null, the base fields (FullAC), per-op SAC, memory budget."""
    if value is None:
        return None
    name = value.name.rsplit(".", 1)[0] if isinstance(value, _Call) else None
    if name in _AC:
        out = dict(_AC[name])
        if name == "MemoryBudgetAC":
            out["memory_budget"] = value.kwargs.get("memory_budget")
        return out
    shown = value.text if isinstance(value, _Opaque) else ast.unparse(node)
    raise ConfigError(f"activation_checkpoint is {shown[:80]} (function {fn}, line {node.lineno}): not one of "
                      "torchtitan's policies (FullAC, SelectiveAC, MemoryBudgetAC, None)", source=source,
                      field="activation_checkpoint", hint="a custom policy: state training.remat in run.yaml")


def _model_spec(value: Any) -> dict[str, Any]:
    """``model_registry("70B", converters=[Float8LinearConverter.Config(...)])`` -> flavor and converters."""
    if not isinstance(value, _Call) or value.name.rsplit(".", 1)[-1] != "model_registry":
        return {}
    out: dict[str, Any] = {}
    flavor = value.args[0] if value.args else value.kwargs.get("flavor")
    if isinstance(flavor, str):
        out["flavor"] = flavor
    converters = value.kwargs.get("converters")
    if isinstance(converters, list):
        out["converters"] = [c for c in converters if isinstance(c, _Call)]
    return out


def _converter_settings(data: dict[str, Any]) -> dict[str, Any]:
    """``model.converters`` (the TOML era's names) and Float8's recipe; Float8LinearConverter's default recipe is
    rowwise since torchtitan moved to config functions (``Float8LinearConverter.Config.recipe_name``)."""
    convs = data.get("model_spec", {}).get("converters") or []
    names = [_CONVERTERS.get(c.name.rsplit(".", 1)[0]) for c in convs]
    out: dict[str, Any] = {}
    if any(names):
        out["model.converters"] = ",".join(n for n in names if n)
    float8 = next((c for c in convs if c.name.rsplit(".", 1)[0] == "Float8LinearConverter"), None)
    if float8 is not None:
        recipe = float8.kwargs.get("recipe_name", "rowwise")
        out["float8.recipe_name"] = recipe if isinstance(recipe, str) else "rowwise"
    return out


def _key(name: str, value: Any, where: tuple[str, int, int] | None, given: dict[tuple[str, ...], Any],
         source: str) -> ConfigKey:
    """A degree and where it was written (edits go through bot.configs.torchtitan_py_edit, not its span)."""
    dotted = f"parallelism.{name}"
    shard = name == "data_parallel_shard_degree"
    if isinstance(value, bool) or not isinstance(value, int) or not (value >= 1 or (shard and value == -1)):
        raise ConfigError(f"must be a positive integer{' or -1 (the rest)' if shard else ''}, got {value!r:.40}",
                          source=source, field=dotted)
    flag = given.get(("parallelism", name))
    if flag is not None:
        via = flag.via.replace("over the TOML", "over the config function")
    elif where is not None:
        via = f"written in config function {where[0]} (Python, line {where[1]})"
    else:
        via = "torchtitan's default"
    line, column = (where[1], where[2]) if where is not None and flag is None else (0, 0)
    return ConfigKey(key=name, path=dotted, group="world", axis=AXIS_OF[name], value=value, raw=str(value),
                     line=line, column=column, start=-1, end=-1, via=via)


def _before(built: _Built, path: tuple[str, ...]) -> str:
    where = built.where.get(".".join(path))
    if where is None:
        return "torchtitan's default (the function does not set it)"
    return f"the value in config function {where[0]} (line {where[1]})"


__all__ = ["FLAG_KINDS", "Loader", "attribute_chain", "chosen_function", "looks_like", "module_loader", "parse_module",
           "read", "review_command"]
