"""DeepSpeed JSON configs (``ds_config.json``): ZeRO stage, batch split, precision and offload.

A DeepSpeed config states no tensor or pipeline sizes (a training script such as Megatron-DeepSpeed's
``pretrain_gpt.py`` sets those): on its own it describes data parallelism over every GPU. The ZeRO stage
decides what those data ranks shard (Rajbhandari et al. 2019, "ZeRO", §5.1-5.3): stage 1 the optimizer
state (P_os), stage 2 also the gradients (P_os+g), stage 3 also the parameters (P_os+g+p), which gathers
each layer's weights in forward and backward exactly as FSDP does. ASAP's mesh therefore puts every GPU on
the ``fsdp`` axis at stage 3 and on the ``data`` axis at stages 0-2; the cost model reads the stage
(setting ``zero_stage``) to shard the optimizer state (1) and gradients (2) over the data ranks.

Keys read (DeepSpeed docs/_pages/config-json.md): ``train_batch_size``, ``train_micro_batch_size_per_gpu``,
``gradient_accumulation_steps``, ``bf16.enabled`` / ``fp16.enabled``, ``zero_optimization`` (a mapping, or
the legacy ``true``/``false`` = stage 1/0) with ``stage``, ``offload_optimizer.device`` /
``offload_param.device`` (``cpu`` | ``nvme`` | ``none``; legacy ``cpu_offload`` / ``cpu_offload_params``),
``overlap_comm``, ``zero_hpz_partition_size`` (ZeRO++), ``activation_checkpointing.partition_activations`` /
``cpu_checkpointing``. ``"auto"`` (Hugging Face Trainer fills it in at launch) reads as unknown, never as
an error and never as a guess.
"""

from __future__ import annotations

import re
from typing import Any

from bot.configs.common import Splice
from bot.configs.jsonspans import JsonDoc, Span, load
from bot.configs.mesh import Axis, Mesh
from bot.configs.sharding import ConfigKey, Scalar, ShardingConfig
from bot.errors import ConfigError

# Keys whose presence marks a JSON file as a DeepSpeed config.
DETECT_KEYS: tuple[str, ...] = ("zero_optimization", "train_batch_size", "train_micro_batch_size_per_gpu",
                                "gradient_accumulation_steps", "bf16", "fp16", "zero_allow_untested_optimizer")

# Canonical setting names this reader produces (what an edit may write back).
SETTINGS: tuple[str, ...] = ("zero_stage", "global_batch_size", "micro_batch_size", "gradient_accumulation_steps",
                             "per_device_batch_size", "precision", "offload_optimizer", "offload_param",
                             "overlap_comm", "zero_hpz_partition_size", "zero_quantized_weights",
                             "zero_quantized_gradients", "partition_activations", "cpu_checkpointing")

# JSON path -> canonical setting (batch sizes: positive integers or "auto").
_BATCH = {"train_batch_size": "global_batch_size", "train_micro_batch_size_per_gpu": "micro_batch_size",
          "gradient_accumulation_steps": "gradient_accumulation_steps"}
_FLAGS = {"zero_optimization.overlap_comm": "overlap_comm",
          "zero_optimization.zero_quantized_weights": "zero_quantized_weights",  # ZeRO++ qwZ
          "zero_optimization.zero_quantized_gradients": "zero_quantized_gradients",  # ZeRO++ qgZ
          "activation_checkpointing.partition_activations": "partition_activations",
          "activation_checkpointing.cpu_checkpointing": "cpu_checkpointing"}
OFFLOAD_DEVICES = ("cpu", "nvme", "none")
STAGES = (0, 1, 2, 3)
_JSON_START = re.compile(r'\A\ufeff?\s*\{\s*("|\})')


def is_json(text: str, source: str) -> bool:
    """A JSON config: a ``.json`` name, or text that opens with a JSON object (``{"...``)."""
    return source.lower().endswith(".json") or bool(_JSON_START.match(text))


def read_text(text: str, source: str) -> ShardingConfig:
    """Read a DeepSpeed JSON config into a ``deepspeed`` :class:`ShardingConfig` (no mesh keys: see module doc)."""
    doc = load(text, source)
    if not any(k in doc.data for k in DETECT_KEYS):
        raise ConfigError("a JSON file with none of DeepSpeed's keys; expected one of: " + ", ".join(DETECT_KEYS),
                          source=source, hint="ASAP reads DeepSpeed ds_config.json files; other configs are YAML")
    settings, origins, notes = read_settings(doc)
    return ShardingConfig(format="deepspeed", source=source, text=text, keys=[], settings=settings, origins=origins,
                          reading=notes)


