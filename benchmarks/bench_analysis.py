"""How fast the analysis runs, and proof that counting 405B allocates no weights.

    python benchmarks/bench_analysis.py

Times the closed-form analysis of llama-3.1-405b at T=8192 and the parameter count read from
the module built on the meta device, with the process's peak RSS after each (the bf16 weights
would be ~811 GB); then fvcore's trace time for every preset at T=2048, full and scaled.
"""

from __future__ import annotations

import resource
import time

import torch

from llama_lab.analysis import analyze, count_params_module, weight_bytes
from llama_lab.analysis.cross_check import fvcore_check
from llama_lab.config import PRESETS


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


def timed(fn, *args, **kwargs):
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, time.perf_counter() - start


def main() -> None:
    torch.set_num_threads(1)
    cfg, seq_len = PRESETS["llama-3.1-405b"], 8192
    print(f"torch {torch.__version__}; peak RSS at start {peak_rss_bytes() / 2**20:.0f} MiB")
    print(f"llama-3.1-405b bf16 weights would take {weight_bytes(cfg, 'bf16') / 1e9:,.0f} GB\n")

    count_params_module(PRESETS["debug"])  # warm up: torch's first meta build
    result, closed_s = timed(analyze, cfg, seq_len)
    print(
        f"analyze(llama-3.1-405b, T={seq_len}) closed form: {closed_s * 1e3:8.2f} ms  "
        f"params {result['params']['total']:,}  forward {result['flops']['forward']:.4e} FLOP  "
        f"peak RSS {peak_rss_bytes() / 2**20:.0f} MiB"
    )
    module, module_s = timed(count_params_module, cfg)
    print(
        f"count_params_module (meta device):              {module_s * 1e3:8.2f} ms  "
        f"params {module.total:,}  peak RSS {peak_rss_bytes() / 2**20:.0f} MiB"
    )
    assert module.total == result["params"]["total"]

    print("\nfvcore trace at T=2048, batch 1 (meta device)")
    print(
        f"{'preset':16s} {'layers':>6s} {'full s':>8s} {'scaled s':>9s} "
        f"{'fvcore FLOPs':>14s} {'ours - fvcore':>14s}"
    )
    for name, preset in PRESETS.items():
        full, full_s = timed(fvcore_check, preset, 2048, method="full")
        scaled, scaled_s = timed(fvcore_check, preset, 2048, method="scaled")
        assert scaled.fvcore_flops == full.fvcore_flops
        print(
            f"{name:16s} {preset.n_layers:6d} {full_s:8.2f} {scaled_s:9.2f} "
            f"{full.fvcore_flops:14.4e} {-full.difference:14,d}"
        )
    print(f"\npeak RSS at the end {peak_rss_bytes() / 2**20:.0f} MiB")


if __name__ == "__main__":
    main()
