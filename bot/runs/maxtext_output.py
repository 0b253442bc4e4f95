"""A run read from MaxText's own output layout, or from a bare JAX profiler logdir.

MaxText writes each run to ``<base_output_directory>/<run_name>/`` (``src/maxtext/configs/types.py``):
``config.yml`` (the resolved config, when ``save_config_to_gcs``), ``metrics/metrics_step_*_to_step_*.txt``
(JSON lines with ``perf/step_time_seconds`` and ``perf/per_device_tokens_per_sec``, when ``gcs_metrics``)
and ``tensorboard/plugins/profile/<session>/*.xplane.pb`` (``jax.profiler`` under ``tensorboard_dir``).
A plain JAX logdir has ``plugins/profile/<session>/`` with, at best, a config beside it.

This module turns such a folder (already on local disk) into a :class:`RunRecord` without writing
anything: the model and batch from the config's own keys, the measured step time from the metrics
(median over steps after the first, which includes compilation), and the chip type and count from the
config when it states them, else from the profile's own device description. What it cannot tell is an
error naming the missing fact and the file that would supply it, never a guess.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bot import yamlsafe
from bot.errors import AsapError
from bot.runs.record import RunRecord

CONFIG_NAMES = ("config.yml", "config.yaml")
PROFILE_ROOTS = ("tensorboard/plugins/profile", "plugins/profile")
MAX_CONFIG_BYTES = 1 << 20
MAX_METRICS_FILES = 64
MAX_METRICS_BYTES = 16 << 20

_REMAT = {"full": "full", "minimal": "minimal", "none": "none"}
_DTYPE = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "fp8": "fp8"}
# v4-N / v5p-N / tpu7x-N name TensorCores: N/2 chips (TPU7x: two TensorCores per chip, Google Cloud TPU7x page)
_TOPOLOGY_CHIPS_PER_CORE = {"v4": 2, "v5p": 2, "tpu7x": 2, "v7x": 2}


@dataclass
class OutputLayout:
    """Which MaxText/JAX output files a folder holds (paths relative to the folder)."""

    config: str | None = None
    metrics: list[str] = field(default_factory=list)
    session: str | None = None  # relative path of the chosen profile session folder
    sessions: list[str] = field(default_factory=list)

    @property
    def is_output(self) -> bool:
        return bool(self.config or self.session)


def choose_session(names: list[str], wanted: str | None, *, where: str) -> str | None:
    """The session folder to read: ``wanted`` if given (must exist), else the newest by name.

    jax.profiler names sessions by start time (``2026_11_21_05_24_53``), so the largest name is the newest.
    """
    if wanted:
        if wanted not in names:
            raise AsapError(
                f"no profile session {wanted!r}", source=where, field="session",
                hint=f"sessions here: {', '.join(sorted(names)[-5:]) or 'none'}",
            )
        return wanted
    return max(names) if names else None


def layout_of(folder: Path, *, session: str | None = None) -> OutputLayout:
    """Find the config, metrics files and profile session of a local output folder."""
    out = OutputLayout()
    out.config = next((n for n in CONFIG_NAMES if (folder / n).is_file()), None)
    metrics = folder / "metrics"
    if metrics.is_dir():
        files = sorted(p.name for p in metrics.iterdir() if p.is_file() and p.name.startswith("metrics_"))
        out.metrics = [f"metrics/{n}" for n in files[-MAX_METRICS_FILES:]]
    for root in PROFILE_ROOTS:
        base = folder / root
        if base.is_dir():
            names = [p.name for p in base.iterdir() if p.is_dir()]
            chosen = choose_session(names, session, where=str(base))
            if chosen:
                out.sessions = sorted(names)
                out.session = f"{root}/{chosen}"
                break
    return out


def _load_config(path: Path) -> dict[str, Any]:
    size = path.stat().st_size
    if size > MAX_CONFIG_BYTES:
        raise AsapError(f"config is {size} bytes; expected < 1 MiB", source=str(path))
    return load_yaml_mapping(path.read_text(encoding="utf-8", errors="replace"), str(path))


def _metric_rows(folder: Path, names: list[str]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    budget = MAX_METRICS_BYTES
    for name in names:
        path = folder / name
        size = path.stat().st_size
        if size > budget:
            break
        budget -= size
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue  # a torn last line of a file still being written
            if isinstance(row, dict):
                rows.append(row)
    return rows


def measured_from_metrics(folder: Path, names: list[str]) -> dict[str, float]:
    """Median step time (ms) and per-device tokens/s over the logged steps, skipping step 0 (compile)."""
    rows = [r for r in _metric_rows(folder, names) if float(r.get("step", 1) or 0) >= 1]
    out: dict[str, float] = {}
    steps = [float(r["perf/step_time_seconds"]) for r in rows if _positive(r.get("perf/step_time_seconds"))]
    if steps:
        out["step_time_ms"] = statistics.median(steps) * 1000.0
    tps = [float(r["perf/per_device_tokens_per_sec"]) for r in rows if _positive(r.get("perf/per_device_tokens_per_sec"))]
    if tps:
        out["per_device_tokens_per_sec"] = statistics.median(tps)
    return out


def _positive(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and v > 0


def _int(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return None


def model_from_config(cfg: dict[str, Any]) -> dict[str, Any] | None:
    """run.yaml ``model:`` fields from MaxText's resolved keys (base_emb_dim, base_num_decoder_layers, ...)."""
    pairs = {
        "layers": "base_num_decoder_layers", "d_model": "base_emb_dim", "d_ff": "base_mlp_dim",
        "heads": "base_num_query_heads", "kv_heads": "base_num_kv_heads", "head_dim": "head_dim",
        "vocab": "vocab_size", "experts": "num_experts", "experts_per_token": "num_experts_per_tok",
    }
    model: dict[str, Any] = {}
    for ours, theirs in pairs.items():
        value = _int(cfg.get(theirs))
        if value and value > 0:
            model[ours] = value
    if model.get("experts") == 1:
        model.pop("experts")
        model.pop("experts_per_token", None)
    name = cfg.get("model_name")
    if isinstance(name, str) and name and name != "default":
        model["name"] = name
    return model or None


