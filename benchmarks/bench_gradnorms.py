"""Time the gradient-norm experiment at 12 layers, d=256, T=128, B=8 (byte vocabulary): Post-LN
and Pre-LN built from the same weights, one forward/backward each. Expect a few seconds on two
CPU cores.

    python benchmarks/bench_gradnorms.py [--layers 12] [--d-model 256] [--seq-len 128]
        [--batch 8] [--device cpu] [--sweep]

``--sweep`` also runs ``depth_sweep`` (2, 4, 8, 12 layers) and prints the fitted log-log slopes of the
last FFN's gradient norm (Xiong et al. 2020, Thm 1: Post-LN ≈ 0, Pre-LN ≈ -0.5).
"""

from __future__ import annotations

import argparse
import time

import torch

from llama_lab.config import ModelConfig, seed_ffn_hidden
from llama_lab.experiments import depth_sweep, gradnorms


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--sweep", action="store_true")
    args = parser.parse_args(argv)

    cfg = ModelConfig(
        vocab_size=256,
        d_model=args.d_model,
        n_layers=args.layers,
        n_heads=args.d_model // 64,
        n_kv_heads=args.d_model // 64,
        ffn_hidden=seed_ffn_hidden(args.d_model),
        max_seq_len=args.seq_len,
    )
    gradnorms(cfg.replace(n_layers=1), 8, 1, device=args.device)  # warm-up, excluded
    start = time.perf_counter()
    result = gradnorms(cfg, args.seq_len, args.batch, device=args.device)
    elapsed = time.perf_counter() - start
    print(
        f"gradnorms L={args.layers} d={args.d_model} T={args.seq_len} B={args.batch} on "
        f"{args.device} ({torch.get_num_threads()} threads): {elapsed:.2f} s"
    )
    print(
        f"{'layer':>5} {'post ‖∇W_down‖':>15} {'pre ‖∇W_down‖':>15} {'post ‖∂L/∂x‖':>13} {'pre ‖∂L/∂x‖':>13}"
    )
    for i in range(args.layers):
        print(
            f"{i:>5} {result.post.ffn_out_grad_norm[i]:>15.4e} {result.pre.ffn_out_grad_norm[i]:>15.4e} "
            f"{result.post.residual_grad_norm[i]:>13.4e} {result.pre.residual_grad_norm[i]:>13.4e}"
        )
    if args.sweep:
        start = time.perf_counter()
        sweep = depth_sweep(cfg, seq_len=args.seq_len, batch=args.batch, device=args.device)
        print(
            f"depth sweep {sweep.depths}: {time.perf_counter() - start:.1f} s; log-log slope of the "
            f"last FFN gradient norm: Post-LN {sweep.post_slope:+.3f}, Pre-LN {sweep.pre_slope:+.3f}"
        )


if __name__ == "__main__":
    main()
