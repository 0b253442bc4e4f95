"""torchtitan TOML training configs (``torchtitan/models/llama3/train_configs/llama3_8b.toml``; older trees
``train_configs/llama3_8b.toml``), read as torchtitan reads them.

Two layouts are read (pytorch/torchtitan, BSD-3-Clause):

* **2025 - February 2026** (``torchtitan/config/job_config.py`` @238fa99, the last commit before the TOML files
  became Python config registries in #2386): a ``[parallelism]`` table with ``data_parallel_replicate_degree``,
  ``data_parallel_shard_degree`` (-1: the rest), ``tensor_parallel_degree``, ``context_parallel_degree``,
  ``pipeline_parallel_degree``, ``expert_parallel_degree``, ``pipeline_parallel_microbatch_size``;
  ``[training] local_batch_size`` / ``global_batch_size`` / ``seq_len``; ``[compile] enable``; Float8 through
  ``[model] converters`` (``"float8"``, ``"quantize.linear.float8"``).
* **2024** (``torchtitan/config_manager.py`` @9dec370, the commit of torchtitan's H100 benchmark tables): the
  dp / tp degrees under ``[training]`` (with ``batch_size`` and ``compile``), ``context_parallel_degree`` /
  ``pipeline_parallel_degree`` / ``pipeline_parallel_microbatches`` under ``[experimental]``, ``[float8]
  enable_float8_linear``. No expert parallelism.

run.yaml's ``command:`` flags (``--activation_checkpoint.mode full``) are laid over the file, the command winning as
in torchtitan's ConfigManager (:mod:`bot.configs.torchtitan_cli`); a value they set is not editable in the file.

Mesh: dp_replicate -> data, dp_shard -> fsdp, tp -> tensor, cp -> sequence, pp -> pipeline, ep -> expert. Ranks
are laid out as ``init_device_mesh`` lays out ``["pp", "dp_replicate", "dp_shard", "cp", "tp"]`` (row-major,
tp fastest; ``torchtitan/distributed/parallel_dims.py`` @238fa99 ``build_mesh``, ``torchtitan/parallelisms/
parallel_dims.py`` @9dec370), so a node's GPUs are filled from tp outwards: that decides which axes are ICI
(NVLink) and which DCN. Expert parallelism borrows its ranks from dp_shard (the ``efsdp x ep`` sparse mesh):
ASAP's mesh has ``expert = ep`` and ``fsdp = dp_shard / ep``.
"""

from __future__ import annotations

from typing import Any

from bot.configs import torchtitan_cli
from bot.configs.common import Splice
from bot.configs.megatron import layout
from bot.configs.mesh import Axis, Mesh
from bot.configs.sharding import ConfigKey, Scalar, ShardingConfig
from bot.configs.tomlscan import Span, insert_key, load, scan, value_at
from bot.errors import ConfigError

AXIS_OF: dict[str, Axis] = {
    "data_parallel_replicate_degree": "data",
    "data_parallel_shard_degree": "fsdp",
    "context_parallel_degree": "sequence",
    "tensor_parallel_degree": "tensor",
    "pipeline_parallel_degree": "pipeline",
    "expert_parallel_degree": "expert",
}
SHORT = {"data_parallel_replicate_degree": "dp_replicate", "data_parallel_shard_degree": "dp_shard",
         "context_parallel_degree": "cp", "tensor_parallel_degree": "tp", "pipeline_parallel_degree": "pp",
         "expert_parallel_degree": "ep"}
KEYS: tuple[str, ...] = tuple(AXIS_OF)
LEGACY_TABLE = {"data_parallel_replicate_degree": "training", "data_parallel_shard_degree": "training",
                "tensor_parallel_degree": "training", "context_parallel_degree": "experimental",
                "pipeline_parallel_degree": "experimental"}
# init_device_mesh order ["pp", "dp_replicate", "dp_shard", "cp", "tp"], fastest-varying first (ep inside dp_shard)
RANK_ORDER: tuple[Axis, ...] = ("tensor", "sequence", "expert", "fsdp", "data", "pipeline")
CURRENT = "torchtitan of 2025 - February 2026 (degrees in the parallelism table, torchtitan/config/job_config.py)"
LEGACY = "torchtitan of 2024 (degrees in the training and experimental tables, torchtitan/config_manager.py)"

