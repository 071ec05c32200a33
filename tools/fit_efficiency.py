"""Fit the efficiency parameters of LLaMA Lab's time estimates on the declared fit half of the
public measurements (``llama_lab/validation/measurements.json``) and write them, with the
held-out errors they give, to ``llama_lab/validation/efficiency.json``. Deterministic: the
halves are fixed by a hash of each row's id, the search is a coordinate descent over fixed grids.
Each fit row is also predicted under a fit made without it (leave one out, about a minute and a
half on 2 cores): the errors the 80 % intervals are built from.

    python tools/fit_efficiency.py           # rewrite the file
    python tools/fit_efficiency.py --check   # exit 1 if the file differs from a fresh fit
    python tools/fit_efficiency.py --markdown  # the shipped summary as docs/cli.md's table
"""

from __future__ import annotations

import argparse
import json
import sys

from llama_lab.validation import fit, results, summary
from llama_lab.validation.efficiency import PARAMS_FILE
from llama_lab.validation.validate import cross_validated, summary_markdown


def render() -> str:
    eff, informed = fit()
    unseen = cross_validated()  # each fit row under a fit without it: the intervals' errors
    body = {
        "parameters": eff.to_dict(),
        "fit_rows_per_regime": informed,
        "cross_validated": unseen,
        "summary": summary(results(eff), unseen),
    }
    return json.dumps(body, indent=1, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the file, write nothing")
    parser.add_argument("--markdown", action="store_true", help="print the shipped summary as a table")
    args = parser.parse_args(argv)
    if args.markdown:
        print(summary_markdown(json.loads(PARAMS_FILE.read_text())["summary"]))
        return 0
    text = render()
    if args.check:
        return 0 if PARAMS_FILE.exists() and PARAMS_FILE.read_text() == text else 1
    PARAMS_FILE.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
