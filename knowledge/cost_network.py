"""Which network each mesh axis runs over, and how fast: per-axis bandwidth for many meshes at once.

Every axis is split into a *fast* part (chips joined by ICI / NVLink) and a *slow* part (DCN /
InfiniBand). Collectives over an axis are costed hierarchically: the fast ring moves the whole array,
the slow ring only the fast-sharded piece (the usual two-level ring, e.g. NCCL's tree/ring over NVLink
then IB, or MaxText's ICI-then-DCN reduction).

Arrays: ``ici`` and ``dcn`` are integer arrays of shape ``[M, 6]`` in :data:`bot.configs.mesh.AXES`
order (data, fsdp, tensor, sequence, expert, pipeline). Results are float arrays of the same shape.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from knowledge.hardware import Chip, fast_domain_chips

# Innermost-first layout of mesh axes on a GPU node: the axes that talk most get the NVLink domain.
# This is Megatron-LM's rank order (tensor varies fastest, then context/sequence, expert, data, pipeline;
# Megatron-Core parallel_state "tp-cp-ep-dp-pp"), which puts tensor parallelism inside the node.
GPU_INNER_ORDER: tuple[int, ...] = (2, 3, 4, 1, 0, 5)  # tensor, sequence, expert, fsdp, data, pipeline


@dataclass(frozen=True)
class AxisNetwork:
    """Per-axis split into fast/slow parts with their per-chip one-way bandwidths (bytes/s)."""

    n_fast: np.ndarray  # chips of the axis reachable over the fast network
    n_slow: np.ndarray  # groups of those joined by the slow network
    bw_fast: np.ndarray  # per-chip bandwidth a ring along this axis gets on the fast network
    bw_slow: np.ndarray  # per-chip bandwidth on the slow network
    torus: bool  # fast network is a torus (TPU ICI) rather than a switch (NVLink)
    notes: tuple[str, ...]


def _tpu_wraparound(chip: Chip, chips_per_slice: int) -> bool:
    """Whether the slice's torus axes have wraparound links (catalog ``wraparound_rule``).

    v4/v5p: every slice dimension a multiple of 4 (4x4x4 = 64 chips and up, in multiples of 64).
    v5e/v6e (2D): only the full 16x16 pod. Source: JAX scaling book, "How to Think About TPUs"
    (wraparound only on full axes) and the Cloud TPU topology docs.
    """
    if chip.intra.topology == "torus3d":
        return chips_per_slice >= 64 and chips_per_slice % 64 == 0
    return chips_per_slice >= 256 and chips_per_slice % 256 == 0


def axis_networks(chip: Chip, chips_per_slice: int, ici: np.ndarray, dcn: np.ndarray) -> AxisNetwork:
    """Fast/slow split and bandwidth of every axis of every mesh.

    TPU (torus): the ICI part of an axis rides the torus. A ring along one torus dimension with
    wraparound moves 2 x link bandwidth per chip (one link each way); without wraparound half that.
    An axis long enough to span k torus dimensions gets k times the bandwidth (JAX scaling book,
    "How to Think About Collectives": all-gather cost V / W_ici, W_ici multiplied by the number of
    axes the collective runs over). DCN parts get ``inter.bandwidth_per_chip``.

    GPU (switch): inside the NVLink domain (:func:`knowledge.hardware.fast_domain_chips`: 8 GPUs on a DGX,
    up to 72 on GB200 NVL72) any pattern gets the full per-GPU NVLink bandwidth; axes fill the domain
    innermost-first (:data:`GPU_INNER_ORDER`) and whatever of an axis lies beyond the domain, plus its DCN
    part, uses the per-GPU inter-node NIC bandwidth. GPU (fullmesh, AMD Infinity Fabric): as a switch, but an
    axis part of n GPUs gets n-1 links (one per peer).
    """
    ici = np.asarray(ici, dtype=np.int64)
    dcn = np.asarray(dcn, dtype=np.int64)
    notes: list[str] = []
    if chip.intra.topology in ("torus3d", "torus2d"):
        dims = 3 if chip.intra.topology == "torus3d" else 2
        wrap = _tpu_wraparound(chip, chips_per_slice)
        side = max(2.0, chips_per_slice ** (1.0 / dims))
        spanned = np.clip(np.floor(np.log(np.maximum(ici, 1)) / np.log(side) + 0.5), 1, dims)
        bw_fast = chip.intra.link_bandwidth * chip.intra.collective_efficiency * (2.0 if wrap else 1.0) * spanned
        if not wrap:
            notes.append(
                f"{chips_per_slice}-chip {chip.display_name} slice has no torus wraparound: ICI rings get one "
                "link's bandwidth per direction"
            )
        n_fast = ici.astype(np.float64)
        n_slow = dcn.astype(np.float64)
        bw_slow = np.full(ici.shape, chip.inter.bandwidth_per_chip * chip.inter.collective_efficiency)
        return AxisNetwork(n_fast, n_slow, bw_fast.astype(np.float64), bw_slow, True, tuple(notes))
    # Switch (NVLink/NVSwitch, or host shared memory for the CPU pseudo-chip) or a fully connected mesh
    # (AMD Infinity Fabric). A GB200 NVL72 domain spans trays: up to 72 GPUs, placed as fast_domain_chips says.
    domain = np.full(ici.shape[0], fast_domain_chips(chip, chips_per_slice), dtype=np.int64)
    n_in = np.ones_like(ici)
    for a in GPU_INNER_ORDER:
        take = np.gcd(ici[:, a], domain)
        n_in[:, a] = take
        domain = domain // take
    n_fast = n_in.astype(np.float64)
    n_slow = (ici // n_in * dcn).astype(np.float64)
    # Achieved, not datasheet: ring collectives reach collective_efficiency of the link (nccl-tests busbw).
    bw_fast = np.full(ici.shape, chip.intra.link_bandwidth * chip.intra.collective_efficiency)
    if chip.intra.topology == "fullmesh":
        # One link to each peer: a group of n chips reaches its n-1 peers over n-1 links at once (RCCL's rings
        # over all links); a pair gets one link, not the chip's whole fabric bandwidth.
        bw_fast = bw_fast * np.maximum(n_fast - 1.0, 1.0)
    bw_slow = np.full(ici.shape, chip.inter.bandwidth_per_chip * chip.inter.collective_efficiency)
    return AxisNetwork(n_fast, n_slow, bw_fast, bw_slow, False, tuple(notes))


def gather_time(volume: np.ndarray, net: AxisNetwork, axis: int) -> np.ndarray:
    """Seconds for a ring all-gather (or reduce-scatter) whose FULL array is ``volume`` bytes per chip.

    Ring formula (DESIGN.md; JAX scaling book "How to Think About Collectives"): T = V (n-1)/n / W.
    Two-level: the fast ring moves V, the slow ring only V / n_fast (each fast-group member exchanges
    its own shard with its peers in other slices, all NICs in parallel).
    """
    return _two_level(volume, net, axis, net.n_fast[:, axis], net.n_slow[:, axis])


def _two_level(volume: np.ndarray, net: AxisNetwork, axis: int, nf: np.ndarray, ns: np.ndarray) -> np.ndarray:
    """A two-level ring of ``nf`` ranks on the axis's fast network times ``ns`` groups of them on its slow one."""
    fast = volume * (nf - 1) / nf / net.bw_fast[:, axis]
    slow = volume / nf * (ns - 1) / ns / net.bw_slow[:, axis]
    return fast + slow


