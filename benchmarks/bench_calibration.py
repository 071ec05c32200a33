"""The device calibration's loop, as the Live pass page runs it: live passes at a sequence of
batch × sequence sizes, each predicted from the passes before it (``validation.device``) and
then measured; prints the predicted and measured step and the error of each.

    python benchmarks/bench_calibration.py [--preset seed-demo] [--dtype fp32|bf16]
        [--device auto|cpu|cuda] [--sizes 1x128,4x128,2x64,8x32,8x128] [--iters 3] [--json FILE]

Sizes are B×T. The first pass only calibrates; each later one is a prediction made before it
ran. ``--json`` writes the rows (for gpu_check.sh's record).
"""

from __future__ import annotations

import argparse
import json

from llama_lab.config import get_preset
from llama_lab.experiments import LiveSettings, live_pass
from llama_lab.validation.device import DeviceCalibration, PassTiming


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="seed-demo")
    parser.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--sizes", default="1x128,4x128,2x64,8x32,8x128")
    parser.add_argument("--iters", type=int, default=3)
    parser.add_argument("--json", help="write the rows to this file")
    args = parser.parse_args(argv)
    cfg = get_preset(args.preset)
    calibration, rows = None, []
    for size in args.sizes.split(","):
        batch, seq_len = (int(v) for v in size.split("x"))
        predicted = calibration.predict_step_s(cfg, seq_len, batch) if calibration else None
        live = live_pass(
            cfg, seq_len, batch, LiveSettings(device=args.device, dtype=args.dtype, iters=args.iters)
        )
        if calibration is None:
            overlapped = live.device.startswith("cuda")
            calibration = DeviceCalibration(live.device_name, live.dtype, overlapped, live.peak_flops)
        label = calibration.label if calibration.passes else "first pass: calibrates only"
        measured = live.step_ms / 1e3
        row = {
            "batch": batch,
            "seq_len": seq_len,
            "measured_ms": live.step_ms,
            "optimizer_ms": live.optimizer_ms,
            "overhead_ms": live.overhead_ms,
            "calibration": label,
        }
        if predicted is not None:
            row |= {"predicted_ms": 1e3 * predicted, "error": (predicted - measured) / measured}
        rows.append(row)
        shown = (
            f"predicted {1e3 * predicted:9.1f} ms, error {row['error']:+7.1%}"
            if predicted
            else "(calibrates)"
        )
        print(
            f"B={batch:>3} T={seq_len:>5}: measured {1e3 * measured:9.1f} ms (one-token overhead "
            f"{live.overhead_ms or 0:.1f} ms)  {shown}  [{label}]",
            flush=True,
        )
        calibration = calibration.with_pass(PassTiming.of(cfg, seq_len, batch, live))
    errors = [abs(r["error"]) for r in rows if "error" in r]
    if errors:
        print(f"median |error| {sorted(errors)[len(errors) // 2]:.1%} over {len(errors)} predicted passes")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"preset": args.preset, "dtype": args.dtype, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