def read_settings(doc: JsonDoc) -> tuple[dict[str, Scalar], dict[str, ConfigKey], list[str]]:
    """The canonical settings of a parsed DeepSpeed JSON, where each is written, and how it was read."""
    settings: dict[str, Scalar] = {}
    origins: dict[str, ConfigKey] = {}
    notes: list[str] = []
    for path, name in _BATCH.items():
        value = _positive(doc, path, notes)
        if path in doc.spans:
            settings[name] = value
            origins[name] = _origin(doc, name, path)
    stage = _stage(doc, notes)
    settings["zero_stage"] = stage
    if "zero_optimization.stage" in doc.spans:
        origins["zero_stage"] = _origin(doc, "zero_stage", "zero_optimization.stage")
    settings["precision"] = _precision(doc, notes)
    zero = doc.data.get("zero_optimization")
    zero = zero if isinstance(zero, dict) else {}
    settings["offload_optimizer"] = _offload(doc, zero, "offload_optimizer", "cpu_offload", notes)
    settings["offload_param"] = _offload(doc, zero, "offload_param", "cpu_offload_params", notes)
    for path, name in _FLAGS.items():
        if path in doc.spans:
            settings[name] = _flag(doc, path, notes)
            origins[name] = _origin(doc, name, path)
    if "zero_optimization.zero_hpz_partition_size" in doc.spans:
        settings["zero_hpz_partition_size"] = _positive(doc, "zero_optimization.zero_hpz_partition_size", notes)
        origins["zero_hpz_partition_size"] = _origin(doc, "zero_hpz_partition_size",
                                                     "zero_optimization.zero_hpz_partition_size")
    mb, gb, gas = (settings.get(n) for n in ("micro_batch_size", "global_batch_size", "gradient_accumulation_steps"))
    if gb is None and isinstance(mb, int):
        # train_batch_size = micro x accumulation x data-parallel GPUs (DeepSpeed's batch check): per GPU it is
        # micro x accumulation, whatever the GPU count
        settings["per_device_batch_size"] = mb
        settings.setdefault("gradient_accumulation_steps", gas if isinstance(gas, int) else 1)
    return settings, origins, notes


def _where(doc: JsonDoc, path: str) -> str:
    span = doc.spans.get(path)
    return f" (line {span.line})" if span is not None else ""


def _get(doc: JsonDoc, path: str) -> Any:
    node: Any = doc.data
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _auto(doc: JsonDoc, path: str, notes: list[str], what: str) -> None:
    notes.append(f'{path} is "auto"{_where(doc, path)}: filled in by the Hugging Face Trainer at launch, so {what} '
                 "is unknown here")


def _positive(doc: JsonDoc, path: str, notes: list[str]) -> int | None:
    v = _get(doc, path)
    if v is None and path not in doc.spans:
        return None
    if v == "auto":
        _auto(doc, path, notes, path)
        return None
    if isinstance(v, bool) or not isinstance(v, int | float) or v < 1 or float(v) != int(v):
        raise ConfigError(f"must be a positive integer or \"auto\", got {_shown(v)}{_where(doc, path)}",
                          source=doc.source, field=path)
    return int(v)


def _flag(doc: JsonDoc, path: str, notes: list[str]) -> bool | None:
    v = _get(doc, path)
    if v == "auto":
        _auto(doc, path, notes, path)
        return None
    if not isinstance(v, bool):
        raise ConfigError(f"must be true or false, got {_shown(v)}{_where(doc, path)}", source=doc.source, field=path)
    return v


