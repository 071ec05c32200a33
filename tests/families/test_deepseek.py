"""MLA and DeepSeekMoE counted: the published config.json files (DeepSeek-V3, V2, V2-Lite, Kimi
K2) read as the presets, with their published totals; the latent cache, its naive per-head
twin and DeepSeek-V2's Table 1 by hand; block-wise fp8 storage; MLA's tensor-parallel split.
The module against transformers: tests/families/test_families.py (its DeepSeek cases)."""

import json
import math
import warnings
from pathlib import Path

import pytest

from llama_lab import analysis
from llama_lab.analysis.parallel import Layout, stage_tensors
from llama_lab.config import PRESETS, PUBLISHED_ROUNDED, ConfigError, ModelConfig, read_hf_config
from llama_lab.config.hf.quant import stored_quant

PUBLISHED = Path(__file__).with_name("published_configs")
FILES = {
    "deepseek-v3": "deepseek-v3.json",
    "deepseek-v2": "deepseek-v2.json",
    "deepseek-v2-lite": "deepseek-v2-lite.json",
    "kimi-k2": "kimi-k2-instruct.json",
}


def published(name: str) -> dict:
    return json.loads((PUBLISHED / FILES[name]).read_text())


@pytest.mark.parametrize("name", sorted(FILES))
def test_the_published_config_is_the_preset(name):
    cfg, notes = read_hf_config(published(name))
    assert cfg == PRESETS[name]
    assert cfg.attention_kind == "MLA"


def test_the_notes_on_deepseek_v3s_file_name_what_is_not_counted():
    cfg, notes = read_hf_config(published("deepseek-v3"))
    text = " | ".join(notes)
    assert "fp8 (e4m3) weights with one float32 scale per 128×128 block" in text
    assert "671B main model + 14B MTP module" in text  # num_nextn_predict_layers=1
    # its YaRN is modelled now, read into the config, no longer a note
    assert "rope_scaling" not in text
    assert (cfg.rope_scaling.rope_type, cfg.rope_scaling.factor) == ("yarn", 40)
    assert "'scoring_func'" in text  # DeepseekV3 always scores by sigmoid: the key is not read
    _, notes = read_hf_config(published("kimi-k2"))
    assert any("model_type 'kimi_k2' runs DeepseekV3ForCausalLM" in n for n in notes)


@pytest.mark.parametrize("name", sorted(FILES))
def test_counts_against_the_published_figures(name):
    """Published only rounded: DeepSeek-V3 "671B total … 37B activated", V2 "236B … 21B",
    V2-Lite "15.7B … 2.4B", Kimi K2 "1 trillion … 32 billion". The activated figures count what
    a token's matmuls use (the embedding lookup is none): palm_params (V3: 36.6B, as the first
    README_WEIGHTS revision said; ``params.active`` adds the 0.93B embedding table)."""
    total, active, _ = PUBLISHED_ROUNDED[name]
    cfg = PRESETS[name]
    counts = analysis.count_params(cfg)
    assert counts.total == pytest.approx(total, rel=0.03)
    assert analysis.palm_params(cfg) == pytest.approx(active, rel=0.03)
    assert counts.active == analysis.palm_params(cfg) + cfg.vocab_size * cfg.d_model


def test_deepseek_v3_by_hand():
    cfg = PRESETS["deepseek-v3"]
    C, H, L = 7168, 128, 61
    attention = C * 1536 + 1536 * H * 192 + C * (512 + 64) + 512 * H * (128 + 128) + H * 128 * C
    norms = 1536 + 512 + 2 * C  # q_a and kv_a layernorms, the block's two
    dense = 3 * C * 18432
    sparse = C * 256 + 256 * 3 * C * 2048 + 3 * C * 2048  # router, routed experts, one shared
    total = L * (attention + norms) + 3 * dense + 58 * sparse + 2 * 129280 * C + C
    assert analysis.count_params(cfg).total == total == 671_026_404_352
    assert analysis.count_params_module(cfg).total == total  # the meta-device module


