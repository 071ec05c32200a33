"""The query-key pairs a sparse pattern's mask allows (``config.sparse``;
``model.attention.attention_mask`` draws the same mask), counted without the T×T mask: per query
row in closed form, summed over the rows (in closed form past the rows where the window meets the
global tokens; BigBird's random blocks summed over the T/b query blocks), so that ``analyze``
counts them at 405B and 128k context in milliseconds.

Row i (a query at position i) sees, by inclusion-exclusion over its sets of keys:
- the dilated window: the keys i − k·d, 0 ≤ k < W, that exist: min(W, ⌊i/d⌋ + 1);
- the global keys j < G: min(G, i + 1) (a query i < G sees every earlier key: all are global);
- less the window keys among the global ones: k from max(0, ⌈(i − G + 1)/d⌉) to min(W − 1, ⌊i/d⌋);
- plus b keys per random block drawn for ⌊i/b⌋: min(r, n_q) blocks of the n_q eligible ones,
  which lie beyond the window and the global keys of every query of the block.
"""

from __future__ import annotations

import numpy as np

from ..config.sparse import SparsePattern

ROWS_PER_SLICE = 1 << 20  # rows counted at once below the closed-form ones


def row_keys(p: SparsePattern, rows) -> np.ndarray:
    """The keys each query at a position of ``rows`` sees under ``p``."""
    rows = np.asarray(rows, dtype=np.int64)
    G, d = p.global_tokens, p.dilation
    window = np.minimum(p.window, rows // d + 1)
    # window keys i − k·d that are global ones too: ⌈(i − G + 1)/d⌉ ≤ k ≤ min(W − 1, ⌊i/d⌋)
    first = np.maximum(0, -np.floor_divide(G - 1 - rows, d))
    both = np.maximum(0, np.minimum(p.window - 1, rows // d) - first + 1)
    return window + np.minimum(G, rows + 1) - both + p.block_size * drawn_blocks(p, rows // p.block_size)


def drawn_blocks(p: SparsePattern, query_blocks) -> np.ndarray:
    """How many random blocks each query block draws: min(r, its eligible blocks), those from
    ⌈G/b⌉ to ⌊(q·b − (W − 1)·d)/b⌋ (``SparsePattern.eligible_blocks``)."""
    end = p.eligible_end(np.asarray(query_blocks, dtype=np.int64))
    return np.minimum(p.random_blocks, np.maximum(0, end - p.first_eligible))


def causal_pairs(p: SparsePattern, T: int) -> int:
    """Σ row_keys over the T queries of one sequence from position 0: the mask's pairs. From
    row G + (W − 1)·d on, the window is whole and past the global keys (W + G keys each, in
    closed form); the random blocks add b keys per drawn block to each row of a query block
    (a sum over the T/b blocks)."""
    head = min(T, p.global_tokens + p.span - 1)
    pairs = sum(  # a slice of rows at a time: bounded memory however wide the window
        int(row_keys(p, np.arange(start, min(head, start + ROWS_PER_SLICE))).sum())
        for start in range(0, head, ROWS_PER_SLICE)
    )
    pairs += (T - head) * (p.window + p.global_tokens)
    if p.random_blocks:  # the head rows' random keys are in row_keys already
        b = p.block_size
        blocks = np.arange(head // b, -(-T // b), dtype=np.int64)
        rows = np.minimum(T, (blocks + 1) * b) - np.maximum(head, blocks * b)  # past the head
        pairs += int((rows * b * drawn_blocks(p, blocks)).sum())
    return pairs
