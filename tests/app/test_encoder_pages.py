"""The pages that train or decode on next tokens, opened on a BERT preset: each stops with the one
line ``require_decoder_only`` gives, no exception."""

from pathlib import Path

import pytest
from apptest_helpers import open_page

PAGES = Path(__file__).resolve().parents[2] / "pages"


@pytest.mark.parametrize(
    "page,surface",
    [
        ("10_Many_GPUs.py", "The Many GPUs page"),
        ("9_Inside_the_model.py", "The Inside the model page"),
    ],
)
def test_a_next_token_page_refuses_an_encoder_by_name(page, surface):
    at = open_page(PAGES / page, {"preset": "bert-base-uncased"})
    (error,) = [e.value.replace("\\", "") for e in at.main.error]
    assert error.startswith(f"{surface} is not modelled for a bidirectional encoder")
