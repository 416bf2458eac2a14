"""The conformance files (``pp3/conformance/``, README there): the selector's golden-vector format (write, load,
run, compare) and where every file lies.

Used by tools/gen_golden.py (writes), tests/test_golden.py (compares the reference and the kernels), ``pp3
conformance`` (the installed implementation), and any other implementation
(``count_mismatching_rows(load_golden(path), impl=my_propose)``). NumPy only.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from pp3.reference import (
    ACCEPT_SEMANTIC_ID,
    ACCEPT_TREE_SEMANTIC_ID,
    SEMANTIC_ID,
    TREE_DRAW_SEMANTIC_ID,
    WALK_TREE_SEMANTIC_ID,
    K,
    Proposal,
    TreeProposal,
    TreeVerdict,
    Verdict,
)
from pp3.testing.call import FORMATS, GIVEN_TEMPERATURE, AcceptCall, Call, given_rounds_to

DTYPES = {"float32": (np.uint32, 8), "float16": (np.uint16, 4), "bfloat16": (np.uint16, 4)}  # bits type, hex digits
FMT = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}  # the file's dtype names -> pp3.testing.call formats
CONFORMANCE = Path(__file__).resolve().parent.parent / "conformance"
GOLDEN_FILE = CONFORMANCE / f"{SEMANTIC_ID}.jsonl"  # the selector's golden vectors
KAT_FILE = CONFORMANCE / "philox4x64_10.kat"  # Random123's known answers for Philox4x64-10 (SPEC.md §8)
EXPF_WC_FILE = CONFORMANCE / "expf.wc"  # the exponential's hardest inputs (SPEC.md §6)
Expected = Proposal  # a case's expected outputs (SPEC.md §7)


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

    def call(self, *, tile: int | None = None, tensor_args: bool = True) -> Call:
        """The case as a selector ``Call`` (the same bits), to run on the reference or the kernels."""
        seed, rnd, pos = (tuple(int(v) for v in k) for k in (self.seed, self.round, self.position))
        return Call(FORMATS[FMT[self.dtype]], self.logits_bits, self.target_temperature.copy(), seed, rnd, pos,
                    float(self.tau), tile, tensor_args)

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


# ------------------------------------------------------------------------------------- known answers, worst cases


def load_kat(path: Path | str = KAT_FILE) -> list[tuple[list[int], list[int], list[int]]]:
    """The Philox4x64-10 known-answer vectors: (counter words, key words, expected words) per line."""
    vectors = []
    for line in Path(path).read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, rounds, *words = line.split()
        if (name, rounds, len(words)) != ("philox4x64", "10", 10):
            raise ValueError(f"malformed KAT line: {line!r}")
        w = [int(x, 16) for x in words]
        vectors.append((w[0:4], w[4:6], w[6:10]))
    return vectors


def load_expf_wc(path: Path | str = EXPF_WC_FILE) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    """The exponential's worst cases: fp32 inputs z and their correctly rounded e^z (from their bits)."""
    rows = [line.split("#")[0].split() for line in Path(path).read_text().splitlines()]
    rows = [r for r in rows if r]
    z = np.array([int(r[0], 16) for r in rows], dtype=np.uint32).view(np.float32)
    want = np.array([int(r[1], 16) for r in rows], dtype=np.uint32).view(np.float32)
    return z, want


# ------------------------------------------------------------------------------------------ the verifier's vectors

ACCEPT_GOLDEN_FILE = CONFORMANCE / f"{ACCEPT_SEMANTIC_ID}.jsonl"  # the verifier's golden vectors (SPEC.md §11.11)


@dataclass(frozen=True)
class AcceptCase:
    """One golden case of the verifier: a call of ``verify`` (B rows, depth D) and its expected outputs."""

    name: str
    reason: str
    call: AcceptCall
    expected: Verdict


