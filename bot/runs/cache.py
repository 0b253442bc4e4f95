"""A bounded local cache of run files downloaded from object storage.

Readers (configs, profiles) work on local files, so a remote run's files are copied once into
``$ASAP_STATE_DIR/cache/runs/<store hash>/<run>/`` and re-used while the object's version (GCS
generation, S3 ETag, else size and modification time) is unchanged. Each file is streamed to disk by
fsspec (never held whole in memory), a file larger than the profile size limit is refused before any
byte is fetched, and the cache is kept under ``ASAP_CACHE_MAX_BYTES`` (default 2 GiB) by evicting the
least recently used runs. The cache is ASAP's own state: the team's store is only ever read.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.errors import AsapError

MANIFEST = ".asap-cache.json"
DEFAULT_MAX_BYTES = 2 << 30
MAX_FILE_BYTES = 1 << 30  # the profile readers' own limit (docs/profile-formats.md)


@dataclass(frozen=True)
class RemoteFile:
    """One object to fetch: its full path in the store, its path inside the run, size and version."""

    path: str
    rel: str
    size: int
    version: str


@dataclass
class FetchStats:
    """What one fetch did, for the benchmark and the `asap show` line."""

    downloaded: int = 0
    reused: int = 0
    bytes: int = 0
    files: list[str] = field(default_factory=list)


def version_of(info: dict[str, Any]) -> str:
    """The object's version as the store states it: generation (GCS), ETag (S3), else size+mtime."""
    for key in ("generation", "ETag", "etag", "VersionId", "md5Hash"):
        value = info.get(key)
        if value:
            return f"{key}:{value}"
    return f"size:{info.get('size')}:mtime:{info.get('mtime') or info.get('LastModified') or info.get('updated')}"


def state_dir() -> Path:
    return Path(os.environ.get("ASAP_STATE_DIR") or ".asap")


def _max_bytes() -> int:
    raw = os.environ.get("ASAP_CACHE_MAX_BYTES")
    if not raw:
        return DEFAULT_MAX_BYTES
    try:
        value = int(raw)
    except ValueError:
        raise AsapError(f"not a byte count: {raw[:40]!r}", field="ASAP_CACHE_MAX_BYTES") from None
    if value <= 0:
        raise AsapError("must be a positive byte count", field="ASAP_CACHE_MAX_BYTES")
    return value


def _safe_rel(rel: str) -> str:
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if not parts or any(p == ".." for p in parts):
        raise AsapError(f"object path {rel[:200]!r} leaves its run folder", field="path")
    return "/".join(parts)


class DownloadCache:
    """Run folders materialised from a remote store, keyed by store URL and run name."""

    def __init__(self, root: Path | None = None, *, max_bytes: int | None = None) -> None:
        self.root = root or state_dir() / "cache" / "runs"
        self.max_bytes = max_bytes or _max_bytes()

    def folder_for(self, store_url: str, run_id: str) -> Path:
        digest = hashlib.sha256(store_url.encode()).hexdigest()[:16]
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in run_id)[:120] or "_"
        return self.root / digest / safe

    def fetch(self, fs: Any, files: list[RemoteFile], folder: Path) -> FetchStats:
        """Bring ``files`` into ``folder``, downloading only what changed since the last fetch."""
        for f in files:
            if f.size > MAX_FILE_BYTES:
                raise AsapError(
                    f"{f.size} bytes; ASAP reads profile and config files up to {MAX_FILE_BYTES} bytes",
                    source=f.path,
                )
        folder.mkdir(parents=True, exist_ok=True)
        manifest = self._manifest(folder)
        stats = FetchStats()
        for f in files:
            rel = _safe_rel(f.rel)
            target = folder / rel
            if manifest.get(rel) == f.version and target.is_file():
                stats.reused += 1
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_name(target.name + ".part")
            fs.get_file(f.path, str(partial))
            os.replace(partial, target)
            manifest[rel] = f.version
            stats.downloaded += 1
            stats.bytes += f.size
            stats.files.append(rel)
        (folder / MANIFEST).write_text(json.dumps(manifest, sort_keys=True), encoding="utf-8")
        os.utime(folder / MANIFEST)
        if stats.downloaded:  # the cache only grows by a download: a repeat question walks nothing
            self.evict(keep=folder)
        return stats

    def _manifest(self, folder: Path) -> dict[str, str]:
        try:
            data = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}

    def evict(self, *, keep: Path) -> int:
        """Remove least recently used run folders until the cache fits; returns how many were removed."""
        runs = [p.parent for p in self.root.glob(f"*/*/{MANIFEST}")]
        sizes = {r: sum(f.stat().st_size for f in r.rglob("*") if f.is_file()) for r in runs}
        total = sum(sizes.values())
        removed = 0
        for run in sorted(runs, key=lambda r: (r / MANIFEST).stat().st_mtime):
            if total <= self.max_bytes:
                break
            if run == keep:
                continue
            shutil.rmtree(run, ignore_errors=True)
            total -= sizes[run]
            removed += 1
        return removed

    @staticmethod
    def touch(folder: Path) -> None:
        """Mark a run folder as just used (LRU order)."""
        try:
            now = time.time()
            os.utime(folder / MANIFEST, (now, now))
        except OSError:
            pass
