"""Settings edits in a torchtitan TOML: activation checkpointing and batch sizes, written byte-preservingly.

A proposal prices a remat policy or a batch split; this module says which TOML keys carry it in the file's own
layout (:func:`remat_values`, :func:`micro_batch_values`) and writes them (:func:`apply_settings`): a key the
file has gets only its value's span replaced (quote style kept, the comment after it kept); a key it lacks is
added under its table's last key, or under the table's header, or in a new ``[table]`` at the end of the file
(``tomlscan.insert_key``). The new text is read again with ASAP's reader (``tomllib`` underneath), with the
recorded launch command: it must give the same degrees, every requested value and no other change, or the edit
is refused. A value the recorded command sets (run.yaml ``command:``, :mod:`bot.configs.torchtitan_cli`) wins
over the TOML, so editing the file would change nothing: that is refused naming the flag.

Keys (pytorch/torchtitan, BSD-3-Clause; ``torchtitan/config/job_config.py`` @238fa99, ``config_manager.py``
@9dec370): ``[activation_checkpoint] mode`` (none / selective / full) and ``selective_ac_option`` ("op", or k:
every k-th block) in both layouts; ``[training] local_batch_size`` / ``global_batch_size`` (2025-26; global -1:
local x data-parallel degree) or ``batch_size`` (2024, no global batch); ``[parallelism]
pipeline_parallel_microbatch_size`` (2025-26) or ``[experimental] pipeline_parallel_microbatches`` (2024).
"""

from __future__ import annotations

import json
import re

from bot.configs.common import Splice, apply_splices
from bot.configs.sharding import Scalar, ShardingConfig
from bot.configs.tomlscan import insert_key, load, scan, value_at
from bot.configs.torchtitan import LEGACY, SETTING_TYPES, read
from bot.errors import ConfigError

MODE, OPTION = "activation_checkpoint.mode", "activation_checkpoint.selective_ac_option"
# dotted path -> the layout that alone reads it (True: 2024, False: 2025 - February 2026); others: both
ONLY_IN: dict[str, bool] = {
    "experimental.pipeline_parallel_microbatches": True,
    "experimental.pipeline_parallel_schedule": True, "experimental.enable_async_tensor_parallel": True,
    "float8.enable_float8_linear": True, "training.local_batch_size": False, "training.global_batch_size": False,
    "compile.enable": False, "parallelism.pipeline_parallel_microbatch_size": False,
    "parallelism.pipeline_parallel_schedule": False, "parallelism.expert_tensor_parallel_degree": False,
    "parallelism.enable_async_tensor_parallel": False,
}


# ------------------------------------------------------------------------------------ what a change writes
def remat_values(policy: str) -> dict[str, Scalar]:
    """The TOML values of an ASAP remat policy name in torchtitan's terms (``knowledge.cost_remat``): ``full`` /
    ``none`` set the mode; ``selective_op`` and ``selective_layer_<k>`` set mode selective and the option."""
    if policy in ("full", "none"):
        return {MODE: policy}
    if policy == "selective_op":
        return {MODE: "selective", OPTION: "op"}
    m = re.fullmatch(r"selective_layer_(\d+)", policy)
    if m and int(m.group(1)) >= 1:
        return {MODE: "selective", OPTION: m.group(1)}
    raise ConfigError(f"torchtitan has no activation checkpointing policy {policy!r}", field=MODE,
                      hint="torchtitan's policies: full, selective (option op or k), none")


def async_tp_values(config: ShardingConfig) -> dict[str, Scalar]:
    """The TOML values that turn on torchtitan's async TP in this file's layout, with torch.compile, which
    torchtitan requires for it ("Async TP requires --training.compile", parallelize_llama.py @820504e):
    ``[experimental] enable_async_tensor_parallel`` (2024) or ``[parallelism]`` (2025 - February 2026), and
    ``[training] compile`` unless the file compiles through ``[compile] enable``."""
    legacy = config.vintage == LEGACY
    out: dict[str, Scalar] = {
        "experimental.enable_async_tensor_parallel" if legacy else "parallelism.enable_async_tensor_parallel": True,
    }
    compiled = config.settings.get("training.compile") is True or config.settings.get("compile.enable") is True
    if not compiled:
        out["compile.enable" if "compile.enable" in config.settings else "training.compile"] = True
    return out


