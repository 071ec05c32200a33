"""One-token decode against the memory roof: each step must read every weight the token
passes through and the KV cache it attends, so its time is bounded below by those bytes over
the device's memory bandwidth, measured here in the same process (a large tensor read).

    python benchmarks/bench_decode_roof.py [--preset seed-demo] [--context 512] [--steps 32]
        [--batch 1] [--dtype fp32|bf16] [--device auto|cpu|cuda] [--n-layers L]

Bytes per step: every parameter once (the embedding table only one row per sequence — a tied
table is read whole as the LM head), plus K and V of every cached token of every layer (a
window layer: at most its window), plus the new token's K and V written. The bandwidth: the
best of a few full reads (``sum``) of a buffer 4× the model, so no cache holds it.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from llama_lab.config import get_preset
from llama_lab.model import build_model
from llama_lab.runtime.devices import device_name, pick_device, sync
from llama_lab.runtime.precision import DTYPES


def read_bandwidth(nbytes: int, device, reps: int = 5) -> float:
    """Bytes per second of one full read of an ``nbytes`` float32 buffer: the best of ``reps``."""
    buffer = torch.ones(nbytes // 4, device=device)
    best = float("inf")
    for _ in range(reps):
        sync(device)
        start = time.perf_counter()
        buffer.sum()
        sync(device)
        best = min(best, time.perf_counter() - start)
    return buffer.numel() * 4 / best


def step_bytes(model, cache, batch: int) -> tuple[int, int]:
    """(weight bytes, KV-cache bytes) one decode step reads and writes (module docstring)."""
    cfg = model.cfg
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    if not cfg.tie_embeddings:  # the table: only the new token's row is read
        table = model.model.embed_tokens.weight
        weights -= table.numel() * table.element_size() - batch * table.shape[1] * table.element_size()
    per_token = 2 * cfg.n_kv_heads * cfg.head_dim * cache.k0.element_size() * batch  # K and V
    kv = sum(per_token * (cache.held(layer) + 1) for layer in range(cfg.n_layers))
    return weights, kv


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="seed-demo")
    parser.add_argument("--context", type=int, default=512)
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--n-layers", type=int)
    args = parser.parse_args(argv)
    device = pick_device(args.device)
    cfg = get_preset(args.preset)
    cfg = cfg.replace(
        max_seq_len=max(cfg.max_seq_len, args.context + args.steps),
        **({"n_layers": args.n_layers} if args.n_layers else {}),
    )
    model = build_model(cfg, device=device, dtype=DTYPES[args.dtype], seed=0).eval()
    model_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    bandwidth = read_bandwidth(max(4 * model_bytes, 2**28), device)
    ids = torch.randint(
        0,
        cfg.vocab_size,
        (args.batch, args.context),
        device=device,
        generator=torch.Generator(device=device).manual_seed(0),
    )
    cache = model.new_cache(args.batch, args.context + args.steps + 1)
    times, fractions = [], []
    with torch.no_grad():
        token = model(ids, cache, last_only=True)[:, -1:].argmax(-1)  # prefill
        for _ in range(args.steps):
            nbytes = sum(step_bytes(model, cache, args.batch))
            sync(device)
            start = time.perf_counter()
            token = model(token, cache)[:, -1:].argmax(-1)
            sync(device)
            times.append(time.perf_counter() - start)
            fractions.append(nbytes / times[-1] / bandwidth)
    step_s = statistics.median(times[1:] or times)
    weights, kv = step_bytes(model, cache, args.batch)
    nbytes = weights + kv
    print(
        f"{args.preset} (L={cfg.n_layers}, d={cfg.d_model}) {args.dtype} on "
        f"{device_name(device)}: decode after {args.context} tokens, batch {args.batch}"
    )
    print(
        f"read bandwidth (full reads of {max(4 * model_bytes, 2**28) / 2**20:.0f} MiB, best of 5): "
        f"{bandwidth / 1e9:.1f} GB/s"
    )
    print(
        f"one step: median {1e3 * step_s:.2f} ms over {args.steps} steps; it moves "
        f"{nbytes / 1e6:.1f} MB (weights {weights / 1e6:.1f} MB of the model's "
        f"{model_bytes / 1e6:.1f}, KV cache {kv / 1e6:.2f} MB) → roof {1e3 * nbytes / bandwidth:.2f} ms"
    )
    print(
        f"achieved fraction of the roof: {statistics.median(fractions):.3f} "
        f"(steps {min(fractions):.3f}–{max(fractions):.3f}); {args.batch / step_s:.1f} tokens/s"
    )


if __name__ == "__main__":
    main()
