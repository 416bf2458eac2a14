"""pp3's test kit, shipped with the package: one record of a call (``call``), one exact comparator (``compare``), the
conformance files (``golden``), one catalogue of planted bugs (``mutants``), the Markov drafter (``markov``), the
stateful test drafters (``stateful``), a peer's verifier with the reference's convention (``peers``: FlashInfer's
chain), CUDA-graph timing (``timing``) and the environment stamp (``stamp``). Importing it imports nothing else;
each module imports torch (and the kernels) only where it runs them (``peers`` imports torch, and FlashInfer only
where it runs it)."""
