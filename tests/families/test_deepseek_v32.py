"""DeepSeek Sparse Attention (``deepseek_v32``) against transformers 5.25's DeepseekV32ForCausalLM:
the published DeepSeek-V3.2(-Exp) config.json and a tiny one counted as the meta module (total,
active, the indexer under attention); logits and cached decoding past index_topk; forward FLOPs
against FlopCounterMode on the eager forward, the causal and decode counts by hand; the cache
(latent, RoPE key, indexer key) against transformers' cache tensors; the refusals. The families
suite holds the tiny case too (tests/families/test_families.py)."""

import warnings

import pytest
import torch
from hf_helpers import meta_model, published, theirs
from test_families import BASE, CASES
from torch.utils.flop_counter import FlopCounterMode

from llama_lab import analysis
from llama_lab.config import PRESETS, ConfigError, ModelConfig, read_hf_config
from llama_lab.model import build_model

transformers = pytest.importorskip("transformers")
warnings.filterwarnings("ignore", module="transformers")

# The families suite's case: MLA with a q bottleneck, DeepSeekMoE after one dense block, an
# indexer of 8 heads of 16 (its first 8 rotated) keeping each query's 6 best keys
TINY = {**BASE, **CASES["deepseek_v32"], "model_type": "deepseek_v32"}
T, B = 12, 2  # past index_topk


def hf_and_ours():
    torch.manual_seed(0)
    config = theirs(TINY)
    hf = transformers.DeepseekV32ForCausalLM._from_config(
        config, attn_implementation="eager", experts_implementation="eager"
    ).eval()
    with torch.no_grad():  # the norms and the router's bias away from their constant init
        for name, p in hf.named_parameters():
            if "norm" in name or "bias" in name:
                p.add_(0.1 * torch.randn_like(p))
    cfg, _ = read_hf_config(TINY)
    ours = build_model(cfg).eval()
    ours.load_state_dict(hf.state_dict(), strict=True)
    return hf, ours, cfg


def module_counts(config) -> tuple[int, int]:
    """transformers' module on the meta device: every parameter, and those a token uses (less
    the E − k experts of each sparse block it is not routed to, as the lab counts DeepSeek-V3)."""
    model = meta_model(config)
    total = sum(p.numel() for p in model.parameters())
    E, k = config.n_routed_experts, config.num_experts_per_tok
    experts = sum(p.numel() for name, p in model.named_parameters() if ".mlp.experts." in name)
    return total, total - experts * (E - k) // E


@pytest.mark.parametrize("data", [TINY, published("deepseek-v3.2-exp")], ids=["tiny", "deepseek-v3.2-exp"])
def test_total_and_active_equal_transformers_meta_module(data):
    cfg, _ = read_hf_config(data)
    counts = analysis.count_params(cfg)
    assert (counts.total, counts.active) == module_counts(theirs(data))
    assert analysis.count_params_module(cfg).total == counts.total


def test_the_published_file_is_the_preset_and_its_counts():
    cfg, notes = read_hf_config(published("deepseek-v3.2-exp"))
    assert cfg == PRESETS["deepseek-v3.2-exp"]
    counts = analysis.count_params(cfg)
    # DeepSeek-V3's 671,026,404,352 plus 61 indexers: wq_b 1536 → 64·128, wk and weights_proj
    # from 7168 → 128 and 64, the key's LayerNorm (γ, β) of 128
    indexer = 1536 * 64 * 128 + 7168 * 128 + 7168 * 64 + 2 * 128
    assert counts.total == 671_026_404_352 + 61 * indexer == 671_877_929_216
    assert counts.active == 38_403_807_488
    assert counts.detail["indexer_norm"] == 61 * 256  # counted under attention, with the rest
    assert (
        counts.by_component["attention"]
        - analysis.count_params(PRESETS["deepseek-v3"]).by_component["attention"]
        == 61 * indexer
    )
    assert any("'num_nextn_predict_layers'" in note for note in notes)  # the MTP layer: not read


