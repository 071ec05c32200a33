"""One number formatter (units), one way to show a table (figures.common), decade ticks on every
log axis, one colour per norm arrangement and attention kind, and the report's KV chart and
long tables."""

import math

import pandas as pd
import plotly.graph_objects as go
import pytest

from llama_lab import analysis, report, units
from llama_lab.config import PRESETS
from llama_lab.figures import common, kv, params, rooflines
from llama_lab.runtime.hardware import GPUS

DEMO = PRESETS["seed-demo"]
H100 = GPUS["H100 80GB"]


@pytest.mark.parametrize(
    "value,text",
    [
        (1020 * 2**30, "1,020 GiB"),
        (1000 * 2**30, "1,000 GiB"),  # 1000–1023: whole numbers
        (1024 * 2**30, "1 TiB"),
        (0.9999 * 2**40, "1 TiB"),  # rounds into the next unit
        (2**90, "1,024 YiB"),
        (1000, "1,000 B"),
        (999, "999 B"),
        (1536, "1.5 KiB"),
    ],
)
def test_bytes_never_read_1e03(value, text):
    assert units.human_bytes(value) == text


@pytest.mark.parametrize(
    "value,text",
    [
        (6_738_415_616, "6.74 bn"),
        (405_853_388_800, "406 bn"),
        (1.6e15, "1,600 tn"),
        (1.2e12, "1.2 tn"),
        (43_780_608, "43.8 M"),
        (1500, "1.5 k"),
        (999, "999"),
    ],
)
def test_parameter_counts_say_bn_and_tn_never_b(value, text):
    assert units.human_params(value) == text


def test_no_unit_family_writes_scientific_notation():
    for value in (1e3, 9.995e5, 1e27, 4.01e28, 1e35, 123.456, 0.5, 1e-5):
        for text in (units.human_count(value, "FLOP"), units.human_bytes(value), units.human_params(value)):
            assert "e+" not in text and "e-" not in text, text
            number = text.split(" ")[0]
            assert float(number.replace(",", "")) < 1000 or "," in number, text
    assert units.human_count(7.15e9, "FLOP/s") == "7.15 GFLOP/s"  # SI for FLOPs
    assert units.human_count(1.84e15, "FLOP") == "1.84 PFLOP"


@pytest.mark.parametrize(
    "value,text",
    [
        (7_146_569_728, "7,146,569,728"),
        (10**30, f"{10**30:,}"),
        (5.54521, "5.545"),
        (0.0123456, "0.01235"),
        (12345.67, "12,346"),
        (2.0, "2"),
        (1e-7, "1×10⁻⁷"),
        (3.2e18, "3.2×10¹⁸"),
        (float("nan"), "—"),
        (None, "—"),
        (True, "✓"),
        (False, "✗"),
        ("text", "text"),
    ],
)
def test_a_table_cell(value, text):
    assert common.format_cell(value) == text


def test_headers_are_readable_and_exports_keep_the_raw_names():
    assert common.column_label("bytes_per_token") == "bytes per token"
    assert common.column_label("n_kv_heads") == "n KV heads"
    assert common.column_label("time_per_step_ms") == "time per step (ms)"
    assert common.column_label("tokens_per_s") == "tokens per second"
    assert common.column_label("unsharded (1 GPU)") == "unsharded (1 GPU)"
    frame = pd.DataFrame(
        {"kv_bytes_per_token": [8192, None], "loss": [5.54521, math.nan], "flops": [10**30, 7]}, dtype=object
    )
    text = common.table_text(frame)
    assert list(text.columns) == ["KV bytes per token", "loss", "flops"]
    assert text.values.tolist() == [["8,192", "5.545", f"{10**30:,}"], ["—", "—", "7"]]
    assert list(frame.columns) == ["kv_bytes_per_token", "loss", "flops"]  # untouched


def test_the_pages_styler_keeps_numbers_and_shows_the_report_text():
    frame = pd.DataFrame({"params": [262_144, 65_536], "share": [0.0952, math.nan], "flops": [10**30, 3]})
    styler = common.table_styler(frame)
    assert styler.data.params.tolist() == [262_144, 65_536]  # sortable numbers
    assert isinstance(styler.data.flops.iloc[0], float)  # Arrow takes it
    cells = [
        [c["display_value"] for c in row if c["type"] == "td"]
        for row in styler._translate(False, False)["body"]
    ]
    assert cells == [["262,144", "0.0952", f"{10**30:,}"], ["65,536", "—", "3"]]


def _log_axes(fig: go.Figure):
    return [
        fig.layout[n] for n in fig.layout if n.startswith(("xaxis", "yaxis")) and fig.layout[n].type == "log"
    ]


