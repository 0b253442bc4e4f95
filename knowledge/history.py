"""Optimization history: what was changed in a sharding config, on which run, and what it did.

A :class:`HistoryRecord` is one change (a commit, a merged pull request, or a proposal ASAP applied) with
the config before and after, the run IDs it mentions, measured metrics, the outcome — including failures
(out of memory, invalid mesh) — and the facts retrieval filters on (chip family, chip count, model size
band, bottleneck). Records live in a JSONL file under ``ASAP_STATE_DIR`` (default ``.asap/``), one record a
line, keyed by a stable ``id`` so re-importing the same source updates rather than duplicates.

Also here: the small, tested text extractors the sources share (run IDs, "step 812ms -> 640ms" metrics,
OOM / invalid markers, bottleneck words, chip names, model size) and config snapshots from config text.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bot.configs.mesh import Mesh
from bot.errors import AsapError

Source = Literal["git", "github", "applied"]
Outcome = Literal["improved", "regressed", "neutral", "oom", "invalid", "pending", "unknown"]
Bottleneck = Literal["compute", "hbm", "communication", "host"]
ChipFamily = Literal["tpu", "gpu", "cpu"]
SizeBand = Literal["lt1b", "1-10b", "10-100b", "gt100b"]
Scalar = str | int | float | bool | None

NEUTRAL_BAND = 0.02
"""Step-time changes within +-2% count as neutral (inside run-to-run noise)."""

HISTORY_FILE = "history.jsonl"


def state_dir() -> Path:
    """``$ASAP_STATE_DIR`` or ``.asap`` in the working directory: where history and the index live."""
    return Path(os.environ.get("ASAP_STATE_DIR") or ".asap")


class ConfigSnapshot(BaseModel):
    """A sharding config at one point in time: the mesh keys as written and, when resolvable, the mesh."""

    model_config = ConfigDict(extra="forbid")
    path: str = Field(description="config file path inside the repository")
    format: str | None = Field(default=None, description="maxtext | ici_mesh | megatron | keys (fallback scan)")
    keys: dict[str, int] = Field(default_factory=dict, description="mesh key as written -> value (-1 = the rest)")
    mesh: Mesh | None = Field(default=None, description="resolved mesh when the device count is known")
    settings: dict[str, Scalar] = Field(default_factory=dict, description="remat, micro-batch, ... when present")


class Metrics(BaseModel):
    """Measured (or predicted) figures of one run."""

    model_config = ConfigDict(extra="forbid")
    step_time_ms: float | None = Field(default=None, gt=0)
    tokens_per_second: float | None = Field(default=None, gt=0)
    mfu_percent: float | None = Field(default=None, ge=0, le=100)
    memory_per_chip_bytes: float | None = Field(default=None, gt=0)
    oom: bool | None = Field(default=None, description="true when the run ran out of memory")


class HistoryRecord(BaseModel):
    """One past sharding change and what happened."""

    model_config = ConfigDict(extra="forbid")
    id: str = Field(min_length=1, description="stable id: git:<sha>:<path>, github:<owner/repo>#<n>, applied:<run>")
    source: Source
    title: str
    summary: str = ""
    link: str | None = Field(default=None, description="PR URL, commit reference or run link a person can open")
    commit: str | None = None
    pr_url: str | None = None
    date: str | None = Field(default=None, description="ISO-8601")
    run_ids: list[str] = Field(default_factory=list, description="runs mentioned: the run before, the run after")
    before: ConfigSnapshot | None = None
    after: ConfigSnapshot | None = None
    mesh_change: str | None = Field(default=None, description="e.g. 'ici.tensor 4->2, ici.fsdp 16->32'")
    kind: str | None = Field(default=None, description="dominant change, as bot.proposals.kinds.kind_of says")
    before_metrics: Metrics | None = None
    after_metrics: Metrics | None = None
    predicted: Metrics | None = Field(default=None, description="applied proposals: what ASAP predicted")
    outcome: Outcome = "unknown"
    chip: str | None = None
    chip_family: ChipFamily | None = None
    chip_count: int | None = Field(default=None, gt=0)
    size_band: SizeBand | None = None
    bottleneck: Bottleneck | None = None
    proposal_id: str | None = Field(default=None, description="applied: proposal rank/id within its analysis")
    rule_id: str | None = Field(default=None, description="applied: the playbook move it came from")

    @property
    def ref(self) -> str:
        """What a proposal cites: the PR URL, else the link, else the commit."""
        return self.pr_url or self.link or (f"commit {self.commit}" if self.commit else self.id)

    def text(self) -> str:
        """The searchable text: title, summary, the change, outcome, metrics and facts in words."""
        parts = [self.title, self.summary]
        if self.mesh_change:
            parts.append(f"Mesh change: {self.mesh_change}.")
        if self.kind:
            parts.append(f"Kind: {self.kind.replace('->', ' to ')}.")
        for label, snap in (("Before", self.before), ("After", self.after)):
            if snap is not None and snap.mesh is not None:
                parts.append(f"{label} mesh: {snap.mesh.short()}.")
        parts.append(f"Outcome: {self.outcome}{' out of memory' if self.outcome == 'oom' else ''}.")
        if self.bottleneck:
            parts.append(f"Bottleneck: {self.bottleneck}-bound.")
        facts = [x for x in (self.chip, self.chip_family, f"{self.chip_count} chips" if self.chip_count else None) if x]
        if facts:
            parts.append("Hardware: " + ", ".join(facts) + ".")
        if self.before_metrics and self.after_metrics:
            b, a = self.before_metrics.step_time_ms, self.after_metrics.step_time_ms
            if b and a:
                parts.append(f"Step time {b:g} ms to {a:g} ms.")
        if self.run_ids:
            parts.append("Runs: " + ", ".join(self.run_ids) + ".")
        return " ".join(p for p in parts if p)

    def step_change(self) -> float | None:
        """Relative step-time change after/before - 1 (negative = faster), when both are measured."""
        if self.before_metrics and self.after_metrics:
            b, a = self.before_metrics.step_time_ms, self.after_metrics.step_time_ms
            if b and a:
                return a / b - 1.0
        return None


# ----------------------------------------------------------------------------------------------- store


class HistoryStore:
    """History records in ``<state dir>/history.jsonl``, upserted by id (the last write of an id wins)."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = Path(root) if root is not None else state_dir()
        self.path = self.root / HISTORY_FILE

    def load(self) -> list[HistoryRecord]:
        """Every record, in first-written order; a bad line is an error naming the file and line."""
        if not self.path.is_file():
            return []
        by_id: dict[str, HistoryRecord] = {}
        with self.path.open(encoding="utf-8") as fh:
            for no, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    rec = HistoryRecord.model_validate_json(line)
                except ValidationError as exc:
                    err = exc.errors()[0]
                    field = ".".join(str(p) for p in err["loc"]) or "(line)"
                    raise AsapError(f"line {no}: {err['msg']}", source=str(self.path), field=field) from None
                by_id[rec.id] = rec
        return list(by_id.values())

    def get(self, record_id: str) -> HistoryRecord | None:
        return next((r for r in self.load() if r.id == record_id), None)

    def upsert(self, records: Iterable[HistoryRecord]) -> int:
        """Add or replace records by id; returns how many were new or changed. Rewrites the file atomically."""
        current = {r.id: r for r in self.load()}
        changed = 0
        for rec in records:
            old = current.get(rec.id)
            if old is None or old.model_dump() != rec.model_dump():
                current[rec.id] = rec
                changed += 1
        if changed:
            self.root.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".jsonl.tmp")
            with tmp.open("w", encoding="utf-8") as fh:
                for rec in current.values():
                    fh.write(rec.model_dump_json(exclude_none=True) + "\n")
            tmp.replace(self.path)
        return changed


