"""FlashAttention's accounting (issue 13, part 2): the bytes attention keeps for backward,
naive and fused, against saved-tensor hooks on the real calls; the HBM traffic of Dao et al.
2022's Algorithm 1 by hand; the longest context each path fits."""

import pytest
import torch

from llama_lab import analysis
from llama_lab.analysis.flash import hbm_elements, longest_fitting
from llama_lab.config import PRESETS
from llama_lab.model import reference_attention
from llama_lab.model.attention import causal_attention
from llama_lab.runtime.hardware import GPUS


def saved_bytes(fn, *tensors) -> int:
    """Bytes of the distinct storages autograd keeps for backward while ``fn`` runs."""
    seen = {}

    def pack(t):
        seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn(*tensors)
    return sum(seen.values())


@pytest.mark.parametrize("kv_heads", [4, 2, 1])
@pytest.mark.parametrize("T", [8, 33, 64])
@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_kept_bytes_equal_the_hooks(kv_heads, T, dtype):
    cfg = PRESETS["debug"].replace(n_kv_heads=kv_heads)  # 4 heads of 16
    B, H, D = 2, cfg.n_heads, cfg.head_dim
    torch_dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[dtype]
    q = torch.randn(B, H, T, D, dtype=torch_dtype, requires_grad=True)
    k = torch.randn(B, kv_heads, T, D, dtype=torch_dtype, requires_grad=True)
    v = torch.randn(B, kv_heads, T, D, dtype=torch_dtype, requires_grad=True)
    n_rep = H // kv_heads
    naive = saved_bytes(lambda *t: reference_attention(*t, n_rep)[0], q, k, v)
    fused = saved_bytes(lambda *t: causal_attention(*t, n_rep), q, k, v)
    assert naive == analysis.naive_layer_bytes(cfg, T, B, dtype)
    assert fused == analysis.flash_layer_bytes(cfg, T, B, dtype)


def test_naive_grows_with_t_squared_and_fused_with_t():
    cfg = PRESETS["llama-3-8b"]
    a, b = (analysis.attention_memory(cfg, T, 1, "bf16") for T in (4096, 8192))
    assert a.flash_bytes * 2 == b.flash_bytes
    # P dominates: doubling T nearly quadruples the naive figure
    assert 3.8 < b.naive_bytes / a.naive_bytes < 4.0
    # LLaMA-3-8B at T=8192, one layer, bf16: P is 32 · 8192² · 2 bytes
    assert b.naive_layer_bytes == 2 * 32 * (3 * 8192 * 128 + 8192**2) + 8192**2
    assert b.flash_layer_bytes == 2 * 8192 * 128 * (2 * 32 + 2 * 8) + 4 * 32 * 8192


def test_hbm_traffic_by_hand():
    """N = 1024, d = 64, M = 100 KiB in bf16 = 51,200 elements: B_c = ⌈51200 / 256⌉ = 200,
    B_r = min(200, 64) = 64, T_c = ⌈1024 / 200⌉ = 6. Standard: 4·N·d + 4·N² = 4,456,448;
    FlashAttention: 2·N·d + 6·(3·N·d + 4·N) = 131,072 + 6 · 200,704 = 1,335,296."""
    standard, flash, cols, rows = hbm_elements(1024, 64, 51_200)
    assert (standard, flash, cols, rows) == (4_456_448, 1_335_296, 200, 64)
    r = analysis.attention_memory(PRESETS["llama-3-8b"], 8192, 1, "bf16", "H100 80GB")
    assert r.sram_bytes == 228 * 1024 and r.block_cols == 228 and r.block_rows == 128
    assert r.flash_hbm_bytes < r.naive_hbm_bytes


def test_the_longest_fitting_context_is_the_boundary():
    cfg, gpu = PRESETS["llama-3-8b"], GPUS["H100 80GB"]
    for layer_bytes in (analysis.naive_layer_bytes, analysis.flash_layer_bytes):
        T = longest_fitting(cfg, 1, "bf16", gpu, layer_bytes)
        room = gpu.usable_bytes - analysis.weight_bytes(cfg, "bf16")
        assert cfg.n_layers * layer_bytes(cfg, T, 1, "bf16") <= room
        assert cfg.n_layers * layer_bytes(cfg, T + 1, 1, "bf16") > room
    r = analysis.attention_memory(cfg, 8192, 1, "bf16")
    assert r.naive_fits_up_to < 8192 < r.flash_fits_up_to
    assert analysis.analyze(cfg, 8192)["attention_memory"] == r.to_dict()
