"""GPU placement arithmetic (accelerate), checked on a CPU machine with made-up free memory."""

from __future__ import annotations

import pytest
import torch
from transformers import LlamaConfig

from webui.models.loading import LoadError, plan_gpu_placement

CONFIG = LlamaConfig(
    vocab_size=1000,
    hidden_size=256,
    intermediate_size=512,
    num_hidden_layers=8,
    num_attention_heads=4,
    num_key_value_heads=4,
)
MiB = 2**20


def _bytes_needed() -> int:
    from accelerate import init_empty_weights
    from accelerate.utils import compute_module_sizes
    from transformers import AutoModelForCausalLM

    with init_empty_weights():
        skeleton = AutoModelForCausalLM.from_config(CONFIG, dtype=torch.float16)
    return compute_module_sizes(skeleton, dtype=torch.float16)[""]


def test_fits_on_one_gpu() -> None:
    plan = plan_gpu_placement(CONFIG, torch.float16, {0: 100 * _bytes_needed()})
    assert set(plan.values()) == {0}


def test_spreads_over_gpus_by_free_memory() -> None:
    need = _bytes_needed()
    plan = plan_gpu_placement(CONFIG, torch.float16, {0: int(need * 0.7), 1: int(need * 0.7)})
    assert set(plan.values()) == {0, 1}


def test_max_memory_from_the_models_file_caps_a_gpu() -> None:
    need = _bytes_needed()
    plan = plan_gpu_placement(
        CONFIG, torch.float16, {0: 100 * need, 1: 100 * need}, {"0": f"{int(need * 0.6 / MiB)}MiB"}
    )
    assert set(plan.values()) == {0, 1}


def test_model_that_does_not_fit_is_a_clear_failure() -> None:
    need = _bytes_needed()
    with pytest.raises(LoadError, match=r"does not fit on the GPUs: needs about .* GiB .* usable across 2 GPU"):
        plan_gpu_placement(CONFIG, torch.float16, {0: need // 4, 1: need // 4})