def micro_batch_values(config: ShardingConfig, new: int, data_parallel: int) -> dict[str, Scalar] | None:
    """The TOML values that make one micro-batch ``new`` sequences per data-parallel rank at the same global
    batch (``data_parallel``: the run's data-parallel degree), or None when this file cannot say that (2024
    without pipelining: no global batch to hold)."""
    legacy = config.vintage == LEGACY
    pp = next((k.value for k in config.keys if k.key == "pipeline_parallel_degree"), 1)
    spring = not legacy and "training.batch_size" in config.settings and "training.local_batch_size" not in config.settings
    local = config.settings.get("training.batch_size" if legacy or spring else "training.local_batch_size")
    local = local if isinstance(local, int) and not isinstance(local, bool) and local > 0 else 8  # torchtitan's default
    if pp > 1:
        if local % new:
            return None  # torchtitan: the local batch must split into whole micro-batches
        if legacy:
            return {"experimental.pipeline_parallel_microbatches": local // new}
        return {"parallelism.pipeline_parallel_microbatch_size": new}
    if legacy or spring:  # no global batch to hold before gradient accumulation (#1238, June 2025)
        return None
    out: dict[str, Scalar] = {"training.local_batch_size": new}
    stated = config.settings.get("training.global_batch_size")
    if not isinstance(stated, int) or stated <= 0:  # -1 or unset: local x dp, which the new local would change
        out["training.global_batch_size"] = local * data_parallel  # the batch the step ran (torchtitan train.py)
    return out


def set_on_command(config: ShardingConfig, values: dict[str, Scalar]) -> str | None:
    """The recorded launch command's flag (as written) that sets one of ``values``, which wins over the TOML;
    None when the file decides them all."""
    for path in values:
        origin = config.origins.get(path)
        if origin is not None and origin.via:
            return origin.raw
    return None


# ------------------------------------------------------------------------------------------------ writing
def apply_settings(config: ShardingConfig, values: dict[str, object]) -> str:
    """The TOML text with each setting in ``values`` (dotted path, or a key name the layout reads) written;
    ConfigError for a setting the file cannot carry. The result reads back as requested (module docstring)."""
    from bot.configs.torchtitan_json import FUNCTION_SOURCE, is_record
    from bot.configs.torchtitan_json import apply_settings as apply_to_dump

    if is_record(config):
        return apply_to_dump(config, values)
    if config.vintage == FUNCTION_SOURCE:  # Python: assignments in the launched function (torchtitan_py_edit)
        from bot.configs.torchtitan_py_edit import apply_fields, fields_of

        return apply_fields(config, fields_of(config, values))
    wanted = {_path_of(config, name): value for name, value in values.items()}
    new_text = apply_splices(config.text, plan_settings(config, wanted))
    _verify(config, new_text, wanted)
    return new_text


def plan_settings(config: ShardingConfig, values: dict[str, object]) -> list[Splice]:
    """Splices writing ``values`` (dotted paths): in place where the file has the key, else inserted in its table."""
    data = load(config.text, config.source)
    spans = scan(config.text, data)
    splices: list[Splice] = []
    added: dict[tuple[str, ...], list[tuple[str, str]]] = {}
    for dotted, value in values.items():
        _check_editable(config, dotted, value)
        path = tuple(dotted.split("."))
        span = spans.get(path)
        text = toml_text(value, span.raw if span is not None else "")
        if span is not None:
            splices.append(Splice(span.start, span.end, text))
        elif value_at(data, path)[0]:
            raise ConfigError(f"{dotted} is not a one-line value ASAP can locate", source=config.source,
                              field=dotted, hint=f"set {path[-1]} = {text} by hand")
        else:
            added.setdefault(path[:-1], []).append((path[-1], text))
    for table, entries in added.items():
        at, text = insert_key(config.text, spans, table, entries)
        splices.append(Splice(at, at, text))
    return splices


def _path_of(config: ShardingConfig, name: str) -> str:
    """The dotted path of a setting named by path or by key (``local_batch_size``) in this file's layout."""
    if name in SETTING_TYPES:
        return name
    legacy = config.vintage == LEGACY
    found = [p for p in SETTING_TYPES if p.rsplit(".", 1)[-1] == name and ONLY_IN.get(p, legacy) == legacy]
    if len(found) != 1:
        raise ConfigError(f"{config.vintage} has no {name} setting ASAP can write",
                          source=config.source, field=name,
                          hint="settings ASAP writes: " + ", ".join(sorted(p for p in SETTING_TYPES
                                                                          if ONLY_IN.get(p, legacy) == legacy)))
    return found[0]


def _check_editable(config: ShardingConfig, dotted: str, value: object) -> None:
    """Refuse a value the command overrides, a key the file's layout does not read, or a value of the wrong type."""
    origin = config.origins.get(dotted)
    if origin is not None and origin.via:
        raise ConfigError(f"{dotted} is {origin.via}: editing the TOML would change nothing", source=config.source,
                          field=dotted, hint=f"change {origin.raw} on the launch command")
    legacy = config.vintage == LEGACY
    if ONLY_IN.get(dotted, legacy) != legacy:
        raise ConfigError(f"{dotted} is not read by {config.vintage}", source=config.source, field=dotted)
    kinds = SETTING_TYPES[dotted]
    if isinstance(value, bool) != (bool in kinds) or not isinstance(value, kinds):
        raise ConfigError(f"{dotted} cannot be set to {value!r}", source=config.source, field=dotted)


def toml_text(value: object, raw: str) -> str:
    """TOML text for a new value; a string keeps the old value's quote style (``'selective'`` stays single-quoted)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_text(v, raw) for v in value) + "]"
    text = str(value)
    if raw.startswith("'") and not raw.startswith("'''") and not re.search(r"['\n\r]", text):
        return f"'{text}'"
    return json.dumps(text, ensure_ascii=False)  # a JSON string is a TOML basic string


def _verify(config: ShardingConfig, new_text: str, values: dict[str, object]) -> None:
    """The edited file, read as the launch reads it, keeps its degrees and every other setting and gives each
    requested value."""
    again = read(new_text, config.source, config.command)
    if [(k.key, k.value) for k in again.keys] != [(k.key, k.value) for k in config.keys]:
        raise ConfigError("internal error: a settings edit changed the parallel degrees", source=config.source,
                          field="mesh")
    want = {p: ",".join(v) if isinstance(v, list) else v for p, v in values.items()}
    for path in set(again.settings) | set(config.settings) | set(want):
        expect = want[path] if path in want else config.settings.get(path)
        if again.settings.get(path) != expect:
            raise ConfigError(f"internal error: the edited file reads {path} as {again.settings.get(path)!r}, "
                              f"not {expect!r}", source=config.source, field=path)


__all__ = ["apply_settings", "micro_batch_values", "plan_settings", "remat_values", "set_on_command", "toml_text"]