def training_from_config(cfg: dict[str, Any], num_chips: int) -> dict[str, Any]:
    """run.yaml ``training:`` fields: global batch = per_device_batch_size x chips, seq = max_target_length."""
    training: dict[str, Any] = {}
    pdb = cfg.get("per_device_batch_size")
    if _positive(pdb) and float(pdb) * num_chips >= 1 and float(pdb * num_chips).is_integer():
        training["global_batch"] = int(pdb * num_chips)
    seq = _int(cfg.get("max_target_length"))
    if seq and seq > 0:
        training["seq_len"] = seq
    remat = str(cfg.get("remat_policy") or "")
    if remat:
        training["remat"] = _REMAT.get(remat, "dots" if remat.startswith("save_") else None)
        if training["remat"] is None:
            training.pop("remat")
    dtype = _DTYPE.get(str(cfg.get("dtype") or ""))
    if dtype:
        training["dtype"] = dtype
    return training


def _mesh_chips(cfg: dict[str, Any]) -> int | None:
    """Chips from a fully stated mesh (every ici_*/dcn_* axis positive); None when one is -1 (the rest)."""
    values = [v for k, v in cfg.items() if isinstance(k, str) and k.endswith("_parallelism")
              and (k.startswith("ici_") or k.startswith("dcn_"))]
    ints = [_int(v) for v in values]
    if not ints or any(v is None or v < 1 for v in ints):
        return None
    product = 1
    for v in ints:
        product *= v  # type: ignore[operator]
    return product


def _topology(cfg: dict[str, Any]) -> tuple[str | None, int | None]:
    """Chip and chip count from ``compile_topology`` ("v5p-256" -> tpu-v5p, 128 chips)."""
    text = str(cfg.get("compile_topology") or "").strip().lower()
    if "-" not in text:
        return None, None
    gen, _, size = text.rpartition("-")
    if not size.isdigit():
        return None, None
    slices = _int(cfg.get("compile_topology_num_slices"))
    chips = int(size) // _TOPOLOGY_CHIPS_PER_CORE.get(gen, 1)
    return f"tpu-{gen}", chips * (slices if slices and slices > 0 else 1)


@dataclass
class Hardware:
    chip: str
    num_chips: int
    source: str  # what stated it, shown in the description


