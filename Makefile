# Thin wrapper around CMake: `make run` and `make test` are the quick start (README.md); `make data`
# installs the real data sets.
BUILD      ?= build
JOBS       ?= $(shell nproc)
# nvcc is often installed outside PATH; CMake is pointed at it when it is there.
NVCC       := $(firstword $(shell command -v nvcc 2>/dev/null) $(wildcard /usr/local/cuda/bin/nvcc))
CUDA_FLAGS := $(if $(NVCC),-DCMAKE_CUDA_COMPILER=$(NVCC))
CMAKE_ARGS ?=
# `make run`: the device (auto: the GPU when present, else the CPU) and any further copy-task flags,
# e.g. make run DEVICE=cpu RUN_FLAGS="--steps 1000 --json" (a repeated flag's last value wins).
DEVICE     ?= auto
RUN_FLAGS  ?=
# `make run` builds the `tapestry` program alone. Without a GPU it builds it without the CUDA kernels,
# MPI and oneDNN, in its own folder (RUN_BUILD, default build-cpu), so that the quick start waits for
# neither nvcc nor the test suites; `make test` builds everything in $(BUILD). With a GPU it builds in
# $(BUILD), with CUDA.
HAS_GPU    := $(shell nvidia-smi -L >/dev/null 2>&1 && echo yes)
RUN_BUILD  ?= $(if $(HAS_GPU),$(BUILD),build-cpu)
RUN_CMAKE  := $(if $(HAS_GPU),$(CUDA_FLAGS),-DTAPESTRY_CUDA=OFF -DTAPESTRY_MPI=OFF -DTAPESTRY_ONEDNN=OFF)
# `make install`: where the headers, library, binary, CMake package and tapestry.pc go.
PREFIX     ?= /usr/local

.PHONY: all setup data build run test test-asan test-cuda install install-check docs fuzz bench clean

all: build

setup:
	@scripts/setup

# The real data sets (docs/DATA.md), prepared once in $TAPESTRY_DATA (default ~/.cache/tapestry/data).
data:
	@scripts/setup-data

build: setup
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CUDA_FLAGS) $(CMAKE_ARGS)
	cmake --build $(BUILD) -j $(JOBS)

# The main job: the masked copy task (smoke preset, improved-clustered attention) on the best device
# present; README.md says what it prints.
run:
	@scripts/setup run
	@echo "make run: configuring $(RUN_BUILD) ($(if $(HAS_GPU),with CUDA,CPU only: no GPU found))"
	@mkdir -p $(RUN_BUILD) && cmake -S . -B $(RUN_BUILD) -DCMAKE_BUILD_TYPE=Release $(RUN_CMAKE) $(CMAKE_ARGS) \
	  > $(RUN_BUILD)/configure.log 2>&1 || { cat $(RUN_BUILD)/configure.log; exit 1; }
	@echo "make run: building the tapestry program in $(RUN_BUILD) with $(JOBS) jobs (a few minutes on two cores)"
	cmake --build $(RUN_BUILD) -j $(JOBS) --target tapestry_cli
	$(RUN_BUILD)/tapestry copy-task --preset smoke --attention improved-clustered:clusters=15,topk=32 --device $(DEVICE) $(RUN_FLAGS)

test: build
	cd $(BUILD) && ctest --output-on-failure -V

# The library, headers, `tapestry` binary, CMake package and tapestry.pc under PREFIX (README.md,
# "Use it from your own project").
install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

# Installs into a temporary prefix and builds and runs every examples/ project against it
# (scripts/check-install); the MLP needs `make data`'s Fashion-MNIST.
install-check: build
	scripts/check-install $(BUILD)

# The API reference (Doxygen, installed by `scripts/setup docs`) in build/docs/html; fails on any
# Doxygen warning, and on an undocumented entity in the headers scripts/docs holds to that.
docs:
	@scripts/setup docs
	@scripts/docs

