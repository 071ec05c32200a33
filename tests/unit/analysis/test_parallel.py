"""3-D parallelism per GPU (analysis.parallel), what fits on N GPUs (analysis.layouts) and
Korthikanti et al.'s activation formulas (analysis.korthikanti), against hand derivations,
published figures and the module itself."""

import json
import math

import pytest

from llama_lab.analysis import count_params
from llama_lab.analysis.activations import activation_bytes
from llama_lab.analysis.korthikanti import TERMS, compare, gpt_recipe, korthikanti_layer_bytes
from llama_lab.analysis.layouts import search_layouts, serving_fit, serving_fits
from llama_lab.analysis.parallel import (
    Layout,
    bubble_fraction,
    in_flight,
    parallel_memory,
    stage_layers,
    state_bytes,
)
from llama_lab.cli import main
from llama_lab.config import PRESETS
from llama_lab.errors import AnalysisError
from llama_lab.model import build_model

GIB = 2**30


def params_of(cfg, layout, stage=0):
    return parallel_memory(cfg, layout, 128, "bf16").stages[stage]["params"]


def test_one_gpu_holds_every_parameter():
    for name in ("seed-demo", "llama-2-70b", "transformer-2017"):
        cfg = PRESETS[name]
        module = sum(p.numel() for p in build_model(cfg, device="meta").parameters())
        assert params_of(cfg, Layout()) == module


def test_pipeline_stages_add_up_to_the_model():
    cfg = PRESETS["llama-2-70b"]  # 80 blocks, untied
    est = parallel_memory(cfg, Layout(gpus=3, pp=3), 128)
    assert [s["blocks"] for s in est.stages] == [27, 27, 26]
    assert [s["layers"] for s in est.stages] == ["0–26", "27–53", "54–79"]
    assert sum(s["params"] for s in est.stages) == count_params(cfg).total
    tied = PRESETS["seed-demo"].replace(tie_embeddings=True)  # the last stage keeps a copy
    stages = parallel_memory(tied, Layout(gpus=2, pp=2), 128).stages
    V, C = tied.vocab_size, tied.d_model
    assert sum(s["params"] for s in stages) == count_params(tied).total + V * C


