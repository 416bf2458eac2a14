"""The PTX audit of every exact-path kernel: no instruction that could change a bit.

    python -m pp3.audit.ptx [--default-options | --launched] [--only KERNEL ...] [--digests] [--sass]

Forbidden in PTX: approximate division/reciprocal/exp (``div.full``, ``.approx``), flush-to-zero (``.ftz``), fused
multiply-add (``fma.``/float ``mad.``), float add/sub/mul without an explicit ``.rn`` (ptxas may contract those;
``.rn``-qualified ones it never fuses). One exception (SPEC.md §11.12): inside the source lines of the verifier's
hardware screening exponential (``SCREEN_FUNCTION``) the instructions of ``SCREEN_ALLOWED`` (``ex2.approx.f32``,
``fma.rn.f32``), exactly those, are the screen's: each variant's count of them is recorded (``screen`` in the
document) and every other forbidden instruction, or one of these anywhere else, is a finding. Where an instruction
comes from is the PTX's own line information (each instruction's last ``.loc`` before it, Triton's default;
without it nothing is the screen's). The audit finds its kernels by itself:

1. **Discovery:** every ``@triton.jit`` function defined in a module of ``pp3.kernels``.
2. **Recording:** the package's entry points run at small and large sizes (``exercise``) with every kernel launch
   intercepted (``JITFunction.__getitem__``; nothing runs), so each launch is recorded as ``pp3.kernels.launchers``
   makes it: the kernel, its arguments, its compile-time values and its options; once as on a GPU without
   programmatic dependent launch and once as on an sm_90 GPU with it.
3. **Classification:** every discovered function must be a launched kernel or be called, directly or through other
   helpers, by one; any other fails the audit (a kernel nothing launches cannot be audited, nor trusted).
4. **Compilation:** each distinct launch is compiled for sm_90 (Triton's wheel ships ptxas: no GPU needed), with the
   options it was launched with; a failure to compile fails the audit.

``--default-options`` compiles with Triton's default options instead (no ``config.EXACT``): a planted bug the audit
must catch. ``--launched`` runs ``exercise`` on the CUDA GPU and audits the binaries this process actually launched.
``--digests`` adds a digest of each variant's code (its PTX without debug lines), so that "no binary changed" is a
comparison of two runs; ``--sass`` adds each variant's static SASS instruction count (the wheel's cuobjdump);
``--only`` compiles the variants of the named kernels alone (discovery, recording and classification stay whole).
Prints one JSON document; exits 1 on any finding. Must run without ``TRITON_INTERPRET``.

``PP3_PTX_CACHE=DIR`` keeps each compiled audit's document in DIR under a key of everything it depends on (every
file of the package as it is on disk, Python's, torch's and Triton's versions, the options), so that ``make test``
compiles each variant once for its test and for ``make evidence-check``.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import hashlib
import importlib
import json
import os
import pkgutil
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TypeAlias

import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton.runtime.jit import JITFunction

import pp3.kernels
from pp3.kernels.config import EXACT, SCREENS, LaunchConfig

Jit: TypeAlias = "JITFunction[..., Any]"  # any @triton.jit function

SCHEMA_VERSION = 1
FORBIDDEN = {
    "approximate division": r"\bdiv\.full\.",
    "approximate op": r"\.approx\.",
    "flush to zero": r"\.ftz\b",
    "fused multiply-add": r"\bfma\.",
    "float mad": r"\bmad\.[a-z.]*f(?:16|32|64)\b",
    "contractible float op": r"\b(?:add|sub|mul)\.f(?:16|32|64)\b",
}
# SPEC.md §11.12: the one function whose lines may hold these instructions (its value reaches only the verifier's S~).
SCREEN_FUNCTION = "pp3.kernels._common._expf_screen_ex2"
SCREEN_ALLOWED = {"ex2.approx.f32": r"ex2\.approx\.f32\s", "fma.rn.f32": r"fma\.rn\.f32\s"}
_PREDICATE = r"(?:@!?%\w+\s+)?"  # an instruction's guard, if it has one
SM90 = GPUTarget("cuda", 90, 32)
# The verifier as shipped and in its other variants: between them every binary of either screen and either launch 3.
VERIFY_VARIANTS = (LaunchConfig(screen="pinned", handover=False), LaunchConfig(screen="ex2", handover=True))
_POINTER = {
    torch.bool: "*i1", torch.int8: "*i8", torch.uint8: "*u8", torch.int16: "*i16", torch.int32: "*i32",
    torch.int64: "*i64", torch.float16: "*fp16", torch.bfloat16: "*bf16", torch.float32: "*fp32",
    torch.float64: "*fp64",
}


SourceLines = tuple[str, range]  # a source file (its path from the package root: "pp3/...") and a range of its lines


def screen_lines() -> SourceLines:
    """Where ``SCREEN_FUNCTION`` was written when it was defined (the source its binaries are compiled from): its
    module's file from the package root and its lines, the decorator's to the body's last. The file is matched by
    that tail: Triton's cache hands out a binary compiled from the same source elsewhere (another copy of the
    package) with that place's paths in its line information, and the same line numbers (they are in its key)."""
    module, name = SCREEN_FUNCTION.rsplit(".", 1)
    jit: Jit = getattr(importlib.import_module(module), name)
    first = jit.starting_line_number
    return "/".join(module.split(".")) + ".py", range(first, first + len(jit.raw_src))


