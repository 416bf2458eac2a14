"""One record of a call, for every tier: the selector's ``Call`` (raw logit bits of its format, per-row keys,
``tau``, the kernel tile and shard cuts) and the verifier's ``AcceptCall``, each convertible to NumPy (for the
reference) and to torch (for the kernels) from the same bits, and each able to run both.

A ``Call``'s ``repr`` is a ``make_case(...)`` line, so a falsifying example or a failing parity row can be pasted
into a test as it is. NumPy only at import (torch and the kernels are imported where a call runs on them).
"""

from __future__ import annotations

import dataclasses
import os
import zipfile
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from pp3.reference import DEFAULT_TAU, K, Proposal, Verdict, accept, bf16_bits_to_float32, select


def fp32(x: float) -> float:
    """x rounded to fp32, as a Python float."""
    return float(np.float32(x))


U64_MAX = (1 << 64) - 1
U64_EDGES = (0, 1, (1 << 63) - 1, 1 << 63, U64_MAX)

FLT_MAX = float(np.finfo(np.float32).max)
FLT_MIN = float(np.finfo(np.float32).tiny)  # smallest positive normal fp32
FLT_TRUE_MIN = float(np.uint32(1).view(np.float32))  # smallest positive subnormal fp32
# tau edges: subnormal (allowed: finite and > 0), smallest normal, tiny, the default, 1, huge, FLT_MAX.
TAU_EDGES = (FLT_TRUE_MIN, FLT_MIN, fp32(1e-30), DEFAULT_TAU, 1.0, fp32(1e30), FLT_MAX)

@dataclasses.dataclass(frozen=True)
class Fmt:
    """A logit format, described by its bit layout (the row data of a Case is raw bits of this format)."""

    name: str  # "fp32" | "fp16" | "bf16"
    exp_bits: int
    mant_bits: int

    @property
    def width(self) -> int:
        return 1 + self.exp_bits + self.mant_bits

    @property
    def dtype(self) -> type[np.unsignedinteger[Any]]:
        return np.uint32 if self.width == 32 else np.uint16

    @property
    def sign(self) -> int:
        return 1 << (self.width - 1)

    @property
    def pos_inf(self) -> int:
        return ((1 << self.exp_bits) - 1) << self.mant_bits

    @property
    def neg_inf(self) -> int:
        return self.sign | self.pos_inf

    @property
    def max_finite(self) -> int:
        return self.pos_inf - 1

    @property
    def min_normal(self) -> int:
        return 1 << self.mant_bits

    @property
    def nans(self) -> tuple[int, ...]:
        """Quiet and signalling NaNs, smallest and largest payloads, both signs."""
        quiet = self.pos_inf | (1 << (self.mant_bits - 1))
        all_ones = self.pos_inf | ((1 << self.mant_bits) - 1)
        return (quiet, self.sign | quiet, self.pos_inf | 1, self.sign | self.pos_inf | 1, all_ones,
                self.sign | all_ones, quiet | 1)

    @property
    def extremes(self) -> tuple[int, ...]:
        """+-max finite, +-min normal, +-largest subnormal, +-smallest subnormal."""
        mags = (self.max_finite, self.min_normal, self.min_normal - 1, 1)
        return mags + tuple(self.sign | m for m in mags)

    def widen(self, bits: npt.NDArray[Any]) -> npt.NDArray[np.float32]:
        """SPEC.md §2.1: exact fp32 values of raw bits."""
        b = np.asarray(bits, dtype=self.dtype)
        if self.name == "fp32":
            return b.view(np.float32)
        if self.name == "fp16":
            return b.view(np.float16).astype(np.float32)
        return bf16_bits_to_float32(b)

    def round_bits(self, x: npt.ArrayLike) -> npt.NDArray[Any]:
        """Bits of finite values near ``x`` (clipped to the finite range; bf16 truncates): a value generator."""
        a = np.asarray(x, dtype=np.float64)
        if self.name == "fp16":
            return np.clip(a, -65504.0, 65504.0).astype(np.float16).view(np.uint16)
        f32 = np.clip(a, -FLT_MAX, FLT_MAX).astype(np.float32).view(np.uint32)
        return f32 if self.name == "fp32" else (f32 >> np.uint32(16)).astype(np.uint16)

    def exact_bits(self, x: Sequence[float]) -> npt.NDArray[Any]:
        """Bits of values that the format holds exactly (NaN -> a quiet NaN); raises on an inexact value."""
        a = np.asarray(x, dtype=np.float64)
        bits: npt.NDArray[Any]
        with np.errstate(all="ignore"):
            if self.name == "fp16":
                bits = a.astype(np.float16).view(np.uint16)
            else:
                f32 = a.astype(np.float32).view(np.uint32)
                bits = f32 if self.name == "fp32" else (f32 >> np.uint32(16)).astype(np.uint16)
        back = self.widen(bits).astype(np.float64)
        same = (back == a) & (np.signbit(back) == np.signbit(a)) | (np.isnan(back) & np.isnan(a))
        if not same.all():
            raise ValueError(f"{self.name} cannot hold {a[~same][:4].tolist()} exactly")
        return bits


