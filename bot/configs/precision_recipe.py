"""Per-module precision recipes: Megatron's ``--te-precision-config-file`` (Megatron-Core ``quant_recipe``).

The file (megatron/core/quantization/quant_config.py and extensions/TransformerEngineMixedPrecision.md, Megatron-LM
@ d98e8a64dd) names quantization configs and ordered glob matchers over module paths; the first enabled matcher
whose pattern matches a module's path picks its config, and a module no matcher picks keeps the run's precision.
Megatron-Bridge's Nemotron 3 Super NVFP4 recipe ships one (``scripts/performance/configs/nemotronh/te_quant.cfg``:
attention projections, the latent projections and the MTP modules in BF16, Mamba's output projection in MXFP8, the
rest NVFP4)::

    configs:
      bf16: {transformer_engine_config_type: TEQuantizationParams, training_recipe: {}}
    matchers:
      attn_qkv_bf16: {config: bf16, type: glob, pattern: "*.linear_qkv", enabled: true}

What ASAP reads: the Transformer Engine configs (``TEQuantizationParams``; a config of another type, or a
``custom`` recipe, is not priced and the reading says so) and the glob matchers. A config's training recipe is
bf16 (no fp8 / fp4 recipe), ``fp8:<recipe>`` or ``fp4:<recipe>``. Megatron's own rules are kept: a matcher is off
unless ``enabled: true``; a recipe overrides a module that already runs quantized unless
``override_quantized_autocast`` is false, and quantizes a bf16 module only with ``override_nonquantized_autocast``.
Reading never writes; the file is read inside the config's repository only (``launch.Files``).
"""

from __future__ import annotations

import fnmatch
from functools import lru_cache
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bot import yamlsafe
from bot.errors import ConfigError

BF16 = "bf16"


class TERecipe(BaseModel):
    """Transformer Engine's per-module recipe (TEQuantizationRecipe: the fields Megatron-Core accepts)."""

    model_config = ConfigDict(extra="forbid")
    fp8_quantization_recipe: str | None = None
    fp4_quantization_recipe: str | None = None
    custom_recipe_factory: str | None = None
    fp8_format: str = "e4m3"
    override_quantized_autocast: bool = True
    override_nonquantized_autocast: bool = False
    tp_only_amax_red: bool = False
    fp8_param: bool = False
    fp4_param: bool = False

    def precision(self) -> str | None:
        """bf16, fp8:<recipe> or fp4:<recipe>; None for a custom recipe (its kernels are not known)."""
        if self.fp8_quantization_recipe and self.fp4_quantization_recipe:
            raise ValueError("fp8 and fp4 quantization settings are mutually exclusive")
        name = self.fp8_quantization_recipe or self.fp4_quantization_recipe
        if name is None:
            return BF16
        if str(name).lower() == "custom":
            return None
        return ("fp8:" if self.fp8_quantization_recipe else "fp4:") + str(name).lower()


class TEConfig(BaseModel):
    """One named config of the file: Transformer Engine's TEQuantizationParams."""

    model_config = ConfigDict(extra="forbid")
    transformer_engine_config_type: Literal["TEQuantizationParams"]
    training_recipe: TERecipe
    evaluation_recipe: TERecipe | None = None


class GlobMatcher(BaseModel):
    """One matcher: the config ``config`` for module paths matching ``pattern`` (fnmatch), when enabled."""

    model_config = ConfigDict(extra="forbid")
    config: str
    type: Literal["glob"]
    pattern: str = Field(min_length=1)
    enabled: bool = False


class PrecisionRecipe(BaseModel):
    """The file: named configs and ordered matchers."""

    model_config = ConfigDict(extra="forbid")
    configs: dict[str, dict[str, Any]]
    matchers: dict[str, GlobMatcher] = Field(default_factory=dict)


