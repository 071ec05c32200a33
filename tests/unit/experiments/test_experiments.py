import dataclasses
import json
import math

import pytest
import torch
import torch.nn.functional as F

from llama_lab import analysis, experiments
from llama_lab.config import PRESETS
from llama_lab.errors import ExperimentError
from llama_lab.experiments import (
    LiveSettings,
    ablation_specs,
    bench,
    compare_runs,
    decode_benchmark,
    depth_sweep,
    gradient_norms,
    gradnorms,
    live_pass,
    norm_position_specs,
)
from llama_lab.model import build_model, rope_cos_sin
from llama_lab.runtime import devices, memory
from llama_lab.runtime.devices import pick_device
from llama_lab.runtime.memory import check_memory
from llama_lab.train import TrainSettings, loop
from llama_lab.train.budgets import ALLOCATOR_RETENTION, LIBRARY_PAGES, training_bytes_needed, training_peak
from llama_lab.train.data import DataError, get_batch, load_builtin, random_tokens
from llama_lab.train.divergence import divergence_reason
from llama_lab.train.loop import iter_train, train
from llama_lab.train.measure import LogitStats
from llama_lab.train.schedules import lr_at

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def strict_json(obj) -> str:
    return json.dumps(obj, allow_nan=False)


# ---- devices, precision, memory guard -----------------------------------------------------------
def test_pick_device_cuda_without_cuda_is_refused(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(devices, "mps_available", lambda: False)
    with pytest.raises(ExperimentError, match="CUDA is not available"):
        pick_device("cuda")
    assert pick_device("auto") == torch.device("cpu")
    assert pick_device("cpu") == torch.device("cpu")
    with pytest.raises(ExperimentError, match="must be one of"):
        pick_device("tpu")


def test_fp16_on_cpu_and_compile_on_cpu_are_refused(debug_cfg):
    with pytest.raises(ExperimentError, match="fp16.*bf16"):
        live_pass(debug_cfg, 8, 1, LiveSettings(device="cpu", dtype="fp16"))
    with pytest.raises(ExperimentError, match="CUDA only"):
        live_pass(debug_cfg, 8, 1, LiveSettings(device="cpu", compile=True))
    with pytest.raises(ExperimentError, match="dtype='int8'"):
        live_pass(debug_cfg, 8, 1, LiveSettings(device="cpu", dtype="int8"))
    with pytest.raises(ExperimentError, match="max_seq_len=64"):
        live_pass(debug_cfg, 65, 1, LiveSettings(device="cpu"))


def _rss_bytes() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * 4096


def test_memory_guard_refuses_405b_before_building(monkeypatch):
    def never(*args, **kwargs):
        raise AssertionError("build_model must not be called for a run that cannot fit")

    for module in (experiments.live, experiments.decode, loop):  # every builder of a live model
        monkeypatch.setattr(module, "build_model", never)
    rss = _rss_bytes()
    with pytest.raises(ExperimentError, match=r"needs about .*TiB on cpu but only .* is free"):
        live_pass(PRESETS["llama-3.1-405b"], 16, 1, LiveSettings(device="cpu"))
    with pytest.raises(ExperimentError, match="needs about"):
        train(
            PRESETS["llama-3.1-405b"],
            TrainSettings(steps=1, lr=1e-3, seq_len=16, batch=1, device="cpu"),
            data=random_tokens(128256, 1000),
        )
    with pytest.raises(ExperimentError, match="needs about"):
        decode_benchmark(PRESETS["llama-3.1-405b"], (16,), device="cpu", dtype="bf16")
    assert _rss_bytes() - rss < 50 * 2**20


def test_check_memory_threshold_and_meminfo_fallback(monkeypatch):
    monkeypatch.setattr(memory, "free_memory_bytes", lambda device: 1000)
    check_memory(900, "cpu")  # 90 % of free: allowed
    with pytest.raises(ExperimentError, match="needs about 901 B on cpu but only 1,000 B is free"):
        check_memory(901, "cpu")
    monkeypatch.undo()
    with open("/proc/meminfo") as fh:
        total_kib = int(next(line for line in fh if line.startswith("MemTotal:")).split()[1])
    free = memory.free_memory_bytes(torch.device("cpu"))
    assert 0 < free <= total_kib * 1024
    monkeypatch.setattr(memory, "meminfo_available_bytes", lambda: None)
    assert 0 < memory.free_memory_bytes(torch.device("cpu")) <= total_kib * 1024


# ---- live pass ----------------------------------------------------------------------------------
def test_live_pass_debug_fp32(debug_cfg):
    result = live_pass(debug_cfg, 32, 2, LiveSettings(device="cpu", iters=2))
    d = result.to_dict()
    strict_json(d)
    for key in (
        "forward_ms",
        "backward_ms",
        "optimizer_ms",
        "step_ms",
        "tokens_per_s",
        "achieved_tflops",
        "mfu",
        "initial_loss",
        "last_loss",
    ):
        assert math.isfinite(d[key]) and d[key] > 0, key
    # the seed's init check: the loss of near-uniform logits is ln V (+ σ²/2 of the logits)
    assert result.ln_vocab == pytest.approx(math.log(256))
    assert result.ln_vocab - 0.02 < result.initial_loss < result.ln_vocab + 0.1
    # activation memory: the saved-for-backward tensors vs the closed-form estimate
    assert result.activation_bytes_measured == pytest.approx(result.activation_bytes_estimated, rel=0.01)
    n = result.n_params
    assert n == sum(p.numel() for p in build_model(debug_cfg).parameters())
    memory = result.memory_breakdown
    assert memory["weights"] == memory["gradients"] == 4 * n  # fp32
    assert 8 * n <= memory["optimizer"] <= 8 * n + 64 * 8  # m, v (+ step counters)
    assert memory["weight_casts"] == 0
    # measured on Linux — unless the process reused memory it already held (a tiny model
    # after bigger tests), when the tensors are added up instead, and the note says so
    assert "VmHWM" in result.peak_memory_source or "reused memory" in result.peak_memory_source
    assert result.peak_memory_bytes >= sum(memory.values())
    # the guard's peak covers every state it holds at once (training_peak's two high points)
    assert result.estimated_training_bytes >= sum(memory.values())
    assert result.training_flops == analysis.count_flops(debug_cfg, 32, 2).training_step
    assert result.achieved_tflops == pytest.approx(result.training_flops / (result.step_ms / 1e3) / 1e12)
    assert result.tokens_per_s == pytest.approx(64 / (result.step_ms / 1e3))
    assert result.mfu == pytest.approx(result.achieved_tflops * 1e12 / result.peak_flops)
    assert "measured" in result.peak_flops_source
    # without the final norm the logits differ (here: the raw residual stream is tiny at init)
    assert result.logits.std != pytest.approx(result.logits_without_final_norm.std, rel=0.1)


def test_live_pass_bf16_autocast_on_cpu(debug_cfg):
    result = live_pass(debug_cfg, 32, 2, LiveSettings(device="cpu", dtype="bf16"))
    assert math.isfinite(result.initial_loss) and abs(result.initial_loss - math.log(256)) < 0.1
    # autocast keeps the residual stream (every norm's input) in fp32: more than an all-bf16
    # model saves, less than an all-fp32 one, and what autocast_activation_bytes predicts
    fp32 = analysis.activation_bytes(debug_cfg, 32, 2, "fp32")
    bf16 = analysis.activation_bytes(debug_cfg, 32, 2, "bf16")
    assert bf16 < result.activation_bytes_estimated < fp32
    assert result.activation_bytes_measured == pytest.approx(result.activation_bytes_estimated, rel=1e-3)
    assert result.memory_breakdown["weight_casts"] > 0  # bf16 copies of weights


def test_bench_spec_keys(debug_cfg):
    result = bench(debug_cfg, device="cpu", steps=2, seq_len=16, batch=2)
    strict_json(result)
    assert {"tokens_per_s", "step_ms", "achieved_tflops", "peak_memory_bytes", "device"} <= set(result)
    assert result["device"] == "cpu" and result["peak_memory_bytes"] > 0 and result["mfu"] > 0


def test_logit_stats_definitions():
    uniform = LogitStats.of(torch.zeros(2, 3, 10))
    assert uniform.entropy_mean == pytest.approx(math.log(10))
    assert uniform.max_prob_mean == pytest.approx(0.1) and uniform.std == 0
    peaked = LogitStats.of(torch.tensor([[100.0, 0.0, 0.0, -100.0]]))
    assert peaked.max_prob_mean == pytest.approx(1.0) and peaked.entropy_mean < 1e-6
    assert peaked.max_abs == 100.0


def test_logit_stats_in_chunks_equal_the_whole_tensor_at_once():
    """Many chunks of rows: the running sums give what torch computes on all rows."""
    logits = 3 * torch.randn(600, 50, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    stats = LogitStats.of_chunks(logits.split(64))
    assert stats.to_dict() == pytest.approx(LogitStats.of(logits).to_dict(), rel=1e-12)
    log_probs = logits.log_softmax(-1)
    assert stats.std == pytest.approx(logits.std().item(), rel=1e-9)
    assert stats.max_abs == logits.abs().max().item()
    assert stats.max_prob_mean == pytest.approx(log_probs.exp().max(-1).values.mean().item(), rel=1e-9)
    assert stats.entropy_mean == pytest.approx(-(log_probs.exp() * log_probs).sum(-1).mean().item(), rel=1e-9)


# ---- gradient norms ---------------------------------------------------------------------------
@pytest.mark.parametrize("position", ["post", "pre"])
def test_gradnorms_equal_direct_computation(debug_cfg, position):
    data = random_tokens(256, 4000, seed=9)
    result = getattr(gradnorms(debug_cfg, 16, 2, seed=3, data=data, device="cpu"), position)
    # by hand: same weights, same batch, the forward written out, torch.autograd.grad; the
    # Pre-LN arm ends with a final norm, the Post-LN arm with its last block's own (Xiong et al.)
    model = build_model(debug_cfg.replace(norm_position=position, final_norm=position == "pre"), seed=3)
    x, y = get_batch(data.train, 2, 16, torch.Generator().manual_seed(3))
    body = model.model
    h = body.embed_tokens(x)
    rope = rope_cos_sin(torch.arange(16), body.position_tables.inv_freq)
    block_inputs = []
    for layer in body.layers:
        block_inputs.append(h)
        h = layer(h, rope, None)
    logits = model.lm_head(body.norm(h) if position == "pre" else h)
    assert hasattr(body, "norm") == (position == "pre")
    loss = F.cross_entropy(logits.reshape(-1, 256), y.reshape(-1))
    names, params = zip(*model.named_parameters())
    grads = torch.autograd.grad(loss, block_inputs + list(params))
    residual, by_name = grads[:2], dict(zip(names, grads[2:]))

    def norm(prefixes):
        return torch.cat([g.flatten() for n, g in by_name.items() if n.startswith(prefixes)]).norm().item()

    assert result.loss == pytest.approx(loss.item(), rel=1e-6)
    for i in range(2):
        prefix = f"model.layers.{i}."
        assert result.residual_grad_norm[i] == pytest.approx(residual[i].norm().item(), rel=1e-5)
        assert result.layer_grad_norm[i] == pytest.approx(norm(prefix), rel=1e-5)
        assert result.ffn_out_grad_norm[i] == pytest.approx(
            by_name[prefix + "mlp.down_proj.weight"].norm().item(), rel=1e-5
        )
        # the fused projections' first rows: q's H·D of [q; k; v], the gate's F of [gate; up]
        qkv, gate_up = (
            by_name[prefix + "self_attn.qkv_proj.weight"],
            by_name[prefix + "mlp.gate_up_proj.weight"],
        )
        assert result.group_grad_norm["q"][i] == pytest.approx(
            qkv[: debug_cfg.n_heads * debug_cfg.head_dim].norm().item(), rel=1e-5
        )
        assert result.group_grad_norm["gate"][i] == pytest.approx(
            gate_up[: debug_cfg.ffn_hidden].norm().item(), rel=1e-5
        )
        assert result.group_grad_norm["norms"][i] == pytest.approx(
            norm((prefix + "input_layernorm", prefix + "post_attention_layernorm")), rel=1e-5
        )
    assert list(result.group_grad_norm) == ["q", "k", "v", "o", "gate", "up", "down", "norms"]


def test_post_and_pre_share_everything_but_norm_placement(debug_cfg, monkeypatch):
    seen = []
    original = gradient_norms.measure_grad_norms

    def spy(model, inputs, targets):
        seen.append(
            (
                model.cfg,
                {k: v.clone() for k, v in model.state_dict().items()},
                inputs.clone(),
                targets.clone(),
            )
        )
        return original(model, inputs, targets)

    monkeypatch.setattr(gradient_norms, "measure_grad_norms", spy)
    result = gradnorms(debug_cfg, 16, 2, seed=5, device="cpu")
    (cfg_post, w_post, x_post, y_post), (cfg_pre, w_pre, x_pre, y_pre) = seen
    assert (cfg_post.norm_position, cfg_pre.norm_position) == ("post", "pre")
    # Xiong et al.'s arms: Pre-LN ends with a final norm, Post-LN has none on top of its last
    # block's own, whatever the config says; everything else — and every shared weight — equal
    assert (cfg_post.final_norm, cfg_pre.final_norm) == (False, True)
    for final_norm in (False, True):
        assert gradient_norms.arrangement(debug_cfg.replace(final_norm=final_norm), "pre") == cfg_pre
        assert gradient_norms.arrangement(debug_cfg.replace(final_norm=final_norm), "post") == cfg_post
    assert cfg_post.replace(norm_position="pre", final_norm=True) == cfg_pre
    assert set(w_pre) - set(w_post) == {"model.norm.weight"}
    assert all(torch.equal(w_post[k], w_pre[k]) for k in w_post)
    assert torch.equal(x_post, x_pre) and torch.equal(y_post, y_pre)
    assert result.post.loss != result.pre.loss
    d = result.to_dict()
    strict_json(d)
    assert set(d) == {"post", "pre"}
    for r in d.values():
        assert len(r["layer_grad_norm"]) == len(r["ffn_out_grad_norm"]) == len(r["residual_grad_norm"]) == 2
    assert len(gradient_norms.GradNormSeeds([result], [5], 16, 2, "random").to_frame()) == 4


@pytest.mark.slow
def test_depth_sweep_has_xiong_shape(debug_cfg):
    """Xiong et al. 2020, Thm 1: last FFN gradient ~ flat in L (Post-LN), ~ 1/√L (Pre-LN)."""
    sweep = depth_sweep(debug_cfg, depths=(2, 4, 8, 16), seq_len=16, batch=2, seeds=(0, 1), device="cpu")
    assert abs(sweep.post_slope) < 0.15
    assert -0.9 < sweep.pre_slope < -0.3
    assert sweep.to_frame().shape == (8, 5)
    assert len(sweep.post_by_seed) == 4 and all(len(row) == 2 for row in sweep.post_by_seed)
    # each seed is the single-seed measurement of that seed
    alone = gradnorms(debug_cfg.replace(n_layers=4), 16, 2, seed=1, device="cpu")
    assert sweep.pre_by_seed[1][1] == alone.pre.ffn_out_grad_norm[-1]
    assert sweep.ratio_by_seed[1][1] == alone.post.ffn_out_grad_norm[-1] / alone.pre.ffn_out_grad_norm[-1]
    strict_json(sweep.to_dict())


def test_loglog_slope_recovers_a_power_law():
    xs = [2, 4, 8, 16]
    assert experiments.loglog_slope(xs, [3 * x**-0.5 for x in xs]) == pytest.approx(-0.5)


# ---- training -----------------------------------------------------------------------------------
def test_lr_schedules_by_hand():
    kw = dict(base_lr=1.0, warmup_steps=4, total_steps=14, min_lr_ratio=0.1)
    assert [lr_at(s, schedule="cosine", **kw) for s in range(4)] == [0.25, 0.5, 0.75, 1.0]
    assert lr_at(4, schedule="cosine", **kw) == 1.0  # decay starts at 1
    assert lr_at(13, schedule="cosine", **kw) == pytest.approx(0.1)  # and ends at min_lr
    assert lr_at(13, schedule="linear", **kw) == pytest.approx(0.1)
    # halfway through the decay (4 + 9/2): cosine 0.1 + 0.9·0.5·(1 + cos(π/2)) = 0.55
    assert lr_at(8, schedule="cosine", **kw) == pytest.approx(
        0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 4 / 9))
    )
    assert lr_at(8, schedule="linear", **kw) == pytest.approx(0.1 + 0.9 * (1 - 4 / 9))
    assert lr_at(10, schedule="constant", **kw) == 1.0
    assert lr_at(0, base_lr=1.0, warmup_steps=0, total_steps=5, schedule="constant") == 1.0
    with pytest.raises(ExperimentError, match="schedule"):
        lr_at(0, schedule="step", **kw)


