"""``finetune``: the live fine-tuning run and its CLI command (small sizes)."""

import json

import pytest

from llama_lab.cli import main
from llama_lab.experiments.finetune import FinetuneSettings, finetune_run

SMALL = ["--steps", "3", "--pretrain-steps", "0", "--seq-len", "32", "--batch", "2"]


def _lines(capsys, *argv):
    code = main(["finetune", "--json", *argv])
    out, err = capsys.readouterr()
    return code, [json.loads(line) for line in out.splitlines() if line.strip()], err


@pytest.mark.parametrize("method", ["lora", "qlora", "dora", "full"])
def test_json_lines_and_exact_trainable_params(capsys, method):
    code, lines, err = _lines(capsys, "--preset", "debug", "--method", method, "--rank", "4", *SMALL)
    assert code == 0, err
    assert [line["step"] for line in lines] == [1, 2, 3, 3]
    last = lines[-1]
    for key in (
        "measured_trainable_params",
        "predicted_trainable_params",
        "measured_peak_bytes",
        "predicted_peak_bytes",
    ):
        assert key in last
    assert last["measured_trainable_params"] == last["predicted_trainable_params"]
    assert last["measured_peak_bytes"] > 0 and last["predicted_peak_bytes"] > 0


@pytest.mark.parametrize("method", ["lora", "qlora", "dora"])
def test_the_adapters_merge_and_save(capsys, tmp_path, method):
    """The trained adapters merged into the weights give the adapted model's logits (a QLoRA base
    dequantised); --save-adapter writes them alone, under PEFT's key names, which load back."""
    from safetensors.torch import load_file

    path = tmp_path / "adapter_model.safetensors"
    argv = ["--preset", "debug", "--method", method, "--rank", "4", *SMALL, "--save-adapter", str(path)]
    code, lines, err = _lines(capsys, *argv)
    assert code == 0, err
    last = lines[-1]
    assert last["merged_logits_max_abs_diff"] < 1e-4 and last["adapter_file"] == str(path)
    saved = load_file(str(path))
    assert saved and all(".lora_" in key for key in saved if not key.endswith("magnitude_vector"))
    assert sum(t.numel() for t in saved.values()) == last["measured_trainable_params"]


@pytest.mark.parametrize(
    "argv, rule",
    [
        (["--rank", "0"], "rank=0"),
        (["--targets", "q_proj,c_attn"], "c_attn"),
        (["--batch", "1024", "--seq-len", "4096"], "needs about"),
        (["--method", "full", "--save-adapter", "x.safetensors"], "has no adapter"),
        (["--save-adapter", "/no/such/folder/a.safetensors"], "does not exist"),
    ],
    ids=["rank-0", "unknown-target", "too-big", "full-adapter", "no-folder"],
)
def test_refusals(capsys, argv, rule):
    code, _, err = _lines(capsys, "--preset", "debug", *SMALL, *argv)
    assert code == 2
    assert rule in err and "Traceback" not in err


@pytest.mark.slow
@pytest.mark.parametrize("preset", ["seed-demo", "transformer-2017"])
@pytest.mark.parametrize("method", ["lora", "qlora", "dora", "full"])
def test_peak_within_ten_percent_and_trainable_params_exact(preset, method):
    """Issue 40's Done-when at the run's default sizes (batch 16 × 128): the measured peak (the
    CPU allocator's) within 10 % of finetune_memory's, the trainable parameters exact."""
    from llama_lab.experiments.finetune import FinetuneSettings, finetune_run

    r = finetune_run(preset, FinetuneSettings(method=method, steps=2, pretrain_steps=0))
    assert r.measured_trainable_params == r.predicted_trainable_params
    assert abs(r.peak_ratio - 1) <= 0.10, r.peak_ratio


@pytest.mark.slow
@pytest.mark.parametrize("method", ["lora", "full"])
def test_the_held_out_loss_falls_with_the_defaults(method):
    """20 steps with the run's defaults (all-linear, rank 8; the adapters at ten times full
    fine-tuning's step): the loss on fixed held-out batches of the fine-tuning text falls.
    (QLoRA and DoRA share LoRA's step and fell alike when measured: 3.19 → 3.01 LoRA, → 2.99
    DoRA; ~17 s a method, so the slow tier keeps two.)"""
    run = finetune_run("seed-demo", FinetuneSettings(method=method))
    assert run.val_loss_after < run.val_loss_before - 0.05, (run.val_loss_before, run.val_loss_after)
