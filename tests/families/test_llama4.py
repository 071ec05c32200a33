"""Llama 4 (llama4_text; the llama4 wrapper): chunked attention over several chunks against
transformers (prefill across chunk boundaries, decoding, generation), the attention
temperature by hand, FLOPs of chunked blocks against FlopCounterMode with the masked pairs
derived by hand, the cache against transformers' cache tensors, the published files and counts,
and the reader's rules."""

import warnings

import pytest
import torch
from hf_helpers import meta_count, published, theirs
from torch.utils.flop_counter import FlopCounterMode

from llama_lab import analysis
from llama_lab.config import PRESETS, PUBLISHED_ROUNDED, ConfigError, ModelConfig, read_hf_config
from llama_lab.model import build_model
from llama_lab.model.attention import attention_temperature

transformers = pytest.importorskip("transformers")
warnings.filterwarnings("ignore", module="transformers")

# 4 blocks: 0-2 rotated and chunked (chunks of 5), block 3 NoPE with the temperature (floor 3:
# it grows inside the sequence); experts on blocks 1 and 3 (every 2nd), top-2 of 4
TINY = dict(
    vocab_size=97,
    hidden_size=64,
    intermediate_size=48,
    intermediate_size_mlp=80,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    num_local_experts=4,
    num_experts_per_tok=2,
    interleave_moe_layer_step=2,
    attention_chunk_size=5,
    floor_scale=3,
    attn_scale=0.5,
    max_position_embeddings=64,
)
FILES = {"llama-4-scout": "llama-4-scout-17b-16e", "llama-4-maverick": "llama-4-maverick-17b-128e-instruct"}


def hf_and_ours(**changes):
    config = transformers.AutoConfig.for_model("llama4_text", **{**TINY, **changes})
    torch.manual_seed(0)
    hf = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
    with torch.no_grad():
        for p in hf.parameters():
            p.normal_(0, 0.2)  # norms and router away from their init
    cfg, _ = read_hf_config(config.to_dict())
    ours = build_model(cfg).eval()
    ours.load_state_dict(hf.state_dict(), strict=True)
    return hf, ours, cfg


def test_the_reader_sees_the_chunked_nope_and_sparse_blocks():
    _, _, cfg = hf_and_ours()
    assert cfg.rope_layer_flags == (True, True, True, False)
    assert cfg.local_layer_flags == (True, True, True, False) and cfg.chunked_attention
    assert cfg.moe_layer_flags == (False, True, False, True)
    assert (cfg.ffn_hidden, cfg.expert_ffn_hidden, cfg.n_shared_experts) == (80, 48, 1)
    assert cfg.qk_norm and cfg.qk_norm_scope == "rope_l2"
    assert cfg.temperature_layer_flags == (False, False, False, True) and cfg.attn_temperature_offset == 1


