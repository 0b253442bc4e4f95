"""run.yaml's ``framework:`` as users write it: a torchtitan user writes ``framework: torchtitan``, and was told it must
be one of maxtext, megatron, jax, other (seen with a run.yaml for torchtitan's llama3_8b config function)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from bot.runs.record import RunRecord

BASE = {"id": "r1", "chip": "h100", "num_chips": 8}


@pytest.mark.parametrize(("written", "read"), [("torchtitan", "other"), ("TorchTitan", "other"),
                                               ("deepspeed", "other"), ("llm-foundry", "other"),
                                               ("nemo", "megatron"), ("Megatron-Bridge", "megatron"),
                                               ("maxtext", "maxtext")])
def test_the_stacks_name_reads_as_the_framework_asap_prices_it_by(written: str, read: str) -> None:
    assert RunRecord.model_validate({**BASE, "framework": written}).framework == read


def test_torchtitan_also_tags_the_run_once() -> None:
    assert RunRecord.model_validate({**BASE, "framework": "torchtitan"}).tags == ["torchtitan"]
    tagged = RunRecord.model_validate({**BASE, "framework": "torchtitan", "tags": ["torchtitan", "prod"]})
    assert tagged.tags == ["torchtitan", "prod"]


def test_an_unknown_stack_is_still_an_error_naming_the_accepted_values() -> None:
    with pytest.raises(ValidationError, match="'maxtext', 'megatron', 'jax' or 'other'"):
        RunRecord.model_validate({**BASE, "framework": "colossalai"})
