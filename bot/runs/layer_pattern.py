"""Megatron-Core hybrid layer patterns (Mamba-2 / attention / MLP / MoE stacks such as Nemotron-H and Nemotron 3).

Megatron-LM's ``--hybrid-layer-pattern`` (formerly ``--hybrid-override-pattern``; Megatron-Bridge
``HybridModelProvider.hybrid_layer_pattern``) gives one character per layer: ``M`` a Mamba-2 mixer, ``*`` self
attention, ``-`` a dense MLP, ``E`` a mixture-of-experts MLP. Each character is a whole Megatron layer with its own
pre-norm and residual, so a transformer block is two of them (``*-``). ``|`` marks pipeline-stage boundaries and the
part after ``/`` describes multi-token-prediction (MTP) layers (megatron/training/arguments.py, ``--hybrid-layer-pattern``
help). Megatron ignores ``--num-layers`` when a pattern is given: the main pattern's length is the layer count.

ASAP prices ``M``, ``*``, ``-`` and ``E``. Gated DeltaNet (``G``) and DeepSeek sparse attention (``D``) layers are
refused by name rather than priced as something else. Each ``/``-separated part after the main stack is one MTP module
(Nemotron 3 Super: ``.../*E/*E``, two modules of an attention and a MoE layer), priced as its layers plus another pass
of the output layer (Megatron-Core's hybrid MultiTokenPredictionBlock).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

PRICED = {"M": "Mamba-2", "*": "attention", "-": "MLP", "E": "MoE"}
UNPRICED = {"G": "Gated DeltaNet", "D": "DeepSeek sparse attention"}
MAX_PATTERN = 10_000  # characters; a real model has at most a few hundred layers


@dataclass(frozen=True)
class LayerCounts:
    """How many layers of each kind a hybrid pattern holds (the main stack; MTP apart)."""

    mamba: int
    attention: int
    mlp: int
    moe: int
    mtp_layers: int  # layers described after '/' (all MTP modules together)
    mtp_modules: int = 0  # '/'-separated MTP modules (MTP depths): each also runs the output layer again
    mtp_mamba: int = 0  # the MTP modules' layers of each kind
    mtp_attention: int = 0
    mtp_mlp: int = 0
    mtp_moe: int = 0

    @property
    def layers(self) -> int:
        return self.mamba + self.attention + self.mlp + self.moe


@lru_cache(maxsize=256)
def parse_layer_pattern(pattern: str) -> LayerCounts:
    """Count the layer kinds of a Megatron hybrid pattern; ValueError naming the character that is not priced.

    Cached: ModelSpec's per-kind layer counts (attention, MLP, MoE, Mamba) each ask for it, often in one formula."""
    if len(pattern) > MAX_PATTERN:
        raise ValueError(f"layer_pattern is {len(pattern)} characters long; at most {MAX_PATTERN} are read")
    main, _, mtp = pattern.strip().partition("/")
    counts = _count(main, 0)
    modules = [part for part in mtp.split("/") if part.strip("| \t")] if mtp else []
    extra = _count(mtp, len(main) + 1)
    out = LayerCounts(mamba=counts["M"], attention=counts["*"], mlp=counts["-"], moe=counts["E"],
                      mtp_layers=sum(extra.values()), mtp_modules=len(modules), mtp_mamba=extra["M"],
                      mtp_attention=extra["*"], mtp_mlp=extra["-"], mtp_moe=extra["E"])
    if out.layers == 0:
        raise ValueError(f"layer_pattern {pattern[:40]!r} holds no layer")
    return out


def _count(part: str, offset: int) -> dict[str, int]:
    """Layers of each priced kind in one part of a pattern; ValueError naming a character that is not priced (its
    position counted from the pattern's start)."""
    counts = {c: 0 for c in PRICED}
    for i, ch in enumerate(part, start=offset):
        if ch in PRICED:
            counts[ch] += 1
        elif ch in "|/ \t":
            continue
        elif ch in UNPRICED:
            raise ValueError(f"layer_pattern character {ch!r} at position {i} ({UNPRICED[ch]}) is not priced by "
                             "ASAP; it prices M (Mamba-2), * (attention), - (MLP) and E (MoE) layers")
        else:
            raise ValueError(f"layer_pattern character {ch!r} at position {i} is not a Megatron hybrid layer symbol; "
                             "expected M (Mamba-2), * (attention), - (MLP), E (MoE), or | between pipeline stages")
    return counts
