"""BERT (``bert``): the encoder-only model counted as transformers' ``BertModel`` (pooler
included) — the presets and a config.json read, the parameters by component, the forward FLOPs
against FlopCounterMode on BertModel's eager forward — and the lab's bidirectional attention
(``causal=False``) against a hand-built full-attention reference; the surfaces that need a
causal decoder refuse it by name."""

import json
import re
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from llama_lab import analysis
from llama_lab.analysis.params import count_params_module
from llama_lab.config import (
    LIMITS,
    MAX_BATCH,
    PRESETS,
    PUBLISHED_ROUNDED,
    ConfigError,
    ModelConfig,
    parse_config_json,
)
from llama_lab.config.families import family_of
from llama_lab.model import build_model

transformers = pytest.importorskip("transformers")
warnings.filterwarnings("ignore", module="transformers")
transformers.logging.set_verbosity_error()

# google-bert/bert-base-uncased's config.json, as the Hub serves it
BERT_BASE_FILE = {
    "architectures": ["BertForMaskedLM"],
    "attention_probs_dropout_prob": 0.1,
    "gradient_checkpointing": False,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "hidden_size": 768,
    "initializer_range": 0.02,
    "intermediate_size": 3072,
    "layer_norm_eps": 1e-12,
    "max_position_embeddings": 512,
    "model_type": "bert",
    "num_attention_heads": 12,
    "num_hidden_layers": 12,
    "pad_token_id": 0,
    "position_embedding_type": "absolute",
    "transformers_version": "4.6.0.dev0",
    "type_vocab_size": 2,
    "use_cache": True,
    "vocab_size": 30522,
}
# a tiny BERT whose widths are all distinct (a mix-up of two shows in a count)
TINY = {
    "model_type": "bert",
    "vocab_size": 97,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 56,
    "max_position_embeddings": 40,
    "type_vocab_size": 3,
    "layer_norm_eps": 1e-12,
}


def bert_model(data: dict, device: str = "cpu"):
    """transformers' BertModel of ``data`` (pooler included), eager attention."""
    config = transformers.AutoConfig.for_model(**data)
    config._attn_implementation = "eager"
    with torch.device(device):
        return transformers.BertModel(config).eval()


def n_params(model) -> int:
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize(
    "name,total", [("bert-base-uncased", 109_482_240), ("bert-large-uncased", 335_141_888)]
)
def test_presets_count_as_bert_model(name, total):
    cfg = PRESETS[name]
    theirs = n_params(bert_model(cfg.to_hf_config(), "meta"))
    assert analysis.count_params(cfg).total == count_params_module(cfg).total == theirs == total
    # the paper's "110M" and "340M" are these counts at two significant figures
    published, _, quote = PUBLISHED_ROUNDED[name]
    assert float(f"{total:.2g}") == published and f"{published / 1e6:.0f}M" in quote
    assert family_of(cfg).model_type.name == "bert"


def test_the_bert_base_file_reads_as_the_preset():
    cfg, notes = parse_config_json(json.dumps(BERT_BASE_FILE))
    assert cfg == PRESETS["bert-base-uncased"]
    assert any("gradient_checkpointing" in n and "not read" in n for n in notes)
    assert any(n.startswith("hidden_dropout_prob=0.1 is training-time noise") for n in notes)
    back = transformers.AutoConfig.for_model(**cfg.to_hf_config())
    assert parse_config_json(json.dumps(back.to_dict()))[0] == cfg


def test_a_file_naming_only_its_type_takes_bert_configs_defaults():
    # BertConfig's defaults are bert-base-uncased's shapes; the note says what sets it apart
    from llama_lab.analysis.summary import family_notes

    cfg, _ = parse_config_json(json.dumps({"model_type": "bert"}))
    assert cfg == PRESETS["bert-base-uncased"]
    assert any(note.startswith("**Bidirectional encoder** (BERT)") for note in family_notes(cfg))


def test_a_tiny_config_json_counts_as_bert_model_by_component():
    cfg, _ = parse_config_json(json.dumps(TINY))
    theirs = bert_model(TINY, "meta")
    counts = analysis.count_params(cfg)
    assert counts.total == count_params_module(cfg).total == n_params(theirs) == 21_648
    V, C, S, P, L, Fh = 97, 32, 3, 40, 2, 56
    layer_norm = 2 * C  # γ and β
    parts = counts.spec_by_component()
    # by hand: the word, position and segment tables; q, k, v, o with biases; the FFN's two
    # biased matrices; two LayerNorms a block and the embeddings' one; the pooler C×C + C
    assert parts == {
        "embedding": (V + P + S) * C,
        "attention": L * 4 * (C * C + C),
        "ffn": L * (2 * C * Fh + Fh + C),
        "norms": (2 * L + 1) * layer_norm,
        "lm_head": 0,
        "pooler": C * C + C,
    }
    assert sum(parts.values()) == counts.total
    groups = dict(theirs.named_children())
    assert n_params(groups["pooler"]) == parts["pooler"]
    assert n_params(groups["embeddings"]) == parts["embedding"] + layer_norm


