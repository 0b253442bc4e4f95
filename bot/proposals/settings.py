"""Settings changes a proposal can carry besides the mesh: micro-batch, per-device batch, accumulation, remat.

A playbook ``settings`` move (:class:`bot.proposals.moves.SettingsMove`) expands here into concrete
:class:`SettingsChange` values for this run: which factors divide the batch, which remat policies are
lighter than the current one in the run's framework, and which config key each is written to. A change
applies to the run's :class:`~knowledge.cost_settings.TrainingSettings` (so the cost model predicts memory
and time with it) and to the config text (``bot.configs.edit.apply_settings``, byte-preserving).

Semantics (and why they matter to the Critic and the person reading the proposal):

* ``micro_batch`` (Megatron ``micro_batch_size``): sequences per micro-batch per data-parallel rank at the
  **same** global batch: fewer gradient-accumulation steps, the optimization is unchanged. Needs
  global_batch % (micro_batch x data-parallel size) == 0.
* ``per_device_batch`` (MaxText ``per_device_batch_size``) and ``grad_accum`` (``gradient_accumulation_steps``)
  raise the **global** batch (MaxText: global = per_device x devices x accumulation): a trade-off against
  hyperparameters and convergence, flagged on the proposal.
* ``remat``: a policy name in the framework's own vocabulary (MaxText remat_policy; Megatron
  recompute_granularity; torchtitan ``[activation_checkpoint] mode`` and ``selective_ac_option``).
* torchtitan writes a change in its TOML's own keys (:mod:`bot.configs.torchtitan_edit`): a micro-batch without
  pipelining is ``local_batch_size`` with ``global_batch_size`` pinned to the batch the step ran (else the
  global batch would follow); a value the recorded launch command sets is not written (the command wins).
* ``zero_stage``: DeepSpeed's ZeRO stage, one step up or down (:mod:`bot.proposals.zero`); a ds_config JSON
  reads as another mesh at stage 3, so the change carries the one mesh it rides on (``only_mesh``).
* ``tp_overlap``: the framework's tensor-parallel communication overlap, on meshes with tensor > 1 only
  (``needs_axis``): Megatron ``tp_comm_overlap`` (``--tp-comm-overlap``), with ``sequence_parallel`` when the
  config has it off (Megatron-LM arguments.py: "Tensor parallel communication/GEMM overlap can happen only when
  sequence parallelism is enabled"); torchtitan async TP with torch.compile, which it requires. The cost model
  prices Megatron's overlap as hiding the TP collectives behind the GEMMs and torchtitan's async TP as hiding
  ``ASYNC_TP_SHARE`` of them (``knowledge/cost_core.py``).
* ``whole_experts``: Megatron ``expert_tensor_parallel_size`` 1 on meshes with tensor > 1: experts no longer split by
  tensor parallelism (Megatron-LM defaults the size to the tensor size); the cost model prices the experts on their
  own grid (``knowledge/cost_moe_grid.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bot.configs.mesh import Mesh
from bot.configs.sharding import ShardingConfig
from bot.configs.torchtitan_edit import async_tp_values, micro_batch_values, remat_values, set_on_command, toml_text
from bot.proposals.moves import SettingsMove
from knowledge.cost_remat import (
    config_policy,
    heavier_policies,
    heavier_torchtitan,
    lighter_policies,
    lighter_torchtitan,
    runyaml_policy,
)
from knowledge.cost_settings import TrainingSettings, all_settings, dp_overlap_off, key_for, placeable_key

GLOBAL_BATCH_WARNING = (
    "raises the global batch (tokens per step) {old} -> {new} sequences: learning rate, warmup and convergence "
    "must be re-checked (the step-time comparison is per token)"
)


@dataclass(frozen=True)
class SettingsChange:
    """One concrete settings change: logical name -> new value, with what it does to the global batch."""

    values: tuple[tuple[str, Any], ...]  # (logical name, new value)
    global_batch_factor: float = 1.0
    words: tuple[str, ...] = ()  # e.g. "micro_batch_size 1 -> 4"
    tradeoffs: tuple[str, ...] = ()
    kind: str = ""  # e.g. "micro_batch+", "remat-lighter"
    config_values: dict[str, Any] = field(default_factory=dict)  # config key path -> value, for the diff
    only_mesh: Mesh | None = None  # the one mesh the change can ride on (a ZeRO stage), None = any
    needs_axis: str | None = None  # a mesh axis the change acts on (TP overlap: tensor): meshes without it are skipped

    def as_dict(self) -> dict[str, Any]:
        return dict(self.values)


NO_CHANGE = SettingsChange(values=())


def current_remat(settings: TrainingSettings | None, framework: str, runyaml: str | None):  # type: ignore[no-untyped-def]
    """The run's remat policy as a RematSpec (config, else run.yaml, else the framework default)."""
    if settings is not None and settings.remat_key is not None:
        megatron = framework == "megatron" or settings.format == "megatron"
        spec = config_policy(settings, megatron=megatron, source="config")
        if spec is not None:
            return spec
    from knowledge.cost_shapes import DEFAULT_REMAT, effective_framework

    # the config's own framework when run.yaml says "other": a Megatron launch gets Megatron's policy names
    framework = effective_framework(framework, settings)
    return runyaml_policy(runyaml or DEFAULT_REMAT.get(framework, "full"), framework, source="run.yaml")


