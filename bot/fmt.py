"""How numbers read wherever ASAP shows them to people (terminal, Slack, GitHub, PR bodies).

One place, so a step time or a memory figure reads the same in every channel.
"""

from __future__ import annotations

from typing import Any

MISSING = "n/a"


def value(v: Any, unit: str = "", nd: int = 1) -> str:
    """A number with its unit; floats rounded to ``nd`` places; ``None`` reads "n/a"."""
    if v is None:
        return MISSING
    if isinstance(v, float):
        return f"{v:.{nd}f}{unit}"
    return f"{v}{unit}"


def gb(b: Any) -> str:
    """Bytes as decimal gigabytes ("27.6 GB"), the unit HBM capacities are quoted in."""
    return MISSING if not isinstance(b, (int, float)) else f"{b / 1e9:,.1f} GB"


def ms(x: float | None) -> str:
    """Milliseconds with thousands separators ("4,898.8 ms")."""
    return MISSING if x is None else f"{x:,.1f} ms"


def signed_pct(v: float | None) -> str:
    """A change in percent with its sign ("-44.7%")."""
    return MISSING if v is None else f"{v:+.1f}%"


def memory_fit(p: Any) -> str:
    """What a predicted memory block says about fitting (plain words after the figure): nothing when it fits,
    "may not fit" with the band when only the band's low edge fits the usable memory, else "does not fit"."""
    fit = p.get("memory_fit") or ("fits" if p.get("fits_memory", True) else "does_not_fit")
    if fit == "fits":
        return ""
    if fit == "may_not_fit":
        return (f" (may not fit: band {gb(p.get('memory_low_bytes'))} to {gb(p.get('memory_high_bytes'))} against "
                f"{gb(p.get('memory_usable_bytes'))} usable)")
    return " (does not fit)"


def predicted_step(p: Any) -> str:
    """A pre-flight report's ``predicted`` block in one line, labelled as a prediction (plain text: each channel
    escapes it for its own markup)."""
    how = "calibrated on the measurement" if p.get("calibrated") else "uncalibrated"
    parts = [f"step {ms(p.get('step_time_ms'))} (band {ms(p.get('step_time_low_ms'))} to "
             f"{ms(p.get('step_time_high_ms'))})"]
    if p.get("mfu_percent") is not None:
        parts.append(f"MFU {value(p['mfu_percent'], '%')}")
    if p.get("memory_per_chip_bytes") is not None:
        parts.append(f"memory {gb(p['memory_per_chip_bytes'])} of {gb(p.get('memory_capacity_bytes'))} per chip"
                     + memory_fit(p))
    return f"Predicted (no profile, {how}): " + ", ".join(parts)
