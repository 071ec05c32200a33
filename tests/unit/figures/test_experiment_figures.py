"""llama_lab.experiment_plots: every figure and table carries exactly the numbers of the result
it was built from (results made by hand, so every expected value is written out here)."""

import dataclasses
import math

import plotly.graph_objects as go
import pytest

from llama_lab import experiments
from llama_lab.config import PRESETS
from llama_lab.experiments import (
    DecodeBench,
    DecodeRow,
    DepthSweep,
    GradNormComparison,
    GradNorms,
    GradNormSeeds,
    LivePass,
    RunComparison,
    decode,
    depth,
    explain,
    gradient_norms,
    loglog_fit,
    training,
)
from llama_lab.experiments import live as live_kind
from llama_lab.figures import common
from llama_lab.train import LogitStats, TrainRun


def grad_norms(position: str, scale: float) -> GradNorms:
    return GradNorms(
        norm_position=position,
        loss=5.5 + scale,
        layer_grad_norm=[1.0 * scale, 2.0 * scale, 4.0 * scale],
        ffn_out_grad_norm=[0.1, 0.2, 0.4 * scale],
        residual_grad_norm=[8.0, 4.0, 2.0],
        group_grad_norm={"q": [1.0, 2.0, 3.0], "down": [4.0, 5.0, 6.0]},
        embedding_grad_norm=0.5,
        total_grad_norm=7.0,
        residual_rms=[1.0, 1.5, 2.0],
        attn_out_rms=[0.5] * 3,
        ffn_out_rms=[0.5] * 3,
        last_norm_input_rms=2.5 if position == "pre" else 1.25,
    )


@pytest.fixture
def comparison():
    one = GradNormComparison(
        post=grad_norms("post", 1.0), pre=grad_norms("pre", 0.5), seq_len=16, batch=2, seed=0
    )
    return GradNormSeeds(runs=[one], seeds=[0], seq_len=16, batch=2, data="random token ids")


def three_seeds() -> GradNormSeeds:
    """Seeds whose Post-LN scales are 1, 3 and 2 (Pre-LN 0.5 each): medians at scale 2."""
    runs = [
        GradNormComparison(
            post=grad_norms("post", s), pre=grad_norms("pre", 0.5), seq_len=16, batch=2, seed=i
        )
        for i, s in enumerate((1.0, 3.0, 2.0))
    ]
    return GradNormSeeds(runs=runs, seeds=[0, 1, 2], seq_len=16, batch=2, data="random token ids")


def test_several_seeds_give_the_median_and_the_min_max_band():
    result = three_seeds()
    assert result.post.layer_grad_norm == [2.0, 4.0, 8.0]  # the median seed's (scale 2)
    assert result.post.loss == 7.5 and result.pre.loss == 6.0
    assert result.band("post", "layer_grad_norm") == ([1.0, 2.0, 4.0], [3.0, 6.0, 12.0])
    assert result.last_ratio_by_seed() == pytest.approx([2.0, 6.0, 4.0])  # 0.4·s / 0.2
    d = result.to_dict()
    assert d["post"]["layer_grad_norm"] == [2.0, 4.0, 8.0]
    assert d["post"]["layer_grad_norm_by_seed"] == [[1.0, 2.0, 4.0], [3.0, 6.0, 12.0], [2.0, 4.0, 8.0]]
    assert d["pre"]["loss_by_seed"] == [6.0, 6.0, 6.0] and d["pre"]["seeds"] == [0, 1, 2]
    fig = gradient_norms.gradnorm_profile(result)
    # a median per metric and arm; band edges only where the seeds differ (Post-LN's ‖∇θ_l‖ and
    # ‖∇W_down‖; the rest are equal across these hand-made seeds)
    assert len(fig.data) == 3 * 2 + 2 * 2
    fills = [t for t in fig.data if t.fill == "tonexty"]
    assert len(fills) == 2 and list(fills[0].y) == [1.0, 2.0, 4.0]  # Post-LN's lower edge
    assert "median of 3 seeds" in fig.layout.title.text
    table = gradient_norms.seed_table(result)
    assert list(table.post_over_pre) == pytest.approx([2.0, 6.0, 4.0])


def test_one_seed_keeps_specs_single_seed_json():
    one = three_seeds().runs[0]
    single = GradNormSeeds(runs=[one], seeds=[0], seq_len=16, batch=2, data="x")
    assert single.to_dict() == one.to_dict()
    assert not any(k.endswith("_by_seed") for k in single.to_dict()["post"])


