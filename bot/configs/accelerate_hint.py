"""Hugging Face Accelerate configs (``accelerate launch --config_file``): recognised, and answered with what to give.

An Accelerate config says how a job shards (``distributed_type``: FSDP, DEEPSPEED, MULTI_GPU; the FSDP sharding
strategy; ``num_processes`` over ``num_machines``), but neither the model nor the batch, which the training script
sets. ASAP does not read it as a config; it names the file as one and says which file ASAP does read for the same
layout: the plain mesh for FSDP and plain data parallelism, the DeepSpeed JSON for DeepSpeed. Keys and values as
Accelerate writes them (src/accelerate/utils/constants.py ``FSDP_SHARDING_STRATEGY``; examples/config_yaml_templates).
"""

from __future__ import annotations

from yaml.nodes import MappingNode

from bot.configs.common import find_by_name, positive_int, settings

DETECT = ("distributed_type", "num_processes")
NAMES = (*DETECT, "num_machines", "fsdp_sharding_strategy", "fsdp_reshard_after_forward", "deepspeed_config_file",
         "zero_stage")
# Older Accelerate configs write the strategy as torch's ShardingStrategy number (1-based, in this order)
STRATEGIES = ("FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD", "HYBRID_SHARD_ZERO2")


def _strategy(values: dict[str, object]) -> str:
    """The FSDP sharding strategy by name: stated (a name or torch's number), FSDP2's reshard_after_forward, or
    Accelerate's default FULL_SHARD."""
    stated = str(find_by_name(values, "fsdp_sharding_strategy")[1] or "").strip().upper()
    if stated.isdigit() and 1 <= int(stated) <= len(STRATEGIES):
        return STRATEGIES[int(stated) - 1]
    if stated:
        return stated
    reshard = find_by_name(values, "fsdp_reshard_after_forward")[1]
    return "SHARD_GRAD_OP" if reshard is False or str(reshard).lower() == "false" else "FULL_SHARD"


def _fsdp_mesh(strategy: str, per_machine: int, machines: int) -> str | None:
    """The plain mesh that states the same layout, for the strategies one mesh can state."""
    inner = f"ici_mesh: {{fsdp: {per_machine}}}"
    if strategy == "FULL_SHARD":
        return inner + (f", dcn_mesh: {{fsdp: {machines}}}" if machines > 1 else "")
    if strategy == "HYBRID_SHARD":
        return inner + (f", dcn_mesh: {{data: {machines}}}" if machines > 1 else "")
    if strategy == "NO_SHARD":
        return f"ici_mesh: {{data: {per_machine}}}" + (f", dcn_mesh: {{data: {machines}}}" if machines > 1 else "")
    return None


def accelerate_hint(root: MappingNode) -> tuple[str, str] | None:
    """(message, hint) for an Accelerate config, None for any other file."""
    values: dict[str, object] = dict(settings(root, NAMES))
    if not all(k in values for k in DETECT):  # Accelerate writes both at the top level
        return None
    kind = str(values["distributed_type"]).upper()
    processes = positive_int(values["num_processes"]) or 0
    machines = positive_int(values.get("num_machines")) or 1
    per_machine = processes // machines if processes and processes % machines == 0 else processes
    message = (f"a Hugging Face Accelerate config (distributed_type: {kind}, num_processes: {processes}): it states "
               "how the job shards but not the model or the batch, and ASAP does not read it as a config")
    if kind == "FSDP":
        strategy = _strategy(values)
        mesh = _fsdp_mesh(strategy, per_machine, machines)
        if mesh:
            return message, (f"point config: at a plain mesh YAML with the same layout ({mesh}; FSDP {strategy}) and "
                             "give the model and batch in run.yaml")
        return message, (f"FSDP {strategy} keeps the weights whole and shards gradients and optimizer state "
                         "(ZeRO-2): a DeepSpeed JSON with zero_optimization.stage 2 states the same memory layout; "
                         "give the model and batch in run.yaml")
    if kind == "DEEPSPEED":
        path = find_by_name(values, "deepspeed_config_file")[1]
        if path:
            return message, f"point config: at the DeepSpeed JSON it names ({path}); ASAP reads DeepSpeed's own file"
        stage = find_by_name(values, "zero_stage")[1]
        return message, (f"write the DeepSpeed settings as a ds_config.json (zero_optimization.stage {stage}) and point "
                         "config: at it; ASAP reads DeepSpeed's own file")
    if kind in ("MULTI_GPU", "NO"):
        mesh = _fsdp_mesh("NO_SHARD", per_machine, machines)
        return message, f"point config: at a plain mesh YAML ({mesh}) and give the model and batch in run.yaml"
    return message, "give ASAP the training framework's own config (MaxText, Megatron, torchtitan or DeepSpeed)"
