"""Quantised storage (issue 13, part 1): every weight tensor of every preset, the bytes each
format stores with its scales and zero points — against a hand derivation and against real
quantised tensors — and the KV cache's bytes per token at each KV dtype."""

import itertools

import pytest
import torch

from llama_lab import analysis
from llama_lab.analysis import WeightQuant, weight_tensors, weights_bytes
from llama_lab.analysis.quant import DEFAULT_KEEP, TensorGroup
from llama_lab.config import PRESETS
from llama_lab.model import build_model
from llama_lab.model.quant import QuantLinear, dequantize, quantize, quantize_linears


@pytest.mark.parametrize("name", list(PRESETS))
def test_the_tensor_inventory_is_every_parameter_of_every_preset(name):
    cfg = PRESETS[name]
    assert sum(g.params for g in weight_tensors(cfg)) == analysis.count_params(cfg).total
    # + the float32 buffers a checkpoint holds (DeepSeek-V3's router correction bias; Llama 4's
    # sigmoid router has none)
    buffers = 4 * sum(g.params for g in analysis.quant.buffer_tensors(cfg))
    bias = cfg.moe_scoring == "sigmoid" and cfg.moe_style == "standard"
    assert buffers == (4 * cfg.n_experts * sum(cfg.moe_layer_flags) if bias else 0)
    assert weights_bytes(cfg, "bf16").total == 2 * analysis.count_params(cfg).total + buffers
    assert weights_bytes(cfg, "fp32").total == 4 * analysis.count_params(cfg).total + buffers


def test_every_module_tensor_has_its_kind_in_the_inventory():
    """On small copies of the families (biases, QK-norm, experts, tied, learned positions):
    the meta module's tensors, grouped by shape, are the inventory's."""
    for cfg in (
        PRESETS["debug"].replace(bias=True, tie_embeddings=True, pos_encoding="learned"),
        PRESETS["debug"].replace(qk_norm=True, n_experts=4, experts_per_token=2, moe_layers="1"),
    ):
        model = build_model(cfg, device="meta")
        module = sorted(p.numel() for p in model.parameters())
        inventory = sorted(g.rows * g.cols for g in weight_tensors(cfg) for _ in range(g.count))
        assert sum(module) == sum(inventory)


def test_llama_3_8b_int4_by_hand():
    """LLaMA-3-8B in int4, groups of 128 inputs, fp16 scales, embeddings/lm_head/norms in bf16:
    linear parameters 8,030,261,248 − 2 · 128,256 · 4,096 − 65 · 4,096 = 6,979,321,856 at half a
    byte, one 2-byte scale per 128 of them, and 1,050,939,392 kept parameters at 2 bytes."""
    stored = weights_bytes(PRESETS["llama-3-8b"], "int4")
    linear = 8_030_261_248 - 2 * 128_256 * 4_096 - 65 * 4_096
    assert linear == 6_979_321_856
    assert stored.quantised == linear // 2
    assert stored.scales == linear // 128 * 2
    assert stored.kept == (2 * 128_256 * 4_096 + 65 * 4_096) * 2
    assert stored.total == 5_700_591_616 and stored.zero_points == 0
    # everything quantised, asymmetric, per output row: every row one scale and one zero point
    every = weights_bytes(
        PRESETS["llama-3-8b"], WeightQuant.of("int4", group_size=0, zero_point=True, keep=())
    )
    rows = sum(g.count * g.rows for g in weight_tensors(PRESETS["llama-3-8b"]) if g.role != "bias")
    assert every.scales == 2 * rows


@pytest.mark.parametrize(
    "dtype,group,zero",
    [
        (d, g, z)
        for d, g, z in itertools.product(("int8", "int4", "fp8"), (-1, 0, 32, 48), (False, True))
        if not (z and d == "fp8")
    ],
)
def test_real_quantised_tensors_hold_exactly_the_predicted_bytes(dtype, group, zero):
    torch.manual_seed(0)
    quant = WeightQuant.of(dtype, group_size=group, zero_point=zero, keep=())
    for rows, cols in ((64, 200), (7, 33), (1, 5)):
        w = torch.randn(rows, cols)
        q = quantize(w, dtype, group, quant.scale_dtype, zero)
        assert q.nbytes == sum(quant.tensor_bytes(TensorGroup("w", "linear", 1, rows, cols)).values())
        error = (dequantize(q) - w).abs().max() / w.abs().max()
        assert error <= {"int8": 0.005, "int4": 0.08, "fp8": 0.07}[dtype]


