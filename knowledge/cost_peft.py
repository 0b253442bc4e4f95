"""LoRA fine-tuning: what a frozen base model with low-rank adapters changes in a step.

A LoRA run (Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large Language Models"; Megatron-Bridge
``megatron.bridge.peft.lora.LoRA``) freezes every base weight and trains, next to each targeted linear
``W [d_in -> d_out]``, an adapter ``A [d_in -> r]``, ``B [r -> d_out]``. For the cost model that means:

* **FLOPs**: the base linears still run forward (2 FLOPs per parameter per token) and pass the gradient back to their
  input (2 more), but compute no weight gradient: 4 instead of 6. The adapters train as usual (6). This is how
  Megatron-Bridge counts a LoRA step's model FLOPs (``flop_utils.py``: the frozen model's FLOPs x 2/3).
* **Memory**: frozen weights hold no gradient, no fp32 master copy and no optimizer moments; only the adapters do.
* **Communication**: the data-parallel gradient reduction moves only the adapters' gradients.

This module reads a config's PEFT settings and resolves how many adapter parameters a run trains. The pricing
itself lives in :mod:`knowledge.cost_core`.
"""

from __future__ import annotations

from typing import Any

from bot.configs.common import find_by_name, positive_int

# Megatron-Bridge LoRA defaults (src/megatron/bridge/peft/lora.py: dim = 32, target_modules = the four linears).
DEFAULT_RANK = 32
ALL_TARGETS: tuple[str, ...] = ("linear_qkv", "linear_proj", "linear_fc1", "linear_fc2")

# Config keys read (bot.configs.common.settings by name): Megatron-Bridge ConfigContainer ``peft`` (a scheme name, or a
# LoRA object with ``_target_``, ``dim``, ``target_modules``), NeMo 2 ``peft_scheme`` and NeMo 1
# ``model.peft.peft_scheme`` with ``lora_tuning.adapter_dim`` / ``target_modules``.
NAMES: tuple[str, ...] = ("peft", "peft_scheme", "_target_", "dim", "adapter_dim", "target_modules")
LIST_NAMES: tuple[str, ...] = ("target_modules",)

# NeMo 1 spells the linears differently (lora_tuning.target_modules choices).
_NEMO1_TARGETS = {"attention_qkv": "linear_qkv", "attention_dense": "linear_proj", "mlp_fc1": "linear_fc1",
                  "mlp_fc2": "linear_fc2", "all": "all"}


def _under_peft(values: dict[str, Any], key: str) -> Any:
    """The value of ``key`` inside a ``peft`` mapping (``peft.dim``, ``model.peft.lora_tuning.adapter_dim``), not
    any ``dim`` of the file."""
    for path, value in values.items():
        parts = path.split(".")
        if parts[-1] == key and "peft" in parts[:-1]:
            return value
    return None


def _scheme(values: dict[str, Any]) -> str | None:
    """'lora', 'dora', 'none', another scheme name as written, or None when the config says nothing."""
    target = _under_peft(values, "_target_")
    if isinstance(target, str):
        return target.rsplit(".", 1)[-1].lower() or None
    for key in ("peft", "peft_scheme"):
        path, value = find_by_name(values, key)
        if path is None:
            continue
        if value is None or value is False:
            return "none"
        return str(value).strip().lower() or "none"
    return None


def _targets(values: dict[str, Any]) -> tuple[tuple[str, ...] | None, list[str]]:
    """The adapted linears the config names (None: not stated), and the names it gives that ASAP cannot place."""
    raw = _under_peft(values, "target_modules")
    if raw is None:
        return None, []
    names = [n.strip() for n in str(raw).split(",") if n.strip()]
    found: list[str] = []
    unknown: list[str] = []
    for name in names:
        base = _NEMO1_TARGETS.get(name, name.rsplit(".", 1)[-1].lstrip("*"))
        if base == "all":
            found.extend(ALL_TARGETS)
        elif base in ALL_TARGETS:
            found.append(base)
        else:
            unknown.append(name)
    return tuple(dict.fromkeys(found)) or None, unknown


def peft_settings(values: dict[str, Any]) -> dict[str, Any]:
    """The PEFT fields of :class:`knowledge.cost_settings.TrainingSettings` a config states ({} when it states none).

    ``peft`` is 'none' (full fine-tuning or pre-training) or 'lora'; DoRA is read as LoRA with a note (its magnitude
    vector and weight-norm pass are not priced). Any other scheme is kept by name in ``peft_problem`` and the run is
    priced as full training, which the answer says.
    """
    scheme = _scheme(values)
    if scheme is None:
        return {}
    out: dict[str, Any] = {}
    if scheme in ("none", "null", "false", ""):
        out["peft"] = "none"
        return out
    if scheme not in ("lora", "dora", "canonical_lora"):
        out["peft"] = "none"
        out["peft_problem"] = (f"PEFT scheme {scheme!r} is not priced (ASAP prices LoRA): the step is priced as full "
                               "training, so its memory and time are over-estimated")
        return out
    out["peft"] = "lora"
    if scheme != "lora":
        out["peft_problem"] = (f"PEFT scheme {scheme!r} priced as LoRA (its extra adapter work, e.g. DoRA's weight "
                               "norm, is not priced)")
    rank = positive_int(_under_peft(values, "dim")) or positive_int(_under_peft(values, "adapter_dim"))
    if rank:
        out["lora_rank"] = rank
    targets, unknown = _targets(values)
    if targets:
        out["lora_targets"] = targets
    if unknown:
        note = f"LoRA target_modules {', '.join(unknown)} not recognised (priced: {', '.join(targets or ALL_TARGETS)})"
        out["peft_problem"] = f"{out['peft_problem']}; {note}" if "peft_problem" in out else note
    return out


def adapter_params_per_layer(targets: tuple[str, ...], rank: int, dims: dict[str, float]) -> dict[str, float]:
    """Adapter parameters per layer for each targeted linear: r x (d_in + d_out).

    ``dims``: ``d_model``, ``q`` (query width: heads x head_dim), ``kv`` (key + value width), ``o`` (attention output
    width), ``fc1`` (the first MLP projection's output: 2 d_ff when gated), ``d_ff``.
    """
    D = dims["d_model"]
    shapes = {
        "linear_qkv": (D, dims["q"] + dims["kv"]),
        "linear_proj": (dims["o"], D),
        "linear_fc1": (D, dims["fc1"]),
        "linear_fc2": (dims["d_ff"], D),
    }
    return {t: float(rank) * (shapes[t][0] + shapes[t][1]) for t in targets}