def test_logits_over_several_chunks_and_decoding_equal_transformers():
    hf, ours, _ = hf_and_ours()
    ids = torch.randint(0, 97, (2, 23))  # chunks 0-4, 5-9, …, 20-22
    with torch.no_grad():
        expected, logits = hf(ids).logits, ours(ids)
        cache = ours.new_cache(2, 23)
        # prefills that end inside a chunk, cross one boundary and cross two, then decoding
        steps = [ours(ids[:, :3], cache), ours(ids[:, 3:7], cache), ours(ids[:, 7:18], cache)]
        steps += [ours(ids[:, t : t + 1], cache) for t in range(18, 23)]
        generated = hf.generate(ids[:1, :4], max_new_tokens=12, do_sample=False)
        assert torch.equal(ours.generate(ids[:1, :4], 12), generated)
    torch.testing.assert_close(logits, expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(torch.cat(steps, dim=1), logits, rtol=1e-5, atol=1e-5)


def test_a_chunk_boundary_cuts_the_attention_off():
    """A token at the start of a chunk attends to itself only in a chunked block: changing the
    earlier tokens changes nothing there but through the NoPE block (here: none)."""
    _, ours, cfg = hf_and_ours(no_rope_layers=[1, 1, 1, 1])  # every block chunked
    assert all(cfg.local_layer_flags)
    a, b = torch.randint(0, 97, (1, 12)), torch.randint(0, 97, (1, 12))
    b[:, 5:] = a[:, 5:]  # the same from position 5, the second chunk, on
    with torch.no_grad():
        torch.testing.assert_close(ours(a)[:, 5:], ours(b)[:, 5:], rtol=0, atol=1e-6)
        assert not torch.allclose(ours(a)[:, 4], ours(b)[:, 4])


def test_the_attention_temperature_by_hand():
    cfg = ModelConfig(attn_temperature_layers="all", attn_floor_scale=3, attn_temperature_scale=0.5)
    got = attention_temperature(cfg, 1, 8, "cpu").flatten()
    # positions 1..8: ⌊(p + 1) / 3⌋ = 0, 1, 1, 1, 2, 2, 2, 3
    want = torch.tensor([1 + 0.5 * torch.log1p(torch.tensor(float(n))) for n in (0, 1, 1, 1, 2, 2, 2, 3)])
    torch.testing.assert_close(got, want)


def test_chunked_attention_needs_a_chunk_size():
    with pytest.raises(ConfigError, match="chunked_attention=True .* needs sliding_window > 0"):
        ModelConfig(chunked_attention=True)


@pytest.mark.parametrize("T", [5, 12, 23])
def test_forward_flops_equal_flop_counter_with_the_chunks_by_hand(T):
    """FlopCounterMode counts transformers' eager scores over all T×T pairs and its experts on
    every token; LLaMA Lab counts the pairs inside each chunk (Σ n_c², chunks of 5) and the k
    routed experts. The difference, by hand, closes the books exactly."""
    hf, _, cfg = hf_and_ours()
    hf.requires_grad_(False)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        hf(torch.randint(0, 97, (2, T)))
    H, D, B = 4, 16, 2
    chunks = [5] * (T // 5) + [T % 5] * bool(T % 5)
    masked = 3 * B * 4 * H * D * (T * T - sum(n * n for n in chunks))  # QKᵀ and AV, 3 chunked blocks
    unrouted = 2 * B * T * 2 * (4 - 2) * 3 * 64 * 48  # 2 sparse blocks, 2 unchosen experts each
    assert counter.get_total_flops() - masked - unrouted == analysis.count_flops(cfg, T, B).forward


def test_a_decode_step_meets_the_keys_of_its_chunk():
    cfg = PRESETS["llama-4-scout"]
    # position 8,200 is the 9th token of chunk 1 on the chunked blocks; the NoPE blocks see all
    at = analysis.decode_flops(cfg, 8201).by_component["attention_scores"]
    at_start = analysis.decode_flops(cfg, 8193).by_component["attention_scores"]
    per_pair = 4 * 40 * 128  # QKᵀ and AV per query-key pair and block
    assert at == per_pair * (36 * 9 + 12 * 8201)
    assert at_start == per_pair * (36 * 1 + 12 * 8193)


def test_the_cache_is_transformers_tensors_plus_the_new_token_on_chunked_blocks():
    hf, ours, cfg = hf_and_ours()
    ids = torch.randint(0, 97, (1, 13))
    with torch.no_grad():
        cache = hf(ids, use_cache=True).past_key_values
        mine = ours.new_cache(1, 13)
        ours(ids, mine)
    held = [layer.keys.shape[2] for layer in cache.layers]
    assert held == [4, 4, 4, 13]  # a chunked block: W − 1 = 4 (DynamicSlidingWindowLayer)
    per_layer_token = 2 * 2 * 16 * 4  # K and V, 2 KV heads of 16, fp32
    theirs_bytes = sum(layer.keys.nbytes + layer.values.nbytes for layer in cache.layers)
    assert theirs_bytes == per_layer_token * sum(held)
    # LLaMA Lab's ring keeps W slots on a chunked block, as on a sliding one
    assert mine.nbytes() == analysis.kv_cache_bytes(cfg, 13, 1, "fp32") == theirs_bytes + 3 * per_layer_token


@pytest.mark.parametrize("name", sorted(FILES))
def test_the_published_files_are_the_presets_and_transformers_counts(name):
    data = published(FILES[name])
    cfg, notes = read_hf_config(data)
    # the preset is the text decoder; the file's vision tower and projector are counted beside it
    # (tests/families/test_vision.py holds the whole model to transformers')
    assert cfg.vision is not None and cfg.vision.kind == "llama4"
    cfg = cfg.replace(vision=None)
    assert cfg == PRESETS[name]
    assert not any("not counted" in note for note in notes)
    counts = analysis.count_params(cfg)
    assert counts.total == meta_count(theirs(data))
    total, active, _ = PUBLISHED_ROUNDED[name]
    assert round(counts.active / 1e9) == active / 1e9  # 17.17B and 17.18B: "17B (Activated)"
    if name == "llama-4-maverick":
        assert counts.total == 400_711_848_960 and int(counts.total / 1e9) == total / 1e9


def test_scouts_published_total_counts_the_vision_tower():
    """Scout's text decoder is 107.77B; the card's 109B is the whole checkpoint: transformers'
    Llama4ForConditionalGeneration of the file (its vision tower and projector too)."""
    data = published(FILES["llama-4-scout"])
    assert analysis.count_params(PRESETS["llama-4-scout"]).total == 107_769_861_120
    config = transformers.AutoConfig.for_model(**data)
    with torch.device("meta"):
        whole = transformers.AutoModelForImageTextToText.from_config(config)
    total = sum(p.numel() for p in whole.parameters())
    assert total == 108_641_793_536 and round(total / 1e9) == PUBLISHED_ROUNDED["llama-4-scout"][0] / 1e9
    # the file read counts it whole: the text decoder, the tower and the projector
    assert analysis.count_params(read_hf_config(data)[0]).total == total


def test_meta_files_temperature_flag_written_as_a_number_reads_as_true():
    cfg, notes = read_hf_config({**TINY, "model_type": "llama4_text", "attn_temperature_tuning": 4})
    assert any(cfg.temperature_layer_flags) and any(
        "attn_temperature_tuning=4 is read as true" in n for n in notes
    )


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"no_rope_layers": [1, 0]}, "no_rope_layers has 2 entries for 4 layers"),
        (
            {"attention_chunk_size": None, "layer_types": ["chunked_attention"] + ["full_attention"] * 3},
            "attention_chunk_size is null",
        ),
        ({"layer_types": ["sliding_attention"] * 4}, "'chunked_attention' or 'full_attention'"),
        ({"num_local_experts": 0}, "num_local_experts=0"),
    ],
)
def test_the_readers_rules(changes, message):
    with pytest.raises(ConfigError, match=message):
        read_hf_config({**TINY, "model_type": "llama4_text", **changes})


def test_the_export_round_trips():
    _, _, cfg = hf_and_ours()
    back, _ = read_hf_config(cfg.to_hf_config())
    assert back == cfg
    for name in FILES:
        again, _ = read_hf_config(PRESETS[name].to_hf_config())
        assert again == PRESETS[name]