def _factors(limit: int) -> list[int]:
    out, f = [], 2
    while f <= limit:
        out.append(f)
        f *= 2
    return out


def expand(
    move: SettingsMove,
    *,
    settings: TrainingSettings | None,
    config: ShardingConfig | None,
    framework: str,
    runyaml_remat: str | None,
    runyaml_micro_batch: int | None,
    global_batch: int | None,
    data_parallel: int,
    base: Mesh | None = None,
) -> list[SettingsChange]:
    """Concrete changes for one settings move on this run; [] when the run's format cannot express it."""
    from knowledge.cost_shapes import effective_framework

    if move.change == "zero_stage":
        from bot.proposals.zero import stage_changes

        return stage_changes(move, settings=settings, config=config, base=base)
    framework = effective_framework(framework, settings)  # a Megatron launch is Megatron when run.yaml says "other"
    if move.change == "micro_batch":
        return _micro_batch_changes(move, settings, config, framework, runyaml_micro_batch, global_batch,
                                    data_parallel)
    if move.change in ("per_device_batch", "grad_accum"):
        return _batch_changes(move, settings, config, global_batch)
    if move.change == "tp_overlap":
        return _tp_overlap_changes(settings, config, framework)
    if move.change == "ep_overlap":
        return _ep_overlap_changes(settings, config)
    if move.change == "whole_experts":
        return _whole_experts_changes(settings, config, base)
    if move.change == "hsdp":
        from bot.proposals.hsdp import hsdp_changes

        return hsdp_changes(settings, config, base)
    if move.change == "dp_overlap":
        return _dp_overlap_changes(settings, config)
    return _remat_changes(move, settings, config, framework, runyaml_remat)