def test_divergence_rules():
    assert "loss became nan" in divergence_reason(float("nan"), 1.0, 3, 2.0, 3.0)
    assert "gradient norm" in divergence_reason(2.0, float("inf"), 3, 2.0, 3.0)
    assert divergence_reason(2.0, float("inf"), 3, 2.0, 3.0, loss_scaling=True) is None
    assert "spiked" in divergence_reason(6.1, 1.0, 5, 2.0, 3.0)
    assert "spiked" in divergence_reason(6.1, 1.0, 5, 2.0, 3.0, lr=1e-4)  # during warmup too
    assert divergence_reason(5.9, 1.0, 5, 2.0, 3.0) is None


@pytest.mark.slow
def test_training_lowers_loss_on_builtin_corpus(debug_cfg):
    records = []
    run = train(
        debug_cfg,
        TrainSettings(
            steps=40,
            lr=3e-3,
            warmup_steps=4,
            schedule="cosine",
            seq_len=32,
            batch=8,
            seed=0,
            device="cpu",
            eval_every=20,
        ),
        data=load_builtin(),
        on_step=records.append,
    )
    assert not run.diverged and run.steps_run == 40 and len(records) == 40
    assert run.val_step == [0, 20, 40]
    assert run.val_loss[0] == pytest.approx(math.log(256), abs=0.1)
    assert run.val_loss[-1] < run.val_loss[0] - 1.5  # bytes are predictable
    assert run.lr == [
        lr_at(s, base_lr=3e-3, warmup_steps=4, total_steps=40, schedule="cosine") for s in range(40)
    ]
    assert len(run.layer_grad_norm) == 40 and len(run.layer_grad_norm[0]) == 2
    assert records[5]["loss"] == run.loss[5] and "val_loss" in records[19]
    strict_json(run.to_dict())
    strict_json(run.summary())
    assert run.to_frame().shape[0] == 40
    assert run.settings["data"].startswith("builtin")


