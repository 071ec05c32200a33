"""Where a training step's time goes: torch.profiler over a few steps of our CausalLM — the
loss through its own path (``model.loss``, chunked LM head + cross-entropy), backward and AdamW
— with the share of the time in matrix multiplies (the GEMMs the FLOP count is made of) and
the operators outside them, largest first. With ``--transformers`` the same for transformers'
LlamaForCausalLM (``labels=ids``), profiled in the same process.

    python benchmarks/profile_step.py [--preset seed-demo] [--seq-len 128] [--batch 4]
        [--steps 3] [--top 15] [--transformers]
"""

from __future__ import annotations

import argparse

import torch
from torch.profiler import ProfilerActivity, profile

from llama_lab.config import get_preset
from llama_lab.model import build_model
from llama_lab.train.step import make_optimizer

GEMMS = {
    "aten::mm",
    "aten::addmm",
    "aten::bmm",
    "aten::baddbmm",
    "aten::matmul",
    "aten::linear",
    "aten::_scaled_dot_product_flash_attention_for_cpu",
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward",
}
# the kernels that do the multiplies themselves (self time); the wrappers above them hold none
GEMM_KERNELS = {
    "aten::mm",
    "aten::addmm",
    "aten::bmm",
    "aten::baddbmm",
    "aten::_scaled_dot_product_flash_attention_for_cpu",
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward",
}


def profiled(step, steps: int):
    step()  # warm-up, not profiled
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step()
    return prof.key_averages()


def report(name: str, averages, steps: int, top: int) -> None:
    rows = sorted(averages, key=lambda e: e.self_cpu_time_total, reverse=True)
    total = sum(e.self_cpu_time_total for e in rows)
    gemm = sum(e.self_cpu_time_total for e in rows if e.key in GEMM_KERNELS)
    print(
        f"\n== {name}: {total / steps / 1e3:.1f} ms of operator self time per step; "
        f"GEMM kernels (mm, addmm, bmm, CPU flash attention) {gemm / total:.1%}, "
        f"everything else {(total - gemm) / total:.1%}"
    )
    print(f"{'operator':48} {'self ms/step':>12} {'share':>7} {'calls/step':>10}")
    for e in rows[:top]:
        print(
            f"{e.key[:48]:48} {e.self_cpu_time_total / steps / 1e3:12.2f} "
            f"{e.self_cpu_time_total / total:7.1%} {e.count / steps:10.1f}"
        )


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="seed-demo")
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--transformers", action="store_true")
    args = parser.parse_args(argv)
    cfg = get_preset(args.preset)
    ids = torch.randint(
        0, cfg.vocab_size, (args.batch, args.seq_len), generator=torch.Generator().manual_seed(0)
    )
    model = build_model(cfg, seed=0)
    optimizer = make_optimizer(model, 1e-4)

    def ours():
        model.loss(ids).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    print(
        f"{args.preset} (L={cfg.n_layers}, d={cfg.d_model}), B={args.batch} T={args.seq_len} "
        f"fp32, {torch.get_num_threads()} threads, {args.steps} profiled steps after one warm-up"
    )
    report("llama_lab: model.loss(ids).backward() + AdamW", profiled(ours, args.steps), args.steps, args.top)
    if args.transformers:
        import transformers

        hf_cfg = transformers.LlamaConfig(**cfg.to_hf_config())
        hf_cfg._attn_implementation = "sdpa"
        hf = transformers.LlamaForCausalLM(hf_cfg)
        hf.load_state_dict(model.state_dict(), strict=True)
        hf_optimizer = make_optimizer(hf, 1e-4)

        def theirs():
            hf(ids, labels=ids).loss.backward()
            hf_optimizer.step()
            hf_optimizer.zero_grad(set_to_none=True)

        report(
            "transformers: model(ids, labels=ids).loss.backward() + AdamW",
            profiled(theirs, args.steps),
            args.steps,
            args.top,
        )


if __name__ == "__main__":
    main()
