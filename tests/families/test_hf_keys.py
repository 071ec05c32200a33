"""Real config.json files read the way transformers reads them: the table of keys each family's
model reads (tools/hf_family_keys.py, regenerated here from the installed transformers), keys
it never reads as notes, missing keys as the config class's defaults, files without a
model_type or of another family refused by name, multimodal wrappers read as their text
decoder."""

import importlib.util
import json
from pathlib import Path

import pytest
import torch
import transformers
from hf_helpers import meta_count

from llama_lab import analysis
from llama_lab.config import ConfigError, parse_config_json
from llama_lab.config.families import MODEL_TYPES as FAMILIES
from llama_lab.config.hf.keys import KEY_TABLE, reads
from llama_lab.config.hf.table import COMMON_KEYS, QUIET_KEYS

ROOT = Path(__file__).resolve().parents[2]

# Qwen/Qwen2.5-0.5B's config.json as published (transformers_version 4.40.1), keys as in the file.
QWEN2_5_0_5B = {
    "architectures": ["Qwen2ForCausalLM"],
    "attention_dropout": 0.0,
    "bos_token_id": 151643,
    "eos_token_id": 151643,
    "hidden_act": "silu",
    "hidden_size": 896,
    "initializer_range": 0.02,
    "intermediate_size": 4864,
    "max_position_embeddings": 32768,
    "max_window_layers": 24,
    "model_type": "qwen2",
    "num_attention_heads": 14,
    "num_hidden_layers": 24,
    "num_key_value_heads": 2,
    "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0,
    "sliding_window": 32768,
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.40.1",
    "use_cache": True,
    "use_mrope": False,
    "use_sliding_window": False,
    "vocab_size": 151936,
}
SMALL = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 8, "intermediate_size": 128}
GEMMA = ("gemma2", "gemma3_text")


