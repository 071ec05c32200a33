"""Qwen3-Next and Qwen3.5 (Gated DeltaNet beside gated attention): the delta rule itself, the
model against transformers over several chunks, FLOPs against FlopCounterMode over several
chunks and for a decode step, the state the cache holds against transformers' cache tensors,
the published files and counts, and the reader's rules."""

import json
import warnings

import pytest
import torch
from hf_helpers import meta_count, published, theirs
from torch.utils.flop_counter import FlopCounterMode

from llama_lab import analysis
from llama_lab.config import PRESETS, ConfigError, ModelConfig, read_hf_config
from llama_lab.model import build_model
from llama_lab.model.delta_net import chunk_delta_rule, recurrent_delta_rule

transformers = pytest.importorskip("transformers")
warnings.filterwarnings("ignore", module="transformers")

TINY = dict(
    vocab_size=97,
    hidden_size=64,
    intermediate_size=96,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    linear_num_key_heads=2,
    linear_num_value_heads=4,
    linear_key_head_dim=8,
    linear_value_head_dim=12,
    linear_conv_kernel_dim=4,
    max_position_embeddings=512,
    rope_theta=10000.0,
    tie_word_embeddings=False,
)
EXPERTS = dict(
    num_experts=8, num_experts_per_tok=2, moe_intermediate_size=24, shared_expert_intermediate_size=24
)
KINDS = {
    "qwen3_next": {**TINY, **EXPERTS},
    "qwen3_5_text": TINY,
    "qwen3_5_moe_text": {**{k: v for k, v in TINY.items() if k != "intermediate_size"}, **EXPERTS},
}
FILES = {  # preset → its published config.json (tests/families/published_configs)
    "qwen3-next-80b-a3b": "qwen3-next-80b-a3b-instruct",
    "qwen3.5-35b-a3b": "qwen3.5-35b-a3b",
    "qwen3.5-27b": "qwen3.5-27b",
}


def hf_and_ours(kind: str, dtype=torch.float32):
    config = transformers.AutoConfig.for_model(kind, **KINDS[kind])
    hf = transformers.AutoModelForCausalLM.from_config(
        config, attn_implementation="eager", experts_implementation="eager"
    ).eval()
    cfg, _ = read_hf_config(config.to_dict())
    ours = build_model(cfg, dtype=dtype).eval()
    ours.load_state_dict(hf.state_dict(), strict=True)
    return hf.to(dtype), ours, cfg


def rule_inputs(T: int, dtype=torch.float64):
    torch.manual_seed(0)
    B, Hk, Hv, dk, dv = 2, 2, 4, 8, 12
    return (
        torch.randn(B, T, Hk, dk, dtype=dtype),
        torch.randn(B, T, Hk, dk, dtype=dtype),
        torch.randn(B, T, Hv, dv, dtype=dtype),
        -torch.rand(B, T, Hv, dtype=dtype) * 3,  # log decays ≤ 0
        torch.rand(B, T, Hv, dtype=dtype),
        torch.zeros(B, Hv, dk, dv, dtype=dtype),
    )


@pytest.mark.parametrize("T", [1, 63, 64, 150])
def test_the_chunked_rule_is_the_recurrence_exactly(T):
    q, k, v, g, beta, state = rule_inputs(T)
    chunked, s1 = chunk_delta_rule(q, k, v, g, beta, state)
    stepped, s2 = recurrent_delta_rule(q, k, v, g, beta, state)
    torch.testing.assert_close(chunked, stepped, rtol=0, atol=1e-12)
    torch.testing.assert_close(s1, s2, rtol=0, atol=1e-12)


