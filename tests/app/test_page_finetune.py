"""pages/12_Fine_tuning.py through AppTest: it renders for every preset with its defaults (the
numbers predict_finetune gives, the two figures), a refused recipe shows one line naming the rule
and no traceback, the live run starts only on its button and ends with measured vs predicted,
and the report carries the page's recipe."""

from pathlib import Path

import pytest
from apptest_helpers import chart_title, charts, click, errors, metrics, open_page

from llama_lab.analysis.finetune import FinetuneSpec, default_targets
from llama_lab.config import PRESETS
from llama_lab.config.hf.quant import StoredQuant
from llama_lab.runtime.hardware import GPUS
from llama_lab.ui import state
from llama_lab.units import human_bytes, human_params
from llama_lab.validation.predict import predict_finetune

PAGE = Path(__file__).resolve().parents[2] / "pages" / "12_Fine_tuning.py"
P = "llama_lab.page12."


def run_page(preset: str, session: dict | None = None):
    return open_page(PAGE, {"preset": preset}, session, timeout=120)


@pytest.mark.parametrize(
    "preset",
    sorted(
        name
        for name, cfg in PRESETS.items()
        if not cfg.has_indexer and not cfg.is_encoder_decoder and cfg.vision is None
    ),
)
def test_the_page_renders_for_every_preset_with_its_defaults(preset):
    at = run_page(preset)
    if not PRESETS[preset].causal:  # an encoder (BERT): refused by name, in one line
        (error,) = errors(at)
        assert error.startswith("This recipe is refused: predict finetune is not modelled for a bidir")
        return
    assert not errors(at), errors(at)
    cfg = at.session_state[state.KEY_FINETUNE][0]
    T, B = at.number_input(key=P + "seq_len").value, at.number_input(key=P + "batch").value
    spec = FinetuneSpec(targets=default_targets(cfg), alpha=16.0)
    answer = predict_finetune(cfg, GPUS["H100 80GB"], spec, T, B)
    shown = metrics(at)
    assert shown["Trainable parameters"] == human_params(answer["trainable_params"])
    assert shown["Peak of a step"] == human_bytes(answer["peak_bytes"]["estimate"])
    assert shown["Fits one H100 80GB?"] == ("yes" if answer["fits"] else "no")
    titles = [chart_title(f) for f in charts(at)]
    assert titles == ["The peak of a step, by part", "Fine-tuning: peak memory against context"]
    assert not at.get("status"), "nothing runs on view"


def test_a_dsa_model_is_refused_in_one_line():
    at = run_page("deepseek-v3.2-exp")
    (error,) = errors(at)
    assert "fine-tuning does not model DeepSeek Sparse Attention" in error and "\n" not in error


def test_a_multimodal_preset_is_refused_in_one_line():
    """Fine-tuning is modelled for the text decoder alone: a vision tower is refused by name."""
    shown = errors(run_page("llava-1.5-7b"))
    assert len(shown) == 1 and "fine-tuning models the text decoder only" in shown[0]


@pytest.mark.parametrize(
    "session, rule",
    [
        ({P + "rank": 0}, "rank=0 must be"),
        ({P + "seq_len": 4096}, "seq_len=4096 is above the model's max_seq_len=128"),
        ({P + "targets": ["lm_head"]}, "target module 'lm_head' is not a linear layer of this model"),
        (
            {P + "method": "qlora", state.KEY_STORED_QUANT: StoredQuant("awq", 4, 128, True, "fp16", ())},
            "method='qlora' quantises a 16-bit base to NF4, but this checkpoint is already stored",
        ),
    ],
)
def test_a_refused_recipe_shows_one_line_naming_the_rule(session, rule):
    at = run_page("seed-demo")
    for key, value in session.items():  # as the widgets or an upload leave them
        at.session_state[key] = value
    at.run()
    (message,) = errors(at)
    assert message.startswith("This recipe is refused: ") and rule in message, message
    assert "\n" not in message and "Traceback" not in message
    assert not charts(at)


def test_the_report_carries_the_pages_recipe():
    from llama_lab.report import build_report

    at = run_page("seed-demo", {P + "method": "dora", P + "rank": 16})
    cfg, workload = at.session_state[state.KEY_FINETUNE]
    report = build_report(cfg, 128, 1, finetune=workload)
    table = report.table("finetune_prediction").frame.set_index("quantity")["value"]
    answer = predict_finetune(cfg, GPUS[workload.gpu], workload.spec, workload.seq_len, workload.batch)
    assert table["method"] == "dora"
    assert table["trainable parameters"] == answer["trainable_params"]
    assert table["peak bytes (estimate)"] == answer["peak_bytes"]["estimate"]
    assert "Fine-tuning" in report.sections
    assert {f.name for f in report.figures} >= {"finetune_memory_vs_context"}


@pytest.mark.slow
def test_the_live_run_starts_on_its_button_and_ends_with_measured_vs_predicted():
    at = run_page("seed-demo", {P + "live_steps": 3})
    assert not at.get("status")
    at = click(at, P + "live_start")
    assert not errors(at), errors(at)
    shown = metrics(at)
    measured = at.session_state[state.EXPERIMENT_KEYS["finetune"]].result
    assert len(measured.losses) == 3
    assert measured.measured_trainable_params == measured.predicted_trainable_params
    assert shown["Trainable parameters, measured"] == f"{measured.measured_trainable_params:,}"
    assert any(m.value.startswith("✓ The trainable parameters") for m in at.markdown)
