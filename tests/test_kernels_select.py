"""The Triton selector: the golden comparison, its argument checks, its exponential and its launch options.

Runs the kernels through Triton's interpreter on the CPU (TRITON_INTERPRET=1, set by the Makefile and by conftest.py
where no GPU is listed) or natively on a CUDA GPU. Kernel-vs-reference fuzzing and invariances live in proptests/.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from pp3 import reference as ref  # noqa: E402
from pp3.kernels import _common, _select, config, expf, propose  # noqa: E402
from pp3.testing.golden import Case, Expected, load_golden, row_mismatch  # noqa: E402

pytestmark = pytest.mark.interpreter
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def kernel_outputs(case: Case) -> Expected:
    """Run pp3.kernels.propose on a golden case, logits in the case's own dtype (raw bits)."""
    out: Expected = case.call().run_kernel(DEVICE)
    return out


def mismatching_rows(cases: list[Case], run: Callable[[Case], Expected], report: list[str]) -> int:
    bad = 0
    for case in cases:
        got = run(case)
        for r in range(case.B):
            msg = row_mismatch(case, got, r)
            if msg is not None:
                bad += 1
                report.append(msg)
    return bad


def test_golden_comparison_can_fail() -> None:
    """The comparison flags a kernel whose remainder goes to slot 0 instead of the rank-0 slot (every golden row on
    the kernels is make verify's: ``pp3 verify``'s conformance part, ``pp3.audit.conformance``)."""

    def wrong(case: Case) -> Expected:
        got = kernel_outputs(case)
        t = got.tickets.copy()
        ok = got.status == 0
        t[ok, 0] += 1
        t[ok, 1] -= 1
        return Expected(got.status, got.token, got.ids, t)

    assert mismatching_rows(load_golden()[:6], wrong, []) > 0


class _NoLaunch:
    """Stands in for a kernel: any launch fails the test."""

    def __getitem__(self, grid: object) -> None:
        raise AssertionError("a kernel was launched before the arguments were checked")


@pytest.mark.parametrize(
    ("kwargs", "error", "name"),
    [
        ({"logits": np.zeros((2, 5), np.float32)}, TypeError, "logits"),  # NumPy, not a tensor
        ({"logits": torch.zeros(2, 5, dtype=torch.float64)}, TypeError, "logits"),
        ({"logits": torch.zeros(5)}, ValueError, "logits"),
        ({"logits": torch.zeros(0, 5)}, ValueError, "logits"),
        ({"seed": -1}, ValueError, "seed"),
        ({"seed": 1 << 64}, ValueError, "seed"),
        ({"seed": 1.5}, TypeError, "seed"),
        ({"round": [1, 2, 3]}, ValueError, "round"),
        ({"position": torch.zeros(2, dtype=torch.float32)}, TypeError, "position"),
        ({"target_temperature": "hot"}, TypeError, "target_temperature"),
        ({"target_temperature": [1.0, 1.0, 1.0]}, ValueError, "target_temperature"),
        ({"tau": 0.0}, ValueError, "tau"),
        ({"tau": float("nan")}, ValueError, "tau"),
        ({"tau": 1e-50}, ValueError, "tau"),  # rounds to 0 in fp32
        ({"tile": 48}, ValueError, "tile"),
        ({"tile": 16}, ValueError, "tile"),
        ({"logits": torch.zeros(1, 1 << 20), "tile": 32}, ValueError, "tile"),  # 32768 tiles > MAX_TILES
    ],
)
def test_bad_arguments_raise_before_any_launch(
    monkeypatch: pytest.MonkeyPatch, kwargs: dict[str, object], error: type[Exception], name: str
) -> None:
    monkeypatch.setattr(_select, "_tile_candidates_kernel", _NoLaunch())
    monkeypatch.setattr(_select, "_finalize_kernel", _NoLaunch())
    args: dict[str, object] = {
        "logits": torch.zeros(2, 5),
        "target_temperature": 1.0,
        "seed": 1,
        "round": 2,
        "position": 3,
        "tau": 0.7,
    }
    args.update(kwargs)
    # on the kernels' device, so that only the named argument is wrong (on a GPU machine a CPU tensor is refused)
    args = {k: a.to(DEVICE) if isinstance(a, torch.Tensor) else a for k, a in args.items()}
    tile = args.pop("tile", None)
    with pytest.raises(error, match=name):
        propose(**args, tile=tile)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("logits", "error", "text"),
    [
        (torch.zeros(2, 5).to_sparse(), TypeError, "dense"),
        (torch.zeros(2, 5, device="meta"), ValueError, "CUDA GPU"),
    ],
)
def test_unusable_tensors_raise_naming_the_argument(logits: object, error: type[Exception], text: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_select, "_tile_candidates_kernel", _NoLaunch())
    with pytest.raises(error, match=f"logits.*{text}"):
        propose(logits, 1.0, 1, 2, 3)  # type: ignore[arg-type]