def test_the_explanation_follows_the_numbers():
    """Each comparison word is chosen by the measurement: Post/Pre > 1 says "larger", < 1
    "smaller"; the stream's growth and the norms' inputs are quoted as measured."""
    result = three_seeds()
    lines = explain.explain_profile(result)
    assert (
        "Post-LN's is larger than Pre-LN's (Post/Pre = 4, the median of the seeds' ratios, "
        "2 to 6 over the seeds; larger in 3 of 3)"
    ) in lines[0]
    assert "×2.5 over 3 blocks" in lines[2] and "2.5 / 1.25 = 2 predicts" in lines[2]
    assert "grows through the blocks" in lines[2] and "is the larger here" in lines[2]
    flipped = GradNormSeeds(
        runs=[
            GradNormComparison(
                post=grad_norms("pre", 0.5), pre=grad_norms("post", 4.0), seq_len=16, batch=2, seed=0
            )
        ],
        seeds=[0],
        seq_len=16,
        batch=2,
        data="x",
    )
    assert "smaller than" in explain.explain_profile(flipped)[0]
    assert "Pre-LN's last-layer gradient is the larger here" in explain.explain_profile(flipped)[2]
    # a step is named only when it goes the way of the whole change and holds most of it
    assert explain._towards_input([2.0, 20.0, 1.0]) == "grows ×2 from the last block to the first"
    assert explain._towards_input([50.0, 1.0, 0.9]).endswith(
        "×50 of it between block 0's input and block 1's"
    )


STATS = LogitStats(std=0.5, max_abs=2.0, max_prob_mean=0.01, entropy_mean=5.0)
STATS_RAW = LogitStats(std=3.0, max_abs=20.0, max_prob_mean=0.6, entropy_mean=1.0)


def train_run(label: str, losses: list[float], diverged_at: int | None = None) -> TrainRun:
    steps = len(losses)
    return TrainRun(
        label=label,
        config={},
        settings={},
        n_params=1000,
        steps_run=steps,
        loss=losses,
        lr=[1e-3 * (i + 1) for i in range(steps)],
        grad_norm=[1.0] * steps,
        layer_grad_norm=[[10.0 ** (i - 2), 10.0 ** (-i)] for i in range(steps)],
        val_step=[0, steps],
        val_loss=[losses[0], losses[-1]],
        diverged=diverged_at is not None,
        divergence_step=diverged_at,
        divergence_reason="loss became nan" if diverged_at is not None else None,
        hint=None,
        logits=STATS,
        logits_without_final_norm=STATS_RAW,
        wall_s=1.0,
        tokens_per_s=100.0,
        achieved_tflops=1e-6,
    )


def test_gradnorm_profile_draws_the_three_lists_of_both_arrangements_on_log_axes(comparison):
    fig = gradient_norms.gradnorm_profile(comparison)
    assert len(fig.data) == 6  # 3 metrics × (post, pre)
    by_name = {(t.xaxis, t.name): list(t.y) for t in fig.data}
    assert by_name[("x", "Post-LN (loss 6.500)")] == [1.0, 2.0, 4.0]
    assert by_name[("x", "Pre-LN (loss 6.000)")] == [0.5, 1.0, 2.0]
    assert by_name[("x2", "Post-LN (loss 6.500)")] == [0.1, 0.2, 0.4]
    assert by_name[("x3", "Pre-LN (loss 6.000)")] == [8.0, 4.0, 2.0]
    assert {fig.layout[f"yaxis{i}"].type for i in ("", "2", "3")} == {"log"}
    assert "3 blocks" in fig.layout.title.text and "B=2, T=16" in fig.layout.title.text


def test_group_table_has_a_row_per_position_and_group_and_a_column_per_block(comparison):
    table = gradient_norms.group_table(comparison)
    assert list(table.columns) == ["norm_position", "group", "block 0", "block 1", "block 2"]
    assert table.shape[0] == 4
    row = table[(table.norm_position == "pre") & (table.group == "down")].iloc[0]
    assert [row["block 0"], row["block 1"], row["block 2"]] == [4.0, 5.0, 6.0]


