"""Figures and display tables: built, and holding the right totals."""

import math

import pandas as pd
import pytest

from llama_lab import analysis, units
from llama_lab.config import PRESETS
from llama_lab.figures import common
from llama_lab.figures import kv as fkv
from llama_lab.figures import params as fparams
from llama_lab.figures import rooflines as frooflines
from llama_lab.runtime.hardware import GPUS

DEMO = PRESETS["seed-demo"]


def test_sunburst_rings_sum_to_their_parents():
    params = analysis.count_params(DEMO)
    trace = fparams.params_sunburst(params).data[0]
    values = dict(zip(trace.ids, trace.values))
    parents = dict(zip(trace.ids, trace.parents))
    assert values["total"] == 43_780_608 and trace.branchvalues == "total"
    for node in values:
        children = [child for child, parent in parents.items() if parent == node]
        if children:
            assert sum(values[c] for c in children) == values[node], node
    assert values["attention/k_proj"] == 4 * 512 * 128  # GQA: 2 KV heads × 64
    assert "positional" not in values  # RoPE has no table


def test_tied_embeddings_drop_the_head_from_the_sunburst():
    trace = fparams.params_sunburst(analysis.count_params(DEMO.replace(tie_embeddings=True))).data[0]
    values = dict(zip(trace.ids, trace.values))
    assert "lm_head" not in values and values["total"] == 43_780_608 - 32000 * 512


def test_block_table_is_one_block():
    flops = analysis.count_flops(DEMO, 128)
    table = fparams.block_table(DEMO, flops).set_index("tensor")
    assert table.params.sum() == 2_753_024
    # each weight matrix: 2 FLOPs × its weights × B·T = 128 tokens — not its component's total
    assert table.loc["q_proj", "forward_flops"] == 2 * 128 * 512 * 512  # 67,108,864
    assert table.loc["k_proj", "forward_flops"] == 2 * 128 * 512 * 128  # 2 KV heads × 64
    assert table.loc["gate_proj", "forward_flops"] == 2 * 128 * 512 * 1365
    scores = table.loc["attention scores (QKᵀ, AV)", "forward_flops"]
    assert scores == 4 * 128 * 128 * 8 * 64  # 2 matmuls · 2 · T² · H · D
    assert table.loc["input_layernorm", "forward_flops"] == 0  # element-wise, counted apart


@pytest.mark.parametrize("name", list(PRESETS))
@pytest.mark.parametrize("bias", [False, True])
def test_block_table_times_layers_plus_head_is_the_forward_count(name, bias):
    if bias and PRESETS[name].is_mla:
        pytest.skip("MLA is modelled without biases")
    if PRESETS[name].is_encoder_decoder:  # its encoder and cross-attention: test_marian.py
        pytest.skip("the block table is a decoder block's; an encoder-decoder's forward has more")
    # transformer-2017: ReLU, two matrices; Llama 4's expert block has no biases (the attention's only)
    no_ffn_bias = {"mlp_bias": False} if PRESETS[name].moe_style == "llama4" else {}
    cfg = PRESETS[name].replace(bias=bias, **no_ffn_bias)
    flops = analysis.count_flops(cfg, 96, batch=3)
    # blocks of each kind (dense or sparse; attention or Gated DeltaNet) times their count
    kinds = list(zip(cfg.moe_layer_flags, cfg.linear_layer_flags))
    tables = [(fparams.block_table(cfg, flops, kinds.index(kind)), kinds.count(kind)) for kind in set(kinds)]
    heads = flops.by_component["lm_head"] + flops.by_component.get("pooler", 0)  # (BERT's pooler)
    assert sum(t.forward_flops.sum() * n for t, n in tables) + heads == flops.forward
    attention = sum(t[t.component == "attention"].forward_flops.sum() * n for t, n in tables)
    mixing = sum(flops.by_component.get(k, 0) for k in ("attention_scores", "delta_rule", "indexer_scores"))
    assert attention == flops.by_component["attention_proj"] + mixing
    assert sum(t[t.component == "ffn"].forward_flops.sum() * n for t, n in tables) == flops.by_component[
        "ffn"
    ] + flops.by_component.get("router", 0)  # MoE: router + k experts


