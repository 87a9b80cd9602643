# Thin wrapper around CMake: `make run` and `make test` are the quick start (README.md).
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

.PHONY: all setup build run test test-asan test-cuda bench clean

all: build

setup:
	@scripts/setup

build: setup
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CUDA_FLAGS) $(CMAKE_ARGS)
	cmake --build $(BUILD) -j $(JOBS)

# The main job: the masked copy task (smoke preset, improved-clustered attention) on the best device
# present; README.md says what it prints.
run: build
	$(BUILD)/tapestry copy-task --preset smoke --attention improved-clustered:clusters=15,topk=32 --device $(DEVICE) $(RUN_FLAGS)

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
