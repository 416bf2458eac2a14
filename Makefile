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

.PHONY: test evidence evidence-check verify typecheck lint audit-exp audit-screen golden stats bench test-py312 test-py313 wheel-check install-check \
  triton-matrix triton-kit clean

# The CPU build of torch that requirements/cpu.txt pins: from the PyTorch CPU wheel index where it is reachable, else
# from pip's own configuration (these machines: a local folder; the unreachable index costs ~8 s). Asked for alone,
# so that only torch is looked up there (every other package of the pins, asked of an unreachable index, costs its
# own retries: ~5 minutes for the whole file).
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
TORCH_PIN := $(shell sed -n 's/^\(torch==[^ #]*\).*/\1/p' requirements/cpu.txt)

$(STAMP): requirements/cpu.txt pyproject.toml
	if [ ! -x $(VPY) ]; then $(PY) -m venv $(VENV); fi
	$(VPY) -m pip install --no-deps --extra-index-url $(TORCH_INDEX) "$(TORCH_PIN)"
	$(VPY) -m pip install -r requirements/cpu.txt
	$(VPY) -m pip install --no-deps --no-build-isolation -e .
	touch $@

# The compiled PTX audit's documents, kept by what they depend on (pp3.audit.ptx: PP3_PTX_CACHE), so that its test
# and evidence-check compile each kernel variant once.
PTX_CACHE = $(CURDIR)/build/ptx-cache

test: lint typecheck $(STAMP)
	TRITON_INTERPRET=1 HYPOTHESIS_PROFILE=ci PP3_PTX_CACHE=$(PTX_CACHE) $(VPY) -m pytest -q -n 2 --dist worksteal \
	  --durations=30 tests proptests
	TRITON_INTERPRET=1 HYPOTHESIS_PROFILE=ci $(VPY) -m pytest -q stats -m stats
	$(MAKE) --no-print-directory evidence-check

# The ledger (records/): evidence renders the generated tables of README, VERIFY, STATS and BENCHMARKS from the runs'
# rows; evidence-check prints which claims ran on today's kernel binaries (shipped) and which did not (stale), and
# fails if a generated file, a table or an archive's manifest is out of date, or a launched kernel is in no group.
evidence: $(STAMP)
	$(VPY) -m tools.evidence ledger
	PP3_PTX_CACHE=$(PTX_CACHE) $(VPY) -m tools.evidence render

evidence-check: $(STAMP)
	PP3_PTX_CACHE=$(PTX_CACHE) $(VPY) -m tools.evidence check

verify: $(STAMP)
	if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi >/dev/null 2>&1; then \
	  $(VPY) -m pp3 verify; \
	else \
	  TRITON_INTERPRET=1 $(VPY) -m pp3 verify; \
	fi

# Every Python directory of the project (pp3 and its benchmarks, tools, audits and tests).
TYPECHECK_DIRS = pp3 bench tools stats proptests tests examples conftest.py

typecheck: $(STAMP)
	MYPYPATH=typings $(VENV)/bin/mypy --strict $(TYPECHECK_DIRS)

# The package as a user gets it: build the wheel, install it with the kernels extra into a fresh venv outside the
# repository (the pins of requirements/cpu.txt as constraints, so torch is the CPU build), then, from an empty folder
# (nothing of the repository importable), run the conformance files on the reference and (pp3 verify's conformance
# part, under the interpreter) on the kernels, the README's example, and check that a repository tool says so. The
# parity suites themselves run once, in make verify.
wheel-check: $(STAMP)
	rm -rf dist build/lib build/bdist.*
	$(VPY) -m pip wheel -q --no-deps --no-build-isolation -w dist .
	awk '/^```python/ {f = 1; next} /^```/ {if (f) exit} f' README.md > dist/readme_example.py
	test -s dist/readme_example.py
	root=$$(mktemp -d) && trap 'rm -rf "$$root"' EXIT && mkdir "$$root/empty" && \
	  $(PY) -m venv "$$root/venv" && \
	  "$$root/venv/bin/python" -m pip install -q -c requirements/cpu.txt "$$(ls dist/pp3_exact-*.whl)[kernels]" && \
	  cp dist/readme_example.py "$$root/empty/example.py" && cd "$$root/empty" && \
	  "$$root/venv/bin/python" -c "import pp3; assert '$(CURDIR)' not in pp3.__file__, pp3.__file__" && \
	  "$$root/venv/bin/pp3" conformance --kernels no && \
	  TRITON_INTERPRET=1 "$$root/venv/bin/pp3" verify --parts conformance --json --out failures > verify.json && \
	  "$$root/venv/bin/python" -c "import json; d = json.load(open('verify.json')); \
	    assert d['verdict'] == 'PASS' and d['schema_version'] == 1, d" && \
	  "$$root/venv/bin/pp3" --version && \
	  "$$root/venv/bin/python" example.py && \
	  { ! "$$root/venv/bin/pp3" stats 2> stats.err; } && grep -q "repository tool" stats.err

# How pip installs the package (tools/install_check.py, needs PyPI; nothing is installed): pp3-exact[kernels] resolves
# the newest torch and Triton, an engine's torch pin stays, and make's CPU torch resolves from an index.
install-check: $(STAMP)
	rm -rf dist/install-check && $(VPY) -m pip wheel -q --no-deps --no-build-isolation -w dist/install-check .
	$(VPY) tools/install_check.py dist/install-check/pp3_exact-*.whl

# Every supported Triton beside the pinned one (requirements/cpu.txt), each installed alone into .triton/<version>
# (pip --target, no dependencies) and put first on the path, with the pinned CPU torch: the PTX audit of every kernel
# for sm_90 and the kernels' interpreter parity (pp3 verify at TRITON_MATRIX_VERIFY, and the conformance files) on
# each. TRITON_NEWEST runs with the newest NumPy for Python 3.11 (NUMPY_NEWEST) too. A Triton whose kernels change a
# bit or a PTX class fails here. The selector's parity runs through propose, the path every call takes by default
# (the other four selectors' suites run the same cases on the pinned Triton, in make verify: work done once).
TRITON_MATRIX ?= 3.7.1 3.8.0 3.9.0
TRITON_NEWEST ?= 3.9.0
NUMPY_NEWEST ?= 2.4.6
TRITON_MATRIX_VERIFY ?= --quick --selectors propose
triton-matrix: $(addprefix triton-matrix-,$(TRITON_MATRIX))