def test_a_quantised_model_holds_the_predicted_bytes_and_stays_close():
    """The debug model's linear layers in int8 and int4 (lm_head, embeddings and norms kept in
    bf16): the bytes of every tensor it holds equal weights_bytes, its logits stay close."""
    cfg = PRESETS["debug"]
    x = torch.randint(0, cfg.vocab_size, (2, 16), generator=torch.Generator().manual_seed(0))
    reference = build_model(cfg, seed=0)(x)
    for dtype in ("int8", "int4"):
        model = build_model(cfg, seed=0).to(torch.bfloat16)
        assert quantize_linears(model, dtype, 32 if dtype == "int4" else 0) == 7 * cfg.n_layers
        held = sum(
            t.numel() * t.element_size() for t in [*model.parameters(), *model.buffers()] if t is not None
        )
        quant = WeightQuant.of(dtype, group_size=32 if dtype == "int4" else 0)
        assert held == weights_bytes(cfg, quant).total
        with torch.no_grad():
            error = (model(x).float() - reference).abs().max().item()
        assert error < {"int8": 0.05, "int4": 0.5}[dtype], error
        assert isinstance(model.model.layers[0].self_attn.qkv_proj, QuantLinear)


def test_the_kv_cache_per_token_at_each_dtype_by_hand():
    """LLaMA-3-8B: 32 layers, 8 KV heads of 128. K and V per token: 2 · 32 · 8 · 128 elements;
    int8 adds an fp16 scale per token and head, int4 packs two per byte plus the scale."""
    cfg = PRESETS["llama-3-8b"]
    n = 2 * 32 * 8
    expected = {
        "fp32": n * 512,
        "bf16": n * 256,
        "fp16": n * 256,
        "fp8": n * 128,
        "int8": n * (128 + 2),
        "int4": n * (64 + 2),
    }
    assert {k: analysis.kv_cache_bytes_per_token(cfg, k) for k in expected} == expected
    assert analysis.kv_cache(cfg, 1024, 2, "int8").bytes == 2 * 1024 * expected["int8"]
    assert analysis.kv_cache(cfg, 16, 1, "bf16").by_dtype == expected


def test_analyze_reports_the_weights_and_the_cache_at_their_own_dtypes():
    cfg = PRESETS["llama-3-8b"]
    plain = analysis.analyze(cfg, 8192)
    mixed = analysis.analyze(cfg, 8192, weights="int4", kv_dtype="fp8")
    assert plain["memory"]["weights_bytes"] == 2 * analysis.count_params(cfg).total
    assert mixed["memory"]["weights_bytes"] == 5_700_591_616
    assert mixed["kv_cache"]["bytes_per_token"] == plain["kv_cache"]["bytes_per_token"] // 2
    inference = mixed["memory"]["inference"]["components"]
    assert inference["weights"] == 5_700_591_616
    assert inference["kv_cache"] == 8192 * mixed["kv_cache"]["bytes_per_token"]
    # more room: the longest context on an H100 grows as the weights and the cache shrink
    h100 = 81_559 * 2**20 - 300 * 10**6  # reported less the CUDA context
    longest = {
        name: r["kv_cache"]["max_context_by_gpu"]["H100 80GB"]
        for name, r in (("bf16", plain), ("int4+fp8", mixed))
    }
    assert longest["int4+fp8"] == (h100 - 5_700_591_616) // mixed["kv_cache"]["bytes_per_token"]
    assert longest["int4+fp8"] > 2 * longest["bf16"]


def test_the_decode_roofline_reads_the_stored_formats():
    """One decode step reads every weight once in its stored format (the table too, tied or
    not, only its gathered rows) and the cache at its dtype."""
    cfg = PRESETS["llama-3-8b"]
    r16 = analysis.roofline(cfg, "H100 80GB", 1, 4096)
    r4 = analysis.roofline(cfg, "H100 80GB", 1, 4096, weights="int4", kv_dtype="fp8")
    stored = weights_bytes(cfg, "int4")
    table = 128_256 * 4_096 * 2
    assert r4.weight_bytes == stored.total - table + 4_096 * 2
    assert r16.weight_bytes == 2 * (analysis.count_params(cfg).total - 128_256 * 4_096 + 4_096)
    assert r4.kv_cache_bytes == analysis.kv_cache_bytes(
        cfg, 4096, 1, "fp8"
    ) + analysis.kv_cache_bytes_per_token(cfg, "fp8")
    assert r4.time_per_token_s < r16.time_per_token_s