def accept_case_to_json(case: AcceptCase) -> str:
    """One line of the file; field order and formatting fixed, so the file is reproducible byte for byte."""
    c = case.call
    dtype = {v: k for k, v in FMT.items()}[c.fmt.name]
    bits_type, _ = DTYPES[dtype]
    be = c.bits.astype(np.dtype(bits_type).newbyteorder(">"))
    b, d1, v = c.bits.shape
    obj = {
        "name": case.name,
        "reason": case.reason,
        "dtype": dtype,
        "B": b,
        "D": d1 - 1,
        "V": v,
        "target_logits_hex": [[row.tobytes().hex() for row in rows] for rows in be],
        "target_temperature_bits": [_hex32(t) for t in c.temperature],
        **({} if c.given_temperature is None else {"target_temperature_given": {
            "dtype": c.given_temperature[0],
            "bits": [f"{int(x):0{2 * x.itemsize}x}" for x in c.given_temperature[1]]}}),
        "draft_tokens": c.draft_tokens.tolist(),
        "draft_status": c.draft_status.tolist(),
        "draft_ids": c.draft_ids.tolist(),
        "draft_tickets": c.draft_tickets.tolist(),
        "seed": [str(int(x)) for x in c.seed],
        "round": [str(int(x)) for x in c.round],
        "position": [str(int(x)) for x in c.position],
        "expected": {
            "status": [int(x) for x in case.expected.status],
            "accepted": [int(x) for x in case.expected.accepted],
            "tokens": case.expected.tokens.tolist(),
        },
    }
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=True)


def accept_case_from_json(line: str) -> AcceptCase:
    o = json.loads(line)
    b, d, v, dtype = int(o["B"]), int(o["D"]), int(o["V"]), o["dtype"]
    bits_type, width = DTYPES[dtype]
    hexes = o["target_logits_hex"]
    if len(hexes) != b or any(len(r) != d + 1 or any(len(h) != v * width for h in r) for r in hexes):
        raise ValueError(f"case {o['name']!r}: target_logits_hex does not hold {b} x {d + 1} rows of {v} values")
    be = np.dtype(bits_type).newbyteorder(">")
    bits = np.array([[np.frombuffer(bytes.fromhex(h), dtype=be) for h in r] for r in hexes]).astype(bits_type)
    temperature = np.array([_from_hex32(h) for h in o["target_temperature_bits"]], dtype=np.float32)
    call = AcceptCall(
        FORMATS[FMT[dtype]],
        bits.reshape(b, d + 1, v),
        temperature,
        np.array(o["draft_tokens"], dtype=np.int32).reshape(b, d),
        np.array(o["draft_status"], dtype=np.int8).reshape(b, d),
        np.array(o["draft_ids"], dtype=np.int32).reshape(b, d, K),
        np.array(o["draft_tickets"], dtype=np.int32).reshape(b, d, K),
        _u64(o["seed"]),
        _u64(o["round"]),
        _u64(o["position"]),
        given_temperature=_given_temperature(o, temperature),
    )
    e = o["expected"]
    expected = Verdict(
        status=np.array(e["status"], dtype=np.int8),
        accepted=np.array(e["accepted"], dtype=np.int32),
        tokens=np.array(e["tokens"], dtype=np.int32).reshape(b, d + 1),
    )
    for name in ("temperature", "seed", "round", "position"):
        if getattr(call, name).shape != (b,):
            raise ValueError(f"case {o['name']!r}: {name} does not hold {b} values")
    return AcceptCase(o["name"], o["reason"], call, expected)


def _given_temperature(o: dict[str, Any], fp32: npt.NDArray[np.float32]) -> tuple[str, npt.NDArray[Any]] | None:
    """A case's ``target_temperature_given`` (absent from the lines written before it existed: None), checked
    against its ``target_temperature_bits``: each value rounded to fp32 (RNE, §11.2) must give those bits (any NaN
    for a NaN)."""
    given = o.get("target_temperature_given")
    if given is None:
        return None
    dtype = given["dtype"]
    if dtype not in GIVEN_TEMPERATURE:
        raise ValueError(f"case {o['name']!r}: target_temperature_given dtype {dtype!r} is none of "
                         f"{sorted(GIVEN_TEMPERATURE)}")
    bits_type = GIVEN_TEMPERATURE[dtype][0]
    width = 2 * np.dtype(bits_type).itemsize
    if len(given["bits"]) != fp32.size or any(len(h) != width for h in given["bits"]):
        raise ValueError(f"case {o['name']!r}: target_temperature_given does not hold {fp32.size} values of {width} "
                         "hex digits")
    bits = np.array([int(h, 16) for h in given["bits"]], dtype=bits_type)
    same = given_rounds_to(dtype, bits, fp32)
    if not same.all():
        raise ValueError(f"case {o['name']!r}: target_temperature_given does not round to target_temperature_bits "
                         f"(rows {np.flatnonzero(~same).tolist()})")
    return dtype, bits


