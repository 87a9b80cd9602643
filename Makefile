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

test-cuda: build
	@echo "make test-cuda: the CUDA parity suite is not built yet"

bench: build
	@echo "make bench: the benchmarks are not built yet"

clean:
	rm -rf $(BUILD) build-asan
