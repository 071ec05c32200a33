"""What the planning surfaces model: a decoder-only text model (parallel layouts and serving
splits, ``predict train`` / ``decode``, fine-tuning, ``shard``, the report's Many GPUs section).
``check_planned`` is their one check: an encoder-decoder or an encoder
(``config.require_decoder_only``), a multimodal tower (``vision.text_decoder_only``) or DeepSeek
Sparse Attention's indexer (``common.refuse_indexer``) is refused by name in one line, rather
than answered with a number that leaves it out."""

from __future__ import annotations

from ..config import ModelConfig, require_decoder_only
from .common import refuse_indexer
from .vision import text_decoder_only


def check_planned(cfg: ModelConfig, surface: str) -> None:
    """Refuse ``cfg`` on ``surface`` (its name, as the message's subject) where that surface
    does not model it."""
    require_decoder_only(cfg, surface)
    text_decoder_only(cfg, surface)
    refuse_indexer(cfg, surface)


__all__ = ["check_planned"]
