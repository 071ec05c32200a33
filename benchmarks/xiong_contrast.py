"""Issue 12's acceptance figures: Xiong et al. 2020's Post-LN/Pre-LN contrast with the
transformer-2017 preset (d=512, 8 heads, FFN 2048, Xavier, LayerNorm, embeddings × √d) at
T=128, B=8 over 5 seeds, at 2, 6 and 12 blocks, and the warmup contrast at its defaults on the
built-in text. Several minutes on two CPU cores.

    python benchmarks/xiong_contrast.py [--seeds 5] [--data random|builtin] [--no-warmup]

Prints, per depth, the last block's Post/Pre ‖∇W_down‖ ratio seed by seed and how many seeds
exceed 1.8, then the warmup verdict with every arm's final validation loss per seed.
"""

from __future__ import annotations

import argparse
import time

from llama_lab.config import PRESETS, ModelConfig, live_config, regime_recipe
from llama_lab.experiments import WARMUP_DEFAULTS as W
from llama_lab.experiments import gradnorms_over_seeds, seed_list, warmup_contrast
from llama_lab.train import TrainSettings
from llama_lab.train.data import load_builtin


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--data", choices=("random", "builtin"), default="random")
    parser.add_argument("--no-warmup", action="store_true")
    args = parser.parse_args(argv)
    seeds = seed_list(0, args.seeds)
    text = load_builtin()
    data = text if args.data == "builtin" else None
    cfg = PRESETS["transformer-2017"]
    print(
        f"transformer-2017 (d={cfg.d_model}, {cfg.n_heads} heads, FFN {cfg.ffn_hidden}, "
        f"embed_scale={cfg.embed_scale}), T=128, B=8, {args.data} tokens, seeds {seeds}"
    )
    for depth in (2, 6, 12):
        start = time.perf_counter()
        result = gradnorms_over_seeds(cfg.replace(n_layers=depth), 128, 8, seeds, data)
        ratios = result.last_ratio_by_seed()
        print(
            f"L={depth:>2}: Post/Pre last-block ‖∇W_down‖ "
            f"{' '.join(f'{r:.2f}' for r in ratios)}; median {sorted(ratios)[len(ratios) // 2]:.2f};"
            f" > 1.8 in {sum(r > 1.8 for r in ratios)}/{len(ratios)} "
            f"({time.perf_counter() - start:.0f} s)"
        )
    if args.no_warmup:
        return
    small = live_config(regime_recipe(ModelConfig(), "theory"), W["n_layers"], W["d_model"], W["seq_len"])
    start = time.perf_counter()
    contrast = warmup_contrast(
        small,
        TrainSettings(
            steps=W["steps"],
            lr=W["lr"],
            warmup_steps=W["warmup_steps"],
            seq_len=W["seq_len"],
            batch=W["batch"],
            device="cpu",
        ),
        seeds,
        text,
    )
    print(
        f"warmup contrast ({time.perf_counter() - start:.0f} s): "
        f"{'holds' if contrast.verdict()['holds'] else 'does not hold'}"
    )
    print(contrast.verdict_text())
    print(contrast.verdict_frame().to_string(index=False))


if __name__ == "__main__":
    main()
