"""A whole training step (the model's own loss, backward, fused AdamW) against the device's
matrix-multiply peak measured in the same process: the step's FLOP rate divided by that of a
square fp32 matmul (2048² by default), the two alternated so both see the same machine.

    python benchmarks/bench_mfu.py [--preset seed-demo] [--seq-len 128] [--batch 4]
        [--rounds 7] [--matmul 2048] [--device auto|cpu|cuda] [--dtype fp32|bf16] [--pages-kept]

FLOPs per step: ``analysis.count_flops(cfg, T, B).training_step`` (forward + backward, 2 per
multiply-add, attention scores over the full T×T). The matmul's rate is 2·n³ over its best
time of a few repetitions each round. On a GPU the datasheet peak is printed beside it.
``--pages-kept`` runs the steps under ``runtime.memory.pages_kept`` (glibc keeps freed pages);
without it, the allocator's defaults, as the live pass and the training loop run by default.
"""

from __future__ import annotations

import argparse
import statistics
from contextlib import nullcontext

from llama_lab import analysis
from llama_lab.config import get_preset
from llama_lab.model import build_model
from llama_lab.runtime.devices import device_name, pick_device
from llama_lab.runtime.memory import pages_kept
from llama_lab.runtime.peak import device_peak_flops, matmul_flops
from llama_lab.runtime.precision import make_precision
from llama_lab.train.budgets import random_batch
from llama_lab.train.step import Trainee, make_optimizer, training_step


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="seed-demo")
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--matmul", type=int, default=2048)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    parser.add_argument("--n-layers", type=int, help="override the preset's depth")
    parser.add_argument("--pages-kept", action="store_true", help="steps under runtime.memory.pages_kept")
    args = parser.parse_args(argv)
    device = pick_device(args.device)
    cfg = get_preset(args.preset)
    if args.n_layers:
        cfg = cfg.replace(n_layers=args.n_layers)
    precision = make_precision(args.dtype, device)
    model = build_model(cfg, device=device, seed=0)
    trainee = Trainee(model, make_optimizer(model, 1e-4), precision, precision.grad_scaler())
    inputs, targets = (t.to(device) for t in random_batch(cfg, args.seq_len, args.batch, 0, None))
    flops = analysis.count_flops(cfg, args.seq_len, args.batch).training_step
    steps, rates = [], []
    with pages_kept(device) if args.pages_kept else nullcontext():
        training_step(trainee, inputs, targets, measure_grad_norm=False)  # warm-up
        matmul_flops(device, args.dtype, args.matmul, reps=3)
        for _ in range(args.rounds):  # alternated
            rates.append(matmul_flops(device, args.dtype, args.matmul, reps=3))
            steps.append(training_step(trainee, inputs, targets, measure_grad_norm=False)[2])
    step_s = statistics.median(t.total_s for t in steps)
    rate = statistics.median(rates)
    print(
        f"{args.preset} (L={cfg.n_layers}, d={cfg.d_model}), B={args.batch} T={args.seq_len} "
        f"{args.dtype} on {device_name(device)}, {args.rounds} alternated rounds"
    )
    print(
        f"training step: median {1e3 * step_s:.1f} ms (forward "
        f"{1e3 * statistics.median(t.forward_s for t in steps):.1f}, backward "
        f"{1e3 * statistics.median(t.backward_s for t in steps):.1f}, AdamW "
        f"{1e3 * statistics.median(t.optimizer_s for t in steps):.1f}); "
        f"{flops / 1e9:.2f} GFLOP per step → {flops / step_s / 1e9:.1f} GFLOP/s"
    )
    print(
        f"{args.matmul}² {args.dtype} matmul: median {rate / 1e9:.1f} GFLOP/s "
        f"(best of 3 per round; rounds {min(rates) / 1e9:.1f}–{max(rates) / 1e9:.1f})"
    )
    ratios = [flops / t.total_s / r for t, r in zip(steps, rates)]
    print(
        f"step rate / matmul rate: {flops / step_s / rate:.3f} (per round "
        f"{min(ratios):.3f}–{max(ratios):.3f}; goal ≥ 0.70)"
    )
    if device.type == "cuda":
        peak, source = device_peak_flops(device, args.dtype)
        print(f"MFU against {source}: {flops / step_s / peak:.3f}")


if __name__ == "__main__":
    main()