@pytest.mark.parametrize(
    "bad,rule",
    [
        (dict(dtype="int3"), "weight dtype='int3' must be one of"),
        (dict(dtype="fp8", zero_point=True), "zero points need an integer format"),
        (dict(dtype="int4", group_size=-2), "group_size=-2 must be -1"),
        (dict(dtype="int4", scale_dtype="int8"), "scale dtype='int8' must be one of"),
        (dict(dtype="int4", keep=("embeddings", "ffn")), "keep=['ffn'] must name tensors"),
    ],
)
def test_impossible_formats_are_refused_with_the_rule(bad, rule):
    with pytest.raises(analysis.AnalysisError, match=rule.replace("[", r"\[").replace("(", r"\(")):
        WeightQuant.of(**bad)
    with pytest.raises(analysis.AnalysisError, match="KV dtype='int2'"):
        analysis.kv_cache_bytes_per_token(PRESETS["debug"], "int2")


def test_the_kv_pages_dtype_axis_and_the_reports_formats():
    from llama_lab.figures.kv import kv_dtype_frame, weights_by_format
    from llama_lab.runtime.hardware import GPUS

    cfg = PRESETS["llama-2-70b"]
    axis = kv_dtype_frame(cfg, GPUS["H100 80GB"], 1, "int4").set_index("kv_dtype")
    assert list(axis.index) == list(analysis.KV_DTYPES)
    assert axis.loc["int8", "gqa_bytes_per_token"] == 2 * 80 * 8 * (128 + 2)
    assert axis.loc["bf16", "mha_bytes_per_token"] == 8 * axis.loc["bf16", "gqa_bytes_per_token"]
    assert axis.loc["fp8", "gqa_longest_context"] == analysis.max_context_that_fits(
        cfg, "H100 80GB", 1, "int4", "fp8"
    )
    formats = weights_by_format(cfg).set_index("weights")
    assert formats.loc["bf16", "bytes"] == 2 * analysis.count_params(cfg).total
    assert formats.loc["int4", "bytes"] == weights_bytes(cfg, "int4").total
    assert formats.loc["int4", "group_size"] == 128 and formats["scales"]["bf16"] == 0


@pytest.mark.parametrize("dtype", ["int8", "int4", "fp8"])
def test_a_quant_linear_computes_from_its_buffers_after_a_move_or_a_load(dtype):
    """The layer reads its registered buffers: after ``load_state_dict`` it computes with the
    loaded tensors, after ``.to(float64)`` in float64, on the meta device with meta tensors."""
    from llama_lab.model.quant import QuantLinear

    g = torch.Generator().manual_seed(0)
    a, b = torch.nn.Linear(16, 8), torch.nn.Linear(16, 8)
    with torch.no_grad():
        a.weight.copy_(torch.randn(8, 16, generator=g))
        b.weight.copy_(torch.randn(8, 16, generator=g))
    qa, qb = (
        QuantLinear(a, dtype, 8, zero_point=dtype == "int4"),
        QuantLinear(b, dtype, 8, zero_point=dtype == "int4"),
    )
    x = torch.randn(3, 16, generator=g)
    qa.load_state_dict(qb.state_dict())
    torch.testing.assert_close(qa(x), qb(x))
    wide = qa.to(torch.float64)
    out = wide(x.double())
    assert out.dtype == torch.float64
    torch.testing.assert_close(out, qb(x).double(), rtol=1e-5, atol=1e-5)
    assert qa.to("meta")(x.to("meta")).is_meta


@pytest.mark.parametrize(
    "name",
    ["mixtral-8x7b", "deepseek-v3", "gpt-oss-20b", "qwen3-next-80b-a3b", "llama-4-scout", "llama-4-maverick"],
)
def test_the_live_copies_of_the_expert_families_hold_the_predicted_bytes(name):
    """As the Inference systems page quantises them: every nn.Linear in int8 but the head and the
    routers (Qwen's shared-expert gate and Llama 4's feed_forward.router among them), the fused
    experts kept in bf16; the bytes held equal weights_bytes, buffers included (DeepSeek-V3's
    correction bias; Llama 4's sigmoid router has none)."""
    from llama_lab.config.recipes import live_config
    from llama_lab.experiments.quantize import ROUTERS, bf16_copy, held_bytes

    cfg = live_config(PRESETS[name], 2, 64, 64)
    model = bf16_copy(build_model(cfg, seed=0))
    quantize_linears(model, "int8", 0, skip=("lm_head", *ROUTERS))
    quant = WeightQuant.of("int8", group_size=0, keep=DEFAULT_KEEP + ("experts",))
    assert held_bytes(model) == weights_bytes(cfg, quant).total
