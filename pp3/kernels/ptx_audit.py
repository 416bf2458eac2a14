"""Check the compiled code of every exact-path kernel (selector, verifier, the one-function entries, the adapters'
row gather) for instructions that would change bits.

Forbidden in PTX: approximate division/reciprocal/exp (``div.full``, ``.approx``), flush-to-zero (``.ftz``),
fused multiply-add (``fma.``/float ``mad.``), and float add/sub/mul without an explicit ``.rn`` (ptxas may
contract those; ``.rn``-qualified ones it never fuses). ``compile_exact_path`` works without a GPU (the Triton
wheel ships ptxas); ``--launched`` runs every kernel on the CUDA GPU and audits the binaries it actually launched.
"""

from __future__ import annotations

import re
from typing import Any

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from pp3.kernels import _accept, _common, _select, rows
from pp3.kernels.config import COUNT_CHUNK, EXACT, FINALIZE_CAP, tile_cap
from pp3.reference._constants import DOMAIN_ACCEPT, K

FORBIDDEN = {
    "approximate division": r"\bdiv\.full\.",
    "approximate op": r"\.approx\.",
    "flush to zero": r"\.ftz\b",
    "fused multiply-add": r"\bfma\.",
    "float mad": r"\bmad\.[a-z.]*f(?:16|32|64)\b",
    "contractible float op": r"\b(?:add|sub|mul)\.f(?:16|32|64)\b",
}

# Signatures for compiling without a launch (the kinds of the launchers' arguments; "x_ptr" is per logit format).
TILE_SIG = {
    "x_ptr": "*i32", "stride_row": "i64", "v_shard": "i32", "id_offset": "i64", "keys_ptr": "*i64",
    "flags_ptr": "*i32", "tile_base": "i32", "n_tiles_total": "i32", "scratch_ptr": "*i64",
}
FINALIZE_SIG = {
    "keys_ptr": "*i64", "flags_ptr": "*i32", "n_tiles": "i32", "temp_ptr": "*fp32", "seed_ptr": "*i64",
    "round_ptr": "*i64", "pos_ptr": "*i64", "tau": "fp32", "c_ptr": "*fp64", "domain": "i64", "status_ptr": "*i8",
    "token_ptr": "*i32", "ids_ptr": "*i32", "tickets_ptr": "*i32", "scratch_ptr": "*i64",
}
CHECK_SIG = {
    "keys_ptr": "*i64", "flags_ptr": "*i32", "n_tiles": "i32", "vocab_size": "i32", "status_ptr": "*i8",
    "token_ptr": "*i32", "ids_ptr": "*i32", "tickets_ptr": "*i32",
}
_LOGITS = {"x_ptr": "*i32", "stride_b": "i64", "stride_j": "i64", "v": "i32"}
_ROW = _LOGITS | {"n_tiles": "i32"}
_CNT = {"cnt_ptr": "*i32"}
_ROWINFO = {"g_ptr": "*i32", "m_ptr": "*fp32", "s_ptr": "*fp64", "rem_ptr": "*i64"}
# what launches 2 and 3 read to weigh a row (the class gates the row)
_WEIGHTS = {"cls_ptr": "*i32", "m_ptr": "*fp32", "temp_ptr": "*fp32", "c_ptr": "*fp64"}
_DRAFT = {"dst_ptr": "*i8", "ids_ptr": "*i32", "tix_ptr": "*i32"}
_KEYS = {"seed_ptr": "*i64", "round_ptr": "*i64", "pos_ptr": "*i64"}
# The verifier's launches (_accept.py; launches 3 and 5 are one kernel): signature, and its compile-time sizes.
VERIFY_SIGS: dict[str, tuple[dict[str, str], tuple[str, ...]]] = {
    "_verify_tiles_kernel": (
        _ROW | _CNT | {"okey_ptr": "*i32", "id_ptr": "*i32", "mag_ptr": "*i32", "cls_ptr": "*i32", "g_ptr": "*i32",
                       "m_ptr": "*fp32"},
        ("D", "KIND", "TILE", "NTP"),
    ),
    "_verify_sums_kernel": (
        _ROW | _CNT | _WEIGHTS | {"sums_ptr": "*fp64", "s_ptr": "*fp64"},
        ("D", "KIND", "TILE", "TILE_LOG", "NTP", "NTP_LOG"),
    ),
    "_verify_rows_kernel": (
        _LOGITS | {"cls_ptr": "*i32"} | _ROWINFO | {"temp_ptr": "*fp32", "tok_ptr": "*i32"} | _DRAFT | _KEYS
        | {"c_ptr": "*fp64", "dom_acc": "i64", "status_ptr": "*i8", "acc_ptr": "*i32", "out_ptr": "*i32",
           "state_ptr": "*i32", "have_r": "i32", "r_bound": "i32"},
        ("D", "DP", "K", "KIND"),
    ),
    "_verify_counts_kernel": (
        _ROW | _CNT | _WEIGHTS
        | {"s_ptr": "*fp64", "state_ptr": "*i32", "counts_ptr": "*i64", "rem_ptr": "*i64", "n_prog": "i32"},
        ("D", "KIND", "TILE", "CHUNK", "NTP"),
    ),
    "_verify_residual_kernel": (
        _ROW | _CNT | {"g_ptr": "*i32", "m_ptr": "*fp32", "s_ptr": "*fp64", "temp_ptr": "*fp32", "ids_ptr": "*i32",
                       "tix_ptr": "*i32"} | _KEYS
        | {"c_ptr": "*fp64", "dom_res": "i64", "state_ptr": "*i32", "plain_ptr": "*i64", "corr_ptr": "*i64",
           "draw_ptr": "*i64"},
        ("D", "K", "KIND", "TILE", "NTP"),
    ),
    "_verify_draw_kernel": (
        _LOGITS | {"g_ptr": "*i32", "m_ptr": "*fp32", "s_ptr": "*fp64", "temp_ptr": "*fp32", "ids_ptr": "*i32",
                   "tix_ptr": "*i32", "c_ptr": "*fp64", "state_ptr": "*i32", "draw_ptr": "*i64", "out_ptr": "*i32"},
        ("D", "K", "KIND", "TILE"),
    ),
}
UNIFORM_SIG = {
    "seed_ptr": "*i64", "round_ptr": "*i64", "pos_ptr": "*i64", "s_ptr": "*i64", "out_ptr": "*i64", "domain": "i64",
}
EXPF_SIG = {"z_ptr": "*fp32", "out_ptr": "*fp32", "c_ptr": "*fp64", "n": "i64"}
PHILOX_SIG = {"ctr_ptr": "*i64", "key_ptr": "*i64", "out_ptr": "*i64"}
ROWS_SIG = {
    "src_ptr": "*i32", "dst_ptr": "*i32", "index_ptr": "*i64", "valid_ptr": "*i8", "fill": "i32", "row_len": "i32",
}

