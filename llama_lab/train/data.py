"""Token data for the live experiments: a built-in English corpus, user text, random tokens.

Text is tokenised byte-level: token id = UTF-8 byte value, so the vocabulary is 256 and any
text round-trips exactly. A model trained on byte data needs ``vocab_size ≥ 256`` (the training
presets use exactly 256); data whose ids exceed a config's vocabulary is refused
(``check_vocab``).

The built-in corpus is the English help text in ``pydoc_data.topics`` (what ``help("if")``
prints): it ships with every CPython, so the lab trains on real prose and code offline. Its
values are joined in sorted-key order (~460 KB) so the corpus, and therefore the split, is the
same on every run of a given Python.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import torch

from ..config.files import read_bounded
from ..errors import DataError

BYTE_VOCAB = 256  # one token per UTF-8 byte value
VAL_FRACTION = 0.1  # the last 10 % of every corpus is the validation split
MAX_USER_BYTES = 20_000_000  # 20 MB: a few seconds to tokenise, ~160 MB as int64 tokens
MIN_USER_BYTES = 1_000  # below this, train and val windows would overlap the whole text


@dataclass(frozen=True, eq=False)
class TokenData:
    """A tokenised corpus split once into a training and a validation part (1-D int64)."""

    train: torch.Tensor  # (N_train,)
    val: torch.Tensor  # (N_val,)
    vocab_size: int = BYTE_VOCAB
    source: str = "builtin"

    @property
    def n_tokens(self) -> int:
        return self.train.numel() + self.val.numel()

    @property
    def max_token_id(self) -> int:
        return int(max(self.train.max().item(), self.val.max().item()))

    def to_dict(self) -> dict:
        return {
            "source": self.source,
            "vocab_size": self.vocab_size,
            "train_tokens": self.train.numel(),
            "val_tokens": self.val.numel(),
        }


@functools.lru_cache(maxsize=1)
def builtin_corpus() -> bytes:
    """The pydoc help topics, UTF-8 encoded, values joined in sorted-key order."""
    from pydoc_data.topics import topics

    return "\n".join(topics[key] for key in sorted(topics)).encode("utf-8")


def encode_text(text: str | bytes) -> torch.Tensor:
    """Byte-level tokens (int64) of UTF-8 text."""
    raw = text.encode("utf-8") if isinstance(text, str) else bytes(text)
    if not raw:
        return torch.empty(0, dtype=torch.long)
    return torch.frombuffer(bytearray(raw), dtype=torch.uint8).long()


def decode_tokens(tokens: torch.Tensor) -> str:
    """Inverse of ``encode_text``; a byte sequence cut mid-character shows U+FFFD."""
    return bytes(tokens.to(torch.uint8).tolist()).decode("utf-8", errors="replace")


def split_tokens(
    tokens: torch.Tensor, val_fraction: float = VAL_FRACTION
) -> tuple[torch.Tensor, torch.Tensor]:
    """A fixed split: the first (1 - val_fraction) of the tokens train, the rest validate."""
    n_val = max(1, int(round(tokens.numel() * val_fraction)))
    return tokens[:-n_val], tokens[-n_val:]


def make_token_data(tokens: torch.Tensor, vocab_size: int, source: str) -> TokenData:
    train, val = split_tokens(tokens)
    return TokenData(train=train, val=val, vocab_size=vocab_size, source=source)


@functools.lru_cache(maxsize=1)
def load_builtin() -> TokenData:
    return make_token_data(
        encode_text(builtin_corpus()), BYTE_VOCAB, "builtin: Python's own help text (pydoc_data.topics)"
    )


def load_user_text(raw: bytes, max_bytes: int = MAX_USER_BYTES, name: str = "user text") -> TokenData:
    """Tokenise uploaded text; refuses non-UTF-8, empty, too short or oversized input."""
    if not isinstance(raw, (bytes, bytearray)):
        raise DataError(f"{name} must be bytes (the uploaded file's content), got {type(raw).__name__}")
    if not raw.strip():
        raise DataError(f"{name} is empty")
    if len(raw) > max_bytes:
        raise DataError(f"{name} is {len(raw):,} bytes; the limit is {max_bytes:,} bytes")
    if len(raw) < MIN_USER_BYTES:
        raise DataError(
            f"{name} is {len(raw):,} bytes; at least {MIN_USER_BYTES:,} are needed "
            f"for separate training and validation parts"
        )
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(
            f"{name} is not UTF-8 text: byte 0x{raw[exc.start]:02x} at offset "
            f"{exc.start} cannot be decoded (save the file as UTF-8)"
        ) from None
    return make_token_data(encode_text(bytes(raw)), BYTE_VOCAB, name)


def load_text_file(
    path: str | Path, max_bytes: int = MAX_USER_BYTES, what: str = "training text"
) -> TokenData:
    """Tokenise a UTF-8 text file a person named (CLI ``--data``): only a regular file is read
    (a FIFO, device or folder is refused by name, never opened blocking), at most ``max_bytes``;
    ``what`` names the file in messages ("--data '/x' is a FIFO, not a regular file")."""
    return load_user_text(read_bounded(path, max_bytes, what, error=DataError), max_bytes, str(path))


def random_tokens(vocab: int, n: int, seed: int = 0) -> TokenData:
    """Uniform random ids in [0, vocab): the loss floor is ln(vocab) — nothing can be learnt."""
    if vocab < 2 or n < 2:
        raise DataError(f"random tokens need vocab ≥ 2 and n ≥ 2, got vocab={vocab}, n={n}")
    generator = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, vocab, (n,), generator=generator)
    return make_token_data(tokens, vocab, f"random tokens (vocab {vocab}, seed {seed})")


def check_vocab(data: TokenData, vocab_size: int) -> None:
    """Refuse data whose token ids a model with ``vocab_size`` embeddings cannot look up."""
    if data.max_token_id >= vocab_size:
        raise DataError(
            f"the data ({data.source}) has token id {data.max_token_id} but the "
            f"config's vocab_size={vocab_size}; byte-level text needs vocab_size ≥ "
            f"{BYTE_VOCAB} (set vocab_size={BYTE_VOCAB})"
        )


def check_length(tokens: torch.Tensor, seq_len: int, what: str = "data") -> None:
    if tokens.numel() < seq_len + 1:
        raise DataError(
            f"the {what} has {tokens.numel():,} tokens; a window of seq_len={seq_len} "
            f"needs at least {seq_len + 1}"
        )


def get_batch(
    tokens: torch.Tensor, batch: int, seq_len: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random windows of seq_len + 1 tokens: inputs (B, T) and next-token targets (B, T)."""
    check_length(tokens, seq_len)
    starts = torch.randint(0, tokens.numel() - seq_len, (batch,), generator=generator)
    windows = torch.stack([tokens[s : s + seq_len + 1] for s in starts.tolist()])  # (B, T+1)
    return windows[:, :-1], windows[:, 1:]


def batches(
    data: torch.Tensor | TokenData, batch: int, seq_len: int, generator: torch.Generator
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Endless (inputs, targets) batches; a TokenData draws from its training split."""
    tokens = data.train if isinstance(data, TokenData) else data
    check_length(tokens, seq_len, "training split" if isinstance(data, TokenData) else "data")
    while True:
        yield get_batch(tokens, batch, seq_len, generator)
