"""The model the cost model works from: run.yaml's ``model:`` section, filled from what the run's config states.

A Megatron launch or a MaxText recipe already names the model it trains (:mod:`bot.configs.model_dims`).
:func:`config_model` fills every dimension run.yaml leaves out from the config (the fields run.yaml writes
always win) and says so in plain sentences; where both state a value and they differ, run.yaml is used and
the disagreement is named. ``mlp_matrices`` counts as stated only when run.yaml writes it: its schema
default (3, SwiGLU) gives way to a config that says the MLP is plain GeLU (Megatron without ``--swiglu``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from bot.runs.record import ModelSpec, RunRecord

MODEL_FIELDS: tuple[str, ...] = ("layers", "d_model", "d_ff", "heads", "kv_heads", "head_dim", "vocab",
                                 "mlp_matrices", "experts", "experts_per_token", "tied_embeddings", "sliding_window",
                                 "global_every", "shared_experts", "dense_layers", "dense_d_ff", "moe_latent_size",
                                 "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "layer_pattern",
                                 "mamba_heads", "mamba_head_dim", "mamba_state_dim", "mamba_groups", "mtp_layers")


# How the config reader's notes about a field begin (bot.configs.model_dims): a note about a field run.yaml states is
# not shown, since run.yaml's value is the one priced.
_NOTE_FIELD: dict[str, str] = {"vocabulary": "vocab", "MLP activation not stated": "mlp_matrices",
                               "the MLP activation is not stated": "mlp_matrices"}


def _about_stated(note: str, given: set[str]) -> bool:
    return any(note.startswith(prefix) and field in given for prefix, field in _NOTE_FIELD.items())


@dataclass(frozen=True)
class ConfigModel:
    """The run with its model filled from the config, and what the answer should say about it."""

    record: RunRecord
    filled: tuple[str, ...]  # model fields taken from the config
    notes: tuple[str, ...]  # sentences for the shape assumptions / report warnings
    source: str | None  # "run.yaml" | "config <file>" | "run.yaml + config <file>" | None (no model known)
    problems: tuple[str, ...] = ()  # why the config's model could not be read (e.g. an unknown model_name)


def config_model(run: RunRecord, settings: Any) -> ConfigModel:
    """``run`` with ``model`` filled from ``settings.model_dims`` where run.yaml does not state a field."""
    dims = getattr(settings, "model_dims", None) if settings is not None else None
    own = run.model
    given = set(own.model_fields_set) if own is not None else set()
    own_source = "run.yaml" if own is not None and given - {"name"} else None
    if dims is None:
        return ConfigModel(run, (), (), own_source)
    problems = tuple(dims.problems)
    stated = {f: v for f, v in dims.stated().items() if f in MODEL_FIELDS}
    name = PurePath(dims.source).name
    filled: dict[str, int] = {}
    notes: list[str] = []
    for field in MODEL_FIELDS:
        mine = getattr(own, field) if own is not None and field in given else None
        theirs = stated.get(field)
        if theirs is None:
            continue
        if mine is None:
            filled[field] = theirs
        elif mine != theirs and field not in dims.defaulted:  # a framework default is not a statement
            notes.append(f"run.yaml says {field} {mine}, the config {theirs} ({dims.origin.get(field, name)}): "
                         "using run.yaml")
    if not filled:
        return ConfigModel(run, (), tuple(notes) + tuple(f"config {name}: {p}" for p in problems), own_source, problems)
    base = own if own is not None else ModelSpec()
    record = run.model_copy(update={"model": base.model_copy(update=filled)})
    words = "has no model section" if own_source is None else "does not state " + ", ".join(filled)
    notes.insert(0, f"model from the config {name} (run.yaml {words}): {dims.describe(list(filled))}")
    notes.extend(n for n in dims.notes if not _about_stated(n, given))
    source = f"config {name}" if own_source is None else f"run.yaml + config {name}"
    return ConfigModel(record, tuple(filled), tuple(notes), source, problems)