# One Triton of the matrix (make -j2 runs two side by side: each step is one process).
triton-matrix-%: $(STAMP)
	d=.triton/$*; if [ "$*" = "$(TRITON_NEWEST)" ]; then np=numpy==$(NUMPY_NEWEST); else np=; fi; \
	[ -f $$d/.stamp ] || { rm -rf $$d && $(VPY) -m pip install -q --no-deps --target $$d triton==$* $$np && touch $$d/.stamp; }; \
	echo "=== Triton $* $$np"; \
	PYTHONPATH=$$d $(VPY) -c "import numpy, triton; print('triton', triton.__version__, 'numpy', numpy.__version__)"; \
	PYTHONPATH=$$d $(VPY) -m pp3.audit.ptx > $$d/ptx.json || { cat $$d/ptx.json; exit 1; }; \
	PYTHONPATH=$$d $(VPY) -c "import json; d = json.load(open('$$d/ptx.json')); \
	  print('ptx audit:', d['verdict'], d['variants'], 'variants of', len(d['kernels']), 'kernels')"; \
	PYTHONPATH=$$d TRITON_INTERPRET=1 $(VPY) -m pp3 verify $(TRITON_MATRIX_VERIFY)

# A trimmed Triton for the GPU machine (tools/triton_kit.sh: the wheel for Python KIT_PY without the AMD backend,
# CUPTI, proton and the bundled CUDA tools, libtriton.so stripped; 3.9.0: 41 MB): .kits/triton-<TRITON_KIT>-kit.tar.xz.
# The GPU targets take it as TRITON_KIT=.kits/triton-3.9.0-kit.tar.xz (carry .kits).
KIT_PY ?= 3.12
triton-kit: $(STAMP)
	@test -n "$(TRITON_KIT)" || { echo "triton-kit: name the version, e.g. make triton-kit TRITON_KIT=3.9.0"; exit 2; }
	PYTHON=$(VPY) tools/triton_kit.sh $(TRITON_KIT) .kits $(KIT_PY)

lint: $(STAMP)
	$(VENV)/bin/ruff check .

audit-exp: $(STAMP)
	$(VPY) stats/audit_exp.py

audit-screen: $(STAMP)
	$(VPY) stats/audit_screen.py

golden: $(STAMP)
	$(VPY) tools/gen_golden.py

stats: $(STAMP)
	$(VPY) -m stats

# The end-to-end audit of draft trees at full size (SPEC.md §12; tests/test_e2e_tree.py runs a CI-sized part): every
# shape, both verifiers, T = 0, 0.5, 1, 2, and the planted tree bugs; the tables go to results/e2e_trees.md.
.PHONY: audit-e2e-trees tree-acceptance
audit-e2e-trees: $(STAMP)
	mkdir -p results
	$(VPY) -m pp3 audit-e2e --trees --n 100000 --mutant-n 20000 --markdown results/e2e_trees.md

# Accepted tokens per verification step of sampled trees, top-k trees and chains (docs/TREES.md's figures and plot).
tree-acceptance: $(STAMP)
	$(VPY) -m bench.tree_acceptance --json docs/tree_acceptance.json --csv docs/tree_acceptance.csv \
	  --plot docs/tree_acceptance.png --markdown results/tree_acceptance.md

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
	rm -rf $(VENV) .venv-3.12 .venv-3.13 .triton build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache .hypothesis
	find . -name __pycache__ -type d -prune -not -path './.git/*' -exec rm -rf {} +

# ---- GPU targets (device machine) ----
# On the device machine: its system Python (GPU_PY) with torch and Triton, no .venv; run from the repository root,
# e.g. `make verify-gpu props-gpu`, `make -j2 -O props-gpu bulk-gpu` (both at once, neither timed) or
# `make gpu-steps GPU_STEPS="gpu-env verify-gpu expf-gpu"`. Each step runs under `timeout` (the *_TIMEOUT
# variables, seconds) and logs to $(OUT); compiled kernels (Triton), FlashInfer's installed wheels and its JIT build
# live in the ignored .gpucache/, which a warm device machine keeps between calls. The device copy's .git can be
# stale: pass PP3_COMMIT=<hash> (the stamp's commit); every stamp also carries the digest of pp3's files as run.
.PHONY: flashinfer074-gpu gpu-env verify-gpu bulk-gpu bulk-verify-gpu props-gpu expf-gpu screen-gpu stats-gpu sanitize-gpu verifier-evidence-gpu verifier-next-gpu selector-next-gpu bench-gpu bench-vocab bench-drafter bench-adapters audit-e2e-gpu flashinfer-gpu law-flashinfer-gpu bench-pair ncu-gpu gpu-pack gpu-steps

GPU_PY ?= python3
OUT ?= results
GPUCACHE = $(CURDIR)/.gpucache
FI_SITE = $(GPUCACHE)/site
# Why the bench has no FlashInfer row, written by flashinfer-gpu (absent once FlashInfer runs); bench-gpu and
# bench-vocab pass it on as PP3_BENCH_NO_FLASHINFER / PP3_BENCH_FLASHINFER_NOTE.
FI_NOTE = $(GPUCACHE)/flashinfer.note

