"""The parsed sharding config: one model for every format (MaxText keys, ``ici_mesh``, Megatron, torchtitan TOML).

A :class:`ShardingConfig` remembers where it came from (format, source, the raw text) and every mesh
key it found with its canonical axis, value and exact position, so that it can both resolve to a
:class:`~bot.configs.mesh.Mesh` for a given device count and be edited in place byte-for-byte
(:mod:`bot.configs.edit`). Format-specific rules live in :mod:`bot.configs.maxtext`,
:mod:`bot.configs.plainmesh`, :mod:`bot.configs.megatron` and :mod:`bot.configs.torchtitan`; this module only
dispatches to them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from bot.configs.mesh import Axis, Mesh, fold_devices
from bot.errors import ConfigError

Format = Literal["maxtext", "ici_mesh", "megatron", "deepspeed", "torchtitan", "llmfoundry"]
Group = Literal["ici", "dcn", "world"]
Scalar = str | int | float | bool | None


class ConfigKey(BaseModel):
    """One mesh value found in the file: the key as written, its canonical axis, value and position."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    key: str = Field(description="the key as written, e.g. ici_fsdp_parallelism, model (inside ici_mesh)")
    path: str = Field(description="dotted location in the file, e.g. model.tensor_model_parallel_size")
    group: Group = Field(description="ici (inside a slice/node), dcn (across slices) or world (Megatron)")
    axis: Axis = Field(description="the canonical mesh axis this key sizes")
    value: int = Field(description="the size as written; -1 means 'the rest' (MaxText, ici_mesh only)")
    raw: str = Field(description="the exact source text of the value, quotes included")
    line: int = Field(description="1-based line of the key")
    column: int = Field(description="1-based column of the key")
    start: int = Field(description="character offset where the value's text starts")
    end: int = Field(description="character offset just past the value's text")
    file: str | None = Field(
        default=None,
        description="the file holding the value when it is not the config's own text (a base_config file, a "
        "script the launch calls); None: the config's own text. start = end = -1: not a literal ASAP can edit",
    )
    via: str | None = Field(default=None, description="how the value reaches the framework, e.g. 'shell variable TP'")

    @property
    def editable(self) -> bool:
        return self.start >= 0