FORMATS = {f.name: f for f in (Fmt("fp32", 8, 23), Fmt("fp16", 5, 10), Fmt("bf16", 8, 7))}


def runs_hex(bits: npt.NDArray[Any], hexw: int) -> str:
    """Run-length hex of a row: '3f800000*3 ff800000*30'."""
    out: list[str] = []
    i = 0
    vals = [int(b) for b in bits]
    while i < len(vals):
        j = i
        while j < len(vals) and vals[j] == vals[i]:
            j += 1
        out.append(f"{vals[i]:0{hexw}x}" + (f"*{j - i}" if j - i > 1 else ""))
        i = j
    return " ".join(out)


def _parse_runs(text: str) -> list[int]:
    vals: list[int] = []
    for tok in text.split():
        word, _, count = tok.partition("*")
        vals.extend([int(word, 16)] * (int(count) if count else 1))
    return vals


@dataclasses.dataclass(frozen=True, repr=False, eq=False)
class Call:
    """One selector call (see the module docstring). Rows are raw bits; scalars are Python ints / fp32 floats."""

    fmt: Fmt
    bits: npt.NDArray[Any]  # [B, V] raw logit bits, uint32 (fp32) or uint16 (fp16, bf16)
    temperature: npt.NDArray[np.float32]  # [B]
    seed: tuple[int, ...]  # [B] uint64 values
    round: tuple[int, ...]
    position: tuple[int, ...]
    tau: float  # an fp32 value
    tile: int | None  # kernel tile size (a power of two >= 32); None: the launcher's automatic choice
    tensor_args: bool  # kernel gets temperature/seed/round/position as tensors (True) or Python lists (False)
    cuts: tuple[int, ...] = ()  # the kernels run over contiguous shards [0, c_1), [c_1, c_2), ... [c_n, V)
    name: str = ""  # what the call is, in reports (not part of its repr)
    # The kernel: "propose" (the segment selector on one tensor; over ``cuts``, tile_candidates and finalize), "gather"
    # (the segment selector with LaunchConfig(segment_gather=True): launch C gathers the blocks, at any batch size),
    # "tiles" (propose with LaunchConfig(selector="tiles"): the tile selector on one tensor), "onelaunch" / "rows"
    # (propose with that selector, the call's tile its segment or step), "greedy" (``greedy``; every temperature is 0)
    # or "rescan" (``greedy`` with LaunchConfig(greedy="rescan")).
    kernel: str = "propose"

    @property
    def b(self) -> int:
        return int(self.bits.shape[0])

    @property
    def v(self) -> int:
        return int(self.bits.shape[1])

    def logits32(self) -> npt.NDArray[np.float32]:
        return self.fmt.widen(self.bits)

    def take(self, rows: Sequence[int]) -> Call:
        """The sub-batch (or permutation) of ``rows``, every per-row input carried along."""
        idx = [int(r) for r in rows]
        return dataclasses.replace(
            self,
            bits=self.bits[idx].copy(),
            temperature=self.temperature[idx].copy(),
            seed=tuple(self.seed[i] for i in idx),
            round=tuple(self.round[i] for i in idx),
            position=tuple(self.position[i] for i in idx),
        )

    def replace(self, **changes: Any) -> Call:
        return dataclasses.replace(self, **changes)

    def as_greedy(self) -> Call:
        """This call's rows through the greedy selector: every target temperature +0.0 (the reference's T0 rows)."""
        return self.replace(temperature=np.zeros_like(self.temperature), kernel="greedy", name=f"{self.name} greedy")

    def as_rescan(self) -> Call:
        """This call's rows through the greedy selector that re-reads the winning tile (``LaunchConfig.greedy``)."""
        return self.as_greedy().replace(kernel="rescan", name=f"{self.name} rescan")

    def as_gather(self) -> Call:
        """This call through the segment selector whose launch C gathers the blocks (no launch B), as from 16 rows."""
        return self.replace(kernel="gather", name=f"{self.name} gather")

    def as_onelaunch(self) -> Call:
        """This call through the one-launch selector (``LaunchConfig(selector="onelaunch")``)."""
        return self.replace(kernel="onelaunch", name=f"{self.name} onelaunch")

    def as_rows(self) -> Call:
        """This call through the row selector (``LaunchConfig(selector="rows")``)."""
        return self.replace(kernel="rows", name=f"{self.name} rows")

    def as_tiles(self) -> Call:
        """This call through the tile selector (its two launches) rather than the segment selector."""
        return self.replace(kernel="tiles", name=f"{self.name} tiles")

    def row_inputs(self, r: int) -> str:
        """One row's scalar inputs, in hex, enough to replay it."""
        t = self.temperature[r]
        return (f"target_temperature 0x{int(t.view(np.uint32)):08x} ({float(t)!r}) seed 0x{self.seed[r]:016x} "
                f"round 0x{self.round[r]:016x} position 0x{self.position[r]:016x}")

    def seeds(self) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64], npt.NDArray[np.uint64]]:
        """seed, round, position as uint64 arrays [B]."""
        return tuple(np.array(k, dtype=np.uint64) for k in (self.seed, self.round, self.position))  # type: ignore[return-value]

    def reference_logits(self) -> npt.NDArray[Any]:
        """What the reference takes: fp32 or fp16 arrays; bf16 widened from its bits (bf16_bits_to_float32)."""
        if self.fmt.name == "fp32":
            return self.bits.view(np.float32)
        if self.fmt.name == "fp16":
            return self.bits.view(np.float16)
        return bf16_bits_to_float32(self.bits)

    def torch_logits(self, device: Any) -> Any:
        """The [B, V] logits as a torch tensor of the call's format, built from the same bits (no rounding)."""
        return bits_tensor(self.fmt, self.bits, device)

    def kernel_row_args(self, device: Any) -> tuple[Any, Any, Any, Any]:
        """(target_temperature, seed, round, position) as the call gives them: tensors or Python lists."""
        if not self.tensor_args:
            return self.temperature.tolist(), list(self.seed), list(self.round), list(self.position)
        import torch

        seed, rnd, pos = (torch.from_numpy(k.view(np.int64).copy()).to(device) for k in self.seeds())
        return torch.from_numpy(self.temperature.copy()).to(device), seed, rnd, pos

    def run_reference(self) -> Proposal:
        """``pp3.reference.propose`` on this call (looked up at each call, so that a planted bug is seen)."""
        out: Proposal = select.propose(self.reference_logits(), self.temperature.copy(), *self.seeds(), self.tau)
        return out

    def run_kernel(self, device: Any = None) -> Proposal:
        """pp3's Triton selector on this call on ``device`` (default: the CUDA GPU, else the CPU under the
        interpreter), through the seam every implementation goes through (``pp3.harness``): ``kernel`` names the
        variant of ``pp3.harness.builtin.kernels`` ("propose": the segment selector, and over ``cuts`` one
        ``tile_candidates`` per shard and one ``finalize``; "gather"; "tiles"; "greedy" and "rescan", over ``cuts``
        ``greedy_sharded``) or of ``builtin.next_selectors`` ("onelaunch", "rows"). A sharded call of a variant
        without a sharded form runs propose's. The result as NumPy arrays."""
        from pp3.harness import builtin
        from pp3.testing import adapt

        impl = builtin.kernel(self.kernel)
        if self.cuts and impl.sharded is None:
            impl = builtin.kernel("propose")
        out: Proposal = adapt.selector(impl, self, default_device() if device is None else device)()
        return out

    def __repr__(self) -> str:
        hexw = self.fmt.width // 4
        rows = ", ".join(repr(runs_hex(row, hexw)) for row in self.bits)
        temps = " ".join(f"{int(t):08x}" for t in self.temperature.view(np.uint32))
        return (f"make_case({self.fmt.name!r}, [{rows}], temperature={temps!r}, seed={list(self.seed)!r}, "
                f"round={list(self.round)!r}, position={list(self.position)!r}, "
                f"tau=float.fromhex({self.tau.hex()!r}), tile={self.tile}, tensor_args={self.tensor_args}"
                + (f", cuts={list(self.cuts)!r})" if self.cuts else ")")
                + _REPLAY[self.kernel])