# NCCL's own latency model of a ring all-gather or reduce-scatter (NVIDIA/nccl src/graph/tuning.cc @ 5067397c,
# ncclTunerConstantsDefaults, Simple protocol, the one NCCL picks for messages of megabytes): a base latency, then
# nRanks - 1 steps, nNodes - 1 of them between nodes at the network's hop latency and the rest at NVLink's (the
# intra-node latency is raised to 3x the CPU's network overhead, 1-2 us, when the ring spans nodes: 3.4 us still
# holds on Intel hosts). Not fitted: NCCL's tuner uses these figures to choose its algorithms.
NCCL_RING_BASE_S = 8.4e-6
NCCL_NVLINK_STEP_S = 3.4e-6
NCCL_NET_STEP_S = 14.0e-6


def ring_latency(net: AxisNetwork, axis: int, group: np.ndarray | None = None) -> np.ndarray:
    """Seconds of hop latency of ONE ring all-gather or reduce-scatter over the axis on GPUs (NCCL's model above), or
    over its first ``group`` ranks (consecutive: the fast part first, as :func:`group_gather_time`).

    Zero on a TPU torus (XLA's ICI collectives are not NCCL's rings; their per-hop latency is not modelled) and on an
    axis of one rank. It grows with the ranks of the ring, so per-layer collectives over hundreds of GPUs (FSDP over a
    whole cluster) pay milliseconds each that a bandwidth-only formula misses.
    """
    ranks = net.n_fast[:, axis] * net.n_slow[:, axis]
    if group is not None:
        ranks = np.minimum(ranks, np.maximum(group, 1.0))
    nodes = np.maximum(ranks / net.n_fast[:, axis], 1.0)
    lat = NCCL_RING_BASE_S + (ranks - nodes) * NCCL_NVLINK_STEP_S + (nodes - 1.0) * NCCL_NET_STEP_S
    if net.torus:
        return np.zeros_like(ranks)
    return np.where(ranks > 1, lat, 0.0)