def test_gradnorm_summary_ratios_are_last_over_first(comparison):
    summary = gradient_norms.gradnorm_summary(comparison).set_index("norm_position")
    assert summary.loc["post", "layer_grad_norm_last_over_first"] == 4.0  # 4 / 1
    assert summary.loc["pre", "ffn_out_grad_norm_last_over_first"] == pytest.approx(2.0)  # 0.2/0.1
    assert summary.loc["post", "residual_grad_norm_last_over_first"] == 0.25  # 2 / 8
    assert summary.loc["pre", "loss"] == 6.0


def test_loglog_fit_recovers_a_known_law():
    depths = [2, 4, 8, 16]
    ys = [3.0 * d**-0.5 for d in depths]
    slope, intercept = loglog_fit(depths, ys)
    assert slope == pytest.approx(-0.5) and math.exp(intercept) == pytest.approx(3.0)


def exact_sweep(depths=(2, 4, 8, 16)) -> DepthSweep:
    """Two seeds following Theorem 1 exactly: Post-LN flat (0.7, 0.9), Pre-LN 2/√L and 3/√L."""
    depths = list(depths)
    post = [[0.7, 0.9] for _ in depths]
    pre = [[2.0 * d**-0.5, 3.0 * d**-0.5] for d in depths]
    ratio = [[a / b for a, b in zip(p, q)] for p, q in zip(post, pre)]

    def med(rows):  # the median of two
        return [sum(r) / 2 for r in rows]

    return DepthSweep(
        depths=depths,
        seeds=[0, 1],
        post=med(post),
        pre=med(pre),
        post_by_seed=post,
        pre_by_seed=pre,
        ratio=med(ratio),
        ratio_by_seed=ratio,
        post_slope=0.0,
        pre_slope=-0.5,
        ratio_slope=0.5,
        seq_len=16,
        batch=2,
        data="x",
    )


def test_depth_sweep_figure_fits_pass_through_exact_power_laws():
    sweep = exact_sweep()
    fig = depth.depth_sweep_figure(sweep)
    traces = {t.name: t for t in fig.data}
    assert list(traces["Pre-LN fit ∝ L^-0.50"].y) == pytest.approx(sweep.pre)
    assert list(traces["Post-LN fit ∝ L^0.00"].y) == pytest.approx(sweep.post)
    assert list(traces["Post-LN measured"].y) == pytest.approx([0.8] * 4)
    fills = [t for t in fig.data if t.fill == "tonexty"]
    assert list(fills[0].y) == [0.7] * 4  # Post-LN's lower edge
    assert fig.layout.xaxis.type == fig.layout.yaxis.type == "log"
    table = depth.depth_sweep_table(sweep).set_index("measured")
    assert table.loc["pre", "fitted_slope"] == -0.5 and table.loc["pre", "theory_slope"] == -0.5
    assert table.loc["pre", "seed_min"] == pytest.approx(-0.5) == table.loc["pre", "seed_max"]
    assert table.loc["post", "theory_slope"] == 0.0
    assert table.loc["post_over_pre", "theory_slope"] == 0.5
    assert sweep.to_frame().shape == (8, 5)


def test_the_ratio_figure_draws_theorem_1s_sqrt_l_through_a_sqrt_l_ratio():
    sweep = exact_sweep()
    fig = depth.ratio_figure(sweep)
    traces = {t.name: t for t in fig.data}
    reference = traces["Theorem 1: c·√L (c fitted)"]
    assert list(reference.y) == pytest.approx(sweep.ratio)  # the ratio is c·√L exactly
    assert experiments.sqrt_reference([1, 4], [2.0, 4.0]) == pytest.approx([2.0, 4.0])
    assert experiments.sqrt_reference([1, 4], [1.0, 1.0]) == pytest.approx([0.5 * 2**0.5, 2**0.5])
    lines = explain.explain_depth(sweep)
    assert "Post-LN +0.00, which agrees with Theorem 1's 0" in lines[0]
    assert "Pre-LN -0.50, which agrees with its −0.5" in lines[0]
    assert "The ratio** Post/Pre grows with depth" in lines[1]
    flat = dataclasses.replace(sweep, ratio=[1.0] * 4, pre_slope=0.1)
    assert "does not grow" in explain.explain_depth(flat)[1]
    assert "0.10, which is above its −0.5" in explain.explain_depth(flat)[0]


