"""A small Markov drafter for tests, demos and benchmarks.

The next-token logits depend on the previous token only: ``logits = embedding[prev] @ projection``, a low-rank
embedding [V, r] times a vocabulary projection [r, V]. The projection can be split by vocabulary into contiguous
shards (one per tensor-parallel rank); the drafter then returns one logits shard per rank, as a TP drafter would
(here all shards live in one process).

``MarkovDrafter.random`` draws *dyadic* parameters — embedding entries k/4 and projection entries k/8 with
|k| <= 8, times one power-of-two scale — so every logit, a sum of r <= 2^10 products of at most 17 significant
bits in all, is exact in fp32 whatever the summation order, on every device and through TF32 (inputs of <= 4
significant bits). The logits on a GPU are therefore bit-identical to ``table()``, which is what makes the
end-to-end audit's exact theory exact.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import torch

EMBED_DENOM = 4  # embedding entries are k / 4
PROJ_DENOM = 8  # projection entries are k / 8
MAX_K = 8  # |k| <= 8


def split_sizes(vocab: int, shards: int) -> list[int]:
    """Contiguous shard sizes that tile 0 .. V-1: as equal as possible, earlier shards one larger."""
    if shards < 1 or shards > vocab:
        raise ValueError(f"shards: need 1 <= shards <= V = {vocab}, got {shards}")
    base, extra = divmod(vocab, shards)
    return [base + (1 if i < extra else 0) for i in range(shards)]


class MarkovDrafter:
    """Next-token logits from the previous token: ``embedding[prev] @ projection``, sharded by vocabulary."""

    def __init__(self, embedding: torch.Tensor, projection: torch.Tensor, shard_sizes: Sequence[int] | None = None):
        if embedding.dim() != 2 or projection.dim() != 2 or embedding.shape[1] != projection.shape[0]:
            raise ValueError(f"expected embedding [V, r] and projection [r, V], got {tuple(embedding.shape)} and "
                             f"{tuple(projection.shape)}")
        v = embedding.shape[0]
        if projection.shape[1] != v:
            raise ValueError(f"projection: expected {v} columns (V), got {projection.shape[1]}")
        sizes = list(shard_sizes) if shard_sizes is not None else [v]
        if sum(sizes) != v or min(sizes) < 1:
            raise ValueError(f"shard_sizes: must be positive and sum to V = {v}, got {sizes}")
        self.embedding = embedding
        self.shards = list(torch.split(projection, sizes, dim=1))  # one [r, V_r] projection per rank
        self.shard_sizes = sizes

    @property
    def vocab_size(self) -> int:
        return int(self.embedding.shape[0])

    def __call__(self, tokens: torch.Tensor) -> list[torch.Tensor]:
        """``tokens`` [B, t] -> one [B, V_r] logits shard per rank (the previous token is ``tokens[:, -1]``)."""
        h = self.embedding[tokens[:, -1]]  # [B, r]
        return [h @ w for w in self.shards]

    def table(self) -> npt.NDArray[np.float32]:
        """[V, V] fp32: row x holds the logits that follow token x, i.e. the exact product rounded once to the
        parameters' dtype (what ``__call__`` returns for ``random`` parameters, whose fp32 sums are exact)."""
        e = self.embedding.detach().cpu().double()
        w = torch.cat(self.shards, dim=1).detach().cpu().double()
        return np.asarray((e @ w).to(self.embedding.dtype).float().numpy(), dtype=np.float32)

    @classmethod
    def random(
        cls,
        vocab: int,
        rank: int,
        *,
        seed: int = 0,
        shards: int = 1,
        gain: int = 0,
        device: str | torch.device = "cpu",
        dtype: torch.dtype = torch.float32,
    ) -> MarkovDrafter:
        """Dyadic random parameters (see the module docstring): exact logits whatever the device or shard count.

        ``gain`` scales the logits by 2^gain (exactly): 0 gives a standard deviation of about 1.5, 2 about 6.
        """
        if rank < 1 or rank > 1024:
            raise ValueError(f"rank: expected 1 .. 1024 (exactness bound), got {rank}")
        if not -8 <= gain <= 8:
            raise ValueError(f"gain: expected -8 .. 8, got {gain}")
        rng = np.random.default_rng(seed)
        e = rng.integers(-MAX_K, MAX_K + 1, size=(vocab, rank)) / EMBED_DENOM
        w = rng.integers(-MAX_K, MAX_K + 1, size=(rank, vocab)) / PROJ_DENOM
        # a power-of-two scale (exact) near 2/sqrt(rank): logits then have a standard deviation of about 1.5
        scale = 2.0 ** (1 + gain - np.ceil(np.log2(np.sqrt(rank))))
        emb = torch.from_numpy(e * scale).to(device=device, dtype=dtype)
        proj = torch.from_numpy(w).to(device=device, dtype=dtype)
        return cls(emb, proj, split_sizes(vocab, shards))