# ------------------------------------------------------------------------------------------ extractors

_RUN_ID = re.compile(r"\b(?:run|job)(?:\s+id)?[\s#:=-]*(?!(?:run|job)\b)(\d[\w.-]*\w|\d|[A-Za-z][\w.-]*\d[\w.-]*\w?)", re.I)
_NUM = r"(\d+(?:\.\d+)?)"
_STEP = re.compile(
    rf"step(?:\s*time)?\D{{0,12}}?{_NUM}\s*(ms|s)\b\s*(?:->|→|=>|to)\s*{_NUM}\s*(ms|s)\b", re.I
)
_MFU = re.compile(rf"mfu\D{{0,12}}?{_NUM}\s*%?\s*(?:->|→|=>|to)\s*{_NUM}\s*%", re.I)
_TOKS = re.compile(
    rf"{_NUM}\s*([kmb]?)\s*(?:tok(?:en)?s?/s(?:ec)?)\s*(?:->|→|=>|to)\s*{_NUM}\s*([kmb]?)\s*tok", re.I
)
_OOM = re.compile(r"\b(?:OOM|OOMs|OOMed|out of memory|out-of-memory|RESOURCE_EXHAUSTED|resource exhausted)\b", re.I)
_INVALID = re.compile(
    r"\b(?:invalid (?:mesh|config|sharding)|does not divide|not divisible|mesh (?:does not|doesn't) multiply)\b", re.I
)
_BOTTLENECK: tuple[tuple[Bottleneck, re.Pattern[str]], ...] = (
    ("communication", re.compile(r"\b(?:comm(?:unication)?[- ]bound|collective[- ]bound|ici[- ]bound|dcn[- ]bound)", re.I)),
    ("hbm", re.compile(r"\b(?:hbm[- ]bound|memory[- ]bound|memory[- ]bandwidth[- ]bound|bandwidth[- ]bound)", re.I)),
    ("compute", re.compile(r"\b(?:compute[- ]bound|mxu[- ]bound|flops?[- ]bound)", re.I)),
    ("host", re.compile(r"\b(?:input[- ]bound|host[- ]bound|infeed[- ]bound|input pipeline)", re.I)),
)
_CHIPS = re.compile(r"\b(\d{1,6})\s*(?:x\s*)?(?:chips|gpus|devices|tpus|accelerators)\b", re.I)
_SIZE = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)\s?([bm])(?:\b|(?=[-_]))", re.I)