def test_runs_are_reproducible_and_iter_train_yields_json_lines(debug_cfg):
    settings = TrainSettings(
        steps=3, lr=1e-3, warmup_steps=1, schedule="linear", seq_len=16, batch=2, seed=7, device="cpu"
    )
    text = load_builtin()
    loop = iter_train(debug_cfg, settings, data=text)
    lines = []
    while True:
        try:
            lines.append(strict_json(next(loop)))
        except StopIteration as finished:
            first = finished.value
            break
    assert len(lines) == 3 and json.loads(lines[0])["step"] == 0
    again = train(debug_cfg, settings, data=text)
    assert first.loss == again.loss and first.val_loss == again.val_loss
    assert train(debug_cfg, dataclasses.replace(settings, seed=8), data=text).loss != first.loss
    a, b = gradnorms(debug_cfg, 8, 1, seed=2), gradnorms(debug_cfg, 8, 1, seed=2)
    assert a.to_dict() == b.to_dict()


def test_divergence_is_reported_not_raised(debug_cfg):
    run = train(
        debug_cfg,
        TrainSettings(
            steps=20, lr=10.0, warmup_steps=0, schedule="constant", seq_len=16, batch=4, device="cpu"
        ),
        data=load_builtin(),
    )
    assert run.diverged and run.divergence_step is not None and run.steps_run < 20
    assert run.steps_run == run.divergence_step + 1
    assert "lower the learning rate" in run.hint and "warmup" in run.hint
    assert run.divergence_reason
    strict_json(run.to_dict())