def load_accept_golden(path: Path | str = ACCEPT_GOLDEN_FILE) -> list[AcceptCase]:
    """Every case of the verifier's golden file."""
    return [accept_case_from_json(line) for line in Path(path).read_text().splitlines() if line.strip()]


# ------------------------------------------------------------------------------------------- draft trees (§12)

TREE_DRAW_GOLDEN_FILE = CONFORMANCE / f"{TREE_DRAW_SEMANTIC_ID}.jsonl"  # propose_tree (SPEC.md §12.4)
ACCEPT_TREE_GOLDEN_FILE = CONFORMANCE / f"{ACCEPT_TREE_SEMANTIC_ID}.jsonl"  # verify_tree (SPEC.md §12.5-§12.6)
WALK_TREE_GOLDEN_FILE = CONFORMANCE / f"{WALK_TREE_SEMANTIC_ID}.jsonl"  # verify_walk (SPEC.md §12.5, §12.9)


def _bits_of(dtype: str, bits: npt.NDArray[Any]) -> npt.NDArray[np.floating]:
    """Logits as the reference takes them from their raw bits: fp32, fp16, or bf16 widened by ``bits << 16``."""
    if dtype == "float32":
        return bits.view(np.float32)
    if dtype == "float16":
        return bits.view(np.float16)
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)


def _hex_rows(dtype: str, bits: npt.NDArray[Any]) -> list[list[str]]:
    be = bits.astype(np.dtype(DTYPES[dtype][0]).newbyteorder(">"))
    return [[row.tobytes().hex() for row in rows] for rows in be]


def _rows_from_hex(dtype: str, hexes: list[list[str]], b: int, n: int, v: int, name: str) -> npt.NDArray[Any]:
    bits_type, width = DTYPES[dtype]
    if len(hexes) != b or any(len(r) != n or any(len(h) != v * width for h in r) for r in hexes):
        raise ValueError(f"case {name!r}: logits hex does not hold {b} x {n} rows of {v} values")
    be = np.dtype(bits_type).newbyteorder(">")
    return np.array([[np.frombuffer(bytes.fromhex(h), dtype=be) for h in r] for r in hexes]).astype(
        bits_type).reshape(b, n, v)


def _keys_json(seed: Any, rnd: Any, pos: Any) -> dict[str, list[str]]:
    return {"seed": [str(int(x)) for x in seed], "round": [str(int(x)) for x in rnd],
            "position": [str(int(x)) for x in pos]}


@dataclass(frozen=True)
class TreeDrawCase:
    """One golden case of ``propose_tree`` (SPEC.md §12.4): B requests, the M nodes ``nodes`` of the tree
    ``parents``, one ``tau`` and one ``children``, and the expected outputs."""

    name: str
    reason: str
    dtype: str  # "float32" | "float16" | "bfloat16"
    logits_bits: npt.NDArray[Any]  # [B, M, V] raw bits
    target_temperature: npt.NDArray[np.float32]  # [B]
    seed: npt.NDArray[np.uint64]  # [B]
    round: npt.NDArray[np.uint64]  # [B]
    position: npt.NDArray[np.uint64]  # [B], of the depth-1 nodes
    parents: list[int]
    nodes: list[int]
    tau: np.float32
    children: str  # "sampled" | "top-k"
    expected: TreeProposal

    def args(self) -> dict[str, Any]:
        """Keyword arguments of ``propose_tree``."""
        return {"logits": _bits_of(self.dtype, self.logits_bits), "target_temperature": self.target_temperature,
                "seed": self.seed, "round": self.round, "position": self.position, "parents": self.parents,
                "nodes": self.nodes, "tau": float(self.tau), "children": self.children}

    def run(self, impl: Impl | None = None) -> TreeProposal:
        """The outputs of ``impl`` (default ``pp3.reference.propose_tree``) on this case."""
        from pp3.reference import propose_tree

        got = (impl or propose_tree)(**self.args())
        return TreeProposal(*(np.asarray(getattr(got, f)).astype(np.asarray(getattr(self.expected, f)).dtype)
                              for f in ("status", "ids", "tickets", "tokens")))


