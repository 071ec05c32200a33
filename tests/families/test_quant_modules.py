"""Per-module weight formats: a checkpoint's quantization_config that keeps some modules
unconverted (``modules_to_not_convert``, compressed-tensors' ``ignore``) counted module by module,
fbgemm_fp8 against transformers' own integration on the meta device, compressed-tensors fp8 by
hand from the tensors its code registers (and against its own compressor where it is
installed), Meta's Llama-3.1-405B-Instruct-FP8 per GPU at tp 8 against the all-fp8 count (the
difference by hand), ``predict decode --config``, and the refusals.

Sources (read, not remembered):
fbgemm_fp8 — transformers 5.x ``integrations/fbgemm_fp8.py`` ``FbgemmFp8Linear.__init__``: weight
float8_e4m3fn (N, K), weight_scale float32 (N, 1), input_scale_ub float32 (1,) (a non-persistent
buffer); ``replace_with_fbgemm_fp8_linear`` converts every nn.Linear ``should_convert_module``
(``quantizers/quantizers_utils.py``) does not skip; with a list given, no default skips
(``quantizers/base.py`` ``get_modules_to_not_convert``): the head is converted unless listed.
compressed-tensors — neuralmagic/compressed-tensors ``src/compressed_tensors/quantization/
lifecycle/initialize.py`` ``_initialize_scale_zero_point`` (@016da27): scale shape (N, 1) for
"channel", 1 for "tensor", dtype the weight's (``scale_dtype = module.weight.dtype``); dynamic
activations register nothing; ``compressors/quantized_compressors/base.py`` (@0199c6e) does not
save a symmetric zero point ("only save if asym"); ``utils/match.py`` (@01e75b2) ``_match_name``:
"re:" patterns by ``re.match``, others by the exact name.
"""

import json
from pathlib import Path

import pytest
import torch

from llama_lab.analysis import stored_weights, weights_bytes
from llama_lab.analysis.layouts import gpu_weight_bytes
from llama_lab.analysis.parallel import Layout
from llama_lab.analysis.quant import WeightQuant, dominant_format, unconverted_bytes
from llama_lab.analysis.rooflines import roofline
from llama_lab.config import PRESETS, ConfigError, read_hf_config
from llama_lab.config.files import load_config_file, load_stored_quant
from llama_lab.config.hf.quant import stored_quant
from llama_lab.runtime.hardware import GPUS
from llama_lab.validation.efficiency import format_class

FIXTURE = Path(__file__).parent / "published_configs" / "llama-3.1-405b-instruct-fp8.json"
DEBUG = {**PRESETS["debug"].to_hf_config(), "torch_dtype": "bfloat16"}  # 2 blocks, C 64, F 172
MIXTURE = {**DEBUG, "model_type": "mixtral", "num_local_experts": 4, "num_experts_per_tok": 2}
# (name, N outputs, K inputs) of one debug block's linear modules
DEBUG_LINEARS = [
    ("self_attn.q_proj", 64, 64),
    ("self_attn.k_proj", 32, 64),
    ("self_attn.v_proj", 32, 64),
    ("self_attn.o_proj", 64, 64),
    ("mlp.gate_proj", 172, 64),
    ("mlp.up_proj", 172, 64),
    ("mlp.down_proj", 64, 172),
]


def counted(data: dict) -> int:
    return weights_bytes(read_hf_config(data)[0], stored_weights(stored_quant(data))).total


# ---- fbgemm_fp8: transformers' own modules on the meta device ---------------------------------------


