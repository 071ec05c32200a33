"""pages/8_Inference_systems.py through AppTest, and the live quantisation and attention sweep
against the analysis (issue 13)."""

from pathlib import Path

import pytest
import torch
from apptest_helpers import click, errors, metrics, open_page

from llama_lab import analysis, experiments
from llama_lab.config import PRESETS, live_config
from llama_lab.experiments.flash import flash_sweep
from llama_lab.experiments.quantize import quantize_run
from llama_lab.ui import state
from llama_lab.units import human_bytes

PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "8_Inference_systems.py")
P = "llama_lab.page8."


@pytest.mark.slow
def test_the_page_counts_the_sidebar_model_and_runs_the_three_live_parts(monkeypatch):
    at = open_page(PAGE, {"preset": "debug", "weights": "int4", "kv": "fp8"}, timeout=180)
    assert not errors(at) and len(at.get("tab")) == 4
    cfg = PRESETS["debug"]
    shown = metrics(at)
    assert shown["weights at int4"] == human_bytes(analysis.weight_bytes(cfg, "int4"))
    assert shown["KV cache at fp8"] == f"{analysis.kv_cache_bytes_per_token(cfg, 'fp8'):,} B/token"
    r = analysis.attention_memory(cfg, 128, 1, "bf16")
    assert shown["naive stops fitting at"] == f"T = {r.naive_fits_up_to:,}"
    latex = " ".join(m.value for m in at.latex)
    assert f"= {analysis.kv_cache_bytes_per_token(cfg, 'fp8'):,}" in latex
    monkeypatch.setitem(experiments.speculative.SPECULATIVE_DEFAULTS, "steps", 0)
    monkeypatch.setitem(experiments.quantize.QUANT_DEFAULTS, "steps", 0)
    for button in ("run_quantize", "run_flash", "run_speculative"):
        click(at, P + button)
        assert not errors(at), button
    for kind in ("quantize", "flash", "speculative"):
        assert state.EXPERIMENT_KEYS[kind] in at.session_state
    text = " ".join(m.value for m in at.markdown)
    assert "✓ The quantised tensors hold exactly the predicted bytes." in text
    assert "✓ Every measured figure equals the prediction." in text
    assert "target's own greedy output, token for token" in text


def test_the_weight_options_change_the_counted_bytes_as_the_analysis_does():
    at = open_page(PAGE, {"preset": "seed-demo", "weights": "int4"}, timeout=180)
    cfg = PRESETS["seed-demo"]
    assert at.selectbox(key=P + "group.int4").value == 128
    at.selectbox(key=P + "group.int4").set_value(32)
    at.toggle(key=P + "zero").set_value(True)
    at.multiselect(key=P + "keep").set_value(["norms"]).run()
    assert not errors(at)
    quant = analysis.WeightQuant.of("int4", 32, "fp16", True, ("norms",))
    stored = analysis.weights_bytes(cfg, quant)
    # hand check of the changed part: lm_head 32000 × 512 now int4 in groups of 32, its scales
    # fp16 and its 4-bit zero points, instead of 2 bytes per weight
    lm_head = [r for r in stored.by_tensor if r["role"] == "lm_head"][0]
    assert (lm_head["data"], lm_head["scales"], lm_head["zero_points"]) == (
        32000 * 256,
        32000 * 16 * 2,
        32000 * 16 // 2,
    )
    assert metrics(at)["weights at int4"] == human_bytes(stored.total)
    (table,) = [d.value for d in at.dataframe if "weights_bytes" in d.value.columns]
    assert table.iloc[-1].weights_bytes == stored.total


def test_the_page_without_stored_formats_counts_the_plain_weights():
    at = open_page(PAGE, {"preset": "debug"}, timeout=180)
    shown = metrics(at)
    assert shown["weights at bf16"] == human_bytes(analysis.weight_bytes(PRESETS["debug"], "bf16"))
    assert not at.get("expander") or all("options" not in e.proto.label for e in at.get("expander"))


def test_a_zero_context_says_why():
    """LLaMA-3.1-405B's weights alone exceed an H100: the longest context and the naive
    attention's fit are 0, and the page says it is the weights, with both sizes."""
    at = open_page(PAGE, {"preset": "llama-3.1-405b"}, timeout=180)
    assert not errors(at)
    shown = metrics(at)
    assert shown["longest context on H100 80GB (B=1)"] == "0"
    assert shown["naive stops fitting at"] == "T = 0"
    weights = human_bytes(analysis.weight_bytes(PRESETS["llama-3.1-405b"], "bf16"))
    captions = [c.value for c in at.caption if "0 because the weights alone" in c.value]
    assert len(captions) == 2 and all(weights in c and "exceed H100 80GB" in c for c in captions)