def run_ids_in(text: str) -> list[str]:
    """Run IDs a message mentions: ``run 123``, ``job-456``, ``run #78``, ``run llama-8b-1`` (needs a digit)."""
    out: list[str] = []
    for m in _RUN_ID.finditer(text):
        rid = m.group(1).rstrip(".-")
        if rid and any(c.isdigit() for c in rid) and rid not in out:
            out.append(rid)
    return out


def _to_ms(value: str, unit: str) -> float:
    return float(value) * (1000.0 if unit.lower() == "s" else 1.0)


def _scale(value: str, suffix: str) -> float:
    return float(value) * {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9}[suffix.lower()]


def metrics_in(text: str) -> tuple[Metrics | None, Metrics | None]:
    """Before/after metrics stated in a message (``step 812ms -> 640ms``, ``MFU 38% -> 47%``, ``1.2M tok/s -> ...``)."""
    before: dict[str, float | bool] = {}
    after: dict[str, float | bool] = {}
    if m := _STEP.search(text):
        before["step_time_ms"], after["step_time_ms"] = _to_ms(m.group(1), m.group(2)), _to_ms(m.group(3), m.group(4))
    if m := _MFU.search(text):
        b, a = float(m.group(1)), float(m.group(2))
        if b <= 100 and a <= 100:
            before["mfu_percent"], after["mfu_percent"] = b, a
    if m := _TOKS.search(text):
        before["tokens_per_second"] = _scale(m.group(1), m.group(2))
        after["tokens_per_second"] = _scale(m.group(3), m.group(4))
    if _OOM.search(text):
        after["oom"] = True
    return (Metrics(**before) if before else None, Metrics(**after) if after else None)  # type: ignore[arg-type]


def outcome_of(text: str, before: Metrics | None, after: Metrics | None) -> Outcome:
    """oom / invalid when the message says so, else from step time (then tokens/s, MFU): +-2% is neutral."""
    if (after and after.oom) or _OOM.search(text):
        return "oom"
    if _INVALID.search(text):
        return "invalid"
    if before and after:
        for attr, lower_is_better in (("step_time_ms", True), ("tokens_per_second", False), ("mfu_percent", False)):
            b, a = getattr(before, attr), getattr(after, attr)
            if b and a:
                rel = a / b - 1.0
                if abs(rel) <= NEUTRAL_BAND:
                    return "neutral"
                return "improved" if (rel < 0) == lower_is_better else "regressed"
    return "unknown"


def bottleneck_in(text: str) -> Bottleneck | None:
    """The bottleneck a message names (``comm-bound``, ``HBM-bound``, ``input pipeline`` ...), first match wins."""
    hits = [(m.start(), b) for b, pat in _BOTTLENECK if (m := pat.search(text))]
    return min(hits)[1] if hits else None


@lru_cache(maxsize=1)
def _chip_aliases() -> list[tuple[re.Pattern[str], str, str]]:
    from knowledge.hardware import load_catalog

    out = []
    for key, chip in load_catalog().items():
        if chip.family == "cpu":
            continue
        for name in sorted({key, chip.display_name, *chip.aliases}, key=len, reverse=True):
            if len(name) >= 3:
                out.append((re.compile(rf"(?<![\w]){re.escape(name)}(?![\w])", re.I), key, chip.family))
    return out


def chip_in(text: str) -> tuple[str | None, ChipFamily | None]:
    """The catalog chip a message names (``v5p``, ``H100``), with its family."""
    best: tuple[int, str, str] | None = None
    for pat, key, family in _chip_aliases():
        m = pat.search(text)
        if m and (best is None or m.start() < best[0]):
            best = (m.start(), key, family)
    return (best[1], best[2]) if best else (None, None)  # type: ignore[return-value]


