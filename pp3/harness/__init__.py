"""The seam through which pp3 checks any implementation of its semantic IDs, its own included (docs/CONFORMANCE.md).

- ``protocol``: what an implementation is (``Implementation``, ``Capabilities``), each role's calling protocol, and
  how one is named and loaded (``load``: ``PKG.MOD:ATTR``, an entry point of the group ``pp3.implementations``, or
  pp3's own ``pp3-kernels`` / ``pp3-reference``);
- ``builtin``: pp3's Triton kernels and NumPy reference as implementations;
- ``guard``: every call under a time limit in a worker thread, its result checked, its inputs checked unchanged,
  replays compared (a case as an implementation's arguments: ``pp3.testing.adapt``);
- ``xfail``: the implementer's expected-failures file;
- ``pytest_plugin``: ``pytest --pp3-impl ROLE=NAME`` (the suites inside an engine's own CI, ``suite_tests``).

``pp3 verify --impl ROLE=NAME`` (``pp3.audit.parity``) runs the suites, the bulk rows and the conformance files
(``pp3.audit.conformance``) through it, and the lossless-in-law verdict (``pp3.audit.law``). NumPy only at import.
"""

from pp3.harness.protocol import (
    ROLES,
    Capabilities,
    Implementation,
    ImplementationError,
    Role,
    load,
)

__all__ = ["ROLES", "Capabilities", "Implementation", "ImplementationError", "Role", "load"]
