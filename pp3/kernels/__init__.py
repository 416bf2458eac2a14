"""Triton kernels of the pp3 selector; bit-identical to ``pp3.reference`` (SPEC.md). Imports torch and triton."""

from pp3.kernels.select import Candidates, Proposal, expf, finalize, propose, propose_sharded, tile_candidates

__all__ = ["Candidates", "Proposal", "expf", "finalize", "propose", "propose_sharded", "tile_candidates"]