def test_the_recurrence_by_hand_on_one_head():
    """S_t = α S + k ⊗ β (v − (α S)ᵀ k), o = Sᵀ q, with q, k normalised and q / √dk."""
    q, k, v, g, beta, state = rule_inputs(5)
    out, _ = recurrent_delta_rule(q, k, v, g, beta, state)
    S = torch.zeros(8, 12, dtype=torch.float64)
    for t in range(5):
        # FLA's l2norm: x / sqrt(Σx² + 1e-6)
        kt = k[0, t, 0] / (k[0, t, 0].square().sum() + 1e-6).sqrt()
        qt = q[0, t, 0] / (q[0, t, 0].square().sum() + 1e-6).sqrt() / 8**0.5
        S = torch.exp(g[0, t, 0]) * S  # value head 0 reads q/k head 0
        S = S + torch.outer(kt, beta[0, t, 0] * (v[0, t, 0] - S.T @ kt))
        torch.testing.assert_close(out[0, t, 0], S.T @ qt, rtol=0, atol=1e-12)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_logits_and_decoding_over_several_chunks_equal_transformers(kind):
    hf, ours, _ = hf_and_ours(kind)
    ids = torch.randint(0, 97, (2, 150))  # three chunks of 64, the last partial
    with torch.no_grad():
        expected, logits = hf(ids).logits, ours(ids)
        cache = ours.new_cache(2, 150)
        steps = [ours(ids[:, :70], cache), ours(ids[:, 70:130], cache)]
        steps += [ours(ids[:, t : t + 1], cache) for t in range(130, 150)]
    torch.testing.assert_close(logits, expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(torch.cat(steps, dim=1), logits, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="Gated DeltaNet layer folds every token into its state"):
        cache.truncate(100)


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("T", [5, 64, 150])
def test_forward_flops_equal_flop_counter_over_several_chunks(kind, T):
    from test_families import uncounted_delta_rule_flops

    hf, _, cfg = hf_and_ours(kind)
    hf.requires_grad_(False)  # (FlopCounterMode's module tracker: see test_families)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        hf(torch.randint(0, 97, (2, T)))
    counts = analysis.count_flops(cfg, T, 2)
    assert counter.get_total_flops() + uncounted_delta_rule_flops(cfg, T, 2) == counts.forward
    assert counts.by_component["delta_rule"] > 0


def test_a_decode_steps_delta_rule_flops_equal_flop_counter_on_our_recurrent_step():
    _, ours, cfg = hf_and_ours("qwen3_5_text")
    layer = ours.model.layers[0].linear_attn
    cache = ours.new_cache(1, 8)
    x = torch.randn(1, 3, cfg.d_model)
    with torch.no_grad():
        layer(x, cache=cache)
        cache.length = 3
        with FlopCounterMode(display=False) as counter:
            layer(torch.randn(1, 1, cfg.d_model), cache=cache)
    projections = 2 * analysis.flops.linear_proj_params(cfg)  # one token through in_proj, out_proj
    one_layer = analysis.flops.delta_rule_flops(cfg, 1, 1, decode=True) // sum(cfg.linear_layer_flags)
    assert counter.get_total_flops() == projections + one_layer
    # 3·dk·dv per value head plus the convolution's conv_dim·K, 2 FLOPs each
    assert one_layer == 2 * (3 * 8 * 12 * 4 + cfg.linear_conv_dim * 4)


def _cache_tensor_bytes(cache) -> int:
    total = 0
    for layer in cache.layers:
        for name in ("keys", "values", "conv_states", "recurrent_states"):
            value = getattr(layer, name, None)
            values = (
                value.values() if isinstance(value, dict) else value if isinstance(value, list) else [value]
            )
            total += sum(t.numel() * t.element_size() for t in values if isinstance(t, torch.Tensor))
    return total


@pytest.mark.parametrize("dtype,name", [(torch.float32, "fp32"), (torch.bfloat16, "bf16")])
@pytest.mark.parametrize("kind", ["qwen3_next", "qwen3_5_text"])
def test_the_state_is_the_tensors_transformers_cache_holds(kind, dtype, name):
    hf, ours, cfg = hf_and_ours(kind, dtype)
    ids = torch.randint(0, 97, (2, 37))
    with torch.no_grad():
        out = hf(ids, use_cache=True)
        out = hf(ids[:, :1], past_key_values=out.past_key_values, use_cache=True)
        cache = ours.new_cache(2, 38)
        ours(ids, cache)
        ours(ids[:, :1], cache)
    held = _cache_tensor_bytes(out.past_key_values)
    assert held == analysis.kv_cache_bytes(cfg, 38, 2, name) == cache.nbytes() == cache.allocated_bytes()
    # by hand: 1 attention block's K and V for 38 tokens, 3 linear blocks' conv (K = 4 inputs of
    # q, k and v at the model's dtype) and float32 state (4 value heads of 8 × 12)
    b = 4 if name == "fp32" else 2
    conv_dim = 2 * 2 * 8 + 4 * 12
    assert held == 2 * (2 * 2 * 16 * 38 * b + 3 * (conv_dim * 4 * b + 4 * 8 * 12 * 4))
    assert analysis.state_bytes(cfg, name) == 3 * (conv_dim * 4 * b + 4 * 8 * 12 * 4)


def test_the_kv_page_numbers_of_qwen3_next():
    cfg = PRESETS["qwen3-next-80b-a3b"]
    report = analysis.kv_cache(cfg, 32768, 1, "bf16")
    # 12 attention blocks × K and V × 2 KV heads × 256 × 2 bytes per token
    assert report.bytes_per_token == 12 * 2 * 2 * 256 * 2 == 24576
    # 36 Gated DeltaNet blocks: conv of 2·16·128 + 32·128 channels × 4 inputs (bf16) and a
    # state of 32 × 128 × 128 float32: 2.06 MiB per block and sequence
    state = 36 * ((2 * 16 * 128 + 32 * 128) * 4 * 2 + 32 * 128 * 128 * 4)
    assert report.state_bytes == state == 77_856_768
    assert report.bytes == 24576 * 32768 + state
    assert "36 of 48 layers are Gated DeltaNet" in report.note
    # the longest context on one H100 sets the state aside first
    from llama_lab.runtime.hardware import GPUS

    free = GPUS["H100 80GB"].usable_bytes - analysis.weight_bytes(cfg, "int4")
    expected = (free - state) // 24576
    assert analysis.max_context_that_fits(cfg, "H100 80GB", 1, "int4", "bf16") == expected


@pytest.mark.parametrize("name", sorted(FILES))
def test_the_presets_are_their_published_files_and_transformers_counts_them(name):
    data = published(FILES[name])
    cfg, notes = read_hf_config(data)
    # the preset is the text decoder; a wrapper's vision tower is counted beside it
    # (tests/families/test_vision.py holds the whole model to transformers')
    cfg = cfg.replace(vision=None)
    assert cfg == PRESETS[name]
    counts = analysis.count_params(cfg)
    assert counts.total == analysis.count_params_module(cfg).total == meta_count(theirs(data))
    assert analysis.weights_bytes(cfg, "bf16").total == 2 * counts.total


def test_qwen3_next_against_its_card():
    """'80B in total and 3B activated', '79B' non-embedding: 79.67B, 79.36B; the 3B active leave
    out the embedding table and the head (3.25B; 3.87B with both)."""
    counts = analysis.count_params(PRESETS["qwen3-next-80b-a3b"])
    assert counts.total == 79_674_391_296 and round(counts.total / 1e9) == 80
    assert int(counts.non_embedding / 1e9) == 79
    embedding = 151936 * 2048
    assert int((counts.active - 2 * embedding) / 1e9) == 3
    assert round(counts.active / 1e9, 2) == 3.87


def test_qwen3_5_35b_text_count_and_its_card():
    """The text decoder: 34,660,610,688 (transformers' meta module; a third-party table quotes
    the same 'Text parameters'); the card's '35B total / 3B active' counts the vision tower."""
    counts = analysis.count_params(PRESETS["qwen3.5-35b-a3b"])
    assert counts.total == 34_660_610_688
    assert int((counts.active - 2 * 248320 * 2048) / 1e9) == 2  # 2.44B without the tables


def test_the_reader_derives_layer_types_and_refuses_what_it_does_not_model():
    base = {**KINDS["qwen3_next"], "model_type": "qwen3_next", "num_hidden_layers": 8}
    cfg, _ = read_hf_config(base)  # no layer_types: every 4th block full attention
    assert cfg.linear_layer_flags == (True, True, True, False) * 2
    cfg, _ = read_hf_config({**base, "full_attention_interval": 2})
    assert cfg.linear_layer_flags == (True, False) * 4
    with pytest.raises(ConfigError, match="layer_types must name 'linear_attention' or 'full_attention'"):
        read_hf_config({**base, "layer_types": ["sliding_attention"] * 8})
    with pytest.raises(ConfigError, match="shared_expert_intermediate_size=48 differs"):
        read_hf_config({**base, "shared_expert_intermediate_size": 48})
    with pytest.raises(ConfigError, match="linear_v_heads=3 is not a multiple of linear_k_heads=2"):
        read_hf_config({**base, "linear_num_value_heads": 3})


def test_a_qwen3_5_wrapper_is_counted_whole():
    cfg, notes = read_hf_config(published("qwen3.5-35b-a3b"))
    assert cfg.vision.kind == "qwen3_5" and not any("not counted" in note for note in notes)
    # the card's "35B total": the text decoder 34,660,610,688 and the vision tower and merger
    assert analysis.count_params(cfg).total == 35_107_181_936 and round(35_107_181_936 / 1e9) == 35
    assert any("mtp_num_hidden_layers" in note and "not read" in note for note in notes)
    assert cfg.shared_expert_gate and cfg.attn_output_gate and not cfg.linear_grouped_proj


def test_a_hybrid_config_needs_consistent_fields():
    with pytest.raises(ConfigError, match="linear_grouped_proj=True .* needs linear_layers"):
        ModelConfig(linear_grouped_proj=True)
    with pytest.raises(ConfigError, match="shared_expert_gate=True gates Qwen's one shared expert"):
        ModelConfig(shared_expert_gate=True)
    with pytest.raises(ConfigError, match="both linear_layers and sliding-window layers"):
        ModelConfig(linear_layers="0", sliding_window=8, local_layers="0")
    assert json.loads(json.dumps(PRESETS["qwen3.5-27b"].to_dict()))["linear_layers"].startswith("0,1,2,4")


def test_where_the_hybrid_cache_crosses_all_attention():
    """Qwen3-Next's cache: 24,576 bytes per token + a 77,856,768-byte state, against 98,304 per
    token with attention in all 48 blocks: equal at 77,856,768 / 73,728 = 1,056 tokens exactly,
    smaller from 1,057 on."""
    cfg = PRESETS["qwen3-next-80b-a3b"]
    assert analysis.kv_cache_bytes_per_token(analysis.kv.all_attention(cfg)) == 48 * 2 * 2 * 256 * 2 == 98304
    assert analysis.kv.hybrid_crossover(cfg) == 1057
    assert analysis.kv_cache_bytes(cfg, 1056) == analysis.kv_cache_bytes(analysis.kv.all_attention(cfg), 1056)
    frame = analysis.kv.hybrid_cache_frame(cfg, (1, 32768))
    assert list(frame["hybrid total"]) == [24576 + 77_856_768, 24576 * 32768 + 77_856_768]


def test_home_says_what_sets_the_hybrids_apart():
    from llama_lab.analysis.summary import family_notes

    notes = " ".join(family_notes(PRESETS["qwen3.5-27b"]))
    assert "**Gated DeltaNet**" in notes and "48 of 64 blocks" in notes
    assert "**Gated attention**" in notes and "**NoPE blocks**" not in notes
    assert "**Gated shared expert**" in " ".join(family_notes(PRESETS["qwen3.5-35b-a3b"]))


def test_inside_the_model_traces_the_hybrid_small_copy():
    """The page's trace on Qwen3-Next's small copy (untrained): attention maps for the attending
    block only, the probes on it, the Gated DeltaNet blocks' residual stream all the same."""
    from llama_lab.experiments.inside import first_attention_block, inside_config, text_tokens, trace

    cfg = inside_config(PRESETS["qwen3-next-80b-a3b"])
    model = build_model(cfg).eval()
    t = trace(model, text_tokens("Return the number of items.", cfg))
    assert [layer.attention is None for layer in t.layers] == [True, True, True, False]
    assert first_attention_block(model) == 3 and t.rope is not None
    assert all(layer.residual_out_rms.isfinite().all() for layer in t.layers)
    assert t.layers[3].max_attention_error < 1e-4