def _files(ptx: str) -> dict[str, str]:
    """The PTX's ``.file`` directives: index -> path with "/" separators (one quoted path, or a directory and a
    name)."""
    files = {}
    for m in re.finditer(r'^\s*\.file\s+(\d+)\s+"([^"]*)"(?:\s*,?\s*"([^"]*)")?', ptx, re.MULTILINE):
        path = os.path.join(m.group(2), m.group(3)) if m.group(3) else m.group(2)
        files[m.group(1)] = os.path.normpath(path).replace(os.sep, "/")
    return files


def find_forbidden(ptx: str, screen: SourceLines | None = None) -> tuple[dict[str, list[str]], dict[str, int]]:
    """Forbidden instruction kinds found in ``ptx``, each with up to 3 example lines, and the instructions of
    ``SCREEN_ALLOWED`` that the lines ``screen`` account for, counted (those are not findings)."""
    files = _files(ptx) if screen is not None else {}
    found: dict[str, list[str]] = {}
    counted: dict[str, int] = {}
    here: tuple[str, int] | None = None  # the source line of the last .loc
    for ln in ptx.splitlines():
        text = ln.split("//", 1)[0].strip()
        loc = re.match(r"\.loc\s+(\d+)\s+(\d+)", text)
        if loc:
            here = (files.get(loc.group(1), ""), int(loc.group(2)))
            continue
        kinds = [what for what, pattern in FORBIDDEN.items() if re.search(pattern, text)]
        if not kinds or text.startswith(".file"):
            continue
        allowed = next((name for name, pattern in SCREEN_ALLOWED.items() if re.match(_PREDICATE + pattern, text)),
                       None)
        if (allowed and screen is not None and here is not None and here[1] in screen[1]
                and ("/" + here[0]).endswith("/" + screen[0])):
            counted[allowed] = counted.get(allowed, 0) + 1
            continue
        for what in kinds:
            examples = found.setdefault(what, [])
            if len(examples) < 3:
                examples.append(text)
    return found, counted


def code_digest(ptx: str) -> str:
    """A digest of the code of ``ptx``: its instructions and labels without the debug information (``.loc``,
    ``.file``, the debug sections, comments), which moves with every edit of a source line."""
    body = ptx.split("\t.section\t.debug", 1)[0]
    lines = []
    for ln in body.splitlines():
        s = ln.split("//", 1)[0].strip()
        if s and not s.startswith((".loc", ".file", "$L__tmp", "$L__func")):
            lines.append(s)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]


# ------------------------------------------------------------------------------------------------------ discovery


def discover() -> dict[str, Jit]:
    """Every ``@triton.jit`` function defined in a module of ``pp3.kernels``, by qualified name."""
    found: dict[str, Jit] = {}
    for info in pkgutil.walk_packages(pp3.kernels.__path__, "pp3.kernels."):
        mod = importlib.import_module(info.name)
        for name, obj in vars(mod).items():
            if isinstance(obj, JITFunction) and obj.fn.__module__ == mod.__name__:
                found[f"{mod.__name__}.{name}"] = obj
    return found


