"""The model's two custom autograd Functions against their plain references
(``llama_lab/model/kernels.py``): bytes kept for backward (saved-tensor hooks) and the time of
forward + backward, alternated in one process (A B, B A, ...), at seed-demo's shapes.

    python benchmarks/bench_kernels.py [--tokens 512] [--rounds 15] [--dtype fp32|bf16]

A Function stays in the model only while it keeps fewer bytes or runs faster than the plain
composite; this prints both, with the ratios (kernel / reference).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from llama_lab.config import get_preset
from llama_lab.model import rms_norm, rms_norm_reference, swiglu, swiglu_reference
from llama_lab.runtime.precision import DTYPES


def kept_bytes(fn, x: torch.Tensor, params: tuple[torch.Tensor, ...] = ()) -> int:
    """Bytes of the distinct storages autograd keeps for backward of ``fn(x, *params)``."""
    skip = {p.untyped_storage().data_ptr() for p in params}
    kept: dict[int, int] = {}

    def pack(t):
        ptr = t.untyped_storage().data_ptr()
        if ptr not in skip:
            kept[ptr] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn(x, *params)
    return sum(kept.values())


def seconds(fn, x: torch.Tensor, params: tuple[torch.Tensor, ...], upstream: torch.Tensor) -> float:
    start = time.perf_counter()
    fn(x, *params).backward(upstream)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=512, help="rows (B·T): seed-demo's B=4, T=128")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    args = parser.parse_args()
    cfg, dtype = get_preset("seed-demo"), DTYPES[args.dtype]
    N, C, F = args.tokens, cfg.d_model, cfg.ffn_hidden
    g = torch.Generator().manual_seed(0)
    x = torch.randn(N, C, generator=g).to(dtype).requires_grad_()
    weight = torch.ones(C, dtype=dtype, requires_grad=True)
    gate_up = torch.randn(N, 2 * F, generator=g).to(dtype).requires_grad_()
    cases = {
        "rms_norm": (
            lambda x, w: rms_norm(x, w, cfg.norm_eps),
            lambda x, w: rms_norm_reference(x, w, cfg.norm_eps),
            x,
            (weight,),
        ),
        "swiglu": (swiglu, swiglu_reference, gate_up, ()),
    }
    print(
        f"seed-demo shapes, {N} rows, {args.dtype}, {torch.get_num_threads()} threads, {args.rounds} rounds"
    )
    print(
        f"{'':9s} {'kept (kernel)':>14s} {'kept (plain)':>13s} {'ratio':>6s} "
        f"{'ms (kernel)':>12s} {'ms (plain)':>11s} {'ratio':>6s}"
    )
    for name, (kernel, plain, inp, params) in cases.items():
        upstream = torch.randn_like(plain(inp, *params))
        times: dict[str, list[float]] = {"kernel": [], "plain": []}
        for fn in (kernel, plain):  # warm-up
            seconds(fn, inp, params, upstream)
        for r in range(args.rounds):
            order = [("kernel", kernel), ("plain", plain)]
            for label, fn in order if r % 2 == 0 else order[::-1]:
                times[label].append(seconds(fn, inp, params, upstream))
        kb, pb = kept_bytes(kernel, inp, params), kept_bytes(plain, inp, params)
        ratios = [a / b for a, b in zip(times["kernel"], times["plain"])]
        km, pm = (1e3 * statistics.median(times[k]) for k in ("kernel", "plain"))
        print(
            f"{name:9s} {kb:14,d} {pb:13,d} {kb / pb:6.2f} {km:12.3f} {pm:11.3f} "
            f"{statistics.median(ratios):6.2f}  (time ratio range {min(ratios):.2f}–{max(ratios):.2f})"
        )


if __name__ == "__main__":
    main()