# How a replay line turns a propose call into each kernel's call (``Call.kernel``).
_REPLAY = {"propose": "", "gather": ".as_gather()", "tiles": ".as_tiles()", "greedy": ".as_greedy()",
           "rescan": ".as_rescan()", "onelaunch": ".as_onelaunch()", "rows": ".as_rows()"}


def make_case(
    fmt: str,
    rows: Sequence[str | Sequence[float]],
    *,
    temperature: str | float | Sequence[float] = 1.0,
    seed: int | Sequence[int] = 0,
    round: int | Sequence[int] = 0,
    position: int | Sequence[int] = 0,
    tau: float = DEFAULT_TAU,
    tile: int | None = 32,
    tensor_args: bool = False,
    cuts: Sequence[int] = (),
) -> Call:
    """A Call from rows given as run-length hex bits ('3f800000*3 ff800000') or as exactly representable floats.

    ``temperature`` is fp32 hex bits ('3f800000 80000000') or floats; scalars apply to every row.
    """
    f = FORMATS[fmt]
    bit_rows = [np.array(_parse_runs(r), dtype=f.dtype) if isinstance(r, str) else f.exact_bits(r) for r in rows]
    if len({r.size for r in bit_rows}) != 1:
        raise ValueError(f"rows differ in length: {[r.size for r in bit_rows]}")
    bits = np.stack(bit_rows)
    b = bits.shape[0]
    if isinstance(temperature, str):
        temps = np.array([int(w, 16) for w in temperature.split()], dtype=np.uint32).view(np.float32)
    else:
        temps = np.broadcast_to(np.asarray(temperature, dtype=np.float32), (b,)).copy()

    def per_row(x: int | Sequence[int]) -> tuple[int, ...]:
        return (int(x),) * b if isinstance(x, int) else tuple(int(v) for v in x)

    tau32 = float(np.float32(tau))
    return Call(f, bits, temps, per_row(seed), per_row(round), per_row(position), tau32, tile, tensor_args, tuple(cuts))




