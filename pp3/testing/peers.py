"""A verifier no one here wrote, with the reference's calling convention: FlashInfer's
``chain_speculative_sampling``, for the end-to-end audit (``pp3 audit-e2e --verifier flashinfer``), and as an
implementation for the seam (``flashinfer``, ``torch_chain_cpu``: ``pp3 verify --impl verifier=...``, judged in law
only, ``pp3.audit.law``).

It is fed exactly what pp3 knows: the drafter's q as dense fp32 probabilities (``pp3.adapters.dense_probs``: the
tickets times 2^-24, exact) and the target law of SPEC.md §11.4 (``P / 2^40``, the point mass on the argmax for T0
rows), rounded once to fp32 (a relative change below 2^-24, far below what the audit's 10^6 sequences per case can
see). FlashInfer draws its own random numbers (a torch generator seeded once), so the audit tests the law of its
outputs, not their bits. The planted bug ``q="greedy"`` feeds it the greedy path's q (the point mass on each drafted
token) for drafts that were sampled: its outputs then follow a wrong law, which the audit must reject.
``torch_chain`` is a plain-torch twin of the chain (its layout and its rule), for the CPU tests and the examples.

torch is imported here; FlashInfer only by ``flashinfer_verifier``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import torch

from pp3.harness.protocol import Capabilities, Implementation
from pp3.reference import Verdict, accept, order
from pp3.reference._constants import P_TICKETS

Chain = Callable[..., Any]  # chain_speculative_sampling(draft_probs, draft_token_ids, target_probs, **options)
QSource = Literal["exact", "greedy"]


def torch_chain(draft_probs: torch.Tensor, draft_token_ids: torch.Tensor, target_probs: torch.Tensor, *,
                deterministic: bool = True, generator: torch.Generator | None = None) -> torch.Tensor:
    """A plain-torch twin of ``flashinfer.sampling.chain_speculative_sampling`` (its layout and the rule of Leviathan
    et al., in fp64): draft j is accepted with probability min(1, p/q) while every earlier one was; the first
    rejection draws from max(p - q, 0) normalised; with every draft accepted, the bonus is drawn from the last target
    row. [B, D+1] int32, -1 after the last token. ``deterministic`` is accepted for the signature (no effect)."""
    q, p, tok = draft_probs.double(), target_probs.double(), draft_token_ids.long()
    b, d, _ = q.shape
    out = torch.full((b, d + 1), -1, dtype=torch.int32, device=q.device)
    alive = torch.ones(b, dtype=torch.bool, device=q.device)
    for j in range(d):
        x = tok[:, j : j + 1]
        u = torch.rand(b, 1, dtype=torch.float64, device=q.device, generator=generator)
        acc = alive & (u * q[:, j].gather(1, x) < p[:, j].gather(1, x))[:, 0]
        out[acc, j] = x[acc, 0].to(torch.int32)
        rej = alive & ~acc
        if rej.any():
            resid = (p[rej, j] - q[rej, j]).clamp_min(0)
            out[rej, j] = torch.multinomial(resid, 1, generator=generator)[:, 0].to(torch.int32)
        alive = acc
    if alive.any():
        out[alive, d] = torch.multinomial(p[alive, d], 1, generator=generator)[:, 0].to(torch.int32)
    return out


def target_probs(target_logits: Any, target_temperature: Any) -> npt.NDArray[np.float64]:
    """[B, D+1, V] the exact target law of each target row (SPEC.md §11.4): ``P / 2^40`` for sampled rows, the point
    mass on the argmax (P1) for T0 rows. Every row must be OK (§3); the audit's are."""
    x = np.asarray(target_logits, dtype=np.float32)
    b, d1, v = x.shape
    rows = x.reshape(-1, v)
    temp = np.repeat(np.broadcast_to(np.asarray(target_temperature, dtype=np.float32), (b,)), d1)
    p = np.zeros(rows.shape, dtype=np.float64)
    greedy = temp == 0
    if greedy.any():
        p[np.flatnonzero(greedy), order.first_k(rows[greedy], 1)[:, 0]] = 1.0
    if not greedy.all():
        _, tix = accept.target_tickets(rows[~greedy], temp[~greedy])
        p[~greedy] = tix / float(P_TICKETS)
    return p.reshape(b, d1, v)


