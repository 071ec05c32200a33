"""The Many GPUs page and the KV page's serving on N GPUs: they draw the analysis' numbers,
refuse impossible layouts with the rule, and run the sharded measurement on its button."""

from pathlib import Path

import pytest
from apptest_helpers import click, errors, metrics, open_page

from llama_lab.analysis.layouts import fewest_gpus, gpus_for_states, serving_fits
from llama_lab.analysis.parallel import Layout, parallel_memory
from llama_lab.config import PRESETS
from llama_lab.units import human_bytes

ROOT = Path(__file__).resolve().parents[2]
PAGE = str(ROOT / "pages" / "10_Many_GPUs.py")
KV_PAGE = str(ROOT / "pages" / "2_KV_cache_and_attention.py")
P = "llama_lab.page10."


def test_the_page_shows_the_layouts_numbers_for_405b():
    at = open_page(PAGE, {"preset": "llama-3.1-405b", "seq": "8192"}, timeout=180)
    assert not errors(at)
    cfg = PRESETS["llama-3.1-405b"]
    # first shown: the fewest GPUs holding twice the training states (256 H100s), tp 8, one stage
    n = gpus_for_states(cfg, "H100 80GB", least=1)
    assert n == 256
    est = parallel_memory(cfg, Layout(n, 8, 1, 1, True), 8192, "bf16")
    shown = metrics(at)
    assert human_bytes(est.per_gpu["total_bytes"]) in shown.values()
    assert shown["data-parallel replicas (dp)"] == "32"
    texts = " ".join(m.value for m in at.markdown)
    serve = fewest_gpus(cfg, "H100 80GB", 8192, "bf16", True, 1, "bf16")
    best = serving_fits(cfg, "H100 80GB", serve, 1, 8192, "bf16", "bf16")[0]
    assert f"On **{serve} × H100 80GB**" in texts and f"{best.max_context_at_batch:,}" in texts
    assert "layouts fit; cheapest first" in texts
    # the layout's training throughput: the calibrated estimate and its interval, and the bound
    from llama_lab.runtime.hardware import GPUS
    from llama_lab.validation.predict import predict_train

    t = predict_train(cfg, GPUS["H100 80GB"], Layout(n, 8, 1, 1, True), 8192, "bf16")["tokens_per_s_per_gpu"]
    assert shown["tokens/s per GPU (estimate)"] == f"{t['estimate']:,.0f}"
    assert shown["tokens/s per GPU (bound)"] == f"{t['bound']:,.0f}"
    assert t["low"] <= t["estimate"] <= t["high"] <= t["bound"]  # the interval ends at the bound
    # its MFU counts the lab's one convention, and says so
    from llama_lab.analysis import MFU_CONVENTION

    assert next(m for m in at.metric if m.label == "MFU (estimate)").proto.help == MFU_CONVENTION


def test_an_mla_model_keeps_the_whole_latent_on_every_gpu():
    """DeepSeek-V3 served on several GPUs: 70,272 bytes of cache per token on each GPU at any
    tensor-parallel split (61 layers × (512 + 64) × 2 bytes), and the page says why."""
    at = open_page(PAGE, {"preset": "deepseek-v3", "seq": "4096"}, timeout=180)
    assert not errors(at)
    from llama_lab.analysis.kv import tp_cache_note

    cfg = PRESETS["deepseek-v3"]
    shown = [c.value.replace("\\", "").replace("\u2060", "") for c in at.caption]  # escapes out
    assert tp_cache_note(cfg, "bf16") in shown
    assert "each rank rebuilds its own heads' K and V from the whole latent" in tp_cache_note(cfg)
    serving = next(d.value for d in at.dataframe if "kv_bytes_per_token_per_gpu" in d.value.columns)
    assert (serving[serving.pp == 1].kv_bytes_per_token_per_gpu == 70_272).all()


def test_a_small_model_first_shows_one_gpu():
    """The seed's 44M demo: one GPU, no tensor or pipeline split, served on one."""
    at = open_page(PAGE, {"preset": "seed-demo"}, timeout=180)
    assert not errors(at)
    assert [at.select_slider(key=P + k).value for k in ("gpus", "tp", "pp")] == [1, 1, 1]
    assert "On **1 × H100 80GB**" in " ".join(m.value for m in at.markdown)


def test_an_impossible_layout_names_its_rule():
    at = open_page(PAGE, {"preset": "llama-2-70b"})
    at.select_slider(key=P + "tp").set_value(16).run()  # 64 heads / 16 fine, 8 KV heads < 16
    assert not at.exception
    at.select_slider(key=P + "gpus").set_value(32)
    at.select_slider(key=P + "pp").set_value(4).run()
    assert any("does not divide 32" in e for e in errors(at))


def test_the_kv_page_answers_on_several_gpus():
    at = open_page(KV_PAGE, {"preset": "llama-3.1-405b", "seq": "8192"})
    texts = " ".join(m.value for m in at.markdown)
    fits = serving_fits(PRESETS["llama-3.1-405b"], "H100 80GB", 16, 1, 8192, "bf16", "bf16")
    assert "On **16 × H100 80GB**" in texts  # first shown: the fewest that fit
    assert f"memory alone holds {fits[0].max_context_at_batch:,})** tokens" in texts and not errors(at)
    at.select_slider(key="llama_lab.page2.serve_gpus").set_value(8).run()
    warned = " ".join(w.value for w in at.warning)
    assert "No split of 8 × H100 80GB holds this model" in warned  # 811 GB > 640 GB


@pytest.mark.slow
def test_the_sharded_run_on_its_button():
    at = open_page(PAGE, {"preset": "debug"})
    assert "Not run in this session yet." in " ".join(c.value for c in at.caption)
    click(at, P + "run_shard")
    shown = metrics(at)
    assert shown["max relative error (parameters, gradients, optimizer)"] == "0"
    assert len(at.get("plotly_chart")) >= 2 and not errors(at)


def test_sequence_parallel_is_off_and_disabled_without_tensor_parallelism():
    """At tp = 1 the toggle shows off (nothing to split over), disabled; the user's choice (first:
    on) comes back when tp > 1 again."""
    at = open_page(PAGE)
    sp = lambda: at.toggle(key=P + "sp")  # noqa: E731
    at.select_slider(key=P + "tp").set_value(1).run()
    assert sp().disabled and sp().value is False
    at.select_slider(key=P + "tp").set_value(2).run()
    assert not sp().disabled and sp().value is True
    sp().set_value(False).run()
    at.select_slider(key=P + "tp").set_value(1).run()
    assert sp().disabled and sp().value is False
    at.select_slider(key=P + "tp").set_value(4).run()
    assert not sp().disabled and sp().value is False  # the user's off, kept
    sp().set_value(True).run()
    at.select_slider(key=P + "tp").set_value(1).run()
    assert sp().value is False
    at.select_slider(key=P + "tp").set_value(2).run()
    assert sp().value is True and not at.exception


def test_an_encoder_decoder_is_refused_in_one_line():
    """The layouts model decoder-only models: the 2017 encoder-decoder is refused by name."""
    at = open_page(PAGE, {"preset": "transformer-2017-base"}, timeout=60)
    assert errors(at) == [
        "The Many GPUs page: an encoder-decoder (encoder_layers=6, the 2017 Transformer) is not "
        "modelled here, only decoder-only models are"
    ]
    assert not metrics(at)