# dotted TOML path -> accepted Python types; read into ShardingConfig.settings (lists joined by commas)
SETTING_TYPES: dict[str, tuple[type, ...]] = {
    "training.local_batch_size": (int,), "training.batch_size": (int,), "training.global_batch_size": (int,),
    "training.seq_len": (int,), "training.mixed_precision_param": (str,), "training.compile": (bool,),
    "compile.enable": (bool,), "activation_checkpoint.mode": (str,),
    "activation_checkpoint.selective_ac_option": (str, int),
    "parallelism.pipeline_parallel_microbatch_size": (int,), "parallelism.pipeline_parallel_schedule": (str,),
    "parallelism.expert_tensor_parallel_degree": (int,), "parallelism.enable_async_tensor_parallel": (bool,),
    "experimental.pipeline_parallel_microbatches": (int,), "experimental.pipeline_parallel_schedule": (str,),
    "experimental.enable_async_tensor_parallel": (bool,), "float8.enable_float8_linear": (bool,),
    "model.name": (str,), "model.flavor": (str,), "model.converters": (list,),
    "training.disable_loss_parallel": (bool,), "parallelism.disable_loss_parallel": (bool,),
    "float8.recipe_name": (str,),
}
SETTINGS: tuple[str, ...] = tuple(p.rsplit(".", 1)[-1] for p in SETTING_TYPES)


def looks_like(text: str) -> bool:
    """A TOML file by its keys: the first line that is not blank or a comment opens a table (``[training]``)
    and a torchtitan section or degree key appears (YAML has no such first line)."""
    for line in text.lstrip("\ufeff").splitlines():
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        if not (s.startswith("[") and s.endswith("]") and not s.startswith("[[")):
            return False
        break
    else:
        return False
    return any(k in text for k in KEYS) or "[activation_checkpoint]" in text or "[parallelism]" in text


def read(text: str, source: str, command: str | None = None) -> ShardingConfig:
    """Parse a torchtitan TOML file: the parallel degrees (with their exact spans) and the settings it states;
    ``command`` (run.yaml ``command:``) lays its ``--section.key`` overrides over the file, as torchtitan does."""
    data = load(text, source)
    spans = scan(text, data)
    given = torchtitan_cli.flags(command, source, _kinds) if command else {}
    merged = torchtitan_cli.merged(data, given)
    legacy = _layout(merged, source, given)
    keys = _keys(merged, spans, legacy, given, source)
    settings = _settings(merged, {p: s for p, s in spans.items() if p not in given}, source)
    origins = {f.dotted: ConfigKey(key=f.path[-1], path=f.dotted, group="world", axis="data", value=0,
                                   raw=f.written, line=0, column=0, start=-1, end=-1, via=f.via)
               for f in given.values() if f.dotted in SETTING_TYPES}
    reading = [f"read as {LEGACY if legacy else CURRENT}"]
    reading += torchtitan_cli.notes(given, lambda path: _before(data, spans, path), source)
    if not any(k.key == "data_parallel_shard_degree" for k in keys):
        reading.append("data_parallel_shard_degree not set: torchtitan's default -1 (the rest of the GPUs) applies")
    return ShardingConfig(format="torchtitan", source=source, text=text, keys=keys, settings=settings,
                          origins=origins, vintage=LEGACY if legacy else CURRENT, reading=reading)


def _kinds(path: tuple[str, ...]) -> tuple[type, ...] | None:
    """Accepted types of a key path torchtitan reads and ASAP needs (degrees of either layout, SETTING_TYPES)."""
    if len(path) == 2 and path[1] in AXIS_OF and path[0] in ("parallelism", LEGACY_TABLE.get(path[1])):
        return (int,)
    if path == torchtitan_cli.CONFIG_FILE:
        return (str,)
    kinds = SETTING_TYPES.get(".".join(path))
    return (str,) if kinds == (str, int) else kinds  # selective_ac_option: torchtitan types it str


def _keys(data: dict[str, Any], spans: dict[tuple[str, ...], Span], legacy: bool,
          given: dict[tuple[str, ...], torchtitan_cli.Flag], source: str) -> list[ConfigKey]:
    """The degree keys the layout reads, in file order (those the command sets last, not editable in the file)."""
    keys: list[ConfigKey] = []
    for name in KEYS:
        if legacy and name not in LEGACY_TABLE:
            continue
        path = (LEGACY_TABLE[name] if legacy else "parallelism", name)
        found, value = value_at(data, path)
        if not found:
            continue
        flag = given.get(path)
        if flag is not None:
            keys.append(_key(name, path, value, None, source, via=flag.via, raw=flag.written))
        else:
            keys.append(_key(name, path, value, spans.get(path), source))
    keys.sort(key=lambda k: (k.start < 0, k.start))
    return keys


