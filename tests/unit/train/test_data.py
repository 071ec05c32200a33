import pydoc_data.topics
from pathlib import Path

import pytest
import torch

from llama_lab.config import ConfigError
from llama_lab.train import data
from llama_lab.train.data import (
    BYTE_VOCAB,
    DataError,
    batches,
    builtin_corpus,
    check_vocab,
    decode_tokens,
    encode_text,
    get_batch,
    load_builtin,
    load_user_text,
    random_tokens,
)


def test_builtin_corpus_is_the_pydoc_help_text():
    topics = pydoc_data.topics.topics
    expected = "\n".join(topics[key] for key in sorted(topics)).encode("utf-8")
    assert builtin_corpus() == expected
    assert 300_000 < len(expected) < 1_000_000
    assert b'The "if" statement is used for conditional execution' in builtin_corpus()


def test_the_built_in_corpus_is_named_for_what_it_is_wherever_it_is_shown():
    """A run's data label says what the corpus is, never a bare module name: in the runs'
    settings, the report and the premeasured results alike."""
    assert load_builtin().source == "builtin: Python's own help text (pydoc_data.topics)"
    root = Path(data.__file__).parents[1]
    for path in sorted([*root.rglob("*.py"), *root.rglob("*.json")]):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if "pydoc_data" in line and not line.lstrip().startswith(("from ", "import ")):
                assert "help text" in line, f"{path}:{number}: {line.strip()}"


def test_builtin_split_is_fixed_last_tenth_validates():
    corpus = builtin_corpus()
    first, second = load_builtin(), data.make_token_data(encode_text(corpus), 256, "again")
    n_val = round(len(corpus) * 0.1)
    assert first.val.numel() == n_val and first.train.numel() == len(corpus) - n_val
    assert torch.equal(first.train, second.train) and torch.equal(first.val, second.val)
    assert decode_tokens(first.val) == corpus[-n_val:].decode("utf-8", errors="replace")
    assert first.vocab_size == BYTE_VOCAB == 256
    assert first.max_token_id < 256
    assert first.to_dict()["train_tokens"] + first.to_dict()["val_tokens"] == len(corpus)


def test_encode_is_utf8_bytes_and_round_trips():
    text = "Grüße, 世界 — ok"
    tokens = encode_text(text)
    assert tokens.dtype == torch.long
    assert tokens.tolist() == list(text.encode("utf-8"))
    assert decode_tokens(tokens) == text
    assert encode_text(b"").numel() == 0


def test_user_text_accepted_and_split():
    raw = ("Pre-LN keeps an identity path for the gradient. " * 40).encode()
    d = load_user_text(raw, name="notes.txt")
    assert d.n_tokens == len(raw) and d.source == "notes.txt"
    assert torch.equal(torch.cat([d.train, d.val]), encode_text(raw))


@pytest.mark.parametrize(
    "raw, rule",
    [
        (b"", "empty"),
        (b"   \n\t ", "empty"),
        (b"short text", "at least 1,000"),
        (b"ok " * 500 + b"\xff\xfe bad" + b"ok " * 10, "not UTF-8 text: byte 0xff at offset 1500"),
        (b"x" * 5_001, "limit is 5,000 bytes"),
    ],
    ids=["empty", "blank", "too-short", "not-utf8", "too-large"],
)
def test_user_text_refusals_name_the_rule(raw, rule):
    with pytest.raises(DataError, match=rule) as info:
        load_user_text(raw, max_bytes=5_000)
    assert isinstance(info.value, ConfigError)


def test_user_text_must_be_bytes():
    with pytest.raises(DataError, match="must be bytes"):
        load_user_text("a str" * 300)


def test_random_tokens_reproducible_and_in_range():
    a, b, c = (
        random_tokens(50, 1000, seed=3),
        random_tokens(50, 1000, seed=3),
        random_tokens(50, 1000, seed=4),
    )
    assert torch.equal(a.train, b.train) and not torch.equal(a.train, c.train)
    assert a.max_token_id < 50 and a.vocab_size == 50 and a.n_tokens == 1000
    with pytest.raises(DataError):
        random_tokens(1, 10)


def test_vocab_check_refuses_bytes_for_a_small_vocab():
    check_vocab(load_builtin(), 256)
    with pytest.raises(DataError, match="vocab_size=100.*set vocab_size=256"):
        check_vocab(load_builtin(), 100)


def test_batches_are_shifted_windows_and_seeded():
    tokens = torch.arange(1000)
    x, y = get_batch(tokens, 4, 16, torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (4, 16)
    assert torch.equal(y, x + 1)  # targets are the next tokens
    again = next(batches(tokens, 4, 16, torch.Generator().manual_seed(0)))
    assert torch.equal(again[0], x)
    stream = batches(load_builtin(), 2, 8, torch.Generator().manual_seed(1))
    assert next(stream)[0].shape == (2, 8) and next(stream)[0].shape == (2, 8)
    with pytest.raises(DataError, match="needs at least 17"):
        get_batch(torch.arange(10), 1, 16, torch.Generator())
