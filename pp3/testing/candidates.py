"""Candidate buffers a caller may hand to ``pp3.kernels.finalize``, and which of their rows break launch 1's contract.

``broken_rows`` is the contract of ``_check_candidates_kernel`` written again in NumPy, rule by rule, from launch 1's
output format (``_select._tile_candidates_kernel``: per tile the K largest §4.1 keys, descending, 0-padding last; the
§3 flags bit 0 NaN, bit 1 +inf, bit 2 finite): a second reading for the tests to compare the kernel's verdict with.
``corpus`` is the fixed set of malformed buffers that the tests and ``tools.sanitize_cases`` (compute-sanitizer on the
GPU) both run.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

K = 32
OKEY_NEG_INF = 0x007FFFFF  # §4.1 okey(-inf)
OKEY_POS_INF = 0xFF800000  # §4.1 okey(+inf)
NAN, POS_INF, FINITE = 1, 2, 4  # the §3 flag bits


def broken_rows(keys: npt.NDArray[np.int64], flags: npt.NDArray[np.int32], vocab_size: int) -> npt.NDArray[np.bool_]:
    """[B] True where the row's candidates (keys [B, T, K] int64, flags [B, T] int32) break the contract."""
    b, n_tiles, _ = keys.shape
    out = np.zeros(b, dtype=bool)
    for r in range(b):
        last_id = -1  # the largest ID of the non-empty tiles so far
        for t in range(n_tiles):
            k = [int(v) & 0xFFFFFFFFFFFFFFFF for v in keys[r, t]]
            f = int(flags[r, t]) & 0xFFFFFFFF
            real = [v for v in k if v != 0]
            descending = all(k[i + 1] == 0 or k[i + 1] < k[i] for i in range(K - 1))  # padding 0s last
            ids = [0xFFFFFFFF - (v & 0xFFFFFFFF) for v in real]
            classes = [_flag_of(v >> 32) for v in real]
            finite_only = f & 7 == FINITE
            bad = (
                not descending
                or any(i >= vocab_size for i in ids)
                or len(set(ids)) != len(ids)
                or (bool(ids) and min(ids) <= last_id)
                or f & ~7 != 0
                or any(c & ~f for c in classes)
                or (finite_only and _flag_of(k[0] >> 32) != FINITE)
            )
            if ids:
                last_id = max(last_id, max(ids))
            out[r] |= bad
    return out


def _flag_of(okey: int) -> int:
    """The §3 flag bit of a key's value class (0 for -inf)."""
    if okey == OKEY_NEG_INF:
        return 0
    if okey == OKEY_POS_INF:
        return POS_INF
    return FINITE if OKEY_NEG_INF < okey < OKEY_POS_INF else NAN


def corpus(keys: Any, flags: Any) -> list[tuple[str, Any, Any]]:
    """Malformed variants of well-formed candidates (``keys`` [B, T, K], ``flags`` [B, T] torch tensors of one
    ``tile_candidates`` call, B >= 2, T >= 3, on any device): (name, keys, flags), each contiguous. Each variant but
    the last ("empty tiles", the padding an exchange may leave) breaks the contract in at least one row."""
    import torch

    gen = torch.Generator().manual_seed(28)
    dev = keys.device
    swapped = keys.clone()
    swapped[1, 2, [0, 5]] = swapped[1, 2, [5, 0]]
    repeated = keys.clone()
    repeated[0, 0, 1] = repeated[0, 0, 0]
    same_id = keys.clone()  # the second key's ID made the first's: two values for one token, order kept
    same_id[1, 0, 1] = (same_id[1, 0, 1] & ~0xFFFFFFFF) | (same_id[1, 0, 0] & 0xFFFFFFFF)
    unknown = flags.clone()
    unknown[0, -1] |= 8
    denied = flags.clone()
    denied[:, 0] &= ~FINITE  # finite keys in tiles whose flags say none
    inf_key = keys.clone()
    inf_key[:, 1, 0] = (OKEY_POS_INF << 32) | (inf_key[:, 1, 0] & 0xFFFFFFFF)  # a +inf key the flags deny
    z = torch.zeros_like(keys[:, :1])
    zf = torch.zeros_like(flags[:, :1])
    random = torch.randint(-(2**63), 2**63 - 1, keys.shape, generator=gen, dtype=torch.int64).to(dev)
    cases = [
        ("two keys swapped in a tile", swapped, flags),
        ("a key twice in a tile", repeated, flags),
        ("an ID twice in a tile", same_id, flags),
        ("an unknown flag bit", keys, unknown),
        ("finite keys the flags deny", keys, denied),
        ("a +inf key the flags deny", inf_key, flags),
        ("tiles out of ID order", keys.flip(1), flags.flip(1)),
        ("all-zero keys", torch.zeros_like(keys), flags),
        ("all -1 keys", torch.full_like(keys, -1), flags),
        ("random keys", random, flags),
        ("random keys and flags", random, torch.randint(0, 8, flags.shape, generator=gen, dtype=torch.int32).to(dev)),
        ("empty tiles (not malformed)", torch.cat([z, keys, z], 1), torch.cat([zf, flags, zf], 1)),
    ]
    return [(name, k.contiguous(), f.contiguous()) for name, k, f in cases]