# The CPU suite under AddressSanitizer + UndefinedBehaviorSanitizer (no CUDA). The suite asks for
# allocations no machine has, to check that they fail with an Error: allocator_may_return_null makes
# ASan's allocator return null as the system's does, instead of aborting.
test-asan: setup
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DTAPESTRY_CUDA=OFF -DTAPESTRY_SANITIZE=ON $(CMAKE_ARGS)
	cmake --build build-asan -j $(JOBS) --target tapestry_tests
	ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 build-asan/tapestry_tests

# The libFuzzer targets (tests/fuzz/): built with clang under ASan + UBSan in build-fuzz (CPU only, and
# without oneDNN, whose libgomp would meet clang's libomp in one process),
# then each run for FUZZ_SECONDS from its seed corpus (tests/fuzz/corpus/<target>; what it finds
# goes to build-fuzz/corpus/<target>, crashes to build-fuzz/). A finding fails the target.
FUZZ_SECONDS ?= 20
FUZZ_TARGETS := checkpoint configs readers

fuzz:
	@scripts/setup fuzz
	CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTAPESTRY_CUDA=OFF \
	  -DTAPESTRY_ONEDNN=OFF -DTAPESTRY_FUZZ=ON $(CMAKE_ARGS)
	cmake --build build-fuzz -j $(JOBS) $(foreach t,$(FUZZ_TARGETS),--target fuzz_$(t))
	@for t in $(FUZZ_TARGETS); do \
	  mkdir -p build-fuzz/corpus/$$t; \
	  echo "make fuzz: $$t for $(FUZZ_SECONDS) s"; \
	  if OMP_NUM_THREADS=1 build-fuzz/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 \
	       -malloc_limit_mb=1024 -timeout=10 -print_final_stats=1 -artifact_prefix=build-fuzz/$$t- \
	       build-fuzz/corpus/$$t tests/fuzz/corpus/$$t > build-fuzz/$$t.log 2>&1; then \
	    grep -E '^(Done|stat::number_of_executed_units|stat::peak_rss_mb)' build-fuzz/$$t.log; \
	  else \
	    tail -n 60 build-fuzz/$$t.log; echo "make fuzz: $$t found a defect (build-fuzz/$$t.log)"; exit 1; \
	  fi; \
	done

# The CUDA parity suite (tests/cuda/), then, when compute-sanitizer is found and a GPU is present,
# the suite again under its memcheck and racecheck tools (without the 70-million-element cases,
# slow under a sanitizer, and the out-of-memory case, whose failing cudaMalloc is the point).
SANITIZER  := $(firstword $(shell command -v compute-sanitizer 2>/dev/null) $(wildcard /usr/local/cuda/bin/compute-sanitizer))
SANITIZED  := --test-case-exclude='*70 million*,out of memory*'

test-cuda: build
	@test -x $(BUILD)/tapestry_cuda_tests || { echo "make test-cuda: this build has no CUDA backend (nvcc was not found)"; exit 1; }
	@$(BUILD)/tapestry_cuda_tests > $(BUILD)/cuda-tests.log 2>&1; status=$$?; cat $(BUILD)/cuda-tests.log; exit $$status
	@if grep -q '^CUDA parity suite skipped' $(BUILD)/cuda-tests.log; then \
	  echo "make test-cuda: compute-sanitizer runs skipped (no GPU)"; \
	elif [ -z "$(SANITIZER)" ]; then \
	  echo "make test-cuda: compute-sanitizer not found (PATH, /usr/local/cuda/bin); memcheck and racecheck skipped"; \
	else \
	  $(SANITIZER) --tool memcheck --error-exitcode 1 $(BUILD)/tapestry_cuda_tests $(SANITIZED) && \
	  $(SANITIZER) --tool racecheck --error-exitcode 1 $(BUILD)/tapestry_cuda_tests $(SANITIZED); \
	fi

