"""Closed-form parameters, FLOPs, KV cache, memory and roofline, each checked against an
independent source: the module itself (meta device), published figures, measurements of our
implementation (saved-tensor hooks, the CPU profiler, the KV cache object), or a hand
derivation written out here."""

import json
import math
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.checkpoint import checkpoint

from llama_lab import analysis as A
from llama_lab.config import PRESETS, PUBLISHED_PARAMS, ConfigError, ModelConfig
from llama_lab.model import build_model, rope_cos_sin, sinusoidal_table
from llama_lab.model.positions import rope_inv_freq
from llama_lab.runtime.hardware import DTYPE_BYTES, GPUS, gpu_for_device_name

TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


# ==== parameters ===============================================================================
@pytest.mark.slow
@pytest.mark.parametrize("name", list(PRESETS))
def test_closed_form_equals_meta_module(name):
    cfg = PRESETS[name]
    closed, module = A.count_params(cfg), A.count_params_module(cfg)
    assert closed.detail == module.detail
    assert (closed.total, closed.per_layer, closed.by_component) == (
        module.total,
        module.per_layer,
        module.by_component,
    )
    assert sum(closed.by_component.values()) == closed.total == sum(closed.detail.values())
    if name in PUBLISHED_PARAMS:
        assert closed.total == PUBLISHED_PARAMS[name]


@pytest.mark.slow
@pytest.mark.parametrize("name", list(PRESETS))
def test_tied_embedding_counts_once(name):
    if not PRESETS[name].lm_head:  # a bare encoder (BertModel) has no head to tie
        pytest.skip("no LM head")
    untied = PRESETS[name].replace(tie_embeddings=False)
    tied = untied.replace(tie_embeddings=True)
    counts, module = A.count_params(tied), A.count_params_module(tied)
    assert counts.by_component["lm_head"] == module.by_component["lm_head"] == 0
    assert counts.total == module.total == A.count_params(untied).total - untied.vocab_size * untied.d_model
    assert counts.by_component["embedding"] == untied.vocab_size * untied.d_model


@st.composite
def model_configs(draw):
    n_heads = draw(st.integers(1, 6))
    head_dim = draw(st.integers(1, 8))
    positions = ["sinusoidal", "learned", "none"] + (["rope"] if head_dim % 2 == 0 else [])
    return ModelConfig(
        vocab_size=draw(st.integers(2, 300)),
        d_model=n_heads * head_dim,
        n_layers=draw(st.integers(1, 3)),
        n_heads=n_heads,
        n_kv_heads=draw(st.sampled_from([g for g in range(1, n_heads + 1) if n_heads % g == 0])),
        ffn_hidden=draw(st.integers(1, 64)),
        max_seq_len=draw(st.integers(1, 64)),
        norm_position=draw(st.sampled_from(["pre", "post"])),
        norm_type=draw(st.sampled_from(["rmsnorm", "layernorm"])),
        pos_encoding=draw(st.sampled_from(positions)),
        ffn_type=draw(st.sampled_from(["swiglu", "relu", "gelu"])),
        bias=draw(st.booleans()),
        final_norm=draw(st.booleans()),
        tie_embeddings=draw(st.booleans()),
    )


@settings(max_examples=60, deadline=None)
@given(model_configs())
def test_closed_form_equals_module_for_random_configs(cfg):
    closed, module = A.count_params(cfg), A.count_params_module(cfg)
    assert closed.detail == module.detail
    assert closed.per_layer == module.per_layer
    assert closed.total == sum(p.numel() for p in build_model(cfg, device="meta").parameters())
    assert sum(A.analyze(cfg, 4)["params"]["by_component"].values()) == closed.total


def test_seed_demo_hand_derived():
    # embedding 32000·512; per block: q,o 512² each, k,v 512·128 each (2 KV heads × 64),
    # SwiGLU 3·512·1365, two RMSNorm γ of 512; final norm 512; untied head 32000·512.
    per_layer = 2 * 512 * 512 + 2 * 512 * 128 + 3 * 512 * 1365 + 2 * 512
    assert per_layer == 2_753_024
    total = 2 * 32000 * 512 + 4 * per_layer + 512
    assert total == 43_780_608 == A.count_params(PRESETS["seed-demo"]).total
    mha = A.count_params(PRESETS["seed-demo-mha"]).total
    assert mha == 45_353_472 and mha - total == 4 * 2 * 512 * (512 - 128) == 1_572_864
    assert A.count_params(PRESETS["seed-demo"]).non_embedding == total - 32000 * 512


def test_norm_counts_rmsnorm_vs_layernorm():
    llama = PRESETS["llama-7b"]
    # 2 norms per block + the final one, γ only: (2·32 + 1)·4096
    assert A.count_params(llama).by_component["norms"] == 65 * 4096 == 266_240
    # LayerNorm adds β to every one of them (the seed's "4096 per layer, 131K" misses a norm)
    layernorm = A.count_params(llama.replace(norm_type="layernorm")).by_component["norms"]
    assert layernorm - 266_240 == 266_240
    # the 2017 recipe: 4 blocks × 2 LayerNorms × (γ + β), no final norm
    assert A.count_params(PRESETS["transformer-2017"]).by_component["norms"] == 4 * 2 * 2 * 512


# ==== FLOPs ====================================================================================
def test_llama2_7b_attention_scores_hand_derived():
    cfg, T = PRESETS["llama-2-7b"], 2048
    flops = A.count_flops(cfg, T)
    d, L = 4096, 32
    assert flops.by_component["attention_scores"] == 4 * T**2 * d * L
    assert flops.attention_scores_causal == 2 * T * (T + 1) * d * L
    assert flops.forward == sum(flops.by_component.values())
    assert flops.training_step == 3 * flops.forward
    assert flops.forward_causal == flops.forward - 4 * T**2 * d * L + 2 * T * (T + 1) * d * L
    # the rest is 2 FLOPs per weight per token for every matmul weight
    linear_weights = L * (4 * d * d + 3 * d * 11008) + 32000 * d
    assert flops.forward - flops.by_component["attention_scores"] == 2 * T * linear_weights