def test_forward_flops_equal_flop_counter_mode_on_bert_model():
    cfg, _ = parse_config_json(json.dumps(TINY))
    B, T = 2, 13
    with FlopCounterMode(display=False) as counter:
        bert_model(TINY)(torch.randint(0, TINY["vocab_size"], (B, T)))
    flops = analysis.count_flops(cfg, T, B)
    C, L, Fh, N = 32, 2, 56, B * T
    # by hand: q, k, v, o; QKᵀ and AV over all T² pairs; the FFN's two matrices; the pooler
    by_hand = 2 * N * 4 * C * C * L + 4 * B * T * T * C * L + 2 * N * 2 * C * Fh * L + 2 * B * C * C
    assert flops.forward == counter.get_total_flops() == by_hand == 889_344
    # bidirectional: every query meets all T keys, so the exact count is the full T×T
    assert flops.attention_scores_causal == flops.by_component["attention_scores"]
    assert flops.by_component["attention_scores"] == 2 * 2 * B * T * T * cfg.d_model * cfg.n_layers
    assert flops.by_component["pooler"] == 2 * B * cfg.d_model**2 and flops.by_component["lm_head"] == 0
    causal = analysis.count_flops(cfg.replace(causal=True), T, B)
    assert causal.attention_scores_causal == flops.attention_scores_causal * (T + 1) // (2 * T)