# The benchmarks (docs/PERFORMANCE.md): `tapestry bench ops`, `attention`, `train` and `translate`, then their
# PyTorch peers with the same settings (read back from Tapestry's JSON), then the side-by-side table.
# PyTorch (Debian's python3-torch, large) is installed on demand by scripts/setup-bench; without it
# Tapestry's figures are printed alone. CPU runs use BENCH_THREADS threads. Extra flags:
# BENCH_COMMON for all three (default 3 repeats: 6 minutes on a loaded 2-core machine, where full
# attention at N = 8192 takes ~9 GiB and tens of seconds per run; BENCH_COMMON= gives the programs'
# own default of 5), BENCH_ARGS for `bench attention` (e.g. --lengths 512,1024,2048),
# BENCH_OPS_ARGS, BENCH_TRAIN_ARGS, BENCH_TRANSLATE_ARGS; later flags win. OpenMP threads wait passively (both Tapestry's
# and PyTorch's libgomp): on a shared machine spinning threads made small problems up to 8 times
# slower and far noisier (full attention at N = 512, load 5 on 2 cores: 964 ms spinning, 197 ms
# passive).
BENCH_DIR        ?= $(BUILD)/bench
BENCH_THREADS    ?= 2
BENCH_WAIT       ?= passive
BENCH_PYTHON     ?= $(firstword $(wildcard /usr/bin/python3) python3)
BENCH_COMMON     ?= --repeats 3
BENCH_ARGS       ?=
BENCH_OPS_ARGS   ?=
BENCH_TRAIN_ARGS ?=
BENCH_TRANSLATE_ARGS ?=

bench: build
	@BENCH_PYTHON=$(BENCH_PYTHON) scripts/setup-bench
	@mkdir -p $(BENCH_DIR) && rm -f $(BENCH_DIR)/*.json
	@export OMP_NUM_THREADS=$(BENCH_THREADS) OMP_WAIT_POLICY=$(BENCH_WAIT); set -e; \
	echo "make bench: $$(nproc) cores, load average $$(cut -d' ' -f1-3 /proc/loadavg)," \
	     "$$OMP_NUM_THREADS threads, OMP_WAIT_POLICY=$$OMP_WAIT_POLICY"; \
	$(BUILD)/tapestry bench ops --json $(BENCH_DIR)/ops.json $(BENCH_COMMON) $(BENCH_OPS_ARGS); echo; \
	$(BUILD)/tapestry bench attention --json $(BENCH_DIR)/attention.json $(BENCH_COMMON) $(BENCH_ARGS); echo; \
	$(BUILD)/tapestry bench train --json $(BENCH_DIR)/train.json $(BENCH_COMMON) $(BENCH_TRAIN_ARGS); echo; \
	$(BUILD)/tapestry bench translate --json $(BENCH_DIR)/translate.json $(BENCH_COMMON) $(BENCH_TRANSLATE_ARGS); echo; \
	if $(BENCH_PYTHON) -c 'import torch' 2>/dev/null; then \
	  echo "make bench: PyTorch peers"; \
	  $(BENCH_PYTHON) bench/peers/attention.py --like $(BENCH_DIR)/attention.json --json $(BENCH_DIR)/attention-torch.json; \
	  $(BENCH_PYTHON) bench/peers/train.py --like $(BENCH_DIR)/train.json --json $(BENCH_DIR)/train-torch.json; \
	  $(BENCH_PYTHON) bench/peers/translate.py --like $(BENCH_DIR)/translate.json --json $(BENCH_DIR)/translate-torch.json; \
	else \
	  echo "make bench: PyTorch is not installed (scripts/setup-bench): Tapestry's figures alone"; \
	fi; \
	echo; echo "make bench: load average at the end $$(cut -d' ' -f1-3 /proc/loadavg)"; echo; \
	$(BENCH_PYTHON) bench/compare.py $(BENCH_DIR)

clean:
	rm -rf $(BUILD) build-asan build-fuzz
