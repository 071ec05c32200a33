"""Scaled RoPE held to transformers: logits past the original context (a tiny config whose
original_max_position_embeddings is 32, sequences of 96) equal transformers' module, fp32, eager,
for every rope_type and the families whose quirks place it (Gemma 3's and Olmo 3's full-attention
layers only, DeepSeek's MLA score mscale², gpt-oss's default YaRN, Phi-3's LongRoPE); the same
config without the scaling differs, so the check is not vacuous; cached decoding equals
transformers' cached decoding (LongRoPE switches to its long factors for the new tokens only)."""

import warnings

import pytest
import torch
from hf_helpers import published, theirs
from test_families import BASE, CASES, hf_model

from llama_lab.config import PRESETS, ModelConfig
from llama_lab.config.model_config import read_hf_config
from llama_lab.model import build_model

transformers = pytest.importorskip("transformers")
warnings.simplefilter("ignore")

ORIGINAL, T, LONG = 32, 96, 128  # the original context, a sequence past it, max_position_embeddings
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": ORIGINAL}
LONGROPE = {  # Phi-3's partial RoPE rotates 12 of 16 dimensions: 6 factors each
    "rope_type": "longrope",
    "short_factor": [1.0, 1.1, 1.3, 1.6, 2.0, 2.5],
    "long_factor": [1.0, 1.5, 2.5, 4.0, 6.0, 9.0],
}


def _case(case: str, **rope) -> dict:
    return {**CASES[case], "model_type": CASES[case].get("model_type", case), **rope}


SCALED = {
    "llama-llama3": _case(
        "llama",
        rope_parameters={
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": ORIGINAL,
            "rope_theta": 1e4,
        },
    ),
    "llama-linear": _case("llama", rope_scaling={"rope_type": "linear", "factor": 4.0}),
    # dynamic NTK grows the base only past max_position_embeddings, which no lab forward reaches
    "llama-dynamic": _case("llama", rope_scaling={"rope_type": "dynamic", "factor": 4.0}),
    "qwen3-yarn": _case("qwen3", rope_scaling=YARN),
    "deepseek_v3-yarn-mscale": _case(
        "deepseek_v3",
        rope_scaling={**YARN, "mscale": 1.0, "mscale_all_dim": 0.8, "beta_fast": 16, "beta_slow": 2},
    ),
    "deepseek_v2-yarn-mscale": _case(
        "deepseek_v2", rope_scaling={**YARN, "mscale": 0.9, "mscale_all_dim": 0.9}
    ),
    # GptOssConfig's own default when rope_parameters is left out: YaRN × 32 from 4,096 positions
    "gpt_oss-default-yarn": {k: v for k, v in _case("gpt_oss").items() if k != "rope_parameters"},
    "gemma3_text-linear-global": _case(
        "gemma3_text",
        rope_parameters={
            "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
            "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
        },
    ),
    "olmo3-yarn-global": _case("olmo3", rope_scaling={**YARN, "attention_factor": 1.2, "beta_fast": 32.0}),
    "phi3-longrope": _case(
        "phi3",
        rope_parameters={**LONGROPE, "rope_theta": 1e4, "partial_rotary_factor": 0.75},
        original_max_position_embeddings=ORIGINAL,
    ),
}


def pair(case: str):
    """transformers' model of the scaled case (weights N(0, 0.2)) and ours with its state dict."""
    torch.manual_seed(0)
    extra = dict(SCALED[case])
    config = transformers.AutoConfig.for_model(
        extra.pop("model_type"), **{**BASE, "max_position_embeddings": LONG, **extra}
    )
    hf = hf_model(config)
    with torch.no_grad():
        for p in hf.parameters():
            p.normal_(0, 0.2)
    cfg, _ = read_hf_config(config.to_dict())
    ours = build_model(cfg).eval()
    ours.load_state_dict(hf.state_dict(), strict=True)
    return hf, ours, cfg


def plain_twin(ours, cfg: ModelConfig):
    """The same model with plain RoPE."""
    plain = build_model(cfg.replace(rope_scaling=None)).eval()
    plain.load_state_dict(ours.state_dict(), strict=True)
    return plain