@pytest.mark.parametrize("shape", [(0, 3), (2, 0)], ids=["B=0", "T=0"])
def test_finalize_refuses_empty_candidates(shape: tuple[int, int], monkeypatch: pytest.MonkeyPatch) -> None:
    from pp3.kernels import Candidates, finalize

    monkeypatch.setattr(_select, "_finalize_kernel", _NoLaunch())
    cands = Candidates(keys=torch.zeros((*shape, 32), dtype=torch.int64), flags=torch.zeros(shape, dtype=torch.int32))
    with pytest.raises(ValueError, match="cands"):
        finalize(cands, 1.0, 1, 2, 3, vocab_size=100)


def test_no_gpu_and_no_interpreter_says_what_to_set(monkeypatch: pytest.MonkeyPatch) -> None:
    """A CPU tensor without TRITON_INTERPRET=1: one clear ValueError before any launch, not Triton's driver error."""
    if torch.cuda.is_available():
        pytest.skip("on a GPU machine a CPU tensor is an ordinary caller error")
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    monkeypatch.setattr(_select, "_tile_candidates_kernel", _NoLaunch())
    with pytest.raises(ValueError, match="TRITON_INTERPRET=1"):
        propose(torch.zeros(2, 5), 1.0, 1, 2, 3)


def test_device_exponential_equals_reference() -> None:
    """The kernels' expf (E1-E9 in fp64) against the reference on random z, subnormal results and edges."""
    rng = np.random.default_rng(7)
    z = np.concatenate(
        [
            -rng.random(20000, dtype=np.float32) * 110,
            -87.0 - rng.random(5000, dtype=np.float32) * 17,  # subnormal results and zeros
            np.array([0.0, -0.0, -np.inf, -104.0, -103.97, -1e-45, -1e-7], np.float32),
        ]
    ).astype(np.float32)
    got = expf(torch.from_numpy(z).to(DEVICE)).cpu().numpy()
    want = ref.expf(z)
    bad = np.flatnonzero(got.view(np.uint32) != want.view(np.uint32))
    assert bad.size == 0, [(f"{z[i]:a}", f"{got[i]:a}", f"{want[i]:a}") for i in bad[:5]]


class _Spy:
    """Stands in for a kernel: records the options of every launch."""

    def __init__(self) -> None:
        self.options: list[dict[str, object]] = []

    def __getitem__(self, grid: object) -> object:
        def launch(*args: object, **kwargs: object) -> None:
            self.options.append(kwargs)

        return launch


