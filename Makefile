# Front door: `make demo`, `make test`, `make install`. Installs missing Debian packages first
# (apt-get update only when something is missing), then configures and builds with CMake.
SHELL := /bin/bash
BUILD ?= build
PY := /usr/bin/python3
JOBS ?= $(shell nproc)
DEB_PKGS := cmake ninja-build g++ llvm-19-dev libdnnl-dev nlohmann-json3-dev libgtest-dev \
            pybind11-dev python3-dev python3-numpy python3-pytest python3-torch \
            libopenblas0-pthread zlib1g-dev libzstd-dev libedit-dev libxml2-dev libffi-dev \
            clang-14 libclang-rt-14-dev python3-matplotlib
ASAN_BUILD ?= $(BUILD)-asan
FUZZ_SECONDS ?= 60

.PHONY: all deps configure build test test-cpp test-python test-asan test-fuzz demo install clean

all: build

deps:
	@missing=$$(for p in $(DEB_PKGS); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing missing packages:" $$missing; \
	  SUDO=$$( [ $$(id -u) -eq 0 ] || echo sudo ); \
	  $$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q $$missing; \
	fi

$(BUILD)/build.ninja: CMakeLists.txt | deps
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DPython3_EXECUTABLE=$(PY)

configure: deps $(BUILD)/build.ninja

build: configure
	cmake --build $(BUILD) -j $(JOBS)

test-cpp: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test-python: build
	PYTHONPATH=$(BUILD)/python LT_CACHE_DIR=off $(PY) -m pytest -q tests/python

# The C++ suite again under AddressSanitizer + UndefinedBehaviorSanitizer (Debug, own build dir).
# Any report aborts the test that caused it (-fno-sanitize-recover), so a green run means zero reports.
test-asan: deps
	cmake -S . -B $(ASAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DLT_SANITIZE=ON -DLT_WITH_PYTHON=OFF \
	  -DPython3_EXECUTABLE=$(PY) >/dev/null
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j $(JOBS)
	@echo "sanitizer reports: 0 (ASan+UBSan, every C++ test passed with -fno-sanitize-recover)"

# libFuzzer (clang-14) on the trace-file loader, seeded from tests/fuzz/corpus; a crash fails the run.
FUZZ_DIR := $(BUILD)/fuzz
$(FUZZ_DIR)/trace_loader_fuzz: tests/fuzz/trace_loader_fuzz.cc $(wildcard ir/*.cc ir/*.h ir/*.def) | deps
	@mkdir -p $(FUZZ_DIR)
	clang++-14 -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	  -I. ir/*.cc tests/fuzz/trace_loader_fuzz.cc -o $@

test-fuzz: $(FUZZ_DIR)/trace_loader_fuzz
	@rm -rf $(FUZZ_DIR)/trace-corpus && mkdir -p $(FUZZ_DIR)/trace-corpus
	cp tests/fuzz/corpus/trace/* $(FUZZ_DIR)/trace-corpus/
	@cd $(FUZZ_DIR) && if ./trace_loader_fuzz -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 \
	    -print_final_stats=1 trace-corpus > trace_fuzz.log 2>&1; then \
	  grep -E "stat::number_of_executed_units|^Done" trace_fuzz.log; echo "fuzz crashes: 0"; \
	else \
	  grep -A40 -E "ERROR: libFuzzer|ERROR: AddressSanitizer|runtime error" trace_fuzz.log | head -60; \
	  echo "fuzz: a crash; the input is $(FUZZ_DIR)/crash-*: add it to tests/fuzz/corpus/trace as a regression"; exit 1; \
	fi

test: test-cpp test-python test-asan test-fuzz

demo: build
	PYTHONPATH=$(BUILD)/python $(PY) examples/python/demo.py

install: build
	cmake --install $(BUILD)

clean:
	rm -rf $(BUILD)
