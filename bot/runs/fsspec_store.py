"""Runs in object storage (``gs://``, ``s3://``) and TensorBoard/JAX logdirs (``tb:LOGDIR``), via fsspec.

A run is ``<prefix>/<name>/`` holding either the documented run folder (``run.yaml`` + files) or
MaxText's output layout (``config.yml``, ``metrics/``, ``tensorboard/plugins/profile/<session>/``).
Listing reads one level of the prefix (never the whole bucket); a lookup plans the few files the run
needs (run.yaml and what it names, or the config, metrics and ONE profile session), fetches them into
the bounded local cache (:mod:`bot.runs.cache`) and reads them with the ordinary readers. A local
logdir is read in place. Credentials come from the platform's usual chain (application-default
credentials for GCS, the AWS chain and ``AWS_ENDPOINT_URL_S3`` for S3); ASAP never logs them.
"""

from __future__ import annotations

import difflib
import os
import posixpath
import re
from pathlib import Path
from typing import Any

from bot.errors import AsapError, RunNotFound, StoreUnavailable
from bot.runs.cache import DownloadCache, FetchStats, RemoteFile, version_of
from bot.runs.maxtext_output import CONFIG_NAMES, MAX_METRICS_FILES, PROFILE_ROOTS, choose_session, record_from_output
from bot.runs.spec import StoreSpec
from bot.runs.store import RUN_FILE, Run, load_run_file, normalize_run_query

MAX_RUN_FILES = 256
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+=-]{0,199}$")
_EXTRAS = {"gs": "gcsfs (pip install 'asap[gcs]')", "gcs": "gcsfs (pip install 'asap[gcs]')",
           "s3": "s3fs (pip install 'asap[s3]')", "s3a": "s3fs (pip install 'asap[s3]')"}


def _gcs_emulator_fs(location: str) -> tuple[Any, str] | None:
    """gcsfs's JSON-API filesystem, anonymous, when ``STORAGE_EMULATOR_HOST`` names a GCS emulator.

    As google-cloud-storage does for an emulator, no credentials are looked up (the default chain would
    ask the GCE metadata server). The plain ``gcsfs.core.GCSFileSystem`` is used: gcsfs's default
    class first asks the Storage Control gRPC API for each bucket's layout, which an emulator does not
    serve, and waits 60 s per bucket operation before falling back to the JSON API.
    """
    if location.split("://", 1)[0] not in ("gs", "gcs") or os.environ.get("STORAGE_EMULATOR_HOST", "") in ("", "default"):
        return None
    from gcsfs.core import GCSFileSystem

    fs = GCSFileSystem(token="anon")
    return fs, fs._strip_protocol(location)


def open_fs(location: str, *, display: str) -> tuple[Any, str]:
    """The fsspec filesystem and root path for a URL; a missing driver names the extra to install."""
    import fsspec

    try:
        fs, root = _gcs_emulator_fs(location) or fsspec.core.url_to_fs(location)
    except ImportError:
        scheme = location.split("://", 1)[0]
        raise AsapError(
            f"reading {scheme}:// stores needs {_EXTRAS.get(scheme, 'its fsspec driver')}", source=display
        ) from None
    return fs, root.rstrip("/") or root


def _store_error(exc: Exception, display: str, action: str) -> StoreUnavailable:
    """An access failure in the user's terms: which store, what failed, never a credential."""
    kind = type(exc).__name__
    if isinstance(exc, PermissionError) or "denied" in str(exc).lower() or "forbidden" in str(exc).lower():
        hint = "check the credentials ASAP runs with (GCS: application-default credentials; S3: the AWS chain)"
        return StoreUnavailable(f"access denied while {action}", source=display, hint=hint)
    if isinstance(exc, FileNotFoundError):
        return StoreUnavailable(f"not found while {action}", source=display)
    text = str(exc).splitlines()[0][:160] if str(exc) else ""
    return StoreUnavailable(f"store unreachable while {action} ({kind}{': ' + text if text else ''})", source=display)


def _is_placeholder(info: dict[str, Any]) -> bool:
    """A folder placeholder object (``prefix/``, zero bytes), as cloud consoles' "create folder" writes."""
    return info.get("type") == "file" and str(info.get("name", "")).endswith("/")


def safe_run_name(query: str) -> str:
    """A run name from untrusted text: one path segment of ordinary characters, or RunNotFound."""
    name = normalize_run_query(query)
    if not _NAME.match(name) or ".." in name:
        raise RunNotFound(f"no run {name[:80]!r}: run names are one folder name (letters, digits, . _ - @ + =)",
                          field="run")
    return name


