"""Issue "One house": one rule for the KV cache a GPU holds under tensor parallelism (G/tp KV
heads and at least one; MLA's latent whole on every rank) and one per-GPU weight rule, read by
the Many GPUs page, the vLLM fit, ``predict decode`` (its memory and its decode roofline) and
the report; ``predict decode`` refused by the layout rules of ``parallel``; and one convention for
every MFU and achieved FLOP/s the lab shows."""

from __future__ import annotations

import json

import pytest

from llama_lab import analysis
from llama_lab.analysis import (
    MFU_CONVENTION,
    derive_measured,
    kv,
    kv_cache_bytes,
    kv_cache_bytes_per_token,
    model_flops,
    parallel,
)
from llama_lab.analysis.layouts import gpu_weight_bytes, serving_fit
from llama_lab.analysis.parallel import Layout, check_layout
from llama_lab.cli import main
from llama_lab.config import PRESETS
from llama_lab.errors import LabError
from llama_lab.runtime.hardware import GPUS
from llama_lab.validation.engine import kv_bytes_per_token_per_gpu, weights_per_gpu
from llama_lab.validation.predict import predict_decode, predict_train

GPU = GPUS["H200 141GB"]
PROMPT, NEW = 128, 128


def _valid(name: str, tp: int) -> bool:
    if PRESETS[name].is_encoder_decoder:  # predict decode refuses it (tests/families/test_marian.py)
        return False
    try:
        check_layout(PRESETS[name], Layout(tp, tp))
    except LabError:
        return False
    return True


# (an encoder caches nothing and serves no decode: the rule is a decoder's)
DECODERS = [name for name in PRESETS if PRESETS[name].causal]
CASES = [(name, tp) for name in DECODERS for tp in (1, 2, 4, 8, 16) if _valid(name, tp)]