def _before(data: dict[str, Any], spans: dict[tuple[str, ...], Span], path: tuple[str, ...]) -> str:
    """What the file says at ``path``, for a reading note: "'selective' in the file (line 62)"."""
    found, value = value_at(data, path)
    if not found:
        return "torchtitan's default (the file does not set it)"
    span = spans.get(path)
    shown = span.raw if span is not None else repr(value)
    return f"{shown} in the file" + (f" (line {span.line})" if span is not None else "")


def _layout(data: dict[str, Any], source: str, given: dict[tuple[str, ...], torchtitan_cli.Flag]) -> bool:
    """True for the 2024 layout (degrees under [training] / [experimental]); ConfigError when both are used
    (in the file, or by the recorded command over the file: the flag is named)."""
    old = [f"{t}.{k}" for k, t in LEGACY_TABLE.items() if value_at(data, (t, k))[0]]
    old += [p for p in ("experimental.pipeline_parallel_microbatches",) if value_at(data, tuple(p.split(".")))[0]]
    new = [".".join(p) for p in given if p[0] == "parallelism"] or (["the parallelism table"] if "parallelism" in data
                                                                     else [])
    local = value_at(data, ("training", "local_batch_size"))[0]
    new += ["training.local_batch_size"] if local else []
    # torchtitan of spring 2025 (#980, March: degrees moved to [parallelism]; #1238, June: batch_size renamed
    # local_batch_size) reads [parallelism] with [training] batch_size: a layout of its own, not a mix. Both batch
    # names never coexisted, nor batch_size's successor with the 2024 degrees.
    if value_at(data, ("training", "batch_size"))[0] and (local or not new):
        old.append("training.batch_size")
    if old and new:
        first_old = next((o for o in old if tuple(o.split(".")) in given), old[0])
        first_new = next((n for n in new if tuple(n.split(".")) in given), new[0])
        by_command = any(tuple(d.split(".")) in given for d in (first_old, first_new))
        raise ConfigError(
            f"{'the file and the recorded command mix' if by_command else 'the file mixes'} torchtitan layouts: "
            f"{_named(first_old, given)} (torchtitan of 2024) and {_named(first_new, given)} (2025 and later)",
            source=source, field="command" if by_command else first_old,
            hint="keep the keys and flags of the torchtitan version you run; each reads only its own",
        )
    return bool(old)


def _named(dotted: str, given: dict[tuple[str, ...], torchtitan_cli.Flag]) -> str:
    flag = given.get(tuple(dotted.split(".")))
    return f"{flag.name} on the command" if flag is not None else dotted


def _key(name: str, path: tuple[str, str], value: object, span: Span | None, source: str, *,
         via: str | None = None, raw: str | None = None) -> ConfigKey:
    """A degree key; ``via`` / ``raw``: it is set elsewhere (the recorded command), so not editable in the file."""
    dotted = ".".join(path)
    shard = name == "data_parallel_shard_degree"
    ok = isinstance(value, int) and not isinstance(value, bool) and (value >= 1 or (shard and value == -1))
    if not ok:
        shown = raw or (span.raw if span is not None else repr(value))
        where = f" (line {span.line})" if span is not None else " on the recorded launch command" if raw else ""
        raise ConfigError(f"must be a positive integer{' or -1 (the rest)' if shard else ''}, got {shown}{where}",
                          source=source, field=dotted)
    assert isinstance(value, int)
    if span is None:
        return ConfigKey(key=name, path=dotted, group="world", axis=AXIS_OF[name], value=value, raw=str(value),
                         line=0, column=0, start=-1, end=-1, via=via or "a TOML value ASAP cannot locate on one line")
    return ConfigKey(key=name, path=dotted, group="world", axis=AXIS_OF[name], value=value, raw=span.raw,
                     line=span.line, column=span.column, start=span.start, end=span.end)