def test_scores_overtake_the_ffn_at_one_and_a_half_ffn_widths():
    # per token: scores 4·T·H·D·L, FFN 2·3·C·F·L; with H·D = C they cross at T > 1.5·F
    assert analysis.scores_overtake_ffn_at(DEMO) == math.floor(1.5 * 1365) + 1  # 2048
    relu = DEMO.replace(ffn_type="relu", ffn_hidden=2048)  # 4·T·C vs 2·2·C·F: T > F
    assert analysis.scores_overtake_ffn_at(relu) == 2049
    assert analysis.scores_overtake_ffn_at(DEMO, upper=1000) is None


def test_flops_chart_stacks_to_the_forward_per_token():
    counts = [analysis.count_flops(DEMO, t) for t in (16, 128, 4096)]
    fig = fparams.flops_vs_seq_len(counts, crossover=2048, current_seq_len=128)
    assert [trace.name for trace in fig.data] == list(fparams.FLOP_COMPONENTS)
    for i, count in enumerate(counts):
        stacked = sum(trace.y[i] for trace in fig.data)
        assert stacked == pytest.approx(count.forward / count.tokens)
    assert {shape.x0 for shape in fig.layout.shapes} == {2048, 128}
    # labels sit at log10 positions on the log axis (plotly reads annotation x as an exponent)
    assert {a.x for a in fig.layout.annotations} == {math.log10(2048), math.log10(128)}
    # the x range is the sweep's; a label right of the middle is written left of its line
    assert tuple(fig.layout.xaxis.range) == (math.log10(16), math.log10(4096))
    sides = {round(10**a.x): a.xanchor for a in fig.layout.annotations}
    assert sides == {2048: "right", 128: "left"}
    # two labels never share a line: LLaMA-3.1-405B's crossover (79,873) and its T (131,072)
    # are both right of the middle, written leftwards, and would overlap at one height
    assert len({a.y for a in fig.layout.annotations}) == 2
    assert fparams.flops_bar(counts[1]).data[0].y[0] == counts[1].by_component["attention_proj"]


def test_kv_fit_frame_for_the_demo_on_an_h100():
    frame = fkv.kv_fit_frame(DEMO, GPUS["H100 80GB"], seq_len=128, batch=1, dtype="bf16")
    rows = frame.set_index("attention")
    per_token = {"MHA": 2 * 4 * 8 * 64 * 2, "GQA": 2 * 4 * 2 * 64 * 2, "MQA": 2 * 4 * 1 * 64 * 2}
    assert rows.kv_bytes_per_token.to_dict() == per_token
    assert rows.loc["GQA", "is_current"] and not rows.loc["MHA", "is_current"]
    free = (81_559 * 2**20 - 300 * 10**6) - 2 * 43_780_608  # H100 usable bytes minus bf16 weights
    assert rows.loc["GQA", "max_context_at_batch"] == free // 2048
    assert rows.loc["GQA", "max_batch_at_seq_len"] == free // (128 * 2048)


def test_variants_are_not_repeated_when_gqa_is_impossible():
    two_heads = PRESETS["debug"].replace(n_heads=2, n_kv_heads=2)  # no divisor between 1 and 2
    assert list(analysis.attention_variants(two_heads, distinct=True)) == ["mha", "mqa"]
    assert len(fkv.kv_fit_frame(two_heads, GPUS["L4"], 64, 1, "bf16")) == 2


def test_memory_curve_is_weights_plus_cache():
    frame = fkv.kv_memory_curve_frame(DEMO, (128, 1024), batch=2, dtype="fp32")
    mqa = frame[(frame.attention == "mqa") & (frame.context_len == 1024)].iloc[0]
    assert mqa.kv_cache_bytes == 2 * 4 * 1 * 64 * 4 * 2 * 1024  # K,V·L·G·D·fp32·B·T
    assert mqa.total_bytes == mqa.weight_bytes + mqa.kv_cache_bytes
    fig = fkv.kv_memory_vs_context(frame, GPUS["L4"])
    assert len(fig.data) == 3 and fig.layout.shapes[0].y0 == pytest.approx(
        (23_034 * 2**20 - 300 * 10**6) / 2**30
    )


