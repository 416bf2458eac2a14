"""Where a profiled kernel's instructions come from: Nsight Compute's per-instruction counts (the SASS page that
``bench/ncu_profile.sh`` writes with NCU_SOURCE=1) joined with the line table of the same cubin (Triton compiles with
line info; NCU_SOURCE=1 copies launch C's cubins from Triton's cache), summed per source line.

Nsight Compute attributes its counts to SASS addresses only (the CSV of ``--page source --print-source sass``);
``nvdisasm -gi`` (Triton's own copy: ``pp3.audit.ptx.triton_tool``) gives each address its file and line; nothing
joins the two, hence this script.
Lines outside ``pp3/`` (Triton's ``standard.py``: its reductions and scans) are shown as they are and, in a second
table, charged to the pp3 line last seen before them in the code (the call that the compiler expanded there, as far
as its scheduling keeps them together).

usage: python bench/sass_lines.py NCU_SASS.csv KERNEL.cubin [--top N]
"""

from __future__ import annotations

import argparse
import collections
import csv
import re
import subprocess
from pathlib import Path

from pp3.audit.ptx import triton_tool

Line = tuple[str, int]
ROOT = Path(__file__).resolve().parent.parent


def line_table(cubin: Path) -> list[tuple[str, Line | None, Line | None]]:
    """Per SASS instruction in address order: its opcode, its source line, and the last pp3 line before it."""
    text = subprocess.run([str(triton_tool("nvdisasm")), "-c", "-gi", str(cubin)], capture_output=True, text=True,
                          check=True).stdout
    out: list[tuple[str, Line | None, Line | None]] = []
    line: Line | None = None
    last_pp3: Line | None = None
    for row in text.splitlines():
        m = re.match(r'\s*//## File "(.*?)", line (\d+)', row)
        if m:
            line = (m.group(1), int(m.group(2)))
            if "/pp3/" in m.group(1):
                last_pp3 = line
            continue
        m = re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+(.*?);", row)
        if m:
            out.append((_opcode(m.group(1)), line, last_pp3))
    return out


def _opcode(sass: str) -> str:
    words = sass.strip().split()
    return (words[1] if words[0].startswith("@") else words[0]).split(".")[0]


def _label(line: Line | None) -> str:
    if line is None:
        return "(no line)"
    path, n = line
    rel = path.split("/pp3/", 1)[1] if "/pp3/" in path else Path(path).name
    source = ROOT / "pp3" / rel if "/pp3/" in path else None
    code = source.read_text().splitlines()[n - 1].strip()[:70] if source and source.exists() else ""
    return f"{rel}:{n}  {code}"


def attribute(rows: list[list[str]], cubin: Path) -> dict[str, collections.Counter[Line | None]]:
    """The CSV's executed warp-instructions per source line ("line"), per pp3 line with Triton's library code charged
    to the pp3 line before it ("call"), and the stall samples per such pp3 line ("samples"). ValueError when the
    cubin is not the profiled binary (another instruction count, or another opcode at any address)."""
    head = next(i for i, r in enumerate(rows) if "Source" in r and "Instructions Executed" in r)
    hdr, data = rows[head], rows[head + 1 :]
    i_src, i_exe = hdr.index("Source"), hdr.index("Instructions Executed")
    i_smp = hdr.index("Warp Stall Sampling (All Samples)")
    table = line_table(cubin)
    if len(table) != len(data) or any(op != _opcode(r[i_src]) for (op, _, _), r in zip(table, data, strict=True)):
        raise ValueError(f"{cubin} is not the profiled binary: {len(table)} instructions, the CSV {len(data)}")
    out: dict[str, collections.Counter[Line | None]] = {k: collections.Counter() for k in ("line", "call", "samples")}
    for (_, line, last_pp3), r in zip(table, data, strict=True):
        n = int(r[i_exe].replace(",", ""))
        call = line if line is not None and "/pp3/" in line[0] else last_pp3
        out["line"][line] += n
        out["call"][call] += n
        out["samples"][call] += int(r[i_smp].replace(",", ""))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("csv", type=Path, help="ncu --page source --csv --print-source sass, one kernel")
    parser.add_argument("cubin", type=Path, help="the cubin that was profiled")
    parser.add_argument("--top", type=int, default=25, help="rows per table")
    args = parser.parse_args()
    try:
        counts = attribute(list(csv.reader(args.csv.open())), args.cubin)
    except ValueError as e:
        raise SystemExit(str(e)) from None
    total = sum(counts["line"].values())
    print(f"{total:,} warp-instructions executed")
    titles = {"line": "by source line", "call": "by pp3 line (Triton's library code charged to its caller)"}
    for kind, title in titles.items():
        print(f"-- {title}")
        for line, n in counts[kind].most_common(args.top):
            extra = f"  {counts['samples'][line]:4d} samples" if kind == "call" else ""
            print(f"{n:9,d} {100 * n / total:5.1f} %{extra}  {_label(line)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
