"""Runs in an MLflow tracking server: params -> config, model and batch; metrics -> measured; artifacts -> files.

What ASAP reads (docs/run-stores.md has the full table):

- **params** (or tags) ``asap.chip``, ``asap.num_chips``, ``asap.num_slices``, ``asap.framework``,
  ``asap.config`` (artifact path of the sharding config) and ``asap.profile`` (artifact paths, comma-
  separated); MaxText's own config keys as its loggers write them (``ici_fsdp_parallelism``,
  ``per_device_batch_size``, ``base_emb_dim`` ...); Megatron/NeMo keys, bare or flattened by Lightning's
  MLflow logger (``model/tensor_model_parallel_size``, ``trainer/devices``, ``model.num_layers`` ...).
- **metrics**: step time (``step_time_ms``; MaxText ``perf/step_time_seconds``; NeMo ``train_step_timing in
  s``; Megatron ``iteration-time``) as the median of the logged history after the first step, tokens/s,
  MFU and peak memory (``hbm_peak_bytes``, Megatron ``mem-max-allocated-bytes``).
- **artifacts**: the config file and ONE profile session (newest under ``plugins/profile/``), fetched into
  the bounded cache; XProf exports (``*overview_page*.json`` ...) beside them.
- **tags**: ``asap.derived_from`` = ``RUN:PROPOSAL`` links an applied proposal's run to its origin.

The client is ``mlflow``'s own (``pip install 'asap[mlflow]'``); credentials are MLflow's usual
``MLFLOW_TRACKING_TOKEN`` / ``MLFLOW_TRACKING_USERNAME`` + ``PASSWORD``, never logged. Listing pages
through the server's search API; nothing loads every run.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from bot import yamlsafe
from bot.errors import AsapError, RunNotFound, StoreUnavailable
from bot.runs.cache import DownloadCache, RemoteFile
from bot.runs.maxtext_output import model_from_config, training_from_config
from bot.runs.record import RunRecord
from bot.runs.spec import StoreSpec
from bot.runs.store import Run, normalize_run_query

_RUN_ID = re.compile(r"^[0-9a-f]{32}$")
_MAXTEXT_KEY = re.compile(r"^(ici|dcn)_[a-z_]+_parallelism$")
_MEGATRON_KEYS = {
    "tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size",
    "expert_model_parallel_size", "virtual_pipeline_model_parallel_size", "num_layers_per_virtual_pipeline_stage",
    "sequence_parallel", "micro_batch_size", "global_batch_size", "recompute_granularity", "recompute_method",
    "recompute_num_layers", "use_distributed_optimizer", "use_flash_attn", "fp8", "fp8_recipe", "devices", "num_nodes",
    "num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "num_query_groups",
    "seq_length", "encoder_seq_length", "padded_vocab_size", "vocab_size",
}
STEP_TIME_METRICS = (("asap.step_time_ms", 1.0), ("step_time_ms", 1.0), ("perf/step_time_seconds", 1000.0),
                     ("train_step_timing in s", 1000.0), ("iteration-time", 1000.0))
MAX_ARTIFACTS = 256
EXPERIMENT_TTL_S = 300.0  # experiment name -> id changes only when someone renames one; re-asked after this
_EXPERIMENTS: dict[tuple[str, str | None], tuple[float, list[str]]] = {}
_MLFLOW_HTTP_DEFAULTS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
                         "MLFLOW_HTTP_REQUEST_TIMEOUT": "20"}
INSTALL_HINT = "pip install 'asap[mlflow]' (the mlflow client)"


def _client(uri: str) -> Any:
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # no tqdm bars in answers
    # MLflow's own defaults (7 retries, backoff factor 2, 120 s timeout) keep a chat answer waiting minutes
    # on a server that is down; a person is better served by "unreachable" within seconds. Operators
    # who set these variables keep their values.
    for name, value in _MLFLOW_HTTP_DEFAULTS.items():
        os.environ.setdefault(name, value)
    try:
        from mlflow.tracking import MlflowClient
    except ImportError:
        raise AsapError("reading MLflow runs needs the mlflow client", source=uri, hint=INSTALL_HINT) from None
    return MlflowClient(tracking_uri=uri)


def _value(text: str) -> Any:
    """An MLflow param (always a string) back to the YAML scalar it was logged from."""
    try:
        return yamlsafe.load(text) if len(text) < 256 else text
    except yaml.YAMLError:
        return text


def _nested(params: dict[str, str]) -> dict[str, Any]:
    """Lightning-flattened keys ('model/tensor_model_parallel_size', 'trainer.devices') back into a tree."""
    tree: dict[str, Any] = {}
    for key, raw in params.items():
        parts = re.split(r"[/.]", key)
        if not any(p in _MEGATRON_KEYS for p in parts[-1:]):
            continue
        node = tree
        for p in parts[:-1]:
            node = node.setdefault(p, {}) if isinstance(node.get(p, {}), dict) else {}
        node[parts[-1]] = _value(raw)
    return tree


@dataclass
class _Facts:
    """What the params/tags say, before any file is read."""

    chip: str | None
    num_chips: int | None
    num_slices: int
    framework: str
    config_text: str | None  # a config synthesised from params, when they carry the mesh
    config_artifact: str | None
    profile_artifacts: list[str]


def _int(v: Any) -> int | None:
    try:
        return int(str(v))
    except (TypeError, ValueError):
        return None


def facts_from(params: dict[str, str], tags: dict[str, str]) -> _Facts:
    """Read the run's hardware, framework and config from its params (tags override asap.* params)."""
    asap = {**{k: v for k, v in params.items() if k.startswith("asap.")},
            **{k: v for k, v in tags.items() if k.startswith("asap.")}}
    maxtext = {k: _value(v) for k, v in params.items() if "/" not in k and "." not in k}
    has_maxtext_mesh = any(_MAXTEXT_KEY.match(k) for k in maxtext)
    megatron = _nested(params)
    framework = asap.get("asap.framework") or ("maxtext" if has_maxtext_mesh else "megatron" if megatron else "other")
    config_text = None
    if has_maxtext_mesh:
        config_text = yaml.safe_dump({k: v for k, v in maxtext.items() if not k.startswith("asap")}, sort_keys=False)
    elif megatron:
        config_text = yaml.safe_dump(megatron, sort_keys=False)
    chips = _int(asap.get("asap.num_chips"))
    if chips is None and megatron:
        trainer = megatron.get("trainer", megatron)
        devices, nodes = _int(trainer.get("devices")), _int(trainer.get("num_nodes")) or 1
        chips = devices * nodes if devices else None
    profiles = [p.strip() for p in (asap.get("asap.profile") or "").split(",") if p.strip()]
    return _Facts(chip=asap.get("asap.chip"), num_chips=chips, num_slices=_int(asap.get("asap.num_slices")) or 1,
                  framework=framework if framework in ("maxtext", "megatron", "jax", "other") else "other",
                  config_text=config_text, config_artifact=asap.get("asap.config"), profile_artifacts=profiles)


