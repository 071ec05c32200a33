"""``scaling``: the SPEC's JSON keys, one-line refusals."""

import json

import pytest

from llama_lab.analysis.scaling import get_fit
from llama_lab.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_fit_at_n_and_d(capsys):
    code, out, _ = run(
        capsys, "scaling", "--fit", "hoffmann", "--params", "70e9", "--tokens", "1.4e12", "--json"
    )
    assert code == 0
    assert json.loads(out)["loss"] == pytest.approx(get_fit("hoffmann").loss(70e9, 1.4e12))


def test_fit_compute_optimal(capsys):
    code, out, _ = run(capsys, "scaling", "--fit", "besiroglu", "--compute", "5.76e23", "--json")
    assert code == 0
    got = json.loads(out)
    assert {"n_opt", "d_opt", "loss_opt"} <= set(got)
    assert 6 * got["n_opt"] * got["d_opt"] == pytest.approx(5.76e23)


def test_ladder_keys(capsys):
    code, out, _ = run(capsys, "scaling", "--ladder", "--json")
    assert code == 0
    got = json.loads(out)
    assert set(got["fit"]) == {"E", "A", "B", "alpha", "beta"}
    assert {"params", "tokens", "val_loss", "budget", "compute"} <= set(got["rows"][0])
    low, high = got["isoflop_a_interval"]
    assert isinstance(got["isoflop_a"], float) and low < high
    assert len(got["log_residuals"]) == len(got["rows"])


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["--fit", "hoffmann"], "either --params N and --tokens D, or --compute C"),
        (["--fit", "hoffmann", "--params", "1e9"], "either --params"),
        (["--fit", "hoffmann", "--compute", "1e20", "--params", "1e9", "--tokens", "1e9"], "either"),
        (["--fit", "kaplan", "--compute", "1e20"], "invalid choice"),
        (["--fit", "hoffmann", "--compute", "-1"], "must be"),
        (["--ladder", "--compute", "1e20"], "takes no"),
    ],
)
def test_errors_are_one_line_exit_2(capsys, argv, needle):
    code, out, err = run(capsys, "scaling", *argv)
    assert code == 2 and needle in err and err.count("\n") == 1 and out == ""
