"""The golden-vector file format (golden/README.md): write, load, run, compare.

Used by tools/gen_golden.py (writes), tests/test_golden.py and tests/test_mutations.py (compare the reference), and
any kernel parity test (``count_mismatching_rows(load_golden(path), impl=my_kernel_propose)``). NumPy only.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import numpy.typing as npt

K = 32  # SPEC.md §1: slots per row
DTYPES = {"float32": (np.uint32, 8), "float16": (np.uint16, 4), "bfloat16": (np.uint16, 4)}  # bits type, hex digits
GOLDEN_DIR = Path(__file__).resolve().parent.parent / "golden"
GOLDEN_FILE = GOLDEN_DIR / "dyadic24-floor-first-v1.jsonl"


@dataclass(frozen=True)
class Expected:
    status: npt.NDArray[np.int8]  # [B]
    token: npt.NDArray[np.int32]  # [B]
    ids: npt.NDArray[np.int32]  # [B, K]
    tickets: npt.NDArray[np.int32]  # [B, K]


@dataclass(frozen=True)
class Case:
    """One golden case: a call of propose (B rows, one tau) and its expected outputs."""

    name: str
    reason: str
    dtype: str  # "float32" | "float16" | "bfloat16"
    logits_bits: npt.NDArray[np.unsignedinteger]  # [B, V] raw bits: uint32 for float32, uint16 otherwise
    tau: np.float32
    target_temperature: npt.NDArray[np.float32]  # [B]
    seed: npt.NDArray[np.uint64]  # [B]
    round: npt.NDArray[np.uint64]  # [B]
    position: npt.NDArray[np.uint64]  # [B]
    expected: Expected

    @property
    def B(self) -> int:
        return int(self.logits_bits.shape[0])

    @property
    def V(self) -> int:
        return int(self.logits_bits.shape[1])

    def logits(self) -> npt.NDArray[np.floating]:
        """The logits as propose takes them: fp32 or fp16 arrays; bf16 widened to fp32 by `bits << 16` (§2.1)."""
        if self.dtype == "float32":
            return self.logits_bits.view(np.float32)
        if self.dtype == "float16":
            return self.logits_bits.view(np.float16)
        return (self.logits_bits.astype(np.uint32) << np.uint32(16)).view(np.float32)

    def args(self) -> dict[str, Any]:
        """Keyword arguments of propose / a kernel with the same signature."""
        return {
            "logits": self.logits(),
            "target_temperature": self.target_temperature,
            "seed": self.seed,
            "round": self.round,
            "position": self.position,
            "tau": float(self.tau),
        }

    def replay(self, row: int) -> str:
        """What a failure message needs to replay one row."""
        return (f"case {self.name!r} row {row}: seed={int(self.seed[row])} round={int(self.round[row])} "
                f"position={int(self.position[row])} tau_bits={_hex32(self.tau)} "
                f"target_temperature_bits={_hex32(self.target_temperature[row])} dtype={self.dtype} V={self.V}")


def _hex32(x: np.float32 | np.floating) -> str:
    return f"{int(np.array([x], dtype=np.float32).view(np.uint32)[0]):08x}"


def _from_hex32(h: str) -> np.float32:
    return cast(np.float32, np.array([int(h, 16)], dtype=np.uint32).view(np.float32)[0])


def case_to_json(case: Case) -> str:
    """One line of the file; field order and formatting are fixed so the file is reproducible byte for byte."""
    bits_type, _ = DTYPES[case.dtype]
    be = case.logits_bits.astype(np.dtype(bits_type).newbyteorder(">"))  # big-endian per value
    obj = {
        "name": case.name,
        "reason": case.reason,
        "dtype": case.dtype,
        "B": case.B,
        "V": case.V,
        "tau_bits": _hex32(case.tau),
        "logits_hex": [row.tobytes().hex() for row in be],
        "target_temperature_bits": [_hex32(t) for t in case.target_temperature],
        "seed": [str(int(v)) for v in case.seed],
        "round": [str(int(v)) for v in case.round],
        "position": [str(int(v)) for v in case.position],
        "expected": {
            "status": [int(v) for v in case.expected.status],
            "token": [int(v) for v in case.expected.token],
            "ids": [[int(v) for v in row] for row in case.expected.ids],
            "tickets": [[int(v) for v in row] for row in case.expected.tickets],
        },
    }
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=True)


def dumps(cases: Iterable[Case]) -> str:
    return "".join(case_to_json(c) + "\n" for c in cases)


def _u64(xs: list[str]) -> npt.NDArray[np.uint64]:
    vals = [int(x) for x in xs]
    if any(not 0 <= v < 1 << 64 for v in vals):
        raise ValueError(f"uint64 out of range: {xs}")
    return np.array(vals, dtype=np.uint64)


def case_from_json(line: str) -> Case:
    o = json.loads(line)
    b, v, dtype = int(o["B"]), int(o["V"]), o["dtype"]
    bits_type, width = DTYPES[dtype]
    hexes = o["logits_hex"]
    if len(hexes) != b or any(len(h) != v * width for h in hexes):
        raise ValueError(f"case {o['name']!r}: logits_hex does not hold {b} rows of {v} x {width} hex digits")
    be = np.dtype(bits_type).newbyteorder(">")
    logits_bits = np.stack([np.frombuffer(bytes.fromhex(h), dtype=be) for h in hexes]).astype(bits_type)
    e = o["expected"]
    expected = Expected(
        status=np.array(e["status"], dtype=np.int8),
        token=np.array(e["token"], dtype=np.int32),
        ids=np.array(e["ids"], dtype=np.int32).reshape(b, K),
        tickets=np.array(e["tickets"], dtype=np.int32).reshape(b, K),
    )
    case = Case(
        name=o["name"],
        reason=o["reason"],
        dtype=dtype,
        logits_bits=logits_bits,
        tau=_from_hex32(o["tau_bits"]),
        target_temperature=np.array([_from_hex32(h) for h in o["target_temperature_bits"]], dtype=np.float32),
        seed=_u64(o["seed"]),
        round=_u64(o["round"]),
        position=_u64(o["position"]),
        expected=expected,
    )
    for name in ("target_temperature", "seed", "round", "position"):
        if getattr(case, name).shape != (b,):
            raise ValueError(f"case {case.name!r}: {name} does not hold {b} values")
    if any(x.shape[0] != b for x in (expected.status, expected.token)):
        raise ValueError(f"case {case.name!r}: expected status/token do not hold {b} values")
    return case


def load_golden(path: Path | str = GOLDEN_FILE) -> list[Case]:
    """Every case of a golden JSON Lines file, with NumPy arrays."""
    return [case_from_json(line) for line in Path(path).read_text().splitlines() if line.strip()]


Impl = Callable[..., Any]  # propose-like: (logits, target_temperature, seed, round, position, tau) -> outputs


def _as_expected(got: Any) -> Expected:
    return Expected(
        status=np.asarray(got.status).astype(np.int8),
        token=np.asarray(got.token).astype(np.int32),
        ids=np.asarray(got.ids).astype(np.int32),
        tickets=np.asarray(got.tickets).astype(np.int32),
    )


def row_mismatch(case: Case, got: Expected, r: int) -> str | None:
    """None if row r of got equals the expected row in every field, else a one-paragraph diagnostic."""
    want = case.expected
    parts = []
    for field in ("status", "token"):
        g, w = int(getattr(got, field)[r]), int(getattr(want, field)[r])
        if g != w:
            parts.append(f"{field} got {g} want {w}")
    for field in ("ids", "tickets"):
        g, w = getattr(got, field)[r], getattr(want, field)[r]
        bad = np.flatnonzero(g != w)
        if bad.size:
            shown = ", ".join(f"slot {j}: got {int(g[j])} (0x{int(g[j]) & 0xFFFFFFFF:08x}) want {int(w[j])} "
                              f"(0x{int(w[j]) & 0xFFFFFFFF:08x})" for j in bad[:4])
            parts.append(f"{field}: {bad.size} slots differ ({shown})")
    return None if not parts else f"{case.replay(r)}\n    " + "; ".join(parts)


def count_mismatching_rows(cases: Iterable[Case], impl: Impl | None = None, report: list[str] | None = None) -> int:
    """Run impl (default pp3.reference.propose) on every case; return the number of rows whose outputs differ from
    the expected ones in any field. Diagnostics for each mismatching row are appended to `report`."""
    if impl is None:
        from pp3.reference import propose

        impl = propose
    bad = 0
    for case in cases:
        got = _as_expected(impl(**case.args()))
        for r in range(case.B):
            msg = row_mismatch(case, got, r)
            if msg is not None:
                bad += 1
                if report is not None:
                    report.append(msg)
    return bad
