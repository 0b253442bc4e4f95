"""The expert layers' own parallel grid (Megatron-Core MoE parallel folding), for many meshes at once.

A mesh describes the dense layers: tensor x sequence x expert x data x pipeline ranks. Megatron-Core gives the MoE
layers a grid of their own over the same ranks (Liu et al. 2025, "MoE Parallel Folding", arXiv 2504.14960;
megatron/core/parallel_state.py): expert-tensor (ETP) x expert (EP) x expert-data (EDP) = tensor x context x data.
Two settings make it differ from the mesh:

* ``expert_model_parallel_size`` larger than the data-parallel ranks: the expert group spans tensor (then context)
  ranks as well. The mesh's expert axis holds the part the data ranks give (bot.configs.megatron.expert_fold); the
  rest, the *fold*, comes out of tensor x context.
* ``expert_tensor_parallel_size``: how many ranks split one expert's matrices. Megatron-LM sets it to the tensor
  size when unset (arguments.py: ``if args.expert_tensor_parallel_size is None: ... = tensor_model_parallel_size``),
  which is how every mesh was priced before; MoE recipes often set 1 (whole experts, no tensor collective in the
  expert MLP).

Every candidate mesh keeps the run's configured expert size and expert-tensor size wherever Megatron could run them
on that mesh (the same rule bot.configs.megatron.kept_expert_size applies when it writes a candidate's config), so
the grid priced is the grid the written config gets.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from knowledge.cost_network import AxisNetwork

TENSOR, SEQUENCE, EXPERT = 2, 3, 4


@dataclass(frozen=True)
class ExpertGrid:
    """The MoE layers' grid for each mesh (arrays of shape [M])."""

    ep: np.ndarray  # expert-parallel ranks: the mesh's expert axis x the fold
    fold: np.ndarray  # the part of ep taken out of tensor x context ranks (1: no folding)
    etp: np.ndarray  # ranks that split one expert's matrices
    edp: np.ndarray  # expert-data-parallel ranks: (tensor x context x data x expert) / (ep x etp)


def expert_grid(configured_ep: int, configured_etp: int, nd: np.ndarray, nt: np.ndarray, ns: np.ndarray,
                ne: np.ndarray) -> ExpertGrid:
    """The grid per mesh. ``configured_ep`` / ``configured_etp``: the config's sizes, 0 when it sets none (then the
    expert axis and the tensor axis are the grid, as in every framework without folding)."""
    nd, nt, ns, ne = (np.asarray(a, dtype=np.float64) for a in (nd, nt, ns, ne))
    if not configured_ep and not configured_etp:  # the mesh is the grid (what every non-Megatron config gets)
        return ExpertGrid(ep=ne, fold=np.ones_like(ne), etp=nt, edp=ns * nd)
    fold = np.ones_like(ne)
    if configured_ep:
        ep = float(configured_ep)
        want = ep / ne
        # the configured size folds over this mesh when Megatron-Core would give its data ranks exactly the mesh's
        # expert axis (gcd(ep, data x expert) = expert) and tensor x context holds the rest
        dp = (nd * ne).astype(np.int64)
        ok = (np.gcd(np.int64(configured_ep), dp) == ne.astype(np.int64)) & (want > 1) & (
            np.mod(nt * ns, np.maximum(want, 1.0)) == 0)
        fold = np.where(ok, want, 1.0)
    ep_ranks = ne * fold
    ranks = nt * ns * nd * ne
    # expert-tensor ranks: the configured size, else the tensor size; where ep x that does not divide the ranks
    # (Megatron would refuse the grid), the largest part of it that does, so every mesh is priced on a real grid
    want_etp = np.full_like(nt, float(configured_etp)) if configured_etp else nt
    room = (ranks / ep_ranks).astype(np.int64)
    etp = np.gcd(want_etp.astype(np.int64), np.maximum(room, 1)).astype(np.float64)
    return ExpertGrid(ep=ep_ranks, fold=fold, etp=etp, edp=ranks / (ep_ranks * etp))


def expert_network(net: AxisNetwork, fold: np.ndarray) -> AxisNetwork:
    """``net`` with the expert axis widened by the folded ranks: the all-to-all group of the MoE layers.

    The fold takes tensor ranks first, then context ranks (Megatron-Core orders the expert grid etp-ep-dp-pp over
    the same ranks as tp-cp-dp-pp, tensor fastest), and each keeps its own split between the fast network (NVLink)
    and the slow one.
    """
    if not np.any(fold > 1):
        return net
    n_fast, n_slow = net.n_fast.copy(), net.n_slow.copy()
    nt = n_fast[:, TENSOR] * n_slow[:, TENSOR]
    from_tensor = np.gcd(fold.astype(np.int64), nt.astype(np.int64)).astype(np.float64)
    from_seq = fold / from_tensor
    add_fast = np.ones_like(fold)
    add_slow = np.ones_like(fold)
    for axis, part in ((TENSOR, from_tensor), (SEQUENCE, from_seq)):
        fast = np.gcd(part.astype(np.int64), n_fast[:, axis].astype(np.int64)).astype(np.float64)
        add_fast = add_fast * fast
        add_slow = add_slow * part / fast
    n_fast[:, EXPERT] = n_fast[:, EXPERT] * add_fast
    n_slow[:, EXPERT] = n_slow[:, EXPERT] * add_slow
    # a group that spans the tensor ranks' fast network gets that network's bandwidth where the expert axis had none
    bw_fast = net.bw_fast.copy()
    widened = (add_fast > 1) & (net.n_fast[:, EXPERT] <= 1)
    bw_fast[:, EXPERT] = np.where(widened, net.bw_fast[:, TENSOR], net.bw_fast[:, EXPERT])
    return replace(net, n_fast=n_fast, n_slow=n_slow, bw_fast=bw_fast)
