"""Megatron-DeepSpeed launches: ``pretrain_gpt.py ... --deepspeed --deepspeed_config FILE --zero-stage N``.

DeepSpeed's engine takes the ZeRO stage, offload and precision from the ds_config JSON; Megatron-DeepSpeed's
own ``--zero-stage`` (argparse default 1) is Megatron's copy of it, and the example scripts pass the same
shell variable to both. :func:`with_ds_config` reads the JSON where ASAP can see it:

* a file the flag names, found next to the script (read inside the repository only);
* else a here-document in the script that writes a ds_config (``cat <<EOT > $DS_CONFIG ... EOT``, as the
  Megatron-DeepSpeed examples do), its ``$VAR`` / ``${VAR}`` references filled from the script's variables
  as they stand when the script ends;
* else ``--zero-stage`` alone, saying the JSON was not read. With neither, the stage is unknown (the memory
  band spans the stages; :func:`knowledge.cost_settings.unknown_settings`), never guessed.
"""

from __future__ import annotations

import re
from typing import Any

from bot.configs import deepspeed
from bot.configs.sharding import Scalar, ShardingConfig
from bot.configs.shell import Script
from bot.errors import ConfigError

# ds_config settings that belong to DeepSpeed's engine (Megatron's flags keep the batch sizes and precision)
ENGINE_SETTINGS = ("zero_stage", "offload_optimizer", "offload_param", "zero_hpz_partition_size",
                   "partition_activations", "cpu_checkpointing", "overlap_comm")
_HEREDOC = re.compile(r"<<-?[ \t]*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1[^\n]*\n")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def uses_deepspeed(cfg: ShardingConfig) -> bool:
    st = cfg.settings
    return bool(st.get("deepspeed")) or "deepspeed_config" in st or "zero_stage" in st


def with_ds_config(cfg: ShardingConfig, script: Script, find: Any, read: Any) -> ShardingConfig:
    """``cfg`` (a Megatron launch) with the DeepSpeed engine's settings merged in (module docstring).

    ``find(path_as_written, from_file)`` locates a file inside the repository; ``read(path)`` reads it.
    """
    if not uses_deepspeed(cfg):
        return cfg
    settings: dict[str, Scalar] = dict(cfg.settings)
    notes = list(cfg.reading)
    flag = settings.get("zero_stage")
    flag_stage = int(flag) if isinstance(flag, int) and not isinstance(flag, bool) and flag in deepspeed.STAGES \
        else None
    if flag is not None and flag_stage is None:
        raise ConfigError(f"--zero-stage must be 0, 1, 2 or 3, got {flag!r}", source=cfg.source, field="zero_stage")
    ds, where = _ds_config(cfg, script, find, read, notes)
    files = dict(cfg.files)
    if ds is not None:
        if not where.startswith("a here-document"):
            files[ds.source] = ds.text  # read from disk: a proposal's edit may change it
        for name in ENGINE_SETTINGS:
            if name in ds.settings:
                settings[name] = ds.settings[name]
        notes.extend(f"ds_config ({where}): {n}" for n in ds.reading)
        stage = deepspeed.stage_of(ds)
        if flag_stage is not None and stage is not None and stage != flag_stage:
            notes.append(f"the ds_config ({where}) says ZeRO stage {stage} but --zero-stage is {flag_stage}: "
                         "DeepSpeed's engine uses the ds_config's stage")
    elif flag_stage is not None:
        settings["zero_stage"] = flag_stage
        notes.append(f"ZeRO stage {flag_stage} from --zero-stage (the ds_config was not read; DeepSpeed takes the "
                     "stage from it, and the Megatron-DeepSpeed examples pass the same value to both)")
    else:
        settings["zero_stage"] = None
        notes.append("the DeepSpeed ZeRO stage is not stated where ASAP can read it (no --zero-stage, ds_config not "
                     "read): it is an unknown setting, and the memory band spans stages 0 to 3")
    settings["deepspeed"] = True
    return cfg.model_copy(update={"settings": settings, "reading": notes, "files": files})


def _ds_config(cfg: ShardingConfig, script: Script, find: Any, read: Any,
               notes: list[str]) -> tuple[ShardingConfig | None, str]:
    """The ds_config as DeepSpeed would read it, and where it was found; (None, "") when ASAP cannot see it."""
    path = cfg.settings.get("deepspeed_config")
    if isinstance(path, str) and path:
        found = find(path, cfg.source)
        if found is not None:
            return deepspeed.read_text(read(found), str(found)), str(found)
    for file, text in [(cfg.source, cfg.text), *((f, t) for f, t in script.files.items() if f != cfg.source)]:
        for m in _HEREDOC.finditer(text):
            body, line = _body(text, m), text.count("\n", 0, m.start()) + 1
            if body is None or not any(f'"{k}"' in body for k in deepspeed.DETECT_KEYS):
                continue
            where = f"a here-document at line {line} of {file}"
            filled, missing = (body, set()) if m.group(1) else _fill(body, script.variables)  # 'EOT': no expansion
            if missing:
                notes.append(f"the ds_config written by {where} uses {', '.join(sorted(missing))}, which the script "
                             "does not set: it was not read")
                return None, ""
            try:
                ds = deepspeed.read_text(filled, f"{file} (here-document, line {line})")
            except ConfigError as exc:
                notes.append(f"the ds_config written by {where} cannot be read: {exc.message}")
                return None, ""
            notes.append(f"ds_config read from {where}, its variables at their values when the script ends")
            return ds, where
    if isinstance(path, str) and path:
        notes.append(f"--deepspeed_config {path} was not found and the script writes no ds_config ASAP can see")
    return None, ""


def _body(text: str, m: re.Match[str]) -> str | None:
    """The here-document's lines up to its delimiter line (None when it never closes)."""
    delim = m.group(2)
    start = m.end()
    for line in re.finditer(r"[^\n]*(\n|$)", text[start:]):
        if line.group(0).strip() == delim:
            return text[start:start + line.start()]
        if not line.group(0):
            break
    return None


def _fill(body: str, variables: dict[str, str]) -> tuple[str, set[str]]:
    """``$VAR`` / ``${VAR}`` replaced by the script's values (an unquoted here-document expands them)."""
    missing: set[str] = set()

    def one(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        if name in variables:
            return variables[name]
        missing.add("$" + name)
        return m.group(0)

    return _VAR.sub(one, body), missing
