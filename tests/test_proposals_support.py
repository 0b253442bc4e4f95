"""Builders for proposal tests: run folders on disk and analysis reports with a chosen diagnosis.

Reports are built directly from the stable :class:`AnalysisReport` contract, so a test states the
diagnosis ("communication-bound, 45% of a 900 ms step in collectives") and the engine calibrates on it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from bot.analysis.report import AnalysisReport, Diagnosis, Evidence, Kpis, RunSummary
from bot.configs.mesh import Mesh
from bot.runs.store import LocalRunStore, Run
from knowledge.hardware import get_chip

LLAMA_8B = {
    "name": "llama3-8b",
    "layers": 32,
    "d_model": 4096,
    "d_ff": 14336,
    "heads": 32,
    "kv_heads": 8,
    "vocab": 128256,
}
LLAMA_70B = {
    "name": "llama3-70b",
    "layers": 80,
    "d_model": 8192,
    "d_ff": 28672,
    "heads": 64,
    "kv_heads": 8,
    "vocab": 128256,
}


def maxtext_config(ici: dict[str, int], dcn: dict[str, int] | None = None, per_device_batch: float = 4) -> str:
    """A MaxText-style config text with a comment, so edits can be checked to keep other lines."""
    lines = ["# training config", f"per_device_batch_size: {per_device_batch:g}", "remat_policy: full"]
    for axis in ("data", "fsdp", "tensor", "sequence"):
        lines.append(f"ici_{axis}_parallelism: {ici.get(axis, 1)}")
    for axis, v in (dcn or {}).items():
        lines.append(f"dcn_{axis}_parallelism: {v}")
    return "\n".join(lines) + "\n"


def make_run(
    root: Path,
    *,
    run_id: str = "r1",
    chip: str = "tpu-v5p",
    num_chips: int = 64,
    num_slices: int = 1,
    ici: dict[str, int] | None = None,
    dcn: dict[str, int] | None = None,
    config_text: str | None = None,
    model: dict[str, Any] | None = LLAMA_8B,
    training: dict[str, Any] | None = None,
    step_ms: float = 1000.0,
    failures: list[dict[str, Any]] | None = None,
) -> Run:
    folder = root / run_id
    folder.mkdir(parents=True, exist_ok=True)
    # per_device_batch_size x chips = the global batch run.yaml states (MaxText: the config is what ran)
    gbatch = (training or {}).get("global_batch", 256)
    text = config_text or maxtext_config(ici or {"fsdp": num_chips}, dcn, per_device_batch=gbatch / num_chips)
    (folder / "mesh.yml").write_text(text, encoding="utf-8")
    body: dict[str, Any] = {
        "id": run_id,
        "chip": chip,
        "num_chips": num_chips,
        "num_slices": num_slices,
        "config": "mesh.yml",
        "measured": {"step_time_ms": step_ms},
    }
    if model is not None:
        body["model"] = model
        body["training"] = training or {"global_batch": 256, "seq_len": 4096, "remat": "full"}
    (folder / "run.yaml").write_text(yaml.safe_dump(body), encoding="utf-8")
    if failures is not None:
        (folder / "failures.yaml").write_text(yaml.safe_dump({"schema_version": 1, "failures": failures}), encoding="utf-8")
    return LocalRunStore(root).get(run_id)


def make_report(
    run: Run,
    mesh: Mesh,
    bottleneck: str,
    *,
    step_ms: float = 1000.0,
    collective_pct: float = 10.0,
    host_pct: float = 0.0,
    idle_pct: float = 0.0,
    confidence: float = 0.85,
) -> AnalysisReport:
    rec = run.record
    chip = get_chip(rec.chip)
    device = 100.0 - collective_pct - host_pct - idle_pct
    return AnalysisReport(
        run=RunSummary(
            id=rec.id, name=rec.name, chip=chip.key, chip_name=chip.display_name, num_chips=rec.num_chips,
            num_slices=rec.num_slices, mesh={"ici": dict(mesh.ici), "dcn": dict(mesh.dcn)}, mesh_short=mesh.short(),
            config_format="maxtext", model=rec.model.name if rec.model else None,
            params=rec.model.derived_params() if rec.model else None, profile_sources=[],
        ),
        kpis=Kpis(
            step_time_ms=step_ms, step_time_source="measured", device_duty_cycle_percent=100.0 - host_pct - idle_pct,
            collective_percent=collective_pct, host_wait_percent=host_pct,
            compute_bound_percent=device if bottleneck == "compute" else device / 4,
            hbm_bound_percent=device if bottleneck == "hbm" else device / 4, idle_percent=idle_pct,
            mfu_percent=None, achieved_tflops_per_chip=None, hbm_used_bytes=None, hbm_capacity_bytes=chip.hbm_bytes,
            hbm_use_percent=None, tokens_per_second=None,
        ),
        top_ops=[],
        diagnosis=Diagnosis(
            bottleneck=bottleneck,  # type: ignore[arg-type]
            secondary=[],
            summary=f"{bottleneck}-bound (constructed for a test)",
            evidence=[Evidence(signal="kpis.collective_percent", value=collective_pct, statement="constructed")],
            conflicts=[],
            confidence=confidence,
            confidence_reasons=["constructed"],
            scores={bottleneck: 0.6},
        ),
        unavailable=[],
        warnings=[],
    )
