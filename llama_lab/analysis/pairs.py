"""The query-key pairs a sparse pattern's mask allows (``config.sparse``;
``model.attention.attention_mask`` draws the same mask), counted without the T×T mask: per query
row in closed form, summed over the rows (closed form past the rows where the window meets the
global tokens; an O(T) sum with BigBird's random blocks, in slices of rows), so that ``analyze``
counts them at 405B and 128k context.

Row i (a query at position i) sees, by inclusion-exclusion over its three sets of keys:
- the dilated window: the keys i − k·d, 0 ≤ k < W, that exist: min(W, ⌊i/d⌋ + 1);
- the global keys j < G: min(G, i + 1) (a query i < G sees every earlier key: all are global);
- less the window keys among the global ones: k from max(0, ⌈(i − G + 1)/d⌉) to min(W − 1, ⌊i/d⌋);
- plus, in each random block [lo, hi) drawn for ⌊i/b⌋ (all before i), its keys past the global
  ones, max(lo, G) ≤ j < hi, less the window keys among them.
"""

from __future__ import annotations

import numpy as np

from ..config.sparse import SparsePattern

ROWS_PER_SLICE = 1 << 16  # rows counted at once under random blocks (bounded memory at any T)


def _window_keys_between(p: SparsePattern, rows: np.ndarray, lo, hi) -> np.ndarray:
    """Per row i: how many of its window keys i − k·d (0 ≤ k < W) lie in [lo, hi)."""
    d = p.dilation
    first = np.maximum(0, -np.floor_divide(hi - 1 - rows, d))  # i − k·d < hi: k ≥ ⌈(i − hi + 1)/d⌉
    last = np.minimum(p.window - 1, np.floor_divide(rows - lo, d))  # i − k·d ≥ lo
    return np.maximum(0, last - first + 1)


def row_keys(p: SparsePattern, rows: np.ndarray) -> np.ndarray:
    """The keys each query at a position of ``rows`` (int64 array) sees under ``p``."""
    rows = np.asarray(rows, dtype=np.int64)
    G = p.global_tokens
    window = np.minimum(p.window, rows // p.dilation + 1)
    both = _window_keys_between(p, rows, 0, G)  # window keys that are global ones too
    keys = window + np.minimum(G, rows + 1) - both
    if p.random_blocks:
        keys += random_extra(p, rows)
    return keys


def random_extra(p: SparsePattern, rows: np.ndarray) -> np.ndarray:
    """Per row: the keys its random blocks add beyond the window and the global keys."""
    b, r = p.block_size, p.random_blocks
    blocks, row_of = np.unique(rows // b, return_inverse=True)
    drawn = np.full((len(blocks), r), -1, dtype=np.int64)  # the drawn key blocks; -1: none
    for n, block in enumerate(blocks.tolist()):
        chosen = p.random_key_blocks(block)
        drawn[n, : len(chosen)] = chosen
    drawn = drawn[row_of]  # (rows, r)
    lo = np.maximum(drawn * b, p.global_tokens)
    hi = drawn * b + b
    rows2 = rows[:, None]
    added = np.maximum(0, hi - lo) - _window_keys_between(p, rows2, lo, hi)
    return np.where(drawn >= 0, added, 0).sum(axis=1)


def causal_pairs(p: SparsePattern, T: int) -> int:
    """Σ row_keys over the T queries of one sequence from position 0: the mask's pairs. Without
    random blocks, from row G + (W − 1)·d on the window is whole and past the global keys (W + G
    keys each, in closed form); with them every row's draw differs (an O(T) sum)."""
    head = T if p.random_blocks else min(T, p.global_tokens + p.span - 1)
    summed = sum(  # a slice of rows at a time: bounded memory at any T
        int(row_keys(p, np.arange(start, min(head, start + ROWS_PER_SLICE))).sum())
        for start in range(0, head, ROWS_PER_SLICE)
    )
    return summed + (T - head) * (p.window + p.global_tokens)