def test_tensor_parallel_piece_of_llama_2_70b_by_hand():
    cfg = PRESETS["llama-2-70b"]  # V 32000, C 8192, L 80, H 64, G 8, D 128, F 28672
    V, C, L, H, G, D, F = 32000, 8192, 80, 64, 8, 128, 28672
    t = 8
    block = (
        H // t * D * C  # q rows
        + 2 * (G // t) * D * C  # k, v: one KV head per rank
        + C * H // t * D  # o columns
        + 3 * C * F // t  # gate, up rows; down columns
        + 2 * C
    )  # two RMSNorms, replicated
    by_hand = V // t * C + L * block + C + V // t * C
    assert params_of(cfg, Layout(gpus=8, tp=8)) == by_hand
    # tp beyond the KV heads: each rank keeps one whole KV head (replicated)
    cfg16 = cfg.replace(n_heads=64, n_kv_heads=8)
    block16 = H // 16 * D * C + 2 * D * C + C * H // 16 * D + 3 * C * F // 16 + 2 * C
    assert params_of(cfg16, Layout(gpus=16, tp=16)) == V // 16 * C * 2 + L * block16 + C


def test_zero_paper_figure_1():
    """Rajbhandari et al. 2020, figure 1: Ψ = 7.5B, K = 12, N_d = 64: 120 GB, 31.4 GB, 16.6 GB,
    1.9 GB per GPU for the baseline and stages 1, 2, 3."""
    psi = 7_500_000_000
    expected = {0: 120.0, 1: 31.4, 2: 16.6, 3: 1.9}
    for zero, gb in expected.items():
        states = state_bytes(psi, "bf16", Layout(gpus=64, zero=zero))
        assert round(sum(states.values()) / 1e9, 1) == gb


def test_activations_split_like_megatron():
    cfg = PRESETS["seed-demo"].replace(ffn_hidden=1368)  # an even FFN splits over 2 ranks
    one = parallel_memory(cfg, Layout(), 128, "bf16").per_gpu["activation_bytes"]
    assert one == activation_bytes(cfg, 128, 1, "bf16")  # the single-GPU model, unchanged
    tp = parallel_memory(cfg, Layout(gpus=2, tp=2), 128, "bf16").per_gpu["activation_bytes"]
    sp = parallel_memory(cfg, Layout(gpus=2, tp=2, sequence_parallel=True), 128, "bf16").per_gpu[
        "activation_bytes"
    ]
    assert tp == activation_bytes(cfg, 128, 1, "bf16", tp=2)
    assert sp < tp < one
    full = parallel_memory(cfg, Layout(recompute="full"), 128, "bf16").per_gpu["activation_bytes"]
    assert full == activation_bytes(cfg, 128, 1, "bf16", checkpointing=True)


def test_pipeline_in_flight_and_bubble_by_hand():
    p, m = 4, 8
    layout = Layout(gpus=4, pp=p, micro_batches=m)
    assert [in_flight(layout, s) for s in range(p)] == [4, 3, 2, 1]  # 1F1B: p − stage
    assert bubble_fraction(layout) == pytest.approx((p - 1) / (m + p - 1))
    few = Layout(gpus=4, pp=4, micro_batches=2)
    assert [in_flight(few, s) for s in range(p)] == [2, 2, 2, 1]
    v = 2
    inter = Layout(gpus=4, pp=p, micro_batches=m, schedule="interleaved", chunks=v)
    assert in_flight(inter, 0) == pytest.approx(p * (1 + (p - 1) / (p * v)))  # Korthikanti
    assert bubble_fraction(inter) == pytest.approx((p - 1) / (v * m + p - 1))
    cfg = PRESETS["llama-2-7b"]  # 32 blocks: chunks of 4
    assert stage_layers(cfg, Layout(gpus=4, pp=4, schedule="interleaved", chunks=2, micro_batches=8))[1] == [
        4,
        5,
        6,
        7,
        20,
        21,
        22,
        23,
    ]


def test_data_parallel_communication_by_hand():
    cfg = PRESETS["seed-demo"]
    P = count_params(cfg).total
    d = 4
    plain = parallel_memory(cfg, Layout(gpus=d), 128, "bf16")
    assert plain.comm_by_kind == {"tp": 0, "pp": 0, "dp": round(2 * (d - 1) / d * 2 * P)}
    zero1 = parallel_memory(cfg, Layout(gpus=d, zero=1), 128, "bf16")
    assert zero1.comm_by_kind["dp"] == plain.comm_by_kind["dp"]  # ZeRO-1 = DP's bytes
    zero3 = parallel_memory(cfg, Layout(gpus=d, zero=3), 128, "bf16")
    assert zero3.comm_by_kind["dp"] == round(3 * (d - 1) / d * 2 * P)  # 1.5× data parallel


def test_tensor_parallel_communication_by_hand():
    cfg = PRESETS["seed-demo"].replace(ffn_hidden=1368)  # C 512, L 4
    t, T, C, L, N = 2, 128, 512, 4, 128
    est = parallel_memory(cfg, Layout(gpus=2, tp=2), T, "bf16")
    M = N * C * 2
    ring = 2 * (t - 1) / t
    expected = L * 4 * ring * M + ring * M + ring * M + 3 * ring * 4 * N
    assert est.comm_by_kind["tp"] == round(expected)


def test_context_parallel_by_hand():
    """cp ranks hold T/cp of each sequence: a rank's activations at T are one rank's at T/cp
    without context parallelism; the weights are sharded over dp · cp (ZeRO-3 on 8 GPUs: an
    eighth either way); each rank passes its K and V chunk around the ring: LLaMA-3-8B's
    32 × 2 × 8 heads × 128 × 2 B = 131,072 bytes a token, of 4,096 tokens, cp − 1 = 1 time
    forward and twice backward."""
    cfg = PRESETS["llama-3-8b"]
    cp = parallel_memory(cfg, Layout(gpus=8, zero=3, cp=2), 8192, "bf16")
    half = parallel_memory(cfg, Layout(gpus=8, zero=3), 4096, "bf16")
    whole = parallel_memory(cfg, Layout(gpus=8, zero=3), 8192, "bf16")
    assert cp.stages[0]["activation_per_micro_batch"] == half.stages[0]["activation_per_micro_batch"]
    for key in ("params_bytes", "grads_bytes", "optimizer_bytes"):
        assert cp.per_gpu[key] == whole.per_gpu[key]  # sharded over dp · cp = 8
    assert cp.layout["dp"] == 4 and "CP2 · DP4" in Layout(gpus=8, zero=3, cp=2).label()
    assert cp.comm_by_kind["cp"] == 3 * 1 * 131_072 * 4096
    assert cp.comm_by_kind["dp"] == whole.comm_by_kind["dp"]  # gradients over the 8 replicas
    assert cp.global_batch == 4  # dp · m · micro-batch: the cp ranks share their sequences
    with pytest.raises(AnalysisError, match=r"2·cp = 4 does not divide seq_len=8190"):
        parallel_memory(cfg, Layout(gpus=8, cp=2), 8190)
    with pytest.raises(AnalysisError, match=r"tp=2 × pp=1 × cp=3 = 6 does not divide 8"):
        parallel_memory(cfg, Layout(gpus=8, tp=2, cp=3), 8190)


def test_expert_parallel_by_hand():
    """Mixtral 8x7B on 8 GPUs, ZeRO-1, ep 8: each GPU holds one of each block's 8 experts
    (32 × 3 × 4096 × 14336 parameters), every other weight whole; the dense part's optimizer
    state sharded over the 8 replicas, the experts' over 8 / 8 = 1 (no other rank holds them);
    per micro-batch each MoE block sends 4 all-to-alls of 7/8 of the 4,096 × 2 × 4,096 routed
    bf16 values."""
    cfg = PRESETS["mixtral-8x7b"]
    est = parallel_memory(cfg, Layout(gpus=8, zero=1, ep=8), 4096, "bf16")
    whole = parallel_memory(cfg, Layout(gpus=8, zero=1), 4096, "bf16")
    experts = 32 * 8 * 3 * 4096 * 14336
    one = experts // 8
    assert whole.stages[0]["params"] - est.stages[0]["params"] == experts - one
    dense = est.stages[0]["params"] - one
    assert est.per_gpu["optimizer_bytes"] == math.ceil(12 * dense / 8) + 12 * one
    assert est.per_gpu["params_bytes"] == 2 * (dense + one)  # ZeRO-1 keeps the weights whole
    assert est.comm_by_kind["ep"] == round(32 * 4 * 4096 * 2 * 4096 * 2 * 7 / 8)
    assert "EP8" in Layout(gpus=8, ep=8).label()
    with pytest.raises(AnalysisError, match="needs experts"):
        parallel_memory(PRESETS["llama-3-8b"], Layout(gpus=8, ep=2), 4096)
    with pytest.raises(AnalysisError, match="ep=3 does not divide n_experts=8"):
        parallel_memory(cfg, Layout(gpus=6, ep=3), 4096)
    with pytest.raises(AnalysisError, match=r"ep=8 does not divide dp·cp = 4"):
        parallel_memory(cfg, Layout(gpus=8, tp=2, ep=8), 4096)


def test_every_refusal_names_its_rule():
    cfg = PRESETS["llama-2-70b"]  # H 64, G 8, F 28672, L 80
    cases = [
        (Layout(gpus=12, tp=8), "does not divide 12"),
        (Layout(gpus=3, tp=3), "does not divide n_heads=64"),
        (Layout(gpus=160, pp=160), "more than n_layers=80"),
        (Layout(gpus=2, zero=4), "zero=4"),
        (Layout(gpus=2, pp=2, chunks=2), "only the interleaved schedule"),
        (
            Layout(gpus=3, pp=3, schedule="interleaved", chunks=2, micro_batches=6),
            "does not divide n_layers=80",
        ),
        (Layout(gpus=4, pp=4, schedule="interleaved", chunks=2, micro_batches=6), "not a multiple of pp=4"),
        (Layout(gpus=2, recompute="some"), "recompute='some'"),
    ]
    for layout, rule in cases:
        with pytest.raises(AnalysisError, match=rule):
            parallel_memory(cfg, layout, 4096)
    gqa = PRESETS["seed-demo"].replace(n_heads=12, n_kv_heads=3, d_model=768)
    with pytest.raises(AnalysisError, match="n_kv_heads divide tp"):
        parallel_memory(gqa, Layout(gpus=2, tp=2), 128)
    with pytest.raises(AnalysisError, match="ffn_hidden=1365"):
        parallel_memory(PRESETS["seed-demo"], Layout(gpus=2, tp=2), 128)
    with pytest.raises(AnalysisError, match="seq_len=127"):
        parallel_memory(PRESETS["llama-2-7b"], Layout(gpus=2, tp=2, sequence_parallel=True), 127)


def test_70b_and_405b_fit_on_several_gpus():
    for name, gpus in (("llama-2-70b", 8), ("llama-3.1-405b", 16)):
        cfg = PRESETS[name]
        best = serving_fits(cfg, "H100 80GB", gpus, batch=1, seq_len=4096)[0]
        assert best.max_context_at_batch > 4096 and best.max_batch_at_seq_len > 0, best
    # 405B in bf16 needs 811 GB of weights: 8 H100s (640 GB) cannot hold it, 8 H200s can
    cfg = PRESETS["llama-3.1-405b"]
    assert serving_fit(cfg, "H100 80GB", Layout(8, 8, 1)).max_context_at_batch == 0
    assert serving_fit(cfg, "H200 141GB", Layout(8, 8, 1)).max_context_at_batch > 100_000


def test_serving_fit_by_hand():
    cfg = PRESETS["llama-2-70b"]
    fit = serving_fit(cfg, "H100 80GB", Layout(8, 8, 1), batch=1, seq_len=4096)
    # per GPU: 1/8 of each split weight in bf16, the norms whole; one KV head of 80 layers
    per_token = 80 * 2 * 1 * 128 * 2
    assert fit.kv_bytes_per_token_per_gpu == per_token
    weights = 2 * params_of(cfg, Layout(gpus=8, tp=8))
    assert fit.weights_bytes_per_gpu == weights
    free = (81_559 * 2**20 - 300 * 10**6) - weights  # H100: reported less the CUDA context
    assert fit.max_context_at_batch == free // per_token
    assert fit.max_batch_at_seq_len == free // (per_token * 4096)


def test_layout_search_lists_fitting_layouts_cheapest_first():
    cfg = PRESETS["llama-2-70b"]
    rows = search_layouts(cfg, 64, "H100 80GB", seq_len=4096)
    assert rows and all(r.fits for r in rows)
    assert [r.step_s for r in rows] == sorted(r.step_s for r in rows)
    assert all(r.tp * r.pp * r.dp == 64 for r in rows)
    assert all(r.total_bytes_per_gpu <= 81_559 * 2**20 - 300 * 10**6 for r in rows)  # usable
    assert not search_layouts(cfg, 1, "H100 80GB", seq_len=4096)  # 70B never fits one GPU


def test_korthikanti_terms_and_table_2():
    s, b, h, a, t = 2048, 1, 12288, 96, 8  # their GPT-3 175B
    assert sum(f for _, f, _, _ in TERMS) == 34 and sum(g for _, _, g, _ in TERMS) == 5
    assert sum(f for _, f, _, rep in TERMS if rep) == 10  # what TP leaves replicated
    sbh = s * b * h
    assert korthikanti_layer_bytes(s, b, h, a, 1, "none") == sbh * (34 + 5 * a * s / h)
    assert korthikanti_layer_bytes(s, b, h, a, t, "tp") == sbh * (10 + 24 / t + 5 * a * s / (h * t))
    assert korthikanti_layer_bytes(s, b, h, a, t, "tp+sp+selective") == sbh * 34 / t
    assert korthikanti_layer_bytes(s, b, h, a, t, "full") == 2 * sbh
    # §5: for 175B, 5as/h = 80 — the attention core outweighs the other 34 terms 2.35×
    assert 5 * a * s / h == 80


def test_korthikanti_beside_ours_differences_add_up():
    cfg = PRESETS["llama-2-70b"]
    r = compare(cfg, 4096, 1, 8)
    s, b, h, a = 4096, 1, 8192, 64
    assert r.korthikanti_total == 34 * s * b * h + 5 * a * s * s * b
    assert r.korthikanti_total + sum(d["bytes"] for d in r.differences) == r.ours_gpt_total
    one = gpt_recipe(cfg).replace(n_layers=1)
    two = gpt_recipe(cfg).replace(n_layers=2)
    per_layer = activation_bytes(two, s, b, "bf16") - activation_bytes(one, s, b, "bf16")
    assert r.ours_gpt_total == per_layer
    variants = {v["variant"]: v for v in r.variants}
    assert variants["full"]["korthikanti_bytes"] == variants["full"]["ours_bytes"] == 2 * s * b * h


def test_parallel_cli(capsys):
    assert (
        main(
            [
                "parallel",
                "--preset",
                "llama-3.1-405b",
                "--gpus",
                "512",
                "--tp",
                "8",
                "--pp",
                "16",
                "--zero",
                "1",
                "--seq-len",
                "8192",
                "--sequence-parallel",
                "--recompute",
                "selective",
                "--json",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    for key in ("params_bytes", "grads_bytes", "optimizer_bytes", "activation_bytes", "total_bytes"):
        assert out["per_gpu"][key] > 0
    assert out["dp"] == 4 and out["comm_bytes_per_step"] > 0
    assert out["per_gpu"]["total_bytes"] == max(s["total_bytes"] for s in out["stages"])
    assert out["per_gpu"]["total_bytes"] < 141 * 10**9
    assert main(["parallel", "--preset", "llama-2-70b", "--gpus", "8", "--tp", "3"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "tp=3" in err
    assert math.isfinite(out["bubble_fraction"])


def test_the_fewest_gpus_that_fit():
    from llama_lab.analysis.layouts import fewest_gpus

    cfg = PRESETS["llama-3.1-405b"]
    n = fewest_gpus(cfg, "H100 80GB", 8192)
    assert n and search_layouts(cfg, n, "H100 80GB", 8192)
    assert not search_layouts(cfg, n // 2, "H100 80GB", 8192)
    serve = fewest_gpus(cfg, "H100 80GB", 8192, serving=True)
    assert serving_fits(cfg, "H100 80GB", serve, 1, 8192)[0].max_batch_at_seq_len >= 1
    assert serving_fits(cfg, "H100 80GB", serve // 2, 1, 8192)[0].max_batch_at_seq_len == 0
    assert fewest_gpus(PRESETS["seed-demo"], "H100 80GB", 128) == 1