def _callees(fn: Jit) -> set[Jit]:
    """The jit functions that ``fn``'s body names (``f(...)`` or ``module.f(...)``, resolved in its globals)."""
    scope = fn.fn.__globals__
    out: set[Jit] = set()
    for node in ast.walk(ast.parse(fn.src)):
        obj: Any = None
        if isinstance(node, ast.Name):
            obj = scope.get(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            obj = getattr(scope.get(node.value.id), node.attr, None)
        if isinstance(obj, JITFunction) and obj is not fn:
            out.add(obj)
    return out


def reachable(kernels: set[Jit]) -> set[Jit]:
    """``kernels`` and every jit function they call, directly or through others."""
    seen = set(kernels)
    todo = list(kernels)
    while todo:
        for callee in _callees(todo.pop()):
            if callee not in seen:
                seen.add(callee)
                todo.append(callee)
    return seen


# ------------------------------------------------------------------------------------------------------ recording


@dataclasses.dataclass(frozen=True)
class Launch:
    """One kernel launch as a launcher makes it: what compiling it takes."""

    fn: Jit
    signature: tuple[tuple[str, str], ...]  # (parameter, Triton type) of the run-time arguments
    constexprs: tuple[tuple[str, Any], ...]  # (parameter, value) of the compile-time ones
    options: tuple[tuple[str, Any], ...]  # launch options (num_warps, enable_fp_fusion, launch_pdl, ...)

    @property
    def name(self) -> str:
        consts = ",".join(f"{k}={v}" for k, v in self.constexprs)
        types = ",".join(t for _, t in self.signature)
        opts = ",".join(f"{k}={v}" for k, v in self.options if k in ("num_warps", "launch_pdl"))
        return f"{self.fn.__name__}[{consts}][{types}][{opts}]"


def _type_of(value: Any) -> str:
    """The Triton type a launch gives a run-time argument (as the JIT does: a tensor is a pointer to its dtype, an
    int the narrowest of i32, i64, u64, a float fp32)."""
    if isinstance(value, torch.Tensor):
        return _POINTER[value.dtype]
    if isinstance(value, bool):
        return "i1"
    if isinstance(value, int):
        return "i32" if -(1 << 31) <= value < 1 << 31 else "i64" if -(1 << 63) <= value < 1 << 63 else "u64"
    if isinstance(value, float):
        return "fp32"
    raise TypeError(f"a launch argument of type {type(value).__name__}")


def _launch_of(fn: Jit, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Launch:
    params = {p.name: p for p in fn.params}
    bound = dict(zip(params, args, strict=False)) | {k: v for k, v in kwargs.items() if k in params}
    options = tuple(sorted((k, v) for k, v in kwargs.items() if k not in params))
    sig = tuple((p.name, _type_of(bound[p.name])) for p in fn.params if not p.is_constexpr)
    consts = tuple((p.name, bound[p.name]) for p in fn.params if p.is_constexpr)
    return Launch(fn, sig, consts, options)


@contextlib.contextmanager
def intercepted() -> Iterator[list[Launch]]:
    """Every ``kernel[grid](...)`` inside the block is recorded instead of run (on the CPU, with the launchers' CPU
    checks satisfied as under the interpreter). Yields the list of launches."""
    launches: list[Launch] = []
    original = JITFunction.__getitem__
    env = os.environ.get("TRITON_INTERPRET")

    def record(self: Jit, grid: Any) -> Any:
        return lambda *args, **kwargs: launches.append(_launch_of(self, args, kwargs))

    JITFunction.__getitem__ = record  # type: ignore[method-assign,assignment]
    os.environ["TRITON_INTERPRET"] = "1"  # the kernels' checks take CPU tensors only under the interpreter
    try:
        yield launches
    finally:
        JITFunction.__getitem__ = original  # type: ignore[method-assign]
        if env is None:
            del os.environ["TRITON_INTERPRET"]
        else:
            os.environ["TRITON_INTERPRET"] = env


def exercise(device: torch.device) -> None:
    """Call every entry point of ``pp3.kernels`` (and the adapters' row gather) on ``device``: each logit format,
    sampled and T0 rows, small and large rows (both merge paths of launch 2, small and large tiles; the segment
    selector with and without launch B; the one-launch selector's short and long segments, the row selector, each by
    network and by rank), the candidates check, the verifier at depths 1, 2 and 5 (and its large tile at fp32) as
    shipped and in its other variants (``VERIFY_VARIANTS``), the draft trees' draw and verifiers
    (``_exercise_trees``), and the one-function entries."""
    from pp3.kernels import LaunchConfig, accept, launchers, select
    from pp3.reference._constants import DOMAIN_ACCEPT

    g = torch.Generator(device=device).manual_seed(0)
    temp = torch.tensor([1.0, 0.0], device=device)
    for dt in (torch.float32, torch.float16, torch.bfloat16):
        for v in (100, 5000, 163840):
            x = torch.randn(2, v, device=device, generator=g).to(dt)
            p = select.propose(x, temp, 1, 2, 3)  # "auto": the segment selector
            select.propose(x, temp, 1, 2, 3, launch=LaunchConfig(selector="tiles"))
            select.propose(torch.cat([x] * 4), temp.repeat(4), 1, 2, 3)  # 8 rows: the long segments
            select.propose(torch.cat([x] * 8), temp.repeat(8), 1, 2, 3)  # 16 rows: C gathers (no launch B)
            if v == 163840:  # the selectors not yet shipped: short segments (2 rows) and long ones (16), the row
                for kind in ("onelaunch", "rows"):  # selector, each by rank too (fp32)
                    select.propose(x, temp, 1, 2, 3, launch=LaunchConfig(selector=kind))
                    if dt == torch.float32:
                        select.propose(x, temp, 1, 2, 3, launch=LaunchConfig(selector=kind, top_rank=True))
                select.propose(torch.cat([x] * 8), temp.repeat(8), 1, 2, 3, launch=LaunchConfig(selector="onelaunch"))
            select.greedy(x)  # "auto": the keys at fp32, the rescan at fp16 and bf16
            select.greedy(x, launch=LaunchConfig(greedy="keys"))
            select.greedy(x, launch=LaunchConfig(greedy="rescan"))
            select.finalize(select.tile_candidates(x, tile=32 if v == 100 else None), temp, 1, 2, 3, vocab_size=v)
        select.propose_sharded([x[:, :1000], x[:, 1000:]], temp, 1, 2, 3, tile=4096)
        select.greedy_sharded([x[:, :1000], x[:, 1000:]], tile=1024)
        shapes = ((2, 1, 5000), (2, 2, 5000), (2, 5, 163840)) + (((6, 5, 163840),) if dt == torch.float32 else ())
        for b, depth, v in shapes:  # 6 rows at depth 5: the large tile (config.VERIFY_SMALL_ENTRIES)
            target = torch.randn(b, depth + 1, v, device=device, generator=g).to(dt)
            temps = temp.repeat(b // 2)
            p = select.propose(target[:, 0].contiguous(), temps, 1, 2, 3)
            tok, st, ids, tix = (t[:, None].expand(-1, depth, *t.shape[1:]).contiguous()
                                 for t in (p.token, p.status, p.ids, p.tickets))
            for how in VERIFY_VARIANTS:
                accept.verify(target, temps, tok, st, ids, tix, 1, 2, 3, launch=how)
        _exercise_trees(device, dt, g)
    select.expf(-torch.rand(10, device=device, generator=g))
    for screen in SCREENS:
        accept.expf_screen(-torch.rand(10, device=device, generator=g), screen)
    one = torch.ones(1, dtype=torch.int64, device=device)
    select.philox(one.expand(1, 4).contiguous(), one.expand(1, 2).contiguous())
    accept.uniform_below(one, one, one, DOMAIN_ACCEPT, one)  # a domain >= 2^31, as the verifier passes it (int64)
    index = torch.tensor([1, 0], device=device)
    valid = torch.tensor([True, False], device=device)
    for dt in (torch.int8, torch.int16, torch.float32, torch.int64):
        launchers.gather_rows(torch.zeros(2, 3000, dtype=dt, device=device), index, valid, 0)
    if device.type == "cuda":
        from pp3 import adapters

        target = torch.randn(2, 2, 5000, device=device, generator=g)
        flat, cu = adapters.target_logits_to_ragged(target, torch.tensor([1, 0], device=device), 1)
        adapters.target_logits_from_ragged(flat, cu, 1)
        torch.cuda.synchronize()


def _exercise_trees(device: torch.device, dt: torch.dtype, g: torch.Generator) -> None:
    """The draft trees' entry points (SPEC.md §12, ``pp3.kernels.tree``) on a 2x2 tree: the draw with both kinds of
    children, both verifiers, at a small and the large vocabulary."""
    from pp3.kernels import tree

    parents = [-1, 0, 0, 1, 1, 2, 2]
    temp = torch.tensor([1.0, 0.0], device=device)
    for v in (5000, 163840):
        x = torch.randn(2, 3, v, device=device, generator=g).to(dt)
        for children in ("sampled", "top-k"):
            tree.propose_tree(x, temp, 1, 2, 3, parents, [0, 1, 2], 1.0, children)
        target = torch.randn(2, 7, v, device=device, generator=g).to(dt)
        tok = torch.zeros(2, 7, dtype=torch.int32, device=device)
        st = torch.zeros(2, 7, dtype=torch.int8, device=device)
        ids = torch.zeros(2, 7, 32, dtype=torch.int32, device=device)
        tree.verify_tree(target, temp, parents, tok, st, ids, ids.clone(), 1, 2, 3)
        tree.verify_walk(target, temp, parents, tok, st, 1, 2, 3)


def recorded() -> list[Launch]:
    """The distinct launches of ``exercise`` on the CPU, as on a GPU without and with programmatic dependent launch."""
    from pp3.kernels import launchers

    seen: dict[Launch, None] = {}
    for pdl in (False, True):
        with intercepted() as launches, _pdl(launchers, pdl):
            exercise(torch.device("cpu"))
        seen.update(dict.fromkeys(launches))
    return list(seen)


@contextlib.contextmanager
def _pdl(launchers: Any, on: bool) -> Iterator[None]:
    """The launchers decide PDL as on an sm_90 GPU (``on``) or as on one without it."""
    original = launchers.use_pdl
    launchers.use_pdl = lambda device, config: on and config.pdl is not False
    try:
        yield
    finally:
        launchers.use_pdl = original


# ------------------------------------------------------------------------------------------------------ compiling


def compile_launch(launch: Launch, *, default_options: bool = False) -> Any:
    """``launch`` compiled for sm_90 with its options (without ``config.EXACT`` when ``default_options``)."""
    consts = dict(launch.constexprs)
    src = ASTSource(launch.fn, dict(launch.signature) | dict.fromkeys(consts, "constexpr"), constexprs=consts)
    opts = {k: v for k, v in launch.options if not (default_options and k in EXACT)}
    return triton.compile(src, target=SM90, options=opts)


def triton_tool(name: str) -> Path:
    """One of the CUDA binary tools that Triton's wheel carries (cuobjdump, nvdisasm, ptxas): the same on every
    machine that runs the audit, GPU or not; where Triton is told to use another (``TRITON_CUOBJDUMP_PATH`` and the
    like, as with a trimmed Triton that carries none: ``make triton-kit``), that one."""
    own = os.environ.get(f"TRITON_{name.upper()}_PATH")
    return Path(own) if own else Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name


def sass_count(cubin: bytes) -> int:
    """Static SASS instructions of a cubin (Triton's own cuobjdump)."""
    tool = triton_tool("cuobjdump")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        sass = subprocess.run([str(tool), "-sass", f.name], capture_output=True, text=True, check=True).stdout
    return sum(1 for ln in sass.splitlines() if re.match(r"\s+/\*[0-9a-f]{4,}\*/\s+\S", ln))


def audit(*, default_options: bool = False, digests: bool = False, sass: bool = False,
          only: Sequence[str] = ()) -> dict[str, Any]:
    """Discover, record, classify and compile (module docstring); the findings as one document. ``only``: compile
    the launches of the kernels of these names alone (each must be a launched kernel: ValueError otherwise)."""
    jit = discover()
    launches = recorded()
    kernels = {ln.fn for ln in launches}
    unknown = sorted(set(only) - {k.__name__ for k in kernels})
    if unknown:
        raise ValueError(f"only: no launched kernel is named {', '.join(unknown)}")
    known = reachable(kernels)
    doc: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "mode": "default options" if default_options else "compiled",
        "functions": len(jit),
        "kernels": sorted(n for n, f in jit.items() if f in kernels),
        "unclassified": sorted(n for n, f in jit.items() if f not in known),
        "variants": len(launches),
        "failed": {},
        "forbidden": {},
        "screen_function": SCREEN_FUNCTION,
        "screen": {},  # variant -> its SCREEN_ALLOWED instructions in SCREEN_FUNCTION's lines, counted
    }
    if only:
        launches = [ln for ln in launches if ln.fn.__name__ in only]
        doc |= {"only": sorted(only), "variants": len(launches)}
    screen = screen_lines()
    for ln in launches:
        try:
            compiled = compile_launch(ln, default_options=default_options)
        except Exception as e:  # any failure to compile is a finding of its own
            lines = [x.strip() for x in str(e).splitlines() if x.strip()]
            doc["failed"][ln.name] = f"{type(e).__name__}: {' / '.join(lines[:1] + lines[-1:])}"
            continue
        _findings(doc, ln.name, compiled, screen, digests=digests, sass=sass)
    return _verdict(doc)


def _findings(doc: dict[str, Any], name: str, compiled: Any, screen: SourceLines, *, digests: bool,
              sass: bool) -> None:
    ptx: str = compiled.asm["ptx"]
    found, counted = find_forbidden(ptx, screen)
    if found:
        doc["forbidden"][name] = found
    if counted:
        doc["screen"][name] = counted
    if digests:
        doc.setdefault("digests", {})[name] = code_digest(ptx)
    if sass:
        doc.setdefault("sass", {})[name] = sass_count(compiled.asm["cubin"])


def _verdict(doc: dict[str, Any]) -> dict[str, Any]:
    bad = doc["forbidden"] or doc["failed"] or doc.get("unclassified") or doc["variants"] == 0
    doc["verdict"] = "FAIL" if bad else "PASS"
    return doc


def audit_launched(*, digests: bool = False, sass: bool = False, run_exercise: bool = True) -> dict[str, Any]:
    """``exercise`` on the CUDA GPU (unless not ``run_exercise``: a benchmark audits what it ran), then every binary
    this process compiled for it, as launched."""
    if run_exercise:
        exercise(torch.device("cuda"))
    doc: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "mode": "launched", "failed": {}, "forbidden": {},
                           "screen_function": SCREEN_FUNCTION, "screen": {}}
    n = 0
    screen = screen_lines()
    for name, fn in sorted(discover().items()):
        for dev, caches in fn.device_caches.items():
            for key, compiled in caches[0].items():
                n += 1
                _findings(doc, f"{name}[dev={dev}][{hash(key) & 0xFFFF:04x}]", compiled, screen, digests=digests,
                          sass=sass)
    doc["variants"] = n
    return _verdict(doc)


def cache_key(options: dict[str, Any]) -> str:
    """What a compiled audit depends on: the package's files, the versions of Python, torch and Triton, the options."""
    h = hashlib.sha256(json.dumps([sys.version, torch.__version__, triton.__version__, options], sort_keys=True,
                                  default=str).encode())
    pkg = Path(pp3.kernels.__file__).resolve().parents[1]
    for f in sorted(pkg.rglob("*.py")):
        h.update(str(f.relative_to(pkg)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:24]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pp3.audit.ptx", description=__doc__.split("\n\n")[0])
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--default-options", action="store_true", help="compile with Triton's defaults (a planted bug)")
    mode.add_argument("--launched", action="store_true", help="run every entry point on the GPU; audit what it ran")
    ap.add_argument("--digests", action="store_true", help="add a digest of each variant's code (no debug lines)")
    ap.add_argument("--sass", action="store_true", help="add each variant's static SASS instruction count")
    ap.add_argument("--only", nargs="+", default=(), metavar="KERNEL",
                    help="compile only these kernels' variants (function names, e.g. _verify_sums_kernel)")
    args = ap.parse_args(argv)
    if args.only and args.launched:
        ap.error("--only: not with --launched (which audits every binary the run compiled)")
    if os.environ.get("TRITON_INTERPRET") == "1":
        print("python -m pp3.audit.ptx: must run without TRITON_INTERPRET=1 (it compiles the kernels)", file=sys.stderr)
        return 2
    if args.launched:
        doc = audit_launched(digests=args.digests, sass=args.sass)
    else:
        options = {"default_options": args.default_options, "digests": args.digests, "sass": args.sass,
                   "only": sorted(args.only)}
        cached = Path(os.environ["PP3_PTX_CACHE"], f"{cache_key(options)}.json") if os.environ.get("PP3_PTX_CACHE") \
            else None
        if cached is not None and cached.exists():
            doc = json.loads(cached.read_text())
        else:
            try:
                doc = audit(default_options=args.default_options, digests=args.digests, sass=args.sass,
                            only=args.only)
            except ValueError as e:
                ap.error(f"--{e}")
            if cached is not None:
                cached.parent.mkdir(parents=True, exist_ok=True)
                cached.write_text(json.dumps(doc, indent=1))
    print(json.dumps(doc, indent=1))
    return 0 if doc["verdict"] == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