def default_device() -> Any:
    """Where kernels run in tests and audits: the CUDA GPU if torch sees one, else the CPU (the interpreter)."""
    import torch

    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


_TORCH_DTYPE = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


def bits_tensor(fmt: Fmt, bits: npt.NDArray[Any], device: Any) -> Any:
    """A torch tensor of format ``fmt`` holding exactly ``bits`` (any shape)."""
    import torch

    signed = np.ascontiguousarray(bits).view(np.int32 if fmt.width == 32 else np.int16).copy()
    return torch.from_numpy(signed).view(getattr(torch, _TORCH_DTYPE[fmt.name])).to(device)


def host_logits(x: Any) -> npt.NDArray[np.float32]:
    """Torch logits (fp32 / fp16 / bf16, any device) as the reference's fp32 values, exactly (SPEC.md §2.1): bf16
    widened from its bits (NumPy has no bf16), the others by ``.float()``."""
    import torch

    if x.dtype == torch.bfloat16:
        return bf16_bits_to_float32(x.view(torch.int16).cpu().numpy().view(np.uint16))
    out: npt.NDArray[np.float32] = x.float().cpu().numpy()
    return out


def to_numpy(res: Any) -> Any:
    """A kernel result (``pp3.kernels.Proposal`` / ``Verdict``, torch tensors on any device) as the reference's
    NumPy record (``pp3.reference.Proposal`` / ``Verdict``)."""
    cls = Proposal if hasattr(res, "token") else Verdict
    return cls(*(getattr(res, f.name).detach().cpu().numpy() for f in dataclasses.fields(cls)))