def test_training_refuses_data_beyond_vocab(debug_cfg):
    with pytest.raises(DataError, match="token id 226 but the config's vocab_size=100"):
        train(
            debug_cfg.replace(vocab_size=100),
            TrainSettings(steps=2, lr=1e-3, seq_len=8, batch=2),
            data=load_builtin(),
        )


def test_compare_runs_share_batches(debug_cfg):
    specs = norm_position_specs(debug_cfg, lr=3e-3, warmup_steps=2)
    assert [s.label for s in specs] == [
        "Post-LN, no warmup",
        "Post-LN, warmup 2",
        "Pre-LN, no warmup",
        "Pre-LN, warmup 2",
    ]
    result = compare_runs(
        specs, TrainSettings(steps=3, seq_len=16, batch=2, device="cpu"), data=load_builtin()
    )
    runs = result.runs
    # step 0 sees the same weights and batch: the loss does not depend on the learning rate
    assert runs["Post-LN, no warmup"].loss[0] == runs["Post-LN, warmup 2"].loss[0]
    assert runs["Pre-LN, no warmup"].loss[0] == runs["Pre-LN, warmup 2"].loss[0]
    assert runs["Post-LN, no warmup"].loss[1] != runs["Post-LN, warmup 2"].loss[1]
    assert len(result.to_frame()) == 12 and len(result.summary_frame()) == 4
    strict_json(result.to_dict())


