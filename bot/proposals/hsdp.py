"""Hybrid sharding as a proposal lever: keep fully sharded data parallelism's per-micro-batch collectives in the node.

Megatron-FSDP: one distributed-optimizer instance per node (HSDP). DeepSpeed ZeRO-3: ZeRO++'s hpZ, a second copy of
the weights sharded over each node's GPUs for the backward all-gather (``zero_hpz_partition_size`` = GPUs per node,
"ideal is number of ranks (gpus) per node", DeepSpeed's ZeRO++ tutorial; Wang et al. 2023, arXiv:2306.10209 §3.2).

A Megatron-FSDP run whose data-parallel ranks span several nodes gathers every layer's parameters and
reduce-scatters its gradients over all of them at every micro-batch, so each collective crosses the inter-node
network. ``--num-distributed-optimizer-instances N`` (Megatron-Bridge ``ddp.num_distributed_optimizer_instances``)
with N = the nodes the data ranks span makes each node's data ranks one group: the per-micro-batch collectives stay on
NVLink and only a once-per-step all-reduce of a group's gradient shard crosses nodes. With
``--data-parallel-sharding-strategy optim_grads_params``, ``--outer-dp-sharding-strategy optim`` shards the optimizer
state over every data rank as before, so the memory cost is the parameters and gradients sharded over a node's ranks
instead of all of them (Megatron-LM arguments.py, DistributedDataParallelConfig at d98e8a64; the Megatron-FSDP
example ``examples/megatron_fsdp/train_llama3_8b_fsdp_h100_fp8.sh`` documents the pair). NVIDIA's own recipes use
it at scale (Megatron-Bridge perf_recipes @ 067f987d: DeepSeek-V3 on 128 GB300, Nemotron 3 Ultra).

The change rides on the run's own mesh (the group size follows its node split) and is priced by the cost model
(``knowledge.cost_core``: group collectives, memory within a group) and checked by the Critic like any proposal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bot.configs.mesh import Mesh

if TYPE_CHECKING:
    from bot.proposals.settings import SettingsChange

KIND = "hsdp"
HPZ_KEY = "zero_optimization.zero_hpz_partition_size"
HPZ_TRADEOFFS = (
    "each GPU keeps a second copy of the weights sharded over its node's GPUs (the weights / GPUs per node, in bf16), "
    "which the memory check prices; the forward all-gather and the gradient reduce-scatter still span every node",
)
TRADEOFFS = (
    "each GPU holds the parameters and gradients of one node's share instead of every data rank's: more memory "
    "per GPU, which the memory check prices; the optimizer state stays sharded over every data rank "
    "(outer_dp_sharding_strategy optim)",
    "Megatron needs the data-parallel size to be a multiple of the instance count; a later change of the node count "
    "must change the instance count with it",
)


def hsdp_changes(settings: Any | None, config: Any | None, base: Mesh | None) -> list[SettingsChange]:
    """One instance per node for a Megatron-FSDP ``optim_grads_params`` config whose data ranks span nodes (ZeRO++
    hpZ for a DeepSpeed ZeRO-3 ds_config); [] for any other run, a run already hybrid-sharded, or a layout whose data
    ranks do not divide into nodes."""
    from bot.proposals.settings import SettingsChange
    from knowledge.cost_settings import placeable_key

    if settings is None or config is None or base is None:
        return []
    if config.format == "deepspeed":
        return _hpz_changes(settings, base)
    if config.format != "megatron":
        return []
    # optim_grads_params only: the per-micro-batch gathers HSDP keeps in the node are the parameters' (a stage-2 run
    # reduce-scatters its gradients once per step, which hybrid sharding does not make cheaper)
    if not settings.megatron_fsdp or settings.zero_stage != 3 or (settings.dp_replicas or 1) > 1:
        return []
    nodes = base.dcn.get("data", 1)
    if nodes < 2 or base.size("data") % nodes:
        return []
    key = placeable_key(settings, "dp_replicas", config)
    outer = placeable_key(settings, "optimizer_over_replicas", config)
    if key is None or outer is None:
        return []  # a YAML without the keys: the edit could not place them where Megatron-Bridge reads them
    values: tuple[tuple[str, Any], ...] = (("dp_replicas", nodes),)
    config_values: dict[str, Any] = {key: nodes}
    words = [f"{key} 1 -> {nodes} (one group per node: the per-micro-batch parameter gathers and gradient "
             "reduce-scatters stay inside the node; one all-reduce of each group's gradient shard per step crosses "
             "nodes)"]
    values += (("optimizer_over_replicas", True),)
    config_values[outer] = "optim"
    words.append(f"{outer} optim (the optimizer state stays sharded over every data rank)")
    return [SettingsChange(values=values, words=tuple(words), tradeoffs=TRADEOFFS, kind=KIND,
                           config_values=config_values, only_mesh=base)]


def _hpz_changes(settings: Any, base: Mesh) -> list[SettingsChange]:
    """ZeRO++ hpZ over each node's GPUs for a ZeRO-3 ds_config (read as the fsdp axis) spanning nodes; [] when the
    run is not at stage 3, already has hpZ, or lies in one node."""
    from bot.proposals.settings import SettingsChange

    if not settings.deepspeed or settings.zero_stage != 3 or (settings.hpz_partition or 1) > 1:
        return []
    per_node, nodes = base.ici.get("fsdp", 1), base.dcn.get("fsdp", 1)
    if nodes < 2 or per_node < 2:
        return []
    words = (f"{HPZ_KEY} {per_node} (ZeRO++ hpZ: the backward all-gather of every layer's weights reads a copy sharded "
             "over the node's GPUs instead of crossing nodes)",)
    return [SettingsChange(values=(("hpz_partition", per_node),), words=words, tradeoffs=HPZ_TRADEOFFS, kind=KIND,
                           config_values={HPZ_KEY: per_node}, only_mesh=base)]