def _settings(data: dict[str, Any], spans: dict[tuple[str, ...], Span], source: str) -> dict[str, Scalar]:
    out: dict[str, Scalar] = {}
    for dotted, types in SETTING_TYPES.items():
        path = tuple(dotted.split("."))
        found, value = value_at(data, path)
        if not found:
            continue
        if isinstance(value, bool) and bool not in types or not isinstance(value, types):
            span = spans.get(path)
            shown = span.raw if span is not None else repr(value)
            names = " or ".join({int: "an integer", str: "a string", bool: "true or false",
                                 list: "a list of strings"}[t] for t in types)
            raise ConfigError(f"must be {names}, got {shown}" + (f" (line {span.line})" if span else ""),
                              source=source, field=dotted)
        if isinstance(value, list):
            if not all(isinstance(v, str) for v in value):
                raise ConfigError(f"must be a list of strings, got {value!r:.80}", source=source, field=dotted)
            value = ",".join(value)
        choices = torchtitan_cli.CHOICES.get(path)
        if choices and value not in choices:
            span = spans.get(path)
            raise ConfigError(f"must be one of {', '.join(choices)}, got {span.raw if span else repr(value)}"
                              + (f" (line {span.line})" if span else ""), source=source, field=dotted)
        out[dotted] = value
    return out


# ----------------------------------------------------------------------------------------- mesh
def degrees(config: ShardingConfig, num_devices: int) -> dict[str, int]:
    """Each degree by full key name, dp_shard's -1 resolved as ``ParallelDims._validate`` does; ConfigError in
    torchtitan's own words when the product is not the world size."""
    present = {k.key: k.value for k in config.keys}
    d = {name: present.get(name, -1 if name == "data_parallel_shard_degree" else 1) for name in KEYS}
    others = d["data_parallel_replicate_degree"] * d["context_parallel_degree"] * d["tensor_parallel_degree"] * \
        d["pipeline_parallel_degree"]
    if d["data_parallel_shard_degree"] == -1:
        d["data_parallel_shard_degree"] = num_devices // others
    product = others * d["data_parallel_shard_degree"]
    if d["data_parallel_shard_degree"] < 1 or product != num_devices:
        parts = " * ".join(f"{SHORT[n]}({d[n]})" for n in KEYS if n != "expert_parallel_degree")
        culprit = next((n for n in KEYS if present.get(n, 1) not in (1, -1)), "data_parallel_shard_degree")
        raise ConfigError(
            f"Invalid parallel dims: {parts} != WORLD_SIZE({num_devices}) (torchtitan's ParallelDims check"
            + (", with data_parallel_shard_degree = -1 taking the rest" if present.get(
                "data_parallel_shard_degree", -1) == -1 else "") + ")",
            source=config.source, field=_path(config, culprit),
        )
    return d


def _record(config: ShardingConfig) -> bool:
    from bot.configs.torchtitan_json import is_record  # (it imports this module's names)

    return is_record(config)


def _path(config: ShardingConfig, name: str) -> str:
    k = config.key(name)
    if k is not None:
        return k.path
    legacy = config.vintage == LEGACY
    return f"{LEGACY_TABLE.get(name, 'parallelism') if legacy else 'parallelism'}.{name}"


def parallel_sizes(config: ShardingConfig, num_devices: int) -> dict[Axis, int]:
    """Total size per canonical axis (expert ranks carved out of dp_shard)."""
    d = degrees(config, num_devices)
    ep, shard = d["expert_parallel_degree"], d["data_parallel_shard_degree"]
    if shard % ep:
        raise ConfigError(
            f"expert_parallel_degree={ep} does not divide data_parallel_shard_degree={shard}: torchtitan then "
            "borrows expert ranks from cp / tp as well, a layout one ASAP mesh cannot describe",
            source=config.source, field=_path(config, "expert_parallel_degree"),
        )
    return {"data": d["data_parallel_replicate_degree"], "fsdp": shard // ep, "expert": ep,
            "sequence": d["context_parallel_degree"], "tensor": d["tensor_parallel_degree"],
            "pipeline": d["pipeline_parallel_degree"]}


def mesh(config: ShardingConfig, num_devices: int, num_slices: int) -> Mesh:
    """The canonical mesh, each node filled from tp outwards (torchtitan's rank order)."""
    return layout(parallel_sizes(config, num_devices), num_devices, num_slices, RANK_ORDER)[0].normalized()