def tree_draw_case_to_json(case: TreeDrawCase) -> str:
    """One line of the file; field order and formatting fixed, so the file is reproducible byte for byte."""
    b, m, v = case.logits_bits.shape
    e = case.expected
    obj = {
        "name": case.name,
        "reason": case.reason,
        "dtype": case.dtype,
        "B": b,
        "M": m,
        "V": v,
        "parents": list(case.parents),
        "nodes": list(case.nodes),
        "children": case.children,
        "tau_bits": _hex32(case.tau),
        "logits_hex": _hex_rows(case.dtype, case.logits_bits),
        "target_temperature_bits": [_hex32(t) for t in case.target_temperature],
        **_keys_json(case.seed, case.round, case.position),
        "expected": {"status": e.status.tolist(), "ids": e.ids.tolist(), "tickets": e.tickets.tolist(),
                     "tokens": e.tokens.tolist()},
    }
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=True)


def tree_draw_case_from_json(line: str) -> TreeDrawCase:
    o = json.loads(line)
    b, m, v, n1 = int(o["B"]), int(o["M"]), int(o["V"]), len(o["parents"])
    e = o["expected"]
    return TreeDrawCase(
        name=o["name"], reason=o["reason"], dtype=o["dtype"],
        logits_bits=_rows_from_hex(o["dtype"], o["logits_hex"], b, m, v, o["name"]),
        target_temperature=np.array([_from_hex32(h) for h in o["target_temperature_bits"]], dtype=np.float32),
        seed=_u64(o["seed"]), round=_u64(o["round"]), position=_u64(o["position"]),
        parents=[int(x) for x in o["parents"]], nodes=[int(x) for x in o["nodes"]], tau=_from_hex32(o["tau_bits"]),
        children=o["children"],
        expected=TreeProposal(
            status=np.array(e["status"], dtype=np.int8).reshape(b, m),
            ids=np.array(e["ids"], dtype=np.int32).reshape(b, m, K),
            tickets=np.array(e["tickets"], dtype=np.int32).reshape(b, m, K),
            tokens=np.array(e["tokens"], dtype=np.int32).reshape(b, n1),
        ),
    )


@dataclass(frozen=True)
class TreeVerifyCase:
    """One golden case of ``verify_tree`` (SPEC.md §12.6) or, without slots, of ``verify_walk`` (§12.9): B requests
    over the tree ``parents`` and the expected outputs."""

    name: str
    reason: str
    dtype: str
    target_bits: npt.NDArray[Any]  # [B, N+1, V] raw bits
    target_temperature: npt.NDArray[np.float32]  # [B]
    parents: list[int]
    draft_tokens: npt.NDArray[np.int32]  # [B, N+1]
    draft_status: npt.NDArray[np.int8]  # [B, N+1]
    draft_ids: npt.NDArray[np.int32] | None  # [B, N+1, K]; None for the walk
    draft_tickets: npt.NDArray[np.int32] | None
    seed: npt.NDArray[np.uint64]
    round: npt.NDArray[np.uint64]
    position: npt.NDArray[np.uint64]
    expected: TreeVerdict

    @property
    def walk(self) -> bool:
        return self.draft_ids is None

    def args(self) -> dict[str, Any]:
        """Keyword arguments of ``verify_tree`` (or ``verify_walk``)."""
        slots = {} if self.walk else {"draft_ids": self.draft_ids, "draft_tickets": self.draft_tickets}
        return {"target_logits": _bits_of(self.dtype, self.target_bits), "target_temperature": self.target_temperature,
                "parents": self.parents, "draft_tokens": self.draft_tokens, "draft_status": self.draft_status,
                **slots, "seed": self.seed, "round": self.round, "position": self.position}

    def run(self, impl: Impl | None = None) -> TreeVerdict:
        """The outputs of ``impl`` (default ``pp3.reference.verify_walk`` or ``verify_tree``) on this case."""
        from pp3.reference import verify_tree, verify_walk

        got = (impl or (verify_walk if self.walk else verify_tree))(**self.args())
        return TreeVerdict(*(np.asarray(getattr(got, f)).astype(np.asarray(getattr(self.expected, f)).dtype)
                             for f in ("status", "accepted", "path", "tokens")))