# Every @jit kernel of the exact path: the audit refuses to pass while one is left out of compile_exact_path.
KERNELS = (
    _select._tile_candidates_kernel,
    _select._finalize_kernel,
    _select._check_candidates_kernel,
    *(getattr(_accept, name) for name in VERIFY_SIGS),
    _accept._uniform_below_kernel,
    _common._expf_kernel,
    _common._philox_kernel,
    rows._gather_rows_kernel,
)


def find_forbidden(ptx: str) -> dict[str, list[str]]:
    """Forbidden instruction kinds found in ``ptx``, each with up to 3 example lines."""
    found: dict[str, list[str]] = {}
    for what, pattern in FORBIDDEN.items():
        lines = [ln.strip() for ln in ptx.splitlines() if re.search(pattern, ln)]
        if lines:
            found[what] = lines[:3]
    return found


def _compile(fn: Any, sig: dict[str, str], consts: dict[str, Any], target: GPUTarget, opts: dict[str, Any]) -> str:
    src = ASTSource(fn, sig | dict.fromkeys(consts, "constexpr"), constexprs=consts)
    text: str = triton.compile(src, target=target, options=opts).asm["ptx"]
    return text


def compile_exact_path(target: GPUTarget | None = None, options: dict[str, Any] | None = None) -> dict[str, str]:
    """PTX of every exact-path kernel variant for ``target`` (sm_90 by default): each logit format, a small and a
    large tile, both launch-2 merge paths, the candidates check, the verifier's launches (each format at depth 2,
    fp32 also at depth 5 and 256 tiles), the §11.5 uniform, the exponential and Philox on their own."""
    tgt = target or GPUTarget("cuda", 90, 32)
    opts = dict(EXACT if options is None else options)
    out: dict[str, str] = {}
    for kind in (_common.KIND_F32, _common.KIND_F16, _common.KIND_BF16):
        x_ptr = "*i32" if kind.value == 0 else "*i16"
        for tile in (32, 4096):
            consts = {"KIND": kind.value, "TILE": tile, "K": K, "CAP": tile_cap(tile), "PDL": True}
            out[f"tile_candidates[kind={kind.value},tile={tile}]"] = _compile(
                _select._tile_candidates_kernel, TILE_SIG | {"x_ptr": x_ptr}, consts, tgt, opts
            )
        for depth, tile, ntp in ((5, 1024, 256), (2, 64, 4))[0 if kind.value == 0 else 1 :]:
            sizes = {
                "D": depth, "DP": triton.next_power_of_2(depth + 1), "K": K, "KIND": kind.value, "TILE": tile,
                "TILE_LOG": tile.bit_length() - 1, "NTP": ntp, "NTP_LOG": ntp.bit_length() - 1, "CHUNK": COUNT_CHUNK,
            }
            for name, (sig, used) in VERIFY_SIGS.items():
                out[f"verify{name[7:-7]}[kind={kind.value},D={depth},tile={tile}]"] = _compile(
                    getattr(_accept, name), sig | {"x_ptr": x_ptr}, {k: sizes[k] for k in used}, tgt, opts
                )
    for nc, nt in ((32, 1), (4096, 128)):
        consts = {"NC": nc, "NT": nt, "K": K, "CAP": FINALIZE_CAP, "PDL": True}
        out[f"finalize[NC={nc}]"] = _compile(_select._finalize_kernel, FINALIZE_SIG, consts, tgt, opts)
    out["check_candidates"] = _compile(
        _select._check_candidates_kernel, CHECK_SIG, {"CT": 16, "K": K, "BAD": 8}, tgt, opts
    )
    out["uniform_below"] = _compile(_accept._uniform_below_kernel, UNIFORM_SIG, {}, tgt, opts)
    out["expf"] = _compile(_common._expf_kernel, EXPF_SIG, {"BLOCK": 1024}, tgt, opts)
    out["philox"] = _compile(_common._philox_kernel, PHILOX_SIG, {}, tgt, opts)
    out["gather_rows"] = _compile(rows._gather_rows_kernel, ROWS_SIG, {"BLOCK": 4096}, tgt, opts)
    compiled = {name.split("[")[0] for name in out}
    names = {"tile_candidates", "finalize", "check_candidates", "uniform_below", "expf", "philox", "gather_rows"} | {
        f"verify{name[7:-7]}" for name in VERIFY_SIGS
    }
    if compiled != names or len(KERNELS) != len(names):
        raise AssertionError(f"the audit compiles {sorted(compiled)}, but the exact path has {len(KERNELS)} kernels")
    return out