@pytest.mark.parametrize("name,tp", CASES, ids=[f"{n}@tp{t}" for n, t in CASES])
def test_every_surface_holds_the_same_bytes_per_gpu(name: str, tp: int):
    """Many GPUs' serving fit, the vLLM fit, ``predict decode``'s memory and its decode roofline
    count one GPU's cache and weights alike, for every preset at every valid tp."""
    cfg = PRESETS[name]
    prompt = new = min(PROMPT, cfg.max_seq_len // 2)
    per_token = kv_cache_bytes_per_token(cfg, "bf16", tp)
    fit = serving_fit(cfg, GPU, Layout(tp, tp), 1, prompt + new, "bf16", "bf16")
    weights = sum(gpu_weight_bytes(cfg, "bf16", Layout(tp, tp)).values())
    assert fit.kv_bytes_per_token_per_gpu == per_token == kv_bytes_per_token_per_gpu(cfg, "bf16", tp)
    assert fit.weights_bytes_per_gpu == weights == weights_per_gpu(cfg, "bf16", tp)
    memory = predict_decode(cfg, GPU, tp, None, 1, prompt, new)["memory"]
    cache = kv_cache_bytes(cfg, prompt + new, 1, "bf16", tp)
    assert memory["weights_and_cache_bytes_per_gpu"] == weights + cache
    # the decode roofline reads that cache per GPU (and writes the new token's), and no more
    # weights than that GPU holds
    r = analysis.roofline(cfg, GPU, 1, prompt, "bf16", "decode", "bf16", "bf16", tp=tp)
    assert r.kv_cache_bytes == kv_cache_bytes(cfg, prompt, 1, "bf16", tp) + per_token
    assert r.weight_bytes <= weights + 2 * cfg.d_model * (1 + (cfg.pos_encoding == "learned"))
    if tp == 1:  # one GPU: the model's own counts
        assert weights == analysis.weight_bytes(cfg, "bf16")
        assert per_token == kv_cache_bytes_per_token(cfg, "bf16")


def test_deepseek_v3_at_tp_8_keeps_the_whole_latent_on_each_gpu():
    """By hand: 61 layers × (kv_lora_rank 512 + qk_rope_head_dim 64) × 2 bytes = 70,272 bytes per
    token on every one of 8 GPUs (was 8,784 in the vLLM fit and ``predict decode``: 1/8 of it)."""
    cfg = PRESETS["deepseek-v3"]
    by_hand = 61 * (512 + 64) * 2
    assert by_hand == 70_272
    assert kv.layer_token_bytes(cfg, "bf16", tp=8) * cfg.n_layers == by_hand
    assert kv_cache_bytes_per_token(cfg, "bf16", 8) == by_hand
    assert serving_fit(cfg, GPU, Layout(8, 8)).kv_bytes_per_token_per_gpu == by_hand
    assert kv_bytes_per_token_per_gpu(cfg, "bf16", 8) == by_hand
    memory = predict_decode(cfg, GPU, 8, None, 1, PROMPT, NEW)["memory"]
    assert memory["weights_and_cache_bytes_per_gpu"] == weights_per_gpu(cfg, "bf16", 8) + 256 * by_hand
    # the roofline reads the whole latent of 256 tokens on each GPU, and writes one more token's
    r = analysis.roofline(cfg, GPU, 1, 256, "bf16", "decode", "bf16", "bf16", tp=8)
    assert r.kv_cache_bytes == 257 * by_hand
    assert "whole latent" in kv.tp_cache_note(cfg)
    # the latent's projections are whole on every rank: more than an eighth of the weights each
    assert weights_per_gpu(cfg, "bf16", 8) > analysis.weight_bytes(cfg, "bf16") / 8


def test_llama_3_8b_at_tp_16_keeps_one_whole_kv_head_per_gpu():
    """By hand: 8 KV heads over 16 GPUs — each keeps one head (replicated on 2 ranks), never
    half of one: 32 layers × 2 (K, V) × 1 head × 128 × 2 bytes = 16,384 (``predict decode``
    said 8,192)."""
    cfg = PRESETS["llama-3-8b"]
    by_hand = 32 * 2 * 1 * 128 * 2
    assert by_hand == 16_384
    assert kv.kv_heads_per_gpu(cfg, 16) == 1 and kv.kv_heads_per_gpu(cfg, 4) == 2
    assert kv_cache_bytes_per_token(cfg, "bf16", 16) == by_hand
    assert serving_fit(cfg, GPU, Layout(16, 16)).kv_bytes_per_token_per_gpu == by_hand
    assert kv_bytes_per_token_per_gpu(cfg, "bf16", 16) == by_hand
    memory = predict_decode(cfg, GPU, 16, None, 1, PROMPT, NEW)["memory"]
    assert memory["weights_and_cache_bytes_per_gpu"] == weights_per_gpu(cfg, "bf16", 16) + 256 * by_hand
    assert "replicated on tp/8 GPUs" in kv.tp_cache_note(cfg)


def test_a_pipeline_stage_holds_its_own_layers_cache_and_a_hybrid_none_for_its_linear_blocks():
    """A stage's cache is its layers' (Many GPUs' PP split); a Gated DeltaNet block keeps a
    fixed state, no per-token K and V (the Many GPUs page once gave Qwen3-Next four times the
    cache, a K and V for every block)."""
    cfg = PRESETS["qwen3-next-80b-a3b"]
    per_layer = kv.layer_token_bytes(cfg, "bf16")
    assert kv_cache_bytes_per_token(cfg, "bf16") == cfg.full_attention_layers * per_layer
    fit = serving_fit(cfg, GPU, Layout(4, 1, 4))
    stages = parallel.stage_layers(cfg, Layout(4, 1, 4))
    most = max(sum(not cfg.linear_layer_flags[i] for i in layers) for layers in stages)
    assert fit.kv_bytes_per_token_per_gpu == most * per_layer
    whole = kv_cache_bytes(cfg, 1000, 2, "bf16")
    assert sum(kv_cache_bytes(cfg, 1000, 2, "bf16", 1, layers) for layers in stages) == whole


def test_the_report_shows_the_same_bytes():
    """The report's serving table is the Many GPUs page's, and says the rule."""
    from llama_lab.report.analysis_part import Precision, _parallel_tables

    for name in ("deepseek-v3", "llama-3-8b"):
        cfg = PRESETS[name]
        table = _parallel_tables(cfg, 1024, 1, Precision.of("bf16"), GPUS["H100 80GB"])[0]
        assert table.name == "parallel_serving" and table.note == kv.tp_cache_note(cfg, "bf16")
        for row in table.frame.itertuples():
            layout = Layout(row.tp * row.pp * row.replicas, row.tp, row.pp)
            stages = parallel.stage_layers(cfg, layout)
            cache = max(kv_cache_bytes_per_token(cfg, "bf16", row.tp, layers) for layers in stages)
            assert row.kv_bytes_per_token_per_gpu == cache
            held = max(sum(gpu_weight_bytes(cfg, "bf16", layout, s).values()) for s in range(row.pp))
            assert row.weights_bytes_per_gpu == held
        if name == "deepseek-v3":
            whole = table.frame[table.frame.pp == 1].kv_bytes_per_token_per_gpu
            assert (whole == 70_272).all()


@pytest.mark.parametrize(
    "gpus,rule",
    [
        ("3", "tp=3 does not divide n_heads=32: each rank holds whole query heads"),
        (str(10**12), "gpus=1000000000000 must be between 1 and 1,000,000"),
        ("64", "tp=64 does not divide n_heads=32"),
    ],
)
def test_predict_decode_refuses_a_layout_by_the_rule_parallel_uses(capsys, gpus, rule):
    argv = ["predict", "decode", "--preset", "llama-3-8b", "--gpu", "h100-80gb", "--gpus", gpus, "--json"]
    assert main(argv) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and rule in err[0] and not captured.out
    with pytest.raises(LabError) as refused:  # the same check, the same words
        check_layout(PRESETS["llama-3-8b"], Layout(int(gpus), int(gpus)))
    assert str(refused.value) in err[0]


# ---- one MFU convention ---------------------------------------------------------------------


def test_the_convention_is_palms_full_scores_without_recomputation():
    cfg = PRESETS["llama-3-8b"]
    flops = analysis.count_flops(cfg, 8192, 1)
    assert model_flops(cfg, 8192, 2) == 2 * flops.training_step == 6 * flops.forward
    assert model_flops(cfg, 8192) > 3 * flops.forward_causal  # the full T×T, not the causal half
    # PaLM's 6N + 12·L·H·Q·T, N without the embedding table (torchtitan's get_num_flop_per_token)
    assert model_flops(cfg, 8192) / 8192 == pytest.approx(flops.palm_training_per_token, rel=1e-4)
    for words in ("PaLM", "full T×T", "recomputation not counted", "dense peak"):
        assert words in MFU_CONVENTION
    assert derive_measured.achieved_flops(1.0, 1.0, 1.0).convention.startswith(MFU_CONVENTION)


def test_predict_train_and_the_many_gpus_panel_count_mfu_by_it():
    """``predict train``'s MFU was 3 × the causal forward: it now counts the model's FLOPs (the
    full T×T), 12.5 % more for Llama 3 8B at T = 8192."""
    cfg, gpu = PRESETS["llama-3-8b"], GPUS["H100 80GB"]
    r = predict_train(cfg, gpu, Layout(8, 1, 1, 3), 8192)
    per_token = model_flops(cfg, 8192) / 8192
    for key in ("bound", "estimate"):
        rate = r["tokens_per_s_per_gpu"][key]
        assert r["mfu"][key] == pytest.approx(rate * per_token / gpu.peak_bf16_flops)
    assert MFU_CONVENTION in r["conventions"]
    causal = 3 * analysis.count_flops(cfg, 8192, 1).forward_causal / 8192
    assert per_token / causal == pytest.approx(1.125, abs=1e-3)


def test_the_validation_rows_show_mfu_by_it_and_reproduce_the_sources_that_share_it():
    """llm-foundry's MFU column counts the same way: LLaMA Lab's count gives every one of its
    figures within 0.5 %; torchtitan's 8B on 8 H100s "achieves 33% to 39% MFU"."""
    from llama_lab.validation import validate

    answer = validate("train")
    assert answer["mfu_convention"] == MFU_CONVENTION
    rows = {r["id"]: r for r in answer["rows"]}
    foundry = [r for r in rows.values() if r["id"].startswith("llmfoundry")]
    assert len(foundry) == 6
    for r in foundry:
        assert r["mfu_measured"] == pytest.approx(r["mfu_source"], rel=5e-3), r["id"]
    titan = [rows["torchtitan-llama31-8b-fsdp-8xh100"], rows["torchtitan-llama31-8b-fsdp-compile-8xh100"]]
    assert all(0.33 <= r["mfu_measured"] <= 0.395 for r in titan)
    for r in rows.values():
        if r["estimate"] is not None:
            assert r["mfu_estimate"] / r["mfu_measured"] == pytest.approx(r["estimate"] / r["measured"])
    # Megatron-Bridge's model TFLOP/s halves the causal scores: below the same run by this count
    bridge = rows["megatron-bridge-llama3-8b-fp8-8xh100"]
    assert bridge["mfu_source"] < bridge["mfu_measured"]
    from llama_lab.figures.validation import rows_frame

    assert {"MFU measured %", "MFU by the source %"} <= set(rows_frame(answer["rows"]).columns)


def test_bench_train_and_the_live_pass_name_it(capsys):
    from llama_lab.experiments import bench
    from llama_lab.experiments.live import LiveSettings, live_pass, live_summary

    cfg = PRESETS["debug"]
    r = bench(cfg, device="cpu", steps=1, seq_len=16, batch=2)
    assert r["flops_convention"] == MFU_CONVENTION
    assert r["achieved_tflops"] * 1e12 * r["step_ms"] / 1e3 == pytest.approx(model_flops(cfg, 16, 2))
    live = live_pass(cfg, 16, 2, LiveSettings(device="cpu"))
    assert live.training_flops == model_flops(cfg, 16, 2)
    summary = live_summary(live).set_index("quantity")
    assert summary.loc["FLOPs convention", "value"] == MFU_CONVENTION
    argv = ["train", "--preset", "debug", "--steps", "2", "--seq-len", "16", "--batch", "2", "--json"]
    assert main(argv) == 0
    last = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert last["summary"]["flops_convention"] == MFU_CONVENTION


def test_the_report_names_it():
    from llama_lab.report.build import _validation_tables

    summary, rows = _validation_tables()
    assert MFU_CONVENTION in summary.note and "MFU measured %" in rows.frame.columns