def test_ablation_specs_follow_the_seed_table(debug_cfg):
    relu, swiglu = ablation_specs("ffn", debug_cfg, 1e-3, 0)
    p_relu, p_swiglu = analysis.count_params(relu.cfg).total, analysis.count_params(swiglu.cfg).total
    assert p_relu == pytest.approx(p_swiglu, rel=0.01)  # "equal parameters"
    old, new = ablation_specs("recipe", debug_cfg, 1e-3, 10)
    assert (
        old.cfg.norm_position,
        old.cfg.norm_type,
        old.cfg.pos_encoding,
        old.cfg.ffn_type,
        old.cfg.init,
        old.cfg.bias,
        old.schedule,
    ) == ("post", "layernorm", "sinusoidal", "relu", "xavier", True, "linear")
    assert (
        new.cfg.norm_position,
        new.cfg.norm_type,
        new.cfg.pos_encoding,
        new.cfg.ffn_type,
        new.schedule,
    ) == ("pre", "rmsnorm", "rope", "swiglu", "cosine")
    ln, rms = ablation_specs("norm_type", debug_cfg, 1e-3, 0)
    assert ln.cfg.replace(norm_type="rmsnorm") == rms.cfg
    with pytest.raises(ExperimentError):
        ablation_specs("dropout", debug_cfg, 1e-3, 0)