@dataclass(frozen=True)
class _Listed:
    path: str
    file_size: int


class _FinishedMemo:
    """What a FINISHED run's artifact listing and metric histories were, kept beside its cached files.

    A finished run no longer changes, so a repeat question skips the listing and history calls (about a
    dozen round trips); a run still RUNNING is always asked afresh.
    """

    NAME = ".asap-mlflow-memo.json"

    def __init__(self, folder: Path, mrun: Any) -> None:
        self.path = folder / self.NAME
        self.key = f"{mrun.info.run_id}:{mrun.info.end_time}"
        self.active = mrun.info.status == "FINISHED" and bool(mrun.info.end_time)
        self.data: dict[str, Any] = {}
        if self.active:
            try:
                loaded = json.loads(self.path.read_text(encoding="utf-8"))
                if isinstance(loaded, dict) and loaded.get("key") == self.key:
                    self.data = loaded
            except (OSError, ValueError):
                pass

    def get(self, name: str) -> Any:
        return self.data.get(name)

    def put(self, name: str, value: Any) -> Any:
        if self.active:
            self.data.update({"key": self.key, name: value})
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text(json.dumps(self.data), encoding="utf-8")
        return value


class _ArtifactFS:
    """The one fsspec-like call the download cache needs, over the run's MLflow artifact repository."""

    def __init__(self, repo: Any) -> None:
        self.repo = repo

    def get_file(self, path: str, local: str) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            got = self.repo.download_artifacts(path, tmp)
            shutil.move(got, local)