def chip_count_in(text: str) -> int | None:
    """``256 chips`` / ``64 GPUs`` -> the count."""
    m = _CHIPS.search(text)
    return int(m.group(1)) if m and int(m.group(1)) > 0 else None


def size_band(params: float) -> SizeBand:
    """Model size band by parameter count: lt1b, 1-10b, 10-100b, gt100b."""
    if params < 1e9:
        return "lt1b"
    if params < 1e10:
        return "1-10b"
    if params < 1e11:
        return "10-100b"
    return "gt100b"


def size_band_in(text: str) -> SizeBand | None:
    """Model size from ``8B``, ``llama2-70b``, ``350M`` in a message or model name."""
    for m in _SIZE.finditer(text):
        value, unit = float(m.group(1)), m.group(2).lower()
        params = value * (1e9 if unit == "b" else 1e6)
        if 1e7 <= params <= 1e13:
            return size_band(params)
    return None


# --------------------------------------------------------------------------------------- config snapshots

_MESH_KEY = re.compile(
    r"^\s*((?:ici|dcn)_(?:data|fsdp|fsdp_transpose|tensor|tensor_sequence|sequence|context|expert|pipeline|autoregressive)"
    r"_parallelism|tensor_model_parallel_size|pipeline_model_parallel_size|context_parallel_size|"
    r"expert_model_parallel_size)\s*:\s*(-?\d+)\b",
    re.M,
)


def snapshot(text: str, path: str, num_devices: int | None = None) -> ConfigSnapshot | None:
    """The mesh keys of a config's text (None when it has none), resolved to a mesh where possible.

    Uses ``bot.configs.detect.parse_config`` (all three formats); a file it refuses falls back to a scan
    for the known MaxText/Megatron keys, so a history of half-broken configs is still readable.
    """
    try:
        from bot.configs.detect import parse_config

        cfg = parse_config(text, source=path)
    except AsapError:
        cfg = None
    except ImportError:  # pragma: no cover - the config parser ships with ASAP
        cfg = None
    if cfg is not None:
        keys = {(f"{k.group}_mesh.{k.key}" if cfg.format == "ici_mesh" else k.key): k.value for k in cfg.keys}
        snap = ConfigSnapshot(path=path, format=cfg.format, keys=keys, settings=dict(cfg.settings))
        snap.mesh = _resolve(cfg, keys, num_devices)
        return snap
    found = {m.group(1): int(m.group(2)) for m in _MESH_KEY.finditer(text)}
    return ConfigSnapshot(path=path, format="keys", keys=found) if found else None


def _resolve(cfg: object, keys: dict[str, int], num_devices: int | None) -> Mesh | None:
    explicit = [v for v in keys.values() if v > 0]
    if num_devices is None:
        if any(v == -1 for v in keys.values()) or cfg.format in ("megatron", "torchtitan"):  # type: ignore[attr-defined]
            return None
        num_devices = 1
        for v in explicit:
            num_devices *= v
    slices = 1
    for k, v in keys.items():
        if k.startswith("dcn") and v > 0:
            slices *= v
    try:
        return cfg.mesh(num_devices, slices)  # type: ignore[attr-defined]
    except AsapError:
        try:
            return cfg.mesh(num_devices, 1)  # type: ignore[attr-defined]
        except AsapError:
            return None


def describe_change(before: ConfigSnapshot | None, after: ConfigSnapshot | None) -> tuple[str | None, str | None]:
    """``('ici.tensor 4->2, ici.fsdp 16->32', 'tensor->fsdp')`` from two snapshots (kind needs both meshes)."""
    if before is None and after is None:
        return None, None
    kind = None
    if before and after and before.mesh is not None and after.mesh is not None:
        from bot.proposals.kinds import kind_of

        kind = kind_of(before.mesh, after.mesh)
        parts = []
        for net in ("ici", "dcn"):
            old, new = getattr(before.mesh, net), getattr(after.mesh, net)
            for axis in sorted(set(old) | set(new), key=str):
                if old.get(axis, 1) != new.get(axis, 1):
                    parts.append(f"{net}.{axis} {old.get(axis, 1)}->{new.get(axis, 1)}")
        return ", ".join(parts) or "unchanged", kind
    b = before.keys if before else {}
    a = after.keys if after else {}
    parts = [f"{k} {b.get(k, '-')}->{a.get(k, '-')}" for k in sorted(set(b) | set(a)) if b.get(k) != a.get(k)]
    return ", ".join(parts) or "unchanged", kind


def to_json_line(record: HistoryRecord) -> str:
    """One JSONL line (helper for tools that append without the store)."""
    return json.dumps(record.model_dump(mode="json", exclude_none=True), sort_keys=True)