def _micro_batch_changes(move: SettingsMove, settings: TrainingSettings | None, config: ShardingConfig | None,
                         framework: str, runyaml_micro_batch: int | None, global_batch: int | None,
                         data_parallel: int) -> list[SettingsChange]:
    """Micro-batch up / down at the same global batch (fewer or more accumulation steps)."""
    if framework != "megatron" and not (settings and settings.micro_batch):
        return []
    old = (settings.micro_batch if settings and settings.micro_batch else None) or runyaml_micro_batch or 1
    per_rank = (global_batch // data_parallel) if global_batch and data_parallel else None
    factors = _factors(move.max_factor) if move.direction == "up" else [1 / f for f in _factors(move.max_factor)]
    out: list[SettingsChange] = []
    for f in factors:
        new = old * f
        if new < 1 or not float(new).is_integer():
            continue
        new = int(new)
        if per_rank is not None and (new > per_rank or per_rank % new):
            continue
        key = key_for(settings or TrainingSettings(), "micro_batch", config) if config is not None else None
        values: dict[str, Any] = {key: new} if key else {}
        if config is not None and config.format == "torchtitan":
            titan = micro_batch_values(config, new, data_parallel)
            if titan is None:
                continue  # this torchtitan file cannot hold the global batch with another micro-batch
            key, values = next(iter(titan)), titan
        words = (f"{key or 'micro_batch'} {old} -> {new} (same global batch: "
                 f"{(per_rank or 0) // old if per_rank else '?'} -> {(per_rank or 0) // new if per_rank else '?'} "
                 "accumulation steps)")
        out.append(SettingsChange(
            values=(("micro_batch", new),),
            words=(words + titan_words(config, values),),
            kind="micro_batch" + ("+" if new > old else "-"),
            config_values=writable_values(config, values),
        ))
    return out


def _batch_changes(move: SettingsMove, settings: TrainingSettings | None, config: ShardingConfig | None,
                   global_batch: int | None) -> list[SettingsChange]:
    """Per-device batch or accumulation steps up (MaxText, plain mesh): the global batch grows."""
    fmt = config.format if config is not None else None
    if move.change == "per_device_batch" and not (fmt in ("maxtext", "ici_mesh") and settings
                                                   and settings.per_device_batch):
        return []
    if move.change == "grad_accum" and fmt not in ("maxtext", "ici_mesh"):
        return []
    if fmt == "ici_mesh" and move.change == "grad_accum" and not (settings and settings.grad_accum):
        return []
    old = (settings.per_device_batch if move.change == "per_device_batch" else settings.grad_accum) if settings else None
    old = old or 1
    key = key_for(settings or TrainingSettings(), move.change, config) if config is not None else None
    out: list[SettingsChange] = []
    for f in _factors(move.max_factor) if move.direction == "up" else []:
        new = old * f
        new_v: Any = int(new) if float(new).is_integer() else new
        gb_old = global_batch
        gb_new = int(round(global_batch * f)) if global_batch else None
        out.append(SettingsChange(
            values=((move.change, new_v),),
            global_batch_factor=float(f),
            words=(f"{key or move.change} {old:g} -> {new_v:g}",),
            tradeoffs=(GLOBAL_BATCH_WARNING.format(old=gb_old or "?", new=gb_new or "?"),),
            kind=f"{move.change}+",
            config_values={key: new_v} if key else {},
        ))
    return out


def _remat_changes(move: SettingsMove, settings: TrainingSettings | None, config: ShardingConfig | None,
                   framework: str, runyaml_remat: str | None) -> list[SettingsChange]:
    """Lighter (faster, more memory) or heavier (slower, less memory) remat policies in the framework's own names."""
    fmt = config.format if config is not None else None
    spec = current_remat(settings, framework, runyaml_remat)
    if fmt == "llmfoundry":  # fsdp_config.activation_checkpointing: every block (full) or none
        names = [p for p in (["full"] if move.direction == "heavier" else ["none"]) if p != spec.policy]
    elif move.direction == "heavier":
        names = heavier_torchtitan(spec) if fmt == "torchtitan" else heavier_policies(spec)
    else:
        names = lighter_torchtitan(spec) if fmt == "torchtitan" else lighter_policies(spec)
    from bot.configs.torchtitan_json import is_function_config

    if config is not None and is_function_config(config):  # torchtitan of 2026: SelectiveAC is per-op only
        names = [n for n in names if not n.startswith("selective_layer")]
    key = key_for(settings or TrainingSettings(), "remat", config) if config is not None else None
    from knowledge.remat_state import remat_state

    unstated = remat_state(settings, framework, runyaml_remat).recomputes is None
    out: list[SettingsChange] = []
    for name in names:
        megatron = framework == "megatron" or fmt == "megatron"
        value: Any = None if megatron and name == "none" else name
        values = {key: value} if key else {}
        if megatron and name == "full" and key and (settings is None or not settings.recompute_method):
            # Megatron-Core refuses full granularity without a method and a layer count (TransformerConfig:
            # 'recompute_method must be "block" or "uniform"'); uniform over 1 layer checkpoints every layer
            prefix = key.rsplit(".", 1)[0] + "." if "." in key else ""
            stem = "activations_checkpoint" if key.endswith("activations_checkpoint_granularity") else "recompute"
            values.update({f"{prefix}{stem}_method": "uniform", f"{prefix}{stem}_num_layers": 1})
        if fmt == "torchtitan":
            values = remat_values(name)
            key = key or next(iter(values))
        words = f"{key or 'remat'} {spec.policy} -> {name}"
        if fmt == "llmfoundry":  # the YAML's own values: every block checkpointed, or none
            from bot.configs.llmfoundry import remat_values as foundry_remat

            values, key = foundry_remat(name), "fsdp_config.activation_checkpointing"
            words = (f"{key} {str(spec.policy != 'none').lower()} -> {str(name != 'none').lower()} "
                     f"(remat {spec.policy} -> {name})")
        if unstated:
            words += (f" (the current policy is not stated, '{spec.policy}' is assumed: the gain depends on what the "
                      "run really recomputes)")
        out.append(SettingsChange(
            values=(("remat", name),),
            words=(words + titan_words(config, values),),
            kind=f"remat-{move.direction}",
            config_values=writable_values(config, values),
        ))
    return out


MEGATRON_TP_OVERLAP_TRADEOFFS = (
    "needs Transformer Engine (Megatron's default --transformer-impl transformer_engine) and allocates its userbuffers "
    "for the overlapped GEMMs: some GPU memory, and a TE/NCCL setup that supports it on this system",
)
TITAN_ASYNC_TP_TRADEOFFS = (
    "micro-pipelines the TP all-gathers / reduce-scatters into the matmuls through symmetric memory (PyTorch "
    "SymmetricMemory): priced as hiding half of the TP collectives (ASYNC_TP_SHARE, fitted on torchtitan's June 2025 "
    "async TP table); needs a PyTorch and GPUs that support it",
)


def _tp_overlap_changes(settings: TrainingSettings | None, config: ShardingConfig | None,
                        framework: str) -> list[SettingsChange]:
    """Turn on TP communication overlap where the framework has it and ASAP prices it; [] when it is already on."""
    if config is None or (settings is not None and settings.tp_comm_overlap):
        return []
    if config.format == "torchtitan":
        return [_titan_async_tp(config)]
    if framework != "megatron" or config.format != "megatron":
        return []  # MaxText/XLA: the async collective flags live in LIBTPU_INIT_ARGS, which ASAP does not price
    return _megatron_tp_overlap(settings or TrainingSettings(), config)


def _titan_async_tp(config: ShardingConfig) -> SettingsChange:
    """torchtitan's async TP, with torch.compile when the file does not compile (torchtitan refuses it without)."""
    from bot.configs.torchtitan import LEGACY

    values: dict[str, Any] = async_tp_values(config)
    words = "enable_async_tensor_parallel -> true" + titan_words(config, values)
    out: tuple[tuple[str, Any], ...] = (("tp_comm_overlap", True),)
    if len(values) > 1:  # compile turned on too; torchtitan compiles its loss from April 2025 (#1033)
        words += (" (torchtitan runs async TP only under torch.compile, so compile is turned on too; its own speed-up "
                  "beyond the compiled loss is not priced)")
        out += (("loss_compiled", config.vintage != LEGACY),)
    return SettingsChange(values=out, words=(words,), tradeoffs=TITAN_ASYNC_TP_TRADEOFFS, kind="tp-overlap",
                          config_values=writable_values(config, values), needs_axis="tensor")


def _megatron_tp_overlap(base: TrainingSettings, config: ShardingConfig) -> list[SettingsChange]:
    """Megatron ``tp_comm_overlap`` with the ``sequence_parallel`` it requires; [] where the config cannot have it
    (``--transformer-impl local``) or switches it with NeMo 1.x's ``ub_tp_comm_overlap``, which ASAP does not price."""
    stated = {k.rsplit(".", 1)[-1]: v for k, v in all_settings(config).items()}
    if str(stated.get("transformer_impl", "")).strip().lower() == "local" or "ub_tp_comm_overlap" in stated:
        return []
    key = key_for(base, "tp_comm_overlap", config)
    sp_key = key_for(base, "sequence_parallel", config)
    if key is None or sp_key is None:
        return []
    values: dict[str, Any] = {key: True}
    out: tuple[tuple[str, Any], ...] = (("tp_comm_overlap", True),)
    words = f"{key} off -> on (Transformer Engine overlaps the tensor-parallel all-gathers / reduce-scatters with " \
            "the GEMMs)"
    if not base.sequence_parallel:
        values[sp_key] = True
        out += (("sequence_parallel", True),)
        words += f"; {sp_key} off -> on (Megatron-LM requires sequence parallelism for TP overlap)"
    return [SettingsChange(values=out, words=(words,), tradeoffs=MEGATRON_TP_OVERLAP_TRADEOFFS, kind="tp-overlap",
                           config_values=values, needs_axis="tensor")]


MEGATRON_EP_OVERLAP_TRADEOFFS = (
    "overlaps one micro-batch's expert all-to-all with another's compute (Megatron-Core's 1F1B A2A overlap): only "
    "the exposed all-to-all time is saved; Megatron-Core asserts expert parallelism, the alltoall / flex dispatcher, "
    "no full recompute or 'moe' in recompute_modules, at most one MTP layer and, with pipelining, interleaved stages; "
    "Megatron-Bridge's skill card measured -15% step time on Qwen3 30B-A3B, HybridEP on 16 H100s",
)


def ep_overlap_blockers(base: TrainingSettings, stated: dict[str, Any], mtp_layers: int) -> list[str]:
    """What makes Megatron-Core refuse ``overlap_moe_expert_parallel_comm`` on this config, mesh aside
    (megatron/core/transformer/transformer_config.py @ d98e8a64dd asserts each)."""
    out: list[str] = []
    dispatcher = str(stated.get("moe_token_dispatcher_type") or "allgather").strip().lower()
    if dispatcher not in ("alltoall", "flex"):
        out.append(f"moe_token_dispatcher_type {dispatcher} (needs alltoall or flex)")
    if (base.remat_policy or "").lower() == "full" or base.recompute_method or base.recompute_num_layers:
        out.append("full recomputation / a recompute_method")
    if "moe" in [m.strip() for m in (base.recompute_modules or "").split(",")]:
        out.append("'moe' in recompute_modules")
    if mtp_layers > 1:
        out.append(f"{mtp_layers} MTP layers (at most 1)")
    return out


def _ep_overlap_changes(settings: TrainingSettings | None, config: ShardingConfig | None) -> list[SettingsChange]:
    """Megatron-Core's expert-parallel all-to-all overlap; [] when it is on, the config is not Megatron's, or
    Megatron-Core would refuse it with the config's other settings."""
    base = settings or TrainingSettings()
    if config is None or config.format != "megatron" or base.ep_comm_overlap:
        return []
    stated = {k.rsplit(".", 1)[-1]: v for k, v in all_settings(config).items()}
    mtp = (base.model_dims.mtp_layers or 0) if base.model_dims is not None else 0
    if ep_overlap_blockers(base, stated, mtp):
        return []
    key = key_for(base, "ep_comm_overlap", config)
    if key is None:
        return []
    words = f"{key} off -> on (the expert all-to-alls of one micro-batch run under another's compute)"
    return [SettingsChange(values=(("ep_comm_overlap", True),), words=(words,),
                           tradeoffs=MEGATRON_EP_OVERLAP_TRADEOFFS, kind="ep-overlap", config_values={key: True},
                           needs_axis="expert")]


MEGATRON_DP_OVERLAP_TRADEOFFS = (
    "the gradient reduce runs in buckets during backward and the parameter all-gather during the next forward: their "
    "kernels share the GPU with compute, so the step gains less than the whole exposed time where the network is "
    "slow; --overlap-param-gather needs the distributed optimizer and --overlap-grad-reduce (Megatron-LM asserts both)",
)


def _dp_overlap_changes(settings: TrainingSettings | None, config: ShardingConfig | None) -> list[SettingsChange]:
    """Megatron's data-parallel overlap flags where the config leaves them off: ``--overlap-grad-reduce``, and with
    the distributed optimizer ``--overlap-param-gather`` (which Megatron-LM accepts only beside the other). A launch
    command leaves a flag off by omitting it; a YAML only by saying false (unstated there is priced on already).
    [] for other formats, Megatron-FSDP (its own schedule) or a config that has them on."""
    base = settings or TrainingSettings()
    if config is None or config.format != "megatron" or base.megatron_fsdp or base.deepspeed:
        return []  # Megatron-FSDP schedules its own sync; under Megatron-DeepSpeed, DeepSpeed's engine does
    reduce_off, gather_off = dp_overlap_off(base)
    values: list[tuple[str, Any]] = []
    if reduce_off:
        values.append(("grad_reduce_overlap", True))
    if base.distributed_optimizer and gather_off:
        values.append(("param_gather_overlap", True))
    keys = {logical: placeable_key(base, logical, config) for logical, _ in values}
    if not values or None in keys.values():
        return []
    words = tuple(f"{keys[logical]} off -> on" for logical, _ in values)
    return [SettingsChange(values=tuple(values), words=words, tradeoffs=MEGATRON_DP_OVERLAP_TRADEOFFS,
                           kind="dp-overlap", config_values={keys[logical]: True for logical, _ in values},
                           needs_axis="data")]


MEGATRON_WHOLE_EXPERTS_TRADEOFFS = (
    "each GPU holds fewer, whole experts instead of a slice of more: the same expert weights per GPU, but the token "
    "all-to-all spans the tensor ranks as well (Megatron-Core MoE parallel folding), and a skewed router loads single "
    "GPUs more than it loads slices of every expert",
)


MEGATRON_WHOLE_EXPERTS_ALONE_TRADEOFFS = (
    "every tensor rank holds whole copies of its experts: expert weights, gradients and optimizer state per GPU grow "
    "by the tensor size unless the mesh's expert axis grows with them; the memory check prices it",
)


def _whole_experts_changes(settings: TrainingSettings | None, config: ShardingConfig | None,
                           mesh: Mesh | None) -> list[SettingsChange]:
    """Megatron's ``expert_tensor_parallel_size`` to 1 (whole experts) on a config whose experts are split now (the
    size it states, else the tensor size Megatron-LM defaults it to: arguments.py). Two changes:

    * folded, on the run's own mesh: ``expert_model_parallel_size`` grown by the old expert-tensor size, so each GPU
      keeps its share of the expert weights and Megatron-Core folds the larger group over the tensor ranks (MoE
      parallel folding); only where the model's experts divide over it and Megatron-Core folds it over this mesh;
    * alone, on any mesh with tensor parallelism: the experts whole and replicated over the tensor ranks unless the
      mesh's expert axis grows (the memory check prices that).

    [] for other formats or when the experts are whole already."""
    base = settings or TrainingSettings()
    if config is None or config.format != "megatron" or mesh is None:
        return []
    etp = base.expert_tensor_parallel or mesh.size("tensor")
    etp_key = key_for(base, "expert_tensor_parallel", config)
    if etp == 1 or etp_key is None:
        return []
    old = str(base.expert_tensor_parallel) if base.expert_tensor_parallel else f"unset (the tensor size, {etp})"
    alone = SettingsChange(
        values=(("expert_tensor_parallel", 1),), kind="whole-experts", config_values={etp_key: 1}, needs_axis="tensor",
        words=(f"{etp_key} {old} -> 1 (whole experts, replicated over the tensor ranks: wider expert matmuls, no "
               "tensor collective around them)",), tradeoffs=MEGATRON_WHOLE_EXPERTS_ALONE_TRADEOFFS)
    folded = _folded_whole_experts(base, config, mesh, etp, etp_key, old)
    return [folded, alone] if folded is not None else [alone]


def _folded_whole_experts(base: TrainingSettings, config: ShardingConfig, mesh: Mesh, etp: int, etp_key: str,
                          old: str) -> SettingsChange | None:
    """Whole experts with the expert group grown by ``etp`` on ``mesh`` (see :func:`_whole_experts_changes`)."""
    from bot.configs.megatron import expert_size_on

    ep = base.expert_parallel or 1
    new_ep = ep * etp
    experts = base.model_dims.experts if base.model_dims is not None else None
    if (experts and experts % new_ep) or expert_size_on(new_ep, mesh) != new_ep:
        return None
    ep_key = config.key("expert_model_parallel_size")
    # a YAML key is edited at its dotted path; a launch flag by its name (bot.configs.edit.apply_settings_files)
    ep_path = ep_key.path if ep_key is not None and not config.launch else "expert_model_parallel_size"
    words = (f"{etp_key} {old} -> 1 and {ep_path.rsplit('.', 1)[-1]} {ep} -> {new_ep} (whole experts, the same "
             "expert share per GPU: wider expert matmuls, no tensor collective around them)")
    return SettingsChange(values=(("expert_tensor_parallel", 1), ("expert_parallel", new_ep)), words=(words,),
                          tradeoffs=MEGATRON_WHOLE_EXPERTS_TRADEOFFS, kind="whole-experts",
                          config_values={etp_key: 1, ep_path: new_ep}, only_mesh=mesh)


def titan_words(config: ShardingConfig | None, values: dict[str, Any]) -> str:
    """What a torchtitan change writes besides its first key (``; selective_ac_option = "op"``), or why the TOML
    cannot carry it (the recorded launch command sets it); '' for other formats."""
    if config is None or config.format != "torchtitan":
        return ""
    flag = set_on_command(config, values)
    if flag is not None:
        return f" (not written in the TOML: the recorded launch command's {flag} wins over it)"
    rest = [f"{path.rsplit('.', 1)[-1]} = {toml_text(v, '')}" for path, v in list(values.items())[1:]]
    return "; " + ", ".join(rest) if rest else ""


def writable_values(config: ShardingConfig | None, values: dict[str, Any]) -> dict[str, Any]:
    """The config values a proposal writes: none when the recorded launch command sets one of them (it wins)."""
    if config is not None and config.format == "torchtitan" and set_on_command(config, values) is not None:
        return {}
    return values


def apply(settings: TrainingSettings | None, change: SettingsChange, *, framework: str) -> TrainingSettings | None:
    """The training settings with ``change`` applied (what the cost model predicts with)."""
    if not change.values:
        return settings
    from knowledge.cost_shapes import effective_framework

    framework = effective_framework(framework, settings)
    base = settings or TrainingSettings()
    update: dict[str, Any] = {"changed": {**base.changed, **change.as_dict()},
                              "global_batch_factor": base.global_batch_factor * change.global_batch_factor}
    for logical, value in change.values:
        if logical == "micro_batch":
            update["micro_batch"] = int(value)
        elif logical == "per_device_batch":
            update["per_device_batch"] = float(value)
            if base.micro_batch:
                update["micro_batch"] = int(base.micro_batch * change.global_batch_factor)
        elif logical == "grad_accum":
            update["grad_accum"] = int(value)
        elif logical == "zero_stage":
            update["zero_stage"] = int(value)
        elif logical == "global_batch":  # a rebatched mesh pins the run's global batch (bot.proposals.rebatch)
            update["global_batch"] = int(value)
        elif logical in ("tp_comm_overlap", "sequence_parallel", "loss_compiled", "ep_comm_overlap",
                         "grad_reduce_overlap", "param_gather_overlap"):
            update[logical] = bool(value)
        elif logical in ("expert_tensor_parallel", "expert_parallel", "dp_replicas", "hpz_partition"):
            update[logical] = int(value)
        elif logical == "optimizer_over_replicas":
            update[logical] = bool(value)
        elif logical == "remat":
            update["remat_policy"] = str(value)
            update["remat_key"] = base.remat_key or ("recompute_granularity" if framework == "megatron" else "remat_policy")
            if framework == "megatron" and value != "full":
                update["recompute_method"] = None
                update["recompute_num_layers"] = None
    return base.model_copy(update=update)


def settings_of_proposal(run: Any, config_values: dict[str, Any]) -> TrainingSettings | None:
    """The training settings a proposal's config edit gives, re-read from the edited text.

    An independent path from :func:`apply` (edit the run's config with the proposal's values, parse the
    result, read its settings): rechecking a proposal with these catches a change the file cannot carry.
    """
    from bot.configs.detect import load_run_config
    from bot.configs.edit import settings_applied
    from knowledge.cost_settings import settings_for_run, settings_from_config

    if not config_values:
        return settings_for_run(run)
    return settings_from_config(settings_applied(load_run_config(run), config_values))