def transformers_fbgemm_bytes(data: dict, names: list[str] | None) -> int:
    """The bytes transformers' fbgemm_fp8 model holds: every parameter at its dtype and each
    FbgemmFp8Linear's input_scale_ub buffer (the rotary tables are not weights)."""
    from transformers import FbgemmFp8Config, LlamaConfig, LlamaForCausalLM
    from transformers.integrations import fbgemm_fp8

    config = LlamaConfig(**{k: v for k, v in data.items() if k != "quantization_config"})
    with torch.device("meta"):
        model = LlamaForCausalLM(config).to(torch.bfloat16)
    qc = FbgemmFp8Config(modules_to_not_convert=names)
    skip = names if names is not None else ["lm_head"]  # get_modules_to_not_convert's default skip
    kernel = fbgemm_fp8.get_quantize_fp8_per_row  # a CUDA op the meta device never calls
    fbgemm_fp8.get_quantize_fp8_per_row = lambda: None
    try:
        model = fbgemm_fp8.replace_with_fbgemm_fp8_linear(
            model, modules_to_not_convert=skip, quantization_config=qc, pre_quantized=True
        )
    finally:
        fbgemm_fp8.get_quantize_fp8_per_row = kernel
    held = sum(p.numel() * p.element_size() for p in model.parameters())
    return held + sum(
        b.numel() * b.element_size() for n, b in model.named_buffers() if n.endswith("input_scale_ub")
    )


@pytest.mark.parametrize(
    "names",
    [
        None,  # no list: the head skipped by default, every block converted
        ["lm_head", "model.layers.0.mlp", "model.layers.1.self_attn"],
        ["model.layers.1"],  # a whole block (its norms stay anyway); the head converted
        ["self_attn.q_proj", "down_proj"],  # suffixes: in every block
    ],
)
def test_fbgemm_fp8_is_counted_module_by_module_as_transformers_builds_it(names):
    qc = {"quant_method": "fbgemm_fp8", "activation_scale_ub": 1200.0}
    data = {**DEBUG, "quantization_config": {**qc, **({"modules_to_not_convert": names} if names else {})}}
    assert counted(data) == transformers_fbgemm_bytes(data, names)


def test_a_pipeline_stage_holds_its_own_blocks_unconverted_modules():
    qc = {"quant_method": "fbgemm_fp8", "modules_to_not_convert": ["lm_head", "model.layers.0.mlp"]}
    data = {**DEBUG, "quantization_config": qc}
    cfg, quant = read_hf_config(data)[0], stored_weights(stored_quant(data))
    stages = [sum(gpu_weight_bytes(cfg, quant, Layout(2, 1, 2), s).values()) for s in (0, 1)]
    assert sum(stages) == weights_bytes(cfg, quant).total
    mlp = sum(N * K for name, N, K in DEBUG_LINEARS if name.startswith("mlp."))
    rows = sum(N for name, N, K in DEBUG_LINEARS if name.startswith("mlp."))
    # block 0 (stage 0) keeps its mlp in bf16, block 1 (stage 1) stores it in fp8 with row scales
    V, C = DEBUG["vocab_size"], DEBUG["hidden_size"]
    ends = 2 * V * C + 2 * C  # stage 0: the embedding; stage 1: the head and the final norm
    assert stages[0] - stages[1] == (2 * mlp) - (mlp + 4 * rows + 3 * 4) + (2 * V * C) - ends


def transformers_fp8_bytes(data: dict) -> int:
    """The bytes transformers' FineGrainedFP8 model holds (``FP8Linear``: weight, weight_scale_inv,
    activation_scale where static)."""
    from transformers import FineGrainedFP8Config, LlamaConfig, LlamaForCausalLM
    from transformers.integrations.finegrained_fp8 import replace_with_fp8_linear

    qc = data["quantization_config"]
    config = LlamaConfig(**{k: v for k, v in data.items() if k != "quantization_config"})
    with torch.device("meta"):
        model = LlamaForCausalLM(config).to(torch.bfloat16)
    names = qc.get("modules_to_not_convert")
    fp8 = FineGrainedFP8Config(
        activation_scheme=qc.get("activation_scheme", "dynamic"),
        weight_block_size=qc["weight_block_size"],
        modules_to_not_convert=names,
    )
    skip = names if names is not None else ["lm_head"]  # get_modules_to_not_convert's default skip
    model = replace_with_fp8_linear(model, modules_to_not_convert=skip, quantization_config=fp8)
    return sum(p.numel() * p.element_size() for p in model.parameters())


@pytest.mark.parametrize(
    "qc",
    [
        {"weight_block_size": [32, 32]},  # DeepSeek-V3's form, smaller blocks
        {"weight_block_size": [32, 32], "modules_to_not_convert": ["model.layers.1.mlp"]},  # head converted
        {
            "weight_block_size": None,
            "activation_scheme": "static",
            "modules_to_not_convert": ["lm_head", "q_proj"],
        },
    ],
)
def test_fine_grained_fp8_is_counted_as_transformers_builds_it(qc):
    data = {**DEBUG, "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", **qc}}
    assert counted(data) == transformers_fp8_bytes(data)


