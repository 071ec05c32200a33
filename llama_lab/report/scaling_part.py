"""The report's Scaling laws section, as the Scaling laws page shows it: the published fits'
compute-optimal models placed against the trained models, and the shipped ladder with its fit
beside the published exponents. Nothing is trained for the report."""

from __future__ import annotations

from ..analysis.scaling import get_fit
from ..errors import LabError
from ..experiments import scaling_ladder
from ..figures.common import Figure, Table
from ..figures.scaling import (
    exponents_frame,
    fixed_data_caption,
    isoflop_figure,
    ladder_figure,
    ladder_isoflop_figure,
    ladder_rows_frame,
    placements_frame,
)

SECTION = "Scaling laws"


def scaling_part() -> tuple[list[Table], list[Figure]]:
    fit = get_fit("besiroglu")
    tables = [
        Table(
            f"scaling_placements_{name}",
            f"Trained models against compute-optimal ({get_fit(name).source}; MoEs by active parameters)",
            SECTION,
            placements_frame(get_fit(name)),
        )
        for name in ("hoffmann", "besiroglu")
    ]
    figures = [
        Figure(
            "scaling_isoflop", "IsoFLOP curves with the trained models placed", SECTION, isoflop_figure(fit)
        )
    ]
    try:
        ladder = scaling_ladder.shipped()
    except LabError:
        return tables, figures
    tables.append(
        Table(
            "scaling_ladder_exponents",
            "The ladder measured here: a (N_opt ∝ C^a) by approaches 2 and 3 beside the published",
            SECTION,
            exponents_frame(ladder.result),
        )
    )
    tables.append(
        Table(
            "scaling_ladder_rows",
            "The ladder's points (the seeds' means): each IsoFLOP budget's sizes, then three sizes on "
            "one fixed D — " + fixed_data_caption(scaling_ladder.fixed_data_rows(ladder.result)),
            SECTION,
            ladder_rows_frame(ladder.result),
        )
    )
    figures.append(
        Figure(
            "scaling_ladder_isoflop",
            "The ladder's IsoFLOP curves measured here, with approach 2's parabolas and minima",
            SECTION,
            ladder_isoflop_figure(ladder.result),
        )
    )
    figures.append(
        Figure(
            "scaling_ladder",
            "The ladder measured here against tokens, with approach 3's fit",
            SECTION,
            ladder_figure(ladder.result["rows"], ladder.fit),
        )
    )
    return tables, figures
