"""A windowed block's sparse attention pattern (Longformer's dilated window and global tokens,
BigBird's random blocks): the numbers that define it and BigBird's seeded draw, read by the one
mask (``model.attention.attention_mask``), the cache that keeps what it needs
(``model.kv_cache``) and the exact count of its query-key pairs (``analysis.pairs``).

Query i sees key j ≤ i (causal) when any of these holds (``fields.ModelFields``' sparse section):

- window (dilated, Longformer): 0 ≤ i − j < W·d and (i − j) % d == 0 — the W keys i, i − d, …,
  i − (W − 1)·d; d = 1 is transformers' sliding window (i − W < j ≤ i);
- global (Longformer's global attention, causal): j < G or i < G — the first G positions are
  seen by every later query and see every earlier key;
- random (BigBird): j lies in one of the r blocks of b positions drawn for i's block ⌊i / b⌋
  among the blocks beyond the others' reach (all of them when there are r or fewer): wholly past
  the global tokens and wholly before the window of the block's first query, as BigBird draws its
  random blocks outside the window and global ones. Each drawn block so adds b keys to every
  query of the block, which keeps the count of pairs a closed form (``analysis.pairs``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class SparsePattern:
    window: int  # W: keys of the (dilated) window, the query's own included
    dilation: int = 1  # d: the window's keys d positions apart
    global_tokens: int = 0  # G: the first G positions, seen by and seeing every later / earlier one
    random_blocks: int = 0  # r: random earlier key blocks per query block (BigBird)
    block_size: int = 64  # b: the blocks' size, for the random blocks
    seed: int = 0  # the random draw's seed (reproducible)

    @property
    def span(self) -> int:
        """Positions from a query's farthest window key to itself: (W − 1)·d + 1."""
        return (self.window - 1) * self.dilation + 1

    @property
    def cache_tokens(self) -> int | None:
        """Tokens a decoding cache must keep for every later query: the first G positions and
        the last ``span`` (G + span at most); None when random blocks may reach any earlier
        block (everything is kept)."""
        return None if self.random_blocks else self.global_tokens + self.span

    @property
    def first_eligible(self) -> int:
        """The first key block a random draw may take: ⌈G/b⌉, wholly at or past the global tokens."""
        return -(-self.global_tokens // self.block_size)

    def eligible_end(self, query_block):
        """One past the last key block query block(s) ``query_block`` (an int or an integer
        array) may draw: ⌊(q·b − (W − 1)·d)/b⌋, wholly before the window of its first query."""
        return (query_block * self.block_size - (self.window - 1) * self.dilation) // self.block_size

    def eligible_blocks(self, query_block: int) -> range:
        """The key blocks query block ``query_block`` may draw (``first_eligible`` …
        ``eligible_end``)."""
        return range(self.first_eligible, max(self.first_eligible, self.eligible_end(query_block)))

    def random_key_blocks(self, query_block: int) -> list[int]:
        """The key blocks query block ``query_block`` sees at random: r distinct blocks drawn
        uniformly from its ``eligible_blocks`` (all of them when there are r or fewer), from a
        generator seeded by (seed, query_block), so any block's draw is reproducible alone."""
        eligible = self.eligible_blocks(query_block)
        if len(eligible) <= self.random_blocks:
            return list(eligible)
        return sorted(random.Random(f"{self.seed}/{query_block}").sample(eligible, self.random_blocks))