# ---- KV-cache decoding --------------------------------------------------------------------------
def test_decode_cache_bytes_equal_analysis(debug_cfg):
    result = decode_benchmark(debug_cfg, context_lens=(8, 16), batch=2, device="cpu", new_tokens=3)
    assert [(r.variant, r.n_kv_heads) for r in result.rows] == [
        ("mha", 4),
        ("mha", 4),
        ("gqa", 2),
        ("gqa", 2),
        ("mqa", 1),
        ("mqa", 1),
    ]
    assert result.bytes_agree
    for r in result.rows:
        # by hand: K and V · L layers · G heads · D=16 · 4 bytes · B=2 · cached tokens
        assert r.cache_tokens == r.context_len + 3
        assert r.cache_bytes_measured == 2 * 2 * r.n_kv_heads * 16 * 4 * 2 * r.cache_tokens
        assert r.ms_per_token > 0 and r.prefill_ms > 0
    strict_json(result.to_dict())
    with pytest.raises(ExperimentError, match="max_seq_len"):
        decode_benchmark(debug_cfg, context_lens=(62,), device="cpu", new_tokens=3)


def test_decode_bf16_bytes_agree(debug_cfg):
    result = decode_benchmark(debug_cfg, context_lens=(8,), device="cpu", dtype="bf16", new_tokens=2)
    assert result.bytes_agree
    assert (
        result.rows[0].cache_bytes_measured
        == analysis.kv_cache_bytes_per_token(debug_cfg.replace(n_kv_heads=4), "bf16") * 10
    )


