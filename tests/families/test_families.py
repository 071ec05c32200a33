"""Every supported family against transformers' own class for it (transformers ≥ 5): the
importer's defaults are the config classes' defaults, parameter counts equal transformers'
model on the meta device, logits equal on small random configs (fp32, a sliding window shorter
than the sequence included), forward FLOPs equal torch's FlopCounterMode on transformers' eager
forward (eager experts), the export is read back by transformers as the same model, the
presets have their published counts, and other families are refused by name."""

import json
import warnings

import pytest
import torch
from hf_helpers import causal_lm, meta_model
from torch.utils.flop_counter import FlopCounterMode

from llama_lab import analysis
from llama_lab.config import (
    PRESETS,
    PUBLISHED_PARAMS,
    PUBLISHED_ROUNDED,
    ConfigError,
    ModelConfig,
    read_hf_config,
)
from llama_lab.config.families import MODEL_TYPES as FAMILIES
from llama_lab.experiments import LiveSettings
from llama_lab.model import build_model

transformers = pytest.importorskip("transformers")
warnings.filterwarnings("ignore", module="transformers")

BASE = dict(
    vocab_size=128,
    hidden_size=64,
    intermediate_size=96,
    num_hidden_layers=3,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=64,
)
MLA = dict(
    num_key_value_heads=4,
    kv_lora_rank=32,
    q_lora_rank=24,
    qk_rope_head_dim=8,
    qk_nope_head_dim=16,
    v_head_dim=12,
    n_routed_experts=8,
    num_experts_per_tok=2,
    moe_intermediate_size=20,
    n_shared_experts=1,
    first_k_dense_replace=1,
)
HYBRID = dict(
    head_dim=16,
    linear_num_key_heads=2,
    linear_num_value_heads=4,
    linear_key_head_dim=8,
    linear_value_head_dim=12,
    linear_conv_kernel_dim=4,
    layer_types=["linear_attention", "linear_attention", "full_attention"],
)
SHARED_EXPERT = dict(moe_intermediate_size=20, shared_expert_intermediate_size=20)
# Small configs that switch on what sets each family apart (windows shorter than T=24 below).
CASES = {
    "llama": {"attention_bias": True, "mlp_bias": True},
    "llama-tied-mqa": {"model_type": "llama", "tie_word_embeddings": True, "num_key_value_heads": 1},
    "mistral": {"sliding_window": 8, "head_dim": 32},
    "mixtral": {"num_local_experts": 4, "num_experts_per_tok": 2, "sliding_window": 8},
    "qwen2": {"use_sliding_window": True, "sliding_window": 8, "max_window_layers": 1},
    "qwen3": {"head_dim": 24, "use_sliding_window": True, "sliding_window": 6, "max_window_layers": 2},
    "qwen3_moe": {
        "num_experts": 6,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 40,
        "mlp_only_layers": [1],
        "norm_topk_prob": True,
    },
    "qwen3_moe-unnormalised": {
        "model_type": "qwen3_moe",
        "num_experts": 4,
        "num_experts_per_tok": 3,
        "moe_intermediate_size": 24,
        "decoder_sparse_step": 2,
    },
    # MLA + DeepSeekMoE: q LoRA, the latent, the decoupled RoPE key, value heads of their own
    # width, shared experts, dense blocks first, grouped routing, sigmoid scores with the bias
    "deepseek_v3": {**MLA, "n_group": 4, "topk_group": 2, "routed_scaling_factor": 2.5},
    "deepseek_v3-plain-q": {
        **MLA,
        "model_type": "deepseek_v3",
        "q_lora_rank": None,
        "n_group": 1,
        "topk_group": 1,
        "norm_topk_prob": False,
        "rope_interleave": False,
        "first_k_dense_replace": 0,
    },
    "deepseek_v2": {**MLA, "topk_method": "group_limited_greedy", "n_group": 4, "topk_group": 2},
    # DeepSeek-V3.2: V3's block and DSA's indexer, each query attending its 6 best keys (< T)
    "deepseek_v32": {
        **MLA,
        "n_group": 4,
        "topk_group": 2,
        "index_n_heads": 8,
        "index_head_dim": 16,
        "index_topk": 6,
    },
    # gpt-oss: sinks, alternating window/full layers (window 8 < T), the biased router and
    # experts with the clamped SwiGLU; plain RoPE here (its default YaRN: test_rope_scaling.py)
    "gpt_oss": {
        "head_dim": 16,
        "num_local_experts": 4,
        "num_experts_per_tok": 2,
        "sliding_window": 8,
        "swiglu_limit": 0.5,
        "rope_parameters": {"rope_type": "default", "rope_theta": 150000.0},
    },
    # Gemma 3: sandwich (1 + γ) norms, GeGLU, √d embeddings, QK-norm, a score scale of its own,
    # local layers (window 8 < T) with their own RoPE base; Gemma 2: soft-capped scores, logits
    "gemma3_text": {
        "head_dim": 16,
        "query_pre_attn_scalar": 24,
        "sliding_window": 8,
        "layer_types": ["sliding_attention", "full_attention", "sliding_attention"],
        "rope_parameters": {
            "full_attention": {"rope_type": "default", "rope_theta": 1e6},
            "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
        },
    },
    "gemma2": {
        "head_dim": 16,
        "query_pre_attn_scalar": 24,
        "sliding_window": 8,
        "attn_logit_softcapping": 5.0,
        "final_logit_softcapping": 3.0,
    },
    # OLMo 2: norms on the sublayers' outputs only (no input norms), QK-norm over all of q and k
    "olmo2": {"attention_bias": True},
    # Olmo 3: OLMo 2's block with a window (8 < T) on the sliding layers of layer_types, and a RoPE
    # base per layer type; by default every layer but each fourth is sliding (the top-level
    # rope_theta reaches the full-attention layers only: Olmo3Config pops it once)
    "olmo3": {
        "sliding_window": 8,
        "layer_types": ["sliding_attention", "full_attention", "sliding_attention"],
        "rope_parameters": {
            "full_attention": {"rope_type": "default", "rope_theta": 1e6},
            "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
        },
        "attention_bias": True,
    },
    "olmo3-defaults": {"model_type": "olmo3", "num_hidden_layers": 4, "sliding_window": 6, "rope_theta": 5e4},
    # Granite 3: µP's multipliers — embeddings × 12, sublayer outputs × 0.22 before the residual
    # add, scores × 1/head_dim (not 1/√head_dim), logits ÷ 8 — a tied head, q/k/v/o and MLP biases
    "granite": {
        "embedding_multiplier": 12.0,
        "residual_multiplier": 0.22,
        "attention_multiplier": 1 / 16,
        "logits_scaling": 8.0,
        "tie_word_embeddings": True,
        "attention_bias": True,
        "mlp_bias": True,
    },
    # SmolLM3: the last block skips RoPE (NoPE), a tied head, a window (6 < T) on the NoPE block
    "smollm3": {
        "no_rope_layers": [1, 1, 0],
        "tie_word_embeddings": True,
        "use_sliding_window": True,
        "sliding_window": 6,
        "attention_bias": True,
        "mlp_bias": True,
        "pad_token_id": 0,
    },
    # Phi-3 / Phi-4-mini: fused qkv_proj and gate_up_proj, RoPE on the first 3/4 of each head
    # (as rope_parameters holds it), a window (7 < T) on every layer
    "phi3": {
        "rope_parameters": {"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 0.75},
        "sliding_window": 7,
        "pad_token_id": 0,
    },
    "phi3-top-level-factor": {"model_type": "phi3", "partial_rotary_factor": 0.5, "pad_token_id": 0},
    # GLM-4.5: q/k/v biases (none on o_proj), per-head QK-norm, half of each head rotated, a dense
    # block, then sigmoid routing in 2 groups (best 1) with the correction bias, renormalised
    # × 1.5, and a shared expert
    "glm4_moe": {
        "head_dim": 16,
        "partial_rotary_factor": 0.5,
        "attention_bias": True,
        "use_qk_norm": True,
        "n_routed_experts": 4,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 24,
        "n_shared_experts": 1,
        "first_k_dense_replace": 1,
        "n_group": 2,
        "topk_group": 1,
        "routed_scaling_factor": 1.5,
        "norm_topk_prob": True,
    },
    # Qwen3-Next / Qwen3.5: 2 Gated DeltaNet blocks (2 q/k heads, 4 value heads) then gated
    # attention; Qwen3-Next's grouped projections and experts with a gated shared expert
    "qwen3_next": {**HYBRID, "num_experts": 4, "num_experts_per_tok": 2, **SHARED_EXPERT},
    "qwen3_5_text": HYBRID,
    "qwen3_5_moe_text": {**HYBRID, "num_experts": 4, "num_experts_per_tok": 2, **SHARED_EXPERT},
    # Llama 4: chunks of 8 (< T) on the rotated blocks, the third block NoPE with the attention
    # temperature (floor 4: it grows within T), QK-norm after RoPE, experts on the middle block
    # (every 2nd) with a shared expert, dense blocks of intermediate_size_mlp; Maverick's shape:
    # experts every 2nd block, no QK-norm, no chunks
    "llama4_text": {
        "head_dim": 16,
        "intermediate_size_mlp": 80,
        "num_local_experts": 4,
        "num_experts_per_tok": 2,
        "interleave_moe_layer_step": 2,
        "attention_chunk_size": 8,
        "no_rope_layer_interval": 3,
        "floor_scale": 4,
        "attn_scale": 0.5,
        "attention_bias": True,
    },
    "llama4_text-maverick": {
        "model_type": "llama4_text",
        "head_dim": 16,
        "intermediate_size_mlp": 80,
        "num_local_experts": 4,
        "num_experts_per_tok": 1,
        "moe_layers": [0, 2],
        "attention_chunk_size": None,
        "no_rope_layers": [0, 1, 1],
        "use_qk_norm": False,
    },
    # Mistral 4: DeepSeek-V3's MLA and experts with a softmax router in 4 groups ranked by their
    # two best scores, and the temperature on every block (floor 4: it grows within T); RoPE as
    # linear at factor 1 (plain, over the rotated part: transformers' default would rotate whole
    # heads, which its MLA split cannot take)
    "mistral4": {
        **MLA,
        "n_routed_experts": 8,
        "n_group": 4,
        "topk_group": 2,
        "routed_scaling_factor": 1.5,
        "rope_parameters": {
            "rope_type": "linear",
            "factor": 1.0,
            "rope_theta": 1e4,
            "partial_rotary_factor": 8 / 24,
            "llama_4_scaling_beta": 0.5,
            "original_max_position_embeddings": 4,
        },
    },
    "deepseek_v2-lite": {
        **MLA,
        "model_type": "deepseek_v2",
        "q_lora_rank": None,
        "topk_method": "greedy",
        "n_shared_experts": 2,
        "routed_scaling_factor": 1.5,
    },
}


def test_every_model_type_of_the_registry_has_a_case():
    """A family added to config.families is held to transformers by every test of this suite
    (the encoder, bert, has no causal LM to hold it to: tests/families/test_bert.py; nor has the
    encoder-decoder, marian: tests/families/test_marian.py)."""
    assert set(FAMILIES) - {"bert", "marian"} <= {CASES[case].get("model_type", case) for case in CASES}


def hf_config(case: str):
    extra = dict(CASES[case])
    model_type = extra.pop("model_type", case)
    return transformers.AutoConfig.for_model(model_type, **{**BASE, **extra})


def hf_model(config, device=None):
    """transformers' causal LM of ``config`` (its family's class: AutoModelForCausalLM does not
    map Mistral4Config in transformers 5.24)."""
    if device == "meta":
        return meta_model(config)
    return (
        causal_lm(config)
        ._from_config(config, attn_implementation="eager", experts_implementation="eager")
        .eval()
    )


@pytest.mark.parametrize("model_type", sorted(FAMILIES))
def test_importer_defaults_are_the_config_classes_defaults(model_type):
    defaults = transformers.AutoConfig.for_model(model_type).to_dict()
    # Qwen3MoeConfig's attribute_map, and each class's own (DeepseekV3's num_mtp_layers is
    # written out as num_nextn_predict_layers)
    aliases = {"num_experts": "num_local_experts", **transformers.CONFIG_MAPPING[model_type].attribute_map}
    for key, ours in FAMILIES[model_type].defaults.items():
        theirs = defaults.get(aliases.get(key, key), defaults.get(key))
        if key == "rope_theta" and "rope_parameters" not in defaults:
            continue  # no RoPE (MarianConfig): PreTrainedConfig's default_theta, never read
        if key == "rope_theta":  # one base, or (Olmo 3) the full-attention layers' of one per type
            rope = defaults["rope_parameters"]
            theirs = rope["rope_theta"] if "rope_theta" in rope else rope["full_attention"]["rope_theta"]
        if ours is None:
            continue  # derived in __post_init__ (head_dim, num_key_value_heads, layer_types, …):
            # the reader derives it the same way, held below against AutoConfig's own values
        if key == "sliding_window" and defaults.get("use_sliding_window") is False:
            continue  # nulled unless used
        assert ours == theirs, (model_type, key, ours, theirs)


@pytest.mark.parametrize("case", sorted(CASES))
def test_parameters_and_keys_equal_transformers(case):
    config = hf_config(case)
    hf = hf_model(config, "meta")
    cfg, _ = read_hf_config(config.to_dict())
    ours = build_model(cfg, device="meta")
    assert set(hf.state_dict()) == set(ours.state_dict())
    n = sum(p.numel() for p in hf.parameters())
    assert analysis.count_params(cfg).total == analysis.count_params_module(cfg).total == n


@pytest.mark.parametrize("case", sorted(CASES))
def test_logits_and_cached_decoding_equal_transformers(case):
    torch.manual_seed(0)
    config = hf_config(case)
    hf = hf_model(config)
    with torch.no_grad():
        for p in hf.parameters():
            p.normal_(0, 0.2)  # biases, norms and router away from their init
        for name, buffer in hf.named_buffers():
            if name.endswith("e_score_correction_bias"):  # DeepSeek-V3's routing bias
                buffer.normal_(0, 0.2)
    cfg, _ = read_hf_config(config.to_dict())
    ours = build_model(cfg).eval()
    ours.load_state_dict(hf.state_dict(), strict=True)
    ids = torch.randint(0, BASE["vocab_size"], (2, 24))
    with torch.no_grad():
        expected, logits = hf(ids).logits, ours(ids)
        cache = ours.new_cache(2, 24)
        steps = [ours(ids[:, :10], cache)] + [ours(ids[:, t : t + 1], cache) for t in range(10, 24)]
    # Gated DeltaNet runs its delta rule in float32 whatever the weights' dtype, through a
    # triangular solve per chunk: with weights N(0, 0.2) both implementations sit ~1e-6 from the
    # exact rule (tests/families/test_qwen_next.py: ours equals it to 1e-15 in float64), logits ~2e-5 apart
    tol = 1e-4 if cfg.has_linear_attention else 1e-5
    torch.testing.assert_close(logits, expected, rtol=tol, atol=tol)
    torch.testing.assert_close(torch.cat(steps, dim=1), logits, rtol=tol, atol=tol)
    # a window layer's cache holds at most its window
    assert cache.nbytes() == cache.allocated_bytes() == analysis.kv_cache_bytes(cfg, 24, 2, "fp32")


@pytest.mark.parametrize("case", sorted(CASES))
def test_forward_flops_equal_flop_counter_on_transformers_eager(case):
    config = hf_config(case)
    hf = hf_model(config)
    cfg, _ = read_hf_config(config.to_dict())
    # eager attention computes every T×T score (the mask comes after); at T within the window
    # the windowed count is the same, so compare there
    T = min([24] + [cfg.sliding_window] * bool(cfg.sliding_window))
    # no parameter asks for a gradient: FlopCounterMode's module tracker hooks the inputs that
    # do, and fails on transformers 5.25's Qwen3.5 convolution, called with its weight
    hf.requires_grad_(False)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        hf(torch.randint(0, BASE["vocab_size"], (2, T)))
    assert (
        counter.get_total_flops() + uncounted_delta_rule_flops(cfg, T, 2) - unrouted_llama4_flops(cfg, T, 2)
        == analysis.count_flops(cfg, T, 2).forward
    )


def unrouted_llama4_flops(cfg, T, B):
    """What transformers' Llama 4 computes and LLaMA Lab does not count, by hand: its experts run
    on every token (the unchosen ones on inputs scaled by σ(−∞) = 0), E − k experts more per token
    than the k that change the output, each 3 matrices of C × Fe."""
    if cfg.moe_style != "llama4":
        return 0
    unrouted = cfg.n_experts - cfg.experts_per_token
    return 2 * B * T * sum(cfg.moe_layer_flags) * unrouted * 3 * cfg.d_model * cfg.expert_ffn_hidden


def uncounted_delta_rule_flops(cfg, T, B):
    """What LLaMA Lab counts in Gated DeltaNet blocks and FlopCounterMode does not on transformers'
    eager forward, by hand: the two unit-triangular solves per chunk of 64 (c(c−1)/2 multiply-
    adds per right-hand column, dv + dk columns; torch has no FLOP rule for solve_triangular),
    less the K − 1 extra outputs transformers' padded convolution computes and drops."""
    c, n, L = 64, -(-T // 64), sum(cfg.linear_layer_flags)
    solves = (
        2
        * B
        * L
        * cfg.linear_v_heads
        * n
        * c
        * (c - 1)
        // 2
        * (cfg.linear_k_head_dim + cfg.linear_v_head_dim)
    )
    conv_waste = 2 * B * L * cfg.linear_conv_dim * cfg.linear_conv_kernel * (cfg.linear_conv_kernel - 1)
    return solves - conv_waste


def test_the_window_cache_convention_is_w_where_transformers_keeps_w_minus_one():
    config = hf_config("mistral")  # sliding_window 8 on every layer
    hf = hf_model(config)
    cfg, _ = read_hf_config(config.to_dict())
    ids = torch.randint(0, BASE["vocab_size"], (1, 20))
    with torch.no_grad():
        cache = hf(ids, use_cache=True).past_key_values
        ours = build_model(cfg).eval()
        mine = ours.new_cache(1, 20)
        ours(ids, mine)
    assert {layer.keys.shape[2] for layer in cache.layers} == {cfg.sliding_window - 1}
    per_token = analysis.kv_cache_bytes_per_token(cfg, "fp32")
    assert mine.nbytes() == analysis.kv_cache_bytes(cfg, 20, 1, "fp32") == cfg.sliding_window * per_token


def test_window_limits_the_scores_and_the_cache_by_hand():
    cfg = ModelConfig(
        vocab_size=64,
        d_model=32,
        n_layers=4,
        n_heads=2,
        n_kv_heads=1,
        ffn_hidden=64,
        max_seq_len=256,
        sliding_window=16,
        local_layers="every:2",
    )
    T, B, D, H = 100, 3, 16, 2
    scores = analysis.count_flops(cfg, T, B).by_component["attention_scores"]
    # blocks 1 and 3 local: each query meets 16 keys; blocks 0 and 2 meet all 100
    assert scores == 4 * B * H * D * (2 * T * T + 2 * T * 16)
    causal = analysis.count_flops(cfg, T, B).attention_scores_causal
    assert causal == 4 * B * H * D * (2 * T * (T + 1) // 2 + 2 * (16 * 17 // 2 + (T - 16) * 16))
    assert analysis.kv_cache_bytes(cfg, T, B, "bf16") == B * 2 * 1 * D * 2 * (2 * T + 2 * 16)


@pytest.mark.parametrize("case", sorted(CASES))
def test_export_is_read_back_by_transformers_as_the_same_model(case):
    cfg, _ = read_hf_config(hf_config(case).to_dict())
    exported = cfg.to_hf_config()
    back = transformers.AutoConfig.for_model(**json.loads(json.dumps(exported)))
    hf = hf_model(back, "meta")
    assert sum(p.numel() for p in hf.parameters()) == analysis.count_params(cfg).total
    assert read_hf_config(back.to_dict())[0] == cfg


PRESET_FAMILIES = [
    "granite-3.1-8b",
    "granite-3.0-2b",
    "olmo-3-7b",
    "olmo-3-32b",
    "llama-3.2-1b",
    "llama-3.2-3b",
    "mistral-7b",
    "mistral-nemo-12b",
    "mixtral-8x7b",
    "qwen2.5-7b",
    "qwen3-8b",
    "qwen3-30b-a3b",
]


@pytest.mark.parametrize("name", PRESET_FAMILIES)
def test_new_presets_have_their_published_counts_and_transformers_agrees(name):
    cfg = PRESETS[name]
    total = analysis.count_params(cfg).total
    if name in PUBLISHED_PARAMS:
        assert total == PUBLISHED_PARAMS[name]
    else:  # published as the size in its name or a table's rounded figure: "7B", "8.1B"
        published, active, _ = PUBLISHED_ROUNDED[name]
        digits = len(f"{published / 1e9:g}".partition(".")[2])
        assert int(total / 1e9 * 10**digits) / 10**digits == published / 1e9 and active == published
    back = transformers.AutoConfig.for_model(**cfg.to_hf_config())
    assert sum(p.numel() for p in hf_model(back, "meta").parameters()) == total


def test_active_parameters_of_the_moe_presets():
    # Mixtral-8x7B: 2 of 8 experts per token, "12.9B active"; Qwen3-30B-A3B: 8 of 128, "3.3B"
    mixtral, qwen = (analysis.count_params(PRESETS[n]) for n in ("mixtral-8x7b", "qwen3-30b-a3b"))
    assert mixtral.active == mixtral.total - 32 * 6 * 3 * 4096 * 14336 == 12_879_925_248
    assert qwen.active == qwen.total - 48 * 120 * 3 * 2048 * 768 == 3_353_032_704
    dense = analysis.count_params(PRESETS["llama-3-8b"])
    assert dense.active == dense.total


def test_expected_experts_read_per_decode_step_grow_with_batch():
    cfg = PRESETS["mixtral-8x7b"]
    one, many = (analysis.roofline(cfg, "H100 80GB", batch, 1024) for batch in (1, 64))
    per_expert = 3 * 4096 * 14336 * 2  # bf16 bytes
    hit = [8 * (1 - (1 - 2 / 8) ** b) for b in (1, 64)]
    assert hit[0] == pytest.approx(2.0)
    assert many.weight_bytes - one.weight_bytes == pytest.approx(
        32 * per_expert * (hit[1] - hit[0]) + 63 * 4096 * 2, rel=1e-9
    )


@pytest.mark.parametrize("model_type", ["gpt_neox", "gemma", "phimoe", "qwen2_moe"])
def test_other_families_are_refused_by_name(model_type):
    data = {**BASE, "model_type": model_type}
    with pytest.raises(ConfigError, match=f"model_type='{model_type}' is not supported.*qwen3_moe"):
        read_hf_config(data)


def test_a_key_that_could_change_the_model_is_an_error_never_a_note():
    with pytest.raises(ConfigError, match="quantization_config quant_method=None is not modelled"):
        read_hf_config({**BASE, "model_type": "mistral", "quantization_config": {"bits": 4}})
    with pytest.raises(ConfigError, match="hidden_act='gelu'"):
        read_hf_config({**BASE, "model_type": "qwen2", "hidden_act": "gelu"})


@pytest.mark.parametrize("layout", ["mixtral", "qwen3_moe"])
def test_hub_per_expert_checkpoints_load(tmp_path, layout):
    from safetensors.torch import save_file

    from llama_lab.model import load_checkpoint

    cfg, _ = read_hf_config(hf_config(layout if layout == "mixtral" else "qwen3_moe").to_dict())
    model = build_model(cfg, seed=3).eval()
    names = {
        "mixtral": ("block_sparse_moe", "w1", "w3", "w2"),
        "qwen3_moe": ("mlp", "gate_proj", "up_proj", "down_proj"),
    }[layout]
    F_ = cfg.expert_ffn_hidden
    state = {}
    for key, tensor in model.state_dict().items():
        if ".experts." not in key:
            state[key.replace(".mlp.gate.", f".{names[0]}.gate.")] = tensor.clone()
            continue
        block = key.rsplit(".mlp.experts.", 1)[0] + f".{names[0]}.experts"
        for e in range(cfg.n_experts):
            if key.endswith("gate_up_proj"):
                state[f"{block}.{e}.{names[1]}.weight"] = tensor[e, :F_].clone()
                state[f"{block}.{e}.{names[2]}.weight"] = tensor[e, F_:].clone()
            else:
                state[f"{block}.{e}.{names[3]}.weight"] = tensor[e].clone()
    (tmp_path / "config.json").write_text(json.dumps(cfg.to_hf_config()))
    save_file(state, str(tmp_path / "model.safetensors"))
    loaded = load_checkpoint(tmp_path)
    ids = torch.randint(0, cfg.vocab_size, (1, 12))
    with torch.no_grad():
        torch.testing.assert_close(loaded.model(ids), model(ids), rtol=0, atol=0)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["mixtral-8x7b", "qwen3-30b-a3b", "qwen3-8b", "mistral-7b"])
def test_the_live_experiments_run_on_each_familys_small_copy(name):
    from llama_lab import experiments
    from llama_lab.config import live_config

    cfg = live_config(PRESETS[name], 2)
    assert (cfg.n_experts, cfg.qk_norm) == (PRESETS[name].n_experts, PRESETS[name].qk_norm)
    grads = experiments.gradnorms(cfg, 16, 2)
    assert all(x > 0 for x in grads.post.ffn_out_grad_norm + grads.pre.ffn_out_grad_norm)
    live = experiments.live_pass(cfg, 16, 2, LiveSettings(device="cpu"))
    assert abs(live.activation_ratio - 1) < 1e-3  # saved tensors as predicted
    assert experiments.decode_benchmark(cfg, (8,), new_tokens=2, device="cpu").bytes_agree
