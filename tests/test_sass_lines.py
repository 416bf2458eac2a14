"""bench/sass_lines.py on a recorded profile (tests/data/, from records/2026-12-03/h200-d: launch C of the segment
selector at B = 16, the ncu SASS page and the cubin it profiled): every instruction joins its line, the counts add
up, and a CSV that is not of that binary is refused."""

from __future__ import annotations

import csv
import lzma
from pathlib import Path

import pytest

pytest.importorskip("triton")

from bench.sass_lines import attribute

DATA = Path(__file__).resolve().parent / "data"


def _rows() -> list[list[str]]:
    with lzma.open(DATA / "j4_ncu_segments_b16_g1_sass.csv.xz", "rt", newline="") as f:
        return list(csv.reader(f))


@pytest.fixture(scope="module")
def cubin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The profiled binary (kept compressed in tests/data/)."""
    path = tmp_path_factory.mktemp("sass") / "j4_segment_merge_kernel_fp32_gather.cubin"
    path.write_bytes(lzma.decompress((DATA / "j4_segment_merge_kernel_fp32_gather.cubin.xz").read_bytes()))
    return path


def test_the_recorded_profile_joins_its_cubin(cubin: Path) -> None:
    counts = attribute(_rows(), cubin)
    assert sum(counts["line"].values()) == sum(counts["call"].values()) == 405_984  # 16 rows x 8 warps x 3,171
    top, n = counts["line"].most_common(1)[0]
    assert top is not None and (Path(top[0]).name, top[1], n) == ("standard.py", 343, 89_600)  # Triton's scan
    assert all(k is None or "/pp3/" in k[0] for k in counts["call"])


def test_a_csv_of_another_binary_is_refused(cubin: Path) -> None:
    rows = _rows()
    with pytest.raises(ValueError, match="not the profiled binary"):
        attribute(rows[:-1], cubin)
    swapped = [r[:] for r in rows]
    i_src = next(r for r in rows if "Source" in r).index("Source")
    swapped[-1][i_src] = "NOP ;" if not swapped[-1][i_src].strip().startswith("NOP") else "EXIT ;"
    with pytest.raises(ValueError, match="not the profiled binary"):
        attribute(swapped, cubin)