class ShardingConfig(BaseModel):
    """A sharding config file, parsed: format, origin, raw text, mesh keys and extra settings."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    format: Format = Field(description="maxtext | ici_mesh | megatron | deepspeed | torchtitan | llmfoundry")
    source: str = Field(description="the path (or label) the text came from, used in every message")
    text: str = Field(description="the file's full text, exactly as read (line endings included)")
    keys: list[ConfigKey] = Field(description="every mesh key found, in file order")
    settings: dict[str, Scalar] = Field(
        default_factory=dict,
        description="other recognised settings (remat_policy, micro_batch_size, ...), dotted path -> value",
    )
    mappings: list[str] = Field(
        default_factory=list,
        description="ici_mesh format only: which of ici_mesh / dcn_mesh the file has (an empty one counts)",
    )
    files: dict[str, str] = Field(
        default_factory=dict,
        description="other files the reading used (base_config chain, called scripts): path -> text as read",
    )
    origins: dict[str, ConfigKey] = Field(
        default_factory=dict,
        description="where each setting's winning value is written (setting name -> position), for edits",
    )
    mesh_axes: list[str] | None = Field(
        default=None, description="MaxText: the mesh_axes in force (from the config chain); None when unknown"
    )
    vintage: str | None = Field(default=None, description="MaxText: which MaxText version the axes look like; "
                                "torchtitan: which TOML layout the file uses")
    devices: int | None = Field(default=None, description="the device count the launch itself states, if any")
    devices_per_chip: int = Field(
        default=1, ge=1,
        description="MaxText: JAX devices per chip of the run's hardware (2 on TPU7x): the config's mesh sizes count "
        "devices and mesh() folds them into chips; set by whoever reads the config for a run",
    )
    nodes: int | None = Field(default=None, description="nodes / slices the launch itself states, if any")
    launch: str | None = Field(default=None, description="the launch command read, e.g. 'torchrun ... (train.sh:77)'")
    insert_at: int | None = Field(
        default=None, description="offset in the config's text where a new override/flag goes (launch scripts)"
    )
    command: str | None = Field(default=None, description="the recorded launch command the reading used, if any")
    has_path: bool = Field(default=False, description="read from a path on disk (base_config files were looked up)")
    root: str | None = Field(default=None, description="the folder other files the config names were read inside")
    precision_recipe: str | None = Field(
        default=None, description="Megatron: the per-module precision recipe file read (--te-precision-config-file); "
        "its text is in files")
    insert_style: str | None = Field(default=None, description="override (key=value) | flag (--key value)")
    reading: list[str] = Field(
        default_factory=list,
        description="how values were resolved: which place wins when a value is set twice, keys the framework "
        "ignores, defaults assumed",
    )

    def text_of(self, file: str | None) -> str:
        """The text of ``file`` (None: the config's own text)."""
        return self.text if file is None or file == self.source else self.files[file]

    def allowed_axes(self) -> set[Axis]:
        """Canonical axes this config's framework can express: a proposal must use no others.

        MaxText: the axes of its own ``mesh_axes`` (a MaxText without a ``sequence``/``context`` axis cannot
        take sequence parallelism); Megatron: no FSDP axis; plain ``ici_mesh``: all six.
        """
        return _module(self.format).allowed_axes(self)

    def framework_keys(self) -> tuple[str, ...]:
        """Setting names this framework reads (an edit never adds any other key), with the sizes a settings edit may
        write without moving the mesh (Megatron's expert size, which folds over tensor ranks: ``GRID_KEYS``)."""
        return tuple(_module(self.format).SETTINGS) + self.grid_keys()

    def grid_keys(self) -> tuple[str, ...]:
        """Sizes a settings edit may write without moving the mesh (Megatron's folded expert size)."""
        return tuple(getattr(_module(self.format), "GRID_KEYS", ()))

    def key(self, name: str) -> ConfigKey | None:
        """The mesh key written as ``name`` (e.g. ``ici_tensor_parallelism`` or ``ici_mesh.model``)."""
        for k in self.keys:
            if k.key == name or k.path == name:
                return k
        return None

    def setting(self, name: str) -> Scalar:
        """An extra setting by key name wherever it sits (``micro_batch_size`` finds ``model.micro_batch_size``)."""
        for path, value in self.settings.items():
            if path == name or path.rsplit(".", 1)[-1] == name:
                return value
        return None

    def mesh(self, num_devices: int, num_slices: int = 1) -> Mesh:
        """Resolve this config to a mesh for a run of ``num_devices`` chips in ``num_slices`` slices/nodes.

        ``-1`` values take "the rest"; the result is validated (axes multiply to the device count) and
        normalized (size-1 axes dropped). Raises :class:`ConfigError` naming the key and the arithmetic.
        """
        _check_counts(num_devices, num_slices, self.source)
        per_chip = self.jax_per_chip()
        if per_chip == 1:
            return _module(self.format).mesh(self, num_devices, num_slices)
        try:
            devices = _module(self.format).mesh(self, num_devices * per_chip, num_slices)
        except ConfigError as exc:
            raise ConfigError(exc.message, source=exc.source, field=exc.field, hint=self._per_chip_hint(num_devices)) \
                from None
        return fold_devices(devices, per_chip, source=self.source)

    def jax_per_chip(self) -> int:
        """Devices per chip the config's sizes count: ``devices_per_chip`` for MaxText (JAX devices), else 1."""
        return self.devices_per_chip if self.format == "maxtext" else 1

    def _per_chip_hint(self, chips: int) -> str:
        return (f"MaxText counts JAX devices: {self.devices_per_chip} per chip on this hardware, so its ici_*/dcn_* "
                f"sizes multiply to {chips * self.devices_per_chip} for these {chips} chips")

    def notes(self, num_devices: int, num_slices: int = 1) -> list[str]:
        """Legal-but-notable facts about this config on that run (e.g. tensor parallelism across nodes)."""
        _check_counts(num_devices, num_slices, self.source)
        per_chip = self.jax_per_chip()
        out = _module(self.format).notes(self, num_devices * per_chip, num_slices)
        if per_chip > 1:
            devices = _module(self.format).mesh(self, num_devices * per_chip, num_slices).normalized()
            out.append(f"{num_devices} chips are {num_devices * per_chip} JAX devices ({per_chip} per chip): the "
                       f"config's mesh {devices.short()} over devices is {self.mesh(num_devices, num_slices).normalized().short()} "
                       "over chips, which ASAP prices")
        return out


def _check_counts(num_devices: int, num_slices: int, source: str) -> None:
    if isinstance(num_devices, bool) or not isinstance(num_devices, int) or num_devices < 1:
        raise ConfigError(f"the device count must be a positive integer, got {num_devices!r}", source=source)
    if isinstance(num_slices, bool) or not isinstance(num_slices, int) or num_slices < 1:
        raise ConfigError(f"the slice count must be a positive integer, got {num_slices!r}", source=source)
    if num_devices % num_slices:
        raise ConfigError(
            f"{num_devices} devices cannot be split evenly into {num_slices} slices "
            f"({num_devices} / {num_slices} is not an integer)",
            source=source,
        )


def _module(fmt: Format):  # noqa: ANN202 - returns one of the format modules
    from bot.configs import deepspeed, llmfoundry, maxtext, megatron, plainmesh, torchtitan

    return {"maxtext": maxtext, "ici_mesh": plainmesh, "megatron": megatron, "deepspeed": deepspeed,
            "torchtitan": torchtitan, "llmfoundry": llmfoundry}[fmt]
