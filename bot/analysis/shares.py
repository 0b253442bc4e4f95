"""One attribution of the step to resources, read by the KPI table, the headline and the evidence alike.

Every figure a person sees about *where the step goes* (``kpis.compute_bound_percent``,
``kpis.hbm_bound_percent``, ``kpis.collective_percent``, ``diagnosis.scores`` and the headline built
from them) comes from :func:`step_shares`, so they cannot disagree.

Which source leads:

* **ops** — the op table, normalised to one step by the window it covers (steps x step time), when the
  visible ops cover most of the step (:data:`LOW_COVERAGE`). Each op's time goes where the profile's own
  ``bound_by`` puts it (:mod:`bot.analysis.roofline`).
* **profile** — the profiler's own step breakdown (overview ``device_duty_cycle_percent`` and its
  device-collectives time) when the visible ops cover only a small share of the step (a top-N export):
  five ops covering 10% of the step cannot outvote the profiler's measurement of the whole step. The
  visible ops then only split the busy, non-collective time between compute and HBM, and say so.
* **breakdown only** — no op rows: busy time outside collectives cannot be split into compute and HBM;
  :attr:`StepShares.busy_undetermined` makes the headline say so instead of claiming "compute-bound".
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bot.analysis.roofline import Attribution
from bot.profiles.model import Profile

RESOURCES = ("compute", "hbm", "communication", "host")
LOW_COVERAGE = 0.5  # visible ops under half the step: the profiler's step breakdown leads


@dataclass
class StepShares:
    """Share of the step (0..1) per resource, with where it came from and how much the ops cover."""

    scores: dict[str, float]
    source: str  # ops | profile | breakdown | none
    coverage: float | None  # visible busy op time / (duty cycle x steps x step time); None when the window is unknown
    busy_undetermined: bool = False  # device busy time could not be split between compute and HBM
    notes: list[str] = field(default_factory=list)

    @property
    def percent(self) -> dict[str, float]:
        return {r: round(100.0 * v, 2) for r, v in self.scores.items()}


@dataclass(frozen=True)
class StepFacts:
    """The step-level measurements the attribution combines with the ops (percent of the step)."""

    duty_percent: float | None
    idle_percent: float | None
    host_wait_percent: float | None
    profile_comm_percent: float | None
    window_us: float | None  # steps x step time, when both are known
    denominator_us: float  # what op shares are taken of (the window, or op time when ops overlap)


def _op_split(att: Attribution, denom: float, notes: list[str]) -> dict[str, float]:
    """Op-based shares of compute, HBM and communication, with ops lacking roofline data split pro rata."""
    s = {"compute": att.compute_us / denom, "hbm": att.hbm_us / denom, "communication": att.collective_us / denom}
    uncl = att.unclassified_compute_us / denom
    if uncl > 0:
        hbm_data = max(0.0, att.hbm_us - att.hbm_kind_us)
        known = att.compute_us + hbm_data
        if known > 0:
            s["compute"] += uncl * att.compute_us / known
            s["hbm"] += uncl * hbm_data / known
            notes.append(
                f"{100 * uncl:.1f}% of the step is in ops with no FLOPs/bytes; split between compute and HBM in "
                "the proportion of the ops with roofline data"
            )
        else:
            s["compute"] += uncl
            notes.append(
                f"{100 * uncl:.1f}% of the step is in ops with no FLOPs/bytes; counted as compute (the device is "
                "busy on its own work), but compute vs HBM cannot be told apart"
            )
    return s


def _from_breakdown(att: Attribution, facts: StepFacts, op: dict[str, float] | None, notes: list[str]) -> tuple[dict[str, float], bool]:
    """Shares from the profiler's step breakdown; visible ops (``op``) only split busy time compute/HBM."""
    s = dict.fromkeys(RESOURCES, 0.0)
    comm = facts.profile_comm_percent
    if comm is not None:
        s["communication"] = comm / 100.0
    elif op is not None:
        s["communication"] = op["communication"]
        notes.append("the profile has no collective time of its own: the visible collectives' share is a lower bound")
    undetermined = False
    if facts.duty_percent is not None:
        busy = max(0.0, facts.duty_percent / 100.0 - s["communication"])
        device = (op["compute"] + op["hbm"]) if op is not None else 0.0
        if device > 0:
            s["compute"] = busy * op["compute"] / device  # type: ignore[index]
            s["hbm"] = busy * op["hbm"] / device  # type: ignore[index]
            notes.append(
                "device time outside collectives split between compute and HBM in the proportion of the visible ops"
            )
        else:
            s["compute"] = busy
            undetermined = True
            notes.append(
                "no op-level roofline data: busy time outside collectives is counted under compute, but compute vs "
                "HBM bandwidth cannot be told apart"
            )
    elif op is not None:
        s["compute"], s["hbm"] = op["compute"], op["hbm"]
    return s, undetermined


def _coverage(att: Attribution, facts: StepFacts) -> float | None:
    """Visible op time over the device's busy time in the window (duty cycle x window when the profile
    reports one, else the whole window): an idle, input-bound device is not a partial op table."""
    if not facts.window_us:
        return None
    busy_window = facts.window_us * (facts.duty_percent / 100.0 if facts.duty_percent else 1.0)
    busy_ops = att.total_us - att.idle_us
    return busy_ops / busy_window if busy_window > 0 else None


def step_shares(att: Attribution, facts: StepFacts) -> StepShares:
    """The one attribution of the step (see the module docstring for which source leads)."""
    notes: list[str] = []
    denom = facts.denominator_us
    have_ops = att.total_us > 0 and denom > 0
    coverage = _coverage(att, facts) if have_ops else None
    op = _op_split(att, denom, notes) if have_ops else None
    has_breakdown = facts.duty_percent is not None or facts.profile_comm_percent is not None
    if op is not None and not (coverage is not None and coverage < LOW_COVERAGE and has_breakdown):
        s = dict(op)
        s["host"] = 0.0
        source, undetermined = "ops", False
        if coverage is not None and coverage < LOW_COVERAGE:
            notes.append(
                f"the visible ops cover only {100 * coverage:.0f}% of the step and the profile has no step breakdown: "
                "every share is a lower bound"
            )
    elif has_breakdown:
        s, undetermined = _from_breakdown(att, facts, op, notes)
        source = "profile" if op is not None else "breakdown"
        if op is not None and coverage is not None:
            notes.append(
                f"the visible ops cover only {100 * coverage:.0f}% of the step: the profiler's own step breakdown "
                "(duty cycle, collective time) leads, the ops only split device time"
            )
    else:
        s, source, undetermined = dict.fromkeys(RESOURCES, 0.0), "none", False
    idle = facts.idle_percent / 100.0 if facts.idle_percent is not None else (att.idle_us / denom if denom > 0 else 0.0)
    wait = (facts.host_wait_percent or 0.0) / 100.0
    host_ops = att.host_us / denom if have_ops else 0.0
    s["host"] = max(idle, wait, host_ops)
    total = sum(s.values())
    if total > 1.02:
        notes.append(f"attributed shares summed to {100 * total:.0f}% (ops overlap); scaled to 100%")
        s = {r: v / total for r, v in s.items()}
    return StepShares({r: round(s[r], 4) for r in RESOURCES}, source, coverage, undetermined, notes)


def facts_for(profile: Profile, duty: float | None, idle: float | None, host_wait: float | None,
              window_us: float | None, denominator_us: float) -> StepFacts:
    """:class:`StepFacts` from the profile and the KPIs already derived from it."""
    return StepFacts(duty, idle, host_wait, profile.communication_time_percent, window_us, denominator_us)
