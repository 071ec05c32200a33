"""Decode-step time with the position tables built once per device and length (now) against
the same model rebuilding them on every forward (what the code did before issue 9, when a
sinusoidal decode step rebuilt the whole S-row table each time).

    python benchmarks/bench_decode_positions.py [--context 4000] [--steps 30] [--d-model 512]
        [--vocab 256]

Prints, for RoPE and sinusoidal positions at the same size, the median ms per decode step with
the tables built once and with them rebuilt per forward, and the sinusoidal / RoPE ratio of
each (issue 9 measured 2.4–3.2× with the rebuild; built once it should be ≈ 1 or below, since
a sinusoidal step does no rotation).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from llama_lab.config import PRESETS
from llama_lab.model import build_model
from llama_lab.model.positions import PositionTables


class RebuiltEachForward(PositionTables):
    """The peer: every forward builds its tables afresh (nothing kept)."""

    def get(self, end, device):
        return self._build(end, device)


@torch.inference_mode()
def decode_ms(cfg, context: int, steps: int, rebuild: bool) -> float:
    model = build_model(cfg).eval()
    if rebuild:
        model.model.position_tables = RebuiltEachForward(cfg)
    prompt = torch.randint(0, cfg.vocab_size, (1, context))
    cache = model.new_cache(1, context + steps + 1)
    logits = model(prompt, cache, last_only=True)
    times = []
    for _ in range(steps):
        token = logits[:, -1:].argmax(-1)
        start = time.perf_counter()
        logits = model(token, cache)
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--context", type=int, default=4000)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--d-model", type=int, default=512)
    parser.add_argument("--vocab", type=int, default=256)
    args = parser.parse_args(argv)
    base = PRESETS["seed-demo"].replace(
        d_model=args.d_model, vocab_size=args.vocab, max_seq_len=args.context + args.steps + 1
    )
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads; seed-demo shapes at "
        f"d={args.d_model}, vocab {args.vocab}, context S={args.context:,}, B=1"
    )
    ms = {
        (enc, rebuild): decode_ms(base.replace(pos_encoding=enc), args.context, args.steps, rebuild)
        for rebuild in (True, False)
        for enc in ("rope", "sinusoidal")
    }
    for rebuild, label in ((False, "tables built once      "), (True, "rebuilt every forward  ")):
        rope, sinus = ms[("rope", rebuild)], ms[("sinusoidal", rebuild)]
        print(
            f"{label} RoPE {rope:8.3f} ms/step   sinusoidal {sinus:8.3f} ms/step   "
            f"sinusoidal / RoPE {sinus / rope:.2f}"
        )
    for enc in ("rope", "sinusoidal"):
        print(f"{enc:<10} rebuilt / built once: {ms[(enc, True)] / ms[(enc, False)]:.2f}×")


if __name__ == "__main__":
    main()