VERIFY_TIMEOUT ?= 600
VERIFY_PARTS ?= selector verifier conformance
VERIFY_SELECTORS ?=
# The suites' size: --full (the default of the GPU step), --quick, or empty for pp3 verify's standard size.
VERIFY_SIZE ?= --full
PTX_TIMEOUT ?= 300
BULK_ROWS ?= 1000000
BULK_SEED ?= 0
BULK_TIMEOUT ?= 560
VERIFY_BULK_ROWS ?= 1000000
VERIFY_BULK_SEED ?= 0
VERIFY_BULK_START ?= 0
VERIFY_BULK_SECONDS ?= 300
VERIFY_BULK_TIMEOUT ?= 560
PROPS_WORKERS ?= 6
PROPS_FILES ?= proptests/test_kernel_vs_reference.py proptests/test_invariance.py
PROPS_TIMEOUT ?= 560
EXPF_TIMEOUT ?= 200
STATS_TIMEOUT ?= 500
FI_TIMEOUT ?= 120
BENCH_B ?= 1 2 4
BENCH_D ?= 5 10
BENCH_V ?= 163840
BENCH_DTYPE ?= float32 bfloat16
BENCH_TILES ?=
BENCH_WARPS ?=
BENCH_SEGMENTS ?=
BENCH_GREEDY ?=
BENCH_IMPL ?=
BENCH_REPLAYS ?= 200
BENCH_TIMEOUT ?= 420
BENCHV_B ?= 1 4 64
BENCHV_TIMEOUT ?= 200
DRAFTER_TIMEOUT ?= 300
# e.g. DRAFTER_ARGS="--verify-only --batch 1 64"
DRAFTER_ARGS ?=
E2E_N ?= 1000000
E2E_MUTANT_N ?= 100000
E2E_TIMEOUT ?= 250
# The end-to-end audit's verifier on the GPU: triton (pp3's kernels) or flashinfer (after flashinfer-gpu).
E2E_VERIFIER ?= triton
# law-flashinfer-gpu: sequences per case of the end-to-end audit (the planted bugs run at min(LAW_N, 10^5)).
LAW_N ?= 1000000
LAW_TIMEOUT ?= 560
ADAPTERS_TIMEOUT ?= 300
SANITIZE_TIMEOUT ?= 240
SANITIZE_TOOLS ?= memcheck initcheck racecheck
SANITIZE_CASES ?=
SANITIZE_LOG = $(if $(SANITIZE_CASES),$(subst $(eval) ,-,$(strip $(SANITIZE_CASES))),all)
# compute-sanitizer from PATH or the CUDA toolkit's usual place.
SANITIZER ?= $(shell command -v compute-sanitizer 2>/dev/null || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
PAIR_ARGS ?=
PAIR_TIMEOUT ?= 530
RANK_TIMEOUT ?= 470
# The usual order: correctness first, then speed. Together they outlast one device command (10 minutes): pick steps.
GPU_STEPS ?= gpu-env verify-gpu props-gpu expf-gpu screen-gpu stats-gpu flashinfer-gpu bench-gpu bench-vocab \
  bench-drafter audit-e2e-gpu

GPU_TARGETS = flashinfer074-gpu gpu-env verify-gpu bulk-gpu bulk-verify-gpu props-gpu expf-gpu screen-gpu stats-gpu sanitize-gpu \
  verifier-evidence-gpu verifier-next-gpu selector-next-gpu bench-gpu bench-vocab \
  bench-drafter bench-adapters audit-e2e-gpu flashinfer-gpu law-flashinfer-gpu bench-pair ncu-gpu gpu-steps
# TRITON_KIT=<a kit from make triton-kit>: that Triton, unpacked once into .gpucache/kits/, first on the path of every
# GPU step, with the machine's CUDA tools in place of the ones the kit leaves out; the stamps name the Triton that ran.
TRITON_KIT ?=
KIT_SITE = $(if $(TRITON_KIT),$(GPUCACHE)/kits/$(notdir $(TRITON_KIT:.tar.xz=)))
# The machine's CUDA tool $(1): on the PATH, in a CUDA toolkit's usual place, else the one of its own Triton's wheel.
CUDA_TOOL = $(firstword $(shell { command -v $(1); ls /usr/local/cuda*/bin/$(1); $(GPU_PY) -c \
  "import os, triton; print(os.path.join(os.path.dirname(triton.__file__), 'backends/nvidia/bin/$(1)'))"; } 2>/dev/null))
$(GPU_TARGETS): export PYTHONPATH := $(if $(KIT_SITE),$(KIT_SITE):)$(CURDIR):$(FI_SITE)$(if $(PYTHONPATH),:$(PYTHONPATH))
ifneq ($(TRITON_KIT),)
$(GPU_TARGETS): | $(KIT_SITE)/.stamp
$(KIT_SITE)/.stamp: $(TRITON_KIT)
	rm -rf $(KIT_SITE) && mkdir -p $(KIT_SITE) && tar -C $(KIT_SITE) -xJf $(TRITON_KIT) && touch $@
KIT_PTXAS := $(call CUDA_TOOL,ptxas)
KIT_CUOBJDUMP := $(call CUDA_TOOL,cuobjdump)
KIT_NVDISASM := $(call CUDA_TOOL,nvdisasm)
# Triton 3.8+ compiles sm_90 and newer with "ptxas-blackwell" (its newer bundled ptxas): the machine's one serves.
$(if $(KIT_PTXAS),$(eval $(GPU_TARGETS): export TRITON_PTXAS_BLACKWELL_PATH := $(KIT_PTXAS)))
$(GPU_TARGETS): export TRITON_BACKENDS_IN_TREE := 1
$(if $(KIT_PTXAS),$(eval $(GPU_TARGETS): export TRITON_PTXAS_PATH := $(KIT_PTXAS)))
$(if $(KIT_CUOBJDUMP),$(eval $(GPU_TARGETS): export TRITON_CUOBJDUMP_PATH := $(KIT_CUOBJDUMP)))
$(if $(KIT_NVDISASM),$(eval $(GPU_TARGETS): export TRITON_NVDISASM_PATH := $(KIT_NVDISASM)))
endif
$(GPU_TARGETS): export TRITON_CACHE_DIR := $(GPUCACHE)/triton
$(GPU_TARGETS): export FLASHINFER_WORKSPACE_BASE := $(GPUCACHE)
$(GPU_TARGETS): export TRITON_INTERPRET :=
$(GPU_TARGETS): export FLASHINFER_DISABLE_JIT := $(if $(findstring fi074,$(FI_SITE)),1)
$(GPU_TARGETS): export PYTHONUNBUFFERED := 1
# Every GPU step starts so: its output folder, and a header with the time.
gpu_step = @mkdir -p $(OUT); echo "=== $@ ($$(date +%T))"
# The FlashInfer note as the bench reads it.
fi_note_env = if [ -f $(FI_NOTE) ]; then export PP3_BENCH_NO_FLASHINFER=1 PP3_BENCH_FLASHINFER_NOTE="$$(cat $(FI_NOTE))"; fi

# Python and package versions, driver, GPUs: the environment stamp, with the GPU count and NCCL's version.
gpu-env:
	$(gpu_step)
	timeout 30 nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
	timeout 60 $(GPU_PY) -c 'import json, torch; from pp3.testing.stamp import environment; \
	  print(json.dumps({**environment(), "gpus": torch.cuda.device_count(), \
	  "nccl": ".".join(map(str, torch.cuda.nccl.version()))}, indent=1))' | tee $(OUT)/env.json

# The parity suites at full size (no bulk rows) of VERIFY_PARTS, then the PTX audit of every exact-path kernel as
# launched. All three parts outlast one device command (the H200, 2026-12-02: selector 122 s, verifier and
# conformance 353 s, the audit ~60 s): run VERIFY_PARTS=selector and VERIFY_PARTS="verifier conformance" apart.
# VERIFY_SELECTORS (e.g. "greedy rescan") runs only those suites of the selector part (pp3 verify --selectors).
verify-gpu:
	$(gpu_step)
	timeout $(VERIFY_TIMEOUT) $(GPU_PY) -m pp3 verify $(VERIFY_SIZE) --parts $(VERIFY_PARTS) \
	  $(if $(VERIFY_SELECTORS),--selectors $(VERIFY_SELECTORS)) --bulk-rows 0 2>&1 \
	  | tee $(OUT)/verify.log | tail -30
	timeout $(PTX_TIMEOUT) $(GPU_PY) -m pp3.audit.ptx --launched --digests 2>&1 | tee $(OUT)/ptx_audit.json | tail -3

# BULK_ROWS random rows at V = 163840 with --bulk-seed BULK_SEED (the process pool's shutdown warnings dropped).
bulk-gpu:
	$(gpu_step)
	timeout $(BULK_TIMEOUT) $(GPU_PY) -m pp3 verify --bulk-only --bulk-rows $(BULK_ROWS) \
	  --bulk-seed $(BULK_SEED) 2>&1 | { grep -v -E 'resource_tracker|warnings.warn' || true; } \
	  | tee $(OUT)/bulk_$(BULK_SEED)$(if $(filter 0,$(PP3_PDL)),_nopdl).log | tail -4

# The verifier's bulk rows (pp3.audit.accept_bulk): VERIFY_BULK_ROWS request rows of seed VERIFY_BULK_SEED from row
# VERIFY_BULK_START at V = 163840, no batch started after VERIFY_BULK_SECONDS; the JSON (which rows were checked, the
# counts, the --seed/--start that resumes them) into $(OUT)/bulk_verify_<seed>_<start>.json, progress into the .log.
# Where its host buffers cannot be page-locked (exit status 3, nothing checked), it runs again with --pageable. Its
# kernels' first compilation (a parallel warm-up, ~30-40 s expected) comes before VERIFY_BULK_SECONDS start counting.
bulk_verify = timeout $(VERIFY_BULK_TIMEOUT) $(GPU_PY) -m pp3.audit.accept_bulk --rows $(VERIFY_BULK_ROWS) \
  --seed $(VERIFY_BULK_SEED) --start $(VERIFY_BULK_START) --max-seconds $(VERIFY_BULK_SECONDS) --json \
  --out $(OUT)/bulk_verify_failures > $(OUT)/bulk_verify_$(VERIFY_BULK_SEED)_$(VERIFY_BULK_START).json
bulk-verify-gpu:
	$(gpu_step)
	{ r=0; $(bulk_verify) || r=$$?; if [ $$r -eq 3 ]; then r=0; $(bulk_verify) --pageable || r=$$?; fi; exit $$r; } \
	  2>&1 | { grep -v -E 'resource_tracker|warnings.warn' || true; } \
	  | tee $(OUT)/bulk_verify_$(VERIFY_BULK_SEED)_$(VERIFY_BULK_START).log | tail -4

# The kernel-facing property tests of PROPS_FILES (the selector's parity and invariances; the verifier's:
# PROPS_FILES=proptests/test_accept_vs_reference.py), Hypothesis profile gpu, in PROPS_WORKERS processes.
props-gpu:
	$(gpu_step)
	rc=0; HYPOTHESIS_PROFILE=gpu timeout $(PROPS_TIMEOUT) $(GPU_PY) -m pytest -v --durations=25 -p no:cacheprovider \
	  -n $(PROPS_WORKERS) $(PROPS_FILES) > $(OUT)/props.log 2>&1 \
	  || rc=$$?; tail -25 $(OUT)/props.log; echo "proptests exit $$rc"; exit $$rc

# The exhaustive device exponential: pp3.kernels.expf on every input of the sweep against the reference's bits.
expf-gpu:
	$(gpu_step)
	timeout $(EXPF_TIMEOUT) $(GPU_PY) stats/audit_exp.py --device cuda 2>&1 | tee $(OUT)/expf_audit.log | tail -4

# The verifier's screening exponentials (both) on every input: their bound against the device expf
# (pp3.kernels.screen); the log names the card.
screen-gpu:
	$(gpu_step)
	timeout $(EXPF_TIMEOUT) $(GPU_PY) stats/audit_screen.py --device cuda 2>&1 | tee $(OUT)/screen_audit.log | tail -6

stats-gpu:
	$(gpu_step)
	timeout $(STATS_TIMEOUT) $(GPU_PY) -m stats --quick --device cuda --out $(OUT) 2>&1 | tee $(OUT)/stats.log \
	  | tail -40

# FlashInfer from the wheels carried in .whl/, installed into .gpucache/site, its JIT build warmed under a timeout
# (a failure or a slow build costs this step only); FI_NOTE then says why the bench has no FlashInfer row.
flashinfer-gpu:
	$(gpu_step)
	mkdir -p $(GPUCACHE); rm -f $(FI_NOTE); : > $(OUT)/flashinfer.log
	if [ -d $(FI_SITE)/flashinfer ] || { ls .whl/*.whl > /dev/null 2>&1 && $(GPU_PY) -m pip install -q --no-index \
	    --no-deps --no-compile --no-cache-dir --target $(FI_SITE) .whl/*.whl >> $(OUT)/flashinfer.log 2>&1; }; then \
	  if timeout $(FI_TIMEOUT) $(GPU_PY) -m bench --warm-flashinfer >> $(OUT)/flashinfer.log 2>&1; then \
	    echo "flashinfer ready"; \
	  else \
	    echo "flashinfer wheels installed but the warm-up failed or ran past its timeout:" \
	      "$$(grep -v '^\s*$$' $(OUT)/flashinfer.log | tail -1 | cut -c1-300)" > $(FI_NOTE); \
	  fi; \
	else \
	  echo "no flashinfer wheels could be installed (see flashinfer.log)" > $(FI_NOTE); \
	fi
	tail -3 $(OUT)/flashinfer.log; if [ -f $(FI_NOTE) ]; then echo "no FlashInfer row: $$(cat $(FI_NOTE))"; fi

# FlashInfer 0.7.4 without its JIT build (its README: the trimmed tree and the prebuilt sm_90a modules), from
# FI074_DIR (a copy carried with the tree, else ../shared/), into .gpucache/fi074: then `make bench-gpu FI_SITE=...`.
FI074_DIR ?= $(firstword $(wildcard .carry/flashinfer-0.7.4 ../shared/flashinfer-0.7.4))
FI074_SITE = $(GPUCACHE)/fi074
flashinfer074-gpu:
	$(gpu_step)
	@test -n "$(FI074_DIR)" || { echo "flashinfer074-gpu: no flashinfer-0.7.4 folder (.carry/ or ../shared/)"; exit 2; }
	if [ ! -d $(FI074_SITE)/flashinfer ]; then mkdir -p $(FI074_SITE) && \
	  tar -C $(FI074_SITE) -xJf $(FI074_DIR)/flashinfer-0.7.4-trimmed.tar.xz && \
	  tar -C $(FI074_SITE) -xJf $(FI074_DIR)/flashinfer-0.7.4-aot-sm90a.tar.xz && \
	  $(GPU_PY) -m pip install -q --no-index --no-deps --target $(FI074_SITE) $(FI074_DIR)/apache_tvm_ffi-*.whl; fi
	PYTHONPATH=$(FI074_SITE):$(CURDIR) FLASHINFER_DISABLE_JIT=1 $(GPU_PY) -c "import flashinfer; print('flashinfer', flashinfer.__version__)"

# The selector sweep at BENCH_V (python -m bench), into $(OUT)/bench.json, .md, .png.
bench-gpu:
	$(gpu_step)
	$(fi_note_env); timeout $(BENCH_TIMEOUT) $(GPU_PY) -m bench --batch $(BENCH_B) --depth $(BENCH_D) \
	  --vocab $(BENCH_V) --dtype $(BENCH_DTYPE) --tiles $(BENCH_TILES) --warps $(BENCH_WARPS) \
	  --segments $(BENCH_SEGMENTS) --greedy $(BENCH_GREEDY) $(if $(BENCH_IMPL),--impl $(BENCH_IMPL)) \
	  --replays $(BENCH_REPLAYS) --out $(OUT) 2>&1 | tee $(OUT)/bench.log | tail -30

# The other vocabularies: fp32, depth 5, B = BENCHV_B, the main implementations only, into $(OUT)/vocab.
bench-vocab:
	$(gpu_step)
	mkdir -p $(OUT)/vocab
	$(fi_note_env); timeout $(BENCHV_TIMEOUT) $(GPU_PY) -m bench --vocab 32000 128256 151936 262144 \
	  --batch $(BENCHV_B) --depth 5 --dtype float32 --replays 200 --out $(OUT)/vocab --impl "pp3 sampled" \
	  "pp3 sampled, no PDL" "pp3 greedy (T0)" "pp3 launch 1 only" "pp3 launch 2 only" "torch argmax" \
	  "torch topk+softmax+sample" flashinfer 2>&1 | tee $(OUT)/vocab/bench.log | tail -14

# The depth-5 draft loop and the Triton verifier (parity, latency), into $(OUT)/bench_drafter.json.
bench-drafter:
	$(gpu_step)
	timeout $(DRAFTER_TIMEOUT) $(GPU_PY) -m bench.drafter --out $(OUT) $(DRAFTER_ARGS) 2>&1 | tee $(OUT)/bench_drafter.log | tail -20

# The end-to-end losslessness audit with the drafter on the GPU and the Triton verifier.
audit-e2e-gpu:
	$(gpu_step)
	DSPARK_SAMPLED_TOP32=1 timeout $(E2E_TIMEOUT) $(GPU_PY) -m pp3 audit-e2e --device cuda --verifier $(E2E_VERIFIER) \
	  --n $(E2E_N) --mutant-n $(E2E_MUTANT_N) 2>&1 | tee $(OUT)/e2e_gpu_$(E2E_VERIFIER).log | tail -20

# FlashInfer's chain_speculative_sampling fed pp3's exact q, through the seam (pp3 verify --impl, docs/CONFORMANCE.md):
# it does not claim bit-exactness, so it is judged in law only: the end-to-end audit at LAW_N sequences per case, the
# drafter on the GPU, Holm at alpha 0.01, the planted bugs' power in the same run. After flashinfer-gpu. The versioned
# JSON document into $(OUT)/law_flashinfer.json, progress into the .log, a failing call's replay under
# $(OUT)/law_flashinfer_failures.
law-flashinfer-gpu:
	$(gpu_step)
	rc=0; DSPARK_SAMPLED_TOP32=1 timeout $(LAW_TIMEOUT) $(GPU_PY) -m pp3 verify \
	  --impl verifier=pp3.testing.peers:flashinfer --law-n $(LAW_N) --json --out $(OUT)/law_flashinfer_failures \
	  > $(OUT)/law_flashinfer.json 2> $(OUT)/law_flashinfer.log || rc=$$?; tail -4 $(OUT)/law_flashinfer.log; \
	  $(GPU_PY) -c "import json; d = json.load(open('$(OUT)/law_flashinfer.json')); l = d['verdicts']['law']; \
	    print('verify:', d['verdict'], '| bit-exact:', d['verdicts']['bit_exact']['verdict'], '| law:', l['verdict']); \
	    [print(' ', a['implementation'], a['verdict'], a.get('power'), *a.get('ran', []), sep='\n  ') for a in l.get('audits', [])]" \
	  || true; exit $$rc

# compute-sanitizer over the launchers on ordinary and adversarial inputs (python -m tools.sanitize_cases), one run
# per tool of SANITIZE_TOOLS, all at once (separate processes), logs into $(OUT)/sanitize_<cases>_<tool>.log; a tool's
# errors make its run exit 1.
sanitize-gpu:
	$(gpu_step)
	@test -n "$(SANITIZER)" || { echo "sanitize-gpu: no compute-sanitizer found (set SANITIZER=)"; exit 2; }
	for tool in $(SANITIZE_TOOLS); do \
	  { r=0; timeout $(SANITIZE_TIMEOUT) $(SANITIZER) --tool $$tool --error-exitcode 1 --print-limit 100000 \
	    --show-backtrace no $(GPU_PY) -m tools.sanitize_cases $(if $(SANITIZE_CASES),--cases $(SANITIZE_CASES)) \
	    > $(OUT)/sanitize_$(SANITIZE_LOG)_$$tool.log 2>&1 || r=$$?; echo $$r > $(OUT)/.sanitize_$$tool.rc; } & \
	done; wait; rc=0; for tool in $(SANITIZE_TOOLS); do r=$$(cat $(OUT)/.sanitize_$$tool.rc); \
	  rm -f $(OUT)/.sanitize_$$tool.rc; \
	  echo "$$tool exit $$r: $$(grep -h 'ERROR SUMMARY' $(OUT)/sanitize_$(SANITIZE_LOG)_$$tool.log | tail -1)"; \
	  [ $$r -eq 0 ] || rc=1; done; exit $$rc

# The verifier's GPU evidence in one device call, side by side (make -j): the bulk request rows from
# VERIFY_BULK_START for VERIFY_BULK_SECONDS, the gpu profile of its properties, compute-sanitizer over its cases and
# the end-to-end audit. The bulk run's reference workers yield to the other steps' processes (their niceness), so
# those finish while the bulk run goes on; each step logs as alone.
verifier-evidence-gpu:
	$(MAKE) --no-print-directory -k -j5 -O gpu-env bulk-verify-gpu props-gpu sanitize-gpu audit-e2e-gpu \
	  PROPS_FILES=proptests/test_accept_vs_reference.py PROPS_WORKERS=2 SANITIZE_CASES=verifier

# Issue 54's two designs beside the shipped verifier, in one device command (<= 9 minutes; 7 files into $(OUT)):
# env.json; then, the GPU to itself, the benchmark (bench.drafter; log bench_verify.log, table bench_verify.md, rows
# and the audit bench_drafter.json): the shipped verifier and its variants (NEXT_VARIANTS: the screen by
# ex2.approx.f32, launch 3 by the handed-over word, both) in one process, fp32 and bf16, depth 5 and 1, B in NEXT_B,
# V = 163840, each call one CUDA graph with its inputs rotated past L2, a read-only pass and FlashInfer 0.7.4's
# softmax + chain up to B = 64 (where a flashinfer-0.7.4 folder is: flashinfer074-gpu), every variant's parity with
# the reference on every row, and the launched PTX audit of every binary it ran; then side by side, each cut at
# NEXT_CHECKS_TIMEOUT: the verifier's parity suites at full size in the new variants (verify_next.log: pp3 verify
# --full --parts verifier with PP3_VERIFY_SCREEN=ex2 PP3_VERIFY_HANDOVER=1), the launched PTX audit of every entry
# point in every variant (ptx_audit.json), and the screens' bound over every fp32 input on the card followed by the
# conformance files on the kernels in the new variants (screen_conformance.log). Fails if any step failed.
NEXT_B ?= 1 4 16 64 128 256
NEXT_VARIANTS ?= "pp3" "pp3 screen ex2" "pp3 handover" "pp3 ex2+handover"
NEXT_BENCH_TIMEOUT ?= 260
NEXT_CHECKS_TIMEOUT ?= 190
NEXT_ENV = PP3_VERIFY_SCREEN=ex2 PP3_VERIFY_HANDOVER=1
verifier-next-gpu:
	$(gpu_step)
	-timeout 30 $(MAKE) --no-print-directory gpu-env > /dev/null 2>&1
	-timeout 60 $(MAKE) --no-print-directory flashinfer074-gpu > $(OUT)/bench_verify.log 2>&1
	fi=$(FI074_SITE); [ -d $$fi/flashinfer ] || fi=; r=0; \
	  PYTHONPATH=$(CURDIR)$${fi:+:$$fi} FLASHINFER_DISABLE_JIT=1 timeout $(NEXT_BENCH_TIMEOUT) $(GPU_PY) -m bench.drafter \
	  --verify-only --no-step --batch $(NEXT_B) --dtype float32 bfloat16 --depth 5 1 --variants $(NEXT_VARIANTS) \
	  --flashinfer-max-batch 64 --rotate-mb 128 --markdown $(OUT)/bench_verify.md --audit-ptx --out $(OUT) \
	  >> $(OUT)/bench_verify.log 2>&1 || r=$$?; echo "bench: exit $$r" | tee -a $(OUT)/bench_verify.log; \
	  grep -E "^launched PTX audit" $(OUT)/bench_verify.log || true; \
	  if [ -f $(OUT)/bench_verify.md ]; then cat $(OUT)/bench_verify.md; else tail -15 $(OUT)/bench_verify.log; fi
	mkdir -p $(GPUCACHE); t=$(NEXT_CHECKS_TIMEOUT); \
	{ r=0; $(NEXT_ENV) timeout $$t $(GPU_PY) -m pp3 verify --full --parts verifier --bulk-rows 0 \
	    > $(OUT)/verify_next.log 2>&1 || r=$$?; echo "parity (verifier, ex2 + handover): exit $$r" >> $(OUT)/verify_next.log; } & \
	{ r=0; timeout $$t $(GPU_PY) -m pp3.audit.ptx --launched --digests > $(OUT)/ptx_audit.json \
	    2> $(GPUCACHE)/ptx_audit.err || r=$$?; echo "ptx audit (launched): exit $$r" >> $(GPUCACHE)/ptx_audit.err; } & \
	{ s0=$$SECONDS; r=0; timeout 100 $(GPU_PY) stats/audit_screen.py --device cuda > $(OUT)/screen_conformance.log 2>&1 \
	    || r=$$?; echo "screen audit: exit $$r" >> $(OUT)/screen_conformance.log; r=0; \
	  $(NEXT_ENV) timeout $$((t - SECONDS + s0)) $(GPU_PY) -m pp3 verify --parts conformance \
	    >> $(OUT)/screen_conformance.log 2>&1 || r=$$?; \
	  echo "conformance (ex2 + handover): exit $$r" >> $(OUT)/screen_conformance.log; } & \
	wait; \
	tail -4 $(GPUCACHE)/ptx_audit.err; \
	$(GPU_PY) -c "import json; d = json.load(open('$(OUT)/ptx_audit.json')); \
	  print('ptx audit:', d['verdict'], d['variants'], 'variants,', len(d['screen']), 'with the screen,', \
	  'forbidden:', sorted(d['forbidden'])[:3])" 2> /dev/null || echo "ptx audit: no JSON"; \
	tail -12 $(OUT)/verify_next.log; grep -E "audit-screen|^inputs|exit|PASS|FAIL" $(OUT)/screen_conformance.log; \
	! grep -h -E "^(bench|parity .*|screen audit|conformance .*|ptx audit .*): exit [^0]" $(OUT)/bench_verify.log \
	  $(OUT)/verify_next.log $(OUT)/screen_conformance.log $(GPUCACHE)/ptx_audit.err

# The one-launch and row selectors (not yet shipped: LaunchConfig(selector="onelaunch"), "rows"; #53) in one device
# command of at most SELECTOR_NEXT_CHECK_TIMEOUT + SELECTOR_NEXT_BENCH_TIMEOUT seconds: side by side, their parity
# suites at full size (pp3 verify --selectors onelaunch rows), the launched PTX audit of every kernel, their tests on
# the GPU (tests/test_kernels_onelaunch.py: CUDA-graph replays among them) and a warm-up of the benchmark (each
# compiles into the one Triton cache); then, alone on the GPU, the benchmark in one process: fp32 and bf16, depth 5,
# B = SELECTOR_NEXT_B, V = 163840, the rows SELECTOR_NEXT_IMPL (the shipped propose, the one-launch selector by
# network and by rank, the row selector, the trivial 2-launch row max, the greedy kernel, torch.argmax;
# SELECTOR_NEXT_ARGS adds settings: by default the one-launch selector with one poll and the row selector in steps of
# 4096). Into $(OUT): steps.log, verify.log, ptx_audit.json, bench.json, bench.md, bench.png (and a failing parity
# case's two files, under failures/): at most 8 files. Exits 1 if any step failed.
SELECTOR_NEXT_B ?= 1 2 4 8 16 32 64 128 256
SELECTOR_NEXT_IMPL ?= "pp3 sampled" "pp3 onelaunch" "pp3 onelaunch rank" "pp3 rows" "trivial 2-launch row max" \
  "pp3 greedy kernel" "torch argmax"
SELECTOR_NEXT_ARGS ?= --onelaunch 0,0,1 --rows 8,4096
SELECTOR_NEXT_REPLAYS ?= 100
SELECTOR_NEXT_CHECK_TIMEOUT ?= 330
SELECTOR_NEXT_BENCH_TIMEOUT ?= 190
selector_next_bench = $(GPU_PY) -m bench --vocab 163840 --batch $(SELECTOR_NEXT_B) --depth 5 \
  --dtype float32 bfloat16 --impl $(SELECTOR_NEXT_IMPL) $(SELECTOR_NEXT_ARGS)
selector-next-gpu: export PP3_BENCH_NO_FLASHINFER := 1
selector-next-gpu:
	$(gpu_step)
	rc=$$(mktemp -d); { \
	  { r=0; timeout $(SELECTOR_NEXT_CHECK_TIMEOUT) $(GPU_PY) -m pp3 verify --full --parts selector \
	      --selectors onelaunch rows --bulk-rows 0 --out $(OUT)/failures > $(OUT)/verify.log 2>&1 || r=$$?; \
	      echo $$r > $$rc/verify; } & \
	  { r=0; timeout $(SELECTOR_NEXT_CHECK_TIMEOUT) $(GPU_PY) -m pp3.audit.ptx --launched --digests \
	      > $(OUT)/ptx_audit.json 2> $$rc/ptx.err || r=$$?; echo $$r > $$rc/ptx; } & \
	  { r=0; timeout $(SELECTOR_NEXT_CHECK_TIMEOUT) $(selector_next_bench) --compile-only > $$rc/warm.log 2>&1 \
	      || r=$$?; echo $$r > $$rc/warm; } & \
	  { r=0; timeout $(SELECTOR_NEXT_CHECK_TIMEOUT) $(GPU_PY) -m pytest -q -p no:cacheprovider \
	      tests/test_kernels_onelaunch.py > $$rc/tests.log 2>&1 || r=$$?; echo $$r > $$rc/tests; } & \
	  wait; \
	  echo "=== verify exit $$(cat $$rc/verify) ($$(date +%T))"; tail -25 $(OUT)/verify.log; \
	  echo "=== ptx audit exit $$(cat $$rc/ptx)"; tail -5 $$rc/ptx.err; tail -4 $(OUT)/ptx_audit.json; \
	  echo "=== bench warm-up exit $$(cat $$rc/warm)"; tail -3 $$rc/warm.log; \
	  echo "=== tests/test_kernels_onelaunch.py exit $$(cat $$rc/tests)"; tail -15 $$rc/tests.log; \
	  echo "=== bench ($$(date +%T))"; \
	  r=0; timeout $(SELECTOR_NEXT_BENCH_TIMEOUT) $(selector_next_bench) --replays $(SELECTOR_NEXT_REPLAYS) \
	    --out $(OUT) || r=$$?; \
	  echo $$r > $$rc/bench; echo "=== bench exit $$r ($$(date +%T))"; \
	} 2>&1 | tee $(OUT)/steps.log | { grep -v '^{"impl"' || true; }; \
	bad=0; for s in verify ptx warm tests bench; do [ "$$(cat $$rc/$$s)" = 0 ] || bad=1; done; rm -rf $$rc; exit $$bad

# The adapters' time and memory in CUDA graphs at V = 163840 (python -m bench.adapters), into $(OUT)/bench_adapters.json.
bench-adapters:
	$(gpu_step)
	timeout $(ADAPTERS_TIMEOUT) $(GPU_PY) -m bench.adapters --out $(OUT) 2>&1 | tee $(OUT)/bench_adapters.log | tail -20

# The GPU pair (device kind nvidia-h200-x2): topology, then python -m bench.pair (PAIR_ARGS, e.g. --quick or
# --steps parity) into $(OUT)/pair.json. NVLink multicast off in every process; the ranks get RANK_TIMEOUT seconds,
# the whole bench PAIR_TIMEOUT.
bench-pair: export NCCL_NVLS_ENABLE := 0
bench-pair: export TORCH_SYMM_MEM_DISABLE_MULTICAST := 1
bench-pair: export NVSHMEM_DISABLE_NVLS := 1
bench-pair:
	$(gpu_step)
	timeout 30 nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv
	timeout 30 nvidia-smi topo -m | tee $(OUT)/topo.txt
	env | grep -E '^(NCCL|TORCH_SYMM|NVSHMEM)_' | sort
	timeout -k 10 $(PAIR_TIMEOUT) $(GPU_PY) -m bench.pair --out $(OUT) --timeout $(RANK_TIMEOUT) $(PAIR_ARGS) 2>&1 \
	  | tee $(OUT)/pair.log | { grep -v -E '^\[rank [0-9]+ [0-9:]+\] \{' || true; } | tail -150

# Nsight Compute on both launches of the selector (bench/ncu_profile.sh: stall reasons, instructions, cycles).
ncu-gpu:
	$(gpu_step)
	OUT=$(OUT) bash bench/ncu_profile.sh

# Everything under $(OUT) into one results_HHMMSS.tgz.
gpu-pack:
	cd $(OUT) && find . -mindepth 1 -maxdepth 1 ! -name '*.tgz' -printf '%P\n' \
	  | tar czf results_$$(date +%H%M%S).tgz --remove-files -T - && ls -la

# GPU_STEPS's steps in order, each run even if an earlier one failed, then gpu-pack; fails if any step failed.
gpu-steps:
	rc=0; $(MAKE) --no-print-directory -k $(GPU_STEPS) || rc=$$?; $(MAKE) --no-print-directory gpu-pack; exit $$rc
# ---- end of GPU targets ----

# The draft trees' kernels on the GPU (issue #55; prepared on a CPU machine, not yet run): the tree parity tests
# natively with every golden case (--runslow; the captured-graph test), the tree bulk parity (pp3.audit.tree_bulk:
# TREE_BULK_ROWS target rows at V = 163840, reference in a process pool), the launched PTX audit (its exercise runs
# the tree entry points) and the speed rows of bench.trees (fp32/bf16, B 1-64, trees of 8-64 nodes).
TREE_BULK_ROWS ?= 1000000
TREE_BULK_SECONDS ?= 1500
.PHONY: tree-kernels-gpu
tree-kernels-gpu: export PYTHONPATH := $(CURDIR)$(if $(PYTHONPATH),:$(PYTHONPATH))
tree-kernels-gpu:
	$(gpu_step)
	rc=0; \
	timeout 900 $(GPU_PY) -m pytest -q -p no:cacheprovider --runslow tests/test_kernels_tree.py 2>&1 \
	  | tee $(OUT)/tree_tests.log | tail -5 || rc=1; \
	timeout $$(( $(TREE_BULK_SECONDS) + 300 )) $(GPU_PY) -m pp3.audit.tree_bulk --rows $(TREE_BULK_ROWS) \
	  --max-seconds $(TREE_BULK_SECONDS) --workers 14 --json 2>&1 | tee $(OUT)/tree_bulk.json | tail -3 || rc=1; \
	timeout 900 $(GPU_PY) -m pp3.audit.ptx --launched --digests > $(OUT)/ptx_audit_trees.json || rc=1; \
	timeout 900 $(GPU_PY) -m bench.trees --json 2>&1 | tee $(OUT)/bench_trees.jsonl | tail -40 || rc=1; \
	exit $$rc