def group_gather_time(volume: np.ndarray, net: AxisNetwork, axis: int, group: np.ndarray) -> np.ndarray:
    """:func:`gather_time` over the first ``group`` ranks of the axis (consecutive ranks: the fast part first),
    as Megatron's distributed-optimizer instances split the data-parallel ranks (``intra_distributed_optimizer_
    instance_group``): a group that fits the fast part of the axis never touches the slow network."""
    nf = np.minimum(net.n_fast[:, axis], np.maximum(group, 1.0))
    return _two_level(volume, net, axis, nf, np.maximum(group / nf, 1.0))


def strided_allreduce_time(volume: np.ndarray, net: AxisNetwork, axis: int, stride: np.ndarray,
                           ranks: np.ndarray) -> np.ndarray:
    """Ring all-reduce over ``ranks`` ranks of the axis spaced ``stride`` apart (one per distributed-optimizer
    instance: ``inter_distributed_optimizer_instance_group``): the ones sharing a fast group reduce over it first."""
    nf = np.clip(net.n_fast[:, axis] / np.maximum(stride, 1.0), 1.0, np.maximum(ranks, 1.0))
    return 2.0 * _two_level(volume, net, axis, nf, np.maximum(ranks / nf, 1.0))


def allreduce_time(volume: np.ndarray, net: AxisNetwork, axis: int) -> np.ndarray:
    """Ring all-reduce = reduce-scatter + all-gather: 2 V (n-1)/n / W (DESIGN.md; scaling book)."""
    return 2.0 * gather_time(volume, net, axis)


def alltoall_time(per_chip: np.ndarray, net: AxisNetwork, axis: int,
                  slow_share: np.ndarray | float = 1.0) -> np.ndarray:
    """Seconds for an all-to-all where each chip sends ``per_chip`` bytes spread over the axis.

    Switch: every chip sends (n-1)/n of its bytes at its own bandwidth. Torus ring: bytes travel n/4
    hops on average in a bidirectional ring, so the cost is about a quarter of an all-gather of the
    whole array, n * per_chip / (4 W) (JAX scaling book, "How to Think About Collectives", AllToAll);
    we take the larger of the two. The slow part uses the switch form (DCN/IB has full bisection);
    ``slow_share`` scales the bytes that cross it (a dispatcher that sends a token once per node: < 1).
    """
    nf, ns = net.n_fast[:, axis], net.n_slow[:, axis]
    fast = per_chip * (nf - 1) / nf / net.bw_fast[:, axis]
    if net.torus:
        fast = np.maximum(fast, per_chip * nf / 4.0 / net.bw_fast[:, axis] * (nf > 1))
    slow = slow_share * per_chip * (ns - 1) / ns / net.bw_slow[:, axis]
    return fast + slow


def p2p_bandwidth(chip: Chip, net: AxisNetwork, axis: int) -> np.ndarray:
    """Bandwidth of one point-to-point send along an axis (pipeline stage to stage).

    A send uses one link one way over ICI (not the 2x of a bidirectional ring), the full NVLink of a GPU,
    and the NIC when the axis leaves the fast network.
    """
    fast = chip.intra.link_bandwidth if net.torus or chip.intra.topology == "fullmesh" else net.bw_fast[:, axis]
    fast = np.broadcast_to(np.asarray(fast, dtype=np.float64), net.bw_fast[:, axis].shape)
    return np.where(net.n_slow[:, axis] > 1, np.minimum(fast, net.bw_slow[:, axis]), fast)