def launched_ptx() -> dict[str, str]:
    """PTX of every exact-path kernel this process has compiled for its GPU (the kernels it actually ran)."""
    out: dict[str, str] = {}
    for fn in KERNELS:
        for dev, caches in fn.device_caches.items():
            for key, kernel in caches[0].items():
                out[f"{fn.__name__}[dev={dev}][{hash(key) & 0xFFFF:04x}]"] = kernel.asm["ptx"]
    return out


def run_every_kernel() -> None:
    """Launch each exact-path kernel on the CUDA GPU (each logit format, sampled and T0 rows), so that
    ``launched_ptx`` holds the binaries a real run uses."""
    import torch

    from pp3 import adapters
    from pp3.kernels import accept, select

    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(0)
    for dt in (torch.float32, torch.float16, torch.bfloat16):
        x = torch.randn(2, 5000, device=dev, generator=g).to(dt)
        p = select.propose(x, torch.tensor([1.0, 0.0], device=dev), 1, 2, 3)
        select.finalize(select.tile_candidates(x), torch.tensor([1.0, 0.0], device=dev), 1, 2, 3, vocab_size=5000)
        target = torch.randn(2, 2, 5000, device=dev, generator=g).to(dt)
        accept.verify(target, torch.tensor([1.0, 0.0], device=dev), p.token[:, None], p.status[:, None],
                      p.ids[:, None], p.tickets[:, None], 1, 2, 3)
        flat, cu = adapters.target_logits_to_ragged(target, torch.tensor([1, 0], device=dev), 1)  # the row gather
        adapters.target_logits_from_ragged(flat, cu, 1)
    select.expf(-torch.rand(10, device=dev, generator=g))
    one = torch.ones(1, dtype=torch.int64, device=dev)
    select.philox(one.expand(1, 4).contiguous(), one.expand(1, 2).contiguous())
    accept.uniform_below(one, one, one, DOMAIN_ACCEPT, one)  # a domain >= 2^31, as the verifier passes it (int64)
    torch.cuda.synchronize()


def main(argv: list[str] | None = None) -> int:
    """``python -m pp3.kernels.ptx_audit [--default-options | --launched]``: print findings as one JSON document.

    Exits 1 if any exact-path kernel holds a forbidden instruction. Must run without TRITON_INTERPRET.
    """
    import argparse
    import json

    ap = argparse.ArgumentParser(prog="python -m pp3.kernels.ptx_audit")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--default-options", action="store_true", help="compile with Triton's defaults (a planted bug)")
    mode.add_argument("--launched", action="store_true", help="run every kernel on the GPU; audit what it launched")
    args = ap.parse_args(argv)
    if args.launched:
        run_every_kernel()
        ptx = launched_ptx()
    else:
        ptx = compile_exact_path(options={} if args.default_options else None)
    found = {name: find_forbidden(text) for name, text in ptx.items()}
    print(json.dumps({"kernels": len(ptx), "forbidden": {k: v for k, v in found.items() if v}}))
    return 1 if any(found.values()) else 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
