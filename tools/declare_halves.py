"""Declare the fit/held-out half of every public measurement that has none yet, and write it
into ``llama_lab/validation/measurements.json`` (``rows.declare_halves``: the new rows of each
kind, in the order of a hash of their id, alternate between the halves starting with the one
the kind has fewer of, a configuration's rows together — one already declared keeps its half
for its new rows; no declared row moves). Run it once after adding rows, before fitting.

    python tools/declare_halves.py
"""

from __future__ import annotations

import json
import sys

from llama_lab.validation.rows import DATA, declare_halves


def main() -> int:
    data = json.loads(DATA.read_text())
    halves = declare_halves(data["rows"])
    new = [row["id"] for row in data["rows"] if "half" not in row]
    for row in data["rows"]:
        row["half"] = halves[row["id"]]
    DATA.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    print(f"{len(new)} rows declared: " + ", ".join(f"{i} {halves[i]}" for i in new) if new else "none new")
    return 0


if __name__ == "__main__":
    sys.exit(main())
