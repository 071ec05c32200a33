"""Forward + backward of our CausalLM vs transformers' LlamaForCausalLM (SDPA attention) at the
same config, dtype and weights, alternated in one process (A B, B A, ...); prints medians, best
times and the ratios.

    python benchmarks/bench_vs_transformers.py [--preset seed-demo] [--seq-len 128] [--batch 4]
        [--dtype fp32|bf16] [--rounds 7] [--device auto|cpu|cuda] [--n-layers L]
        [--set field=value ...] [--pages-kept]

Any family: the other side is the family's own transformers class (``--preset mixtral-8x7b
--n-layers 2 --set d_model=256 ...`` for a small mixture). ``--pages-kept`` times both under
the allocator setting our training loops use (``runtime.memory.pages_kept``: freed pages
reused, not faulted in afresh); without it, glibc's defaults for both.

Two comparisons, each alternated with the other's runs:
- each model's own loss path: ``model.loss(ids).backward()`` (ours: the LM head and the
  cross-entropy in chunks, never the B·T·V logits) against ``hf(ids, labels=ids).loss.backward()``;
- the same loss on both (our ``next_token_loss`` on the logits), so the difference is the
  model code alone.
"""

from __future__ import annotations

import argparse
import statistics
import time
from contextlib import nullcontext

import torch

from llama_lab.config import apply_overrides, get_preset
from llama_lab.model import build_model
from llama_lab.runtime.devices import pick_device, sync
from llama_lab.runtime.memory import pages_kept
from llama_lab.runtime.precision import DTYPES
from llama_lab.train.step import next_token_loss


def build_pair(cfg, device, dtype):
    """Ours and the family's own transformers class (LlamaForCausalLM, MixtralForCausalLM,
    Qwen3ForCausalLM, ...) with the same weights."""
    import transformers

    ours = build_model(cfg, device=device, seed=0).to(dtype)
    hf_cfg = transformers.AutoConfig.for_model(**cfg.to_hf_config())
    hf_cfg._attn_implementation = "sdpa"
    hf = transformers.AutoModelForCausalLM.from_config(hf_cfg).to(device=device, dtype=dtype)
    hf.load_state_dict(ours.state_dict(), strict=True)
    hf.config.use_cache = False
    return ours, hf


def loss_seconds(loss_of, params, device) -> float:
    """Wall time of ``loss_of().backward()``, the gradients cleared first."""
    for p in params:
        p.grad = None
    sync(device)
    start = time.perf_counter()
    loss_of().backward()
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
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="override a config field (repeatable), e.g. --set d_model=256",
    )
    parser.add_argument(
        "--pages-kept",
        action="store_true",
        help="time both under runtime.memory.pages_kept, as our training loops run",
    )
    args = parser.parse_args(argv)

    cfg = apply_overrides(get_preset(args.preset), args.set)
    if args.n_layers:
        cfg = cfg.replace(n_layers=args.n_layers)
    device, dtype = pick_device(args.device), DTYPES[args.dtype]
    ours, hf = build_pair(cfg, device, dtype)
    generator = torch.Generator().manual_seed(0)
    window = torch.randint(0, cfg.vocab_size, (args.batch, args.seq_len + 1), generator=generator).to(device)
    inputs, targets = window[:, :-1], window[:, 1:]
    with torch.no_grad():
        gap = (ours(inputs).float() - hf(inputs).logits.float()).abs().max().item()

    ids = window[:, :-1]
    with torch.no_grad():
        loss_gap = abs(ours.loss(ids).item() - hf(ids, labels=ids).loss.item())
    runners = {
        "llama_lab model.loss(ids)": (lambda: ours.loss(ids), ours.parameters),
        "transformers labels=ids": (lambda: hf(ids, labels=ids).loss, hf.parameters),
        "llama_lab logits + CE": (lambda: next_token_loss(ours(inputs), targets), ours.parameters),
        "transformers logits + CE": (lambda: next_token_loss(hf(inputs).logits, targets), hf.parameters),
    }
    times = {name: [] for name in runners}
    order = list(runners)
    with pages_kept(device) if args.pages_kept else nullcontext():  # one setting for both
        for loss_of, params in runners.values():  # warm-up, excluded
            loss_seconds(loss_of, list(params()), device)
        for round_index in range(args.rounds):  # alternate A B, B A, ...: same conditions for both
            for name in order if round_index % 2 == 0 else order[::-1]:
                loss_of, params = runners[name]
                times[name].append(loss_seconds(loss_of, list(params()), device))

    print(
        f"config {args.preset} (L={cfg.n_layers}, d={cfg.d_model}, {cfg.attention_kind}), "
        f"B={args.batch} T={args.seq_len} {args.dtype} on {device} "
        f"({torch.get_num_threads()} threads), {args.rounds} rounds; max |Δlogit| {gap:.2e}, "
        f"|Δloss| {loss_gap:.2e}"
    )
    for name, values in times.items():
        print(
            f"{name:28} forward+backward median {1e3 * statistics.median(values):9.2f} ms   "
            f"best {1e3 * min(values):9.2f} ms"
        )
    for ours_name, hf_name, what in (
        ("llama_lab model.loss(ids)", "transformers labels=ids", "each its own loss path"),
        ("llama_lab logits + CE", "transformers logits + CE", "the same loss on both"),
    ):
        a_, b_ = times[ours_name], times[hf_name]
        per_round = [a / b for a, b in zip(a_, b_)]  # each round's two runs side by side
        print(
            f"ratio llama_lab / transformers, {what}: median "
            f"{statistics.median(a_) / statistics.median(b_):.3f}, best {min(a_) / min(b_):.3f},"
            f" median of the rounds' ratios {statistics.median(per_round):.3f} (range "
            f"{min(per_round):.3f}–{max(per_round):.3f}; < 1: ours is faster)"
        )


if __name__ == "__main__":
    main()
