"""Check the compiled exact-path kernels for instructions that would change bits (TRITON_FACTS.md).

Forbidden in PTX: approximate division/reciprocal/exp (``div.full``, ``.approx``), flush-to-zero (``.ftz``),
fused multiply-add (``fma.``/float ``mad.``), and float add/sub/mul without an explicit ``.rn`` (ptxas may
contract those; ``.rn``-qualified ones it never fuses). Works without a GPU: the Triton wheel ships ptxas.
"""

from __future__ import annotations

import re
from typing import Any

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from pp3.kernels import _select
from pp3.kernels.select import EXACT

FORBIDDEN = {
    "approximate division": r"\bdiv\.full\.",
    "approximate op": r"\.approx\.",
    "flush to zero": r"\.ftz\b",
    "fused multiply-add": r"\bfma\.",
    "float mad": r"\bmad\.[a-z.]*f(?:16|32|64)\b",
    "contractible float op": r"\b(?:add|sub|mul)\.f(?:16|32|64)\b",
}

_TILE_SIG = {
    "x_ptr": "*i32",
    "stride_row": "i64",
    "v_shard": "i32",
    "id_offset": "i64",
    "keys_ptr": "*i64",
    "flags_ptr": "*i32",
    "tile_base": "i32",
    "n_tiles_total": "i32",
    "scratch_ptr": "*i64",
    "KIND": "constexpr",
    "TILE": "constexpr",
    "K": "constexpr",
    "CAP": "constexpr",
    "PDL": "constexpr",
}
_FIN_SIG = {
    "keys_ptr": "*i64",
    "flags_ptr": "*i32",
    "n_tiles": "i32",
    "temp_ptr": "*fp32",
    "seed_ptr": "*i64",
    "round_ptr": "*i64",
    "pos_ptr": "*i64",
    "tau": "fp32",
    "c_ptr": "*fp64",
    "domain": "i64",
    "status_ptr": "*i8",
    "token_ptr": "*i32",
    "ids_ptr": "*i32",
    "tickets_ptr": "*i32",
    "scratch_ptr": "*i64",
    "NC": "constexpr",
    "NT": "constexpr",
    "K": "constexpr",
    "CAP": "constexpr",
    "PDL": "constexpr",
}


def find_forbidden(ptx: str) -> dict[str, list[str]]:
    """Forbidden instruction kinds found in ``ptx``, each with up to 3 example lines."""
    found: dict[str, list[str]] = {}
    for what, pattern in FORBIDDEN.items():
        lines = [ln.strip() for ln in ptx.splitlines() if re.search(pattern, ln)]
        if lines:
            found[what] = lines[:3]
    return found


def compile_exact_path(target: GPUTarget | None = None, options: dict[str, Any] | None = None) -> dict[str, str]:
    """PTX of every exact-path kernel variant (each input kind, a small and a large tile) for ``target``."""
    tgt = target or GPUTarget("cuda", 90, 32)
    opts = dict(EXACT if options is None else options)
    out: dict[str, str] = {}
    for kind in (_select.KIND_F32, _select.KIND_F16, _select.KIND_BF16):
        for tile in (32, 4096):
            sig = dict(_TILE_SIG, x_ptr="*i32" if kind.value == 0 else "*i16")
            consts = {"KIND": kind, "TILE": tile, "K": 32, "CAP": 64, "PDL": True}
            src = ASTSource(_select._tile_candidates_kernel, sig, constexprs=consts)
            out[f"tile_candidates[kind={kind.value},tile={tile}]"] = triton.compile(src, target=tgt, options=opts).asm[
                "ptx"
            ]
    for nc, nt in ((32, 1), (4096, 128)):
        consts = {"NC": nc, "NT": nt, "K": 32, "CAP": 128, "PDL": True}
        src = ASTSource(_select._finalize_kernel, _FIN_SIG, constexprs=consts)
        out[f"finalize[NC={nc}]"] = triton.compile(src, target=tgt, options=opts).asm["ptx"]
    src = ASTSource(
        _select._expf_kernel,
        {"z_ptr": "*fp32", "out_ptr": "*fp32", "c_ptr": "*fp64", "n": "i64", "BLOCK": "constexpr"},
        constexprs={"BLOCK": 1024},
    )
    out["expf"] = triton.compile(src, target=tgt, options=opts).asm["ptx"]
    return out


def launched_ptx() -> dict[str, str]:
    """PTX of every exact-path kernel this process has compiled for its GPU (the kernels it actually ran)."""
    out: dict[str, str] = {}
    for fn in (_select._tile_candidates_kernel, _select._finalize_kernel, _select._expf_kernel):
        for dev, caches in fn.device_caches.items():
            for key, kernel in caches[0].items():
                out[f"{fn.__name__}[dev={dev}][{hash(key) & 0xFFFF:04x}]"] = kernel.asm["ptx"]
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m pp3.kernels.ptx_audit [--default-options]``: compile for sm_90, print findings as JSON.

    Exits 1 if any exact-path kernel holds a forbidden instruction. Must run without TRITON_INTERPRET.
    """
    import argparse
    import json

    ap = argparse.ArgumentParser(prog="python -m pp3.kernels.ptx_audit")
    ap.add_argument("--default-options", action="store_true", help="compile with Triton's defaults (a planted bug)")
    args = ap.parse_args(argv)
    ptx = compile_exact_path(options={} if args.default_options else None)
    found = {name: find_forbidden(text) for name, text in ptx.items()}
    print(json.dumps({"kernels": len(ptx), "forbidden": {k: v for k, v in found.items() if v}}))
    return 1 if any(found.values()) else 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
