"""Launcher of the Triton verifier: ``verify`` mirrors ``pp3.accept.reference.verify`` (SPEC.md §11) on
torch tensors. Imports torch and triton; never imported by ``pp3`` or ``pp3.accept`` themselves.

Every argument is checked here before the launch, without reading device memory, so a verification can be
captured in a CUDA graph with the draft. One program per request row walks the vocabulary in tiles.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import torch
import triton

from pp3.accept import _kernel
from pp3.accept import reference as ref
from pp3.kernels import _select
from pp3.kernels.select import EXACT, _temperature_rows, _u64_rows, exp_constants
from pp3.reference import _args
from pp3.reference._constants import DOMAIN_ACCEPT, DOMAIN_RESIDUAL, MAX_VOCAB, K

DEFAULT_TILE = 2048

_KIND = {
    torch.float32: _select.KIND_F32.value,
    torch.float16: _select.KIND_F16.value,
    torch.bfloat16: _select.KIND_BF16.value,
}
_RAW = {torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16}


@dataclasses.dataclass(frozen=True)
class Verdict:
    """Device outputs, §11.8 (same fields and dtypes as ``pp3.accept.reference.Verdict``)."""

    status: torch.Tensor  # [B] int8
    accepted: torch.Tensor  # [B] int32
    tokens: torch.Tensor  # [B, D+1] int32


def _check(name: str, t: Any, dtype: torch.dtype, shape: tuple[int, ...], device: torch.device) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if t.dtype != dtype:
        raise TypeError(f"{name}: expected {dtype}, got {t.dtype}")
    if tuple(t.shape) != shape:
        raise ValueError(f"{name}: expected shape {shape}, got {tuple(t.shape)}")
    if t.device != device:
        raise ValueError(f"{name}: on {t.device}, but target_logits are on {device}")
    return t.contiguous()


def verify(
    target_logits: torch.Tensor,
    target_temperature: Any,
    draft_tokens: torch.Tensor,
    draft_status: torch.Tensor,
    draft_ids: torch.Tensor,
    draft_tickets: torch.Tensor,
    seed: Any,
    round: Any,
    position: Any,
    *,
    tile: int = DEFAULT_TILE,
) -> Verdict:
    """The Triton verifier: same arguments and results as ``pp3.accept.reference.verify``, on torch tensors.

    ``target_logits`` [B, D+1, V] fp32/fp16/bf16; drafts as ``pp3.drafter.Draft`` holds them (int32 tokens, int8
    statuses, int32 slots); ``seed``/``round``/``position`` int64 tensors of uint64 bits (or ints / sequences).
    """
    x = target_logits
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"target_logits: expected a torch.Tensor, got {type(x).__name__}")
    if x.dtype not in _KIND:
        raise TypeError(f"target_logits: expected float32, float16 or bfloat16, got {x.dtype}")
    if x.dim() != 3 or x.shape[0] < 1 or x.shape[1] < 2 or x.shape[2] < 1:
        raise ValueError(f"target_logits: expected shape [B, D+1, V] with B, D, V >= 1, got {tuple(x.shape)}")
    if x.shape[2] > MAX_VOCAB:
        raise ValueError(f"target_logits: V = {x.shape[2]} exceeds the maximum vocabulary 2^31 - 1")
    if isinstance(tile, bool) or not isinstance(tile, int) or tile < 2 or tile & (tile - 1):
        raise ValueError(f"tile: expected a power of two >= 2, got {tile!r}")
    x = x if x.stride(2) == 1 else x.contiguous()
    b, d1, v = x.shape
    d = d1 - 1
    dev = x.device
    tok = _check("draft_tokens", draft_tokens, torch.int32, (b, d), dev)
    dst = _check("draft_status", draft_status, torch.int8, (b, d), dev)
    ids = _check("draft_ids", draft_ids, torch.int32, (b, d, K), dev)
    tix = _check("draft_tickets", draft_tickets, torch.int32, (b, d, K), dev)
    temp = _temperature_rows(target_temperature, b, dev)
    seed_t = _u64_rows("seed", seed, b, dev)
    round_t = _u64_rows("round", round, b, dev)
    pos_t = _u64_rows("position", position, b, dev)
    tile = min(tile, triton.next_power_of_2(v))
    nt = max(2, triton.next_power_of_2(triton.cdiv(v, tile)))
    status = torch.empty(b, dtype=torch.int8, device=dev)
    accepted = torch.empty(b, dtype=torch.int32, device=dev)
    tokens = torch.empty((b, d1), dtype=torch.int32, device=dev)
    _kernel._verify_kernel[(b,)](
        x.view(_RAW[x.dtype]),
        x.stride(0),
        x.stride(1),
        v,
        temp,
        tok,
        dst,
        ids,
        tix,
        seed_t,
        round_t,
        pos_t,
        exp_constants(dev),
        DOMAIN_ACCEPT,
        DOMAIN_RESIDUAL,
        status,
        accepted,
        tokens,
        D=d,
        DP=max(2, triton.next_power_of_2(d1)),
        K=K,
        KIND=_KIND[x.dtype],
        TILE=tile,
        TILE_LOG=tile.bit_length() - 1,
        NT=nt,
        NT_LOG=nt.bit_length() - 1,
        **EXACT,
    )
    return Verdict(status=status, accepted=accepted, tokens=tokens)


def uniform_below(seed: torch.Tensor, round: torch.Tensor, position: torch.Tensor, domain: int,
                  s: torch.Tensor) -> torch.Tensor:
    """§11.5 on the device (int64 tensors of uint64 bits, 1 <= s <= 2^40): the kernel's own ``_uniform_below``."""
    n = seed.numel()
    out = torch.empty(n, dtype=torch.int64, device=seed.device)
    dom = domain - (1 << 64) if domain >= 1 << 63 else domain
    _kernel._uniform_below_kernel[(n,)](seed, round, position, s, out, dom, **EXACT)
    return out