def test_exact_options_are_passed_on_every_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every launch of propose, with either selector (and a custom launch configuration), is given the EXACT
    options."""
    names = ("_tile_candidates_kernel", "_finalize_kernel", "_segment_max_kernel", "_segment_filter_kernel",
             "_segment_merge_kernel")
    spies = {name: _Spy() for name in names}
    for name, spy in spies.items():
        monkeypatch.setattr(_select, name, spy)
    for selector in ("tiles", "segments"):  # each forced: "auto" picks by the batch size
        propose(torch.zeros(2, 5000, device=DEVICE), 1.0, 1, 2, 3, launch=config.LaunchConfig(selector=selector))
        propose(torch.zeros(2, 300, device=DEVICE), 1.0, 1, 2, 3,
                launch=config.LaunchConfig(warps=(4, 2), segment_warps=(2, 2, 1), pdl=False, selector=selector))
        propose(torch.zeros(2, 5000, device=DEVICE), 1.0, 1, 2, 3,
                launch=config.LaunchConfig(selector=selector, segment_gather=True))  # C gathers: no launch B
    assert config.EXACT == {"enable_fp_fusion": False, "enable_reflect_ftz": False}
    for name, spy in spies.items():
        assert len(spy.options) == (2 if name == "_segment_filter_kernel" else 3), name
        for opts in spy.options:
            assert {k: opts[k] for k in config.EXACT} == config.EXACT, (name, opts)
    assert [o["num_warps"] for o in spies["_finalize_kernel"].options] == [8, 2, 8]
    assert [o["num_warps"] for o in spies["_segment_merge_kernel"].options] == [4, 1, 8]


@pytest.mark.parametrize(
    ("env", "capability", "interpret", "expected"),
    [
        ({}, (9, 0), "0", True),  # Hopper: on by default
        ({"PP3_PDL": "1"}, (9, 0), "0", True),
        ({"PP3_PDL": "0"}, (9, 0), "0", False),  # the switch
        ({}, (8, 0), "0", False),  # Ampere has no griddepcontrol
        ({}, (9, 0), "1", False),  # never in the interpreter
    ],
)
def test_pdl_default_and_switch(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], capability: tuple[int, int], interpret: str, expected: bool
) -> None:
    """Programmatic dependent launch: on for CUDA devices of compute capability >= 9, off with PP3_PDL=0, on older
    devices and in the interpreter (config.use_pdl, read at every launch); a LaunchConfig fixes it."""
    monkeypatch.delenv("PP3_PDL", raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("TRITON_INTERPRET", interpret)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    assert config.use_pdl(torch.device("cuda", 0)) is expected
    assert config.use_pdl(torch.device("cpu")) is False
    on, off = config.LaunchConfig(pdl=True), config.LaunchConfig(pdl=False)
    assert config.use_pdl(torch.device("cuda", 0), off) is False
    assert config.use_pdl(torch.device("cuda", 0), on) is (capability[0] >= 9 and interpret == "0")


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("pdl", 0, TypeError),  # 0 == False, but not False: it turned PDL on (use_pdl)
        ("pdl", 1, TypeError),
        ("pdl", "off", TypeError),
        ("warps", (8.0, 8), TypeError),  # Triton's launch would fail on num_warps=8.0
        ("warps", 8, TypeError),
        ("warps", [8, 8], TypeError),
        ("warps", (True, 8), TypeError),
        ("warps", (8,), ValueError),
        ("warps", (8, 3), ValueError),
        ("segment_warps", (4, 1, 4.0), TypeError),
        ("segment_warps", (4, 1), ValueError),
        ("segment_gather", 1, TypeError),
        ("selector", None, TypeError),
        ("selector", "fast", ValueError),
        ("greedy", 0, TypeError),
        ("greedy", "max", ValueError),
        ("segment", 64.0, TypeError),
        ("segment", True, TypeError),
        ("segment", 48, ValueError),
        ("segment", 16, ValueError),
        ("selector", "one", ValueError),
        ("onelaunch_warps", 4.0, TypeError),
        ("onelaunch_warps", True, TypeError),
        ("onelaunch_warps", 3, ValueError),
        ("top_rank", 1, TypeError),
        ("top_rank", None, TypeError),
        ("polls", True, TypeError),
        ("polls", 2.0, TypeError),
        ("polls", 0, ValueError),
        ("polls", 65, ValueError),
        ("max_registers", "128", TypeError),
        ("max_registers", 16, ValueError),
        ("max_registers", 300, ValueError),
    ],
)
def test_launch_config_checks_every_field_when_made(field: str, value: object, error: type[Exception]) -> None:
    """A LaunchConfig refuses a wrong field when it is made, naming the field: a wrong type with TypeError, a wrong
    value with ValueError."""
    with pytest.raises(error, match=rf"^{field}: "):
        config.LaunchConfig(**{field: value})  # type: ignore[arg-type]


def test_launch_config_pdl_keeps_its_three_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue's reproducer: pdl=0 would have switched PDL on on Hopper even with PP3_PDL=0; only None, True and
    False are settings, and False stays off."""
    monkeypatch.setenv("PP3_PDL", "0")
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    with pytest.raises(TypeError, match=r"^pdl: "):
        config.LaunchConfig(pdl=0)  # type: ignore[arg-type]
    assert config.use_pdl(torch.device("cuda"), config.LaunchConfig(pdl=False)) is False
    assert config.use_pdl(torch.device("cuda"), config.LaunchConfig()) is False
    assert config.use_pdl(torch.device("cuda"), config.LaunchConfig(pdl=True)) is True


