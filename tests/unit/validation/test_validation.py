"""Predictions held against public measurements (llama_lab.validation): the rows and their
sources, the declared halves, the bound and the estimate, the fit that sees only its half, and
the CLI's `predict` and `validate` (SPEC's names and keys)."""

import dataclasses
import json
import math
import re

import pytest

from llama_lab.analysis import roofline
from llama_lab.analysis.launches import forward_launches
from llama_lab.cli import main
from llama_lab.config import PRESETS
from llama_lab.runtime.hardware import GPUS
from llama_lab.validation import KINDS, Efficiency, fit, load_rows, results, summary, validate
from llama_lab.validation.efficiency import (
    PARAMS_FILE,
    Prediction,
    decode_step,
    decode_tokens_per_s,
    prefill_seconds,
    train_flops_split,
)
from llama_lab.validation.intervals import (
    INTERVAL_LEVEL,
    held_out_coverage,
    kind_interval,
    own_rows_suffice,
)
from llama_lab.validation.rows import Row
from llama_lab.validation.validate import Result, predict_row

ROWS = load_rows()


def close(a, b) -> bool:
    """Nested dicts and lists equal, floats to 1e-9 relative."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(close(a[k], b[k]) for k in a)
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and math.isclose(a, b, rel_tol=1e-9)
    return a == b


def test_at_least_40_public_measurements_each_with_its_source_and_quoted_line():
    assert len(ROWS) >= 40 and len({r.id for r in ROWS}) == len(ROWS)
    for row in ROWS:
        s = row.data["source"]
        assert row.kind in KINDS and row.measured > 0 and row.data["quote"].strip()
        assert (s.get("repo") and s.get("path")) or s.get("url") or s.get("paper"), row.id
        if s.get("path"):  # a file in a repository: the version read (an issue thread: its url)
            assert re.fullmatch(r"[0-9a-f]{40}", s["commit"] or ""), row.id
        for part in ("hardware", "software", "precision", "workload", "metric", "conventions"):
            assert row.data[part], (row.id, part)
    kinds = {row.kind for row in ROWS}
    assert {"decode_bs1", "decode_batched", "prefill", "train", "memory", "kv_capacity"} <= kinds


def test_the_halves_are_declared_by_id_alone_and_stratified_by_kind():
    """Balanced within each kind, its eager rows (which alone inform the launch cost) apart. The
    fine-tuning rows came declared by their source order (alternating within each source's
    table, a configuration's memory and throughput rows in one half): both halves hold each."""
    from collections import Counter

    from llama_lab.validation.rows import configuration_of

    finetune = [r for r in ROWS if r.kind.startswith("finetune")]
    pairs: dict[str, set[str]] = {}
    for r in finetune:
        pairs.setdefault(r.id.removesuffix("-mem").removesuffix("-tps"), set()).add(r.half)
    assert all(len(halves) == 1 for halves in pairs.values())
    for kind in ("finetune_memory", "finetune_throughput"):
        halves = [r.half for r in finetune if r.kind == kind and not r.why_not]
        assert min(halves.count("fit"), halves.count("held_out")) >= 1, kind
    for kind in KINDS:
        if kind.startswith("finetune"):
            continue
        for runtime in ("compiled", "eager"):
            mine = [r for r in ROWS if r.kind == kind and r.runtime == runtime]
            halves = [r.half for r in mine]
            # configurations alternate as wholes: the halves differ by at most the largest one
            sizes = Counter(configuration_of(r.data) for r in mine)
            largest = max(sizes.values(), default=1)
            assert abs(halves.count("fit") - halves.count("held_out")) <= max(1, largest), (kind, runtime)
    # changing every measured value changes no half: they are fixed before any fit
    load_rows.cache_clear()
    try:
        assert [r.half for r in load_rows()] == [r.half for r in ROWS]
    finally:
        load_rows.cache_clear()


def test_every_row_states_its_half_and_a_new_row_moves_none():
    """The file declares each row's half (tools/declare_halves.py); rows added later take the
    halves the kind has fewer of, by their ids' hash, and no declared row moves."""
    from llama_lab.validation.rows import DATA, declare_halves

    raw = json.loads(DATA.read_text())["rows"]
    assert all(r.get("half") == row.half for r, row in zip(raw, ROWS))
    added = [{"id": f"new-decode-{i}", "kind": "decode_bs1", "model": {"name": f"m{i}"}} for i in range(3)]
    halves = declare_halves([*raw, *added])
    assert all(halves[r["id"]] == r["half"] for r in raw)
    bs1 = [r["half"] for r in raw if r["kind"] == "decode_bs1"]
    new = [halves[r["id"]] for r in added]
    assert sorted(new) in (["fit", "fit", "held_out"], ["fit", "held_out", "held_out"])
    assert abs((bs1 + new).count("fit") - (bs1 + new).count("held_out")) <= 1


def test_one_configurations_rows_share_a_half():
    """The releases of one table line (kind, model, GPUs, weight format, sequence length) are one
    configuration: a new row joins its configuration's declared half, and new configurations
    alternate as wholes, so no near-duplicate of a fit row is scored as held out."""
    from llama_lab.validation.rows import DATA, configuration_of, declare_halves

    raw = json.loads(DATA.read_text())["rows"]
    train = [r for r in raw if r["kind"] == "train" and "torchtitan" not in r["id"]]
    by_configuration: dict[tuple, set[str]] = {}
    for r in train:
        by_configuration.setdefault(configuration_of(r), set()).add(r["half"])
    assert all(len(halves) == 1 for halves in by_configuration.values())
    assert len(by_configuration) >= 40  # many configurations, each whole in one half
    line = next(r for r in raw if r["id"] == "megatron-bridge-qwen3-30b-a3b-fp8-16xh100")
    again = {k: v for k, v in line.items() if k != "half"} | {"id": line["id"] + "-later"}
    other = [
        {"id": f"new-{i}", "kind": "train", "model": {"name": "x"}, "hardware": {"gpu": "B200", "count": n}}
        for i, n in enumerate((8, 8, 16, 16))
    ]
    halves = declare_halves([*raw, again, *other])
    assert halves[again["id"]] == line["half"] == "held_out"
    assert halves["new-0"] == halves["new-1"] != halves["new-2"] == halves["new-3"]


def test_the_decode_bound_is_the_rooflines_step_and_the_estimate_adds_the_named_costs():
    cfg, gpu = PRESETS["llama-2-7b"], GPUS["A100 80GB"]
    eff = Efficiency()
    step = decode_step(cfg, gpu, 1, 105, "bf16", "bf16", 1, eff)
    r = roofline(cfg, gpu, 1, 105, "bf16", "decode", "bf16", "bf16")
    assert step.bound == r.time_per_step_s == r.memory_time_s  # batch 1: memory-bound
    assert step.estimate == pytest.approx(r.memory_time_s / eff.decode_bw["16-bit"] + 32 * eff.layer_s)
    # over 8 GPUs each reads its own weights and cache (the Many GPUs page's rules: the norms
    # whole on every rank), a little more than an eighth of the whole
    tp = decode_step(cfg, gpu, 1, 105, "bf16", "bf16", 8, eff)
    one = roofline(cfg, gpu, 1, 105, "bf16", "decode", "bf16", "bf16", tp=8)
    assert tp.bound == one.time_per_step_s == one.memory_time_s
    assert r.memory_time_s / 8 < one.memory_time_s < 1.001 * r.memory_time_s / 8
    # ... and each block all-reduces the token's 4,096 activations twice (and the embedding
    # once): 65 ring all-reduces of 8 KiB, 2·7/8 of it sent each, at tp_link of the A100's
    # NVLink 3: "600 GB/s" both directions, 300 GB/s one way
    links = 65 * 2 * 7 / 8 * 4096 * 2 / (300e9 * eff.tp_link)
    assert tp.estimate == pytest.approx(one.memory_time_s / 0.8 + 32 * (eff.layer_s + eff.tp_layer_s) + links)


def test_a_static_batch_is_its_prefill_and_its_steps_and_prefill_all_reduces_under_tp():
    """TensorRT-LLM's static-batch throughput (and predict decode's e2e_s): the prompts' prefill
    then the steps; a prefill on 4 GPUs adds 2 all-reduces per block of its tokens' activations."""
    from llama_lab.analysis.parallel import tp_forward_bytes
    from llama_lab.validation.efficiency import static_batch_seconds

    cfg, gpu, eff = PRESETS["llama-2-70b"], GPUS["H100 80GB"], Efficiency.load()
    run = static_batch_seconds(cfg, gpu, 64, 128, 512, "fp8", "fp8", 4, eff, "fp8")
    first = prefill_seconds(cfg, gpu, 64, 128, "fp8", 4, eff, True, "fp8")
    steps = 512 * 64 / decode_tokens_per_s(cfg, gpu, 64, 128, 512, "fp8", "fp8", 4, eff, "fp8").estimate
    assert run.estimate == pytest.approx(first.estimate + steps)
    tokens = 64 * 128
    assert tp_forward_bytes(cfg, 4, tokens) == (2 * 80 + 1) * 2 * 3 / 4 * tokens * 8192 * 2
    one = prefill_seconds(cfg, gpu, 64, 128, "fp8", 1, eff, True, "fp8")
    links = tp_forward_bytes(cfg, 4, tokens) / (450e9 * eff.tp_link)
    assert first.bound < one.bound and first.estimate > links
    row = next(r for r in ROWS if r.id == "trtllm-v09-llama2-7b-h200-fp8-bs120-128-2048")
    assert row.workload["static_batch"] is True
    w = row.workload
    run = static_batch_seconds(row.config, row.gpu, 120, 128, 2048, "fp8", "fp8", 1, eff, "fp8")
    assert predict_row(row, eff).estimate == pytest.approx(120 * 2048 / run.estimate / int(w["tp"] or 1))


def test_no_estimate_beats_its_bound():
    for found in results(Efficiency.load()):
        if found.prediction is None or found.row.kind in ("memory", "finetune_memory"):  # counts
            continue
        p = found.prediction
        if found.row.metric == "seconds":
            assert p.estimate >= p.bound, found.row.id
        else:
            assert p.estimate <= p.bound * (1 + 1e-12), found.row.id


def test_no_measured_row_beats_its_bound():
    """Every bound is a true roofline (fp8 matmuls at the fp8 dense peak): a measured time is
    at least its bound's, a measured rate (or KV-cache capacity) at most its bound's."""
    checked = 0
    for found in results(Efficiency.load()):
        if found.prediction is None or found.row.kind in ("memory", "finetune_memory"):
            continue
        measured, bound = found.row.measured, found.prediction.bound
        if found.row.metric == "seconds":
            assert measured >= bound, (found.row.id, measured, bound)
        else:
            assert measured <= bound, (found.row.id, measured, bound)
        checked += 1
    assert checked >= 60


def test_rows_whose_matmuls_run_in_fp8_are_bounded_at_the_fp8_peak():
    rows = {r.id: r for r in load_rows()}
    trt = rows["trtllm-v05-llama2-7b-h100-fp8-ttft-2048"]
    titan = rows["torchtitan-llama31-8b-fsdp-compile-fp8-8xh100"]
    weight_only = rows["gptfast-llama2-7b-int8-a100"]  # int8 weights, bf16 activations
    assert (trt.matmuls_in, titan.matmuls_in, weight_only.matmuls_in) == ("fp8", "fp8", "bf16")
    w, eff = trt.workload, Efficiency.load()
    r = roofline(trt.config, trt.gpu, int(w["batch"]), int(w["prompt_len"]), "fp8", "prefill", "fp8")
    assert r.peak_flops == trt.gpu.peak_flops("fp8") == 2 * trt.gpu.peak_bf16_flops
    assert predict_row(trt, eff).bound == max(r.compute_time_s, r.memory_time_s)
    # fp8 training: the GEMMs at the fp8 peak, the attention scores at bf16's
    cfg, seq = titan.config, int(titan.workload["seq_len"])
    matmuls, scores = train_flops_split(cfg, seq, titan.workload.get("recompute"))
    gpu = titan.gpu
    expected = 1 / (matmuls / gpu.peak_flops("fp8") + scores / gpu.peak_bf16_flops)
    assert predict_row(titan, eff).bound == pytest.approx(expected)
    assert 0 < eff.train_fp8 <= 1  # a share of a peak


def test_the_fp8_matmul_share_moves_fp8_inference_compute_and_nothing_else():
    """``matmul_fp8`` divides the compute time of prefill and decode whose matmuls run in fp8
    (TensorRT-LLM's fp8 engines); a 16-bit prefill keeps ``matmul``'s estimate."""
    cfg, gpu = PRESETS["llama-2-7b"], GPUS["H100 80GB"]
    base = dataclasses.replace(Efficiency(), prefill_floor_s=0.0, matmul=0.5, matmul_fp8=0.4)
    halved = dataclasses.replace(base, matmul_fp8=0.2)
    bf16 = [prefill_seconds(cfg, gpu, 1, 2048, "bf16", 1, e, compute="bf16") for e in (base, halved)]
    fp8 = [prefill_seconds(cfg, gpu, 1, 2048, "fp8", 1, e, compute="fp8") for e in (base, halved)]
    assert bf16[0] == bf16[1]  # 16-bit: unchanged by the fp8 share
    r = roofline(cfg, gpu, 1, 2048, "fp8", "prefill", "fp8")
    assert r.compute_time_s > r.memory_time_s / base.decode_bw["16-bit"]  # compute-bound
    assert fp8[0].estimate == pytest.approx(r.compute_time_s / 0.4)
    assert fp8[1].estimate == pytest.approx(2 * fp8[0].estimate) and fp8[0].bound == fp8[1].bound
    # compute-bound batched decode in fp8 scales with it; in bf16 it does not
    steps = {
        c: [decode_step(cfg, gpu, 4096, 8, "fp8", "fp8", 1, e, c).estimate for e in (base, halved)]
        for c in ("fp8", "bf16")
    }
    assert steps["fp8"][1] > 1.5 * steps["fp8"][0] and steps["bf16"][0] == steps["bf16"][1]
    assert Efficiency.load().matmul_share("fp8") == Efficiency.load().matmul_fp8


def test_the_shipped_summary_is_what_the_shipped_parameters_give():
    shipped = json.loads(PARAMS_FILE.read_text())
    assert Efficiency.load().to_dict() == shipped["parameters"]
    assert close(summary(results(Efficiency.load()), shipped["cross_validated"]), shipped["summary"])
    decode = shipped["summary"]["decode_bs1"]
    assert decode["predicted"] >= 10 and decode["held_out_median_abs_error"] is not None


@pytest.mark.slow
def test_the_shipped_parameters_are_a_fresh_fit():
    eff, _ = fit()
    shipped = json.loads(PARAMS_FILE.read_text())["parameters"]
    assert close(eff.to_dict(), shipped)


@pytest.mark.slow
def test_the_shipped_leave_one_out_errors_are_those_of_fits_without_each_row():
    """Three fit rows (one of each of three kinds), each predicted under a fit made without it:
    the ratios the intervals are built from (the whole set: tools/fit_efficiency.py)."""
    from llama_lab.validation.intervals import log_ratio

    shipped = json.loads(PARAMS_FILE.read_text())["cross_validated"]
    fit_rows = [r for r in ROWS if r.half == "fit" and not r.why_not]
    assert set(shipped) == {r.id for r in fit_rows}
    for kind in ("decode_bs1", "prefill", "train"):
        row = next(r for r in fit_rows if r.kind == kind)
        eff, _ = fit(tuple(r for r in ROWS if r is not row))
        unseen = log_ratio(row.measured, predict_row(row, eff).estimate, row.metric)
        assert shipped[row.id] == pytest.approx(unseen)


@pytest.mark.slow
def test_the_fit_never_sees_the_held_out_half():
    """Every held-out measurement scaled by 10: the fitted parameters do not move."""
    changed = tuple(
        Row({**r.data, "metric": {**r.data["metric"], "value": 10 * r.measured}}, r.half)
        if r.half == "held_out"
        else r
        for r in ROWS
    )
    assert fit(changed, sweeps=1)[0] == fit(ROWS, sweeps=1)[0]


def test_predict_decode_gives_spec_keys_bound_estimate_and_interval(capsys):
    argv = ["predict", "decode", "--preset", "llama-3-8b", "--gpu", "h100-80gb", "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    tokens, ms = out["tokens_per_s"], out["ms_per_token"]
    assert set(tokens) == set(ms) == {"bound", "estimate", "low", "high"}
    assert tokens["low"] <= tokens["estimate"] <= tokens["high"] and tokens["estimate"] < tokens["bound"]
    assert ms["estimate"] == pytest.approx(1000 / tokens["estimate"])  # batch 1
    assert out["gpu"] == "H100 80GB"


def test_predict_decode_gives_the_time_to_first_token_the_whole_run_and_the_cache_tokens(capsys):
    """SPEC's ttft_ms, e2e_s and memory.kv_cache_tokens, each the Validation path's own function
    (prefill of a served request; decode steps; vLLM's cache sizing) at the command's workload."""
    from llama_lab.validation.efficiency import prefill_seconds
    from llama_lab.validation.engine import vllm_kv_tokens

    argv = ["predict", "decode", "--preset", "llama-3-8b", "--gpu", "h100-80gb", "--batch", "8"]
    assert main([*argv, "--prompt-len", "512", "--new-tokens", "100", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    cfg, gpu, eff = PRESETS["llama-3-8b"], GPUS["H100 80GB"], Efficiency.load()
    ttft, e2e, cache = out["ttft_ms"], out["e2e_s"], out["memory"]["kv_cache_tokens"]
    assert set(ttft) == set(e2e) == {"bound", "estimate", "low", "high"}
    assert set(cache) == {"estimate", "low", "high"}
    prefill = prefill_seconds(cfg, gpu, 8, 512, "bf16", 1, eff)  # 8 prompts of 512, served
    assert ttft["estimate"] == pytest.approx(1000 * prefill.estimate) and ttft["bound"] < ttft["estimate"]
    assert ttft["bound"] == pytest.approx(1000 * prefill.bound)
    # the static batch: its prefill, then 100 steps of 8 tokens each
    for key in ("bound", "estimate"):
        step_s = 8 / out["tokens_per_s"][key]
        assert e2e[key] == pytest.approx(ttft[key] / 1000 + 100 * step_s)
    assert e2e["low"] <= e2e["estimate"] <= e2e["high"]
    # vllm serve's defaults on an 80 GB H100 (≥ 70 GiB, not an A100): 8,192 tokens over 1,024
    engine = out["memory"]["engine"]
    assert (engine["max_num_batched_tokens"], engine["max_num_seqs"], engine["gpu_memory_utilization"]) == (
        8192,
        1024,
        0.9,
    )
    assert cache["estimate"] == vllm_kv_tokens(cfg, gpu, "bf16", "bf16", 0.9, 8192, 1024, 1, eff).estimate
    assert cache["low"] <= cache["estimate"] <= cache["high"]
    # by hand: what 0.9 of CUDA's total leaves after the weights, the profiling forward's
    # activations (vLLM's Llama at SiluAndMul: 3 × 4,096 + 3 × 14,336 per token, 2 bytes, more
    # than the sampling after it: 8,192 × 4,096 outputs and 1,024 × the vocabulary's logits in bf16
    # and float32) and the fitted non-torch bytes (vLLM 0.11.0: no CUDA context, no collectives
    # at tp 1), in blocks of 16 tokens of 32 layers × 2 × 8 heads × 128 × 2 B
    from llama_lab.validation.engine import CUDA_RESERVED_BYTES, weights_per_gpu

    free = 0.9 * (gpu.memory_bytes - CUDA_RESERVED_BYTES) - weights_per_gpu(cfg, "bf16", 1)
    free -= 2 * 8192 * (3 * 4096 + 3 * 14336) + eff.engine_non_torch_bytes
    assert cache["estimate"] == 16 * math.floor(free / (16 * 32 * 2 * 8 * 128 * 2))
    # an A100 80GB and a 24 GB card profile with 2,048 tokens over 256 sequences; a lower
    # utilization leaves fewer tokens; the settings given are the settings used
    for name in ("a100-80gb", "rtx-4090"):
        assert main(["predict", "decode", "--preset", "llama-3-8b", "--gpu", name, "--json"]) == 0
        engine = json.loads(capsys.readouterr().out)["memory"]["engine"]
        assert (engine["max_num_batched_tokens"], engine["max_num_seqs"]) == (2048, 256)
    mine = ["--gpu-memory-utilization", "0.5", "--max-num-batched-tokens", "4096", "--max-num-seqs", "8"]
    assert main([*argv, *mine, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["memory"]["kv_cache_tokens"]["estimate"] < cache["estimate"]
    assert (out["memory"]["engine"]["max_num_batched_tokens"], out["memory"]["engine"]["max_num_seqs"]) == (
        4096,
        8,
    )


def test_predict_decode_takes_the_activations_format(capsys):
    """--activation-dtype fp8 (with fp8 weights: W8A8) computes the matmuls at the fp8 peak:
    the prefill's bound halves on an H100 against fp8 weights dequantised to bf16; the
    weights read per step are the same; without fp8 weights, or on an A100, it is refused."""
    argv = ["predict", "decode", "--preset", "llama-3-8b", "--gpu", "h100-80gb", "--batch", "64"]
    argv += ["--prompt-len", "1024", "--weight-dtype", "fp8", "--json"]
    out = {}
    for activations in ("bf16", "fp8"):
        assert main([*argv, "--activation-dtype", activations]) == 0
        out[activations] = json.loads(capsys.readouterr().out)
    gpu = GPUS["H100 80GB"]
    ratio = gpu.peak_flops("fp8") / gpu.peak_flops("bf16")
    assert out["bf16"]["ttft_ms"]["bound"] / out["fp8"]["ttft_ms"]["bound"] == pytest.approx(ratio, rel=0.05)
    assert out["fp8"]["activation_dtype"] == "fp8" and out["bf16"]["activation_dtype"] == "bf16"
    assert out["fp8"]["memory"] == out["bf16"]["memory"]
    bad = ["predict", "decode", "--preset", "llama-3-8b", "--gpu", "h100-80gb", "--activation-dtype", "fp8"]
    assert main(bad) == 2
    assert "--activation-dtype fp8 needs --weight-dtype fp8" in capsys.readouterr().err
    a100 = [*bad[:5], "a100-80gb", "--activation-dtype", "fp8", "--weight-dtype", "fp8"]
    assert main(a100) == 2
    assert "A100 80GB has no fp8 tensor cores" in capsys.readouterr().err


def test_predict_decode_sizes_a_logged_vllm_cache_as_its_validation_row():
    """The command and the Validation row agree on a logged cache (vLLM 0.6.4 on an RTX 3090,
    Llama-3.1-8B at 29,000 tokens; vLLM V1 0.8 on an L40S at 32,768: each row's own utilization,
    profiling batch and release)."""
    from llama_lab.validation.predict import predict_decode
    from llama_lab.validation.validate import predict_row

    for name in ("vllm-kv-llama31-8b-rtx3090-29k", "vllm-kv-llama31-8b-l40s-v1-32k"):
        row = next(r for r in ROWS if r.id == name)
        w = row.workload
        settings = (float(w["gpu_memory_utilization"]), *row.engine_profile)
        args = (row.config, row.gpu, 1, None, 1, 128, 128, "bf16", "bf16", *settings)
        out = predict_decode(*args, engine=w["engine"])
        assert out["memory"]["kv_cache_tokens"]["estimate"] == predict_row(row, Efficiency.load()).estimate


def test_predict_train_gives_tokens_per_gpu_mfu_and_whether_it_fits(capsys):
    argv = ["predict", "train", "--preset", "llama-3-8b", "--gpu", "H100 80GB", "--gpus", "8", "--zero", "3"]
    assert main([*argv, "--seq-len", "8192", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out["tokens_per_s_per_gpu"]) == {"bound", "estimate", "low", "high"}
    assert set(out["mfu"]) == {"bound", "estimate"} and 0 < out["mfu"]["estimate"] < out["mfu"]["bound"]
    assert out["fits"] is True and 0 < out["per_gpu_bytes"] < GPUS["H100 80GB"].memory_bytes
    assert main(["predict", "train", "--preset", "llama-3-70b", "--gpu", "L4", "--gpus", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["fits"] is False  # predicted all the same, and said


def test_predict_train_takes_context_parallel_ranks(capsys):
    """--cp C: each GPU's tokens cost what they cost without it (the same attention FLOPs per
    token; the ring's K/V exchange overlapped with the attention, as torchtitan and Megatron run
    it), its activations those of T/C tokens; 2·C must divide the sequence."""
    argv = ["predict", "train", "--preset", "llama-3-8b", "--gpu", "h100-80gb", "--gpus", "8", "--zero", "3"]
    argv += ["--seq-len", "131072", "--recompute", "full", "--json"]
    out = {}
    for cp in (1, 8):
        assert main([*argv, "--cp", str(cp)]) == 0
        out[cp] = json.loads(capsys.readouterr().out)
    assert out[8]["tokens_per_s_per_gpu"] == out[1]["tokens_per_s_per_gpu"]
    assert out[8]["per_gpu_bytes"] < out[1]["per_gpu_bytes"] and "CP8 · DP1" in out[8]["layout"]
    assert main([*argv[:-5], "--seq-len", "1000", "--cp", "8"]) == 2
    assert "2·cp = 16 does not divide seq_len=1000" in capsys.readouterr().err


def test_predict_train_takes_expert_parallel_ranks(capsys):
    """--ep E: each GPU holds E-th of the experts (its memory) and spends the expert all-to-all's
    time per token (parallel's comm_by_kind.ep bytes, tests/unit/validation/test_moe_step.py)."""
    argv = ["predict", "train", "--preset", "gpt-oss-120b", "--gpu", "h100-80gb", "--gpus", "64"]
    argv += ["--zero", "1", "--seq-len", "4096", "--json"]
    out = {}
    for ep in (1, 8):
        assert main([*argv, "--ep", str(ep)]) == 0
        out[ep] = json.loads(capsys.readouterr().out)
    assert out[8]["tokens_per_s_per_gpu"]["estimate"] < out[1]["tokens_per_s_per_gpu"]["estimate"]
    assert out[1]["seconds_per_token_by_term"]["expert_all_to_all"] == 0
    assert out[8]["seconds_per_token_by_term"]["expert_all_to_all"] > 0
    assert out[8]["tokens_per_s_per_gpu"]["bound"] == out[1]["tokens_per_s_per_gpu"]["bound"]
    assert out[8]["per_gpu_bytes"] < out[1]["per_gpu_bytes"] / 2 and "EP8" in out[8]["layout"]


def test_predict_train_in_fp8_runs_its_gemms_at_the_fp8_peak(capsys):
    """--dtype fp8: the bound at the fp8 dense peak (its GEMMs; the scores at bf16's), the
    estimate at the fp8 share fitted on the fp8 rows, the memory as bf16 mixed precision; a GPU
    without fp8 tensor cores refuses it by name."""
    from llama_lab.validation.efficiency import train_tokens_per_s_per_gpu

    argv = ["predict", "train", "--preset", "llama-3-8b", "--gpu", "h100-80gb", "--gpus", "8", "--zero", "3"]
    out = {}
    for dtype in ("bf16", "fp8"):
        assert main([*argv, "--seq-len", "8192", "--dtype", dtype, "--json"]) == 0
        out[dtype] = json.loads(capsys.readouterr().out)
    cfg, gpu = PRESETS["llama-3-8b"], GPUS["H100 80GB"]
    p = train_tokens_per_s_per_gpu(cfg, gpu, 8192, "none", "fp8", Efficiency.load())
    assert out["fp8"]["tokens_per_s_per_gpu"]["bound"] == pytest.approx(p.bound)
    assert out["fp8"]["tokens_per_s_per_gpu"]["estimate"] == pytest.approx(p.estimate)
    assert out["fp8"]["tokens_per_s_per_gpu"]["bound"] > out["bf16"]["tokens_per_s_per_gpu"]["bound"]
    assert out["fp8"]["per_gpu_bytes"] == out["bf16"]["per_gpu_bytes"] and out["fp8"]["dtype"] == "fp8"
    a100 = [
        "predict",
        "train",
        "--preset",
        "llama-3-8b",
        "--gpu",
        "a100-80gb",
        "--gpus",
        "8",
        "--dtype",
        "fp8",
    ]
    assert main(a100) == 2
    assert "A100 80GB has no fp8 tensor cores" in capsys.readouterr().err


TRAIN_64 = [
    "predict",
    "train",
    "--preset",
    "llama-3-70b",
    "--gpu",
    "h100-80gb",
    "--gpus",
    "64",
    "--tp",
    "8",
    "--pp",
    "4",
]


def test_predict_train_takes_virtual_stages_and_a_global_batch(capsys):
    """--vp V: the interleaved 1F1B schedule, its bubble (p−1)/(V·m + p − 1) of the step
    (Narayanan et al. 2021) in place of 1F1B's; --global-batch GB: m = GB / (dp · micro-batch)
    micro-batches per step on each data-parallel rank."""
    argv = ["predict", "train", "--preset", "llama-3-70b", "--gpu", "h100-80gb", "--seq-len", "8192"]
    argv += ["--gpus", "64", "--tp", "8", "--pp", "4", "--json"]  # dp 2
    runs = {}
    for vp in (1, 5):
        assert main([*argv, "--vp", str(vp), "--global-batch", "128"]) == 0
        runs[vp] = json.loads(capsys.readouterr().out)
    m = 128 // (2 * 1)
    assert runs[1]["micro_batches"] == runs[5]["micro_batches"] == m and runs[5]["global_batch"] == 128
    assert "interleaved v=5" in runs[5]["layout"] and "interleaved" not in runs[1]["layout"]
    bubble = {v: 3 / (v * m + 3) for v in (1, 5)}
    ratio = runs[5]["tokens_per_s_per_gpu"]["estimate"] / runs[1]["tokens_per_s_per_gpu"]["estimate"]
    assert ratio == pytest.approx((1 - bubble[5]) / (1 - bubble[1]))
    assert runs[5]["tokens_per_s_per_gpu"]["bound"] == runs[1]["tokens_per_s_per_gpu"]["bound"]
    # more micro-batches in flight on each GPU under interleaving: more activation bytes
    assert runs[5]["per_gpu_bytes"] > runs[1]["per_gpu_bytes"]


@pytest.mark.parametrize(
    "argv,rule",
    [
        (["predict", "decode", "--preset", "llama-3-8b", "--gpu", "B300"], "--gpu 'B300' must be one of"),
        (
            ["predict", "decode", "--preset", "llama-3-8b", "--gpu", "l4", "--gpus", "2", "--tp", "1"],
            "must equal",
        ),
        (
            ["predict", "decode", "--preset", "seed-demo", "--gpu", "l4", "--prompt-len", "200"],
            "max_seq_len=128",
        ),
        (
            [*TRAIN_64, "--global-batch", "129"],
            "--global-batch 129 is not a whole number of micro-batches: dp=2 × micro-batch=1 = 2",
        ),
        (
            [*TRAIN_64, "--global-batch", "128", "--micro-batches", "8"],
            "disagree: 128 / (dp=2 × micro-batch=1) = 64",
        ),
        ([*TRAIN_64, "--vp", "3"], "pp·chunks = 12 does not divide n_layers=80"),
        (
            ["predict", "decode", "--preset", "seed-demo", "--gpu", "l4", "--gpu-memory-utilization", "0"],
            "must be above 0 and at most 1",
        ),
        (
            ["predict", "decode", "--preset", "seed-demo", "--gpu", "l4", "--gpu-memory-utilization", "nan"],
            "must be above 0 and at most 1",
        ),
    ],
)
def test_predict_refuses_in_one_line(capsys, argv, rule):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and rule in err[0]


def test_validate_lists_every_row_and_a_summary_per_kind(capsys):
    assert main(["validate", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["rows"]) == len(ROWS)
    for row in out["rows"]:
        assert {"id", "kind", "source", "measured", "bound", "estimate", "rel_error", "half"} <= row.keys()
        assert row["half"] in ("fit", "held_out")
        if row["estimate"] is not None:
            assert row["rel_error"] == pytest.approx((row["estimate"] - row["measured"]) / row["measured"])
        else:
            assert row["not_predicted"]  # said why
    for kind in KINDS:
        s = out["summary"][kind]
        assert {
            "n",
            "fit_median_abs_error",
            "held_out_median_abs_error",
            "held_out_max_abs_error",
            "interval_level",
            "interval_ratio",
            "held_out_coverage",
        } <= s.keys()
    assert main(["validate", "--kind", "train", "--json"]) == 0
    only = json.loads(capsys.readouterr().out)
    assert {r["kind"] for r in only["rows"]} == {"train"} and list(only["summary"]) == ["train"]
    assert set(out["parameters"]) == {f.name for f in dataclasses.fields(Efficiency)}
    assert all(math.isfinite(v) for v in out["parameters"]["decode_bw"].values())
    assert validate("train")["rows"] == only["rows"]


def test_the_readme_states_the_held_out_errors_the_shipped_fit_gives():
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text()
    shipped = json.loads(PARAMS_FILE.read_text())["summary"]
    for kind in ("decode_bs1", "prefill", "train", "memory", "decode_batched", "kv_capacity"):
        assert f"{kind} {100 * shipped[kind]['held_out_median_abs_error']:.1f} %" in readme, kind


def test_gpus_hold_what_the_device_reports_less_the_cuda_context():
    from llama_lab.runtime.hardware import CUDA_CONTEXT_BYTES

    reported_mib = {"H100 80GB": 81_559, "H200 141GB": 143_771, "A100 80GB": 81_920, "L4": 23_034}
    for name, mib in reported_mib.items():
        gpu = GPUS[name]
        assert gpu.memory_bytes == mib * 2**20 and f"{mib}MiB" in gpu.memory_source
        assert gpu.usable_bytes == gpu.memory_bytes - CUDA_CONTEXT_BYTES == gpu.memory_bytes - 300 * 10**6


def test_llama_3_70b_in_bf16_on_one_h200_fits_and_says_under_which_engine_setting(capsys):
    """141,107,412,992 bytes of weights (+ the cache of 256 tokens) against the H200's reported
    150,754,820,096 less a 300 MB context: fits with about 9.3 GB to spare; vLLM's default cap
    of 0.9 leaves 135.7 GB, too little: it needs ≥ 0.939."""
    assert main(["predict", "decode", "--preset", "llama-3-70b", "--gpu", "h200-141gb", "--json"]) == 0
    m = json.loads(capsys.readouterr().out)["memory"]
    need = 141_107_412_992 + 256 * 327_680  # weights + 256 tokens × 80 layers × 2 × 8 × 128 × 2 bytes
    assert m["weights_and_cache_bytes_per_gpu"] == need and m["fits"] is True
    assert m["margin_bytes"] == 143_771 * 2**20 - 300 * 10**6 - need
    assert m["fits_at_vllm_default"] is False
    assert m["gpu_memory_utilization_needed"] == pytest.approx((need + 300 * 10**6) / (143_771 * 2**20))
    assert main(["predict", "decode", "--preset", "llama-3-70b", "--gpu", "h200-141gb"]) == 0
    assert "fits with 9.26 GB to spare; at vLLM's default gpu_memory_utilization 0.9 it does not fit" in (
        capsys.readouterr().out
    )


def test_the_layout_search_shows_each_step_beside_its_calibrated_estimate():
    """Hand-derived: each GPU's tokens at the fitted shares (matmuls at train_bf16, the causal
    scores at train_attention, the TP group's bytes at tp_link of 450 GB/s), stretched by the
    pipeline bubble, plus the modeled pipeline and data-parallel traffic."""
    from llama_lab.analysis import count_flops
    from llama_lab.analysis.layouts import search_layouts
    from llama_lab.analysis.parallel import Layout, parallel_memory
    from llama_lab.figures.parallel import search_frame

    cfg, T, gpu = PRESETS["llama-2-70b"], 4096, GPUS["H100 80GB"]
    rows = search_layouts(cfg, 64, "H100 80GB", seq_len=T)
    frame = search_frame(rows, cfg, T, gpu)
    eff = Efficiency.load()
    r = next(r for r in rows if r.tp > 1 and r.pp > 1)  # every term present
    flops = count_flops(cfg, T, 1)
    passes = 4 if r.recompute == "full" else 3
    scores = passes * flops.attention_scores_causal / T
    matmuls = passes * flops.forward_causal / T - scores
    tp_layout = Layout(gpus=r.tp, tp=r.tp, sequence_parallel=True, recompute=r.recompute)
    tp_bytes = parallel_memory(cfg, tp_layout, T, "bf16").comm_by_kind["tp"] / T
    per_token = (
        matmuls / (gpu.peak_flops("bf16") * eff.train_bf16)
        + scores / (gpu.peak_bf16_flops * eff.train_attention)
        + r.tp * tp_bytes / (450e9 * eff.tp_link)
    )
    tokens = r.dp * r.micro_batches * T / 64  # one sequence per micro-batch
    by_hand = tokens * per_token / (1 - r.bubble_fraction) + r.comm_s - r.tp_comm_s
    assert frame.step_s_estimate.iloc[rows.index(r)] == pytest.approx(by_hand)
    # the interval: train's, as measured / estimate of tokens/s, inverted for a time
    low, high = validate("train")["summary"]["train"]["interval_ratio"]
    row = frame.iloc[rows.index(r)]
    assert row.step_s_low == pytest.approx(by_hand / high)
    assert row.step_s_high == pytest.approx(by_hand / low)
    assert (frame.step_s_estimate >= frame.step_s - frame.comm_s).all()  # no share above the peak


def test_every_stored_weight_format_decodes_at_the_share_of_its_bits():
    """A file's stored format (gpt-oss's MXFP4, a GPTQ int4) reaches the KV page's estimate
    as a WeightQuant: its bits choose the bandwidth share."""
    from pathlib import Path

    from llama_lab.analysis.quant import stored_weights
    from llama_lab.config.files import stored_quant_of
    from llama_lab.validation.efficiency import format_class

    published = Path(__file__).resolve().parents[2] / "families" / "published_configs"
    text = (published / "gpt-oss-20b.json").read_text()
    mxfp4 = stored_weights(stored_quant_of(text))
    assert mxfp4.dtype == "mxfp4" and format_class(mxfp4) == "4-bit"
    assert [format_class(w) for w in ("fp32", "bf16", "fp8", "int8", "int4")] == [
        "16-bit",
        "16-bit",
        "8-bit",
        "8-bit",
        "4-bit",
    ]
    step = decode_step(PRESETS["gpt-oss-20b"], GPUS["H100 80GB"], 1, 1024, mxfp4, "bf16", 1, Efficiency())
    assert 0 < step.bound < step.estimate


def test_a_training_runs_peak_memory_is_the_layouts_count_times_the_fitted_factor():
    """torchtitan's Llama-3.1-8B on 8 GPUs, FSDP, its operator-level selective recomputation and
    its eager float32 loss (analysis.torchtitan), 2 × 8,192 tokens per GPU: LLaMA Lab's per-GPU
    count for that layout, and × memory_factor."""
    from llama_lab.analysis.parallel import Layout, parallel_memory
    from llama_lab.validation import predict_row

    row = next(r for r in ROWS if r.id == "torchtitan-mem-llama31-8b-fsdp-8xh100")
    layout = Layout(gpus=8, zero=3, recompute="op", micro_batch=2, micro_batches=1, loss="eager")
    counted = parallel_memory(PRESETS["llama-3-8b"], layout, 8192, "bf16").per_gpu["total_bytes"]
    eff = Efficiency.load()
    p = predict_row(row, eff)
    assert p.bound == counted and p.estimate == pytest.approx(counted * eff.memory_factor)
    assert row.why_not is None and row.gpu is GPUS["H100 96GB HBM2e"]  # torchtitan's Grand Teton H100


def test_the_device_terms_are_an_overhead_a_rate_and_an_update_time_per_parameter():
    """Issue 28 §3, hand-derived: passes timed as a 2 ms one-token overhead, F at 1 TFLOP/s
    and 3 ns per parameter of AdamW give back those terms; on a CPU the overhead and the FLOPs
    add, on a GPU the step is the longer of the two (launches overlap the kernels), a
    launch-bound GPU pass says nothing of the rate, and no rate exceeds the peak."""
    from llama_lab.analysis import count_params
    from llama_lab.validation.device import DeviceCalibration, PassTiming, causal_training_flops

    cfg = PRESETS["debug"]
    params = count_params(cfg).total

    def timing(seq_len: int, batch: int, overlapped: bool) -> PassTiming:
        flops = causal_training_flops(cfg, seq_len, batch)
        compute = max(2e-3, flops / 1e12) if overlapped else 2e-3 + flops / 1e12
        return PassTiming(flops, params, compute, 3e-9 * params, 2e-3)

    cpu = DeviceCalibration("cpu", "fp32", False, 4e12, (timing(16, 1, False),))
    assert cpu.terms.rate == pytest.approx(1e12) and cpu.terms.overhead_s == 2e-3
    assert cpu.terms.update_s_per_param == pytest.approx(3e-9)
    big = causal_training_flops(cfg, 64, 8)
    assert cpu.predict_step_s(cfg, 64, 8) == pytest.approx(2e-3 + big / 1e12 + 3e-9 * params)
    assert "from 1 live pass:" in cpu.label and "(25.0% of the peak)" in cpu.label
    assert "the sum of" in cpu.label
    assert "causal FLOPs" in cpu.label and "MFU" not in cpu.label  # not the MFU convention's FLOPs

    gpu = DeviceCalibration("gpu", "bf16", True, 4e12, (timing(16, 1, True),))
    assert causal_training_flops(cfg, 16, 1) / 1e12 < 2e-3  # launch bound: no rate yet, the peak
    assert gpu.terms.rate is None and "launch bound" in gpu.label
    assert gpu.predict_step_s(cfg, 64, 8) == pytest.approx(max(2e-3, big / 4e12) + 3e-9 * params)
    huge = causal_training_flops(cfg, 64, 4096)  # compute bound
    gpu = gpu.with_pass(PassTiming(huge, params, huge / 1e12, 3e-9 * params, 2e-3))
    assert gpu.terms.rate == pytest.approx(1e12) and "the longer of" in gpu.label
    # a pass just past its overhead is still partly launch bound: F / t understates the rate
    # there, and the GPU takes the most any pass reached (each one a lower bound)
    near = PassTiming(1e9, params, 2.6e-3, 3e-9 * params, 2e-3)  # 1 ms of FLOPs in 2.6 ms
    assert gpu.with_pass(near).terms.rate == pytest.approx(1e12)
    # a pass faster than the peak allows (a timer's noise) is held to the peak
    fast = DeviceCalibration("gpu", "bf16", True, 4e12, (PassTiming(huge, params, huge / 8e12, 0, 2e-3),))
    assert fast.terms.rate == 4e12


def test_vllms_kv_cache_is_what_its_budget_leaves_in_blocks_of_16_tokens():
    """Hand-derived for the RTX 3090 run at max_model_len 20,000 (vLLM V0 0.6.4): 0.9 × (24,576 MiB
    less the 0.43 GiB CUDA does not report), less the bf16 weights, the activations of a
    20,000-token profiling forward over 256 sequences, the sampler's float32 logits (256 × 128,256
    × 4 bytes), the CUDA context (0.6.4 counts it) and the fitted non-torch bytes, in blocks of 16
    tokens × 32 layers × 8 KV heads × 128 × 2 (K, V) × 2 bytes; the bound takes 0.9 × 24,576 MiB
    less the weights only."""
    from llama_lab.analysis import count_params
    from llama_lab.validation import predict_row

    row = next(r for r in ROWS if r.id == "vllm-kv-llama31-8b-rtx3090-20k")
    cfg, eff = PRESETS["llama-3-8b"], Efficiency.load()
    assert row.gpu is GPUS["RTX 3090"] and row.gpu.memory_bytes == 24576 * 2**20
    block = 16 * 32 * 8 * 128 * 2 * 2
    budget = 0.9 * 24576 * 2**20 - 2 * count_params(cfg).total
    # vLLM's Llama at SiluAndMul, by hand: the layer loop's input, the residual, the MLP's input
    # (3 × 4,096) and the merged gate_up (2 × 14,336) and its activation (14,336), 2 bytes each,
    # for the 20,000 tokens; the log's peak_torch_memory 17.06 GiB less the weights' 14.96
    activations = 2 * 20000 * (3 * 4096 + 3 * 14336)
    assert activations / 2**30 == pytest.approx(17.06 - 2 * count_params(cfg).total / 2**30, abs=0.05)
    from llama_lab.runtime.hardware import CUDA_CONTEXT_BYTES
    from llama_lab.validation.engine import (
        COLLECTIVE_BYTES,
        non_torch_bytes,
        profile_activation_bytes,
        sampler_logits_bytes,
    )

    assert profile_activation_bytes(cfg, 20000, 256, 1) == activations
    assert row.workload["engine"] == "vllm-v0-0.6.4"
    assert sampler_logits_bytes(cfg, 256, 20000) == 256 * 128256 * (2 + 4)  # bf16 and their fp32 copy
    assert non_torch_bytes("vllm-v0-0.6.4", 1, eff) == CUDA_CONTEXT_BYTES + eff.engine_non_torch_bytes
    # 0.6.6 on (V0) and 0.9.2 on (V1) count no context; up to 0.10 a tp group's buffers count,
    # 8 MiB of custom all-reduce buffer and 8 MiB of its signals per rank; 0.11.0 neither
    assert non_torch_bytes("vllm-v0-0.6.6", 2, eff) == 2 * 8 * 2**20 + eff.engine_non_torch_bytes
    assert COLLECTIVE_BYTES == 16 * 2**20
    assert non_torch_bytes("vllm-v1-0.11", 2, eff) == eff.engine_non_torch_bytes
    taken = activations + CUDA_CONTEXT_BYTES + eff.engine_non_torch_bytes
    usable = 0.9 * (24576 * 2**20 - round(0.43 * 2**30)) - 2 * count_params(cfg).total
    p = predict_row(row, eff)
    assert p.bound == 16 * (budget // block)
    assert p.estimate == 16 * ((usable - taken) // block)
    # two GPUs (tensor parallel) keep 4 of the R1 distill's 8 KV heads each, and half its weights
    from llama_lab.validation.engine import kv_bytes_per_token_per_gpu

    r1 = next(r for r in ROWS if r.id == "vllm-kv-r1-distill-qwen-14b-2xrtx4090")
    assert kv_bytes_per_token_per_gpu(r1.config, "bf16", 2) == 48 * 4 * 128 * 2 * 2
    # a run with a KV-transfer connector is not predicted, and says why
    lmcache = next(r for r in ROWS if r.id == "vllm-kv-qwen3-235b-a22b-fp8-4xh100")
    assert "LMCacheConnectorV1" in lmcache.why_not


def test_a_generation_without_a_prompt_is_predicted():
    """llama-bench's tg512 generates 512 tokens after no prompt: prompt_len 0 is stated, not
    missing (those rows were once refused as if it were)."""
    row = next(r for r in ROWS if r.id == "llamacpp-llama3-8b-f16-h100pcie-tg512")
    assert row.workload["prompt_len"] == 0 and row.why_not is None
    assert row.gpu is GPUS["H100 PCIe 80GB"] and row.gpu.memory_bytes == 81559 * 2**20


def test_docs_cli_holds_the_shipped_summary_table():
    from pathlib import Path

    from llama_lab.validation.validate import summary_markdown

    docs = (Path(__file__).resolve().parents[3] / "docs" / "cli.md").read_text()
    assert summary_markdown(json.loads(PARAMS_FILE.read_text())["summary"]) in docs


def synthetic(kind: str, half: str, ratio: float, metric: str = "tokens_per_s") -> Result:
    """A predicted row of ``kind`` measured at ``ratio`` × an estimate of 100 (of a rate)."""
    measured = 100 / ratio if metric == "seconds" else 100 * ratio
    data = {"id": f"{kind}-{half}-{ratio}", "kind": kind, "metric": {"name": metric, "value": measured}}
    return Result(Row(data, half), Prediction(200.0, 100.0))


def test_the_interval_is_the_fit_halfs_ratios_less_equal_tails_widened_to_the_estimate():
    """Ten fit rows of both signs: ⌊10 × (1 − 0.8) / 2⌋ = 1 left out at each end, so the
    interval runs from the second lowest ratio to the second highest and holds 8 of the 10
    (≥ 80 %, by construction), below and above the estimate: two-sided."""
    logs = [-0.5, -0.3, -0.2, -0.1, -0.05, 0.05, 0.1, 0.2, 0.3, 0.6]
    found = [synthetic("train", "fit", math.exp(x)) for x in logs]
    i = kind_interval(found, "train")
    assert INTERVAL_LEVEL == i.level == 0.8
    assert (i.low, i.high) == pytest.approx((-0.3, 0.3)) and i.ratios == pytest.approx([0.7408, 1.3499], 1e-4)
    assert i.around(50.0) == pytest.approx((50 * math.exp(-0.3), 50 * math.exp(0.3)))  # below and above it
    assert sum(i.holds(x) for x in logs) == 8 >= INTERVAL_LEVEL * len(logs)
    assert i.holds(0.0) and i.built_from == "the fit half's 10 train rows"
    # held out: at the estimate is inside, 0.3 is inside, 0.35 and −0.4 are not: 2 of 4
    held = [synthetic("train", "held_out", math.exp(x)) for x in (0.0, 0.3, 0.35, -0.4)]
    assert held_out_coverage(found + held, i) == 0.5
    # every fit row over-estimated: the interval still holds the estimate (widened to 0)
    over = kind_interval([synthetic("train", "fit", math.exp(-x)) for x in (0.1, 0.2) * 5], "train")
    assert over.low == pytest.approx(-0.2) and over.high == 0.0
    # a time's ratio is its rate's: a TTFT of 0.5 × the estimate is a rate of 2 ×
    assert synthetic("prefill", "fit", 2.0, "seconds").log_ratio == pytest.approx(math.log(2.0))


def test_a_kind_with_fewer_than_9_fit_rows_takes_every_kinds_fit_rows_pooled():
    """(n − 1) / (n + 1) ≥ 0.8 from n = 9: 8 rows of a kind pool with the 10 of another: 18
    rows, ⌊1.8⌋ = 1 left out at each end."""
    assert [n for n in range(1, 12) if own_rows_suffice(n)][0] == 9
    train = [
        synthetic("train", "fit", math.exp(x)) for x in (-0.4, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
    ]
    memory = [synthetic("memory", "fit", math.exp(x)) for x in (-0.9, -0.1, 0, 0, 0, 0, 0, 0.05)]
    i = kind_interval(train + memory, "memory")
    assert (i.low, i.high) == pytest.approx((-0.4, 0.8))
    assert i.built_from == (
        "the fit half's 18 rows of every kind, pooled (memory has 8: fewer than its own interval needs)"
    )
    assert kind_interval(train + memory[:-1] + memory[:2], "memory").built_from.startswith(
        "the fit half's 9 memory rows"
    )


def test_held_out_coverage_is_the_share_of_held_out_rows_inside_the_fit_halfs_interval():
    """Counted by hand from ``results``: measured / estimate (a time's inverted) within the
    summary's interval_ratio; each interval built from fit rows only."""
    found = results(Efficiency.load())
    unseen = json.loads(PARAMS_FILE.read_text())["cross_validated"]
    shipped = summary(found, unseen)
    for kind in KINDS:
        s = shipped[kind]
        low, high = s["interval_ratio"]
        assert s["interval_level"] == 0.8 and low <= 1 <= high
        held = [r for r in found if r.row.kind == kind and r.row.half == "held_out" and r.prediction]
        inside = 0
        for r in held:
            ratio = r.row.measured / r.prediction.estimate
            inside += low <= (1 / ratio if r.row.metric == "seconds" else ratio) <= high
        assert s["held_out_coverage"] == (inside / len(held) if held else None), kind
    assert (
        shipped["decode_bs1"]["held_out_coverage"] == 1.0 and shipped["train"]["held_out_coverage"] == 48 / 64
    )
    # moving every held-out measurement moves no interval: they are built on the fit half
    moved = [
        Result(
            Row({**r.row.data, "metric": {**r.row.data["metric"], "value": 3 * r.row.measured}}, r.row.half),
            r.prediction,
        )
        if r.row.half == "held_out"
        else r
        for r in found
    ]
    assert all(summary(moved, unseen)[k]["interval_ratio"] == shipped[k]["interval_ratio"] for k in KINDS)


def test_predict_gives_the_kinds_interval_as_low_and_high(capsys):
    intervals = {kind: s["interval_ratio"] for kind, s in validate()["summary"].items()}
    for batch, kind in ((1, "decode_bs1"), (8, "decode_batched")):
        argv = ["predict", "decode", "--preset", "llama-3-8b", "--gpu", "h100-80gb", "--batch", str(batch)]
        assert main([*argv, "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        tokens, (low, high) = out["tokens_per_s"], intervals[kind]
        assert tokens["low"] == pytest.approx(tokens["estimate"] * low)
        assert tokens["high"] == pytest.approx(min(tokens["estimate"] * high, tokens["bound"]))
        assert out["ms_per_token"]["high"] == pytest.approx(1000 * batch / tokens["low"])
        assert out["interval_from"].startswith("80% interval from the fit half's")
    argv = ["predict", "train", "--preset", "llama-3-8b", "--gpu", "H100 80GB", "--gpus", "8", "--json"]
    assert main(argv) == 0
    tokens, (low, high) = json.loads(capsys.readouterr().out)["tokens_per_s_per_gpu"], intervals["train"]
    assert (tokens["low"], tokens["high"]) == pytest.approx(
        (tokens["estimate"] * low, min(tokens["estimate"] * high, tokens["bound"]))
    )
    # the interval ends at the bound, which no measurement beats (an estimate × high above it)
    from llama_lab.validation.predict import interval

    high = intervals["decode_batched"][1]
    assert interval(100.0, "decode_batched", bound=100.0 * high - 1)[1] == 100.0 * high - 1
    argv = ["predict", "decode", "--preset", "llama-3-8b", "--gpu", "h100-80gb", "--batch", "64", "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    tokens, ms, ttft = out["tokens_per_s"], out["ms_per_token"], out["ttft_ms"]
    assert tokens["high"] == pytest.approx(min(tokens["estimate"] * high, tokens["bound"]))
    assert ms["low"] >= ms["bound"] and ttft["low"] >= ttft["bound"]


def test_predict_decode_eager_adds_a_launch_cost_per_kernel(capsys):
    """--runtime eager adds launch_s per kernel the forward launches (analysis.launches) to every
    decode step and to the prefill; the bound (the hardware's) is the compiled one's; an unknown
    runtime is refused by argparse."""
    argv = ["predict", "decode", "--preset", "llama-7b", "--gpu", "a100-80gb", "--prompt-len", "5"]
    argv += ["--new-tokens", "200", "--json"]
    out = {}
    for runtime in ("compiled", "eager"):
        assert main([*argv, "--runtime", runtime]) == 0
        out[runtime] = json.loads(capsys.readouterr().out)
    eff = Efficiency.load()
    launches = forward_launches(PRESETS["llama-7b"], 1) * eff.launch_s * 1000
    compiled, eager = out["compiled"], out["eager"]
    assert eager["runtime"] == "eager" and compiled["runtime"] == "compiled"
    step = eager["ms_per_token"]["estimate"] - compiled["ms_per_token"]["estimate"]
    assert step == pytest.approx(launches, rel=1e-6)
    assert eager["tokens_per_s"]["bound"] == compiled["tokens_per_s"]["bound"]
    assert eager["ttft_ms"]["estimate"] - compiled["ttft_ms"]["estimate"] == pytest.approx(launches, rel=1e-6)
    assert main([*argv, "--runtime", "jit"]) == 2
    assert "--runtime" in capsys.readouterr().err


def test_the_eager_row_informs_the_launch_cost_alone():
    """An eager row's regime is "eager" (launch_s only), and the shipped launch cost brings the
    gpt-fast baseline (25.5 tokens/s eager) within 10 % while its compiled twin is unchanged."""
    from llama_lab.validation.validate import regime_of

    rows = {r.id: r for r in load_rows()}
    eager = rows["pytorch-blog-llama-7b-eager-a100"]
    assert eager.runtime == "eager" and regime_of(eager) == "eager"
    assert regime_of(rows["gptfast-llama2-7b-bf16-a100"]) == "decode"
    eff = Efficiency.load()
    assert predict_row(eager, eff).estimate == pytest.approx(eager.measured, rel=0.10)
    assert predict_row(eager, dataclasses.replace(eff, launch_s=0.0)).estimate > 2 * eager.measured
