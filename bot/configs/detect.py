"""Read a sharding config file and recognise its format from the keys it holds.

Public API::

    load_config(path: Path) -> ShardingConfig
    parse_config(text: str, source: str = "<config>") -> ShardingConfig

Formats (``docs/config-formats.md``): ``maxtext`` (``ici_*_parallelism`` / ``dcn_*_parallelism``),
``ici_mesh`` (``ici_mesh:`` / ``dcn_mesh:`` mappings), ``megatron`` (``tensor_model_parallel_size``
and friends, top level or nested) and ``torchtitan`` (a TOML file: a ``.toml`` name, or a first line opening
a table such as ``[training]``; :mod:`bot.configs.torchtitan`; or, for torchtitan of March 2026 on, the JSON record
of its config function, :mod:`bot.configs.torchtitan_json`, or the function's Python source, read without running it,
:mod:`bot.configs.torchtitan_py`); a Kubernetes manifest (``apiVersion`` + ``kind``) is read
through its training container's command (:mod:`bot.configs.k8s`). Every problem is a :class:`ConfigError`: unreadable or non-UTF-8
files, files over 1 MiB, malformed YAML (with line and column), no known keys (listing the expected
ones), keys of two formats at once, duplicate keys, and sizes that are not integers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from yaml.nodes import MappingNode

from bot.configs import maxtext, megatron, plainmesh
from bot.configs.accelerate_hint import accelerate_hint
from bot.configs.common import args_after
from bot.configs.sharding import Format, ShardingConfig
from bot.configs.yamlscan import MAX_CONFIG_BYTES, compose, walk
from bot.errors import ConfigError

FORMAT_KEYS: dict[Format, tuple[str, ...]] = {
    "maxtext": maxtext.DETECT_KEYS,
    "ici_mesh": plainmesh.KEYS,
    "megatron": megatron.KEYS,
}
_READERS = {"maxtext": maxtext.read, "ici_mesh": plainmesh.read, "megatron": megatron.read}


def expected_keys() -> str:
    """A short list of the keys that identify each format, for error messages."""
    return (
        "MaxText: ici_<axis>_parallelism / dcn_<axis>_parallelism (e.g. ici_fsdp_parallelism); "
        "plain mesh: ici_mesh / dcn_mesh; "
        "Megatron: tensor_model_parallel_size, pipeline_model_parallel_size, context_parallel_size, "
        "expert_model_parallel_size; torchtitan: a .toml file with [parallelism] (or [training]) degrees, the "
        "JSON record a run writes (debug.save_config_file), or the Python module of its config function"
    )


def is_toml(text: str, source: str) -> bool:
    """A torchtitan TOML file: a ``.toml`` name, or a first line opening a table and torchtitan's keys."""
    from bot.configs import torchtitan

    return source.lower().endswith(".toml") or torchtitan.looks_like(text)


def is_script(text: str, source: str) -> bool:
    """A launch script rather than YAML: a ``.sh``/``.bash`` name or a ``#!`` first line."""
    return source.lower().endswith((".sh", ".bash")) or text.lstrip("\ufeff").startswith("#!")


def parse_config(text: str, source: str = "<config>", *, path: Path | None = None, command: str | None = None,
                 overlay: dict[str, str] | None = None, root: Path | None = None) -> ShardingConfig:
    """Parse config ``text`` (``source`` names it in messages), detecting its format from its keys.

    ``text`` may be YAML (MaxText keys and ``base_config`` chains, ``ici_mesh``, Megatron/NeMo keys,
    Megatron flag-style YAML, NeMo 2 dotted keys) or a launch script (``.sh`` or ``#!``). ``path`` lets
    ASAP find ``base_config`` files and scripts the launch calls; ``command`` is the launch command line
    (run.yaml ``command:``): its ``key=value`` overrides or flags win over the files, or, for a script, it
    gives the script's positional arguments. ``overlay`` (path -> text) is read instead of the disk. Other
    files are read only inside ``root`` (default: the config's git repository, else its folder).
    """
    cfg = _parse(text, source, path, command, overlay, root)
    return cfg.model_copy(update={"command": command, "has_path": path is not None,
                                  "root": str(root) if root is not None else None})


def _parse(text: str, source: str, path: Path | None, command: str | None, overlay: dict[str, str] | None,
           root: Path | None) -> ShardingConfig:
    from bot.configs import launch

    if not isinstance(text, str):
        raise ConfigError(f"expected config text, got {type(text).__name__}", source=source)
    files = launch.Files(Path(path) if path is not None else None, dict(overlay or {}), root)
    from bot.configs import deepspeed

    if deepspeed.is_json(text, source):  # DeepSpeed ds_config.json (a run.yaml command does not change it)
        from bot.configs import torchtitan_json

        dump = torchtitan_json.parse(text, source)  # or torchtitan's JSON record of its Trainer.Config
        return dump if dump is not None else deepspeed.read_text(text, source)
    from bot.configs import torchtitan_py

    if torchtitan_py.looks_like(text, source):  # a torchtitan config function (2026 on): read, never run
        return torchtitan_py.read(text, source, command, torchtitan_py.module_loader(files))
    if source.lower().endswith(".py"):
        raise ConfigError(_python_hint(text), source=source, field="config",
                          hint="point config: at the file the job reads its settings from (YAML, TOML, a launch script, "
                               "or the resolved config the framework writes)")
    if is_script(text, source):
        return launch.script_config(text, source, files, args_after(command, source), command)
    if is_toml(text, source):
        from bot.configs import torchtitan

        return torchtitan.read(text, source, command)
    from bot.configs import k8s

    if k8s.looks_like(text):  # a Kubernetes manifest (GKE JobSet, Kubeflow PyTorchJob, Job): its container's command
        return k8s.manifest_config(text, source, files)
    root = compose(text, source)
    if root is None:
        raise ConfigError(f"the file is empty; expected a YAML mapping with one of: {expected_keys()}", source=source)
    if not isinstance(root, MappingNode):
        kind = "a list" if root.id == "sequence" else "a single value"
        raise ConfigError(
            f"expected a YAML mapping (key: value lines) at the top level, got {kind} (line {root.start_mark.line + 1})",
            source=source,
        )
    from bot.configs import llmfoundry

    if llmfoundry.looks_like(root):  # an llm-foundry (Composer) train YAML: fsdp_config and its batch keys
        return llmfoundry.read(root, text, source, command)  # type: ignore[arg-type]
    fmt = _detect(root, source)
    if fmt == "maxtext":
        return launch.yaml_maxtext(text, source, root, files, command)
    cfg = _READERS[fmt](root, text, source)
    if fmt == "megatron" and command:
        from bot.configs.megatron_launch import with_megatron_command

        cfg = with_megatron_command(cfg, command)
    if fmt == "megatron":
        from bot.configs.precision_recipe import with_precision_recipe

        cfg = with_precision_recipe(cfg, files.find, files.text)
    return cfg