def _device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def verify_numpy(**kw: Any) -> ref.Verdict:
    """``verify`` with the reference's NumPy calling convention and result (for audits and parity runs): the
    arrays are validated as the reference validates them, moved to the GPU (or the interpreter's CPU), verified
    by the kernel and brought back."""
    dev = _device()
    x = ref._as_target_logits(kw["target_logits"])
    b, d1, _ = x.shape
    d = d1 - 1
    tok = ref._as_int_array("draft_tokens", kw["draft_tokens"], (b, d), -(1 << 31), (1 << 31) - 1)
    dst = ref._as_int_array("draft_status", kw["draft_status"], (b, d), -128, 127)
    ids = ref._as_int_array("draft_ids", kw["draft_ids"], (b, d, K), -(1 << 31), (1 << 31) - 1)
    tix = ref._as_int_array("draft_tickets", kw["draft_tickets"], (b, d, K), -(1 << 31), (1 << 31) - 1)
    temp = _args.as_temperature_rows("target_temperature", kw["target_temperature"], b)
    u64 = {k: _args.as_uint64_rows(k, kw[k], b).view(np.int64) for k in ("seed", "round", "position")}

    def t(a: np.ndarray[Any, Any], dtype: torch.dtype) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(a)).to(device=dev, dtype=dtype)

    res = verify(
        t(x, torch.float32),
        t(temp, torch.float32),
        t(tok, torch.int32),
        t(dst, torch.int8),
        t(ids, torch.int32),
        t(tix, torch.int32),
        t(u64["seed"], torch.int64),
        t(u64["round"], torch.int64),
        t(u64["position"], torch.int64),
    )
    return ref.Verdict(
        status=res.status.cpu().numpy(),
        accepted=res.accepted.cpu().numpy(),
        tokens=res.tokens.cpu().numpy(),
    )


def ptx(depth: int = 5, tile: int = 1024, n_tiles: int = 256, kind: int = 0) -> str:
    """PTX of the verify kernel for sm_90, compiled on any machine (the Triton wheel ships ptxas), for
    ``pp3.kernels.ptx_audit.find_forbidden``: no FMA, no approximate op, no flush to zero (checked at depth 5,
    TILE 1024, 256 tiles and at depth 2, TILE 64, 4 tiles: none found). Needs TRITON_INTERPRET unset."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    sig = {
        "x_ptr": "*i32" if kind == 0 else "*i16", "stride_b": "i64", "stride_j": "i64", "v": "i32",
        "temp_ptr": "*fp32", "tok_ptr": "*i32", "dst_ptr": "*i8", "ids_ptr": "*i32", "tix_ptr": "*i32",
        "seed_ptr": "*i64", "round_ptr": "*i64", "pos_ptr": "*i64", "c_ptr": "*fp64", "dom_acc": "i64",
        "dom_res": "i64", "status_ptr": "*i8", "acc_ptr": "*i32", "out_ptr": "*i32",
    }
    consts = {
        "D": depth, "DP": max(2, triton.next_power_of_2(depth + 1)), "K": K, "KIND": kind, "TILE": tile,
        "TILE_LOG": tile.bit_length() - 1, "NT": n_tiles, "NT_LOG": n_tiles.bit_length() - 1,
    }
    src = ASTSource(_kernel._verify_kernel, sig | dict.fromkeys(consts, "constexpr"), constexprs=consts)
    compiled = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=dict(EXACT))
    text: str = compiled.asm["ptx"]
    return text