def chain_verifier(
    chain: Chain, *, q: QSource = "exact", device: str = "cuda", seed: int = 0
) -> Callable[..., Verdict]:
    """``chain`` (FlashInfer's ``chain_speculative_sampling``, or a twin with its signature) as a verifier with
    ``pp3.reference.verify``'s keyword arguments and result. ``q``: ``"exact"`` (pp3's tickets) or ``"greedy"``
    (the planted bug). Every draft must be OK: the chain has no per-row status."""
    if q not in ("exact", "greedy"):
        raise ValueError(f"q: expected 'exact' or 'greedy', got {q!r}")
    gen = torch.Generator(device=device).manual_seed(seed)

    def verify(**kw: Any) -> Verdict:
        from pp3.adapters import dense_probs

        tok = np.asarray(kw["draft_tokens"], dtype=np.int32)
        if np.asarray(kw["draft_status"]).any():
            raise ValueError("draft_status: the chain verifier takes OK drafts only (it has no per-row status)")
        p = target_probs(kw["target_logits"], kw["target_temperature"])
        b, d, v = tok.shape[0], tok.shape[1], p.shape[-1]
        tok_t = torch.from_numpy(tok).to(device)
        if q == "exact":
            ids = torch.from_numpy(np.asarray(kw["draft_ids"], dtype=np.int32)).to(device)
            tix = torch.from_numpy(np.asarray(kw["draft_tickets"], dtype=np.int32)).to(device)
            qd = dense_probs(ids, tix, v)
        else:
            qd = torch.zeros((b, d, v), dtype=torch.float32, device=device)
            qd.scatter_(2, tok_t.long()[..., None], 1.0)
        out = chain(qd, tok_t, torch.from_numpy(p.astype(np.float32)).to(device), deterministic=True, generator=gen)
        tokens = (out[0] if isinstance(out, tuple) else out).to(torch.int32).cpu().numpy()  # -1 after the last token
        emitted = (tokens != -1).sum(axis=1)
        return Verdict(status=np.zeros(b, dtype=np.int8), accepted=(emitted - 1).astype(np.int32), tokens=tokens)

    return verify


def flashinfer_verifier(*, q: QSource = "exact", device: str = "cuda", seed: int = 0) -> Callable[..., Verdict]:
    """FlashInfer 0.6.18's ``chain_speculative_sampling`` through ``chain_verifier`` (needs FlashInfer and a GPU)."""
    from flashinfer.sampling import chain_speculative_sampling  # type: ignore[import-not-found]

    return chain_verifier(chain_speculative_sampling, q=q, device=device, seed=seed)


def chain_implementation(chain: Chain, name: str, *, q: QSource = "exact", device: str = "cuda",
                         seed: int = 0) -> Implementation:
    """``chain_verifier`` as an implementation the seam can be given (``pp3.harness``): the verifier's protocol on
    NumPy arrays, declared not bit-exact (it draws its own random numbers), so it is judged in law only (the
    end-to-end audit, ``pp3.audit.law``)."""
    verify = chain_verifier(chain, q=q, device=device, seed=seed)

    def call(target_logits: Any, target_temperature: Any, draft_tokens: Any, draft_status: Any, draft_ids: Any,
             draft_tickets: Any, seed: Any, round: Any, position: Any) -> Verdict:
        return verify(target_logits=target_logits, target_temperature=target_temperature, draft_tokens=draft_tokens,
                      draft_status=draft_status, draft_ids=draft_ids, draft_tickets=draft_tickets, seed=seed,
                      round=round, position=position)

    return Implementation("verifier", name, call, Capabilities(api="numpy", formats=("fp32", "fp16"), exact=False))


def flashinfer() -> Implementation:
    """FlashInfer's ``chain_speculative_sampling`` fed pp3's exact q, for the seam: ``pp3 verify --impl
    verifier=pp3.testing.peers:flashinfer`` (a CUDA GPU and FlashInfer; ``make law-flashinfer-gpu``)."""
    from flashinfer.sampling import chain_speculative_sampling

    return chain_implementation(chain_speculative_sampling, "flashinfer chain_speculative_sampling")


def torch_chain_cpu() -> Implementation:
    """``torch_chain`` (FlashInfer's layout and rule in plain torch, on the CPU) for the seam: what ``flashinfer``
    does on a GPU, where there is none (``pp3 verify --impl verifier=pp3.testing.peers:torch_chain_cpu``)."""
    return chain_implementation(torch_chain, "torch_chain (FlashInfer's rule on the CPU)", device="cpu")