def test_calflops_published_llama2_7b_at_128_tokens():
    # calflops README, "Large Language Model" table: llama2-7b, (1,128): fwd FLOPs 1700.06 G
    ours = A.count_flops(PRESETS["llama-2-7b"], 128).forward
    assert abs(ours / 1700.06e9 - 1) < 0.005


def test_six_n_per_token_without_long_context():
    cfg = PRESETS["seed-demo"]
    flops = A.count_flops(cfg, 1)
    six_n = 6 * A.count_params(cfg).non_embedding  # untied: N = non-embedding
    assert abs(six_n / flops.training_per_token - 1) < 1e-3
    # exactly: PaLM's N also holds the norm gains, which take part in no matmul, and PaLM's
    # 12·L·H·Q·T is our 3 × 4·T·H·D·L per token
    norms = A.count_params(cfg).by_component["norms"]
    assert flops.palm_training_per_token - flops.training_per_token == 6 * norms
    long = A.count_flops(cfg, 128)
    assert long.palm_training_per_token - long.training_per_token == 6 * norms


def test_palm_n_counts_a_tied_head():
    cfg = PRESETS["debug"].replace(tie_embeddings=True)
    assert A.palm_params(cfg) == A.count_params(cfg).non_embedding + 256 * 64


def test_decode_flops_hand_derived():
    cfg, S, B = PRESETS["llama-2-70b"], 4096, 4
    d, L, kv = 8192, 80, 8 * 128
    linear_weights = L * (2 * d * d + 2 * d * kv + 3 * d * 28672) + 32000 * d
    flops = A.decode_flops(cfg, S, B)
    assert flops.forward == 2 * B * linear_weights + 4 * B * S * d * L
    assert flops.attention_scores_causal == flops.by_component["attention_scores"]
    assert flops.tokens == B and flops.per_token == flops.forward / B


def test_elementwise_listed_apart_hand_derived():
    cfg, T, B = PRESETS["debug"], 16, 2  # d 64, 2 layers, 4 heads, 2 KV, F 172
    flops = A.count_flops(cfg, T, B)
    e = flops.elementwise
    N = B * T
    assert e["norms"] == 5 * N * 64 * 4  # 2·2 + final RMSNorms, 4/element
    assert e["softmax"] == B * T * T * 4 * 2 * 5  # full T×T scores, 5/element
    assert e["rope"] == N * (4 + 2) * 16 * 2 * 3  # q and k elements, 3/element
    assert e["activation"] == N * 172 * 2 * 5
    assert e["residual"] == 2 * 2 * N * 64
    assert e["bias"] == e["position_add"] == 0
    assert e["total"] == sum(v for k, v in e.items() if k != "total")
    assert flops.forward == sum(flops.by_component.values())  # element-wise not included
    assert any("elementwise" in c for c in flops.conventions)


