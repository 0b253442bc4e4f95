"""Which layers each pipeline stage runs, and so which stage sets the step (issue 12, "Pipeline as stages").

Megatron puts the embedding on the first stage and the output layer + loss on the last [PTD §2.2]; the
multi-token-prediction modules go on the last stage too (Megatron-Core ``mtp_on_this_rank``). Without a layout the
main stack is split evenly. A config's ``pipeline_model_parallel_layout`` (:mod:`bot.configs.pipeline_layout`)
says exactly what each rank builds; it applies to the pipeline size it was written for (stages = pipeline x
virtual stages), and any other candidate mesh gets the even split. Frameworks that keep the output layer outside
the pipeline (``Shape.pipeline_output_on_last`` False) spread everything evenly.

The work of a rank is its decoder and MTP layers (each priced as an average layer) plus the output-layer passes it
runs (the loss's, and one per MTP module), in shares of the whole step's device time; the step is the slowest rank.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bot.configs.pipeline_layout import RankLayers, rank_layers
from knowledge.cost_shapes import Shape


@dataclass(frozen=True)
class Stages:
    """Per mesh (arrays [M]): the slowest stage over the mean, and the layers on the ranks that matter."""

    factor: np.ndarray  # slowest stage's device time / the mean stage's
    first: np.ndarray  # decoder + MTP layers on the first rank (its weights, its in-flight activations)
    last: np.ndarray  # ... on the last rank (it also holds the loss's logits)
    slow: np.ndarray  # ... on the slowest rank (per-layer collectives and MoE overhead run there)
    slow_moe: np.ndarray  # MoE layers on the slowest rank


def layout_pipeline(shape: Shape) -> int | None:
    """The pipeline size the config's layout was written for (its stages / virtual stages), None without one."""
    n, v = len(shape.pipeline_layout), max(shape.virtual_stages, 1)
    return n // v if n and n % v == 0 else None


def stages(shape: Shape, npp: np.ndarray, out_share: np.ndarray, device_s: np.ndarray,
           moe_layer_s: np.ndarray) -> Stages:
    """Stage layers and the slowest-stage factor. ``out_share``: the output layer's share of the device time (all
    of its passes, MTP's included); ``device_s``: the mean stage's device time; ``moe_layer_s``: the fixed time of
    one MoE layer (routing, permutation), which weighs the choice of the slowest rank of a layout."""
    even = _even(shape, npp, out_share)
    p = layout_pipeline(shape)
    if p is None or not np.any(npp == p):
        return even
    laid = _laid_out(shape, rank_layers(shape.pipeline_layout, p), out_share, device_s, moe_layer_s)
    use = npp == p
    return Stages(*(np.where(use, a, b) for a, b in zip(
        (laid.factor, laid.first, laid.last, laid.slow, laid.slow_moe),
        (even.factor, even.first, even.last, even.slow, even.slow_moe), strict=True)))


def _even(shape: Shape, npp: np.ndarray, out_share: np.ndarray) -> Stages:
    """The main stack split evenly; the output layer + loss and the MTP modules on the last stage.

    With Megatron-Core's ``account_for_embedding_in_pipeline_split`` (``..._loss_...``) the embedding (the loss)
    takes one layer's slot of the split: the main stack plus those slots is divided evenly and the first (last) rank
    builds one decoder layer fewer (Megatron-Core ``get_transformer_layer_offset``); the loss's work stays on the
    last rank either way.
    """
    L, k = float(shape.layers), float(shape.mtp_layers)
    k_moe = float(shape.mtp_moe_layers)
    pp = npp > 1
    if not shape.pipeline_output_on_last:
        local = L / npp
        return Stages(np.ones_like(npp, dtype=float), local, local, local, shape.moe_layers / npp)
    e, loss = float(shape.pipeline_embedding_slot), float(shape.pipeline_loss_slot)
    per_rank = (L - k + e + loss) / npp  # slots per rank; decoder layers: this, less a slot the embedding / loss takes
    per_layer = (1.0 - out_share) / max(L, 1.0)  # a layer's share of the step's device time (MTP layers too)
    middle = per_rank * per_layer
    last_work = (per_rank - loss + k) * per_layer + out_share
    first_work = (per_rank - e) * per_layer
    slowest = np.maximum(last_work, np.where(npp > 2, middle, first_work))
    factor = np.where(pp, npp * slowest, 1.0)
    first = np.where(pp, per_rank - e, L)
    last = np.where(pp, per_rank - loss + k, L)
    last_slowest = last_work >= slowest
    moe_share = (shape.moe_layers - k_moe) / max(L - k, 1.0)  # MoE layers per main-stack layer
    slow = np.where(pp, np.where(last_slowest, last, np.where(npp > 2, per_rank, first)), L)
    slow_moe = np.where(pp, np.where(last_slowest, (per_rank - loss) * moe_share + k_moe, slow * moe_share),
                        float(shape.moe_layers))
    return Stages(factor, first, last, slow, slow_moe)


def _laid_out(shape: Shape, ranks: list[RankLayers], out_share: np.ndarray, device_s: np.ndarray,
              moe_layer_s: np.ndarray) -> Stages:
    """Per rank of the config's layout: its layers and output passes in shares of the step; the slowest rank is the
    one with the most device time plus MoE-layer time."""
    L, p = float(shape.layers), len(ranks)
    per_layer = (1.0 - out_share) / max(L, 1.0)
    per_output = out_share / (1.0 + float(shape.mtp_outputs))
    moe = np.array(_moe_layers_per_rank(shape, ranks))
    work = np.stack([(r.decoder + r.mtp) * per_layer + (r.mtp + r.loss) * per_output for r in ranks])  # [p, M]
    seconds = p * work * device_s + moe[:, None] * moe_layer_s
    slowest = np.argmax(seconds, axis=0)
    cols = np.arange(work.shape[1])
    layers = np.array([float(r.decoder + r.mtp) for r in ranks])
    ones = np.ones_like(out_share)
    return Stages(p * work[slowest, cols], layers[0] * ones, layers[-1] * ones, layers[slowest], moe[slowest])


def _moe_layers_per_rank(shape: Shape, ranks: list[RankLayers]) -> list[float]:
    """MoE layers each rank runs: decoder layers past the leading dense ones (walking the layout in layer order),
    plus its MTP modules for a MoE model."""
    if not shape.is_moe:
        return [0.0] * len(ranks)
    p, dense = len(ranks), shape.dense_layers
    counts = [0.0] * p
    index = 0
    for s, stage in enumerate(shape.pipeline_layout):
        for ch in stage:
            if ch == "t":
                counts[s % p] += 1.0 if index >= dense else 0.0
                index += 1
            elif ch == "m":
                counts[s % p] += 1.0
    return counts
