"""DeepSpeed's ZeRO stage as a proposal lever: one stage up (less memory) or one down (less communication).

What a stage costs and saves (Rajbhandari et al. 2019, "ZeRO", arXiv:1910.02054):

* memory, §5 and Figure 1: over N_d data-parallel ranks, mixed-precision Adam (K = 12) keeps per GPU
  4Ψ + KΨ/N_d bytes of model state at stage 1 (P_os), 2Ψ + (2+K)Ψ/N_d at stage 2 (P_os+g) and
  (4+K)Ψ/N_d at stage 3 (P_os+g+p); :func:`knowledge.cost_shapes._deepspeed_state` prices it;
* communication, §7: stages 1 and 2 move data parallelism's 2Ψ per step (the gradient reduce-scatter
  replaces the all-reduce's first half, the parameter all-gather its second), stage 3 gathers the parameters
  in forward and again in backward: 3Ψ, 1.5x (§7.2.2); :func:`knowledge.cost_core._collectives` prices it,
  with DeepSpeed's engine reducing at every micro-batch from stage 2 on.

So the lever is proposed one step at a time (1 -> 2, 2 -> 3 where memory is tight; 3 -> 2, 2 -> 1 where
memory has room and communication is exposed: the playbook rules in ``playbooks/memory.md``), every proposal
priced by the cost model like any other candidate and checked by the Critic. DeepSpeed's constraints:

* its pipeline engine refuses stages 2 and 3 ("ZeRO-2 and ZeRO-3 are incompatible with pipeline
  parallelism", microsoft/DeepSpeed ``deepspeed/runtime/pipe/engine.py``): no stage >= 2 with pipeline > 1;
* ``offload_param`` exists only at stage 3: a run that offloads its parameters is not lowered;
* a ds_config JSON is read as data parallelism at stages 0-2 and as parameter sharding over every GPU (the
  ``fsdp`` axis) at stage 3 (:mod:`bot.configs.deepspeed`): a change across 2 <-> 3 carries the mesh with it
  (``SettingsChange.only_mesh``), and the edit writes only the ``"stage"`` value.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bot.configs.mesh import Mesh

if TYPE_CHECKING:
    from bot.proposals.moves import SettingsMove
    from bot.proposals.settings import SettingsChange

KIND_UP, KIND_DOWN = "zero-stage+", "zero-stage-"
SHARDS = {0: "nothing", 1: "the optimizer state", 2: "the optimizer state and the gradients",
          3: "the optimizer state, the gradients and the parameters"}
MEMORY_TERMS = ("weights", "gradients", "optimizer")
"""The model state a ZeRO stage shards (the rest of memory, activations, does not move with it)."""


def stage_changes(move: SettingsMove, *, settings: Any | None, config: Any | None, base: Mesh | None
                  ) -> list[SettingsChange]:
    """The neighbouring ZeRO stage ``move`` points to, as a settings change riding on ``base``; [] when the run
    is not DeepSpeed, its stage is unknown, or DeepSpeed would refuse the new stage (module docstring)."""
    from bot.proposals.settings import SettingsChange

    if settings is None or not settings.deepspeed or settings.zero_stage is None or config is None or base is None:
        return []
    old = int(settings.zero_stage)
    new = old + 1 if move.direction == "up" else old - 1
    if not (0 < new <= 3) or move.direction not in ("up", "down"):
        return []  # stage 0 saves no communication over stage 1 (both 2Ψ, ZeRO §7.2.1): never proposed
    if new >= 2 and base.size("pipeline") > 1:
        return []
    if old == 3 and settings.param_offload:
        return []
    where = "zero_optimization.stage" if config.format == "deepspeed" else "ZeRO stage"
    return [SettingsChange(
        values=(("zero_stage", new),),
        words=(f"{where} {old} -> {new}",),
        tradeoffs=_tradeoffs(old, new),
        kind=KIND_UP if new > old else KIND_DOWN,
        config_values={"zero_stage": new},
        only_mesh=mesh_for(config, base, new),
    )]


def mesh_for(config: Any, base: Mesh, stage: int) -> Mesh:
    """The mesh ASAP reads the config as once it states ``stage``: a ds_config JSON's data-parallel GPUs move to
    the ``fsdp`` axis at stage 3 and back to ``data`` below it; any other config keeps ``base``."""
    if getattr(config, "format", None) != "deepspeed":
        return base
    axis = "fsdp" if stage == 3 else "data"

    def moved(sizes: dict[Any, int]) -> dict[Any, int]:
        out = {a: v for a, v in sizes.items() if a not in ("data", "fsdp") and v > 1}
        n = sizes.get("data", 1) * sizes.get("fsdp", 1)
        return {**out, axis: n} if n > 1 else out

    return Mesh(ici=moved(dict(base.ici)), dcn=moved(dict(base.dcn)))


def _tradeoffs(old: int, new: int) -> tuple[str, ...]:
    """What the step costs beyond the predicted time and memory (those the proposal states)."""
    if new < old:
        what = {2: "the parameters", 1: "the gradients"}[new]
        return (f"more memory per GPU: stage {new} keeps {what} replicated on every data-parallel rank again (ZeRO "
                "§5, Figure 1); a later growth of the model or batch has less room",)
    if new == 3:
        return ("ZeRO-3 all-gathers every layer's parameters in forward and again in backward, for every "
                "micro-batch: 1.5x data parallelism's traffic per step (ZeRO §7.2.2); it hides behind compute only "
                "with enough tokens per GPU",)
    if new == 2:
        return ("ZeRO-2 reduce-scatters the gradients at every micro-batch, not only at the accumulation boundary "
                "(DeepSpeed engine.py allreduce_gradients): with gradient accumulation it sends more than ZeRO-1; "
                "DeepSpeed's pipeline engine refuses it with pipeline parallelism",)
    return ("ZeRO-1 moves the same 2Ψ per step as data parallelism (ZeRO §7.2.1): its cost is the optimizer step "
            "running on each rank's partition, then an all-gather of the updated parameters",)


def stage_sentence(change: SettingsChange, pred: Any | None, base_pred: Any | None) -> str | None:
    """The memory and step-time change the cost model predicts for a ZeRO stage change, with its sources."""
    if change.kind not in (KIND_UP, KIND_DOWN) or pred is None or base_pred is None:
        return None
    new = int(dict(change.values)["zero_stage"])
    old = new - 1 if change.kind == KIND_UP else new + 1
    state = [sum(p.memory_breakdown_bytes.get(k, 0.0) for k in MEMORY_TERMS) for p in (base_pred, pred)]
    mem = [base_pred.memory_per_chip_bytes, pred.memory_per_chip_bytes]
    step = [base_pred.step_time_ms, pred.step_time_ms]
    pct = 100.0 * (step[1] - step[0]) / step[0] if step[0] else 0.0
    if 3 in (old, new):
        volume = "stage 3 gathers the parameters for every forward and backward: 3Ψ per step against 2Ψ (§7.2.2)"
    else:
        volume = ("stages 1 and 2 both move 2Ψ per step (§7.2.1), but from stage 2 on DeepSpeed reduce-scatters at "
                  "every micro-batch, so gradient accumulation multiplies it")
    return (f"ZeRO stage {old} -> {new}: stage {max(old, new)} shards {SHARDS[max(old, new)]} over the data-parallel "
            f"ranks, model state {state[0] / 1e9:.1f} -> {state[1] / 1e9:.1f} GB per GPU (memory {mem[0] / 1e9:.1f} -> "
            f"{mem[1] / 1e9:.1f} GB; ZeRO §5, Figure 1); predicted step {step[0]:.1f} -> {step[1]:.1f} ms "
            f"({pct:+.1f}%): {volume} (Rajbhandari et al. 2019, arXiv:1910.02054).")