@pytest.mark.parametrize("length", [T, ORIGINAL - 8])
@pytest.mark.parametrize("case", sorted(SCALED))
def test_logits_past_the_original_context_equal_transformers(case, length):
    """Past the original context, and (LongRoPE's short factors) within it."""
    hf, ours, cfg = pair(case)
    assert cfg.rope_scaling is not None
    ids = torch.randint(0, BASE["vocab_size"], (2, length))
    with torch.no_grad():
        expected, logits, plain = hf(ids).logits, ours(ids), plain_twin(ours, cfg)(ids)
    torch.testing.assert_close(logits, expected, rtol=1e-5, atol=1e-5)
    if cfg.rope_scaling.rope_type != "dynamic":  # without the scaling the logits would differ
        assert (plain - expected).abs().max() > 1e-3
    else:  # dynamic NTK is plain RoPE up to max_position_embeddings, in transformers too
        torch.testing.assert_close(plain, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "case", ["llama-llama3", "deepseek_v3-yarn-mscale", "olmo3-yarn-global", "phi3-longrope"]
)
def test_cached_decoding_equals_transformers_cached_decoding(case):
    """A prefill inside the original context, then one token at a time past it: every step's
    logits equal transformers' with its own cache. Under LongRoPE the new tokens past the
    original context rotate with the long factors and the cached keys keep the short ones', so
    that decoding differs from one forward over the whole sequence, in both models."""
    hf, ours, cfg = pair(case)
    ids = torch.randint(0, BASE["vocab_size"], (1, 44))
    prefill = 24
    with torch.no_grad():
        out = hf(ids[:, :prefill], use_cache=True)
        past, expected = out.past_key_values, [out.logits]
        for t in range(prefill, ids.shape[1]):
            out = hf(ids[:, t : t + 1], past_key_values=past, use_cache=True)
            past = out.past_key_values
            expected.append(out.logits)
        cache = ours.new_cache(1, ids.shape[1])
        steps = [ours(ids[:, :prefill], cache)] + [
            ours(ids[:, t : t + 1], cache) for t in range(prefill, ids.shape[1])
        ]
        whole = ours(ids)
    torch.testing.assert_close(torch.cat(steps, 1), torch.cat(expected, 1), rtol=1e-5, atol=1e-5)
    if cfg.rope_scaling.rope_type == "longrope":
        assert (torch.cat(steps, 1) - whole).abs().max() > 1e-3
        torch.testing.assert_close(whole, hf(ids).logits, rtol=1e-5, atol=1e-5)  # all long
    else:
        torch.testing.assert_close(torch.cat(steps, 1), whole, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", sorted(SCALED))
def test_the_export_is_read_back_as_the_same_scaling(case):
    _, _, cfg = pair(case)
    data = cfg.to_hf_config()
    theirs = transformers.AutoConfig.for_model(**data)
    again, _ = read_hf_config(theirs.to_dict())
    assert (again.rope_scaling, again.rope_scaling_local) == (cfg.rope_scaling, cfg.rope_scaling_local)
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg and hash(cfg) == hash(
        ModelConfig.from_dict(cfg.to_dict())
    )


def test_the_scaled_layers_are_those_transformers_scales():
    """Gemma 3 and Olmo 3 scale their full-attention layers only; gpt-oss every layer."""
    assert not pair("gemma3_text-linear-global")[2].rope_scaling_local
    assert not pair("olmo3-yarn-global")[2].rope_scaling_local
    assert pair("gpt_oss-default-yarn")[2].rope_scaling_local


# ---- the published files at their own sizes: RoPE's tables past the original context ----------
def _rotary(config):
    """transformers' rotary embedding module of ``config``'s family (``…RotaryEmbedding`` of its
    modeling file) and the layer types it is called with (None: one for every layer)."""
    import importlib
    import inspect

    module = importlib.import_module(type(config).__module__.replace("configuration_", "modeling_"))
    name = next(n for n in dir(module) if n.endswith("RotaryEmbedding") and "Vision" not in n)
    rotary = getattr(module, name)(config)
    by_type = "layer_type" in inspect.signature(rotary.forward).parameters
    return rotary, (["full_attention", "sliding_attention"] if by_type else [None])


PUBLISHED_ROPE = {
    # name: (the config.json, the positions a forward reaches: past each file's original context)
    "llama-3.1-405b": (lambda: PRESETS["llama-3.1-405b"].to_hf_config(), 20_000),  # 8,192
    "llama-3.2-1b": (lambda: PRESETS["llama-3.2-1b"].to_hf_config(), 20_000),
    "deepseek-v3": (lambda: published("deepseek-v3"), 10_000),  # 4,096
    "phi-4-mini": (lambda: published("phi-4-mini-instruct"), 10_000),  # 4,096: its long factors
    "phi-4-mini-short": (lambda: published("phi-4-mini-instruct"), 4_096),  # within: short ones
    "gpt-oss-20b": (lambda: published("gpt-oss-20b"), 10_000),  # 4,096
    "gemma-3-27b": (lambda: published("gemma-3-27b-it"), 10_000),
    "olmo-3-7b": (lambda: published("olmo-3-7b"), 20_000),  # 8,192
    "llama-4-scout": (lambda: published("llama-4-scout-17b-16e"), 20_000),  # 8,192
    # Qwen3-8B with the YaRN its model card gives for 131,072 tokens (factor 4 over 32,768)
    "qwen3-8b-yarn": (
        lambda: (
            PRESETS["qwen3-8b"].to_hf_config()
            | {
                "rope_scaling": {
                    "rope_type": "yarn",
                    "factor": 4.0,
                    "original_max_position_embeddings": 32768,
                }
            }
        ),
        40_000,
    ),
}


@pytest.mark.parametrize("name", sorted(PUBLISHED_ROPE))
def test_the_published_files_rope_tables_are_transformers_past_their_original_context(name):
    """cos and sin at positions up to past each file's original context, at its own size (the
    model's: the tables alone, no weights), equal transformers' rotary embedding's, × its
    attention factor; every layer type's (Gemma 3 and Olmo 3 scale the full-attention layers
    only). The tiny models above show the model rotates with these tables."""
    from llama_lab.model.positions import PositionTables

    make, seen = PUBLISHED_ROPE[name]
    data = make()
    cfg, _ = read_hf_config(data)
    assert cfg.rope_scaling is not None
    config = theirs(data)
    positions = torch.tensor([[p for p in (0, 1, 777, 4095, 4096, 8191, 8192) if p < seen] + [seen - 1]])
    x = torch.zeros(1, dtype=torch.float32)
    tables = PositionTables(cfg)
    rotary, layer_types = _rotary(config)
    for layer_type in layer_types:
        out = rotary(x, positions) if layer_type is None else rotary(x, positions, layer_type)
        # Llama 4's freqs_cis: cos + i·sin of each pair
        cos, sin = (out.real, out.imag) if isinstance(out, torch.Tensor) else out
        half = cos.shape[-1] if name.startswith("llama-4") else cos.shape[-1] // 2
        ours = tables.get(seen, torch.device("cpu"), local=layer_type == "sliding_attention", seen=seen)
        for hf_table, mine in ((cos, ours[0]), (sin, ours[1])):
            torch.testing.assert_close(mine[positions[0], :half], hf_table[0, :, :half], rtol=1e-5, atol=1e-5)


# ---- the published files' own RoPE in a model, past their original context ---------------------
# Each file's RoPE exactly (base, scaling, the rotated width of a head), in one small block: the
# logits of a sequence 64 tokens past the original context equal transformers'. Qwen3's YaRN
# (32,768 original positions) is held by its tables above and the tiny model: a forward past it
# would hold T² scores of 4 GB here.
SHRUNK = dict(
    num_hidden_layers=1, vocab_size=256, intermediate_size=64, tie_word_embeddings=False, pad_token_id=None
)
FILES_PAST = {
    # Llama 3.1: heads of 128 as the file's (16384 / 128): 2 query heads on 1 KV head
    "llama-3.1-405b": (
        lambda: PRESETS["llama-3.1-405b"].to_hf_config(),
        dict(hidden_size=256, num_attention_heads=2, num_key_value_heads=1),
    ),
    # DeepSeek-V3: its RoPE key of 64 (YaRN × 40, mscale 1 / 1: the scores × mscale²), a small
    # latent and q bottleneck, one dense block
    "deepseek-v3": (
        lambda: published("deepseek-v3"),
        dict(
            hidden_size=64,
            num_attention_heads=2,
            num_key_value_heads=2,
            kv_lora_rank=32,
            q_lora_rank=48,
            qk_nope_head_dim=32,
            v_head_dim=32,
            first_k_dense_replace=1,
            n_routed_experts=4,
        ),
    ),
    # Phi-4-mini: 96 of 128 dimensions rotated by its 48 LongRoPE factors
    "phi-4-mini": (
        lambda: published("phi-4-mini-instruct"),
        dict(hidden_size=256, num_attention_heads=2, num_key_value_heads=1),
    ),
}


@pytest.mark.parametrize("name", sorted(FILES_PAST))  # about 2 s each
def test_the_published_files_rope_gives_transformers_logits_past_their_original_context(name):
    make, shrink = FILES_PAST[name]
    # in float32 (the files' bf16 left out), without their fp8 storage
    data = {k: v for k, v in make().items() if k not in ("quantization_config", "torch_dtype", "dtype")}
    data |= SHRUNK | shrink
    cfg, _ = read_hf_config(data)
    scaling = cfg.rope_scaling
    assert scaling is not None
    length = scaling.original_max_position_embeddings + 64
    torch.manual_seed(0)
    hf = hf_model(theirs(data))
    with torch.no_grad():
        for p in hf.parameters():
            p.normal_(0, 0.2)
    ours = build_model(cfg).eval()
    ours.load_state_dict(hf.state_dict(), strict=True)
    ids = torch.randint(0, 256, (1, length))
    with torch.no_grad():
        expected, logits = hf(ids).logits[:, -128:], ours(ids)[:, -128:]
        plain = plain_twin(ours, cfg)(ids)[:, -128:]
    torch.testing.assert_close(logits, expected, rtol=1e-4, atol=1e-4)
    assert (plain - expected).abs().max() > 1e-2  # the scaling is what makes them equal
