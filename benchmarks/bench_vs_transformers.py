"""Forward + backward of our CausalLM vs transformers' LlamaForCausalLM (SDPA attention) at the
same config, dtype and weights, alternated in one process (A B, B A, ...); prints medians, best times and the ratios.

    python benchmarks/bench_vs_transformers.py [--preset seed-demo] [--seq-len 128] [--batch 4]
        [--dtype fp32|bf16] [--rounds 7] [--device auto|cpu|cuda]

Both models compute the loss the same way (our ``next_token_loss`` on the logits), so the
difference is the model code alone.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

from llama_lab.config import get_preset
from llama_lab.runtime.devices import pick_device, sync
from llama_lab.runtime.precision import DTYPES
from llama_lab.train.step import next_token_loss
from llama_lab.model import build_model


def build_pair(cfg, device, dtype):
    import transformers
    ours = build_model(cfg, device=device, seed=0).to(dtype)
    hf_cfg = transformers.LlamaConfig(**cfg.to_hf_config())
    hf_cfg._attn_implementation = "sdpa"
    hf = transformers.LlamaForCausalLM(hf_cfg).to(device=device, dtype=dtype)
    hf.load_state_dict(ours.state_dict(), strict=True)
    hf.config.use_cache = False
    return ours, hf


def fwd_bwd_seconds(forward, params, inputs, targets, device) -> float:
    for p in params:
        p.grad = None
    sync(device)
    start = time.perf_counter()
    loss = next_token_loss(forward(inputs), targets)
    loss.backward()
    sync(device)
    return time.perf_counter() - start


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="seed-demo")
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--n-layers", type=int, help="override the preset's depth (big presets)")
    args = parser.parse_args(argv)

    cfg = get_preset(args.preset)
    if args.n_layers:
        cfg = cfg.replace(n_layers=args.n_layers)
    device, dtype = pick_device(args.device), DTYPES[args.dtype]
    ours, hf = build_pair(cfg, device, dtype)
    generator = torch.Generator().manual_seed(0)
    window = torch.randint(0, cfg.vocab_size, (args.batch, args.seq_len + 1), generator=generator).to(device)
    inputs, targets = window[:, :-1], window[:, 1:]
    with torch.no_grad():
        gap = (ours(inputs).float() - hf(inputs).logits.float()).abs().max().item()

    runners = {"llama_lab": (ours, ours.parameters),
               "transformers": (lambda x: hf(x).logits, hf.parameters)}
    times = {name: [] for name in runners}
    for name, (forward, params) in runners.items():               # warm-up, excluded
        fwd_bwd_seconds(forward, list(params()), inputs, targets, device)
    order = list(runners)
    for round_index in range(args.rounds):      # alternate A B, B A, ...: same conditions for both
        for name in (order if round_index % 2 == 0 else order[::-1]):
            forward, params = runners[name]
            times[name].append(fwd_bwd_seconds(forward, list(params()), inputs, targets, device))

    ours_ms = 1e3 * statistics.median(times["llama_lab"])
    hf_ms = 1e3 * statistics.median(times["transformers"])
    ours_best, hf_best = 1e3 * min(times["llama_lab"]), 1e3 * min(times["transformers"])
    print(f"config {args.preset} (L={cfg.n_layers}, d={cfg.d_model}, {cfg.attention_kind}), "
          f"B={args.batch} T={args.seq_len} {args.dtype} on {device} "
          f"({torch.get_num_threads()} threads), {args.rounds} rounds; max |Δlogit| {gap:.2e}")
    print(f"llama_lab      forward+backward median {ours_ms:9.2f} ms   best {ours_best:9.2f} ms")
    print(f"transformers   forward+backward median {hf_ms:9.2f} ms   best {hf_best:9.2f} ms")
    print(f"ratio llama_lab / transformers: median {ours_ms / hf_ms:.3f}, best {ours_best / hf_best:.3f} "
          f"(< 1: ours is faster; on a shared machine trust 'best')")


if __name__ == "__main__":
    main()