# ---- compressed-tensors fp8: by hand from the tensors its code registers ----------------------------


def ct_config(strategy: str, activations: dict | None, ignore: list[str]) -> dict:
    weights = {"num_bits": 8, "type": "float", "symmetric": True, "dynamic": False, "strategy": strategy}
    group = {"targets": ["Linear"], "weights": weights, "input_activations": activations}
    qc = {
        "quant_method": "compressed-tensors",
        "format": "float-quantized",
        "config_groups": {"group_0": group},
        "ignore": ignore,
        "kv_cache_scheme": None,
    }
    return {**DEBUG, "quantization_config": qc}


DYNAMIC = {"num_bits": 8, "type": "float", "symmetric": True, "dynamic": True, "strategy": "token"}
STATIC = {"num_bits": 8, "type": "float", "symmetric": True, "dynamic": False, "strategy": "tensor"}


@pytest.mark.parametrize(
    "strategy,activations,per_module",
    [
        # weight fp8 N·K + weight_scale bf16 (N, 1); dynamic activations store nothing
        ("channel", DYNAMIC, lambda N, K: N * K + 2 * N),
        # weight_scale bf16 (1,) + input_scale bf16 (1,)
        ("tensor", STATIC, lambda N, K: N * K + 2 + 2),
        ("channel", None, lambda N, K: N * K + 2 * N),  # weight-only (W8A16)
    ],
)
def test_compressed_tensors_fp8_by_hand(strategy, activations, per_module):
    # attention kept by a regex, the head by name: the mlp of both blocks converted
    data = ct_config(strategy, activations, ["lm_head", "re:.*self_attn.*"])
    bf16 = weights_bytes(read_hf_config(DEBUG)[0], "bf16").total  # every tensor at 2 bytes
    mlp = [(N, K) for name, N, K in DEBUG_LINEARS if name.startswith("mlp.")]
    expected = bf16 - 2 * sum(2 * N * K - per_module(N, K) for N, K in mlp)
    assert counted(data) == expected
    head = ct_config(strategy, activations, [])  # nothing ignored: the head is a Linear too
    V, C = DEBUG["vocab_size"], DEBUG["hidden_size"]
    every = bf16 - 2 * sum(2 * N * K - per_module(N, K) for _, N, K in DEBUG_LINEARS)
    assert counted(head) == every - (2 * V * C - per_module(V, C))


@pytest.mark.parametrize(
    "strategy,activations,ignore",
    [
        ("channel", DYNAMIC, ["lm_head", "re:.*self_attn.*"]),
        ("tensor", STATIC, ["lm_head"]),
        ("channel", None, []),
    ],
)
def test_compressed_tensors_fp8_as_its_own_compressor_saves_it(strategy, activations, ignore):
    """compressed-tensors' own save path, where it is installed (not in the project's venv; run
    with compressed-tensors 0.20.1: every case equal to the byte)."""
    ct = pytest.importorskip("compressed_tensors")
    from compressed_tensors.compressors import ModelCompressor
    from transformers import LlamaConfig, LlamaForCausalLM

    data = ct_config(strategy, activations, ignore)
    model = LlamaForCausalLM(LlamaConfig(**DEBUG)).to(torch.bfloat16)
    ct.quantization.apply_quantization_config(
        model, ct.quantization.QuantizationConfig.model_validate(data["quantization_config"])
    )
    ModelCompressor.from_pretrained_model(model, quantization_format="float-quantized").compress_model(model)
    assert counted(data) == sum(t.numel() * t.element_size() for t in model.state_dict().values())


def test_a_dense_sparsity_config_is_the_plain_format():
    data = ct_config("channel", DYNAMIC, ["lm_head"])
    dense = {
        **data["quantization_config"],
        "sparsity_config": {"format": "dense", "sparsity_structure": "unstructured"},
    }
    assert counted({**data, "quantization_config": dense}) == counted(data)