def test_training_curves_show_loss_validation_lr_and_divergence():
    runs = RunComparison(
        runs={
            "stable": train_run("stable", [5.0, 4.0, 3.0]),
            "diverged": train_run("diverged", [5.0, float("nan")], 1),
        }
    )
    fig = training.training_curves(runs)
    lines = {t.name: t for t in fig.data if t.mode == "lines" and t.showlegend is not False}
    assert list(lines["stable"].y) == [5.0, 4.0, 3.0]
    crosses = [t for t in fig.data if t.marker is not None and t.marker.symbol == "x"]
    assert len(crosses) == 1 and list(crosses[0].x) == [1]
    assert list(crosses[0].y) == [5.0]  # NaN loss: drawn at the largest finite one
    lr_traces = [t for t in fig.data if t.yaxis == "y2"]
    assert list(lr_traces[0].y) == pytest.approx([1e-3, 2e-3, 3e-3])


def test_training_heatmaps_are_log10_block_by_step_on_one_scale():
    runs = RunComparison(runs={"a": train_run("a", [5.0, 4.0, 3.0]), "b": train_run("b", [5.0, 4.5])})
    fig = training.training_heatmaps(runs)
    heat = [t for t in fig.data if isinstance(t, go.Heatmap)]
    assert len(heat) == 2
    # layer_grad_norm[step] = [10^(step-2), 10^(-step)] → z[block][step]
    assert [list(row) for row in heat[0].z] == [[-2.0, -1.0, 0.0], [0.0, -1.0, -2.0]]
    assert {(h.zmin, h.zmax) for h in heat} == {(-2.0, 0.0)}
    long = training.layer_grad_long(runs)
    assert len(long) == (3 + 2) * 2  # steps × blocks, both runs


def test_run_logits_table_lists_both_stats_of_every_run():
    runs = RunComparison(runs={"a": train_run("a", [5.0, 4.0])})
    table = training.run_logits_table(runs)
    assert list(table.logits) == ["with final norm", "without final norm"]
    assert list(table["std"]) == [0.5, 3.0] and set(table.run) == {"a"}


def live_pass(dtype: str = "fp32", peak_memory_source: str = "sum", **changes) -> LivePass:
    # n_params and the breakdown are those of PRESETS["debug"], B=2, T=16 (see below)
    return LivePass(
        **{
            **dict(
                device="cpu",
                device_name="CPU (2 threads)",
                dtype=dtype,
                seq_len=16,
                batch=2,
                iters=1,
                compiled=False,
                n_params=123_712,
                initial_loss=5.6,
                ln_vocab=math.log(256),
                last_loss=5.5,
                warmup_s=0.1,
                forward_ms=1.0,
                backward_ms=2.0,
                optimizer_ms=0.5,
                step_ms=3.5,
                overhead_ms=5.0,
                tokens_per_s=32 / 0.0035,
                training_flops=6e6,
                achieved_tflops=6e6 / 0.0035 / 1e12,
                peak_flops=1e11,
                peak_flops_source="measured 1024×1024 fp32 matmul",
                mfu=0.017,
                achieved_tflops_causal=5.5e6 / 0.0035 / 1e12,
                mfu_causal=0.0157,
                peak_memory_bytes=2_364_648,
                peak_memory_source=peak_memory_source,
                memory_breakdown={
                    "weights": 494_848,
                    "gradients": 494_848,
                    "optimizer": 989_780,
                    "weight_casts": 0,
                    "activations": 385_172,
                },
                activation_bytes_measured=385_172,
                activation_bytes_estimated=385_156,
                estimated_training_bytes=2_364_548,
                logits=STATS,
                logits_without_final_norm=STATS_RAW,
            ),
            **changes,
        }
    )


# PRESETS["debug"] by hand: V=256, d=64, L=2, H=4, G=2, D=16, F=172, SwiGLU, RMSNorm, untied:
# 2 · 256·64 (embedding, lm_head) + 2 · (64·64·2 + 64·32·2 + 3·64·172 + 2·64) + 64 = 123,712
DEBUG_PARAMS = 2 * 256 * 64 + 2 * (2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * 172 + 2 * 64) + 64