class Rule(BaseModel):
    """An enabled matcher resolved: the pattern, and what its config runs (None: not priced, ``why`` says so)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    pattern: str
    precision: str | None
    override_quantized: bool = True
    override_nonquantized: bool = False
    why: str | None = None


def read_rules(text: str, source: str) -> tuple[list[Rule], list[str]]:
    """The enabled matchers of a precision recipe file, in order, with notes on what is not priced.

    Raises ConfigError (naming the file and the field) when the text is not such a file. The config reader checks
    the file and the settings reader prices it: one parse serves both (:func:`_parse_rules`)."""
    rules, notes = _parse_rules(text, source)
    return list(rules), list(notes)


@lru_cache(maxsize=32)
def _parse_rules(text: str, source: str) -> tuple[tuple[Rule, ...], tuple[str, ...]]:
    try:
        raw = yamlsafe.load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"not readable YAML: {str(exc).splitlines()[0]}", source=source) from None
    if not isinstance(raw, dict):
        raise ConfigError("expected a mapping with 'configs' and 'matchers'", source=source)
    try:
        recipe = PrecisionRecipe.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise ConfigError(f"{err['msg']}", source=source, field=".".join(str(p) for p in err["loc"])) from None
    notes: list[str] = []
    configs: dict[str, tuple[TERecipe | None, str | None]] = {}
    for name, body in recipe.configs.items():
        configs[name] = _te_config(name, body, source)
    rules: list[Rule] = []
    for key, m in recipe.matchers.items():
        if not m.enabled:
            continue
        if m.config not in configs:
            raise ConfigError(f"matcher {key!r} names config {m.config!r}, which 'configs' does not define",
                              source=source, field=f"matchers.{key}.config")
        te, why = configs[m.config]
        prec = te.precision() if te is not None else None
        if te is not None and prec is None:
            why = f"config {m.config!r} uses a custom recipe"
        if why:
            notes.append(f"{source}: matcher {key!r} ({m.pattern}): {why}; those modules are priced at the run's "
                         "precision")
        rules.append(Rule(pattern=m.pattern, precision=prec,
                          override_quantized=te.override_quantized_autocast if te is not None else True,
                          override_nonquantized=te.override_nonquantized_autocast if te is not None else False,
                          why=why))
    return tuple(rules), tuple(notes)


def _te_config(name: str, body: dict[str, Any], source: str) -> tuple[TERecipe | None, str | None]:
    """A config as Transformer Engine reads it, or (None, why) for a config of another kind."""
    if "transformer_engine_config_type" not in body:
        kinds = ", ".join(sorted(k for k in body if k.endswith("_type"))) or "no transformer_engine_config_type"
        return None, f"config {name!r} is not a Transformer Engine config ({kinds})"
    try:
        te = TEConfig.model_validate(body)
        te.training_recipe.precision()
    except ValidationError as exc:
        err = exc.errors()[0]
        raise ConfigError(err["msg"], source=source,
                          field=".".join(["configs", name, *(str(p) for p in err["loc"])])) from None
    except ValueError as exc:
        raise ConfigError(str(exc), source=source, field=f"configs.{name}.training_recipe") from None
    return te.training_recipe, None


def precision_of(path: str, rules: list[Rule], default: str) -> str:
    """What a module at ``path`` runs in: the first rule whose pattern matches, under Megatron's override rules,
    else ``default`` (the run's precision: bf16, fp8:<recipe> or fp4:<recipe>)."""
    for rule in rules:
        if not fnmatch.fnmatch(path, rule.pattern):
            continue
        if rule.precision is None:
            return default
        quantized = default != BF16
        if (quantized and not rule.override_quantized) or (not quantized and not rule.override_nonquantized
                                                          and rule.precision != BF16):
            return default
        return rule.precision
    return default


RECIPE_KEYS: tuple[str, ...] = ("te_precision_config_file", "quant_recipe")
"""Where a Megatron config names the file: Megatron-LM ``--te-precision-config-file``; a ``quant_recipe`` written
as a path (Megatron-Core's TransformerConfig field, which Megatron-Bridge's recipes load from such a file)."""


def with_precision_recipe(cfg: Any, find: Any, read: Any) -> Any:
    """``cfg`` (a Megatron config) with the precision recipe file it names read: its text joins ``cfg.files``
    and ``cfg.precision_recipe`` names it. ``find(path_as_written, from_file)`` locates a file inside the repository;
    ``read(path)`` reads it. A file that cannot be found is a note, not an error (modules priced at the run's
    precision); a file that is not a recipe is an error naming it."""
    written = next((v for k, v in cfg.settings.items() if k.rsplit(".", 1)[-1] in RECIPE_KEYS
                    and isinstance(v, str) and v.strip()), None)
    if written is None:
        return cfg
    found = find(written, cfg.source)
    notes = list(cfg.reading)
    if found is None:
        notes.append(f"the precision recipe {written} was not found inside the repository: every module is priced "
                     "at the run's precision")
        return cfg.model_copy(update={"reading": notes})
    text = read(found)
    rules, more = read_rules(text, str(found))
    notes.append(f"per-module precision recipe read from {found}: {len(rules)} enabled matcher(s)")
    return cfg.model_copy(update={"reading": notes + more, "files": {**cfg.files, str(found): text},
                                  "precision_recipe": str(found)})