def tree_verify_case_to_json(case: TreeVerifyCase) -> str:
    """One line of the file; field order and formatting fixed, so the file is reproducible byte for byte."""
    b, n1, v = case.target_bits.shape
    e = case.expected
    slots = {} if case.draft_ids is None or case.draft_tickets is None else {
        "draft_ids": case.draft_ids.tolist(), "draft_tickets": case.draft_tickets.tolist()}
    obj = {
        "name": case.name,
        "reason": case.reason,
        "dtype": case.dtype,
        "B": b,
        "N": n1 - 1,
        "V": v,
        "parents": list(case.parents),
        "target_logits_hex": _hex_rows(case.dtype, case.target_bits),
        "target_temperature_bits": [_hex32(t) for t in case.target_temperature],
        "draft_tokens": case.draft_tokens.tolist(),
        "draft_status": case.draft_status.tolist(),
        **slots,
        **_keys_json(case.seed, case.round, case.position),
        "expected": {"status": e.status.tolist(), "accepted": e.accepted.tolist(), "path": e.path.tolist(),
                     "tokens": e.tokens.tolist()},
    }
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=True)


def tree_verify_case_from_json(line: str) -> TreeVerifyCase:
    o = json.loads(line)
    b, n1, v = int(o["B"]), int(o["N"]) + 1, int(o["V"])
    h = len(o["expected"]["path"][0]) if b else 0
    e = o["expected"]
    walk = "draft_ids" not in o
    return TreeVerifyCase(
        name=o["name"], reason=o["reason"], dtype=o["dtype"],
        target_bits=_rows_from_hex(o["dtype"], o["target_logits_hex"], b, n1, v, o["name"]),
        target_temperature=np.array([_from_hex32(x) for x in o["target_temperature_bits"]], dtype=np.float32),
        parents=[int(x) for x in o["parents"]],
        draft_tokens=np.array(o["draft_tokens"], dtype=np.int32).reshape(b, n1),
        draft_status=np.array(o["draft_status"], dtype=np.int8).reshape(b, n1),
        draft_ids=None if walk else np.array(o["draft_ids"], dtype=np.int32).reshape(b, n1, K),
        draft_tickets=None if walk else np.array(o["draft_tickets"], dtype=np.int32).reshape(b, n1, K),
        seed=_u64(o["seed"]), round=_u64(o["round"]), position=_u64(o["position"]),
        expected=TreeVerdict(
            status=np.array(e["status"], dtype=np.int8),
            accepted=np.array(e["accepted"], dtype=np.int32),
            path=np.array(e["path"], dtype=np.int32).reshape(b, h),
            tokens=np.array(e["tokens"], dtype=np.int32).reshape(b, h + 1),
        ),
    )


def load_tree_draw_golden(path: Path | str = TREE_DRAW_GOLDEN_FILE) -> list[TreeDrawCase]:
    """Every case of the tree drafts' golden file."""
    return [tree_draw_case_from_json(line) for line in Path(path).read_text().splitlines() if line.strip()]


def load_tree_verify_golden(path: Path | str = ACCEPT_TREE_GOLDEN_FILE) -> list[TreeVerifyCase]:
    """Every case of a tree verifier's golden file (``ACCEPT_TREE_GOLDEN_FILE`` or ``WALK_TREE_GOLDEN_FILE``)."""
    return [tree_verify_case_from_json(line) for line in Path(path).read_text().splitlines() if line.strip()]