# ----------------------------------------------------------------------------------------------------- verifier

# The types a target temperature may be given in besides fp32 (SPEC.md §11.2): name -> (bits type, NumPy type that
# holds it or None, torch dtype name).
GIVEN_TEMPERATURE: dict[str, tuple[type[np.unsignedinteger[Any]], Any, str]] = {
    "float64": (np.uint64, np.float64, "float64"),
    "float16": (np.uint16, np.float16, "float16"),
    "bfloat16": (np.uint16, None, "bfloat16"),
}


def given_rounds_to(dtype: str, bits: npt.NDArray[Any], fp32: npt.NDArray[np.float32]) -> npt.NDArray[np.bool_]:
    """Per row, whether the temperature given as ``dtype`` (GIVEN_TEMPERATURE) with raw ``bits`` rounds to the fp32
    value ``fp32`` (RNE, SPEC.md §11.2; any NaN for a NaN)."""
    with np.errstate(all="ignore"):
        if dtype == "bfloat16":
            rounded = bf16_bits_to_float32(bits)
        else:
            rounded = bits.view(GIVEN_TEMPERATURE[dtype][1]).astype(np.float32)
    same: npt.NDArray[np.bool_] = (rounded.view(np.uint32) == fp32.view(np.uint32)) | (np.isnan(rounded) &
                                                                                       np.isnan(fp32))
    return same