def test_bidirectional_attention_is_full_attention():
    cfg = PRESETS["debug"].replace(causal=False, n_kv_heads=2)  # GQA: 2 query heads a KV head
    attention = build_model(cfg).model.layers[0].self_attn
    x = torch.randn(2, 9, cfg.d_model, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        out = attention(x, None, None)
        q, k, v = attention.project(x, None)  # (B, H, T, D), (B, G, T, D)
        k, v = (t.repeat_interleave(cfg.n_rep, dim=1) for t in (k, v))
        weights = F.softmax(q @ k.transpose(-2, -1) / cfg.head_dim**0.5, dim=-1)  # no mask
        reference = attention.o_proj((weights @ v).transpose(1, 2).reshape(2, 9, -1))
    torch.testing.assert_close(out, reference, rtol=1e-5, atol=1e-6)
    # the first token's output depends on the last token (it would not under a causal mask)
    model = build_model(cfg.replace(lm_head=False))
    ids = torch.randint(0, cfg.vocab_size, (1, 6))
    changed = ids.clone()
    changed[0, -1] = (ids[0, -1] + 1) % cfg.vocab_size
    with torch.no_grad():
        assert not torch.allclose(model(ids)[0, 0], model(changed)[0, 0])
    assert model(ids).shape == (1, 6, cfg.d_model)  # a bare encoder returns its hidden states


def test_bert_model_state_dict_loads_and_gives_its_last_hidden_state():
    cfg, _ = parse_config_json(json.dumps(TINY))
    torch.manual_seed(0)
    bert = bert_model(TINY)
    with torch.no_grad():  # off the init (LayerNorms at 1 and 0, zero biases) so every tensor counts
        for p in bert.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    model = build_model(cfg)
    assert sorted(model.state_dict()) == sorted(bert.state_dict())  # BertModel's keys
    model.load_state_dict(bert.state_dict(), strict=True)
    ids = torch.randint(0, TINY["vocab_size"], (2, 11))
    with torch.no_grad():
        theirs, ours = bert(ids), model(ids)
        torch.testing.assert_close(ours, theirs.last_hidden_state, rtol=0, atol=1e-5)
        torch.testing.assert_close(model.pooled(ours), theirs.pooler_output, rtol=0, atol=1e-5)


def test_an_encoder_caches_nothing():
    cfg = PRESETS["bert-base-uncased"]
    kv = analysis.kv_cache(cfg, 512, 4)
    assert kv.bytes_per_token == kv.bytes == 0 and "caches nothing" in kv.note


@pytest.mark.parametrize(
    "surface,call",
    [
        ("decoding with a KV cache", lambda m, ids: m.new_cache(1)),
        ("next-token loss", lambda m, ids: m.loss(ids)),
    ],
)
def test_the_model_refuses_decoding_and_the_next_token_loss(surface, call):
    model = build_model(PRESETS["debug"].replace(causal=False))
    with pytest.raises(ConfigError, match=f"^{surface} is not modelled for a bidirectional encoder"):
        call(model, torch.zeros(1, 4, dtype=torch.long))


def test_surfaces_that_need_a_causal_decoder_refuse_an_encoder_by_name():
    from llama_lab.analysis.parallel import Layout
    from llama_lab.runtime.hardware import GPUS
    from llama_lab.train.loop import TrainSettings, train
    from llama_lab.validation.predict import predict_decode, predict_train

    cfg, gpu = PRESETS["bert-base-uncased"], GPUS["H100 80GB"]
    for surface, call in (
        ("predict decode", lambda: predict_decode(cfg, gpu)),
        ("predict train", lambda: predict_train(cfg, gpu, Layout(1, 1), 512)),
        ("the training loop", lambda: train(cfg, TrainSettings(steps=1))),
    ):
        with pytest.raises(ConfigError, match=f"^{surface} is not modelled for a bidirectional encoder"):
            call()


@pytest.mark.parametrize(
    "change,words",
    [
        ({"position_embedding_type": "relative_key"}, "position_embedding_type='relative_key' is not"),
        ({"is_decoder": True}, "is_decoder=true (a causal BERT decoder) is not modelled"),
        ({"add_cross_attention": True}, "add_cross_attention=true (cross-attention) is not modelled"),
        ({"hidden_act": "gelu_new"}, "hidden_act='gelu_new' is not modelled"),
    ],
)
def test_a_bert_file_with_what_is_not_modelled_is_refused_by_name(change, words):
    with pytest.raises(ConfigError, match=re.escape(words)):
        parse_config_json(json.dumps({**TINY, **change}))


BIDIRECTIONAL = "causal=False (bidirectional attention) is not modelled with"


@pytest.mark.parametrize(
    "fields,words",
    [
        (dict(causal=False, sliding_window=4), f"{BIDIRECTIONAL} a sliding window"),
        (dict(causal=False, attention_sinks=True), f"{BIDIRECTIONAL} attention sinks"),
        (dict(lm_head=False, tie_embeddings=True), "lm_head=False (a bare encoder, no output layer) ties no"),
        (dict(type_vocab_size=-1), "type_vocab_size=-1"),
    ],
)
def test_combinations_not_modelled_are_refused_in_one_line(fields, words):
    with pytest.raises(ConfigError, match=re.escape(words)) as info:
        ModelConfig(**{**PRESETS["debug"].to_dict(), **fields})
    assert "\n" not in str(info.value)


def test_the_live_experiments_refuse_an_encoder_before_any_work():
    from llama_lab.experiments.decode import decode_benchmark
    from llama_lab.experiments.finetune import finetune_run
    from llama_lab.experiments.gradient_norms import gradnorms
    from llama_lab.experiments.live import bench
    from llama_lab.experiments.speculative import speculative_run

    encoder = PRESETS["debug"].replace(causal=False)
    for surface, call in (
        ("the KV decode experiment", lambda: decode_benchmark(encoder)),
        ("the gradient norms", lambda: gradnorms(encoder, 8, 1)),
        ("bench", lambda: bench(encoder)),
        ("fine-tuning", lambda: finetune_run("bert-base-uncased")),
        ("speculative decoding", lambda: speculative_run("bert-base-uncased", "bert-base-uncased")),
    ):
        with pytest.raises(ConfigError, match=f"^{surface} is not modelled for a bidirectional encoder"):
            call()


def test_what_fits_beside_an_encoder_is_bounded_by_its_weights_only():
    cfg = PRESETS["bert-base-uncased"]
    assert analysis.max_batch_that_fits(cfg, "H100 80GB", 512) == MAX_BATCH
    assert analysis.max_context_that_fits(cfg, "H100 80GB") == LIMITS["max_seq_len"]


def test_analyze_counts_the_encoders_activations_without_a_head():
    """Memory's activations are the bare encoder's (held against the live model in
    tests/unit/analysis/test_analysis.py): no logits at inference, the pooler and no loss in
    training, and a note that says so."""
    cfg = PRESETS["bert-base-uncased"]
    result = analysis.analyze(cfg, 128)
    training = analysis.activation_estimate(cfg, 128, 1, "bf16")
    assert result["memory"]["training"]["components"]["activations"] == training.total_bytes
    # the pooler's input keeps the last hidden state (T·C), tanh's output is C
    assert training.components["head_and_loss"] == 2 * (128 * 768 + 768)
    inference = result["memory"]["inference"]["components"]["activations"]
    assert inference == analysis.inference_activation_bytes(cfg, 128, 1, "bf16")
    assert inference < 128 * cfg.vocab_size * 2  # never the logits: there is no LM head
    assert any(note.startswith("a bare encoder (lm_head=False)") for note in result["notes"])