def _shown(v: Any) -> str:
    import json

    text = json.dumps(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _stage(doc: JsonDoc, notes: list[str]) -> int | None:
    """ZeRO stage: absent = 0 (ZeRO off, DeepSpeed's default); legacy ``zero_optimization: true`` = 1."""
    zero = doc.data.get("zero_optimization")
    if zero is None:
        notes.append("no zero_optimization section: ZeRO is off (stage 0, DeepSpeed's default)")
        return 0
    if isinstance(zero, bool):
        notes.append(f"zero_optimization: {str(zero).lower()} (legacy form){_where(doc, 'zero_optimization')}: "
                     f"stage {int(zero)}")
        return int(zero)
    if not isinstance(zero, dict):
        raise ConfigError(f"must be an object ({{\"stage\": N, ...}}) or true/false, got {_shown(zero)}"
                          f"{_where(doc, 'zero_optimization')}", source=doc.source, field="zero_optimization")
    v = zero.get("stage", 0)
    if v == "auto":
        _auto(doc, "zero_optimization.stage", notes, "the ZeRO stage")
        return None
    if isinstance(v, bool) or v not in STAGES:
        raise ConfigError(f"must be 0, 1, 2 or 3 (the ZeRO stage), got {_shown(v)}"
                          f"{_where(doc, 'zero_optimization.stage')}", source=doc.source, field="zero_optimization.stage")
    return int(v)


def _precision(doc: JsonDoc, notes: list[str]) -> str | None:
    """bf16 | fp16 | fp32 (neither enabled: DeepSpeed trains in fp32); None when a switch is "auto"."""
    on: list[str] = []
    for name, paths in (("bf16", ("bf16.enabled", "bfloat16.enabled")), ("fp16", ("fp16.enabled",))):
        for path in paths:
            if path in doc.spans:
                v = _flag(doc, path, notes)
                if v is None:
                    return None
                if v:
                    on.append(name)
    if len(on) > 1:
        raise ConfigError("bf16 and fp16 are both enabled; DeepSpeed refuses to start", source=doc.source,
                          field="bf16.enabled")
    return on[0] if on else "fp32"


def _offload(doc: JsonDoc, zero: dict[str, Any], key: str, legacy: str, notes: list[str]) -> str | None:
    """The offload device: cpu | nvme | none (also the legacy ``cpu_offload: true``); None when "auto"."""
    path = f"zero_optimization.{key}"
    section = zero.get(key)
    if section is None:
        old = zero.get(legacy)
        if old is None:
            return "none"
        if not isinstance(old, bool):
            raise ConfigError(f"must be true or false, got {_shown(old)}{_where(doc, 'zero_optimization.' + legacy)}",
                              source=doc.source, field=f"zero_optimization.{legacy}")
        notes.append(f"zero_optimization.{legacy}: {str(old).lower()} (legacy form of {key}.device: cpu)")
        return "cpu" if old else "none"
    if section == "auto":
        _auto(doc, path, notes, f"{key}")
        return None
    if not isinstance(section, dict):
        raise ConfigError(f"must be an object ({{\"device\": \"cpu\"}}), got {_shown(section)}{_where(doc, path)}",
                          source=doc.source, field=path)
    device = section.get("device", "none")
    if device == "auto":
        _auto(doc, f"{path}.device", notes, f"{key}")
        return None
    if device not in OFFLOAD_DEVICES:
        raise ConfigError(f"must be one of {', '.join(OFFLOAD_DEVICES)}, got {_shown(device)}"
                          f"{_where(doc, path + '.device')}", source=doc.source, field=f"{path}.device")
    return str(device)


def _origin(doc: JsonDoc, name: str, path: str) -> ConfigKey:
    span: Span = doc.spans[path]
    return ConfigKey(key=name, path=path, group="world", axis="data", value=0, raw=doc.text[span.start:span.end],
                     line=span.line, column=1, start=span.start, end=span.end)


# --------------------------------------------------------------------------------------------------- mesh
def stage_of(config: ShardingConfig) -> int | None:
    v = config.settings.get("zero_stage")
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def axis_of(config: ShardingConfig) -> Axis:
    """``fsdp`` at ZeRO-3 (parameters sharded over every rank), else ``data``."""
    return "fsdp" if stage_of(config) == 3 else "data"


def mesh(config: ShardingConfig, num_devices: int, num_slices: int) -> Mesh:
    """Every GPU on one axis: inside each node (ici) and across nodes (dcn)."""
    axis = axis_of(config)
    per = num_devices // num_slices
    return Mesh(ici={axis: per} if per > 1 else {}, dcn={axis: num_slices} if num_slices > 1 else {})


def notes(config: ShardingConfig, num_devices: int, num_slices: int) -> list[str]:
    """What the JSON alone cannot say, and settings whose effect ASAP does not price."""
    st = config.settings
    out = ["a DeepSpeed config states no tensor or pipeline parallelism: read as data parallelism over all "
           f"{num_devices} GPUs (a training script such as Megatron-DeepSpeed sets TP/PP on its command line)"]
    if stage_of(config) is None:
        out.append("the ZeRO stage is not known (\"auto\"): the memory band spans stages 0 to 3")
    gb, mb, gas = st.get("global_batch_size"), st.get("micro_batch_size"), st.get("gradient_accumulation_steps")
    if all(isinstance(x, int) for x in (gb, mb, gas)) and gb != mb * gas * num_devices:  # type: ignore[operator]
        out.append(f"train_batch_size={gb} is not train_micro_batch_size_per_gpu={mb} x gradient_accumulation_steps="
                   f"{gas} x {num_devices} GPUs = {mb * gas * num_devices}: DeepSpeed refuses to start "  # type: ignore[operator]
                   "(with tensor/pipeline parallelism the data-parallel size is smaller)")
    if st.get("zero_quantized_gradients") is True:
        out.append("ZeRO++ qgZ (zero_quantized_gradients): the gradients' quantized all-to-all reduction is not "
                   "priced; they are priced as a plain reduce-scatter in the gradient dtype (pessimistic)")
    if st.get("offload_param") in ("cpu", "nvme"):
        out.append(f"parameters offloaded to {st['offload_param']}: HBM holds only the gathered working set; their "
                   "fetches over the host link are priced at the chip's assumed host-link bandwidth"
                   + (_NVME if st["offload_param"] == "nvme" else ""))
    if st.get("offload_optimizer") in ("cpu", "nvme"):
        out.append(f"optimizer state offloaded to {st['offload_optimizer']}: not in HBM; the host-side optimizer "
                   "step and the transfers are priced with an assumed host link and CPU-Adam rate (ZeRO-Offload)"
                   + (_NVME if st["offload_optimizer"] == "nvme" else ""))
    return out


_NVME = ("; NVMe is priced as host memory (its drives' bandwidth is not in the catalog and is usually lower: "
         "optimistic)")


def allowed_axes(config: ShardingConfig) -> set[Axis]:
    """Data parallelism (ZeRO 0-2) or FSDP (ZeRO-3): the only layouts a DeepSpeed JSON can state."""
    return {"data", "fsdp"}


# -------------------------------------------------------------------------------------------------- edits
def plan(config: ShardingConfig, root: object, target: Mesh) -> list[Splice]:
    """Carry a mesh over fsdp alone by raising the ZeRO stage to 3. Any other change is not expressible: the JSON
    has no tensor/pipeline sizes, and a mesh change alone never lowers the stage (a candidate's settings keep the
    run's stage, so a data-only mesh on a ZeRO-3 run would be priced as ZeRO-3 while the edit said 2). Lowering
    is the ZeRO-stage lever's settings change (:mod:`bot.proposals.zero`), which names its stage and is written
    before the mesh is planned (:func:`bot.configs.edit.edit_texts`)."""
    sizes = {a: v for a, v in target.sizes().items() if v > 1}
    others = sorted(a for a in sizes if a not in ("data", "fsdp"))
    if others or len(sizes) > 1:
        raise ConfigError(
            "a DeepSpeed config can state data parallelism (ZeRO 0-2) or parameter sharding over all GPUs (ZeRO-3), "
            f"not {target.short()}", source=config.source, field="zero_optimization.stage",
            hint="tensor/pipeline sizes belong on the training script's command line (Megatron-DeepSpeed flags)")
    want_axis = next(iter(sizes), axis_of(config))
    if want_axis == axis_of(config):
        return []
    if want_axis == "data":
        raise ConfigError("ASAP does not propose lowering the ZeRO stage from 3", source=config.source,
                          field="zero_optimization.stage")
    return [stage_splice(config, 3)]


def stage_splice(config: ShardingConfig, stage: int) -> Splice:
    """Write ``"stage": N``: in place when present, else as the first member of ``zero_optimization`` (or a
    new ``"zero_optimization": {"stage": N}`` first member of the file), copying the file's spacing."""
    doc = load(config.text, config.source)
    at = doc.spans.get("zero_optimization.stage")
    if at is not None:
        return Splice(at.start, at.end, str(stage))
    zero = doc.spans.get("zero_optimization")
    if zero is not None and doc.text[zero.start] != "{":  # legacy true/false
        return Splice(zero.start, zero.end, f'{{"stage": {stage}}}')
    if zero is not None:
        return _first_member(doc, zero.start, f'"stage": {stage}')
    top = len(doc.text) - len(doc.text.lstrip("\ufeff \t\r\n"))
    return _first_member(doc, top, f'"zero_optimization": {{"stage": {stage}}}')


# Settings an edit may add to a ds_config that lacks them, with the object they belong in.
ZERO_MEMBERS: dict[str, str] = {"zero_hpz_partition_size": "zero_optimization"}


def member_splice(config: ShardingConfig, name: str, value: object) -> Splice:
    """Write ``name`` (a key of :data:`ZERO_MEMBERS`) as the first member of its object, which must exist: a
    ds_config without ``zero_optimization`` has no ZeRO-3 to tune. The value is JSON (``json.dumps``)."""
    import json

    doc = load(config.text, config.source)
    parent = ZERO_MEMBERS.get(name)
    at = doc.spans.get(parent) if parent else None
    if parent is None or at is None or doc.text[at.start] != "{":
        raise ConfigError(f"ASAP does not know where to add {name} in this DeepSpeed config", source=config.source,
                          field=name, hint=f"add \"{name}\": {json.dumps(value)} by hand")
    return _first_member(doc, at.start, f'"{name}": {json.dumps(value)}')


def _first_member(doc: JsonDoc, brace: int, member: str) -> Splice:
    t = doc.text
    i = brace + 1
    j = i
    while j < len(t) and t[j] in " \t\r\n":
        j += 1
    if t[j] == "}":
        return Splice(i, i, member)
    return Splice(j, j, member + "," + t[i:j])
