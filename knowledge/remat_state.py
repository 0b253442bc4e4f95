"""Whether a run recomputes activations at all: the gate on every "use a lighter remat policy" answer.

The policy is resolved as the cost model resolves it (:func:`knowledge.cost_shapes._resolve_remat`): the
config's key (MaxText ``remat_policy``, Megatron ``recompute_granularity`` / NeMo
``activations_checkpoint_granularity``), else run.yaml's ``training.remat``, else the framework's default.
A default counts as stated only where the framework documents one that every version ASAP reads shares
(MaxText base.yml ``remat_policy: full``), as :func:`knowledge.cost_settings.unknown_settings` decides;
otherwise the policy is unknown and an answer must say the lever depends on it.
"""

from __future__ import annotations

from dataclasses import dataclass

from knowledge.cost_remat import config_policy, lighter_policies, megatron_policy, runyaml_policy
from knowledge.cost_settings import TrainingSettings
from knowledge.cost_shapes import DEFAULT_REMAT, effective_framework


@dataclass(frozen=True)
class RematState:
    """The run's remat policy and whether it recomputes anything (a lighter policy exists); ``recomputes`` is
    None when the policy is not stated, so a lighter-remat answer depends on it."""

    policy: str
    recomputes: bool | None
    source: str  # "config <key>" | "run.yaml training.remat" | "the <framework> default" | "not stated"


def remat_state(settings: TrainingSettings | None, framework: str, runyaml: str | None) -> RematState:
    """The resolved remat policy of a run (config, else run.yaml, else the framework default)."""
    fw = effective_framework(framework, settings)
    if settings is not None and settings.remat_key is not None:
        spec = config_policy(settings, megatron=fw == "megatron" or settings.format == "megatron", source="config")
        if spec is not None:
            return RematState(spec.policy, bool(lighter_policies(spec)), f"config {settings.remat_key}")
    if runyaml is not None:
        spec = runyaml_policy(runyaml, fw, source="run.yaml")
        return RematState(spec.policy, bool(lighter_policies(spec)), "run.yaml training.remat")
    default = DEFAULT_REMAT.get(fw, "full")
    spec = runyaml_policy(default, fw, source="default")
    if fw == "maxtext":  # documented: base.yml remat_policy: full
        return RematState(spec.policy, bool(lighter_policies(spec)), "the MaxText default (base.yml)")
    if settings is not None and settings.launch_defaults:
        # a Megatron launch is the whole argument list: no --recompute-granularity / --recompute-activations is
        # argparse's default, no recomputation (Megatron-LM arguments.py)
        spec = megatron_policy(None, None, None, source="default")
        return RematState(spec.policy, bool(lighter_policies(spec)), "the Megatron-LM default (no --recompute-*)")
    return RematState(default, None, "not stated")