@dataclasses.dataclass(frozen=True, eq=False)
class AcceptCall:
    """One verifier call (SPEC.md §11.2): target logits [B, D+1, V] as raw bits of ``fmt``, per-row target
    temperatures, the draft as the selector returned it per depth, and the per-row keys."""

    fmt: Fmt
    bits: npt.NDArray[Any]  # [B, D+1, V] raw target-logit bits
    temperature: npt.NDArray[np.float32]  # [B]
    draft_tokens: npt.NDArray[np.int32]  # [B, D]
    draft_status: npt.NDArray[np.int8]  # [B, D]
    draft_ids: npt.NDArray[np.int32]  # [B, D, K]
    draft_tickets: npt.NDArray[np.int32]  # [B, D, K]
    seed: npt.NDArray[np.uint64]  # [B]
    round: npt.NDArray[np.uint64]  # [B]
    position: npt.NDArray[np.uint64]  # [B], of draft 0
    tile: int | None = None  # the verifier's tile (None: its default)
    name: str = ""  # what the call is, in reports
    # The temperatures as the caller gave them, in another floating type than fp32 (SPEC.md §11.2 rounds them to
    # fp32 first): (GIVEN_TEMPERATURE's dtype name, their raw bits [B]); ``temperature`` holds the fp32 values.
    given_temperature: tuple[str, npt.NDArray[Any]] | None = None

    @classmethod
    def of(cls, target_logits: Any, target_temperature: Any, seed: Any, round: Any, position: Any,
           tile: int | None = None, name: str = "", **draft: Any) -> AcceptCall:
        """From the reference's calling convention (NumPy fp32 / fp16 target logits, scalars or [B] keys)."""
        from pp3.reference import _args

        x = np.asarray(target_logits)
        fmt = FORMATS["fp16" if x.dtype == np.float16 else "fp32"]
        bits = x.view(np.uint16) if x.dtype == np.float16 else np.asarray(x, dtype=np.float32).view(np.uint32)
        b, d = bits.shape[0], bits.shape[1] - 1
        return cls(
            fmt, bits.copy(), _args.as_temperature_rows("target_temperature", target_temperature, b),
            np.asarray(draft["draft_tokens"]).astype(np.int32).reshape(b, d),
            np.asarray(draft["draft_status"]).astype(np.int8).reshape(b, d),
            np.asarray(draft["draft_ids"]).astype(np.int32).reshape(b, d, K),
            np.asarray(draft["draft_tickets"]).astype(np.int32).reshape(b, d, K),
            _args.as_uint64_rows("seed", seed, b),
            _args.as_uint64_rows("round", round, b),
            _args.as_uint64_rows("position", position, b),
            tile=tile,
            name=name,
        )

    @property
    def b(self) -> int:
        return int(self.bits.shape[0])

    @property
    def depth(self) -> int:
        return int(self.bits.shape[1]) - 1

    @property
    def v(self) -> int:
        return int(self.bits.shape[2])

    def row_inputs(self, r: int) -> str:
        """One row's scalar inputs, in hex, enough to replay it with its drafts and target bits."""
        t = self.temperature[r]
        return (f"target_temperature 0x{int(t.view(np.uint32)):08x} ({float(t)!r}) seed 0x{int(self.seed[r]):016x} "
                f"round 0x{int(self.round[r]):016x} position 0x{int(self.position[r]):016x}")

    def take(self, rows: Sequence[int]) -> AcceptCall:
        """The sub-batch (or permutation) of ``rows``, every per-row input carried along."""
        idx = [int(r) for r in rows]
        per_row = ("bits", "temperature", "draft_tokens", "draft_status", "draft_ids", "draft_tickets", "seed",
                   "round", "position")
        given = None if self.given_temperature is None else (
            self.given_temperature[0], self.given_temperature[1][idx].copy())
        return dataclasses.replace(self, **{f: getattr(self, f)[idx].copy() for f in per_row},
                                   given_temperature=given)

    def replace(self, **changes: Any) -> AcceptCall:
        return dataclasses.replace(self, **changes)

    def draft(self) -> dict[str, npt.NDArray[Any]]:
        return {f: getattr(self, f) for f in ("draft_tokens", "draft_status", "draft_ids", "draft_tickets")}

    def reference_logits(self) -> npt.NDArray[Any]:
        """What the reference takes: fp32 or fp16 arrays; bf16 widened from its bits."""
        return self.fmt.widen(self.bits) if self.fmt.name != "fp16" else self.bits.view(np.float16)

    def reference_temperature(self) -> npt.NDArray[Any]:
        """The temperatures as NumPy holds them: as given (float64, fp16), else fp32 (NumPy has no bf16; its fp32
        value is the bf16 value exactly)."""
        if self.given_temperature is None or self.given_temperature[0] == "bfloat16":
            return self.temperature
        dtype, bits = self.given_temperature
        return bits.view(GIVEN_TEMPERATURE[dtype][1])

    def torch_temperature(self, device: Any) -> Any:
        """The temperatures as a torch tensor of the type they were given in (fp32 without ``given_temperature``)."""
        import torch

        if self.given_temperature is None:
            return torch.from_numpy(self.temperature.copy()).to(device)
        dtype, bits = self.given_temperature
        signed = {8: np.int64, 2: np.int16}[bits.dtype.itemsize]
        return torch.from_numpy(bits.view(signed).copy()).view(getattr(torch, GIVEN_TEMPERATURE[dtype][2])).to(device)

    def run_reference(self) -> Verdict:
        """``pp3.reference.verify`` on this call (bf16 widened from its bits; looked up at each call, so that a planted
        bug is seen)."""
        out: Verdict = accept.verify(target_logits=self.reference_logits(),
                                     target_temperature=self.reference_temperature(), **self.draft(),
                                     seed=self.seed, round=self.round, position=self.position)
        return out

    def run_kernel(self, device: Any = None, launch: Any = None) -> Verdict:
        """pp3's Triton verifier on this call (every argument a tensor on ``device``), through the seam
        (``pp3.harness``); ``launch``: a ``kernels.LaunchConfig`` picking its variants (``screen``, ``handover``),
        None the launcher's default. The result as NumPy arrays."""
        from pp3.harness import builtin
        from pp3.testing import adapt

        out: Verdict = adapt.verifier(builtin.verifier(launch), self, default_device() if device is None else device)()
        return out


