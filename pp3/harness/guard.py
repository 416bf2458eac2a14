"""Every call of an implementation under the seam runs here, so that no implementation can break the run: one that
raises, hangs, returns the wrong fields, writes into its inputs or returns something else when the same call is
replayed gets a named failure (``FAILURES``), and the run goes on.

Each call runs in a worker thread with a time limit (``Guard.time_limit``), not in a subprocess: the call's inputs
(CUDA tensors among them) and the implementation's state (its CUDA context, Triton's compiled kernels, the
interpreter) stay in this process, so a call costs what it costs outside the harness. A thread cannot be stopped,
so a call past its limit is abandoned (a daemon thread) and named ``timeout``; after ``MAX_ABANDONED`` of them the
implementation gets no more calls (a hung device would time every later call out) and its remaining cases count as
failed with that reason. The result is read (brought to the host, checked field by field) and the inputs are
compared with their snapshot inside the same thread, since either can wait on a device that never finishes.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any

import numpy as np

from pp3.harness.protocol import Implementation
from pp3.reference import Proposal, Verdict
from pp3.testing import adapt
from pp3.testing.call import AcceptCall, Call
from pp3.testing.compare import fields, rows_per_field

# The named failures of a call, in the order a call is checked.
FAILURES = ("raised", "timeout", "wrong-output", "wrote-inputs", "nondeterministic", "mismatch")
MAX_ABANDONED = 3
DEFAULT_TIME_LIMIT = 300.0  # seconds per call: a first call on a GPU compiles its kernels (tens of seconds)


@dataclasses.dataclass(frozen=True)
class Outcome:
    """One checked call: the reference's record, the implementation's (None when there is none), the first named
    failure (None: the call passed) and what it was, and the mismatching rows per field (every row for a call that
    returned nothing usable)."""

    want: Proposal | Verdict
    got: Proposal | Verdict | None
    failure: str | None
    detail: str
    mismatches: dict[str, int]
    seconds: float

    @property
    def failed(self) -> bool:
        return self.failure is not None


class Guard:
    """Runs calls of one implementation (``check``), counting the calls it had to abandon."""

    def __init__(self, impl: Implementation, device: Any = None, time_limit: float = DEFAULT_TIME_LIMIT) -> None:
        self.impl = impl
        self.device = impl.device if device is None else device
        self.time_limit = time_limit
        self.abandoned = 0

    def invocation(self, call: Call | AcceptCall) -> adapt.Invocation:
        if isinstance(call, AcceptCall):
            return adapt.verifier(self.impl, call, self.device)
        return adapt.selector(self.impl, call, self.device)

    def run(self, inv: adapt.Invocation) -> tuple[Any, str | None, str]:
        """(record, failure, detail) of one invocation in a worker thread."""
        if self.abandoned >= MAX_ABANDONED:
            return None, "timeout", f"not called: {self.abandoned} earlier calls ran past {self.time_limit:g} s"
        before = adapt.snapshot(inv.args)
        box: dict[str, Any] = {}

        def work() -> None:
            try:
                box["record"] = inv()
                box["changed"] = adapt.changed(before, inv.args, inv.names)
            except adapt.WrongOutput as e:
                box["wrong"] = str(e)
            except BaseException as e:  # anything the implementation raises is its failure, never the harness's
                box["raised"] = f"{type(e).__name__}: {e}"

        worker = threading.Thread(target=work, name=f"pp3-call-{self.impl.label}", daemon=True)
        worker.start()
        worker.join(self.time_limit)
        if worker.is_alive():
            self.abandoned += 1
            return None, "timeout", f"no result after {self.time_limit:g} s (abandoned in its thread)"
        if "raised" in box:
            return None, "raised", box["raised"].splitlines()[0] if box["raised"] else "raised"
        if "wrong" in box:
            return None, "wrong-output", box["wrong"]
        if box["changed"]:
            return box["record"], "wrote-inputs", f"wrote into {', '.join(box['changed'])}"
        return box["record"], None, ""

    def check(self, call: Call | AcceptCall, replay: bool = False, want: Any = None) -> Outcome:
        """The call on the reference (``want``, unless given) and on the implementation; with ``replay``, and for
        every call that mismatches, the same call once more from fresh inputs, whose result must be the same bits."""
        t0 = time.perf_counter()
        want = call.run_reference() if want is None else want
        got, failure, detail = self.run(self.invocation(call))
        if got is None:
            mism = dict.fromkeys(fields(want), call.b)
            return Outcome(want, None, failure, detail, mism, time.perf_counter() - t0)
        mism = rows_per_field(got, want)
        if failure is None and (replay or any(mism.values())):
            again, fail2, detail2 = self.run(self.invocation(call))
            if again is None or fail2 is not None:
                failure, detail = fail2, f"on a replay of the same call: {detail2}"
            else:
                differ = [f for f in fields(want) if not np.array_equal(getattr(again, f), getattr(got, f))]
                if differ:
                    failure = "nondeterministic"
                    detail = f"a replay of the same call returned other {', '.join(differ)}"
        if failure is None and any(mism.values()):
            bad = {f: m for f, m in mism.items() if m}
            failure, detail = "mismatch", f"mismatching rows per field {bad}"
        return Outcome(want, got, failure, detail, mism, time.perf_counter() - t0)