def test_logits_and_cached_decoding_past_the_top_k_equal_transformers():
    hf, ours, cfg = hf_and_ours()
    ids = torch.randint(0, BASE["vocab_size"], (B, T))
    with torch.no_grad():
        expected, logits = hf(ids).logits, ours(ids)
        cache = ours.new_cache(B, T)
        steps = [ours(ids[:, :4], cache)] + [ours(ids[:, t : t + 1], cache) for t in range(4, T)]
        # transformers' own cache (the latent, the RoPE key and DynamicIndexedLayer's indexer keys)
        out = hf(ids[:, :4], use_cache=True)
        theirs_steps = [out.logits]
        for t in range(4, T):
            out = hf(ids[:, t : t + 1], cache=out.past_key_values, use_cache=True)
            theirs_steps.append(out.logits)
        dense = build_model(cfg.replace(index_topk=T)).eval()
        dense.load_state_dict(hf.state_dict())
        everything = dense(ids)
    torch.testing.assert_close(logits, expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(torch.cat(steps, dim=1), logits, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(torch.cat(theirs_steps, dim=1), torch.cat(steps, dim=1), rtol=1e-5, atol=1e-5)
    # up to index_topk keys every query attends all: the same logits; past it the top-k choice bites
    torch.testing.assert_close(everything[:, : cfg.index_topk], logits[:, : cfg.index_topk])
    assert (everything[:, cfg.index_topk :] - logits[:, cfg.index_topk :]).abs().max() > 1e-2


def test_the_cache_equals_transformers_cache_tensors():
    hf, _, cfg = hf_and_ours()
    with torch.no_grad():
        out = hf(torch.randint(0, BASE["vocab_size"], (B, T)), use_cache=True)
    layers = out.past_key_values.layers
    held = sum(t.numel() * t.element_size() for layer in layers for t in (layer.keys, layer.values))
    held += sum(layer.indexer_keys.numel() * layer.indexer_keys.element_size() for layer in layers)
    assert analysis.kv_cache_bytes(cfg, T, B, "fp32") == held
    # per layer and token: the latent 32, the RoPE key 8 and the indexer's key 16
    assert analysis.kv.layer_token_bytes(cfg, "bf16") == 2 * (32 + 8 + 16)
    assert analysis.kv.fp8_indexer_key_bytes(PRESETS["deepseek-v3.2-exp"]) == 128 + 4


def test_forward_flops_equal_flop_counter_on_transformers_eager():
    hf, _, cfg = hf_and_ours()
    hf.requires_grad_(False)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        hf(torch.randint(0, BASE["vocab_size"], (B, T)))
    counts = analysis.count_flops(cfg, T, B)
    assert counter.get_total_flops() == counts.forward
    # the indexer by hand: 8 heads of 16 plus the weighted sum over heads, every one of the T×T
    # pairs eager computes, 3 layers
    assert counts.by_component["indexer_scores"] == 2 * 3 * B * T * T * 8 * (16 + 1)
    # the main attention over the pairs the top-k allows: Σ min(i + 1, 6), (D + Dv) per head
    pairs = B * sum(min(i + 1, 6) for i in range(T))
    assert counts.attention_scores_causal == 2 * 3 * pairs * 4 * (24 + 12)
    causal_indexer = 2 * 3 * B * T * (T + 1) // 2 * 8 * 17
    assert counts.forward_causal == (
        counts.forward
        - counts.by_component["attention_scores"]
        - counts.by_component["indexer_scores"]
        + counts.attention_scores_causal
        + causal_indexer
    )


def test_a_decoded_tokens_attention_stops_growing_past_the_top_k_while_the_indexer_grows():
    cfg = PRESETS["deepseek-v3.2-exp"]
    short, long = (analysis.decode_flops(cfg, S) for S in (2048, 8192))
    assert short.by_component["attention_scores"] == long.by_component["attention_scores"]
    assert long.by_component["indexer_scores"] == 4 * short.by_component["indexer_scores"]
    # the absorbed form over 2,048 latents: (2·512 + 64) per pair and head, 128 heads, 61 layers
    assert long.by_component["attention_scores"] == 2 * 61 * 2048 * 128 * (2 * 512 + 64)
    assert long.by_component["indexer_scores"] == 2 * 61 * 8192 * 64 * 129


@pytest.mark.parametrize(
    ("change", "field", "rule"),
    [
        (dict(kv_lora_rank=0, qk_rope_head_dim=0, q_lora_rank=0), "kv_lora_rank", "needs MLA"),
        (dict(q_lora_rank=0), "q_lora_rank", "needs q_lora_rank > 0"),
        (dict(index_head_dim=4), "index_head_dim", "index_head_dim=4 ≥ qk_rope_head_dim=8"),
        (dict(index_topk=0), "index_topk", "index_topk"),
    ],
)
def test_bad_indexer_fields_are_refused_in_one_line(change, field, rule):
    cfg, _ = read_hf_config(TINY)
    fields = {**cfg.to_dict(), **change}
    if not fields["kv_lora_rank"]:
        fields.update(head_dim=None, v_head_dim=None)
    with pytest.raises(ConfigError, match=rule) as info:
        ModelConfig.from_dict(fields)
    assert info.value.field == field and "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("change", "rule"),
    [
        (dict(q_lora_rank=None), "q_lora_rank is null; a number is required"),
        (dict(q_lora_rank=0), "q_lora_rank is null or 0: DeepseekV32Attention always"),
        (dict(layer_types=["full_attention"] * 3), "layer_types must be 'indexed_attention'"),
        (dict(mlp_layer_types=["dense", "sparse"]), "mlp_layer_types must name"),
    ],
)
def test_bad_files_are_refused(change, rule):
    with pytest.raises(ConfigError, match=rule):
        read_hf_config({**TINY, **change})


def test_mlp_layer_types_and_num_experts_read_as_transformers():
    data = {**TINY, "mlp_layer_types": ["sparse", "dense", "sparse"], "num_experts": 16}
    cfg, _ = read_hf_config(data)
    assert (cfg.n_experts, cfg.moe_layers) == (16, "0,2")
    assert analysis.count_params(cfg).total == module_counts(theirs(data))[0]


def test_glm_moe_dsa_stays_refused_naming_its_indexer():
    with pytest.raises(ConfigError, match="GlmMoeDsaIndexer.*adjacent pairs.*'shared'"):
        read_hf_config({"model_type": "glm_moe_dsa"})


def test_the_surfaces_that_do_not_follow_the_top_k_refuse_it_in_one_line():
    from llama_lab.analysis.finetune import FinetuneSpec, check_finetune
    from llama_lab.analysis.parallel import Layout, check_layout
    from llama_lab.analysis.shards import check_shard_layout
    from llama_lab.errors import AnalysisError

    cfg = PRESETS["deepseek-v3.2-exp"]
    for refuse in (
        lambda: check_layout(cfg, Layout(8, 8)),  # parallel, predict train, predict decode
        lambda: check_finetune(cfg, FinetuneSpec()),
        lambda: check_shard_layout(cfg, "fsdp", 2),
    ):
        with pytest.raises(AnalysisError, match="does not model DeepSeek Sparse Attention") as info:
            refuse()
        assert "\n" not in str(info.value)
    check_layout(cfg.replace(index_n_heads=0), Layout(8, 8))  # DeepSeek-V3's attention: served


def test_the_indexers_stored_fp8_tensors_are_the_checkpoints():
    """DeepSeek-V3.2's safetensors list (SOURCES.md: the transcription beside its config.json),
    per layer: indexer.wq_b [8192, 1536] float8_e4m3fn with weight_scale_inv [64, 12] float32,
    indexer.wk [128, 7168] fp8 with [1, 56] float32, indexer.weights_proj [64, 7168] bfloat16
    ("54.25 MB" over 62 layers: 62 · 64 · 7168 · 2 bytes)."""
    from llama_lab.analysis.quant import stored_weights, weights_bytes
    from llama_lab.config.hf.quant import stored_quant

    data = published("deepseek-v3.2-exp")
    cfg, _ = read_hf_config(data)
    rows = weights_bytes(cfg, stored_weights(stored_quant(data))).by_tensor
    per_layer = {}
    for row in rows:
        if row["tensor"].startswith("indexer_"):
            per_layer[row["tensor"]] = per_layer.get(row["tensor"], 0) + row["bytes"]
    assert {name: n // 61 for name, n in per_layer.items()} == {
        "indexer_wq_b": 8192 * 1536 + 64 * 12 * 4,
        "indexer_wk": 128 * 7168 + 56 * 4,
        "indexer_weights_proj": 64 * 7168 * 2,
    }
    assert 62 * 64 * 7168 * 2 / 2**20 == 54.25