def _python_hint(text: str) -> str:
    """What ASAP reads of a Python config: torchtitan's config functions only; a Megatron-Bridge recipe is read from
    the ``run_config.yaml`` Megatron-Bridge writes with each checkpoint (the resolved ConfigContainer)."""
    if "ConfigContainer" in text:
        return ("a Megatron-Bridge recipe (Python building a ConfigContainer) is not read from its source: use the "
                "run_config.yaml Megatron-Bridge writes with each checkpoint, or a YAML of the recipe's overrides")
    return ("a Python file is read only as a torchtitan config function (one returning Trainer.Config); this one "
            "builds none")


def _detect(root: MappingNode, source: str) -> Format:
    hits = {fmt: next(iter(walk(root, names, normalize=fmt == "megatron")), None) for fmt, names in FORMAT_KEYS.items()}
    present = {fmt: hit for fmt, hit in hits.items() if hit is not None}
    if not present:
        accelerate = accelerate_hint(root)
        if accelerate is not None:
            raise ConfigError(accelerate[0], source=source, hint=accelerate[1])
        from bot.configs.llmfoundry import mcli_hint

        mcli = mcli_hint(root)
        if mcli is not None:
            raise ConfigError(mcli[0], source=source, hint=mcli[1])
        raise ConfigError(f"no sharding keys found; expected one of: {expected_keys()}", source=source,
                          hint="for a launch script, give ASAP the .sh file (or a name ending in .sh)")
    if len(present) > 1:
        which = "; ".join(f"{fmt} ({hit.dotted}, line {hit.line})" for fmt, hit in present.items())
        raise ConfigError(
            f"the file mixes sharding formats: {which}",
            source=source,
            hint="keep the keys of one format; ASAP cannot tell which one the training job reads",
        )
    return next(iter(present))


def read_config_text(path: Path) -> str:
    """A config or launch script's text: UTF-8 up to 1 MiB, line endings kept exactly as on disk."""
    path = Path(path)
    source = str(path)
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise ConfigError("config file not found", source=source) from None
    except OSError as exc:
        raise ConfigError(f"cannot read the config file: {exc.strerror or exc}", source=source) from None
    if path.is_dir():
        raise ConfigError("is a directory; expected a YAML config file or a launch script", source=source)
    if size > MAX_CONFIG_BYTES:
        raise ConfigError(
            f"config is {size:,} bytes; sharding configs larger than {MAX_CONFIG_BYTES:,} bytes (1 MiB) are refused",
            source=source,
            hint="point ASAP at the YAML file holding the parallelism settings, not a log or checkpoint",
        )
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read the config file: {exc.strerror or exc}", source=source) from None
    if len(data) > MAX_CONFIG_BYTES:  # grew between stat and read
        raise ConfigError(f"config is larger than {MAX_CONFIG_BYTES:,} bytes (1 MiB); refused", source=source)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ConfigError(
            f"not UTF-8 text: byte 0x{data[exc.start]:02x} at offset {exc.start} (line {line}) cannot be decoded",
            source=source,
            hint="save the file as UTF-8",
        ) from None


def load_config(path: Path, *, command: str | None = None, root: Path | None = None) -> ShardingConfig:
    """Read and parse a config file or launch script (``command``: the launch command line, if known;
    ``root``: the folder other files it names must sit in, default its git repository or its folder)."""
    path = Path(path)
    return parse_config(read_config_text(path), str(path), path=path, command=command, root=root)


def load_run_config(run: Any) -> ShardingConfig:
    """The run's config read as its launch resolves it: ``config:`` plus ``command:`` from run.yaml."""
    cfg = load_config(run.path(run.record.config, field="config"), command=getattr(run.record, "command", None),
                      root=repo_root_of_run(run))
    return for_run(cfg, run.record)


def for_run(cfg: ShardingConfig, record: Any) -> ShardingConfig:
    """The config read for a run of ``record``'s hardware: MaxText's sizes count that chip's JAX devices."""
    per_chip = getattr(record, "jax_devices_per_chip", 1)
    return cfg if per_chip == cfg.devices_per_chip else cfg.model_copy(update={"devices_per_chip": per_chip})


def repo_root_of_run(run: Any) -> Path:
    """Files a run's config names are read inside the run folder's repository (else the run folder)."""
    from bot.configs.launch import repo_root

    return repo_root(run.folder / "run.yaml")