class FsspecRunStore:
    """Runs under an fsspec URL (object storage, or a local/remote TensorBoard logdir)."""

    def __init__(self, spec: StoreSpec, *, cache: DownloadCache | None = None, fs: Any = None) -> None:
        self.spec = spec
        if fs is None:
            fs, root = open_fs(spec.location, display=spec.display)
        else:
            root = spec.location.split("://", 1)[-1].rstrip("/")
        self.fs = fs
        self.root = root
        self.local = "file" in (fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,))
        self.cache = cache or DownloadCache()
        self.last_fetch: FetchStats | None = None

    # ------------------------------------------------------------------------------------ listing
    def _entries(self, path: str) -> list[dict[str, Any]]:
        try:
            self.fs.invalidate_cache(path)  # a serving bot must see new runs and new object versions
            # a folder placeholder (the zero-byte "name/" object the GCS and S3 consoles create) lists as
            # the folder itself: it is not a run, nor a file of one
            return [e for e in self.fs.ls(path, detail=True)
                    if e["name"].rstrip("/") != path.rstrip("/") and not _is_placeholder(e)]
        except FileNotFoundError:
            if path == self.root:
                self._check_bucket()
            return []
        except Exception as exc:  # noqa: BLE001 - any driver error is a store error for the user
            raise _store_error(exc, self.spec.display, f"listing {posixpath.basename(path) or path}") from None

    def _check_bucket(self) -> None:
        """An empty prefix is an empty store; a bucket that does not exist is a configuration error."""
        if self.local:
            return
        bucket = self.root.split("/", 1)[0]
        try:
            exists = self.fs.exists(bucket)
        except Exception as exc:  # noqa: BLE001
            raise _store_error(exc, self.spec.display, f"looking up bucket {bucket}") from None
        if not exists:
            raise StoreUnavailable(f"bucket {bucket!r} not found", source=self.spec.display,
                                   hint="check the bucket name in ASAP_RUNS / --runs")

    def _is_logdir(self, path: str) -> bool:
        names = {posixpath.basename(e["name"].rstrip("/")) for e in self._entries(path) if e.get("type") == "directory"}
        return "plugins" in names

    def list_ids(self) -> list[str]:
        """Run names: one level under the prefix (or the logdir itself, for a single-run ``tb:``)."""
        if self.spec.kind == "tb" and self._is_logdir(self.root):
            return [posixpath.basename(self.root)]
        names = [posixpath.basename(e["name"].rstrip("/")) for e in self._entries(self.root)
                 if e.get("type") == "directory"]
        return sorted(n for n in names if _NAME.match(n) and n != "plugins")

    # ------------------------------------------------------------------------------------ lookup
    def _run_root(self, name: str) -> str | None:
        if self.spec.kind == "tb" and self._is_logdir(self.root):
            return self.root if name.lower() == posixpath.basename(self.root).lower() else None
        path = f"{self.root}/{name}"
        if self._entries(path):
            return path
        known = self.list_ids()
        lowered = {k.lower(): k for k in known}
        match = lowered.get(name.lower()) or next(
            (k for k in known if normalize_run_query(k).lower() == name.lower()), None)
        return f"{self.root}/{match}" if match else None

    def get(self, query: str, *, session: str | None = None) -> Run:
        """Find a run by name (forgiving), fetch the files it needs, and read it."""
        name = safe_run_name(query)
        run_root = self._run_root(name)
        if run_root is None:
            near = difflib.get_close_matches(name, self.list_ids(), n=3, cutoff=0.3)
            raise RunNotFound(f"no run {name!r} in {self.spec.display}", field="run",
                              hint=f"nearest: {', '.join(near)}" if near else None)
        run_id = posixpath.basename(run_root)
        origin = f"{self.spec.display.rstrip('/')}/{run_id}" if run_root != self.root else self.spec.display
        files, has_run_file = self._plan(run_root, session)
        folder = Path(run_root) if self.local else self._fetch(run_id, files)
        if has_run_file:
            record = self._load_run_file(folder, origin)
            if record.id != run_id:
                raise AsapError(f"run id {record.id!r} does not match its folder name {run_id!r}",
                                source=f"{origin}/{RUN_FILE}", field="id")
        else:
            record = record_from_output(folder, run_id, origin=origin, session=session)
        return Run(record=record, folder=folder, origin=origin)

    def _load_run_file(self, folder: Path, origin: str) -> Any:
        """run.yaml read from the cache; its errors name the file in the store, not the cache copy."""
        try:
            return load_run_file(folder / RUN_FILE)
        except AsapError as exc:
            if self.local:
                raise
            raise AsapError(exc.message, source=f"{origin}/{RUN_FILE}", field=exc.field, hint=exc.hint) from None

    def _fetch(self, run_id: str, files: list[RemoteFile]) -> Path:
        folder = self.cache.folder_for(self.spec.url, run_id)
        try:
            self.last_fetch = self.cache.fetch(self.fs, files, folder)
        except AsapError as exc:
            if exc.source and exc.source.startswith(f"{self.root}/"):  # an object: name it by its URL
                where = f"{self.spec.display.rstrip('/')}/{exc.source[len(self.root) + 1:]}"
                raise AsapError(exc.message, source=where, field=exc.field, hint=exc.hint) from None
            raise
        except Exception as exc:  # noqa: BLE001
            raise _store_error(exc, self.spec.display, f"downloading run {run_id}") from None
        return folder

    # ------------------------------------------------------------------------------------ planning
    def _file(self, info: dict[str, Any], run_root: str) -> RemoteFile:
        path = info["name"].rstrip("/")
        rel = posixpath.relpath(path, run_root)
        return RemoteFile(path=path, rel=rel, size=int(info.get("size") or 0), version=version_of(info))

    def _files_under(self, path: str, run_root: str, *, depth: int = 4) -> list[RemoteFile]:
        try:
            self.fs.invalidate_cache(path)
            found = self.fs.find(path, maxdepth=depth, detail=True)
        except FileNotFoundError:
            return []
        except Exception as exc:  # noqa: BLE001
            raise _store_error(exc, self.spec.display, "listing a run's files") from None
        infos = list(found.values()) if isinstance(found, dict) else []
        if len(infos) > MAX_RUN_FILES:
            raise AsapError(f"{len(infos)} files under one profile entry; expected at most {MAX_RUN_FILES}",
                            source=f"{self.spec.display}/{posixpath.relpath(path, self.root)}",
                            hint="name one session folder in run.yaml's profile: list")
        return [self._file(i, run_root) for i in infos if i.get("type") == "file" and not _is_placeholder(i)]

    def _plan(self, run_root: str, session: str | None) -> tuple[list[RemoteFile], bool]:
        top = {posixpath.basename(e["name"].rstrip("/")): e for e in self._entries(run_root)}
        if RUN_FILE in top:
            return self._plan_run_file(run_root, top), True
        return self._plan_output(run_root, top, session), False

    def _plan_run_file(self, run_root: str, top: dict[str, dict[str, Any]]) -> list[RemoteFile]:
        from bot.profiles.loader import kind_of

        files = [self._file(top[RUN_FILE], run_root)]
        if self.local:
            return files
        # What run.yaml names (read it first: it is small), else the discovery set.
        folder = self._fetch(posixpath.basename(run_root), files)
        record = self._load_run_file(folder, f"{self.spec.display.rstrip('/')}/{posixpath.basename(run_root)}")
        wanted = [record.config] if record.config else []
        wanted += list(record.profile or [])
        if record.profile is None:
            wanted += [n for n, e in top.items() if e.get("type") == "file" and kind_of(Path(n)) is not None]
            wanted += [self._newest_session_rel(run_root, "plugins/profile")] if "plugins" in top else []
        for rel in filter(None, wanted):
            safe = posixpath.normpath(rel)
            if safe.startswith("..") or safe.startswith("/"):
                continue  # the run loader refuses it with a clear message
            files += self._files_under(f"{run_root}/{safe}", run_root)
        return files

    def _newest_session_rel(self, run_root: str, root: str, wanted: str | None = None) -> str | None:
        sessions = [posixpath.basename(e["name"].rstrip("/")) for e in self._entries(f"{run_root}/{root}")
                    if e.get("type") == "directory"]
        chosen = choose_session(sessions, wanted, where=f"{self.spec.display}/{posixpath.basename(run_root)}/{root}")
        return f"{root}/{chosen}" if chosen else None

    def _plan_output(self, run_root: str, top: dict[str, dict[str, Any]], session: str | None) -> list[RemoteFile]:
        files = [self._file(top[n], run_root) for n in CONFIG_NAMES if n in top]
        if "metrics" in top:
            metrics = sorted((e for e in self._entries(f"{run_root}/metrics") if e.get("type") == "file"),
                             key=lambda e: e["name"])
            files += [self._file(e, run_root) for e in metrics[-MAX_METRICS_FILES:]]
        for root in PROFILE_ROOTS:
            if root.split("/", 1)[0] in top and self._entries(f"{run_root}/{root}"):
                rel = self._newest_session_rel(run_root, root, session)
                if rel:
                    files += self._files_under(f"{run_root}/{rel}", run_root, depth=1)
                break
        if not files:
            raise AsapError("neither run.yaml nor a MaxText/JAX output layout (config.yml, tensorboard/plugins/profile/)",
                            source=f"{self.spec.display}/{posixpath.basename(run_root)}")
        return files
