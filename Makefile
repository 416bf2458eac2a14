# pp3 — the one interface. CI (.ci/run) calls these same targets.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := test

PY ?= $(shell command -v python3.11 >/dev/null 2>&1 && echo python3.11 || echo python3)
VENV = .venv
STAMP = $(VENV)/.stamp
VPY = $(VENV)/bin/python

# Extra interpreters for the NumPy-only reference tests (override on the command line).
PY312 ?= $(HOME)/.pyenv/versions/3.12.1/bin/python3
PY313 ?= $(HOME)/.pyenv/versions/3.13.0/bin/python3
REF_PYTEST = -m pytest -q -p no:cacheprovider tests proptests/test_reference_vs_oracle.py -m "not interpreter"

.PHONY: test verify typecheck lint audit-exp golden stats bench test-py312 test-py313 wheel-check clean

$(STAMP): requirements/cpu.txt pyproject.toml
	if [ ! -x $(VPY) ]; then $(PY) -m venv $(VENV); fi
	$(VPY) -m pip install -r requirements/cpu.txt
	$(VPY) -m pip install --no-deps --no-build-isolation -e .
	touch $@

test: lint typecheck $(STAMP)
	TRITON_INTERPRET=1 HYPOTHESIS_PROFILE=ci $(VPY) -m pytest -q -n 2 tests proptests
	TRITON_INTERPRET=1 HYPOTHESIS_PROFILE=ci $(VPY) -m pytest -q stats -m stats

verify: $(STAMP)
	if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi >/dev/null 2>&1; then \
	  $(VPY) -m pp3.audit.parity; \
	else \
	  TRITON_INTERPRET=1 $(VPY) -m pp3.audit.parity; \
	fi

# Every Python directory of the project (pp3 and its benchmarks, tools, audits and tests).
TYPECHECK_DIRS = pp3 bench tools stats proptests tests conftest.py

# The package as a user gets it: build the wheel, install it with the kernels extra into a fresh venv outside the
# repository (the pins of requirements/cpu.txt as constraints, so torch is the CPU build), then, from an empty folder
# (nothing of the repository importable), run the conformance files, `pp3 verify` under the interpreter, the
# README's example, and check that a repository tool says so.
wheel-check: $(STAMP)
	rm -rf dist
	$(VPY) -m pip wheel -q --no-deps --no-build-isolation -w dist .
	awk '/^```python/ {f = 1; next} /^```/ {if (f) exit} f' README.md > dist/readme_example.py
	test -s dist/readme_example.py
	root=$$(mktemp -d) && trap 'rm -rf "$$root"' EXIT && mkdir "$$root/empty" && \
	  $(PY) -m venv "$$root/venv" && \
	  "$$root/venv/bin/python" -m pip install -q -c requirements/cpu.txt "$$(ls dist/pp3_exact-*.whl)[kernels]" && \
	  cp dist/readme_example.py "$$root/empty/example.py" && cd "$$root/empty" && \
	  "$$root/venv/bin/python" -c "import pp3; assert '$(CURDIR)' not in pp3.__file__, pp3.__file__" && \
	  "$$root/venv/bin/pp3" conformance --kernels no && \
	  TRITON_INTERPRET=1 "$$root/venv/bin/pp3" conformance --kernels yes && \
	  TRITON_INTERPRET=1 "$$root/venv/bin/pp3" verify --quick --json --out failures > verify.json && \
	  "$$root/venv/bin/python" -c "import json; d = json.load(open('verify.json')); assert d['verdict'] == 'PASS', d" && \
	  "$$root/venv/bin/python" example.py && \
	  { ! "$$root/venv/bin/pp3" stats 2> stats.err; } && grep -q "repository tool" stats.err

lint: $(STAMP)
	$(VENV)/bin/ruff check .

audit-exp: $(STAMP)
	$(VPY) tools/audit_exp.py

golden: $(STAMP)
	$(VPY) tools/gen_golden.py

stats: $(STAMP)
	$(VPY) -m stats

bench: $(STAMP)
	$(VPY) -m bench

.venv-3.12/.stamp: requirements/reference.txt
	rm -rf .venv-3.12
	$(PY312) -m venv .venv-3.12
	.venv-3.12/bin/python -m pip install -r requirements/reference.txt
	touch $@

.venv-3.13/.stamp: requirements/reference.txt
	rm -rf .venv-3.13
	$(PY313) -m venv .venv-3.13
	.venv-3.13/bin/python -m pip install -r requirements/reference.txt
	touch $@

test-py312: .venv-3.12/.stamp
	PYTHONPATH=. .venv-3.12/bin/python $(REF_PYTEST)

test-py313: .venv-3.13/.stamp
	PYTHONPATH=. .venv-3.13/bin/python $(REF_PYTEST)

clean:
	rm -rf $(VENV) .venv-3.12 .venv-3.13 build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache .hypothesis
	find . -name __pycache__ -type d -prune -not -path './.git/*' -exec rm -rf {} +
