"""Store URLs: where ASAP looks for runs, as a team writes it in ``ASAP_RUNS`` or ``--runs``.

One or more locations, separated by commas or whitespace, searched in order:

- ``DIR`` (or ``file://DIR``): a local folder of runs (``<DIR>/<run id>/run.yaml``) or of MaxText
  output folders (``<DIR>/<run name>/tensorboard/plugins/profile/...``);
- ``gs://bucket/prefix`` and ``s3://bucket/prefix``: the same two layouts in object storage (fsspec);
- ``mlflow+http://host:port[/experiment]`` (``mlflow+https://``), or ``mlflow`` alone for
  ``MLFLOW_TRACKING_URI``: runs in an MLflow tracking server;
- ``tb:LOGDIR``: a TensorBoard / JAX profiler logdir (``LOGDIR/plugins/profile/<session>/``), local or
  any fsspec URL.

Only the operator's configuration picks these: nothing a chat message or PR comment says can name a store.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from bot.errors import AsapError

StoreKind = Literal["dir", "object", "mlflow", "tb"]
OBJECT_SCHEMES = ("gs", "gcs", "s3", "s3a", "memory")
_SPLIT = re.compile(r"[,\n]+")


@dataclass(frozen=True)
class StoreSpec:
    """One parsed store location."""

    kind: StoreKind
    url: str  # as the user wrote it (shown in "found in ..." lines; never carries secrets)
    location: str  # what the store opens: a folder, an fsspec URL, or an MLflow tracking URI
    experiment: str | None = None  # MLflow experiment name or ID, when the URL names one

    @property
    def display(self) -> str:
        return self.url


def _mlflow_spec(text: str) -> StoreSpec:
    if text == "mlflow":
        uri = os.environ.get("MLFLOW_TRACKING_URI")
        if not uri:
            raise AsapError(
                "store 'mlflow' needs MLFLOW_TRACKING_URI", field="ASAP_RUNS",
                hint="set MLFLOW_TRACKING_URI, or write the server as mlflow+http://host:port[/experiment]",
            )
        return StoreSpec(kind="mlflow", url="mlflow", location=uri)
    parts = urlsplit(text[len("mlflow+"):])
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise AsapError(
            f"not an MLflow store URL: {text[:200]!r}", field="ASAP_RUNS",
            hint="expected mlflow+http://host:port or mlflow+https://host/path[/experiment]",
        )
    if parts.username or parts.password:
        raise AsapError(
            "MLflow store URLs may not carry credentials", field="ASAP_RUNS",
            hint="use MLFLOW_TRACKING_TOKEN or MLFLOW_TRACKING_USERNAME/MLFLOW_TRACKING_PASSWORD",
        )
    path = parts.path.strip("/")
    experiment = path or None
    location = f"{parts.scheme}://{parts.netloc}"
    return StoreSpec(kind="mlflow", url=text, location=location, experiment=experiment)


def parse_store(text: str) -> StoreSpec:
    """Parse one store location; an unknown scheme is an error naming it and listing the known ones."""
    text = text.strip()
    if not text:
        raise AsapError("empty store location", field="ASAP_RUNS")
    if text == "mlflow" or text.startswith("mlflow+"):
        return _mlflow_spec(text)
    if text.startswith("tb:"):
        logdir = text[3:]
        if not logdir:
            raise AsapError("tb: needs a logdir, e.g. tb:/logs/run1 or tb:gs://bucket/logs", field="ASAP_RUNS")
        return StoreSpec(kind="tb", url=text, location=logdir)
    scheme = urlsplit(text).scheme if "://" in text else ""
    if scheme == "file":
        return StoreSpec(kind="dir", url=text, location=text[len("file://"):])
    if scheme in OBJECT_SCHEMES:
        if scheme in ("s3", "s3a", "gs", "gcs") and not urlsplit(text).netloc:
            raise AsapError(f"{text!r} names no bucket", field="ASAP_RUNS", hint=f"expected {scheme}://bucket/prefix")
        return StoreSpec(kind="object", url=text, location=text.rstrip("/"))
    if scheme:
        raise AsapError(
            f"unknown store scheme {scheme!r} in {text[:200]!r}", field="ASAP_RUNS",
            hint="known: a folder, gs://, s3://, mlflow+http(s)://, mlflow, tb:LOGDIR",
        )
    return StoreSpec(kind="dir", url=text, location=text)


def parse_stores(text: str | None) -> list[StoreSpec]:
    """Parse ``ASAP_RUNS``/``--runs``: locations separated by commas or whitespace, in search order."""
    if not text:
        return []
    return [parse_store(part) for part in _SPLIT.split(text.strip()) if part]
