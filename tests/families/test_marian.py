"""The 2017 encoder-decoder (``marian``, transformers' MarianMTModel): the presets' and a read
config.json's parameters against MarianMTModel on the meta device (and by hand), its state dict
loaded strictly both ways and its logits, greedy decoding with the self-attention cache and the
fixed cross-attention cache against the full forward, FLOPs against FlopCounterMode on the eager
forward and a decode step, the cache's bytes against the live cache's tensors, and the
refusals (config rules, config.json keys, the surfaces that model decoder-only models)."""

import json
import warnings

import pytest
import torch
import transformers
from torch.utils.flop_counter import FlopCounterMode

from llama_lab import analysis
from llama_lab.analysis import weights_bytes
from llama_lab.analysis.cross_check import fvcore_check
from llama_lab.analysis.kv import cross_attention_bytes_per_token, kv_cache_bytes
from llama_lab.cli import main
from llama_lab.config import PRESETS, PUBLISHED_ROUNDED, ConfigError, read_hf_config
from llama_lab.model import build_model, marian_sinusoidal_table

# a tiny 2017 model: 3 encoder and 2 decoder blocks, 4 heads of 8, ReLU FFN of 48
TINY = PRESETS["transformer-2017-base"].replace(
    vocab_size=97,
    d_model=32,
    n_heads=4,
    n_kv_heads=4,
    ffn_hidden=48,
    n_layers=2,
    encoder_layers=3,
    max_seq_len=40,
)
B, S, T = 2, 11, 7  # batch, source and target lengths


def marian_config(cfg, **extra):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return transformers.MarianConfig(**cfg.to_hf_config(), **extra)


def meta_count(config) -> int:
    with torch.device("meta"):
        model = transformers.MarianMTModel(config)
    return sum(p.numel() for p in model.parameters())