def _generator():
    spec = importlib.util.spec_from_file_location("hf_family_keys", ROOT / "tools" / "hf_family_keys.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def transformers_count(data: dict) -> int:
    """Parameters of transformers' own module for ``data`` (meta device, nothing allocated)."""
    return meta_count(transformers.AutoConfig.for_model(**data))


def test_the_key_table_is_what_the_installed_transformers_reads():
    if transformers.__version__ != KEY_TABLE["transformers"]:
        pytest.skip(
            f"the table is of transformers {KEY_TABLE['transformers']}; {transformers.__version__} here"
        )
    generator = _generator()
    assert generator.render(generator.build()) == generator.OUT.read_text()
    assert set(KEY_TABLE["families"]) == set(FAMILIES)


@pytest.mark.parametrize("model_type", sorted(FAMILIES))
def test_every_key_a_family_reads_is_modelled(model_type):
    """A key the model reads must be read by LLaMA Lab too (or be one that changes nothing
    counted): a transformers release that reads a new key fails here until it is handled."""
    handled = COMMON_KEYS | QUIET_KEYS | FAMILIES[model_type].keys
    assert reads(model_type) - handled == set()


def test_a_published_qwen2_5_config_is_read_and_its_unread_key_noted():
    cfg, notes = parse_config_json(json.dumps(QWEN2_5_0_5B))
    assert any("not read by qwen2's model" in note and "'use_mrope'" in note for note in notes), notes
    assert (cfg.n_layers, cfg.n_heads, cfg.n_kv_heads, cfg.tie_embeddings) == (24, 14, 2, True)
    assert cfg.sliding_window == 0  # use_sliding_window false: no window
    n = analysis.count_params(cfg).total
    assert n == transformers_count(QWEN2_5_0_5B)
    assert round(n / 1e6, 2) == 494.03  # a training log's "Qwen2ForCausalLM contains 494.03M parameters"


# (bert has no KV heads, tie or RoPE of its own to default: tests/families/test_bert.py)
@pytest.mark.parametrize("model_type", sorted(set(FAMILIES) - {"bert"}))
def test_a_missing_key_takes_the_config_classs_default(model_type):
    """num_key_value_heads, head_dim, tie_word_embeddings, rope_theta and the rest left out:
    each as AutoConfig.for_model(**d) makes it."""
    if model_type == "marian":  # its own keys (d_model, encoder_*/decoder_*): tests/families/test_marian.py
        pytest.skip("MarianConfig names its sizes otherwise; test_marian.py reads its defaults")
    data = {**SMALL, "model_type": model_type, "num_attention_heads": 32, "hidden_size": 1024}
    if model_type == "deepseek_v2":  # its class has no default top-k: its router cannot run
        with pytest.raises(ConfigError, match="num_experts_per_tok is null"):
            parse_config_json(json.dumps(data))
        data["num_experts_per_tok"] = 6
    if model_type in (
        "deepseek_v3",
        "deepseek_v32",
    ):  # 128 KV heads by default: MLA needs as many as query heads
        with pytest.raises(ConfigError, match="n_kv_heads=128 must equal n_heads=32"):
            parse_config_json(json.dumps(data))
        data["num_key_value_heads"] = 32
    cfg, _ = parse_config_json(json.dumps(data))
    theirs = transformers.AutoConfig.for_model(**data)
    assert cfg.n_kv_heads == theirs.num_key_value_heads
    if cfg.is_mla:  # a q/k head's whole width (DeepSeek's head_dim is the rotary width)
        assert (cfg.head_dim, cfg.qk_rope_head_dim) == (theirs.qk_head_dim, theirs.qk_rope_head_dim)
    else:
        head_dim = getattr(theirs, "head_dim", None) or theirs.hidden_size // theirs.num_attention_heads
        assert cfg.head_dim == head_dim
    assert cfg.tie_embeddings == theirs.tie_word_embeddings
    rope = theirs.rope_parameters
    if "full_attention" in rope:  # Gemma3TextConfig: one RoPE per layer type
        assert cfg.rope_local_theta == rope["sliding_attention"]["rope_theta"]
        rope = rope["full_attention"]
    assert cfg.rope_theta == rope["rope_theta"]
    assert cfg.max_seq_len == theirs.max_position_embeddings
    if model_type not in GEMMA:  # Gemma's block: counted against transformers in test_families
        assert analysis.count_params(cfg).total == transformers_count(data)


def test_a_mixtral_file_may_name_its_experts_by_the_alias():
    data = {**SMALL, "model_type": "mixtral", "num_experts": 4, "num_key_value_heads": 2}
    cfg, _ = parse_config_json(json.dumps(data))
    assert cfg.n_experts == 4 == transformers.AutoConfig.for_model(**data).num_local_experts


def test_kv_heads_default_per_family():
    expected = {"llama": 32, "mistral": 8, "mixtral": 8, "qwen2": 32, "qwen3": 32, "qwen3_moe": 4}
    for model_type, kv in expected.items():
        data = {**SMALL, "model_type": model_type, "num_attention_heads": 32, "hidden_size": 1024}
        assert parse_config_json(json.dumps(data))[0].n_kv_heads == kv, model_type


def test_a_file_without_model_type_is_refused_naming_it():
    with pytest.raises(ConfigError, match="no model_type") as info:
        parse_config_json(json.dumps({k: v for k, v in QWEN2_5_0_5B.items() if k != "model_type"}))
    assert info.value.field == "model_type"


def test_a_gpt2_config_is_refused_by_its_family_not_as_our_format():
    gpt2 = {
        "model_type": "gpt2",
        "activation_function": "gelu_new",
        "n_embd": 768,
        "n_layer": 12,
        "n_head": 12,
    }
    with pytest.raises(ConfigError, match="model_type='gpt2' is not supported") as info:
        parse_config_json(json.dumps(gpt2))
    assert "unknown config field" not in str(info.value)


def test_a_multimodal_wrapper_is_counted_whole():
    wrapper = {
        "model_type": "mistral3",
        "architectures": ["Mistral3ForConditionalGeneration"],
        "image_token_index": 10,
        "vision_config": {"model_type": "pixtral", "hidden_size": 1024},
        "text_config": {**SMALL, "model_type": "mistral", "num_key_value_heads": 2, "vocab_size": 1000},
    }
    cfg, notes = parse_config_json(json.dumps(wrapper))
    assert not any("not counted" in note for note in notes) and cfg.vision.kind == "pixtral"
    # Mistral3ForConditionalGeneration: Pixtral, its projector and the text decoder, the head
    # tied by the wrapper's tie_word_embeddings (Mistral3Config's default: true)
    with torch.device("meta"):
        whole = transformers.Mistral3ForConditionalGeneration(transformers.AutoConfig.for_model(**wrapper))
    assert analysis.count_params(cfg).total == sum(p.numel() for p in whole.parameters())
    assert cfg.tie_embeddings


def test_a_wrapper_around_an_unmodelled_decoder_is_refused_naming_both():
    wrapper = {"model_type": "paligemma", "text_config": {**SMALL, "model_type": "gemma"}}
    with pytest.raises(
        ConfigError, match="model_type='paligemma' wraps a text decoder of model_type='gemma'"
    ):
        parse_config_json(json.dumps(wrapper))


# ---- quantization_config: the weights' stored format ----------------------------------------------
AWQ = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm"}
LLAMA_256 = {
    "model_type": "llama",
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 1000,
    "torch_dtype": "float16",
}


def _awq_linear_bytes(inputs: int, outputs: int, group: int, zero_point: bool) -> int:
    """AutoAWQ's GEMM layout of one linear layer (in K, out R): qweight int32 (K, R/8), scales
    fp16 (K/g, R), qzeros int32 (K/g, R/8) — eight 4-bit values per int32."""
    qweight = inputs * (outputs // 8) * 4
    scales = (inputs // group) * outputs * 2
    qzeros = (inputs // group) * (outputs // 8) * 4 if zero_point else 0
    return qweight + scales + qzeros


@pytest.mark.parametrize("zero_point", [True, False])
def test_an_awq_checkpoint_is_counted_as_awq_stores_it(zero_point):
    from llama_lab.analysis import stored_weights, weights_bytes
    from llama_lab.config.files import stored_quant_of

    data = {**LLAMA_256, "quantization_config": {**AWQ, "zero_point": zero_point}}
    text = json.dumps(data)
    cfg, notes = parse_config_json(text)
    assert notes[0].startswith("quantization_config: AWQ int4 weights in groups of 128")
    C, F, V, L, D = 256, 512, 1000, 2, 64
    q, kv = 4 * D, 2 * D
    linears = [(C, q), (C, kv), (C, kv), (q, C), (C, F), (C, F), (F, C)]  # q k v o gate up down
    per_block = sum(_awq_linear_bytes(k, r, 128, zero_point) for k, r in linears) + 2 * C * 2  # 2 norms
    expected = L * per_block + 2 * V * C * 2 + C * 2  # fp16 embeddings, lm_head, final norm
    assert weights_bytes(cfg, stored_weights(stored_quant_of(text))).total == expected


def test_the_cli_counts_an_awq_file_in_its_stored_format(tmp_path, capsys):
    from llama_lab.analysis import stored_weights, weights_bytes
    from llama_lab.cli import main
    from llama_lab.config.files import stored_quant_of

    text = json.dumps({**LLAMA_256, "quantization_config": AWQ})
    path = tmp_path / "config.json"
    path.write_text(text)
    assert main(["analyze", "--config", str(path), "--json"]) in (0, None)
    out = json.loads(capsys.readouterr().out)
    cfg, _ = parse_config_json(text)
    expected = weights_bytes(cfg, stored_weights(stored_quant_of(text))).total
    assert expected in _ints(out), "the analysis JSON carries the AWQ weight bytes"


def _ints(obj) -> set:
    if isinstance(obj, dict):
        return set().union(*(_ints(v) for v in obj.values())) if obj else set()
    if isinstance(obj, list):
        return set().union(*(_ints(v) for v in obj)) if obj else set()
    return {obj} if isinstance(obj, int) else set()


@pytest.mark.parametrize(
    "qc,match",
    [
        ({"quant_method": "hqq"}, "quant_method='hqq' is not modelled yet"),  # GPTQ is: test_quant_config
        ({"quant_method": "mxfp4"}, "quant_method='mxfp4' is not modelled yet"),
        ({**AWQ, "bits": 8}, "bits=8"),
        ({**AWQ, "version": "gemv_fast"}, "version='gemv_fast'"),
        ({**AWQ, "modules_to_not_convert": ["model.layers.0.self_attn.qkv"]}, "match none of the decoder"),
    ],
)
def test_a_quantisation_not_modelled_is_refused_by_name(qc, match):
    with pytest.raises(ConfigError, match=match):
        parse_config_json(json.dumps({**LLAMA_256, "quantization_config": qc}))


def test_awq_keeps_the_head_and_the_vision_side_as_they_are():
    qc = {**AWQ, "modules_to_not_convert": ["lm_head", "visual", "multi_modal_projector"]}
    cfg, notes = parse_config_json(json.dumps({**LLAMA_256, "quantization_config": qc}))
    assert cfg.n_layers == 2 and "AWQ" in notes[0]