# ---- CUDA (skipped without a GPU) ---------------------------------------------------------------
@needs_cuda
def test_cuda_live_pass_bf16(debug_cfg):
    result = live_pass(debug_cfg, 32, 4, LiveSettings(device="cuda", dtype="bf16", iters=3))
    assert result.device.startswith("cuda") and result.peak_memory_source == "CUDA allocator peak"
    assert abs(result.initial_loss - math.log(256)) < 0.1
    assert result.peak_memory_bytes > result.memory_breakdown["weights"]
    assert 0 < result.mfu < 1


@needs_cuda
def test_cuda_fp16_training_with_loss_scaling(debug_cfg):
    run = train(
        debug_cfg,
        TrainSettings(steps=10, lr=3e-3, warmup_steps=2, seq_len=32, batch=8, device="cuda", dtype="fp16"),
        data=load_builtin(),
    )
    assert not run.diverged and run.loss[-1] < run.loss[0]


def test_a_seed_draws_on_the_cpu_up_to_a_size_and_on_the_device_beyond():
    """Small models (the live copies, the seed demo: what the pre-measured results use) draw
    their weights on the CPU whatever the device, the same on every device; an 8B model draws
    on its GPU (on a CPU its draws did not finish in a minute)."""
    from llama_lab.analysis import count_params
    from llama_lab.model.init import CPU_DRAW_PARAMS, generator_device

    cuda = torch.device("cuda")
    for preset in ("debug", "seed-demo", "llama-3-8b"):
        n = count_params(PRESETS[preset]).total
        assert generator_device(n, cuda) == (torch.device("cpu") if n <= CPU_DRAW_PARAMS else cuda)
    assert generator_device(count_params(PRESETS["seed-demo"]).total, cuda).type == "cpu"
    assert generator_device(count_params(PRESETS["llama-3-8b"]).total, cuda) == cuda


@needs_cuda
def test_cuda_build_draws_the_cpus_weights(debug_cfg):
    """A seed gives the same weights on the GPU as on the CPU (the stream is drawn on the CPU)."""
    cpu, gpu = build_model(debug_cfg, seed=3), build_model(debug_cfg, device="cuda", seed=3)
    for (name, a), b in zip(cpu.state_dict().items(), gpu.state_dict().values()):
        assert torch.equal(a, b.cpu()), name


@needs_cuda
def test_cuda_gradnorms_match_cpu(debug_cfg):
    cpu = gradnorms(debug_cfg, 16, 2, device="cpu")
    gpu = gradnorms(debug_cfg, 16, 2, device="cuda")
    for a, b in ((cpu.post, gpu.post), (cpu.pre, gpu.pre)):
        assert a.layer_grad_norm == pytest.approx(b.layer_grad_norm, rel=1e-3)
        assert a.residual_grad_norm == pytest.approx(b.residual_grad_norm, rel=1e-3)


@needs_cuda
def test_cuda_decode_bf16_bytes_agree(debug_cfg):
    result = decode_benchmark(debug_cfg, context_lens=(8, 32), device="cuda", dtype="bf16", new_tokens=4)
    assert result.bytes_agree and result.device.startswith("cuda")