def ids(n: int, length: int, seed: int) -> torch.Tensor:
    return torch.randint(0, TINY.vocab_size, (n, length), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize(
    "name, total", [("transformer-2017-base", 63_606_784), ("transformer-2017-big", 215_293_952)]
)
def test_the_presets_count_as_marian_mt_model(name, total):
    cfg = PRESETS[name]
    counts = analysis.count_params(cfg)
    assert counts.total == total == meta_count(marian_config(cfg))
    assert counts.detail == analysis.count_params_module(cfg).detail
    assert sum(counts.spec_by_component().values()) == total
    assert weights_bytes(cfg, "bf16").total == 2 * total  # the weight inventory holds every tensor
    # Vaswani et al.'s Table 3: 65M and 213M (its vocabulary of "about 37000" and conventions)
    published, _, _ = PUBLISHED_ROUNDED[name]
    assert abs(total - published) / published < 0.025


def test_the_base_count_by_hand():
    d, F, V = 512, 2048, 37_000
    attention = 4 * d * d + 4 * d  # q, k, v, out_proj and their biases
    ffn = 2 * d * F + F + d  # fc1, fc2 and their biases
    encoder_block = attention + ffn + 2 * 2 * d  # two LayerNorms (γ, β)
    decoder_block = encoder_block + attention + 2 * d  # + cross-attention and its norm
    assert (encoder_block, decoder_block) == (3_152_384, 4_204_032)
    tables = 2 * 512 * d  # the encoder's and the decoder's sinusoidal tables: parameters
    total = V * d + 6 * encoder_block + 6 * decoder_block + tables  # one shared table, tied head
    assert total == analysis.count_params(PRESETS["transformer-2017-base"]).total == 63_606_784
    by = analysis.count_params(PRESETS["transformer-2017-base"]).by_component
    assert by["attention"] == 18 * attention  # 6 encoder, 6 decoder self- and 6 cross-attentions


def test_a_config_json_is_read_as_marian_config_reads_it():
    data = {
        "model_type": "marian",
        "d_model": 64,
        "encoder_layers": 2,
        "decoder_layers": 3,
        "encoder_attention_heads": 4,
        "decoder_attention_heads": 4,
        "encoder_ffn_dim": 128,
        "decoder_ffn_dim": 128,
        "vocab_size": 500,
        "max_position_embeddings": 64,
        "activation_function": "relu",
        "scale_embedding": True,
        "pad_token_id": 499,
        "decoder_start_token_id": 499,
        "dropout": 0.1,
    }
    cfg, notes = read_hf_config(data)
    assert (cfg.encoder_layers, cfg.n_layers, cfg.ffn_type, cfg.embed_scale) == (2, 3, "relu", True)
    assert any("dropout=0.1" in note for note in notes)
    assert analysis.count_params(cfg).total == meta_count(transformers.AutoConfig.for_model(**data))
    # a key left out takes MarianConfig's default, as AutoConfig.for_model
    cfg, _ = read_hf_config({"model_type": "marian"})
    theirs = transformers.AutoConfig.for_model("marian")
    assert (cfg.vocab_size, cfg.d_model, cfg.encoder_layers, cfg.n_layers) == (
        theirs.vocab_size,
        theirs.d_model,
        theirs.encoder_layers,
        theirs.decoder_layers,
    )
    assert (cfg.n_heads, cfg.ffn_hidden, cfg.max_seq_len, cfg.ffn_type, cfg.embed_scale) == (
        theirs.decoder_attention_heads,
        theirs.decoder_ffn_dim,
        theirs.max_position_embeddings,
        theirs.activation_function,
        theirs.scale_embedding,
    )
    assert analysis.count_params(cfg).total == meta_count(theirs)
    # written back: the same model
    assert read_hf_config(json.loads(json.dumps(TINY.to_hf_config())))[0] == TINY


# a config.json in the shape of the opus-mt checkpoints' (Helsinki-NLP/opus-mt-*: swish, √d
# embeddings, 58,101 shared tokens, keys of older MarianConfig releases that transformers 5
# no longer reads); composed here, not a verbatim file
OPUS_MT_STYLE = {
    "model_type": "marian",
    "architectures": ["MarianMTModel"],
    "activation_function": "swish",
    "d_model": 512,
    "encoder_layers": 6,
    "decoder_layers": 6,
    "num_hidden_layers": 6,
    "encoder_attention_heads": 8,
    "decoder_attention_heads": 8,
    "encoder_ffn_dim": 2048,
    "decoder_ffn_dim": 2048,
    "vocab_size": 58101,
    "decoder_vocab_size": 58101,
    "max_position_embeddings": 512,
    "scale_embedding": True,
    "share_encoder_decoder_embeddings": True,
    "static_position_embeddings": True,
    "normalize_before": False,
    "pad_token_id": 58100,
    "decoder_start_token_id": 58100,
    "dropout": 0.1,
}


def test_an_opus_mt_style_file_reads_swish_as_an_ungated_silu():
    cfg, notes = read_hf_config(OPUS_MT_STYLE)
    assert cfg.ffn_type == "silu" and cfg.to_hf_config()["activation_function"] == "swish"
    assert any("'normalize_before'" in note for note in notes)  # unread by transformers 5: a note
    total = analysis.count_params(cfg).total
    assert total == meta_count(transformers.AutoConfig.for_model(**OPUS_MT_STYLE)) == 74_410_496
    tiny = TINY.replace(ffn_type="silu")
    hf = transformers.MarianMTModel(marian_config(tiny)).eval()
    ours = build_model(tiny, seed=1).eval()
    hf.load_state_dict(ours.state_dict(), strict=True)
    src, tgt = ids(B, S, 8), ids(B, T, 9)
    with torch.no_grad():
        torch.testing.assert_close(ours(src, tgt), hf(input_ids=src, decoder_input_ids=tgt).logits)


def test_the_state_dict_loads_both_ways_and_the_logits_are_marians():
    hf = transformers.MarianMTModel(marian_config(TINY)).eval()
    ours = build_model(TINY, seed=1).eval()
    assert set(ours.state_dict()) == set(hf.state_dict())
    # the static tables as MarianSinusoidalPositionalEmbedding builds them (sines, then cosines)
    assert torch.equal(ours.model.encoder.embed_positions.weight, hf.model.encoder.embed_positions.weight)
    assert torch.equal(ours.model.decoder.embed_positions.weight, marian_sinusoidal_table(40, 32))
    # at the presets' sizes too: 0 apart, as transformers computes it (float64, then float32)
    marian = transformers.models.marian.modeling_marian
    table = marian.MarianSinusoidalPositionalEmbedding(512, 1024).create_weight()
    assert torch.equal(marian_sinusoidal_table(512, 1024), table)
    src, tgt = ids(B, S, 0), ids(B, T, 1)
    with torch.no_grad():
        hf.load_state_dict(ours.state_dict(), strict=True)
        torch.testing.assert_close(ours(src, tgt), hf(input_ids=src, decoder_input_ids=tgt).logits)
        hf.final_logits_bias.normal_()  # a checkpoint's bias reaches the logits
        other = build_model(TINY, seed=2).eval()
        other.load_state_dict(hf.state_dict(), strict=True)
        torch.testing.assert_close(
            other(src, tgt), hf(input_ids=src, decoder_input_ids=tgt).logits, rtol=1e-5, atol=1e-5
        )
    assert sum(p.numel() for p in ours.parameters()) == analysis.count_params(TINY).total
    loss = ours.loss(src, tgt)  # teacher forcing: the target's next tokens
    logits = ours(src, tgt[:, :-1])
    expected = torch.nn.functional.cross_entropy(logits.reshape(-1, 97), tgt[:, 1:].reshape(-1))
    torch.testing.assert_close(loss, expected)


def test_greedy_decoding_with_both_caches_is_the_full_forward():
    model = build_model(TINY, seed=3).eval()
    src, start = ids(B, S, 4), ids(B, 2, 5)
    new = 9
    out = model.generate(src, start, new)
    with torch.no_grad():
        full = model(src, out[:, :-1])
    assert torch.equal(full[:, 1:].argmax(-1), out[:, 2:])
    # the caches' tensors: the target's self-attention rows and the source's fixed K and V
    cache = model.new_cache(B, 2 + new)
    with torch.no_grad():
        model(src, start, cache)
        model(src, out[:, 2:5], cache)
    assert cache.length == 5
    assert cache.nbytes() == kv_cache_bytes(TINY, 5, B, "fp32", source_len=S)
    cross = sum(t.numel() * 4 for kv in cache.cross_attention for t in kv)
    assert cross == B * S * cross_attention_bytes_per_token(TINY, "fp32")


def test_flops_are_flop_counter_modes_on_marians_eager_forward_and_decode_step():
    hf = transformers.MarianMTModel(marian_config(TINY, attn_implementation="eager")).eval()
    src, tgt = ids(B, S, 6), ids(B, T, 7)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        hf(input_ids=src, decoder_input_ids=tgt)
    assert counter.get_total_flops() == analysis.count_flops(TINY, T, B, source_len=S).forward
    with torch.no_grad():
        encoded = hf.get_encoder()(input_ids=src)
        past = hf(encoder_outputs=encoded, decoder_input_ids=tgt, use_cache=True).past_key_values
        with FlopCounterMode(display=False) as counter:
            hf(encoder_outputs=encoded, decoder_input_ids=tgt[:, :1], past_key_values=past, use_cache=True)
    # one new token: the decoder over T + 1 keys and the S cached source keys; the encoder idle
    assert counter.get_total_flops() == analysis.decode_flops(TINY, T + 1, B, source_len=S).forward
    # fvcore's trace of the lab's own model (the source as its own target: S = T) agrees
    check = fvcore_check(TINY, T, B)
    assert check.fvcore_flops == check.ours_flops == analysis.count_flops(TINY, T, B).forward
    # the cross-attention's scores by hand: 2 matmuls · 2 · T·S pairs · H·D per decoder block
    full = analysis.count_flops(TINY, T, B, source_len=S).by_component["attention_scores"]
    encoder, decoder_self = 3 * 4 * B * S * S * 32, 2 * 4 * B * T * T * 32
    assert full == encoder + decoder_self + 2 * 4 * B * T * S * 32


def test_the_kv_cache_by_hand():
    cfg = PRESETS["transformer-2017-base"]
    per_token = 6 * 2 * 8 * 64 * 2  # decoder blocks · (K, V) · heads · head dim · bf16
    kv = analysis.kv_cache(cfg, 100, batch=2, source_len=30)
    assert kv.bytes_per_token == per_token == cross_attention_bytes_per_token(cfg) == 12_288
    assert kv.cross_bytes == 2 * 30 * per_token
    assert kv.bytes == 2 * (100 + 30) * per_token
    assert "encoder caches nothing" in kv.note


@pytest.mark.parametrize(
    "change, rule",
    [
        (dict(norm_position="pre"), "is Post-LN"),
        (dict(norm_type="rmsnorm"), "LayerNorm"),
        (dict(pos_encoding="rope"), "sinusoidal or learned positions"),
        (dict(ffn_type="swiglu"), "ungated FFN"),
        (dict(bias=False), "biases on every projection"),
        (dict(sliding_window=8), "without a sliding window"),
        (dict(final_norm=True), "no final norm"),
    ],
)
def test_an_encoder_refuses_what_is_not_modelled_by_name(change, rule):
    with pytest.raises(ConfigError, match=rule) as info:
        TINY.replace(**change)
    assert "encoder_layers=3" in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    "key, value, rule",
    [
        ("activation_function", "tanh", "activation_function='tanh' is not modelled"),
        ("share_encoder_decoder_embeddings", False, "separate source and target embeddings"),
        ("decoder_vocab_size", 7, "decoder_vocab_size=7 differs from vocab_size"),
        ("encoder_ffn_dim", 64, "encoder_ffn_dim=64 differs from decoder_ffn_dim"),
        ("tie_word_embeddings", False, "three untied copies"),
    ],
)
def test_a_config_json_the_lab_cannot_model_is_refused_by_name(key, value, rule):
    with pytest.raises(ConfigError, match=rule):
        read_hf_config({**TINY.to_hf_config(), key: value})