def notes(config: ShardingConfig, num_devices: int, num_slices: int) -> list[str]:
    """Legal but notable: tensor / context parallelism across nodes, uneven splits, expert placement."""
    total = parallel_sizes(config, num_devices)
    m, straddling = layout(total, num_devices, num_slices, RANK_ORDER)
    per_node = num_devices // num_slices
    out: list[str] = []
    names = {axis: name for name, axis in AXIS_OF.items()}
    for axis in ("tensor", "sequence", "expert"):
        if m.dcn.get(axis, 1) > 1:
            out.append(f"{names[axis]}={total[axis]} crosses nodes ({m.dcn[axis]} nodes of {per_node} GPUs): "
                       "per-layer traffic on the network")
    for axis in straddling:
        out.append(f"{names[axis]} ({total[axis]}) does not split evenly over nodes of {per_node} GPUs")
    if total["expert"] > 1:
        out.append(f"expert_parallel_degree={total['expert']}: torchtitan folds the MoE layers' experts over "
                   "dp_shard (x cp x tp); the mesh carves them out of dp_shard")
    return out


def _function_source_plan(config: ShardingConfig, want: dict[str, int],
                          present: dict[str, ConfigKey]) -> list[Splice] | None:
    """A config function's Python source: the degrees that change, as assignments in the launched function
    (:mod:`bot.configs.torchtitan_py_edit`); None for the other layouts."""
    from bot.configs.torchtitan_json import FUNCTION_SOURCE

    if config.vintage != FUNCTION_SOURCE:
        return None
    from bot.configs.torchtitan_py_edit import plan_fields

    changed: dict[str, object] = {}
    for name, value in want.items():
        now = present[name].value if name in present else (-1 if name == "data_parallel_shard_degree" else 1)
        if now != value and now != -1:  # dp_shard -1 takes the rest, whatever it comes to
            changed[f"parallelism.{name}"] = value
    return plan_fields(config, changed) if changed else []


def allowed_axes(config: ShardingConfig) -> set[Axis]:
    """Every canonical axis; the 2024 layout has no expert parallelism."""
    axes: set[Axis] = {"data", "fsdp", "tensor", "sequence", "pipeline"}
    return axes if config.vintage == LEGACY else axes | {"expert"}


def plan(config: ShardingConfig, root: object, target: Mesh) -> list[Splice]:
    """Set the degrees to the target's totals. torchtitan's rank order decides placement, so a target that puts
    the axes elsewhere over the nodes is refused (ConfigError) rather than written as something else."""
    t = target.sizes()
    legacy = config.vintage == LEGACY
    if legacy and t["expert"] > 1:
        raise ConfigError("this torchtitan (2024 layout) has no expert parallelism", source=config.source,
                          field="mesh")
    placed, _ = layout(t, target.num_devices, target.num_slices, RANK_ORDER)
    if placed.normalized() != target.normalized():
        raise ConfigError(
            f"torchtitan lays ranks out as pp, dp_replicate, dp_shard, cp, tp (tp innermost): these degrees give "
            f"{placed.normalized().short()}, not {target.normalized().short()}",
            source=config.source, field="mesh",
        )
    want = {"data_parallel_replicate_degree": t["data"], "data_parallel_shard_degree": t["fsdp"] * t["expert"],
            "context_parallel_degree": t["sequence"], "tensor_parallel_degree": t["tensor"],
            "pipeline_parallel_degree": t["pipeline"], "expert_parallel_degree": t["expert"]}
    present = {k.key: k for k in config.keys}
    python = _function_source_plan(config, want, present)
    if python is not None:
        return python
    rest = target.num_devices // (want["data_parallel_replicate_degree"] * want["context_parallel_degree"]
                                  * want["tensor_parallel_degree"] * want["pipeline_parallel_degree"])
    splices: list[Splice] = []
    new: dict[tuple[str, ...], list[tuple[str, str]]] = {}
    for name, value in want.items():
        key = present.get(name)
        current = key.value if key is not None else (-1 if name == "data_parallel_shard_degree" else 1)
        if current == value or (current == -1 and rest == value):
            continue
        if key is not None:
            if key.start < 0:
                raise ConfigError(f"{key.path} is {key.via}", source=config.source, field=key.path,
                                  hint=f"set {name} = {value} by hand")
            splices.append(Splice(key.start, key.end, str(value)))
        elif _record(config):  # a JSON record holds every degree: one it lacks is not torchtitan's
            from bot.configs.torchtitan_json import refuse_edit

            raise refuse_edit(config, {f"parallelism.{name}": value})
        else:
            table = (LEGACY_TABLE[name] if legacy else "parallelism",)
            new.setdefault(table, []).append((name, str(value)))
    for table, entries in new.items():
        data = load(config.text, config.source)
        at, text = insert_key(config.text, scan(config.text, data), table, entries)
        splices.append(Splice(at, at, text))
    return splices