# ----------------------------------------------------------------------------------------------- recorded calls


class DamagedRecord(ValueError):
    """A file that does not hold a call as pp3's tools record it (``pp3 verify``'s failing cases, ``accept_bulk``'s
    batches): missing, not a .npz file NumPy reads, a member missing or of the wrong dtype or shape, or a call the
    reference refuses. The message says what, in one line, without the path (the caller names the file)."""


Members = Mapping[str, npt.NDArray[Any]]  # a .npz file's arrays by name
T = TypeVar("T")


def read_record(path: str, read: Callable[[Members], T]) -> T:
    """``read`` on the members of the .npz file ``path`` (read without pickles). Any failure to read the file or a
    member, and a member that ``read`` refuses, is a ``DamagedRecord``: whatever the file holds, reading it raises
    nothing else."""
    if not os.path.isfile(path):
        raise DamagedRecord("no such file")
    try:
        with np.load(path, allow_pickle=False) as z:
            return read(z)
    except (OSError, EOFError, ValueError, KeyError, zipfile.BadZipFile) as e:  # NumPy's and zipfile's errors
        if isinstance(e, DamagedRecord):
            raise
        raise DamagedRecord(f"not a .npz file NumPy reads ({type(e).__name__}: {' '.join(str(e).split())})") from e


def member(z: Members, key: str, dtype: Any, shape: tuple[int | None, ...]) -> npt.NDArray[Any]:
    """Member ``key`` of a record, exactly of ``dtype`` (``str``: text) and ``shape`` (``None``: any size there)."""
    if key not in z:
        raise DamagedRecord(f"no member {key!r}")
    a = z[key]
    dtype_ok = a.dtype.kind == "U" if dtype is str else a.dtype == np.dtype(dtype)
    shape_ok = a.ndim == len(shape) and all(w is None or n == w for n, w in zip(a.shape, shape, strict=True))
    if not (dtype_ok and shape_ok):
        want = "text" if dtype is str else str(np.dtype(dtype))
        raise DamagedRecord(f"{key}: expected {want} of shape {shape}, got {a.dtype} of shape {a.shape}")
    return a


def _fmt(z: Members) -> Fmt:
    name = str(member(z, "fmt", str, ()))
    if name not in FORMATS:
        raise DamagedRecord(f"fmt: {name!r} is none of {', '.join(FORMATS)}")
    return FORMATS[name]


def _tile(z: Members, least: int) -> int | None:
    """A recorded tile: -1 (None: the automatic tile) or a power of two in ``least`` .. 2^16."""
    t = int(member(z, "tile", np.int64, ()))
    if t != -1 and not (least <= t <= 1 << 16 and t & (t - 1) == 0):
        raise DamagedRecord(f"tile: expected -1 or a power of two in {least} .. 65536, got {t}")
    return None if t < 0 else t


def _rows(z: Members, b: int) -> list[npt.NDArray[Any]]:
    """The per-row temperature (fp32), seed, round and position (uint64) of a record of ``b`` rows."""
    return [member(z, "temperature", np.float32, (b,)), *(member(z, k, np.uint64, (b,))
                                                           for k in ("seed", "round", "position"))]


