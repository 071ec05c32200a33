"""Mistral 4 (mistral4; the mistral3 wrapper's text decoder): DeepSeek-V3's MLA and experts with
a softmax router whose groups are ranked by their two best scores, and every query × the
Llama-4-style temperature at ⌊p / original_max_position_embeddings⌋ (logits, cached decoding,
FLOPs and the export against transformers: tests/families/test_families.py's "mistral4" case). Here: the
preset against transformers' class defaults and the published count, the temperature by hand,
the cache against transformers' tensors, the wrapper, the reader's rules, and the later families
refused with what they add."""

import warnings

import pytest
import torch
from hf_helpers import causal_lm, meta_count
from test_families import BASE, CASES

from llama_lab import analysis
from llama_lab.config import PRESETS, PUBLISHED_ROUNDED, ConfigError, ModelConfig, read_hf_config
from llama_lab.model import build_model
from llama_lab.model.attention import attention_temperature

transformers = pytest.importorskip("transformers")
warnings.filterwarnings("ignore", module="transformers")


def small():
    extra = dict(CASES["mistral4"])
    return transformers.AutoConfig.for_model("mistral4", **{**BASE, **extra})


def test_the_preset_is_transformers_defaults_and_the_published_count():
    defaults = transformers.AutoConfig.for_model("mistral4")
    cfg, _ = read_hf_config(defaults.to_dict())
    assert cfg == PRESETS["mistral-small-4"]
    counts = analysis.count_params(cfg)
    assert counts.total == meta_count(defaults) == 118_972_826_624
    total, active, _ = PUBLISHED_ROUNDED["mistral-small-4"]
    assert round(counts.total / 1e9) == total / 1e9
    # "6.5B activated": between the count without the embedding (6.10B) and with it (6.63B)
    without_embedding = counts.active - counts.by_component["embedding"]
    assert without_embedding < active < counts.active
    assert (counts.active, without_embedding) == (6_632_588_288, 6_095_717_376)


def test_the_temperature_by_hand():
    cfg = ModelConfig(
        attn_temperature_layers="all",
        attn_floor_scale=4,
        attn_temperature_scale=0.5,
        attn_temperature_offset=0,
    )
    got = attention_temperature(cfg, 2, 7, "cpu").flatten()
    # positions 2..8: ⌊p / 4⌋ = 0, 0, 1, 1, 1, 1, 2
    want = torch.tensor([1 + 0.5 * torch.log1p(torch.tensor(float(n))) for n in (0, 0, 1, 1, 1, 1, 2)])
    torch.testing.assert_close(got, want)


def test_the_cache_holds_transformers_latent_tensors():
    config = small()
    hf = causal_lm(config)._from_config(config, attn_implementation="eager").eval()
    cfg, _ = read_hf_config(config.to_dict())
    ours = build_model(cfg).eval()
    ours.load_state_dict(hf.state_dict(), strict=True)
    ids = torch.randint(0, BASE["vocab_size"], (2, 11))
    with torch.no_grad():
        theirs = hf(ids, use_cache=True).past_key_values
        mine = ours.new_cache(2, 11)
        ours(ids, mine)
    held = sum(layer.keys.nbytes + layer.values.nbytes for layer in theirs.layers)
    assert mine.nbytes() == held == analysis.kv_cache_bytes(cfg, 11, 2, "fp32")


def test_the_mistral3_wrapper_reads_its_text_decoder():
    text = small().to_dict()
    cfg, notes = read_hf_config({"model_type": "mistral3", "text_config": text, "vision_config": {}})
    # Pixtral (its config class's defaults) counted beside it; the wrapper ties the head (its
    # tie_word_embeddings, true by default, alone: Mistral3Config)
    assert cfg.vision.kind == "pixtral" and notes == read_hf_config(text)[1]
    assert cfg.replace(vision=None) == read_hf_config({**text, "tie_word_embeddings": True})[0]


def test_a_file_without_the_temperature_beta_is_refused():
    data = {**small().to_dict(), "rope_parameters": {"rope_type": "linear", "factor": 1.0, "rope_theta": 1e4}}
    with pytest.raises(ConfigError, match="llama_4_scaling_beta=None must be a number"):
        read_hf_config(data)


def test_groups_ranked_by_two_best_need_softmax_groups():
    with pytest.raises(ConfigError, match="moe_group_top2=True .* moe_groups > 1"):
        ModelConfig(n_experts=4, experts_per_token=2, moe_group_top2=True)


def test_the_export_round_trips():
    back, _ = read_hf_config(PRESETS["mistral-small-4"].to_hf_config())
    assert back == PRESETS["mistral-small-4"]
    back, _ = read_hf_config(read_hf_config(small().to_dict())[0].to_hf_config())
    assert back == read_hf_config(small().to_dict())[0]


@pytest.mark.parametrize(
    ("data", "what"),
    [
        ({"model_type": "glm_moe_dsa"}, "GlmMoeDsaIndexer.*indexer_types 'shared'"),
        ({"model_type": "deepseek_v4"}, "hyper-connections"),
        (
            {"model_type": "mistral_large4", "text_config": {"model_type": "mistral_large4_text"}},
            "MistralLarge4TextIndexer",
        ),
    ],
)
def test_the_later_families_are_refused_with_what_they_add(data, what):
    with pytest.raises(ConfigError, match=r"not modelled: .*" + what):
        read_hf_config(data)