def test_the_unconverted_modules_are_read_as_the_loader_matches_them():
    q = stored_quant(ct_config("channel", DYNAMIC, ["re:.*layers\\.1\\..*_proj", "lm_head"]))
    assert dict(q.unconverted) == {m: (1,) for m, _, _ in DEBUG_LINEARS}
    assert (
        q.label() == "fp8 rows (compressed-tensors, dynamic activations), "
        "attention in layer 1 and mlp in layer 1 kept in bf16"
    )
    names = ["model.layers.1.self_attn.q_proj", "model.layers.0.mlp.down_proj"]
    q = stored_quant(
        {**DEBUG, "quantization_config": {"quant_method": "fbgemm_fp8", "modules_to_not_convert": names}}
    )
    assert q.unconverted == (("self_attn.q_proj", (1,)), ("mlp.down_proj", (0,)))
    assert q.lm_head, "a list without the head converts it (no default skips)"
    assert (
        q.unconverted_words() == "attention (q_proj) in layer 1 and mlp (down_proj) in layer 0 kept in bf16"
    )
    skip = ["lm_head", "model.layers.0.self_attn"]  # bitsandbytes' skip list, by the same rule
    bnb = {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4"}
    q = stored_quant({**DEBUG, "quantization_config": {**bnb, "llm_int8_skip_modules": skip}})
    assert q.label() == "bitsandbytes nf4, attention in layer 0 kept in bf16"
    assert q.describe().endswith("; attention in layer 0 kept in bf16")


# ---- Meta's Llama-3.1-405B-Instruct-FP8 ----------------------------------------------------------------


def test_the_405b_fp8_file_keeps_attention_and_two_mlps_in_bf16():
    stored = load_stored_quant(FIXTURE)
    assert stored.method == "fbgemm_fp8" and not stored.lm_head
    assert (
        stored.label() == "fp8 rows (fbgemm), attention in every layer and mlp in layers 0, 125 kept in bf16"
    )
    layers = dict(stored.unconverted)
    assert all(layers[f"self_attn.{p}_proj"] == tuple(range(126)) for p in "qkvo")
    assert all(layers[f"mlp.{p}_proj"] == (0, 125) for p in ("gate", "up", "down"))


def test_the_405b_fp8_file_per_gpu_at_tp8_against_all_fp8_by_hand():
    cfg, _ = load_config_file(FIXTURE)
    mixed = stored_weights(load_stored_quant(FIXTURE))
    data = json.loads(FIXTURE.read_text())
    data["quantization_config"]["modules_to_not_convert"] = ["lm_head"]  # the same format, all fp8
    all_fp8 = stored_weights(stored_quant(data))
    per_gpu = [sum(gpu_weight_bytes(cfg, q, Layout(8, 8)).values()) for q in (mixed, all_fp8)]
    # one GPU of 8: q 2048 rows, k and v 128 (one KV head), o 16384 rows of 2048 inputs; gate and
    # up 6656 rows, down 16384 rows of 6656 inputs; bf16 2 bytes a weight, fbgemm 1 byte a weight
    # + a float32 scale per row + a float32 input_scale_ub per module
    attention = (2048 + 128 + 128) * 16384 + 16384 * 2048
    attention_rows = 2048 + 128 + 128 + 16384
    mlp = 3 * 6656 * 16384
    mlp_rows = 6656 + 6656 + 16384
    more = 126 * (attention - 4 * attention_rows - 4 * 4) + 2 * (mlp - 4 * mlp_rows - 3 * 4)
    assert per_gpu[0] - per_gpu[1] == more == 9_628_852_232  # 8.97 GiB (the issue said +10 GiB)
    # what one decode step streams on one GPU differs by the same bytes
    h100 = GPUS["H100 80GB"]
    reads = [
        roofline(cfg, h100, 1, 256, "bf16", "decode", q, "bf16", tp=8).weight_bytes for q in (mixed, all_fp8)
    ]
    assert reads[0] - reads[1] == more
    # the bandwidth share is fp8's: most of the matmul bytes stay fp8
    assert dominant_format(cfg, mixed) == "fp8" and format_class(mixed, cfg) == "8-bit"
    kept = 126 * 2 * (2 * 16384 * 16384 + 2 * 1024 * 16384) + 2 * 2 * 3 * 53248 * 16384
    assert unconverted_bytes(cfg, mixed) == kept


def test_predict_decode_reads_the_files_formats(capsys):
    from llama_lab.analysis import kv_cache_bytes
    from llama_lab.cli import main
    from llama_lab.validation.engine import weights_per_gpu

    args = ["predict", "decode", "--config", str(FIXTURE), "--gpu", "h100-80gb", "--gpus", "8", "--json"]
    assert main(args) in (0, None)
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert "attention in every layer and mlp in layers 0, 125 kept in bf16" in out["weight_dtype"]
    cfg, _ = load_config_file(FIXTURE)
    mixed = stored_weights(load_stored_quant(FIXTURE))
    need = weights_per_gpu(cfg, mixed, 8) + kv_cache_bytes(cfg, 128 + 128, 1, "bf16", 8)
    assert out["memory"]["weights_and_cache_bytes_per_gpu"] == need
    assert main([*args, "--weight-dtype", "fp8"]) in (0, None)  # fp8 everywhere, one scale a tensor
    fp8 = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert fp8["memory"]["kv_cache_tokens"]["estimate"] > out["memory"]["kv_cache_tokens"]["estimate"]
    assert fp8["tokens_per_s"]["estimate"] > out["tokens_per_s"]["estimate"]


# ---- what stays unmodelled is refused by name, in one line ---------------------------------------------


@pytest.mark.parametrize(
    "data,match",
    [
        (
            ct_config("channel", DYNAMIC, ["re:.*cross_attn.*"]),
            "ignore names 're:.*cross_attn.*', which match none",
        ),
        (
            ct_config("channel", DYNAMIC, ["LlamaAttention"]),
            "ignore names 'LlamaAttention', which match none",
        ),
        (ct_config("group", DYNAMIC, []), "compressed-tensors weights"),
        (ct_config("channel", {**DYNAMIC, "strategy": "group"}, []), "input_activations strategy='group'"),
        (ct_config("channel", {**STATIC, "strategy": "token"}, []), "input_activations strategy='token'"),
        (
            {
                **ct_config("channel", DYNAMIC, []),
                "quantization_config": {
                    **ct_config("channel", DYNAMIC, [])["quantization_config"],
                    "kv_cache_scheme": {"num_bits": 8},
                },
            },
            "kv_cache_scheme=",
        ),
        (
            {
                **DEBUG,
                "quantization_config": {
                    **ct_config("channel", DYNAMIC, [])["quantization_config"],
                    "sparsity_config": {"format": "sparse-24-bitmask"},
                },
            },
            "sparsity_config=",
        ),
        (
            {
                **DEBUG,
                "quantization_config": {
                    "quant_method": "fbgemm_fp8",
                    "modules_to_not_convert": ["model.layers.0.attn"],
                },
            },
            "modules_to_not_convert names 'model.layers.0.attn', which match none",
        ),
        (
            {**MIXTURE, "quantization_config": {"quant_method": "fbgemm_fp8"}},
            "not modelled yet for a mixture of experts",
        ),
        (
            {
                **MIXTURE,
                "quantization_config": {
                    "quant_method": "awq",
                    "modules_to_not_convert": ["model.layers.0.self_attn"],
                },
            },
            "keeps single modules of a model with a mixture of experts unconverted",
        ),
    ],
)
def test_what_stays_unmodelled_is_refused_by_name(data, match):
    with pytest.raises(ConfigError, match=match) as info:
        stored_quant(data)
    assert "\n" not in str(info.value)


def test_a_weightquant_naming_tensors_the_model_lacks_is_refused():
    from dataclasses import replace

    from llama_lab.analysis import AnalysisError

    bad = replace(WeightQuant.of("fp8"), unconverted=(("qkv_proj", (0,)),))  # Phi-3's fused name
    with pytest.raises(AnalysisError, match="keeps qkv_proj unconverted"):
        weights_bytes(PRESETS["debug"], bad)
    with pytest.raises(AnalysisError, match="keeps qkv_proj unconverted"):
        gpu_weight_bytes(PRESETS["debug"], bad, Layout(2, 2))