def test_the_latent_cache_against_deepseek_v2_table_1():
    """DeepSeek-V2 §2.1.4, Table 1: per token MHA caches 2·n_h·d_h·l elements, GQA 2·n_g·d_h·l,
    MQA 2·d_h·l, MLA (d_c + d_h^R)·l ≈ 4.5·d_h·l (d_c = 4·d_h, d_h^R = d_h/2)."""
    cfg = PRESETS["deepseek-v3"]
    n_h, d_h, layers, b = 128, 128, 61, 2  # bf16
    kv = analysis.kv_cache(cfg, 4096, 1, "bf16")
    assert kv.bytes_per_token == (512 + 64) * layers * b == 4.5 * d_h * layers * b
    assert kv.compare["mha"] == 2 * n_h * d_h * layers * b
    assert kv.compare["mqa"] == 2 * d_h * layers * b
    assert kv.bytes == 4096 * kv.bytes_per_token
    # the up-projected K (192 wide) and V (128) of every head, had they been cached
    assert analysis.naive_mla_bytes_per_token(cfg, "bf16") == layers * n_h * (192 + 128) * b
    result = analysis.analyze(cfg, 4096, 1, "bf16")
    assert result["kv_cache"]["naive_bytes_per_token"] == layers * n_h * 320 * b
    # int8: one fp16 scale for the latent and one for the RoPE key, per token and layer
    assert analysis.kv_cache_bytes_per_token(cfg, "int8") == layers * (512 + 2 + 64 + 2)


def test_mla_flops_by_hand():
    """Forward: projections 2 FLOPs per weight and token; scores QKᵀ over the 192-wide heads and
    AV over the 128-wide values. Decode attends over the latent (absorbed): (512 + 64) + 512."""
    cfg = PRESETS["deepseek-v2-lite"]
    T, H, L = 512, 16, 27
    f = analysis.count_flops(cfg, T, 1).by_component
    attention = 2048 * H * 192 + 2048 * (512 + 64) + 512 * H * (128 + 128) + H * 128 * 2048
    assert f["attention_proj"] == 2 * T * attention * L
    assert f["attention_scores"] == 2 * T * T * H * (192 + 128) * L
    d = analysis.decode_flops(cfg, T, 1).by_component
    assert d["attention_proj"] == 2 * attention * L  # W_UK, W_UV: kv_b_proj's rows
    assert d["attention_scores"] == 2 * T * H * (2 * 512 + 64) * L
    # a sparse block: router, 6 routed and 2 shared experts of 1408
    assert f["ffn"] == 2 * T * (3 * 2048 * 10944 + 26 * (6 + 2) * 3 * 2048 * 1408)


def test_block_wise_fp8_bytes_by_hand():
    cfg = PRESETS["deepseek-v3"]
    quant = analysis.quant.stored_weights(stored_quant(published("deepseek-v3")))
    assert (quant.dtype, quant.group_size, quant.block_rows, quant.scale_dtype) == ("fp8", 128, 128, "fp32")
    rows: dict = {}  # summed over the dense and the sparse blocks
    for row in analysis.weights_bytes(cfg, quant).by_tensor:
        total = rows.setdefault(row["tensor"], dict(row, data=0, scales=0, bytes=0))
        for key in ("data", "scales", "bytes"):
            total[key] += row[key]
    q_b = rows["q_b_proj"]  # 24,576 × 1,536 in 61 blocks: 192 × 12 blocks of 128 × 128
    assert q_b["data"] == 61 * 24576 * 1536
    assert q_b["scales"] == 61 * 192 * 12 * 4
    kv_a = rows["kv_a_proj_with_mqa"]  # 576 rows: ⌈576 / 128⌉ = 5 block rows
    assert kv_a["scales"] == 61 * 5 * 56 * 4
    assert rows["embed_tokens"]["stored_as"] == "bf16"  # kept, as DeepSeek ships it
    bias = rows["e_score_correction_bias"]  # a float32 buffer of every sparse block
    assert (bias["stored_as"], bias["bytes"]) == ("fp32", 58 * 256 * 4)


