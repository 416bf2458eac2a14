"""Developer tools (golden-vector generator, exp audit, exp table generator) and the oracles they share with tests."""