@triton.jit
def _tree_kernel(w_ptr: tl.tensor, out_ptr: tl.tensor, N: tl.constexpr, LOG: tl.constexpr) -> None:
    row = tl.program_id(0).to(tl.int64)
    w = tl.load(w_ptr + row * N + tl.arange(0, N))
    tl.store(out_ptr + row, _common._tree(w, N, LOG))


@pytest.mark.parametrize("n", [32, 512, 4096])  # the selector's slots; the verifier's tile; a larger tile
def test_kernel_tree_is_the_adjacent_pairs_tree(n: int) -> None:
    """§5 step 4 / §11.4: ``_common._tree`` adds adjacent pairs first. Row 0 separates it from other orders: 1, 0,
    2^-53, 2^-53, then zeros sums to 1 + 2^-52 by the tree, to 1 by a left fold or by pairing halves first (i with
    i + n/2: 1 + 2^-53 rounds to 1 twice). Rows 1-3: random weights over 40 binades, against the reference's tree."""
    from pp3.reference import tickets

    rng = np.random.default_rng(n)
    w = np.zeros((4, n), dtype=np.float64)
    w[0, :4] = [1.0, 0.0, 2.0**-53, 2.0**-53]
    w[1:] = rng.random((3, n)) * 2.0 ** rng.integers(-40, 0, (3, n))
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    out = torch.empty(4, dtype=torch.float64, device=dev)
    _tree_kernel[(4,)](torch.from_numpy(w).to(dev), out, N=n, LOG=n.bit_length() - 1, **config.EXACT)
    got = out.cpu().numpy()
    assert got[0] == 1.0 + 2.0**-52
    np.testing.assert_array_equal(got.view(np.uint64), tickets.pairwise_sum(w).view(np.uint64))


@pytest.mark.parametrize(("triton_v", "numpy_v", "refused"), [("3.6.0", "2.4.6", True), ("3.6.0", "2.3.5", False),
                                                            ("3.9.0", "2.4.6", False)])
def test_the_interpreter_refuses_the_numpy_it_fails_with(
    triton_v: str, numpy_v: str, refused: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Triton 3.6's interpreter with NumPy >= 2.4 fails inside a launch (triton-lang/triton#9171): one line before."""
    import importlib.metadata

    from pp3.kernels import checks

    if DEVICE != "cpu":
        pytest.skip("the interpreter's check runs for CPU tensors")
    versions = {"triton": triton_v, "numpy": numpy_v}
    monkeypatch.setattr(importlib.metadata, "version", versions.__getitem__)
    checks._interpreter_runs.cache_clear()
    try:
        if refused:
            with pytest.raises(RuntimeError, match=r"Triton 3\.6\.0's interpreter .* NumPy 2\.4\.6"):
                checks.logits("logits", torch.zeros(1, 4))
        else:
            checks.logits("logits", torch.zeros(1, 4))
    finally:
        checks._interpreter_runs.cache_clear()