# ==== KV cache =================================================================================
def test_kv_cache_llama2_70b_published():
    kv = A.kv_cache(PRESETS["llama-2-70b"], 4096, 2, "bf16")
    assert kv.bytes_per_token == 2 * 80 * 8 * 128 * 2 == 327_680
    assert kv.compare == {"mha": 8 * 327_680, "gqa": 327_680, "mqa": 327_680 // 8}
    assert kv.bytes == 327_680 * 4096 * 2
    # int4 packs two per byte and keeps an fp16 scale per token, layer, K/V and KV head
    assert kv.by_dtype["int4"] == kv.by_dtype["fp32"] // 8 + 2 * 80 * 8 * 2 == 84_480


def test_kv_cache_gqa_column_for_an_mha_model():
    kv = A.kv_cache(PRESETS["llama-2-7b"], 1024)
    assert kv.compare_kv_heads == {"mha": 32, "gqa": 4, "mqa": 1}  # n_heads/8
    assert kv.compare["mha"] == 8 * kv.compare["gqa"] == 32 * kv.compare["mqa"]
    assert "n_heads/8" in kv.note
    assert A.gqa_kv_heads(PRESETS["debug"].replace(n_kv_heads=4)) == 2
    assert A.gqa_kv_heads(PRESETS["debug"].replace(n_heads=2, n_kv_heads=2)) == 2  # no GQA exists


def test_kv_cache_matches_the_cache_object(debug_cfg):
    B, T = 3, 20
    model = build_model(debug_cfg)
    cache = model.new_cache(B, T)
    with torch.no_grad():
        model(torch.randint(0, debug_cfg.vocab_size, (B, T)), cache)
    assert cache.nbytes() == A.kv_cache(debug_cfg, T, B, "fp32").bytes


def test_what_fits_on_a_gpu_hand_derived():
    cfg, h100 = PRESETS["llama-3-8b"], GPUS["H100 80GB"]
    free = (
        81_559 * 2**20 - 300 * 10**6
    ) - 8_030_261_248 * 2  # bf16 weights; H100: 81,559 MiB reported less the CUDA context
    per_token = 2 * 32 * 8 * 128 * 2  # 131,072 bytes
    assert A.max_context_that_fits(cfg, h100) == free // per_token
    assert A.max_context_that_fits(cfg, "H100 80GB", batch=4) == free // (4 * per_token)
    assert A.max_batch_that_fits(cfg, h100, 8192) == free // (8192 * per_token)
    assert A.max_context_that_fits(PRESETS["llama-3.1-405b"], "L4") == 0


# ==== activations: estimate vs measurement =====================================================
def _measure_saved_bytes(cfg, B, T, dtype, checkpointing=False, loss="logits", source_len=None):
    """Bytes of distinct non-parameter storages autograd saves in forward + cross-entropy
    (``loss``: "logits", F.cross_entropy on the logits; "chunked", the model's own loss); an
    encoder-decoder's over a source of ``source_len`` tokens (None: T).
    With checkpointing (reentrant, per block) also the recompute of the largest block (blocks
    differ when only some are sparse), whose input is the stored one (detached, same storage),
    as backward does."""
    model = build_model(cfg, dtype=TORCH_DTYPES[dtype])
    parameters = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in parameters:
            # the storage itself is kept (until the count): a saved tensor autograd drops early
            # cannot hand its address to a later one, which would then be taken for the same
            seen.setdefault(storage.data_ptr(), storage)
        return tensor

    gen = torch.Generator().manual_seed(0)
    ids, targets = (torch.randint(0, cfg.vocab_size, (B, T), generator=gen) for _ in range(2))
    body = model.model
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        if loss == "chunked":
            model.loss_on(ids, targets)
            return sum(storage.nbytes() for storage in seen.values())
        if cfg.is_encoder_decoder:  # a source as long as the target, then the target's logits
            logits = model(torch.randint(0, cfg.vocab_size, (B, source_len or T), generator=gen), ids)
            F.cross_entropy(logits.flatten(0, 1), targets.flatten())
            return sum(storage.nbytes() for storage in seen.values())
        if not cfg.lm_head:  # a bare encoder: its last hidden state and the pooler's output
            hidden = model(ids)
            if cfg.pooler:
                model.pooled(hidden)
            return sum(storage.nbytes() for storage in seen.values())
        if not checkpointing:
            logits = model(ids)
        else:
            positions, ropes = torch.arange(T), (None, None)
            x = body.embed_tokens(ids)
            if cfg.embed_scale:
                x = x * torch.tensor(cfg.d_model**0.5, dtype=x.dtype).item()
            if cfg.pos_encoding == "rope":  # (global, windowed) blocks' tables
                ropes = tuple(
                    rope_cos_sin(positions, rope_inv_freq(cfg.rope_dim, theta))
                    for theta in (cfg.rope_theta, cfg.rope_local_theta)
                )
            elif cfg.pos_encoding == "learned":
                x = x + body.embed_positions(positions)
            elif cfg.pos_encoding == "sinusoidal":
                x = x + sinusoidal_table(T, cfg.d_model).to(x)
            inputs = []
            for layer, windowed, rotated in zip(body.layers, cfg.local_layer_flags, cfg.rope_layer_flags):
                inputs.append(x)
                x = checkpoint(layer, x, ropes[windowed] if rotated else None, None, use_reentrant=True)
            logits = model.cap(model.lm_head(body.norm(x) if cfg.final_norm else x))
        F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        stored = sum(storage.nbytes() for storage in seen.values())
        recomputed = 0
        for i, (layer, block_input) in enumerate(zip(body.layers, inputs if checkpointing else [])):
            before = dict(seen)
            rope = ropes[cfg.local_layer_flags[i]] if cfg.rope_layer_flags[i] else None
            layer(block_input.detach().requires_grad_(), rope, None)
            recomputed = max(recomputed, sum(storage.nbytes() for storage in seen.values()) - stored)
            seen.clear()
            seen.update(before)
    return stored + recomputed


# Gemma 2's block: sandwich (1 + γ) norms, GeGLU, √d embeddings, soft-capped scores (plain
# matmuls) and logits
GEMMA2 = {
    "norm_position": "sandwich",
    "norm_plus_one": True,
    "ffn_type": "geglu",
    "embed_scale": True,
    "attn_softcap": 50.0,
    "logit_softcap": 30.0,
}
ACTIVATION_CASES = [
    {},
    {"n_kv_heads": 4},
    {"n_kv_heads": 1},
    {"norm_type": "layernorm"},
    {"norm_position": "post"},
    {"ffn_type": "relu", "bias": True},
    {"ffn_type": "gelu"},
    {"pos_encoding": "learned", "tie_embeddings": True},
    {"pos_encoding": "none", "final_norm": False},
    {
        "norm_position": "post",
        "norm_type": "layernorm",
        "final_norm": False,
        "pos_encoding": "sinusoidal",
        "ffn_type": "relu",
        "bias": True,
    },  # the 2017 recipe
    # today's families: experts (renormalised or not, on some blocks), QK-norm with an explicit
    # head_dim, a window shorter than the sequence on one block, Qwen2's q/k/v-only biases
    {"n_experts": 4, "experts_per_token": 2},
    {
        "n_experts": 8,
        "experts_per_token": 1,
        "expert_ffn_hidden": 40,
        "moe_renormalize": False,
        "moe_layers": "1",
    },
    {"qk_norm": True, "head_dim": 24},
    {"sliding_window": 8, "local_layers": "0"},
    {"qkv_bias": True, "o_bias": False},
    # gpt-oss: attention sinks (plain matmuls) on a window shorter than T, its expert block
    {"attention_sinks": True, "sliding_window": 8, "local_layers": "0", "qkv_bias": True},
    {"n_experts": 4, "experts_per_token": 2, "moe_style": "gpt_oss", "mlp_bias": True},
    # MLA (q LoRA, interleaved RoPE) with DeepSeekMoE: a dense block first, sigmoid routing
    {
        "n_kv_heads": 4,
        "head_dim": 24,
        "kv_lora_rank": 16,
        "q_lora_rank": 12,
        "qk_rope_head_dim": 8,
        "v_head_dim": 12,
        "rope_interleave": True,
        "n_experts": 4,
        "experts_per_token": 2,
        "expert_ffn_hidden": 16,
        "n_shared_experts": 1,
        "moe_layers": "from:1",
        "moe_scoring": "sigmoid",
    },
    {"n_kv_heads": 4, "head_dim": 24, "kv_lora_rank": 16, "qk_rope_head_dim": 8, "v_head_dim": 20},
    # Gemma 3: sandwich (1 + γ) norms, GeGLU, √d embeddings, QK-norm, its own score scale, a
    # window on one block with a RoPE base of its own; Gemma 2: soft-capped scores and logits
    {
        "norm_position": "sandwich",
        "norm_plus_one": True,
        "ffn_type": "geglu",
        "embed_scale": True,
        "tie_embeddings": True,
        "qk_norm": True,
        "query_pre_attn_scalar": 24,
        "sliding_window": 8,
        "local_layers": "0",
        "rope_theta": 1e6,
        "rope_local_theta": 1e4,
    },
    {**GEMMA2, "sliding_window": 8, "local_layers": "0"},
    # OLMo 2: output norms only, QK-norm over the projections; SmolLM3: a NoPE block; Phi-3:
    # partial rotary and fused checkpoint keys; GLM-4.5: partial rotary, per-head QK-norm, biases
    {"norm_position": "output", "qk_norm": True, "qk_norm_scope": "projection"},
    {"nope_layers": "1"},
    {"partial_rotary_factor": 0.75, "fused_keys": True, "head_dim": 16},
    {"partial_rotary_factor": 0.5, "qk_norm": True, "qkv_bias": True, "o_bias": False},
    # Qwen3-Next / Qwen3.5: Gated DeltaNet blocks (4 value heads on 2 q/k heads; grouped
    # projections with experts and a gated shared expert) beside gated attention with QK-norm
    {
        "linear_layers": "0",
        "linear_k_heads": 2,
        "linear_v_heads": 4,
        "linear_k_head_dim": 8,
        "linear_v_head_dim": 12,
        "qk_norm": True,
        "norm_plus_one": True,
        "attn_output_gate": True,
    },
    {
        "linear_layers": "0,1",
        "linear_k_heads": 1,
        "linear_v_heads": 3,
        "linear_k_head_dim": 4,
        "linear_v_head_dim": 6,
        "linear_grouped_proj": True,
        "n_experts": 4,
        "experts_per_token": 2,
        "n_shared_experts": 1,
        "shared_expert_gate": True,
    },
    # Llama 4: a chunked block (chunks of 8 < T) with QK-norm after its interleaved RoPE, a NoPE
    # block with the attention temperature (floor 4: it grows within T), its expert block there
    {
        "nope_layers": "1",
        "sliding_window": 8,
        "local_layers": "0",
        "chunked_attention": True,
        "rope_interleave": True,
        "qk_norm": True,
        "qk_norm_scope": "rope_l2",
        "attn_temperature_layers": "1",
        "attn_floor_scale": 4,
        "n_experts": 4,
        "experts_per_token": 2,
        "n_shared_experts": 1,
        "moe_style": "llama4",
        "moe_scoring": "sigmoid",
        "moe_renormalize": False,
        "moe_layers": "1",
    },
    # a sparse pattern on a window wider than T: its mask is explicit (kept) all the same
    {"sliding_window": 32, "local_layers": "0", "global_tokens": 3, "dilation": 2},
]


@pytest.mark.slow
@pytest.mark.parametrize("checkpointing", [False, True], ids=["plain", "checkpointed"])
@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("extra", ACTIVATION_CASES, ids=lambda e: ",".join(e) or "llama")
def test_activation_bytes_match_saved_tensor_hooks(debug_cfg, extra, dtype, checkpointing):
    # Tolerance 1%: exact for RMSNorm models (Gated DeltaNet blocks too); the CPU LayerNorm
    # kernel keeps mean/rstd in the input dtype where the estimate assumes float32 (as on CUDA).
    cfg, B, T = debug_cfg.replace(**extra), 2, 24
    tolerance, exact = 0.01, cfg.norm_type == "rmsnorm"
    measured = _measure_saved_bytes(cfg, B, T, dtype, checkpointing)
    estimated = A.activation_bytes(cfg, T, B, dtype, checkpointing, loss="logits")
    assert abs(estimated / measured - 1) < tolerance, (measured, estimated)
    if exact:
        assert estimated == measured
    if not checkpointing:  # the model's own loss: the head's two gradients instead
        measured = _measure_saved_bytes(cfg, B, T, dtype, loss="chunked")
        estimated = A.activation_bytes(cfg, T, B, dtype)
        assert abs(estimated / measured - 1) < tolerance, (measured, estimated)
        if exact:
            assert estimated == measured


@pytest.mark.slow
@pytest.mark.parametrize("T", [5, 64, 70, 130])
def test_gated_deltanet_activations_are_exact_over_partial_and_whole_chunks(debug_cfg, T):
    """One partial chunk of 64, one whole chunk, a whole and a partial one, three chunks."""
    linear = next(extra for extra in ACTIVATION_CASES if "linear_layers" in extra)
    cfg = debug_cfg.replace(**linear, max_seq_len=256)
    assert A.activation_bytes(cfg, T, 2, "bf16", loss="logits") == _measure_saved_bytes(cfg, 2, T, "bf16")


# the 2017 encoder-decoder (3 encoder, 2 decoder blocks; MQA with a narrow FFN, learned
# positions with GELU), BERT's encoder (GQA, no pooler) and a bidirectional LLaMA block, tiny
MARIAN = PRESETS["transformer-2017-base"].replace(
    vocab_size=97,
    d_model=32,
    n_heads=4,
    n_kv_heads=4,
    ffn_hidden=48,
    n_layers=2,
    encoder_layers=3,
    max_seq_len=40,
)
BERT = PRESETS["bert-base-uncased"].replace(
    vocab_size=97, d_model=32, n_heads=4, n_kv_heads=4, ffn_hidden=48, n_layers=2, max_seq_len=40
)
ENCODER_CASES = {
    "marian": MARIAN,
    "marian-mqa": MARIAN.replace(vocab_size=16, n_kv_heads=1, ffn_hidden=16),
    "marian-learned-gelu": MARIAN.replace(pos_encoding="learned", ffn_type="gelu", n_kv_heads=2),
    "bert": BERT,
    "bert-gqa": BERT.replace(n_kv_heads=2, pooler=False, type_vocab_size=0),
    # a bidirectional encoder of today's block (RMSNorm, RoPE, SwiGLU, MQA) with a pooler
    "bidirectional-llama": PRESETS["debug"].replace(causal=False, lm_head=False, pooler=True, n_kv_heads=1),
}


def _layer_norms(cfg):
    """LayerNorms in the model: the encoder's two a block, the decoder's three (or a decoder-only
    model's two), the embedding's and the final one."""
    if cfg.norm_type != "layernorm":
        return 0  # RMSNorm keeps a float32 rstd on the CPU as well
    per_block = 3 if cfg.is_encoder_decoder else 2
    return 2 * cfg.encoder_layers + per_block * cfg.n_layers + cfg.embed_norm + cfg.final_norm


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("name", list(ENCODER_CASES))
def test_encoder_activation_bytes_match_saved_tensor_hooks(name, dtype):
    """Exact: the estimate less what the CPU LayerNorm kernel saves below the estimate's float32
    mean and rstd (it keeps them in the input dtype, as the decoder's test allows for)."""
    cfg, B, T = ENCODER_CASES[name], 2, 11
    cpu_stats = _layer_norms(cfg) * 2 * B * T * (4 - DTYPE_BYTES[dtype])
    measured = _measure_saved_bytes(cfg, B, T, dtype)
    assert A.activation_bytes(cfg, T, B, dtype, loss="logits") - cpu_stats == measured
    # an encoder-decoder's own loss is the one on the logits; a bare encoder has none
    assert A.activation_bytes(cfg, T, B, dtype) == A.activation_bytes(cfg, T, B, dtype, loss="logits")


def test_encoder_activations_refuse_checkpointing_and_tensor_parallelism():
    for cfg in (MARIAN, BERT):
        for kwargs in ({"checkpointing": True}, {"tp": 2}):
            with pytest.raises(
                A.AnalysisError, match="without activation checkpointing or tensor parallelism"
            ):
                A.activation_estimate(cfg, 8, 1, **kwargs)


def _encoder_peak_bytes(cfg, B, T, dtype, S=None):
    """An encoder-decoder's prefill peak: the encoder's forward over the source (S tokens, None:
    T), or
    the decoder's over the target with both caches made beforehand (counted under kv_cache);
    a bare encoder's forward and its pooler."""
    from profiling import profiled_peak_bytes

    torch.manual_seed(0)
    model = build_model(cfg, dtype=TORCH_DTYPES[dtype]).eval()
    gen = torch.Generator().manual_seed(0)
    src, tgt = (torch.randint(0, cfg.vocab_size, (B, n), generator=gen) for n in (S or T, T))
    with torch.no_grad():
        if not cfg.is_encoder_decoder:
            return profiled_peak_bytes(lambda: model.pooled(model(src)) if cfg.pooler else model(src))
        encoder = profiled_peak_bytes(lambda: model.encode(src))
        cache = model.new_cache(B, T)
        cache.cross_attention = model.source_kv(model.encode(src))
        return max(encoder, profiled_peak_bytes(lambda: model(src, tgt, cache)))


SOURCE_CASES = [("marian-mqa", 7, 13), ("marian-learned-gelu", 13, 5)]  # (case, T, S)
_COLD_ENCODER_PEAK = """
import sys, torch
sys.path[:0] = [{tests!r}, {helpers!r}]
torch.set_num_threads(2)
from test_analysis import ENCODER_CASES, _encoder_peak_bytes
print(_encoder_peak_bytes(ENCODER_CASES[{name!r}], 2, {T}, {dtype!r}, {S}))
"""


def _cold_encoder_peak(name, T, dtype, S=None):
    """``_encoder_peak_bytes`` in a fresh interpreter of its own: what the profiler sees of these
    tiny forwards shifts by a few KiB with what the process ran before (4,268 bytes in the whole
    suite), so each case is measured cold, as it was when the counts were held to it."""
    from pathlib import Path

    here = Path(__file__).resolve()
    code = _COLD_ENCODER_PEAK.format(
        tests=str(here.parent), helpers=str(here.parents[2] / "helpers"), name=name, T=T, dtype=dtype, S=S
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return int(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("name", list(ENCODER_CASES))
def test_encoder_inference_activations_match_profiler_peak(name, dtype):
    """marian: the head (logits + final_logits_bias at every target position) is the peak;
    marian-mqa: the decoder's cross-attention, above the encoder's; the rest: a block's."""
    cfg = ENCODER_CASES[name]
    measured = _cold_encoder_peak(name, 11, dtype)
    assert A.inference_activation_bytes(cfg, 11, 2, dtype, last_only=True) == measured


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("name, T, S", SOURCE_CASES, ids=["longer-source", "shorter-source"])
def test_an_encoder_decoder_reads_a_source_of_its_own_length(name, T, S, dtype):
    cfg, B = ENCODER_CASES[name], 2
    # the CPU LayerNorm's mean and rstd in the input dtype: the encoder's over S rows, the decoder's over T
    encoder_norms, decoder_norms = 2 * cfg.encoder_layers, 3 * cfg.n_layers
    cpu_stats = 2 * B * (encoder_norms * S + decoder_norms * T) * (4 - DTYPE_BYTES[dtype])
    measured = _measure_saved_bytes(cfg, B, T, dtype, source_len=S)
    assert A.activation_bytes(cfg, T, B, dtype, loss="logits", source_len=S) - cpu_stats == measured
    peak = A.inference_activation_bytes(cfg, T, B, dtype, source_len=S)
    assert peak == _cold_encoder_peak(name, T, dtype, S)


def test_only_an_encoder_decoder_takes_a_source_length():
    with pytest.raises(A.AnalysisError, match="only an encoder-decoder reads a source"):
        A.activation_bytes(BERT, 8, 1, source_len=8)


_FRESH_PEAK = """
import json, sys, torch
sys.path[:0] = [{tests!r}, {helpers!r}]
torch.set_num_threads(2)
from llama_lab.config import ModelConfig
from test_analysis import _profiler_peak_bytes
print(_profiler_peak_bytes(ModelConfig.from_dict(json.loads({cfg!r})), {B}, {T}, {dtype!r}))
"""


def _fresh_peak_bytes(cfg, B, T, dtype):
    """``_profiler_peak_bytes`` in a fresh interpreter (see ``fresh_profiler_peaks``: what the
    profiler sees shifts with the state other tests leave in the process)."""
    from pathlib import Path

    here = Path(__file__).resolve()
    code = _FRESH_PEAK.format(
        tests=str(here.parent),
        helpers=str(here.parents[2] / "helpers"),
        cfg=json.dumps(cfg.to_dict()),
        B=B,
        T=T,
        dtype=dtype,
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return int(out.stdout.strip().splitlines()[-1])


def test_learned_positions_leave_no_ids_at_the_peak(debug_cfg):
    cfg = debug_cfg.replace(pos_encoding="learned", norm_position="post", ffn_type="relu", bias=True)
    assert A.inference_activation_bytes(cfg, 11, 2, "fp32") == _fresh_peak_bytes(cfg, 2, 11, "fp32")


def test_checkpointing_saves_memory_at_scale():
    cfg = PRESETS["llama-2-7b"]
    plain = A.activation_estimate(cfg, 4096, 1, "bf16")
    ckpt = A.activation_estimate(cfg, 4096, 1, "bf16", checkpointing=True)
    block_input = 4096 * 4096 * 2
    assert ckpt.components["block_inputs"] == 32 * block_input
    # one block recomputed at a time, its first saved tensor the stored input itself
    assert ckpt.components["recomputed_block"] == plain.per_layer - block_input
    rest = {k: v for k, v in plain.components.items() if k != "blocks"}
    assert ckpt.total_bytes == sum(rest.values()) + 32 * block_input + plain.per_layer - block_input
    assert ckpt.total_bytes < plain.total_bytes / 9  # 17.7 GB → 1.9 GB


def _profiler_peak_bytes(cfg, B, T, dtype, last_only=False):
    """Peak of live CPU allocations during a no-grad forward, from the profiler's events (the
    weights seeded: a mixture's routing, and so its peak, must not depend on the tests before)."""
    from profiling import profiled_peak_bytes

    torch.manual_seed(0)
    model = build_model(cfg, dtype=TORCH_DTYPES[dtype]).eval()
    ids = torch.randint(0, cfg.vocab_size, (B, T), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        return profiled_peak_bytes(lambda: model(ids, last_only=last_only))


PEAK_EXTRAS = {
    "llama": {},
    "big-vocab": {"vocab_size": 2048},
    "mha": {"n_kv_heads": 4},
    "post-relu": {"norm_position": "post", "ffn_type": "relu", "bias": True},
    "narrow-ffn": {"ffn_hidden": 16, "n_kv_heads": 1},
    "gemma2": GEMMA2,
}
_FRESH_PEAKS = """
import json, sys, torch
sys.path[:0] = [{tests!r}, {helpers!r}]
torch.set_num_threads(2)
from llama_lab.config import PRESETS
from test_analysis import PEAK_EXTRAS, _profiler_peak_bytes
peaks = {{}}
for name, extra in PEAK_EXTRAS.items():
    for dtype in ("fp32", "bf16"):
        for last_only in (False, True):
            cfg = PRESETS["debug"].replace(**extra)
            peaks[f"{{name}}-{{dtype}}-{{last_only}}"] = _profiler_peak_bytes(cfg, 2, 32, dtype, last_only)
print(json.dumps(peaks))
"""


@pytest.fixture(scope="module")
def fresh_profiler_peaks():
    """Every case's peak, measured in one fresh interpreter: what the profiler sees of a
    forward's allocations shifts with process-wide state other test modules set (importing
    transformers lowers some cases by 32 KiB), so the measurement does not share their process."""
    from pathlib import Path

    here = Path(__file__).resolve()
    tests, helpers = str(here.parent), str(here.parents[2] / "helpers")
    out = subprocess.run(
        [sys.executable, "-c", _FRESH_PEAKS.format(tests=tests, helpers=helpers)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("extra", list(PEAK_EXTRAS))
@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("last_only", [False, True], ids=["all-logits", "last-logits"])
def test_inference_activations_match_profiler_peak(fresh_profiler_peaks, debug_cfg, extra, dtype, last_only):
    cfg = debug_cfg.replace(**PEAK_EXTRAS[extra])
    measured = fresh_profiler_peaks[f"{extra}-{dtype}-{last_only}"]
    estimated = A.inference_activation_bytes(cfg, 32, 2, dtype, last_only=last_only)
    assert abs(estimated / measured - 1) < 0.05, (measured, estimated)


# ==== memory ===================================================================================
def _state_bytes(estimate):
    return estimate.per_gpu_bytes - estimate.per_gpu_components["activations"]


def test_zero_sharding_hand_derived_7b_over_8_gpus():
    cfg, P = PRESETS["llama-2-7b"], 6_738_415_616
    per_gpu = {
        s: _state_bytes(A.training_memory(cfg, 1024, 1, "bf16", sharding=s, n_gpus=8)) for s in A.SHARDINGS
    }
    # mixed precision AdamW: bf16 weights 2P + bf16 grads 2P + fp32 master 4P + m, v 8P = 16P
    assert per_gpu["none"] == 16 * P
    assert per_gpu["zero1"] == 2 * P + 2 * P + 12 * P // 8  # 5.5P
    assert per_gpu["zero2"] == 2 * P + 14 * P // 8  # 3.75P
    assert per_gpu["zero3"] == per_gpu["fsdp"] == 16 * P // 8  # 2P
    estimate = A.training_memory(cfg, 1024, 1, "bf16", sharding="zero3", n_gpus=8)
    assert estimate.total_bytes == 16 * P + estimate.components["activations"]


def test_zero_paper_figure_1():
    # Rajbhandari et al. 2020, Fig. 1: Ψ = 7.5B, N_d = 64, K = 12: 120 GB, 31.4 GB, 16.6 GB, 1.9 GB
    cfg = PRESETS["llama-2-7b"]
    P = A.count_params(cfg).total
    psi = 7.5e9
    expected = {"none": 120, "zero1": 31.4, "zero2": 16.6, "zero3": 1.9}
    for sharding, gigabytes in expected.items():
        states = _state_bytes(A.training_memory(cfg, 8, 1, "fp16", sharding=sharding, n_gpus=64))
        assert round(states / P * psi / 1e9, 1) == gigabytes


def test_training_memory_precisions():
    cfg = PRESETS["debug"]
    P = A.count_params(cfg).total
    fp32 = A.training_memory(cfg, 8, 1, "fp32")
    assert fp32.components["master_weights"] == 0 and _state_bytes(fp32) == 16 * P
    pure = A.training_memory(cfg, 8, 1, "bf16", mixed_precision=False)
    assert _state_bytes(pure) == (2 + 2 + 4) * P
    ckpt = A.training_memory(cfg, 8, 1, "bf16", activation_checkpointing=True)
    assert ckpt.components["activations"] == A.activation_bytes(cfg, 8, 1, "bf16", True)
    with pytest.raises(A.AnalysisError, match="sharding"):
        A.training_memory(cfg, 8, 1, sharding="zero4")
    with pytest.raises(ConfigError, match="dtype"):
        A.training_memory(cfg, 8, 1, "int4")


def test_inference_memory_components():
    cfg = PRESETS["llama-2-70b"]
    memory = A.inference_memory(cfg, 4096, 2, "bf16")
    assert memory.components["weights"] == 68_976_648_192 * 2
    assert memory.components["kv_cache"] == 327_680 * 4096 * 2
    # the SwiGLU phase is the peak: block input, residual, norm output (3·C) and the fused
    # gate/up output (2·F), silu(gate) and the product (2·F) per token in bf16, + float32
    # cos/sin (T, D) (RoPE needs no position ids: its tables are sliced)
    N = 2 * 4096
    assert memory.components["activations"] == N * (3 * 8192 + 4 * 28672) * 2 + 2 * 4096 * 128 * 4
    # a small model with a big vocabulary peaks at the logits instead
    small_cfg = PRESETS["debug"].replace(vocab_size=32000)
    assert A.inference_activation_bytes(small_cfg, 64, 2, "bf16") == 2 * 64 * (64 + 32000) * 2
    # ... unless only the last position's logits are computed, as generate's prefill does
    # (serving memory counts that): hidden states N·C + B·V logits, below the block's peak
    small = A.inference_memory(small_cfg, 64, 2, "bf16")
    head = (2 * 64 * 64 + 2 * 32000) * 2
    assert (
        small.components["activations"]
        == A.inference_activation_bytes(small_cfg, 64, 2, "bf16", last_only=True)
        > head
    )
    assert memory.total_bytes == sum(memory.components.values())


# ==== roofline =================================================================================
def test_decode_at_batch_1_is_memory_bound():
    cfg, h100 = PRESETS["llama-2-7b"], GPUS["H100 80GB"]
    r = A.roofline(cfg, h100, batch=1, context_len=1, dtype="bf16")
    assert r.bound == "memory"
    # every matmul weight read once (the embedding table only for one row), 2 bytes each
    weights = (6_738_415_616 - 32000 * 4096 + 4096) * 2
    assert r.weight_bytes == weights
    assert math.isclose(r.time_per_token_s, weights / 3.35e12, rel_tol=0.01)  # ≈ 3.9 ms
    # 2 FLOPs per 2-byte weight: intensity ≈ 1 FLOP/byte, far below the ridge (≈ 295)
    assert math.isclose(r.arithmetic_intensity, 1.0, rel_tol=0.01)
    assert math.isclose(r.ridge_point, 1979e12 / 2 / 3.35e12)  # the data sheet's sparse BF16, halved


def test_decode_with_a_long_cache_hand_derived():
    # LLaMA-2-70B, B=8 sequences at context 4096, bf16 on an H100 (3.35 TB/s, 989.4 TFLOP/s)
    r = A.roofline(PRESETS["llama-2-70b"], "H100 80GB", batch=8, context_len=4096)
    matmul_params = 80 * (2 * 8192 * 8192 + 2 * 8192 * 1024 + 3 * 8192 * 28672) + 32000 * 8192
    assert r.flops == 2 * 8 * matmul_params + 4 * 8 * 4096 * 8192 * 80  # projections + QK, AV
    weights = (68_976_648_192 - 32000 * 8192 + 8 * 8192) * 2  # 8 embedding rows read
    assert r.weight_bytes == weights
    assert r.kv_cache_bytes == 8 * 4096 * 327_680 + 8 * 327_680  # read all, write one
    assert r.bound == "memory"
    assert math.isclose(r.time_per_step_s, (weights + 8 * 4097 * 327_680) / 3.35e12)  # ≈ 44 ms
    assert math.isclose(r.tokens_per_s, 8 / r.time_per_step_s)


def test_long_prefill_is_compute_bound():
    r = A.roofline(PRESETS["llama-2-7b"], "A100 80GB", batch=1, context_len=4096, phase="prefill")
    assert r.bound == "compute" and r.arithmetic_intensity > r.ridge_point
    full = A.count_flops(PRESETS["llama-2-7b"], 4096)
    # generate's prefill: lm_head on the last position only, 2·C·V instead of 2·T·C·V
    assert r.flops == full.forward_causal - full.by_component["lm_head"] + 2 * 4096 * 32000
    assert math.isclose(r.time_per_step_s, r.flops / 312e12)


def test_roofline_table_shows_why_gqa_exists():
    table = A.roofline_table(PRESETS["llama-2-7b"], "H100 80GB", batches=(1, 64), context_lens=(512, 16384))
    assert set(table["attention"]) == {"MHA", "GQA", "MQA"} and len(table) == 12
    at = table.set_index(["attention", "batch", "context_len"])
    for kind in ("GQA", "MQA"):  # fewer KV heads: more FLOPs per byte, faster per token
        assert (
            at.loc[(kind, 64, 16384), "arithmetic_intensity"]
            > at.loc[("MHA", 64, 16384), "arithmetic_intensity"]
        )
        assert (
            at.loc[(kind, 64, 16384), "time_per_token_ms"] < at.loc[("MHA", 64, 16384), "time_per_token_ms"]
        )
    # 64 × 16K tokens of MHA cache is 512 GiB; MQA's 16 GiB fits an 80 GB H100 with the weights
    assert not at.loc[("MHA", 64, 16384), "fits"] and at.loc[("MQA", 64, 16384), "fits"]
    assert at.loc[("MHA", 64, 16384), "kv_cache_bytes"] == 32 * at.loc[("MQA", 64, 16384), "kv_cache_bytes"]


# ==== analyze (SPEC) ===========================================================================
def test_analyze_has_spec_keys_and_sums(debug_cfg):
    result = A.analyze(PRESETS["llama-2-70b"], 2048, 2, "bf16")
    assert set(result["params"]["by_component"]) == {"embedding", "attention", "ffn", "norms", "lm_head"}
    assert set(result["flops"]["by_component"]) == {"attention_proj", "attention_scores", "ffn", "lm_head"}
    assert set(result["kv_cache"]["compare"]) == {"mha", "gqa", "mqa"}
    for key in ("total", "by_component"):
        assert key in result["params"]
    for key in ("forward", "by_component", "training_step"):
        assert key in result["flops"]
    for key in ("bytes_per_token", "bytes", "compare"):
        assert key in result["kv_cache"]
    assert sum(result["params"]["by_component"].values()) == result["params"]["total"]
    assert sum(result["flops"]["by_component"].values()) == result["flops"]["forward"]
    assert result["flops"]["training_step"] == 3 * result["flops"]["forward"]
    assert result["kv_cache"]["bytes_per_token"] == 327_680
    assert result["kv_cache"]["bytes"] == 327_680 * 2048 * 2
    assert all(isinstance(v, int) for v in result["kv_cache"]["compare"].values())
    assert json.loads(json.dumps(result)) == result  # plain JSON types only


def test_analyze_learned_positions_under_embedding_and_tied_head():
    cfg = PRESETS["debug"].replace(pos_encoding="learned", tie_embeddings=True)
    result = A.analyze(cfg, 32)
    parts = result["params"]["by_component"]
    assert parts["embedding"] == 256 * 64 + 64 * 64 and parts["lm_head"] == 0
    assert sum(parts.values()) == result["params"]["total"]
    assert any("positional" in note for note in result["notes"])


def test_analyze_refuses_bad_arguments(debug_cfg):
    with pytest.raises(ConfigError, match="dtype='fp64'"):
        A.analyze(debug_cfg, 16, dtype="fp64")
    with pytest.raises(ConfigError, match="seq_len=0"):
        A.analyze(debug_cfg, 0)
    with pytest.raises(ConfigError, match="batch"):
        A.analyze(debug_cfg, 16, batch=True)
    with pytest.raises(ConfigError, match="unknown GPU"):
        A.max_context_that_fits(debug_cfg, "TPU v5")


def test_format_analysis_is_readable():
    text = A.format_analysis(A.analyze(PRESETS["seed-demo"], 128))
    for needle in ("Parameters", "43,780,608", "FLOPs", "KV cache", "MHA", "GQA", "MQA", "Memory"):
        assert needle in text


def test_frames_and_dicts_are_tabular():
    cfg = PRESETS["seed-demo"]
    assert A.count_params(cfg).to_frame()["params"].sum() == 43_780_608
    flops = A.count_flops(cfg, 64)
    frame = flops.to_frame()
    assert frame[frame["in_forward"]]["flops"].sum() == flops.forward
    assert list(A.kv_cache(cfg, 64).to_frame()["attention"]) == ["MHA", "GQA", "MQA"]
    for result in (
        flops,
        A.training_memory(cfg, 64, 1),
        A.roofline(cfg, "L4", 1, 64),
        A.activation_estimate(cfg, 64, 1),
    ):
        json.dumps(result.to_dict())


# ==== hardware =================================================================================
def test_hardware_tables():
    assert DTYPE_BYTES == {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1, "int4": 0.5}
    assert set(GPUS) == {
        "H100 80GB",
        "H100 96GB HBM2e",
        "H100 PCIe 80GB",
        "H200 141GB",
        "A100 40GB",
        "A100 80GB",
        "L4",
        "L40S",
        "RTX 4090",
        "RTX 3090",
        "B200",
        "GB200",
        "MI300X",
    }
    # torchtitan's Grand Teton H100: 96 GiB of HBM2e keeping the share the 80 GB H100's keep
    assert GPUS["H100 96GB HBM2e"].memory_bytes == round(96 * 1024 * 81559 / 81920) * 2**20
    assert GPUS["H100 80GB"].peak_bf16_flops * 2 == pytest.approx(1979e12, rel=1e-3)  # dense
    assert all(g.source and g.memory_bytes > 0 for g in GPUS.values())
    assert gpu_for_device_name("NVIDIA H100 80GB HBM3").name == "H100 80GB"
    assert gpu_for_device_name("NVIDIA H200").name == "H200 141GB"
    assert gpu_for_device_name("NVIDIA A100-SXM4-40GB").name == "A100 40GB"
    assert gpu_for_device_name("NVIDIA A100-SXM4-80GB").name == "A100 80GB"
    assert gpu_for_device_name("NVIDIA L4").name == "L4"
    assert gpu_for_device_name("NVIDIA L40S").name == "L40S"
    assert gpu_for_device_name("NVIDIA GeForce RTX 4090").name == "RTX 4090"
    assert gpu_for_device_name("NVIDIA GeForce RTX 3090").name == "RTX 3090"
    assert gpu_for_device_name("NVIDIA H100 PCIe").name == "H100 PCIe 80GB"
    assert gpu_for_device_name("NVIDIA H100 NVL") is None


@pytest.mark.slow
def test_importing_analysis_does_not_import_streamlit():
    code = (
        "import sys, llama_lab.analysis, llama_lab.analysis.cross_check, llama_lab.runtime.hardware; "
        "sys.exit(1 if 'streamlit' in sys.modules else 0)"
    )
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    assert subprocess.run([sys.executable, "-c", code], cwd=root).returncode == 0


@pytest.mark.parametrize("T", [32, 64])
@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_inference_activations_with_attention_sinks_match_the_profiler(debug_cfg, dtype, T):
    """gpt-oss's sinks run as plain matmuls: the scores, their concatenation with the sinks and
    the softmax ((T + 1) per head each) and the (T, T) mask are the peak at T = 64."""
    cfg = debug_cfg.replace(attention_sinks=True, vocab_size=32)
    assert A.inference_activation_bytes(cfg, T, 2, dtype) == _profiler_peak_bytes(cfg, 2, T, dtype)


@pytest.mark.parametrize("moe_style", ["standard", "gpt_oss"])
@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_inference_activations_of_a_sparse_model_follow_the_expected_expert_load(debug_cfg, dtype, moe_style):
    """A prefill's peak with experts depends on how many tokens the busiest expert gets, which
    the routing decides; the estimate takes each expert's expected share k/E. On 64 tokens of
    a random model the busiest of 4 experts takes up to ~1.5× its share: within 25 %."""
    gpt_oss = moe_style == "gpt_oss"
    cfg = debug_cfg.replace(n_experts=4, experts_per_token=2, moe_style=moe_style, mlp_bias=gpt_oss)
    measured = _profiler_peak_bytes(cfg, 2, 32, dtype)
    estimated = A.inference_activation_bytes(cfg, 32, 2, dtype)
    assert abs(estimated / measured - 1) < 0.25, (measured, estimated)