def _figures():
    points = rooflines.roofline_points(DEMO, H100, rooflines.ROOFLINE_BATCHES, 1024, "bf16")
    fit = kv.kv_fit_frame(DEMO, H100, 128, 1, "bf16")
    curve = kv.kv_memory_curve_frame(DEMO, kv.kv_context_lengths(DEMO, fit, 128), 1, "bf16")
    counts = [analysis.count_flops(DEMO, t) for t in common.sweep_lengths(4096)]
    return {
        "roofline": rooflines.roofline_figure(points, H100),
        "throughput": rooflines.decode_throughput(points),
        "kv": kv.kv_memory_vs_context(curve, H100),
        "flops": params.flops_vs_seq_len(counts),
    }


def test_every_log_axis_is_labelled_at_decades_only():
    figures = _figures()
    for name, fig in figures.items():
        axes = _log_axes(fig)
        assert axes, name
        for axis in axes:
            exponents = [math.log10(v) for v in axis.tickvals]
            assert len(exponents) >= 2 and all(abs(e - round(e)) < 1e-9 for e in exponents)
            low, high = axis.range
            assert all(low - 1e-9 <= e <= high + 1e-9 for e in exponents), name
            assert all("e" not in t and "B" not in t for t in axis.ticktext), axis.ticktext
    assert figures["roofline"].layout.yaxis.ticktext[:2] == ("1T", "10T")
    assert figures["kv"].layout.xaxis.ticktext[:4] == ("10", "100", "1k", "10k")


def test_a_log_axis_within_one_decade_still_gets_two_labels():
    fig = common.layout_figure(go.Figure(go.Scatter(x=[1, 2], y=[300, 700])), "t")
    fig = common.layout_figure(fig.update_yaxes(type="log"), "t")
    assert fig.layout.yaxis.tickvals == (100.0, 1000.0)
    assert fig.layout.yaxis.ticktext == ("100", "1k")
    assert fig.layout.xaxis.exponentformat == "SI"  # never "1B" for 1e9


def test_one_colour_per_arrangement_and_attention_kind():
    colours = [*common.ARRANGEMENT_COLORS.values(), *common.ATTENTION_COLORS.values()]
    assert len(set(colours)) == len(colours) == 6  # Post-LN, Pre-LN; MLA, MHA, GQA, MQA
    others = {*common.COMPONENT_COLORS.values(), *common.GROUP_PALETTE}
    assert others.isdisjoint(colours)  # red means Post-LN wherever it is drawn
    for name, fig in _figures().items():
        for trace in fig.data:
            kind = trace.name.split(" ")[0].lower() if trace.name else ""
            if kind in common.ATTENTION_COLORS:
                assert trace.line.color == common.ATTENTION_COLORS[kind], (name, trace.name)


def test_the_report_kv_chart_covers_the_kv_pages_range():
    built = report.build_report(DEMO, 128, 1)
    fig = next(f.figure for f in built.figures if f.name == "kv_memory_vs_context")
    fit = kv.kv_fit_frame(DEMO, H100, 128, 1, "bf16")
    lengths = kv.kv_context_lengths(DEMO, fit, 128)
    assert tuple(fig.data[0].x) == lengths and lengths[-1] >= 32_768
    # twice the longest context that fits decides it once that passes 32,768
    big = PRESETS["llama-2-70b"]
    fit = kv.kv_fit_frame(big, H100, 4096, 1, "bf16")
    assert kv.kv_context_lengths(big, fit, 4096)[-1] == max(
        32_768, 4096, 2 * int(fit.max_context_at_batch.max())
    )


def test_long_tables_are_summarised_in_html_and_md_and_whole_in_exports():
    frame = pd.DataFrame({"label": ["a", "b"] * 40, "step": range(80), "loss": [1.5] * 80})
    base = report.build_report(PRESETS["debug"], 8, 1)
    import dataclasses

    built = dataclasses.replace(
        base, tables=base.tables + (common.Table("runs_steps", "Every step", "Runs", frame),)
    )
    summary = report.formats.table_summary(built.table("runs_steps"))
    assert summary.startswith("80 rows × 3 columns") and "step 0–79" in summary
    assert "label: a; b" in summary and "runs_steps.csv" in summary
    html, md = report.render(built, "html"), report.render(built, "md")
    assert "80 rows × 3 columns" in html and '<td class="num">79</td>' not in html
    assert "80 rows × 3 columns" in md and "| b | 79 |" not in md
    assert len(report.render(built, "json")) > 0
    assert ".table-wrap { max-width: 100%; overflow-x: auto;" in html
    assert "table { border-collapse: collapse; width: 100%;" in html
