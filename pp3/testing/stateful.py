"""Drafters that carry their own state between positions (``pp3.drafter.StatefulDraftModel``), for tests and demos.

``RecurrentDrafter`` keeps a hidden vector h [B, H] per row, updated by each token it consumes,
``h <- h / 2 + embedding[token]``, and gives the logits ``h @ projection`` (sharded by vocabulary like the Markov
drafter): its logits depend on every earlier token, so a loop that does not thread its state drafts other tokens.
``RecurrentDrafter.random`` draws dyadic parameters (embedding entries k/4 and projection entries k/8, |k| <= 8,
the embedding times a power-of-two scale), so h after n tokens needs n + 3 significant bits and a logit at most
n + 6 + ceil(log2 H): both are exact in fp32, whatever the summation order and device, while
n <= 18 - ceil(log2 H), n being the tokens consumed (the context's length plus the depth, less one); past that they
are rounded, deterministically on a given device.

``StatefulMarkov`` is the Markov drafter through the same protocol; its state is the tokens consumed so far, [B, n]
int64, which its logits do not need (they follow the token fed alone).
"""

from __future__ import annotations

import numpy as np
import torch

from pp3.testing.markov import EMBED_DENOM, MAX_K, PROJ_DENOM, MarkovDrafter, split_sizes


class RecurrentDrafter:
    """A recurrent drafter: state h [B, H], ``h <- h / 2 + embedding[token]`` per token, logits ``h @ projection``."""

    def __init__(self, embedding: torch.Tensor, projection: torch.Tensor, shard_sizes: list[int] | None = None):
        if embedding.dim() != 2 or projection.dim() != 2 or embedding.shape[1] != projection.shape[0]:
            raise ValueError(
                f"expected embedding [V, H] and projection [H, V], got {tuple(embedding.shape)} and "
                f"{tuple(projection.shape)}"
            )
        v = embedding.shape[0]
        if projection.shape[1] != v:
            raise ValueError(f"projection: expected {v} columns (V), got {projection.shape[1]}")
        sizes = shard_sizes if shard_sizes is not None else [v]
        if sum(sizes) != v or min(sizes) < 1:
            raise ValueError(f"shard_sizes: must be positive and sum to V = {v}, got {sizes}")
        self.embedding = embedding
        self.projection = projection
        self.shards = list(torch.split(projection, sizes, dim=1))  # one [H, V_r] projection per rank
        self.shard_sizes = sizes

    @property
    def vocab_size(self) -> int:
        return int(self.embedding.shape[0])

    def start(self, context: torch.Tensor) -> torch.Tensor:
        """h [B, H] after ``context[:, :-1]`` (zeros before any token); the last column is the first step's input."""
        h = torch.zeros(
            (context.shape[0], self.embedding.shape[1]), dtype=self.embedding.dtype, device=self.embedding.device
        )
        for j in range(context.shape[1] - 1):
            h = self._update(h, context[:, j])
        return h

    def step(self, tokens: torch.Tensor, state: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor]:
        """``tokens`` [B] and h [B, H] -> (one [B, V_r] logits shard per rank, h with ``tokens`` consumed)."""
        h = self._update(state, tokens)
        return [h @ w for w in self.shards], h

    def _update(self, h: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        return h * 0.5 + self.embedding[tokens]  # two rounded operations, never fused (exact for dyadic values)

    @classmethod
    def random(
        cls,
        vocab: int,
        hidden: int,
        *,
        seed: int = 0,
        shards: int = 1,
        gain: int = 0,
        device: str | torch.device = "cpu",
        dtype: torch.dtype = torch.float32,
    ) -> RecurrentDrafter:
        """Dyadic random parameters (see the module docstring); ``gain`` scales the logits by 2^gain (exactly)."""
        if hidden < 1 or hidden > 1024:
            raise ValueError(f"hidden: expected 1 .. 1024, got {hidden}")
        if not -8 <= gain <= 8:
            raise ValueError(f"gain: expected -8 .. 8, got {gain}")
        rng = np.random.default_rng(seed)
        e = rng.integers(-MAX_K, MAX_K + 1, size=(vocab, hidden)) / EMBED_DENOM
        w = rng.integers(-MAX_K, MAX_K + 1, size=(hidden, vocab)) / PROJ_DENOM
        scale = 2.0 ** (1 + gain - np.ceil(np.log2(np.sqrt(hidden))))  # a power of two (exact), as the Markov drafter's
        emb = torch.from_numpy(e * scale).to(device=device, dtype=dtype)
        proj = torch.from_numpy(w).to(device=device, dtype=dtype)
        return cls(emb, proj, split_sizes(vocab, shards))


class StatefulMarkov:
    """The Markov drafter as a stateful one: the state is the tokens consumed so far, [B, n] int64."""

    def __init__(self, markov: MarkovDrafter) -> None:
        self.markov = markov

    @property
    def vocab_size(self) -> int:
        return self.markov.vocab_size

    def start(self, context: torch.Tensor) -> torch.Tensor:
        return context[:, :-1]

    def step(self, tokens: torch.Tensor, state: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor]:
        return self.markov(tokens[:, None]), torch.cat([state, tokens[:, None]], dim=1)
