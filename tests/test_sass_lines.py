"""tools/sass_lines.py on a recorded profile (records/2026-12-09 j4: launch C of the segment selector at B = 16, the
ncu SASS page and the cubin it profiled): every instruction joins its line, the counts add up, and a CSV that is not
of that binary is refused."""

from __future__ import annotations

import csv
import lzma
from pathlib import Path

import pytest

pytest.importorskip("triton")

from tools.sass_lines import attribute

RECORD = Path(__file__).resolve().parent.parent / "records" / "2026-12-09"


def _rows() -> list[list[str]]:
    with lzma.open(RECORD / "j4_ncu_segments_b16_g1_sass.csv.xz", "rt", newline="") as f:
        return list(csv.reader(f))


def test_the_recorded_profile_joins_its_cubin() -> None:
    counts = attribute(_rows(), RECORD / "j4_segment_merge_kernel_fp32_gather.cubin")
    assert sum(counts["line"].values()) == sum(counts["call"].values()) == 405_984  # 16 rows x 8 warps x 3,171
    top, n = counts["line"].most_common(1)[0]
    assert top is not None and (Path(top[0]).name, top[1], n) == ("standard.py", 343, 89_600)  # Triton's scan
    assert all(k is None or "/pp3/" in k[0] for k in counts["call"])


def test_a_csv_of_another_binary_is_refused() -> None:
    rows = _rows()
    with pytest.raises(ValueError, match="not the profiled binary"):
        attribute(rows[:-1], RECORD / "j4_segment_merge_kernel_fp32_gather.cubin")
    swapped = [r[:] for r in rows]
    i_src = next(r for r in rows if "Source" in r).index("Source")
    swapped[-1][i_src] = "NOP ;" if not swapped[-1][i_src].strip().startswith("NOP") else "EXIT ;"
    with pytest.raises(ValueError, match="not the profiled binary"):
        attribute(swapped, RECORD / "j4_segment_merge_kernel_fp32_gather.cubin")