def test_an_mla_model_under_tensor_parallelism():
    """q_b, kv_b and o split by heads; q_a, kv_a and their norms (the latent) on every rank;
    every rank caches the whole latent."""
    cfg = PRESETS["deepseek-v2-lite"]
    whole = {g.name: g for g in analysis.weight_tensors(cfg)}
    local = {g.name: g for g in stage_tensors(cfg, Layout(gpus=4, tp=4), 0)}
    assert local["kv_b_proj"].rows == whole["kv_b_proj"].rows // 4
    assert local["o_proj"].cols == whole["o_proj"].cols // 4
    assert local["kv_a_proj_with_mqa"] == whole["kv_a_proj_with_mqa"]
    assert local["q_proj"].rows == whole["q_proj"].rows // 4
    assert local["shared_experts.gate_proj"].rows == whole["shared_experts.gate_proj"].rows // 4
    assert analysis.kv.layer_token_bytes(cfg, "bf16", tp=4) == (512 + 64) * 2


@pytest.mark.parametrize(
    "changes, rule",
    [
        (dict(n_kv_heads=8), "n_kv_heads=8 must equal n_heads=16"),
        (dict(qk_rope_head_dim=7), "even qk_rope_head_dim"),
        (dict(qk_rope_head_dim=192), "above qk_rope_head_dim=192"),
        (dict(pos_encoding="learned"), "needs pos_encoding='rope'"),
        (dict(qk_norm=True), "has no QK-norm"),
        (dict(kv_lora_rank=0), "q_lora_rank|qk_rope_head_dim=64 needs MLA"),
        (dict(moe_groups=5), "n_experts=64 is not divisible by moe_groups=5"),
        (dict(moe_groups=8, moe_topk_groups=1, experts_per_token=9), "exceeds the 8 experts"),
        (dict(n_experts=0, experts_per_token=0), "n_shared_experts=2 needs routed experts"),
        (dict(moe_topk_groups=2), "moe_topk_groups=2"),
        (dict(routed_scaling=0.0), "routed_scaling=0.0 must be a finite number > 0"),
    ],
)
def test_impossible_mla_and_routing_configs_name_the_rule(changes, rule):
    with pytest.raises(ConfigError, match=rule):
        PRESETS["deepseek-v2-lite"].replace(**changes)


def test_a_plain_model_with_value_heads_apart_is_refused():
    with pytest.raises(ConfigError, match="only MLA"):
        ModelConfig(v_head_dim=32)


@pytest.mark.parametrize(
    "key, value, rule",
    [
        ("attention_bias", True, "attention_bias=true is not modelled for deepseek_v3"),
        ("num_experts_per_tok", None, "num_experts_per_tok is null"),
        ("n_group", None, "n_group is null"),
    ],
)
def test_a_deepseek_file_that_cannot_be_counted_is_refused_by_name(key, value, rule):
    with pytest.raises(ConfigError, match=rule):
        read_hf_config({**published("deepseek-v3"), key: value})


def test_deepseek_v2_routing_keys():
    data = published("deepseek-v2")
    with pytest.raises(ConfigError, match="topk_method='noaux_tc' must be 'greedy' or"):
        read_hf_config({**data, "topk_method": "noaux_tc"})
    greedy, _ = read_hf_config({**data, "topk_method": "greedy"})
    assert (greedy.moe_groups, greedy.moe_topk_groups) == (1, 1)  # the groups are not read
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, notes = read_hf_config({**data, "norm_topk_prob": True})
    assert any("'norm_topk_prob'" in note for note in notes)  # DeepseekV2's router never reads it


def test_the_export_round_trips_and_names_deepseek():
    for name in FILES:
        cfg = PRESETS[name]
        exported = cfg.to_hf_config()
        assert exported["model_type"] == ("deepseek_v2" if "v2" in name else "deepseek_v3")
        assert read_hf_config(exported)[0] == cfg
    with pytest.raises(ConfigError, match="MLA"):
        PRESETS["deepseek-v3"].replace(moe_scoring="softmax", moe_groups=1, moe_topk_groups=1).replace(
            n_shared_experts=0
        ).to_hf_config()


def test_the_family_notes_say_what_sets_deepseek_apart():
    notes = analysis.summary.family_notes(PRESETS["deepseek-v3"])
    mla, moe = notes[0], notes[1]
    assert "576 values per layer" in mla and "32,768" in mla and f"{32768 / 576:.1f}× more" in mla
    assert "58 sparse blocks after 3 dense ones" in moe and "best 4 of 8 expert groups" in moe
    assert "1 shared expert every token passes" in moe and "× 2.5" in moe
    assert math.isclose(analysis.count_params(PRESETS["deepseek-v3"]).active / 1e9, 37.55, abs_tol=0.01)
