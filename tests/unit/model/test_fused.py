"""Fused q/k/v and gate/up projections: one GEMM each, checkpoints exactly as before."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from llama_lab.analysis import count_params, count_params_module
from llama_lab.config import PRESETS
from llama_lab.model import FusedLinear, build_model, part_tensors
from llama_lab.model.quant import quantize, quantize_linears

RECIPES = {
    "llama": {},
    "mha": {"n_kv_heads": 4},
    "mqa": {"n_kv_heads": 1},
    "qwen2-biases": {"qkv_bias": True, "o_bias": False},
    "qwen3-qk-norm": {"qk_norm": True, "head_dim": 24},
    "2017": {
        "norm_position": "post",
        "norm_type": "layernorm",
        "final_norm": False,
        "pos_encoding": "sinusoidal",
        "ffn_type": "relu",
        "bias": True,
    },
    "moe": {"n_experts": 4, "experts_per_token": 2},
}


class _MatmulCount(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.overloadpacket in (torch.ops.aten.mm, torch.ops.aten.addmm, torch.ops.aten.bmm):
            self.count += 1
        return func(*args, **(kwargs or {}))


def _separate_reference(model, x, rope=None):
    """Block 0's attention projections and SwiGLU by hand from the checkpoint's own tensors."""
    sd = model.model.layers[0].state_dict()

    def linear(name, h):
        return F.linear(h, sd[f"{name}.weight"], sd.get(f"{name}.bias"))

    return {name: linear(f"self_attn.{name}", x) for name in ("q_proj", "k_proj", "v_proj")}, linear(
        "mlp.down_proj", F.silu(linear("mlp.gate_proj", x)) * linear("mlp.up_proj", x)
    )


@pytest.mark.parametrize("recipe", RECIPES)
def test_the_state_dict_keys_and_tensors_are_the_separate_layers(debug_cfg, recipe):
    cfg = debug_cfg.replace(**RECIPES[recipe])
    model = build_model(cfg, seed=0)
    sd = model.state_dict()
    attn = model.model.layers[0].self_attn
    H, G, D = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
    # the keys transformers writes; the tensors cut from the fused weight by hand
    assert "model.layers.0.self_attn.qkv_proj.weight" not in sd
    w = attn.qkv_proj.weight
    assert torch.equal(sd["model.layers.0.self_attn.q_proj.weight"], w[: H * D])
    assert torch.equal(sd["model.layers.0.self_attn.k_proj.weight"], w[H * D : (H + G) * D])
    assert torch.equal(sd["model.layers.0.self_attn.v_proj.weight"], w[(H + G) * D :])
    assert sd["model.layers.0.self_attn.k_proj.weight"].shape == (G * D, cfg.d_model)
    if cfg.qkv_bias:
        assert sd["model.layers.0.self_attn.v_proj.bias"].shape == (G * D,)
    if cfg.ffn_type == "swiglu" and not cfg.is_moe:
        F_ = cfg.ffn_hidden
        gu = model.model.layers[0].mlp.gate_up_proj.weight
        assert torch.equal(sd["model.layers.0.mlp.gate_proj.weight"], gu[:F_])
        assert torch.equal(sd["model.layers.0.mlp.up_proj.weight"], gu[F_:])
    assert not any("qkv_proj" in k or ".mlp.gate_up_proj" in k for k in sd)
    # every name part_tensors gives is a state-dict key holding the same values
    for name, tensor in part_tensors(model):
        assert torch.equal(sd[name], tensor), name


@pytest.mark.slow
@pytest.mark.parametrize("recipe", RECIPES)
def test_a_state_dict_round_trips_strictly_and_the_fused_key_loads_too(debug_cfg, recipe):
    cfg = debug_cfg.replace(**RECIPES[recipe])
    a, b = build_model(cfg, seed=0), build_model(cfg, seed=1)
    b.load_state_dict(a.state_dict(), strict=True)
    ids = torch.randint(0, cfg.vocab_size, (2, 8), generator=torch.Generator().manual_seed(0))
    assert torch.equal(a(ids), b(ids))
    c = build_model(cfg, seed=2)
    c.load_state_dict(a.state_dict(keep_vars=True), strict=True)  # fused keys: the Parameters
    assert torch.equal(a(ids), c(ids))
    with pytest.raises(RuntimeError, match="Missing key"):  # a missing part is reported
        partial = {
            k: v for k, v in a.state_dict().items() if not k.endswith("layers.0.self_attn.k_proj.weight")
        }
        build_model(cfg).load_state_dict(partial, strict=True)


def test_one_gemm_for_q_k_v_and_one_for_gate_up(debug_cfg):
    model = build_model(debug_cfg, seed=0)
    x = torch.randn(2, 8, debug_cfg.d_model)
    qkv, ffn = _separate_reference(model, x)
    layer = model.model.layers[0]
    with torch.no_grad():
        q, k, v = layer.self_attn.qkv_proj.split(layer.self_attn.qkv_proj(x))
        for name, got in zip(("q_proj", "k_proj", "v_proj"), (q, k, v)):
            torch.testing.assert_close(got, qkv[name], rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(layer.mlp(x), ffn, rtol=1e-5, atol=1e-6)
        counter = _MatmulCount()
        with counter:
            layer.mlp(x)
            layer.self_attn.project(x, None)
    assert counter.count == 2 + 1  # gate/up and down; q/k/v


@pytest.mark.parametrize("recipe", ["llama", "qwen3-qk-norm", "moe", "2017"])
def test_the_counts_from_the_module_keep_q_k_v_and_gate_up_apart(debug_cfg, recipe):
    cfg = debug_cfg.replace(**RECIPES[recipe])
    closed, module = count_params(cfg), count_params_module(cfg)
    assert closed.detail == module.detail
    L, C = cfg.n_layers, cfg.d_model
    assert module.detail["k_proj"] == module.detail["v_proj"] == L * C * cfg.n_kv_heads * cfg.head_dim
    assert module.detail["q_proj"] == L * C * cfg.n_heads * cfg.head_dim


@pytest.mark.parametrize("group_size", [-1, 0, 32])
def test_quantising_a_fused_projection_quantises_each_part(debug_cfg, group_size):
    """A per-tensor scale is each part's own (q, k, v separately), as the analysis counts."""
    model = build_model(debug_cfg, seed=0)
    sd = model.state_dict()
    assert quantize_linears(model, "int8", group_size) == 7 * debug_cfg.n_layers
    quant = model.model.layers[0].self_attn.qkv_proj
    for q, name in zip(quant.qs, ("q_proj", "k_proj", "v_proj")):
        alone = quantize(sd[f"model.layers.0.self_attn.{name}.weight"], "int8", group_size)
        assert torch.equal(q.data, alone.data) and torch.equal(q.scales, alone.scales)


def test_a_fused_linear_names_its_parts():
    layer = FusedLinear(8, (("a", 3), ("b", 5)), bias=True)
    assert layer.weight.shape == (8, 8) and layer.sizes == [3, 5]
    assert "a:3+b:5" in repr(layer)
    y = layer(torch.randn(2, 8))
    a, b = layer.split(y)
    assert a.shape == (2, 3) and b.shape == (2, 5)
    assert [p.shape for p in layer.pieces(layer.bias).values()] == [(3,), (5,)]


def test_the_seed_demo_checkpoint_has_the_separate_tensors_and_count():
    """The seed's demo model: 43,780,608 parameters counted tensor by tensor, and the 39
    tensors of LlamaForCausalLM (embedding, 4 × 9 per block, final norm, lm_head)."""
    cfg = PRESETS["seed-demo"]
    model = build_model(cfg, seed=0)
    assert sum(t.numel() for _, t in part_tensors(model)) == 43_780_608
    assert len(model.state_dict()) == 1 + 4 * 9 + 1 + 1
