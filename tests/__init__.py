"""Reference tests: one SPEC clause per test, golden vectors, mutation checks."""