@pytest.mark.parametrize("n_heads,n_kv_heads", [(8, 2), (8, 8), (8, 1), (128, 8)])
def test_sharing_diagram_links_each_query_head_to_its_kv_head(n_heads, n_kv_heads):
    fig = fkv.kv_sharing_diagram(n_heads, n_kv_heads, max_heads=64)
    lines, queries, kvs = fig.data
    shown = min(n_heads, 64)
    n_rep = n_heads // n_kv_heads
    assert len(queries.x) == shown and len(kvs.x) == (shown - 1) // n_rep + 1
    segments = [(lines.x[i], lines.x[i + 1]) for i in range(0, len(lines.x), 3)]
    for q, kv_x in segments:  # query q reads KV head q // n_rep
        assert kv_x == kvs.x[q // n_rep]
    assert ("first 64" in fig.layout.title.text) == (n_heads > 64)


def test_roofline_points_and_figure():
    points = frooflines.roofline_points(DEMO, GPUS["H100 80GB"], (1, 64), 1024, "bf16")
    assert len(points) == 3 * 2
    single = points[(points.attention == "gqa") & (points.batch == 1)].iloc[0]
    reference = analysis.roofline(DEMO, "H100 80GB", 1, 1024, "bf16")
    assert single.tokens_per_s == reference.tokens_per_s and single.bound == "memory"
    fig = frooflines.roofline_figure(points, GPUS["H100 80GB"])
    roof = fig.data[0]
    assert max(roof.y) == GPUS["H100 80GB"].peak_bf16_flops
    assert roof.x[1] == pytest.approx(GPUS["H100 80GB"].ridge_point)
    assert all(y <= max(roof.y) for trace in fig.data[1:] for y in trace.y)
    throughput = frooflines.decode_throughput(points)
    assert [t.name for t in throughput.data] == [
        f"{kind} {what}" for kind in ("MHA", "GQA", "MQA") for what in ("bound", "estimate")
    ]
    for bound, estimate in zip(throughput.data[::2], throughput.data[1::2]):
        assert all(e <= b for b, e in zip(bound.y, estimate.y))  # no estimate beats its roof
        low = estimate.y - estimate.error_y.arrayminus
        high = estimate.y + estimate.error_y.array
        assert all(lo <= e <= hi for lo, e, hi in zip(low, estimate.y, high))


def test_one_training_curves_figure_serves_every_page():
    """The two copies (a frame-based one for the Architecture page, a comparison-based one for
    the Gradient norms page and the report) are one: the experiment kind's."""
    from llama_lab.experiments import training
    from llama_lab.ui.panels import ablation

    assert not any(hasattr(module, "training_curves") for module in (fparams, fkv, frooflines, common))
    assert ablation.training_curves is training.training_curves


# ---- beyond int64: the largest model at the largest workload ------------------------------------
HUGE = PRESETS["llama-3.1-405b"].replace(
    d_model=131_072, n_layers=4_096, max_seq_len=16_777_216, vocab_size=4_194_304
)


def test_display_number_turns_only_integers_beyond_int64_into_floats():
    assert common.display_number(2**63 - 1) == 2**63 - 1 and isinstance(common.display_number(2**63 - 1), int)
    assert common.display_number(2**63) == 2.0**63 and isinstance(common.display_number(2**63), float)
    assert isinstance(common.display_number(-(2**63) - 1), float)
    assert common.display_number(True) is True and common.display_number("x") == "x"
    frame = pd.DataFrame(
        {"name": ["a", "b"], "flops": [10**30, 7], "small": [1, 2], "wide": [2**63, 1]}
    )  # pandas infers uint64 here
    shown = common.display_frame(frame)
    assert shown.flops.dtype == "float64" and shown.flops.iloc[0] == 1e30
    assert shown.wide.dtype == "float64"
    assert shown.small.dtype == "int64" and shown.name.tolist() == ["a", "b"]
    assert frame.flops.iloc[0] == 10**30  # the original keeps exact ints


def test_figures_at_the_limits_serialise():
    # 4,096 blocks × d = 131,072 at B = 65,536, T = 16,777,216: ~4·10²⁸ forward FLOPs
    flops = analysis.count_flops(HUGE, 16_777_216, 65_536)
    assert flops.forward > 2**63
    for fig in (
        fparams.flops_bar(flops),
        fparams.params_sunburst(analysis.count_params(HUGE)),
        fparams.flops_vs_seq_len([analysis.count_flops(HUGE, t, 65_536) for t in (16, 16_777_216)]),
        fkv.kv_memory_vs_context(
            fkv.kv_memory_curve_frame(HUGE, (16, 16_777_216), 65_536, "fp32"), GPUS["H200 141GB"]
        ),
    ):
        fig.to_json()  # plotly's encoder: no error
    assert fparams.flops_bar(flops).data[0].y[2] == pytest.approx(flops.by_component["ffn"])
    table = fparams.block_table(HUGE, flops)
    assert (
        table.forward_flops.sum() * HUGE.n_layers + flops.by_component["lm_head"] == flops.forward
    )  # exact in the table itself
    common.display_frame(table).to_json()


@pytest.mark.parametrize(
    "value,unit,text",
    [
        (1_234_567, "", "1.23 M"),
        (999_999, "", "1 M"),  # rounds up into the next prefix
        (7.15e9, "FLOP", "7.15 GFLOP"),
        (1.84e15, "FLOP", "1.84 PFLOP"),
        (3.2e18, "FLOP", "3.2 EFLOP"),
        (4.5e21, "", "4.5 Z"),
        (6e24, "FLOP", "6 YFLOP"),
        (4.01e28, "FLOP", "40,100 YFLOP"),  # past 999 Y: whole Y
        (512, "FLOP", "512 FLOP"),
        (0.5, "", "0.5"),
    ],
)
def test_human_count_prefixes(value, unit, text):
    assert units.human_count(value, unit) == text


def test_human_bytes_and_params():
    assert units.human_bytes(1536) == "1.5 KiB" and units.human_bytes(12) == "12 B"
    assert units.human_bytes(80 * 2**60) == "80 EiB" and units.human_bytes(3 * 2**70) == "3 ZiB"
    assert units.human_bytes(2**90) == "1,024 YiB" and units.human_bytes(None) == "—"
    assert units.human_bytes(2**20 - 1) == "1 MiB"
    assert units.human_params(6_738_415_616) == "6.74 bn"
    assert units.human_params(405_853_388_800) == "406 bn" and units.human_params(999) == "999"
    assert units.human_params(1.6e15) == "1,600 tn"


def test_every_axis_grows_its_margin_and_the_legend_sits_below_the_x_title():
    flops = analysis.count_flops(DEMO, 128)
    points = frooflines.roofline_points(DEMO, GPUS["H100 80GB"], (1, 64), 1024, "bf16")
    for fig in (
        fparams.flops_vs_seq_len([flops]),
        frooflines.decode_throughput(points),
        frooflines.roofline_figure(points, GPUS["H100 80GB"]),
        fparams.flops_bar(flops),
    ):
        axes = [fig.layout[name] for name in fig.layout if name.startswith(("xaxis", "yaxis"))]
        assert axes and all(axis.automargin for axis in axes)
        # in the figure's bottom margin (container coordinates), which it pushes down
        assert fig.layout.legend.yref == "container" and fig.layout.legend.y == 0


@pytest.mark.slow
def test_plots_do_not_import_streamlit():
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import sys, llama_lab.figures.params, llama_lab.figures.kv, llama_lab.figures.rooflines, "
        "llama_lab.seed; sys.exit('streamlit' in sys.modules)"
    )
    root = Path(__file__).resolve().parents[3]
    assert subprocess.run([sys.executable, "-c", code], cwd=root).returncode == 0


def test_the_gpus_memory_line_is_drawn_over_the_stage_bars():
    """LLaMA-3.1-405B's stages pass an H100's 80 GB on few GPUs: the capacity line stays
    visible over the stacked bars."""
    from llama_lab.analysis.parallel import Layout, parallel_memory
    from llama_lab.figures.parallel import stage_memory_figure

    est = parallel_memory(PRESETS["llama-3.1-405b"], Layout(8, 8, 1, 1, True), 2048, "bf16")
    fig = stage_memory_figure(est, "H100 80GB", 80 * 10**9)
    (line,) = fig.layout.shapes
    assert (line.layer, line.line.width, line.y0) == ("above", 2, 80 * 10**9)
