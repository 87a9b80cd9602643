# Thin wrapper around CMake: `make run` and `make test` are the quick start (README.md).
BUILD      ?= build
JOBS       ?= $(shell nproc)
# nvcc is often installed outside PATH; CMake is pointed at it when it is there.
NVCC       := $(firstword $(shell command -v nvcc 2>/dev/null) $(wildcard /usr/local/cuda/bin/nvcc))
CUDA_FLAGS := $(if $(NVCC),-DCMAKE_CUDA_COMPILER=$(NVCC))
CMAKE_ARGS ?=

.PHONY: all setup build run test test-asan test-cuda bench clean

all: build

setup:
	@scripts/setup

build: setup
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CUDA_FLAGS) $(CMAKE_ARGS)
	cmake --build $(BUILD) -j $(JOBS)

# The main job: the masked copy task on the best device present.
run: build
	$(BUILD)/tapestry version
	@echo "make run: the masked copy task (tapestry copy-task) is not built yet"

test: build
	cd $(BUILD) && ctest --output-on-failure -V

# The CPU suite under AddressSanitizer + UndefinedBehaviorSanitizer (no CUDA).
test-asan: setup
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DTAPESTRY_CUDA=OFF -DTAPESTRY_SANITIZE=ON $(CMAKE_ARGS)
	cmake --build build-asan -j $(JOBS) --target tapestry_tests
	ASAN_OPTIONS=detect_leaks=1 build-asan/tapestry_tests

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

bench: build
	@echo "make bench: the benchmarks are not built yet"

clean:
	rm -rf $(BUILD) build-asan
