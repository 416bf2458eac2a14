"""Hypothesis property tests: the Triton kernels against the NumPy reference, bit for bit (SPEC.md §10)."""