@pytest.mark.parametrize(
    ("weights", "said"), [("bf16", "opens its options here"), ("int4", "the options below apply")]
)
def test_the_options_are_promised_only_where_they_are(weights, said):
    at = open_page(PAGE, {"preset": "debug", "weights": weights}, timeout=180)
    assert not errors(at) and any(said in c.value for c in at.caption)


@pytest.mark.parametrize("dtype", ["int8", "int4", "fp8"])
def test_live_quantisation_holds_the_predicted_bytes(dtype):
    run = quantize_run("seed-demo", dtype, steps=0, device="cpu")
    assert run.measured_weight_bytes == run.predicted_weight_bytes < run.bf16_weight_bytes
    assert run.bf16_weight_bytes * 2 == run.fp32_weight_bytes
    assert run.logit_max_abs_error < 1.0 and abs(run.loss_quantized - run.loss_fp) < 0.1
    assert set(run.decode_s) == {"fp32", "bf16", dtype}


def test_live_quantisation_of_a_mixture_keeps_its_experts_and_says_so():
    run = quantize_run("mixtral-8x7b", "int4", steps=0, device="cpu")
    assert "experts" in run.quant["keep"]
    assert run.measured_weight_bytes == run.predicted_weight_bytes


def test_the_attention_sweep_measures_what_the_analysis_predicts():
    cfg = live_config(PRESETS["seed-demo"], 2, 128, 256)
    sweep = flash_sweep(cfg, (32, 64, 128), dtype="fp32", device="cpu")
    frame = sweep.to_frame()
    assert (frame.measured_bytes == frame.predicted_bytes).all() and len(frame) == 6
    naive = frame[frame.path == "naive"].measured_bytes.tolist()
    fused = frame[frame.path == "flash"].measured_bytes.tolist()
    assert naive[2] / naive[1] > naive[1] / naive[0] > 2  # towards T² as P takes over
    assert fused[2] == 2 * fused[1] == 4 * fused[0]  # exactly linear in T
    assert sweep.naive_fits_up_to < sweep.flash_fits_up_to
    if not torch.cuda.is_available():
        assert sweep.device == "cpu"


def test_the_fused_path_never_falls_back_to_the_math_kernel(monkeypatch):
    """On an H200 a live copy's heads of width 512 took no fused kernel and SDPA ran its math
    path, keeping 15× the predicted bytes under the fused label: the sweep now refuses, naming
    the rule (here SDPA is made to find no kernel, as CUDA does for such heads)."""
    import torch.nn.functional as F

    from llama_lab.errors import ExperimentError

    def no_kernel(*args, **kwargs):
        raise RuntimeError("No available kernel. Aborting execution.")

    monkeypatch.setattr(F, "scaled_dot_product_attention", no_kernel)
    with pytest.raises(ExperimentError, match="fused kernels take a head width of at most 256"):
        flash_sweep(live_config(PRESETS["seed-demo"], 2, 128, 256), (32,), dtype="fp32", device="cpu")


def test_the_distillation_section_shows_its_shipped_result_then_runs_on_its_button(monkeypatch):
    from llama_lab.experiments import distill

    at = open_page(PAGE, {"preset": "debug"}, timeout=180)
    shipped = at.session_state[state.EXPERIMENT_KEYS["distill"]].result  # shown on view, nothing run
    assert metrics(at)["Student's parameters"] == f"{shipped.student.params:,}" == "27,200"
    assert any(c.value.startswith("Shown at once: pre") for c in at.caption)
    tiny = {"teacher_d": 32, "teacher_layers": 1, "student_d": 16, "student_layers": 1, "steps": 3}
    for key, value in {**tiny, "seq_len": 16, "batch": 2, "eval_every": 2, "eval_batches": 1}.items():
        monkeypatch.setitem(distill.DISTILL_DEFAULTS, key, value)
    monkeypatch.setitem(distill.DISTILL_DEFAULTS, "teacher_steps_factor", 1)
    at = open_page(PAGE, {"preset": "debug"}, timeout=180)
    assert not errors(at) and len(at.get("tab")) == 4
    assert any("KL" in m.value for m in at.latex)
    click(at, P + "run_distill")
    assert not errors(at)
    run = at.session_state[state.EXPERIMENT_KEYS["distill"]].result
    shown = metrics(at)
    assert shown["Student's parameters"] == f"{run.student.params:,}"
    assert shown["Soft-target entropy (T=1)"] == f"{run.soft_target_entropy:.2f} nats"
    assert len(run.distilled_val) == len(run.scratch_val) == 2
