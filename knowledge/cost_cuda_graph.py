"""Whole-iteration CUDA graphs: how a Megatron config says it captures the full training step.

A MoE layer costs a fixed time per micro-batch beyond its FLOPs (``cost_core.MOE_LAYER_HOST_S``): the router, the
token-count exchange that sizes the all-to-all (a device-to-host sync in Megatron-Core's dispatchers), permutation and
many small kernel launches. Megatron-Core's whole-iteration CUDA graph removes the host from that path: the step is
captured once and replayed, and MoE *paged stashing* (``moe_paged_stash`` with ``moe_expert_rank_capacity_factor``)
gives the dispatch static shapes so there is nothing left to sync. The GPU work of routing and permutation stays.

Partial captures (Transformer Engine's ``make_graphed_callables`` over ``attn`` / ``moe_router`` / ``moe_preprocess``)
keep the sync between the captured pieces; they are read as "not whole-iteration", and the default per-layer time,
fitted on recipes of that kind, applies.
"""

from __future__ import annotations

from typing import Any

from bot.configs.common import as_bool, find_by_name

# Config keys read (bot.configs.common.settings by name). Megatron-LM: --cuda-graph-impl {none, local,
# transformer_engine} with --cuda-graph-scope full_iteration for the whole step under the local implementation;
# the deprecated --enable-cuda-graph means local and --external-cuda-graph transformer_engine (arguments.py).
# Megatron-Bridge's perf recipes write cuda_graph_impl "full_iteration" with an empty scope
# (perf_recipes/qwen/common.py::_enable_hybridep_full_iteration_mxfp8 @ 4ab94dfad).
NAMES: tuple[str, ...] = ("cuda_graph_impl", "cuda_graph_scope", "enable_cuda_graph", "external_cuda_graph")
LIST_NAMES: tuple[str, ...] = ("cuda_graph_scope",)  # a YAML list (Megatron-Bridge), several words (Megatron-LM)


def _scopes(value: Any) -> set[str]:
    """``cuda_graph_scope`` as a set of lower-case names (a list, or one name / a space- or comma-separated string)."""
    if value is None:
        return set()
    items = value if isinstance(value, (list, tuple)) else str(value).replace(",", " ").split()
    return {str(i).strip().strip("'\"[]").lower() for i in items if str(i).strip().strip("'\"[]")}


def graph_settings(values: dict[str, Any]) -> dict[str, Any]:
    """``{"full_iteration_graph": bool}`` when the config says how it captures CUDA graphs, else ``{}``.

    True for ``cuda_graph_impl: full_iteration`` (Megatron-Bridge) or the local implementation with scope
    ``full_iteration`` (Megatron-LM); False for any other stated implementation, including none and partial
    Transformer Engine captures.
    """
    impl_path, impl = find_by_name(values, "cuda_graph_impl")
    scopes = _scopes(find_by_name(values, "cuda_graph_scope")[1])
    if impl_path is None or impl in (None, "", "null"):
        if as_bool(find_by_name(values, "enable_cuda_graph")[1]):
            impl = "local"
        elif as_bool(find_by_name(values, "external_cuda_graph")[1]):
            impl = "transformer_engine"
        else:
            return {}
    name = str(impl).strip().lower()
    return {"full_iteration_graph": name == "full_iteration" or (name == "local" and "full_iteration" in scopes)}


def graph_note(moe_layer_ms: float) -> str:
    """What a whole-iteration-graphed MoE run's prediction assumes (one line of the answer)."""
    return (f"whole-iteration CUDA graph (config: a full_iteration CUDA graph): each MoE layer's fixed time beyond "
            f"its FLOPs is priced at {moe_layer_ms:g} ms per micro-batch, the GPU work of routing and permutation "
            "without the host launches and token-count sync the graph removes")
