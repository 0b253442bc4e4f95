"""Edits of a torchtitan config function's Python source: the assignments torchtitan's README says to make.

torchtitan of March 2026 on is changed by editing the function a run names (``--config llama3_70b``):
``config.parallelism.tensor_parallel_degree = 4`` before its ``return config`` (torchtitan/config/README.md @ b5bcd76c,
"change the configuration directly"). A proposal is written that way, in the launched function only:

* a field the function already assigns at its top level (``config.parallelism.tensor_parallel_degree = 2``) gets its
  value replaced in place;
* any other field is a new ``config.<section>.<field> = <value>`` line before the function's final ``return``; a
  function that returns ``Trainer.Config(...)`` (or a base function's call) directly binds it first
  (``config = Trainer.Config(...)``) and returns the name after the new lines;
* an activation-checkpointing policy is a class (``config.activation_checkpoint = FullAC.Config()``): its import from
  ``torchtitan.distributed.activation_checkpoint`` is added after the module's imports when the module lacks it.

Base functions and other functions of the module are never touched (another run may launch them). A field the launch
command sets (``--parallelism.tensor_parallel_degree 2`` wins over the function) is refused, naming the flag. The edited
text is read again (:mod:`bot.configs.torchtitan_py`) and must give what was asked, or the edit is refused.
"""

from __future__ import annotations

import ast
from typing import Any

from bot.configs import torchtitan_cli
from bot.configs.common import Splice, apply_splices
from bot.configs.sharding import ShardingConfig
from bot.errors import ConfigError

AC_MODULE = "torchtitan.distributed.activation_checkpoint"
# activation_checkpoint.mode (the TOML era's name a remat proposal writes) -> the policy class torchtitan has
AC_CLASS = {"full": "FullAC", "selective": "SelectiveAC", "memory_budget": "MemoryBudgetAC", "none": None}


def plan_fields(config: ShardingConfig, fields: dict[str, object]) -> list[Splice]:
    """Splices writing ``fields`` (the function's own dotted names: ``parallelism.tensor_parallel_degree``,
    ``training.num_tokens_per_train_step``, ``activation_checkpoint`` = a class name or None) in the launched
    function; ConfigError for one the launch command sets, or a function ASAP cannot extend."""
    from bot.configs.torchtitan_py import FLAG_KINDS, chosen_function, parse_module

    given = torchtitan_cli.flags(config.command, config.source, FLAG_KINDS.get) if config.command else {}
    for dotted in fields:
        flag = given.get(tuple(dotted.split(".")))
        if flag is not None:
            raise ConfigError(f"{dotted} is set by the recorded launch command ({flag.written}), which wins over the "
                              "config function: writing it there would change nothing", source=config.source,
                              field=dotted, hint=f"change {flag.name} on the launch command")
    module = parse_module(config.text, config.source)
    functions = {n.name: n for n in module.body if isinstance(n, ast.FunctionDef)}
    fn = functions[chosen_function(functions, config.command, config.source)]
    doc = _Text(config.text)
    last = fn.body[-1]
    if not isinstance(last, ast.Return) or last.value is None:
        raise ConfigError(f"config function {fn.name} does not end with a return ASAP can extend", source=config.source,
                          field=fn.name, hint="make the assignments by hand before it returns")
    var = last.value.id if isinstance(last.value, ast.Name) else _free_name(fn)
    splices, lines = _in_place(fn, var, fields, doc)
    indent = " " * last.col_offset
    if lines:
        text = "".join(f"{indent}{var}.{dotted} = {value}\n" for dotted, value in lines.items())
        if isinstance(last.value, ast.Name):
            splices.append(Splice(doc.line_start(last.lineno), doc.line_start(last.lineno), text))
        else:  # return Trainer.Config(...): bind it, assign, return the name
            start, value_start = doc.offset(last.lineno, last.col_offset), doc.offset(last.value.lineno,
                                                                                      last.value.col_offset)
            end = doc.offset(last.end_lineno or last.lineno, last.end_col_offset or 0)
            splices.append(Splice(start, value_start, f"{var} = "))
            splices.append(Splice(end, end, f"\n{text}{indent}return {var}"))
    splices += _imports(module, fn, fields, doc)
    return splices


def apply_fields(config: ShardingConfig, fields: dict[str, object]) -> str:
    """The module text with ``fields`` written (:func:`plan_fields`), verified by reading it again."""
    text = apply_splices(config.text, plan_fields(config, fields))
    _verify(config, text, fields)
    return text