def test_guard_counts_what_autocast_really_keeps():
    # hand derivation of the two high points of a step (train.budgets.training_peak):
    # backward: fp32 weights 4Ψ + AdamW 8Ψ (+ a 16-bit weight copy 2Ψ under autocast) + the
    # saved activations (the chunked loss's two gradients among them) + one loss chunk's fp32
    # logits (alive while the loss runs) + the larger of the chunk's 16-bit logits
    # and probabilities under autocast and the gradients 4Ψ + the allocator's retention (0.4 of
    # the saved bytes); the update: weights, grads 4Ψ, AdamW's moments (fused: no temporaries)
    # and one largest parameter's allowance.
    # Both add the largest parameter's fp32 draw buffer and the library code the first steps
    # fault in (LIBRARY_PAGES: 32 MiB, 128 MiB for a CUDA build).
    cfg = PRESETS["debug"]
    n, N, V = 123_712, 32, cfg.vocab_size
    draw = 4 * analysis.largest_parameter(cfg)
    activations = analysis.activation_bytes(cfg, 16, 2, dtype="fp32")
    assert ALLOCATOR_RETENTION == 0.4
    assert LIBRARY_PAGES == (128 if torch.version.cuda or torch.version.hip else 32) * 2**20
    lib = LIBRARY_PAGES
    fp32 = training_peak(cfg, 16, 2, "fp32")
    bf16 = training_peak(cfg, 16, 2, "bf16")
    # one chunk holds all N = 32 rows (64 MiB / (4 · 256) = 65,536 rows); the gradients are
    # larger than its 16-bit logits and probabilities
    assert N * V * (2 + 2) < 4 * n
    chunk = 4 * N * V
    assert (
        fp32["backward_at_loss"] == int(draw + 12 * n + activations + chunk + 4 * n + 0.4 * activations) + lib
    )
    # under autocast the saved tensors are 16-bit but for every norm's input (the float32
    # residual stream): 2 per block and the final norm, N·C elements each, 2 bytes more
    extra = (2 * cfg.n_layers + 1) * N * cfg.d_model * 2
    mixed = analysis.activation_bytes(cfg, 16, 2, dtype="bf16") + extra
    assert bf16["backward_at_loss"] == int(draw + 14 * n + mixed + chunk + 4 * n + 0.4 * mixed) + lib
    big = training_peak(cfg, 1024, 8, "fp32")  # 8,192 rows: a chunk of 8 MiB
    big_saved = analysis.activation_bytes(cfg, 1024, 8, "fp32")
    assert (
        big["backward_at_loss"]
        == int(draw + 12 * n + big_saved + 8 * 1024 * V * 4 + 4 * n + 0.4 * big_saved) + lib
    )
    assert fp32["optimizer_update"] == bf16["optimizer_update"] == 2 * draw + 16 * n + lib
    assert training_bytes_needed(cfg, 16, 2, "bf16") == max(bf16.values())
    no_adam = training_peak(cfg, 16, 2, "fp32", optimizer=False)
    assert no_adam["optimizer_update"] == draw + 8 * n + lib


def test_causal_mfu_counts_half_the_scores():
    cfg = PRESETS["debug"]
    result = experiments.live_pass(cfg, 32, 2, LiveSettings(device="cpu", iters=1))
    flops = analysis.count_flops(cfg, 32, 2)
    assert result.mfu_causal / result.mfu == pytest.approx(flops.forward_causal / flops.forward)
    assert result.mfu_causal < result.mfu


def test_decode_cache_bytes_are_the_allocated_storage():
    cfg = PRESETS["debug"]
    model = build_model(cfg).eval()
    cache = model.new_cache(3, 10)
    with torch.no_grad():
        model(torch.zeros(3, 10, dtype=torch.long), cache)
    # 2 (K, V) × L × B × G × S_max × D × 4 bytes, read from the tensors' storage
    assert cache.allocated_bytes() == 2 * 2 * 3 * 2 * 10 * 16 * 4 == cache.nbytes()


@pytest.mark.slow
def test_the_2017_preset_shows_xiong_et_al_s_contrast_growing_with_depth():
    """Issue 12's acceptance at the transformer-2017 preset's width (d=512, 8 heads, FFN 2048,
    Xavier, LayerNorm, embeddings × √d), shortened to T=32, B=4 and 3 seeds for the suite (the
    full T=128, B=8, 5-seed figures: benchmarks/xiong_contrast.py): the last block's Post/Pre
    ‖∇W_down‖ exceeds 1.8 at 6 blocks in every seed and is larger at 6 than at 2."""
    cfg = PRESETS["transformer-2017"]
    ratios = {
        depth: experiments.gradnorms_over_seeds(
            cfg.replace(n_layers=depth), 32, 4, seeds=(0, 1, 2)
        ).last_ratio_by_seed()
        for depth in (2, 6)
    }
    assert min(ratios[6]) > 1.8
    assert all(deep > shallow for deep, shallow in zip(ratios[6], ratios[2]))
