"""A small deterministic stand-in for the analysis/proposal/Critic backend, for the agent-team tests.

It computes (not hard-codes) its answers from the mesh it is given: step time falls as tensor
parallelism shrinks, a mesh must multiply to the run's chips and keep tensor <= 8 to pass the Critic.
The real backend is exercised on the sample runs in tests/test_agents_samples.py.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from bot.configs.mesh import Mesh
from bot.errors import RunNotFound
from bot.runs.record import RunRecord
from bot.runs.store import Run

AXES = ("data", "fsdp", "tensor", "sequence", "expert", "pipeline")


def short(mesh: dict[str, dict[str, int]]) -> str:
    return Mesh(ici=mesh.get("ici") or {}, dcn=mesh.get("dcn") or {}).normalized().short()


class FakeBackend:
    def __init__(self, folder: Path, *, run_id: str = "123", chips: int = 64) -> None:
        self.runs = {run_id: Run(record=RunRecord(id=run_id, chip="tpu-v5p", num_chips=chips), folder=folder)}
        self.calls: list[tuple[str, Any]] = []

    def list_ids(self) -> list[str]:
        return list(self.runs)

    def load_run(self, query: str) -> Run:
        q = query.strip().lower().removeprefix("job ").removeprefix("run ")
        if q not in self.runs:
            raise RunNotFound(f"no run {q!r}", field="run", hint=f"known runs: {', '.join(self.runs)}")
        return self.runs[q]

    def _step(self, run: Run, mesh: dict[str, dict[str, int]]) -> float:
        ici = mesh.get("ici") or {}
        return round(100.0 * 64 / run.record.num_chips * (1 + 0.08 * math.log2(ici.get("tensor", 1))), 2)

    def analyze(self, run: Run) -> dict[str, Any]:
        self.calls.append(("analyze", run.id))
        return {
            "run": {"id": run.id, "name": "demo", "chip": "tpu-v5p", "chip_name": "TPU v5p", "num_chips": run.record.num_chips,
                    "num_slices": 1, "mesh": {"ici": {"fsdp": 8, "tensor": 8}, "dcn": {}}, "mesh_short": "fsdp=8 tensor=8"},
            "kpis": {"step_time_ms": 124.0, "collective_percent": 41.5, "device_duty_cycle_percent": 93.0, "mfu_percent": 31.2},
            "top_ops": [{"name": "all-reduce.3", "time_percent": 22.0, "bound_by": "ici"}],
            "diagnosis": {"bottleneck": "communication", "secondary": ["hbm"], "summary": "collectives take 41.5% of the step",
                          "evidence": [{"signal": "kpis.collective_percent", "value": 41.5,
                                        "statement": "collectives take 41.5% of the step (threshold 30%)"}],
                          "conflicts": [], "confidence": 0.82, "confidence_reasons": ["profile has per-op timings"],
                          "scores": {"communication": 0.415, "compute": 0.4}},
            "unavailable": ["measured HBM peak"], "warnings": [],
        }

    def _proposal(self, run: Run, rank: int, mesh: dict[str, dict[str, int]], conf: float) -> dict[str, Any]:
        step = self._step(run, mesh)
        base = self._step(run, {"ici": {"fsdp": 8, "tensor": 8}})
        pct = round(100 * (step - base) / base, 1)
        return {"rank": rank, "mesh": mesh, "mesh_short": short(mesh), "kind": "fsdp+ tensor-",
                "predicted": {"step_time_ms": step, "step_time_low_ms": step * 0.9, "step_time_high_ms": step * 1.1,
                              "uncertainty": 0.1, "memory_per_chip_bytes": 40e9 + 2e9 * rank, "memory_capacity_bytes": 96e9,
                              "fits_memory": True},
                "change": {"step_time_percent": pct, "speedup": round(base / step, 3), "within_noise": abs(pct) < 10},
                "labels": [], "rationale": f"shift tensor to fsdp (rank {rank})", "tradeoffs": ["more weight all-gathers"],
                "confidence": conf, "confidence_reasons": ["calibrated against the measured step"], "critic": []}

    def propose(self, run: Run, k: int = 3) -> dict[str, Any]:
        self.calls.append(("propose", k))
        props = [self._proposal(run, 1, {"ici": {"fsdp": 32, "tensor": 2}, "dcn": {}}, 0.7),
                 self._proposal(run, 2, {"ici": {"fsdp": 16, "tensor": 4}, "dcn": {}}, 0.6),
                 self._proposal(run, 3, {"ici": {"fsdp": 64}, "dcn": {}}, 0.4)][:k]
        return {"run_id": run.id, "verdict": "improve", "summary": "move tensor parallelism to FSDP",
                "baseline": {"mesh_short": "fsdp=8 tensor=8"}, "proposals": props, "advice": [],
                "notes": [], "missing_info": ["measured HBM peak"]}

    def critique(self, run: Run, mesh: dict[str, dict[str, int]]) -> dict[str, Any]:
        self.calls.append(("critique", short(mesh)))
        n = math.prod((mesh.get("ici") or {}).values()) * math.prod((mesh.get("dcn") or {}).values())
        product_ok = n == run.record.num_chips
        tensor_ok = (mesh.get("ici") or {}).get("tensor", 1) <= 8
        checks = [{"name": "product", "passed": product_ok, "hard": True,
                   "reason": f"axes multiply to {n}, the run has {run.record.num_chips} chips"},
                  {"name": "diagnosis", "passed": tensor_ok, "hard": True,
                   "reason": "tensor > 8 adds per-layer collectives to a communication-bound run" if not tensor_ok else "ok"}]
        return {"mesh": mesh, "mesh_short": short(mesh), "checks": checks, "ok": product_ok and tensor_ok}

    def rank_meshes(self, run: Run, limit: int = 40) -> tuple[int, list[tuple[dict[str, dict[str, int]], dict[str, Any]]]]:
        self.calls.append(("rank", run.record.num_chips))
        n = run.record.num_chips
        meshes = [{"ici": {"fsdp": n // t, "tensor": t} if t > 1 else {"fsdp": n}, "dcn": {}} for t in (1, 2, 4, 8, 16) if n % t == 0]
        ranked = sorted(((m, {"step_time_ms": self._step(run, m), "memory_per_chip_bytes": 30e9}) for m in meshes),
                        key=lambda t: t[1]["step_time_ms"])
        return len(meshes), ranked[:limit]
