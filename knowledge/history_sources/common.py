"""Turn one config change (text before/after plus the message that explains it) into a history record.

Shared by the git and GitHub sources so both read messages and configs the same way.
"""

from __future__ import annotations

from bot.configs.mesh import Mesh
from knowledge.history import (
    ConfigSnapshot,
    HistoryRecord,
    Source,
    bottleneck_in,
    chip_count_in,
    chip_in,
    describe_change,
    metrics_in,
    outcome_of,
    run_ids_in,
    size_band_in,
    snapshot,
)

SETTINGS_OF_INTEREST = ("remat_policy", "per_device_batch_size", "micro_batch_size", "recompute_granularity")


def is_config_path(path: str) -> bool:
    """YAML files are candidates; whether they are sharding configs is decided by their keys."""
    return path.lower().endswith((".yml", ".yaml"))


def _reresolve(snap: ConfigSnapshot | None, text: str | None, n: int | None) -> ConfigSnapshot | None:
    if snap is None or snap.mesh is not None or n is None or text is None:
        return snap
    return snapshot(text, snap.path, num_devices=n) or snap


def _relevant(before: ConfigSnapshot | None, after: ConfigSnapshot | None) -> bool:
    if before is None and after is None:
        return False
    if before is None or after is None:
        return True
    if before.keys != after.keys:
        return True
    return any(before.settings.get(k) != after.settings.get(k) for k in before.settings.keys() | after.settings.keys()
               if k.rsplit(".", 1)[-1] in SETTINGS_OF_INTEREST)


def build_record(
    *,
    record_id: str,
    source: Source,
    path: str,
    before_text: str | None,
    after_text: str | None,
    title: str,
    body: str,
    link: str | None,
    commit: str | None = None,
    pr_url: str | None = None,
    date: str | None = None,
) -> HistoryRecord | None:
    """A record for a change of ``path``, or None when the file is not a sharding config or its mesh is unchanged."""
    before = snapshot(before_text, path) if before_text is not None else None
    after = snapshot(after_text, path) if after_text is not None else None
    if not _relevant(before, after):
        return None
    message = f"{title}\n{body}"
    chip, family = chip_in(message)
    count = chip_count_in(message)
    if count is None:
        meshes: list[Mesh] = [s.mesh for s in (after, before) if s is not None and s.mesh is not None]
        count = meshes[0].num_devices if meshes else None
    before = _reresolve(before, before_text, count)
    after = _reresolve(after, after_text, count)
    change, kind = describe_change(before, after)
    bm, am = metrics_in(message)
    model_name = ""
    for snap in (after, before):
        if snap is not None:
            model_name += " ".join(str(v) for k, v in snap.settings.items() if "model" in k and isinstance(v, str))
    first_line = title.strip().splitlines()[0] if title.strip() else f"change to {path}"
    return HistoryRecord(
        id=record_id,
        source=source,
        title=first_line,
        summary=body.strip()[:4000],
        link=link,
        commit=commit,
        pr_url=pr_url,
        date=date,
        run_ids=run_ids_in(message),
        before=before,
        after=after,
        mesh_change=change,
        kind=kind,
        before_metrics=bm,
        after_metrics=am,
        outcome=outcome_of(message, bm, am),
        chip=chip,
        chip_family=family,
        chip_count=count,
        size_band=size_band_in(message) or (size_band_in(model_name) if model_name else None),
        bottleneck=bottleneck_in(message),
    )
