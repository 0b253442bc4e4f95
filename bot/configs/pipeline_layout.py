"""Megatron-Core's custom pipeline layout (``pipeline_model_parallel_layout``): which layers each stage builds.

DeepSeek-V3's recipes cannot split 61 decoder layers evenly over 4 or 16 stages, and put the multi-token-prediction
module and the loss on the last one, so they write the layout out: ``Et*4|(t*4|)*14tmL`` is sixteen virtual stages,
the first with the embedding and four decoder layers, the last with one decoder layer, the MTP module and the loss.
The grammar is Megatron-Core's ``PipelineParallelLayerLayout.parse_str_to_list``
(megatron/core/transformer/pipeline_parallel_layer_layout.py): commas are cosmetic, ``(...)*n`` and ``x*n`` repeat,
``|`` separates virtual stages, and ``E`` embedding, ``t`` decoder layer, ``m`` MTP layer, ``L`` loss. Virtual stage
``v·p + r`` runs on pipeline rank ``r`` (the same file: ``layout[vpp_rank * pipeline_model_parallel_size + pp_rank]``).

Formats layer: text in, counts out; the expansion is bounded, so a layout that unrolls to millions of layers is
refused before it is built.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_LAYOUT_CHARS = 4_000  # the written layout
MAX_EXPANDED = 20_000  # layers, stage bars and markers once unrolled
LAYER_CHARS = frozenset("EtmL")
_GROUP = re.compile(r"\(([^)]+)\)\*(\d+)")
_REPEAT = re.compile(r"(.)\*(\d+)")


@dataclass(frozen=True)
class RankLayers:
    """What one pipeline rank builds over its virtual stages."""

    decoder: int  # ``t``
    mtp: int  # ``m``
    embedding: bool  # ``E``
    loss: bool  # ``L``


def _unroll(text: str, pattern: re.Pattern[str]) -> str:
    """One of Megatron's two unrolling passes, refusing a result longer than :data:`MAX_EXPANDED`."""
    size = len(text)
    for m in pattern.finditer(text):
        size += len(m.group(1)) * int(m.group(2)) - len(m.group(0))
        if size > MAX_EXPANDED:
            raise ValueError(f"pipeline layout unrolls to more than {MAX_EXPANDED:,} entries")
    return pattern.sub(lambda m: m.group(1) * int(m.group(2)), text)


def parse_pipeline_layout(text: str) -> tuple[str, ...]:
    """The virtual stages of a layout string, in order, each as its layer characters (``"Etttt"``).

    Raises ValueError naming what is wrong: an unknown character, a layout too long to unroll, no stages.
    """
    if len(text) > MAX_LAYOUT_CHARS:
        raise ValueError(f"pipeline layout is {len(text):,} characters; at most {MAX_LAYOUT_CHARS:,} are read")
    flat = "".join(text.split()).replace(",", "").strip("'\"")
    flat = _unroll(_unroll(flat, _GROUP), _REPEAT)
    stages = tuple(flat.split("|"))
    bad = sorted({ch for ch in flat if ch not in LAYER_CHARS | {"|"}})
    if bad:
        raise ValueError(f"pipeline layout has {', '.join(repr(c) for c in bad)}; Megatron-Core knows E (embedding), "
                         "t (decoder layer), m (MTP layer), L (loss), | between stages, (...)*n and x*n")
    if not flat:
        raise ValueError("pipeline layout is empty")
    return stages


def rank_layers(stages: tuple[str, ...], pipeline: int) -> list[RankLayers]:
    """Per pipeline rank, what its virtual stages ``r, r + p, r + 2p, ...`` build together."""
    if pipeline < 1 or len(stages) % pipeline:
        raise ValueError(f"pipeline layout has {len(stages)} stages, not a multiple of pipeline size {pipeline}")
    out = []
    for r in range(pipeline):
        mine = "".join(stages[r::pipeline])
        out.append(RankLayers(decoder=mine.count("t"), mtp=mine.count("m"), embedding="E" in mine, loss="L" in mine))
    return out


def check_layout(stages: tuple[str, ...], layers: int, mtp_layers: int) -> list[str]:
    """Why Megatron-Core would refuse this layout for the model (validate_layer_layout), [] when it fits."""
    flat = "".join(stages)
    problems = []
    if flat.count("t") != layers:
        problems.append(f"it places {flat.count('t')} decoder layers (t), the model has {layers}")
    if flat.count("m") != mtp_layers:
        problems.append(f"it places {flat.count('m')} MTP layers (m), the model has {mtp_layers}")
    if flat.count("E") != 1 or not flat.startswith("E"):
        problems.append("the embedding (E) must come first, once")
    if flat.count("L") != 1 or not flat.endswith("L"):
        problems.append("the loss (L) must come last, once")
    return problems


def edge_stage_layout(layers: int, pipeline: int, first: int | None, last: int | None,
                      mtp_layers: int = 0) -> tuple[str, ...] | None:
    """The layout Megatron-Core builds from explicit first / last stage sizes (``decoder_first_pipeline_num_layers`` /
    ``num_layers_in_first_pipeline_stage`` and the last-stage pair), without virtual stages: the first and last
    ranks hold what they are given, the other ranks split the rest evenly, MTP modules and the loss go last.
    None when the sizes do not split (Megatron refuses to start; ``bot.configs.checks`` names it)."""
    if pipeline < 2 or (first is None and last is None):
        return None
    others = pipeline - (first is not None) - (last is not None)
    rest = layers - (first or 0) - (last or 0)
    if rest < 0 or (others == 0 and rest) or (others > 0 and rest % others):
        return None
    each = rest // others if others else 0
    counts = [each] * pipeline
    if first is not None:
        counts[0] = first
    if last is not None:
        counts[-1] = last
    stages = ["t" * c for c in counts]
    return ("E" + stages[0], *stages[1:-1], stages[-1] + "m" * mtp_layers + "L")
