"""Measure the defaults the pages show first and ship them (``llama_lab/experiments/premeasured_data``).

Each default of ``llama_lab.experiments.defaults.default_runs`` — the Gradient norms page's
Post-LN/Pre-LN contrast over seeds and its depth sweep for each setting, the warmup contrast of
the seed claim, Inside the model's trained small copies — and the Inference systems page's
distillation are run here as the page would run them, and written with the machine, the
versions, the date and the time it took. The pages show these at once, labelled as
pre-measured, and re-measure on a button. ``tests/unit/experiments/test_premeasured.py``
re-runs small cases and checks that the shipped numbers reproduce.

    python tools/premeasure.py              # every default (about 10 minutes on 2 CPU cores)
    python tools/premeasure.py --kind inside  # one kind
"""

from __future__ import annotations

import argparse
import sys

from llama_lab.experiments import distill, premeasured
from llama_lab.experiments.defaults import default_runs
from llama_lab.runtime.devices import pick_device


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", help="only this kind (gradnorms, depth_sweep, warmup, inside, distill)")
    args = parser.parse_args(argv)
    for run in default_runs():
        if args.kind and run.kind != args.kind:
            continue
        device = pick_device(run.settings.get("device", "cpu"))
        result, seconds = premeasured.timed(run.work, None)
        weights, flops = None, run.flops
        if run.kind == "inside":  # the trained copy: its weights, and the run's record as the result
            model, result = result
            weights = model.state_dict()
            flops *= result.steps_run / run.settings["steps"]  # a run that diverged stopped early
        meta = premeasured.provenance(device, seconds, flops)
        premeasured.record(run.kind, run.config, run.settings, result, meta, weights)
        print(f"{run.kind:12s} {seconds:7.1f} s  {flops / seconds / 1e9:6.2f} GFLOP/s", flush=True)
    if args.kind in (None, "distill"):  # the Inference systems page's distillation at its defaults
        d = distill.DISTILL_DEFAULTS
        result, seconds = premeasured.timed(distill.page_run)
        meta = premeasured.provenance(pick_device("cpu"), seconds, distill.distill_flops())
        premeasured.record("distill", None, distill.page_settings(d["temperature"], d["alpha"]), result, meta)
        print(f"{'distill':12s} {seconds:7.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