class MlflowRunStore:
    """Runs of one MLflow tracking server (optionally one experiment)."""

    def __init__(self, spec: StoreSpec, *, cache: DownloadCache | None = None) -> None:
        self.spec = spec
        self.client = _client(spec.location)
        self.cache = cache or DownloadCache()
        self._experiments: list[str] | None = None
        self._artifact_repo: Any = None
        self._mrun: Any = None

    # ---------------------------------------------------------------------------------- server calls
    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except AsapError:
            raise
        except Exception as exc:  # noqa: BLE001 - MlflowException, connection errors: the store's problem
            text = str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
            if "RESOURCE_DOES_NOT_EXIST" in text or "not found" in text.lower():
                raise RunNotFound(f"{what}: not found in {self.spec.display}", field="run") from None
            hint = "check MLFLOW_TRACKING_TOKEN / MLFLOW_TRACKING_USERNAME" if "401" in text or "403" in text else None
            raise StoreUnavailable(f"MLflow store unreachable while {what} ({text})", source=self.spec.display,
                            hint=hint) from None

    def experiment_ids(self) -> list[str]:
        cached = _EXPERIMENTS.get((self.spec.location, self.spec.experiment))
        if self._experiments is None and cached and time.monotonic() - cached[0] < EXPERIMENT_TTL_S:
            self._experiments = cached[1]
        if self._experiments is None:
            if self.spec.experiment:
                exp = self._call("looking up the experiment", self.client.get_experiment_by_name, self.spec.experiment)
                if exp is None and self.spec.experiment.isdigit():
                    exp = self._call("looking up the experiment", self.client.get_experiment, self.spec.experiment)
                if exp is None:
                    raise AsapError(f"no MLflow experiment {self.spec.experiment!r}", source=self.spec.display)
                self._experiments = [exp.experiment_id]
            else:
                exps = self._call("listing experiments", self.client.search_experiments, max_results=1000)
                self._experiments = [e.experiment_id for e in exps]
            _EXPERIMENTS[(self.spec.location, self.spec.experiment)] = (time.monotonic(), self._experiments)
        return self._experiments

    def _search(self, filter_string: str = "", *, max_results: int, page_token: str | None = None) -> Any:
        return self._call("searching runs", self.client.search_runs, self.experiment_ids(), filter_string=filter_string,
                          max_results=max_results, order_by=["attributes.start_time DESC"], page_token=page_token)

    # ---------------------------------------------------------------------------------- listing
    def list_page(self, limit: int, token: str | None = None) -> tuple[list[dict[str, Any]], str | None]:
        """One page of run summaries (name, id, chip, chips), newest first, and the next page's token."""
        page = self._search(max_results=limit, page_token=token)
        rows = []
        for r in page:
            facts = facts_from(dict(r.data.params), dict(r.data.tags))
            rows.append({"id": r.info.run_name or r.info.run_id, "mlflow_run_id": r.info.run_id,
                         "chip": facts.chip, "num_chips": facts.num_chips, "where": self.spec.display})
        return rows, page.token or None

    def list_ids(self) -> list[str]:
        """The newest 200 run names (``asap runs`` pages through more with ``--page-token``)."""
        rows, _ = self.list_page(200)
        return [r["id"] for r in rows]

    # ---------------------------------------------------------------------------------- lookup
    def _find(self, query: str) -> Any:
        text = query.strip()
        if _RUN_ID.match(text):
            return self._call(f"reading run {text}", self.client.get_run, text)
        name = normalize_run_query(text)
        if not name or "'" in name or "\\" in name or len(name) > 200:
            raise RunNotFound(f"no run {name[:80]!r}", field="run")
        for candidate in dict.fromkeys((text, name)):
            if "'" in candidate:
                continue
            hits = list(self._search(f"attributes.run_name = '{candidate}'", max_results=2))
            if hits:
                return hits[0]
        like = name.replace("%", "").replace("_", "")
        near = [r.info.run_name for r in self._search(f"attributes.run_name LIKE '%{like}%'", max_results=3)] if like else []
        raise RunNotFound(f"no run {name!r} in {self.spec.display}", field="run",
                          hint=f"nearest: {', '.join(near)}" if near else None)

    def get(self, query: str, *, session: str | None = None) -> Run:
        """Find a run by name or MLflow run ID; fetch its config and profile artifacts; build its record."""
        mrun = self._find(query)
        run_id = mrun.info.run_id
        name = mrun.info.run_name or run_id
        params, tags = dict(mrun.data.params), dict(mrun.data.tags)
        facts = facts_from(params, tags)
        folder = self.cache.folder_for(self.spec.url, run_id)
        self._memo = _FinishedMemo(folder, mrun)
        self._mrun, self._artifact_repo = mrun, None
        files = self._artifact_plan(run_id, facts, session)
        self._call(f"downloading run {name}'s artifacts", self.cache.fetch, _ArtifactFS(self._repo(mrun)), files, folder)
        config = self._config_file(folder, facts, files)
        record = self._record(name, mrun, facts, config, files, folder)
        return Run(record=record, folder=folder, origin=f"{self.spec.display} run {run_id}")

    # ---------------------------------------------------------------------------------- artifacts
    def _repo(self, mrun: Any) -> Any:
        """The run's artifact repository, opened once: one request per listing or file, not several
        (the client's per-call helpers look the run up again each time)."""
        if self._artifact_repo is None:
            from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository

            self._artifact_repo = get_artifact_repository(mrun.info.artifact_uri, tracking_uri=self.spec.location)
        return self._artifact_repo

    def _walk(self, repo: Any, path: str | None, depth: int, out: list[Any]) -> None:
        for info in self._call("listing artifacts", repo.list_artifacts, path):
            if len(out) >= MAX_ARTIFACTS:
                return
            if info.is_dir:
                if depth > 0:
                    self._walk(repo, info.path, depth - 1, out)
            else:
                out.append(info)

    def _artifact_plan(self, run_id: str, facts: _Facts, session: str | None) -> list[RemoteFile]:
        from bot.profiles.loader import kind_of
        from bot.runs.maxtext_output import choose_session

        listed = self._memo.get("artifacts")
        if listed is None:
            infos: list[Any] = []
            self._walk(self._repo(self._mrun), None, 5, infos)
            listed = self._memo.put("artifacts", [[i.path, int(i.file_size or 0)] for i in infos])
        by_path = {path: _Listed(path, size) for path, size in listed}
        wanted: set[str] = set()
        if facts.config_artifact and facts.config_artifact in by_path:
            wanted.add(facts.config_artifact)
        elif not facts.config_text:
            wanted |= {p for p in by_path if "/" not in p and p.endswith((".yml", ".yaml", ".sh"))}
        explicit = facts.profile_artifacts
        sessions: dict[str, str] = {}
        for p in by_path:
            m = re.match(r"^(.*?plugins/profile)/([^/]+)/[^/]+$", p)
            if m:
                sessions.setdefault(m.group(2), m.group(1))
        chosen = choose_session(list(sessions), session, where=f"{self.spec.display} run {run_id}")
        for p in by_path:
            under_explicit = any(p == e or p.startswith(e.rstrip("/") + "/") for e in explicit)
            in_session = chosen is not None and p.startswith(f"{sessions[chosen]}/{chosen}/")
            top_export = "/" not in p and kind_of(Path(p)) is not None
            if under_explicit or in_session or (not explicit and top_export):
                wanted.add(p)
        return [RemoteFile(path=p, rel=p, size=int(by_path[p].file_size or 0), version=f"{run_id}:{by_path[p].file_size}")
                for p in sorted(wanted)]

    def _config_file(self, folder: Path, facts: _Facts, files: list[RemoteFile]) -> str | None:
        if facts.config_artifact and any(f.rel == facts.config_artifact for f in files):
            return facts.config_artifact
        if facts.config_text:
            (folder / "asap-params-config.yml").write_text(facts.config_text, encoding="utf-8")
            return "asap-params-config.yml"
        configs = [f.rel for f in files if "/" not in f.rel and f.rel.endswith((".yml", ".yaml", ".sh"))]
        return configs[0] if len(configs) == 1 else None

    # ---------------------------------------------------------------------------------- record
    def _measured(self, run_id: str, metrics: dict[str, float], chips: int) -> dict[str, float]:
        out: dict[str, float] = {}
        for key, scale in STEP_TIME_METRICS:
            if key in metrics:
                hist = self._memo.get(f"history:{key}")
                if hist is None:
                    hist = self._memo.put(f"history:{key}", [
                        m.value for m in self._call("reading metrics", self.client.get_metric_history, run_id, key)])
                values = [v for v in (hist[1:] if len(hist) >= 3 else hist) if v and v > 0]
                if values:
                    out["step_time_ms"] = statistics.median(values) * scale
                    break
        if metrics.get("tokens_per_second", 0) > 0:
            out["tokens_per_second"] = metrics["tokens_per_second"]
        elif metrics.get("perf/per_device_tokens_per_sec", 0) > 0:
            out["tokens_per_second"] = metrics["perf/per_device_tokens_per_sec"] * chips
        peak = metrics.get("hbm_peak_bytes") or metrics.get("mem-max-allocated-bytes")
        if peak and peak > 0:
            out["hbm_peak_bytes"] = peak
        mfu = metrics.get("mfu_percent")
        if mfu is not None and 0 <= mfu <= 100:
            out["mfu_percent"] = mfu
        return out

    def _record(self, name: str, mrun: Any, facts: _Facts, config: str | None, files: list[RemoteFile],
                folder: Path) -> RunRecord:
        where = f"{self.spec.display} run {mrun.info.run_id}"
        if not facts.chip or not facts.num_chips:
            missing = [k for k, v in (("asap.chip", facts.chip), ("asap.num_chips", facts.num_chips)) if not v]
            raise AsapError(f"the run does not say {' and '.join(missing)}", source=where,
                            hint="log them as MLflow params or tags (mlflow.set_tag('asap.chip', 'tpu-v5p'))")
        params = {k: _value(v) for k, v in mrun.data.params.items()}
        tree = _nested(mrun.data.params)
        model = model_from_config(params) or _megatron_model(tree)
        training = training_from_config(params, facts.num_chips) or _megatron_training(tree)
        record: dict[str, Any] = {
            "id": name, "name": name, "framework": facts.framework, "chip": facts.chip,
            "num_chips": facts.num_chips, "num_slices": facts.num_slices, "config": config,
            "profile": sorted({posixpath.dirname(f.rel) or f.rel for f in files if f.rel != config and not f.rel.endswith((".yml", ".yaml", ".sh"))}),
            "model": model, "training": training or None,
            "description": f"MLflow run {mrun.info.run_id} ({self.spec.display}); status {mrun.info.status}.",
            "tags": ["mlflow"],
        }
        measured = self._measured(mrun.info.run_id, dict(mrun.data.metrics), facts.num_chips)
        if measured:
            record["measured"] = measured
        link = mrun.data.tags.get("asap.derived_from", "")
        m = re.match(r"^\s*([^:#\s]+)\s*[:#]\s*(\d+)\s*$", link)
        if m:
            record["derived_from"] = {"run": m.group(1), "proposal": int(m.group(2))}
        return RunRecord.model_validate(record)

    # ---------------------------------------------------------------------------------- write-back
    def write_back(self, run: Run, tags: dict[str, str], note: str | None) -> None:
        """Write ASAP's diagnosis onto the MLflow run as ``asap.*`` tags and a note (opt-in only)."""
        if os.environ.get("ASAP_MLFLOW_WRITE_BACK", "").lower() not in ("1", "true", "yes"):
            raise AsapError("writing to MLflow is off", field="ASAP_MLFLOW_WRITE_BACK",
                            hint="set ASAP_MLFLOW_WRITE_BACK=1 to let ASAP tag runs it analyses")
        run_id = (run.origin or "").rsplit(" run ", 1)[-1]
        for key, value in tags.items():
            self._call("writing tags", self.client.set_tag, run_id, key, value[:5000])
        if note:
            self._call("writing the note", self.client.set_tag, run_id, "mlflow.note.content", note[:5000])


def _megatron_model(tree: dict[str, Any]) -> dict[str, Any] | None:
    src = tree.get("model", tree)
    pairs = {"layers": "num_layers", "d_model": "hidden_size", "d_ff": "ffn_hidden_size",
             "heads": "num_attention_heads", "kv_heads": "num_query_groups", "vocab": "padded_vocab_size"}
    model = {ours: _int(src.get(theirs)) for ours, theirs in pairs.items() if _int(src.get(theirs))}
    if "vocab" not in model and _int(src.get("vocab_size")):
        model["vocab"] = _int(src.get("vocab_size"))
    return model or None


def _megatron_training(tree: dict[str, Any]) -> dict[str, Any]:
    src = tree.get("model", tree)
    training: dict[str, Any] = {}
    for ours, names in (("global_batch", ("global_batch_size",)), ("micro_batch", ("micro_batch_size",)),
                        ("seq_len", ("seq_length", "encoder_seq_length"))):
        value = next((_int(src.get(n)) for n in names if _int(src.get(n))), None)
        if value:
            training[ours] = value
    return training