def test_the_decoder_only_2017_recipe_is_not_written_as_marian():
    with pytest.raises(ConfigError, match="LLaMA-style config"):  # no family's block: no encoder
        PRESETS["transformer-2017"].to_hf_config()
    with pytest.raises(ConfigError, match="marian.*GQA"):
        TINY.replace(n_kv_heads=2).to_hf_config()


@pytest.mark.parametrize(
    "argv, surface",
    [
        (["train", "--steps", "1"], "the training loop"),
        (["parallel", "--gpus", "2"], "the parallel layouts"),
        (["predict", "decode", "--gpu", "h100-80gb"], "predict decode"),
        (["finetune", "--method", "lora", "--steps", "1"], "fine-tuning"),
    ],
)
def test_surfaces_that_model_decoder_only_models_refuse_it_in_one_line(argv, surface, capsys):
    assert main([*argv, "--preset", "transformer-2017-base"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{surface}: an encoder-decoder (encoder_layers=6" in err


def test_analyze_works_for_the_presets():
    result = analysis.analyze(PRESETS["transformer-2017-base"], 64)
    assert result["params"]["total"] == 63_606_784
    # what attention keeps: 6 encoder, 6 decoder self- and 6 cross-attentions, each over 64 × 64
    one = result["attention_memory"]["naive_layer_bytes"]
    assert result["attention_memory"]["naive_bytes"] == 18 * one
    assert result["kv_cache"]["cross_attention_bytes"] == 64 * 12_288
    assert result["flops"]["forward"] == analysis.count_flops(PRESETS["transformer-2017-base"], 64).forward
    # memory's activations: the encoder-decoder's own counts (held against the live model in
    # tests/unit/analysis/test_analysis.py), no longer a decoder-only model's
    cfg = PRESETS["transformer-2017-base"]
    activations = result["memory"]["training"]["components"]["activations"]
    assert activations == analysis.activation_bytes(cfg, 64, 1, "bf16")
    decoder_only = analysis.activation_bytes(cfg.replace(encoder_layers=0), 64, 1, "bf16", loss="logits")
    assert activations > decoder_only  # + the encoder, its output, the cross-attentions
    inference = result["memory"]["inference"]["components"]["activations"]
    assert inference == analysis.inference_activation_bytes(cfg, 64, 1, "bf16")
    assert not any("decoder-only" in note for note in result["notes"])
