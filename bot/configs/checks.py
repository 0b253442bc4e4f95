"""Start-up checks: would the framework start this config on this run, and does it fit the run's chips?

``startup_problems(config, num_chips, num_slices, model)`` is what ``why``, ``propose``, ``review`` and the
GitHub review show. Errors are facts the framework enforces before the first step (Megatron-LM's
``validate_args`` and MaxText's ``fill_unspecified_mesh_axes`` asserts, a launch that starts another number
of devices than the run had); warnings are the legal-but-notable facts of :meth:`ShardingConfig.notes`.
Model sizes come from the launch itself (``--num-attention-heads``...) and else from the run's model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.configs.common import as_bool
from bot.configs.mesh import device_count
from bot.configs.pipeline_layout import edge_stage_layout
from bot.configs.sharding import ShardingConfig
from bot.errors import ConfigError


@dataclass(frozen=True)
class Problem:
    """One finding: ``error`` when the framework refuses to start, else a warning; ``rule`` names the check."""

    error: bool
    rule: str
    message: str

    def render(self) -> str:
        if self.rule == "grid":  # how the layout is read and priced, not something wrong with it
            return self.message
        return ("error: " if self.error else "warning: ") + self.message


def _pos(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def _from_model(model: Any, name: str) -> int | None:
    return _pos(getattr(model, name, None)) if model is not None else None


def _note_rule(note: str) -> str:
    """How a config note is shown: ``ignored`` (a setting that does nothing) and ``grid`` (experts on a grid of their
    own) with the diagnosis, ``note`` only where all notes are."""
    if "is ignored" in note or "has no effect" in note:
        return "ignored"
    if "MoE parallel folding" in note or note.startswith("expert_tensor_parallel_size="):
        return "grid"
    return "note"


def startup_problems(config: ShardingConfig, num_chips: int, num_slices: int = 1, model: Any = None,
                     ) -> list[Problem]:
    """Errors (the framework would refuse to start) and warnings for ``config`` on a run of that size."""
    out = _device_count(config, num_chips, num_slices)
    try:
        mesh = config.mesh(num_chips, num_slices)
        notes = config.notes(num_chips, num_slices)
    except ConfigError as exc:
        framework = {"maxtext": "MaxText", "megatron": "Megatron", "torchtitan": "torchtitan",
                     "llmfoundry": "llm-foundry"}.get(config.format,
                                                                                                   "the trainer")
        return [*out, Problem(True, "mesh", f"{framework} would refuse to start: {exc.message}")]
    if config.format == "megatron":
        out.extend(_megatron_rules(config, mesh.sizes(), model))
    elif config.format == "maxtext":
        out.extend(_maxtext_rules(config, mesh.sizes(), num_chips, model))
    elif config.format == "torchtitan":
        from bot.configs.torchtitan_checks import torchtitan_rules

        out.extend(Problem(*p) for p in torchtitan_rules(config, mesh.sizes(), model))
    # a key this framework version does not read (current MaxText's ici_sequence_parallelism) is worth a warning
    # everywhere: a PR that sets it changes nothing; other notes are shown where notes() already is
    # and the MoE layers' own grid where it differs from the mesh shown (Megatron-Core parallel folding): the mesh
    # string alone would hide expert parallelism that spans tensor ranks
    out.extend(Problem(False, _note_rule(n), n) for n in notes if "refuses to start" not in n)
    # how the launch was read: which place wins when a value is set twice (edits go there), defaults assumed
    out.extend(Problem(False, "reading", n) for n in config.reading)
    if config.format == "maxtext" and config.mesh_axes is not None and config.vintage:
        out.append(Problem(False, "reading", f"the config chain looks like {config.vintage}; mesh axes read: "
                                             f"{', '.join(config.mesh_axes)}"))
    return out


def _device_count(config: ShardingConfig, num_chips: int, num_slices: int) -> list[Problem]:
    out: list[Problem] = []
    if config.devices and config.devices != num_chips:
        how = "trainer.devices x num_nodes" if config.launch is None else "its launcher flags"
        out.append(Problem(True, "devices", f"the config starts {config.devices} devices ({how}), but the run has "
                           f"{num_chips} chips: it would build another mesh than the one measured"))
    if config.nodes and config.nodes != num_slices:
        what = "node(s)" if config.format == "megatron" else "slice(s)"
        out.append(Problem(False, "nodes", f"the config runs on {config.nodes} {what}, the run on {num_slices}"))
    return out


def _megatron_rules(cfg: ShardingConfig, sizes: dict[str, int], model: Any) -> list[Problem]:
    """Megatron-LM ``validate_args`` / model-construction rules (each names the arguments involved)."""
    st = cfg.setting
    tp, pp, cp, ep = sizes["tensor"], sizes["pipeline"], sizes["sequence"], sizes["expert"]
    dp = sizes["data"] * ep
    out: list[Problem] = []
    mbs, gbs = _pos(st("micro_batch_size")), _pos(st("global_batch_size"))
    if mbs and gbs and gbs % (mbs * dp):
        out.append(Problem(True, "global_batch", f"global_batch_size={gbs} is not a multiple of micro_batch_size="
                           f"{mbs} x data parallel size {dp} = {mbs * dp}: Megatron refuses to start"))
    heads = _pos(st("num_attention_heads")) or _from_model(model, "heads")
    if heads and heads % tp:
        out.append(Problem(True, "heads", f"num_attention_heads={heads} is not divisible by "
                           f"tensor_model_parallel_size={tp}: Megatron refuses to start"))
    groups = _pos(st("num_query_groups")) or _from_model(model, "kv_heads")
    if groups and groups % tp and _pos(st("num_query_groups")):
        out.append(Problem(True, "query_groups", f"num_query_groups={groups} is not divisible by "
                           f"tensor_model_parallel_size={tp}: Megatron refuses to start"))
    layers = _pos(st("num_layers")) or _from_model(model, "layers")
    if layers and pp > 1:
        out.extend(_stage_layers(st, layers, pp))
    out.extend(_expert_grid_rules(cfg, sizes, model))
    seq = _pos(st("seq_length")) or _pos(st("encoder_seq_length"))
    if cp > 1 and seq and seq % (2 * cp):
        out.append(Problem(True, "context", f"seq_length={seq} is not divisible by 2 x context_parallel_size={cp}: "
                           "Megatron's load-balanced context parallelism refuses it"))
    return out


def _expert_grid_rules(cfg: ShardingConfig, sizes: dict[str, int], model: Any) -> list[Problem]:
    """The MoE layers' grid Megatron-Core builds (parallel_state.py: world_size must divide by expert-tensor x expert x
    pipeline), on the configured expert size, which may exceed the mesh's expert axis (MoE parallel folding)."""
    from bot.configs.megatron import sizes as megatron_sizes

    st = cfg.setting
    ep = megatron_sizes(cfg)["expert_model_parallel_size"]
    out: list[Problem] = []
    experts = _pos(st("num_moe_experts")) or _from_model(model, "experts")
    if ep > 1 and experts and experts % ep:
        out.append(Problem(True, "experts", f"num_moe_experts={experts} is not divisible by "
                           f"expert_model_parallel_size={ep}: Megatron refuses to start"))
    tp, cp = sizes["tensor"], sizes["sequence"]
    ranks = tp * cp * sizes["data"] * sizes["expert"]
    stated = _pos(st("expert_tensor_parallel_size"))
    etp = stated or tp
    if ep > 1 and ranks % (ep * etp):
        unset = "" if stated else " (unset: Megatron-LM takes the tensor size)"
        out.append(Problem(True, "expert_grid", (
            f"expert_model_parallel_size={ep} x expert_tensor_parallel_size={etp}{unset} = {ep * etp} does not "
            f"divide tensor x context x data = {ranks}: Megatron-Core cannot build the experts' grid and refuses to "
            f"start" + ("; expert_tensor_parallel_size: 1 (whole experts) fits" if ranks % ep == 0 else ""))))
    return out


