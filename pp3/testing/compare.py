"""Exact comparison with self-diagnosing reports: the one comparator of the test kit.

Arrays compare with equality, floats through their raw bits (NaN payloads and -0.0 included). A failing
comparison says how many elements or rows differ, the first coordinates with both values in hex, and for a
selector ``Call`` the inputs' bits and a ``make_case(...)`` line that replays each row.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from pp3.testing.call import Call, runs_hex

_UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}
# SPEC.md §7 / §11.8: the dtype of every output field.
DTYPES = {"status": np.int8, "token": np.int32, "ids": np.int32, "tickets": np.int32, "accepted": np.int32,
          "tokens": np.int32}


def _bits(a: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """Floats as their raw unsigned bits; every other dtype unchanged."""
    return a.view(_UINT[a.dtype.itemsize]) if a.dtype.kind == "f" else a


def _hex(v: object, width: int) -> str:
    """Fixed-width hex of an integer or of raw bits (negative integers as two's complement)."""
    return f"0x{int(v) & ((1 << (8 * width)) - 1):0{2 * width}x}"  # type: ignore[call-overload]


def mismatch_report(
    got: npt.ArrayLike, want: npt.ArrayLike, what: str, inputs: npt.ArrayLike | None = None, first: int = 8
) -> str | None:
    """None if ``got`` and ``want`` are identical bit for bit (shape and dtype too), else a report naming the first
    differing coordinates in hex (and the input there, if given)."""
    g, w = np.asarray(got), np.asarray(want)
    if g.shape != w.shape:
        return f"{what}: shape {g.shape} != expected {w.shape}"
    if g.dtype != w.dtype:
        return f"{what}: dtype {g.dtype} != expected {w.dtype}"
    gb, wb = _bits(g), _bits(w)
    bad = np.argwhere(gb != wb)
    if bad.size == 0:
        return None
    width = g.dtype.itemsize
    lines = [f"{what}: {len(bad)} of {g.size} differ; first {min(first, len(bad))}:"]
    inp = None if inputs is None else np.asarray(inputs)
    for idx in bad[:first]:
        t = tuple(int(i) for i in idx)
        src = ""
        if inp is not None:
            iv = inp[t]
            src = f" input {_hex(_bits(np.asarray(iv))[()], inp.dtype.itemsize)} ({iv!r})"
        lines.append(f"  at {t}:{src} got {_hex(gb[t], width)} ({g[t]!r}) want {_hex(wb[t], width)} ({w[t]!r})")
    return "\n".join(lines)


def assert_equal(got: npt.ArrayLike, want: npt.ArrayLike, what: str, inputs: npt.ArrayLike | None = None) -> None:
    """Assert bitwise equality of two arrays, with ``mismatch_report`` as the message."""
    report = mismatch_report(got, want, what, inputs)
    assert report is None, report


def first_lines(lines: Sequence[str], n: int = 12) -> str:
    shown = "\n".join(lines[:n])
    return shown + (f"\n  ... and {len(lines) - n} more" if len(lines) > n else "")


# ------------------------------------------------------------------------------------------------------ results


def fields(res: Any) -> tuple[str, ...]:
    """The output fields of a result record (``Proposal``: status, token, ids, tickets; ``Verdict``: status,
    accepted, tokens)."""
    return tuple(f.name for f in dataclasses.fields(res))


def row_mismatch(got: Any, want: Any) -> npt.NDArray[np.bool_]:
    """[B]: rows on which any field of two results (same record type, NumPy) differs; every row if shapes differ."""
    bad = np.zeros(np.asarray(want.status).shape[0], dtype=bool)
    for f in fields(want):
        a, b = np.asarray(getattr(got, f)), np.asarray(getattr(want, f))
        if a.shape != b.shape:
            return np.ones_like(bad)
        bad |= (a != b).reshape(a.shape[0], -1).any(axis=1)
    return bad


def rows_per_field(got: Any, want: Any) -> dict[str, int]:
    """Mismatching rows per field."""
    out: dict[str, int] = {}
    for f in fields(want):
        a, b = np.asarray(getattr(got, f)), np.asarray(getattr(want, f))
        out[f] = a.shape[0] if a.shape != b.shape else int((a != b).reshape(a.shape[0], -1).any(axis=1).sum())
    return out


def count_mismatches(got: Any, want: Any) -> int:
    """Differing elements over every field (0 iff the results are identical)."""
    return sum(int((np.asarray(getattr(got, f)) != np.asarray(getattr(want, f))).sum()) for f in fields(want))


def _slots(ids: npt.NDArray[np.int32], tickets: npt.NDArray[np.int32]) -> str:
    used = ids != -1
    pairs = " ".join(f"{int(i)}:{int(t)}" for i, t in zip(ids[used], tickets[used], strict=True))
    return f"[{pairs}]" + (f" +{int((~used).sum())} empty" if (~used).any() else "")


def report(call: Call, got: Any, want: Any, rows: Sequence[int], what: str = "kernel vs reference",
           limit: int = 4) -> str:
    """Mismatching rows of a selector call with the inputs' hex bits and the line that replays each one."""
    hexw = call.fmt.width // 4
    lines = [
        f"{what}: {len(rows)} of {call.b} rows differ ({call.fmt.name}, B={call.b}, V={call.v}, tile={call.tile}, "
        f"tau={call.tau!r} = 0x{int(np.float32(call.tau).view(np.uint32)):08x})"
    ]
    for r in list(rows)[:limit]:
        diff = [f for f in fields(want) if (np.asarray(getattr(got, f)[r]) != np.asarray(getattr(want, f)[r])).any()]
        lines += [
            f"row {r}: {call.row_inputs(r)}; differing: {', '.join(diff)}",
            f"  logits ({call.fmt.name} bits, run-length): {runs_hex(call.bits[r], hexw)}",
            f"  got : status {int(got.status[r])} token {int(got.token[r])} slots id:tickets "
            f"{_slots(got.ids[r], got.tickets[r])}",
            f"  want: status {int(want.status[r])} token {int(want.token[r])} slots id:tickets "
            f"{_slots(want.ids[r], want.tickets[r])}",
            f"  replay: {call.take([r])!r}",
        ]
    if len(rows) > limit:
        lines.append(f"... and {len(rows) - limit} more rows")
    return "\n".join(lines)


def assert_same(call: Call, got: Any, want: Any, what: str = "kernel vs reference") -> None:
    """Exact equality of every field of two selector results (shapes and dtypes too), the failure message
    diagnosing the rows (``report``)."""
    for f in fields(want):
        g, w = np.asarray(getattr(got, f)), np.asarray(getattr(want, f))
        assert g.shape == w.shape, f"{what}: {f} has shape {g.shape}, want {w.shape}"
        assert g.dtype == w.dtype == DTYPES[f], f"{what}: {f} has dtypes {g.dtype} / {w.dtype}, want {DTYPES[f]}"
    rows = np.flatnonzero(row_mismatch(got, want))
    assert rows.size == 0, report(call, got, want, rows.tolist(), what)


def assert_same_verdict(got: Any, want: Any, what: str = "kernel vs reference") -> None:
    """Exact equality of every field of two verifier results (shapes and dtypes too)."""
    for f in fields(want):
        assert np.asarray(want.__getattribute__(f)).dtype == DTYPES[f], f"{what}: {f} is not {DTYPES[f]}"
        assert_equal(getattr(got, f), getattr(want, f), f"{what}: {f}")


def take_rows(res: Any, rows: Sequence[int]) -> Any:
    """The rows ``rows`` of a NumPy result record (a sub-batch or a permutation), as the same record type."""
    idx = list(rows)
    return type(res)(*(np.asarray(getattr(res, f))[idx] for f in fields(res)))