def hardware_of(folder: Path, layout: OutputLayout, cfg: dict[str, Any], where: str) -> Hardware:
    """Chip type and count: config (mesh product, compile_topology) first, then the profile's device facts."""
    chip, chips = _topology(cfg)
    if chip is None and str(cfg.get("hardware") or "").lower() == "cpu":
        chip = "cpu"  # MaxText's hardware: cpu names the chip; 'tpu'/'gpu' do not say which generation
    source = "compile_topology"
    mesh_chips = _mesh_chips(cfg)
    if mesh_chips:
        chips, source = mesh_chips, "the config's mesh"
    if chip and chips:
        return Hardware(chip, chips, source)
    kind, count = _profile_devices(folder, layout)
    chip = chip or kind
    chips = chips or count
    if chip and chips:
        return Hardware(chip, chips, "the profile's device description" if kind else source)
    missing = [n for n, v in (("chip type", chip), ("chip count", chips)) if not v]
    raise AsapError(
        f"cannot tell the {' and '.join(missing)} of this run: its config does not state them "
        "(a -1 mesh axis, no compile_topology) and its profile does not describe the devices",
        source=where,
        hint="put a run.yaml beside it (chip:, num_chips:; see docs/run-format.md), which ASAP then reads instead",
    )


def _profile_devices(folder: Path, layout: OutputLayout) -> tuple[str | None, int | None]:
    """The profile's own device facts; the small overview export when present, else the whole session."""
    if not layout.session:
        return None, None
    from bot.profiles.loader import kind_of, load_profile_files

    session = folder / layout.session
    overview = [p for p in sorted(session.iterdir()) if p.is_file() and kind_of(p) == "overview_page"]
    try:
        profile = load_profile_files(overview or [session], folder)
        if overview and not profile.device_kind:
            profile = load_profile_files([session], folder)
    except AsapError:
        return None, None
    if not profile.device_kind:
        return None, profile.num_devices
    from knowledge.hardware import get_chip

    try:
        chip = get_chip(profile.device_kind).key
    except AsapError:
        return None, profile.num_devices
    return chip, profile.num_devices


def record_from_output(folder: Path, run_id: str, *, origin: str, session: str | None = None) -> RunRecord:
    """A RunRecord for a MaxText output folder or JAX logdir already on local disk (nothing is written)."""
    layout = layout_of(folder, session=session)
    if not layout.is_output:
        raise AsapError(
            "neither run.yaml nor a MaxText/JAX output layout (config.yml, tensorboard/plugins/profile/)",
            source=origin,
        )
    cfg = _load_config(folder / layout.config) if layout.config else {}
    hw = hardware_of(folder, layout, cfg, origin)
    slices = _int(cfg.get("num_slices"))
    measured = measured_from_metrics(folder, layout.metrics)
    record: dict[str, Any] = {
        "id": run_id,
        "name": run_id,
        "description": _describe(origin, layout, hw),
        "framework": "maxtext" if layout.config else "jax",
        "chip": hw.chip,
        "num_chips": hw.num_chips,
        "num_slices": slices if slices and slices > 0 and hw.num_chips % slices == 0 else 1,
        "config": layout.config,
        "profile": [layout.session] if layout.session else [],
        "model": model_from_config(cfg),
        "training": training_from_config(cfg, hw.num_chips) or None,
        "tags": ["maxtext-output" if layout.config else "jax-logdir"],
    }
    if measured.get("step_time_ms"):
        record["measured"] = {"step_time_ms": measured["step_time_ms"]}
        if measured.get("per_device_tokens_per_sec"):
            record["measured"]["tokens_per_second"] = measured["per_device_tokens_per_sec"] * hw.num_chips
    return RunRecord.model_validate(record)


def _describe(origin: str, layout: OutputLayout, hw: Hardware) -> str:
    parts = [f"Read from {origin} ({'MaxText output layout' if layout.config else 'JAX profiler logdir'})."]
    parts.append(f"Chips ({hw.num_chips} x {hw.chip}) from {hw.source}.")
    if layout.session:
        more = f" of {len(layout.sessions)}" if len(layout.sessions) > 1 else ""
        parts.append(f"Profile session {layout.session.rsplit('/', 1)[-1]}{more} (newest unless --session).")
    parts.append(f"Metrics: {len(layout.metrics)} file(s)." if layout.metrics else "No metrics files.")
    return " ".join(parts)


def load_yaml_mapping(text: str, source: str) -> dict[str, Any]:
    """Small helper for stores that read YAML they downloaded (bounded like every YAML ASAP reads)."""
    try:
        data = yamlsafe.load(text)
    except yaml.YAMLError as exc:
        raise AsapError(f"malformed YAML: {exc}", source=source) from None
    if not isinstance(data, dict):
        raise AsapError("expected a mapping", source=source)
    return data