def _stage_layers(st: Any, layers: int, pp: int) -> list[Problem]:
    """Megatron-Core's split of the decoder layers over pipeline (and virtual) stages (TransformerConfig checks).

    A ``pipeline_model_parallel_layout`` places every layer itself (``bot.configs.pipeline_layout`` reads it);
    explicit first / last stage sizes leave the rest to split evenly over the other stages; the embedding and the
    loss counted as layers (``account_for_*_in_pipeline_split``) join the layers being split.
    """
    if st("pipeline_model_parallel_layout"):
        return []
    first = _pos(st("decoder_first_pipeline_num_layers")) or _pos(st("num_layers_in_first_pipeline_stage"))
    last = _pos(st("decoder_last_pipeline_num_layers")) or _pos(st("num_layers_in_last_pipeline_stage"))
    if first or last:
        if edge_stage_layout(layers, pp, first, last) is None:  # the split Megatron-Core builds, or None
            stages = pp - (1 if first else 0) - (1 if last else 0)
            rest = layers - (first or 0) - (last or 0)
            return [Problem(True, "layers", f"num_layers={layers} less the first / last stages' {first or 0} / "
                            f"{last or 0} leaves {rest} for the other {stages} stage(s) of "
                            f"pipeline_model_parallel_size={pp}: Megatron refuses to start")]
        return []
    extra = sum(1 for k in ("account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split")
                if as_bool(st(k)))
    slots = layers + extra
    what = f"num_layers={layers}" + (f" + {extra} (embedding / loss counted as layers) = {slots}" if extra else "")
    per_vstage = _pos(st("num_layers_per_virtual_pipeline_stage"))
    vpp = _pos(st("virtual_pipeline_model_parallel_size"))
    if slots % pp:
        return [Problem(True, "layers", f"{what} is not divisible by pipeline_model_parallel_size={pp}: Megatron "
                        "refuses to start" + ("" if extra else " (unless uneven first/last stages are configured)"))]
    if per_vstage and (slots // pp) % per_vstage:
        return [Problem(True, "virtual_pipeline", f"{what} over pipeline_model_parallel_size={pp} is {slots // pp} "
                        f"per stage, not divisible by num_layers_per_virtual_pipeline_stage={per_vstage}: Megatron "
                        "refuses to start")]
    if vpp and vpp > 1 and (slots // pp) % vpp:
        return [Problem(True, "virtual_pipeline", f"{what} over pp={pp} is {slots // pp} per stage, not divisible "
                        f"by virtual_pipeline_model_parallel_size={vpp}: Megatron refuses to start")]
    return []


def _maxtext_rules(cfg: ShardingConfig, sizes: dict[str, int], num_chips: int, model: Any) -> list[Problem]:
    """MaxText ``pyconfig`` rules on batch and pipeline layers."""
    st = cfg.setting
    out: list[Problem] = []
    pdbs = st("per_device_batch_size")
    if isinstance(pdbs, int | float) and not isinstance(pdbs, bool) and pdbs > 0:
        per_chip = cfg.jax_per_chip()  # JAX devices per chip: two on TPU7x
        total = pdbs * num_chips * per_chip
        if total < 1 or abs(total - round(total)) > 1e-9:
            devices = device_count(num_chips, per_chip)
            out.append(Problem(True, "global_batch", f"per_device_batch_size={pdbs} x {devices} = {total:g} "
                               "is not a whole number of sequences: MaxText refuses to start"))
    pp = sizes["pipeline"]
    own = st("model_name") in (None, "default")  # else MaxText loads the model's own file for the sizes
    layers = (_pos(st("base_num_decoder_layers")) if own else None) or _from_model(model, "layers")
    per_stage = _pos(st("num_layers_per_pipeline_stage")) or 1
    if pp > 1 and layers and layers % (pp * per_stage):
        out.append(Problem(True, "layers", f"{layers} decoder layers are not divisible by stages {pp} x "
                           f"num_layers_per_pipeline_stage {per_stage}: MaxText's pipeline refuses it"))
    return out


def native_change(old: ShardingConfig, new: ShardingConfig, num_chips: int, num_slices: int) -> str | None:
    """A change in the framework's own axes that the canonical mesh folds away (MaxText's fsdp_transpose,
    tensor_sequence, ...: a 2-D FSDP split is a mesh change though fsdp's total stays), else None."""
    if old.format != "maxtext" or new.format != "maxtext":
        return None
    from bot.configs.maxtext import native

    try:
        a, b = native(old, num_chips, num_slices), native(new, num_chips, num_slices)
    except ConfigError:
        return None
    parts = [f"{g} {axis} {a[g].get(axis, 1)} -> {b[g].get(axis, 1)}" for g in ("ici", "dcn")
             for axis in dict.fromkeys([*a[g], *b[g]]) if a[g].get(axis, 1) != b[g].get(axis, 1)]
    return ", ".join(parts) or None


__all__ = ["Problem", "startup_problems", "native_change"]