def read_call(z: Members) -> Call:
    """The selector call of a record (``pp3 verify``'s selector_first.npz)."""
    fmt = _fmt(z)
    bits = member(z, "bits", fmt.dtype, (None, None))
    b, v = bits.shape
    if b < 1 or v < 1:
        raise DamagedRecord(f"bits: expected [B, V] with B, V >= 1, got shape {bits.shape}")
    temperature, seed, rnd, pos = _rows(z, b)
    cuts = tuple(int(c) for c in member(z, "cuts", np.int64, (None,)))
    if list(cuts) != sorted(set(cuts)) or any(not 0 < c < v for c in cuts):
        raise DamagedRecord(f"cuts: expected increasing shard boundaries in 1 .. {v - 1}, got {list(cuts)}")
    kernel = str(member(z, "selector_kernel", str, ())) if "selector_kernel" in z else "propose"
    if kernel not in _REPLAY:
        raise DamagedRecord(f"selector_kernel: {kernel!r} is none of {', '.join(_REPLAY)}")
    tau = float(member(z, "tau", np.float32, ()))
    s, r, p = (tuple(int(k) for k in a) for a in (seed, rnd, pos))
    return Call(fmt, bits, temperature, s, r, p, tau, _tile(z, K), True, cuts, name=str(member(z, "name", str, ())),
                kernel=kernel)


def read_accept_call(z: Members) -> AcceptCall:
    """The verifier call of a record (``pp3 verify``'s verifier_first.npz, ``accept_bulk``'s batches: without a
    tile, their verifier's default, and a name)."""
    fmt = _fmt(z)
    bits = member(z, "bits", fmt.dtype, (None, None, None))
    b, d1, v = bits.shape
    if b < 1 or d1 < 2 or v < 1:
        raise DamagedRecord(f"bits: expected [B, D+1, V] with B, D, V >= 1, got shape {bits.shape}")
    d = d1 - 1
    temperature, seed, rnd, pos = _rows(z, b)
    draft = {"draft_tokens": member(z, "draft_tokens", np.int32, (b, d)),
             "draft_status": member(z, "draft_status", np.int8, (b, d)),
             "draft_ids": member(z, "draft_ids", np.int32, (b, d, K)),
             "draft_tickets": member(z, "draft_tickets", np.int32, (b, d, K))}
    return AcceptCall(fmt, bits, temperature, **draft, seed=seed, round=rnd, position=pos,
                      tile=_tile(z, 2) if "tile" in z else None,
                      name=str(member(z, "name", str, ())) if "name" in z else "",
                      given_temperature=_given_temperature(z, temperature) if "given_dtype" in z else None)


def _given_temperature(z: Members, fp32: npt.NDArray[np.float32]) -> tuple[str, npt.NDArray[Any]]:
    """A record's temperatures as the caller gave them (``given_dtype``, ``given_bits``), which must round to its
    fp32 ``temperature``."""
    dtype = str(member(z, "given_dtype", str, ()))
    if dtype not in GIVEN_TEMPERATURE:
        raise DamagedRecord(f"given_dtype: {dtype!r} is none of {', '.join(GIVEN_TEMPERATURE)}")
    bits = member(z, "given_bits", GIVEN_TEMPERATURE[dtype][0], fp32.shape)
    if not given_rounds_to(dtype, bits, fp32).all():
        raise DamagedRecord("given_bits: do not round to temperature (SPEC.md §11.2)")
    return dtype, bits


def recorded_reference(call: Call | AcceptCall) -> Any:
    """The reference's outputs of a recorded call; a call whose arguments it refuses (SPEC.md §2, §11.2) is a
    ``DamagedRecord`` (a tool records only calls the reference ran)."""
    try:
        return call.run_reference()
    except (TypeError, ValueError) as e:
        raise DamagedRecord(f"the reference refuses the recorded call ({type(e).__name__}: {e})") from e


def kernel_verifier(**kw: Any) -> Verdict:
    """The Triton verifier with the reference's calling convention and result (for the audits and the demo)."""
    return AcceptCall.of(**kw).run_kernel()