def _free_name(fn: ast.FunctionDef) -> str:
    """``config``, unless the function already binds that name to something else."""
    bound = {t.id for n in ast.walk(fn) if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    return "config" if "config" not in bound else "asap_config"


def _in_place(fn: ast.FunctionDef, var: str, fields: dict[str, object], doc: _Text) -> tuple[list[Splice], dict[str, str]]:
    """Splices replacing the values of top-level ``var.<field> = ...`` the function already has (the last one of
    each wins, as Python runs them), and the rest as source lines still to add."""
    from bot.configs.torchtitan_py import attribute_chain

    last_at: dict[str, ast.Assign] = {}
    for stmt in fn.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            chain = attribute_chain(stmt.targets[0])
            if chain and chain[0] == var:
                last_at[".".join(chain[1:])] = stmt
    splices: list[Splice] = []
    lines: dict[str, str] = {}
    for dotted, value in fields.items():
        written = _literal(dotted, value)
        stmt = last_at.get(dotted)
        if stmt is None:
            lines[dotted] = written
            continue
        v = stmt.value
        splices.append(Splice(doc.offset(v.lineno, v.col_offset),
                              doc.offset(v.end_lineno or v.lineno, v.end_col_offset or 0), written))
    return splices, lines


def _literal(dotted: str, value: object) -> str:
    if dotted == "activation_checkpoint":
        return "None" if value is None else f"{value}.Config()"
    if isinstance(value, (bool, int, str)):
        return repr(value)
    raise ConfigError(f"internal error: no Python literal for {dotted} = {value!r:.40}", field=dotted)


def _imports(module: ast.Module, fn: ast.FunctionDef, fields: dict[str, object], doc: _Text) -> list[Splice]:
    """``from torchtitan.distributed.activation_checkpoint import X`` after the module's last top-level import, for
    a policy class the module does not bind."""
    cls = fields.get("activation_checkpoint")
    if not isinstance(cls, str):
        return []
    bound = {a.asname or a.name.split(".")[0] for n in ast.walk(module) if isinstance(n, (ast.Import, ast.ImportFrom))
             for a in n.names} | {n.name for n in module.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    if cls in bound:
        return []
    imports = [n for n in module.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    at = doc.line_start((imports[-1].end_lineno or imports[-1].lineno) + 1) if imports else 0
    return [Splice(at, at, f"from {AC_MODULE} import {cls}\n")]


def _verify(config: ShardingConfig, text: str, fields: dict[str, object]) -> None:
    """Read the edited module again: each field must read back as written (else the edit is refused)."""
    from bot.configs.edit import reparse

    again = reparse(config, {config.source: text})
    want = {f"parallelism.{k.key}": k.value for k in again.keys}
    for dotted, value in fields.items():
        if dotted.startswith("parallelism.") and dotted.endswith("_degree") and want.get(dotted, value) != value:
            raise ConfigError(f"internal error: the edited function reads {dotted} = {want.get(dotted)}, not {value}",
                              source=config.source, field=dotted)


class _Text:
    """Offsets into the module text from ``ast`` positions (1-based lines, UTF-8 byte columns)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts = [0]
        for line in text.splitlines(keepends=True):
            self.starts.append(self.starts[-1] + len(line))

    def line_start(self, lineno: int) -> int:
        return self.starts[min(lineno - 1, len(self.starts) - 1)]

    def offset(self, lineno: int, col_bytes: int) -> int:
        start = self.line_start(lineno)
        line = self.text[start:self.starts[min(lineno, len(self.starts) - 1)]]
        return start + len(line.encode("utf-8")[:col_bytes].decode("utf-8", errors="ignore"))


def fields_of(config: ShardingConfig, values: dict[str, Any]) -> dict[str, object]:
    """A proposal's settings (the TOML era's names) as the function's own fields: a batch in token slots, async TP
    under compile, a remat mode as its policy class (per-op selective only: torchtitan of 2026 has no other)."""
    from bot.configs.torchtitan_json import function_fields

    out: dict[str, object] = {}
    rest: dict[str, object] = {}
    for name, value in values.items():
        if name == "activation_checkpoint.mode":
            mode = str(value)
            if mode not in AC_CLASS:
                raise ConfigError(f"activation_checkpoint mode {mode!r} is not one of torchtitan's policies",
                                  source=config.source, field=name)
            out["activation_checkpoint"] = AC_CLASS[mode]
        elif name != "activation_checkpoint.selective_ac_option":
            rest[name] = value
    st = config.settings
    seq, local, micro = (st.get(k) for k in ("training.seq_len", "training.local_batch_size",
                                              "parallelism.pipeline_parallel_microbatch_size"))
    pp = next((k.value for k in config.keys if k.key == "pipeline_parallel_degree"), 1)
    pp_mb = local // micro if isinstance(local, int) and isinstance(micro, int) and micro else 1
    mapped, named = function_fields(rest, seq if isinstance(seq, int) else 0, pp, pp_mb)
    return {**mapped, **named, **out}