def test_live_pass_tables_and_phase_figure():
    live = live_pass()
    memory = live_kind.live_memory_table(live).set_index("component")  # no config: activations only
    assert memory.loc["total", "measured_bytes"] == 494_848 * 2 + 989_780 + 0 + 385_172
    assert memory.loc["activations", "predicted_bytes"] == 385_156
    assert memory.loc["weights", "predicted"] == "—" and memory.loc["total", "predicted"] == "—"
    assert memory.loc["total", "measured"] == "2.26 MiB"  # 2,364,648 / 2²⁰
    summary = live_kind.live_summary(live).set_index("quantity")
    assert summary.loc["MFU", "value"] == 0.017
    assert summary.loc["MFU, causal attention scores", "value"] == 0.0157
    assert summary.loc["measured / predicted activations", "value"] == pytest.approx(385_172 / 385_156)
    fig = live_kind.live_phase_figure(live)
    assert list(fig.data[0].y) == [1.0, 2.0, 0.5]
    assert "9,143 tokens/s" in fig.layout.title.text  # 32 tokens / 3.5 ms
    logits = common.logits_table(live.logits, live.logits_without_final_norm, live.ln_vocab)
    assert list(logits.max_abs) == [2.0, 20.0]
    assert logits.uniform_entropy_ln_V.iloc[0] == pytest.approx(5.545177, abs=1e-6)


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_memory_predictions_come_from_analysis_for_the_model_that_ran(dtype):
    cfg = PRESETS["debug"]
    assert DEBUG_PARAMS == 123_712
    memory = live_kind.live_memory_table(live_pass(dtype), cfg).set_index("component")
    # fp32 weights and gradients (4 B each), AdamW m and v (2 × 4 B) whatever the run's dtype;
    # under bf16 autocast a 2-byte copy of every weight besides
    expected = {
        "weights": 4 * DEBUG_PARAMS,
        "gradients": 4 * DEBUG_PARAMS,
        "optimizer": 8 * DEBUG_PARAMS,
        "weight_casts": 0 if dtype == "fp32" else 2 * DEBUG_PARAMS,
        "activations": 385_156,
    }
    for component, value in expected.items():
        assert memory.loc[component, "predicted_bytes"] == value, component
    assert memory.loc["total", "predicted_bytes"] == sum(expected.values())
    assert memory.loc["weights", "predicted"] == "483 KiB"  # 494,848 / 1024 = 483.25
    # measured 989,780: AdamW also keeps a 4-byte step counter per tensor (21 tensors)
    assert memory.loc["optimizer", "measured_bytes"] - memory.loc["optimizer", "predicted_bytes"] == 21 * 4
    assert memory.notna().all().all()  # no None left in the table


def test_peak_memory_is_labelled_an_estimate_unless_it_was_measured():
    cpu = live_pass(peak_memory_source="weights + gradients + AdamW state + tensors saved")
    cuda = live_pass(peak_memory_source="CUDA allocator peak", device="cuda:0")
    rss = live_pass(peak_memory_source=live_kind.RSS_PEAK_SOURCE + " (VmHWM) less …")
    assert not live_kind.peak_memory_is_measured(cpu) and live_kind.peak_memory_is_measured(cuda)
    assert live_kind.peak_memory_is_measured(rss)
    assert "peak memory (estimate)" in set(live_kind.live_summary(cpu).quantity)
    assert "peak memory" in set(live_kind.live_summary(cuda).quantity)
    assert live_kind.has_causal_mfu(cpu)


def test_decode_figure_plots_time_and_measured_vs_predicted_bytes():
    rows = [
        DecodeRow(
            variant,
            g,
            c,
            prefill_ms=1.0,
            ms_per_token=0.1 * g,
            cache_tokens=c + 2,
            cache_bytes_measured=b,
            cache_bytes_predicted=b,
        )
        for variant, g in (("mha", 4), ("mqa", 1))
        for c in (8, 16)
        for b in [2 * 2 * g * 16 * 4 * (c + 2)]
    ]  # 2 (K,V) · L=2 · G · D=16 · 4 B · tokens
    bench = DecodeBench(device="cpu", dtype="fp32", batch=1, new_tokens=2, rows=rows)
    fig = decode.decode_figure(bench)
    time_traces = [t for t in fig.data if t.xaxis == "x"]
    assert [t.name for t in time_traces] == ["MHA (4 KV heads)", "MQA (1 KV head)"]
    measured = [t for t in fig.data if t.xaxis == "x2" and t.mode == "markers"]
    assert list(measured[0].y) == [2 * 2 * 4 * 16 * 4 * 10, 2 * 2 * 4 * 16 * 4 * 18]
    assert list(measured[1].x) == [10, 18]
