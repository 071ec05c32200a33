"""Kernel launches of an eager forward (``analysis.launches``): counted on the meta device, held
against the same model run for real on the CPU, and the sparse blocks' expert share by hand."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from llama_lab.analysis.launches import LaunchCounter, experts_reached, forward_launches
from llama_lab.config import ModelConfig, get_preset
from llama_lab.model.decoder import CausalLM


def real_cpu_launches(cfg: ModelConfig) -> int:
    """The kernels a real bf16 decode step of ``cfg`` launches on the CPU (one token, a cache)."""
    torch.manual_seed(0)
    model = CausalLM(cfg).to(torch.bfloat16)
    cache, ids = model.new_cache(1, 2), torch.zeros((1, 1), dtype=torch.long)
    with torch.no_grad(), LaunchCounter() as counter:
        model(ids, cache, last_only=True)
    return counter.total


@pytest.mark.parametrize("preset", ["debug", "seed-demo", "transformer-2017"])
def test_meta_count_equals_a_real_cpu_forward_for_dense_models(preset):
    """The same operators run on both devices, attention one fused call on each; on a device
    other than the CPU, RoPE's inverse frequencies (built on the host) are copied over once
    more, as they are to a GPU."""
    cfg = get_preset(preset)
    host_to_device = 1 if cfg.pos_encoding == "rope" else 0
    assert forward_launches(cfg, 1) == real_cpu_launches(cfg) + host_to_device


def test_dense_count_grows_by_one_block_per_layer_and_not_with_tokens():
    cfg = get_preset("seed-demo")
    one, two = (forward_launches(dataclasses.replace(cfg, n_layers=n)) for n in (1, 2))
    per_block = two - one
    assert per_block > 20  # norms, projections, RoPE, attention, SwiGLU: dozens of operators
    assert forward_launches(cfg) == one + (cfg.n_layers - 1) * per_block
    assert forward_launches(cfg, 512) == forward_launches(cfg, 1)


def test_experts_reached_by_hand():
    """Uniform routing, k of E per token: one token reaches k experts; many reach nearly all."""
    cfg = get_preset("mixtral-8x7b")  # E = 8, k = 2
    assert experts_reached(cfg, 1) == pytest.approx(2.0)
    assert experts_reached(cfg, 2) == pytest.approx(8 * (1 - (6 / 8) ** 2))  # 3.5
    assert experts_reached(cfg, 10_000) == pytest.approx(8.0)


def test_a_sparse_block_launches_more_kernels_as_more_experts_run():
    cfg = get_preset("mixtral-8x7b")
    assert forward_launches(cfg, 1) < forward_launches(cfg, 4) < forward_launches(cfg, 64)
    assert forward_launches(cfg, 64) == forward_launches(cfg, 4096)  # every expert already runs
