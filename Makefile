# Front door: `make demo`, `make test`, `make install`. Installs missing Debian packages first
# (apt-get update only when something is missing), then configures and builds with CMake.
SHELL := /bin/bash
BUILD ?= build
# The project's one Python environment: made from requirements.txt (torch 2.13.0 CPU, numpy,
# pytest, transformers, timm, ...) by the interpreter that the torch wheel on disk is built for.
VENV ?= .venv
PY := $(CURDIR)/$(VENV)/bin/python
BASE_PY ?= $(shell command -v python3.11 || command -v python3)
JOBS ?= $(shell nproc)
DEB_PKGS := cmake ninja-build g++ llvm-19-dev libdnnl-dev nlohmann-json3-dev libgtest-dev libgloo-dev \
            python3-dev python3-venv \
            zlib1g-dev libzstd-dev libedit-dev libxml2-dev libffi-dev \
            clang-14 libclang-rt-14-dev clang-format-14
ASAN_BUILD ?= $(BUILD)-asan
TSAN_BUILD ?= $(BUILD)-tsan
FUZZ_SECONDS ?= 20

.PHONY: all deps venv configure build test test-format format test-cpp test-python test-asan test-tsan test-fuzz fuzz-lowering demo install clean

all: build

deps:
	@missing=$$(for p in $(DEB_PKGS); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing missing packages:" $$missing; \
	  SUDO=$$( [ $$(id -u) -eq 0 ] || echo sudo ); \
	  $$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q $$missing; \
	fi

# The virtual environment is remade only when a requirements file changes (the stamp file).
$(VENV)/.installed: requirements.txt requirements-nodeps.txt | deps
	@test -x $(PY) || $(BASE_PY) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -r requirements.txt
	$(PY) -m pip install -q --disable-pip-version-check --no-deps -r requirements-nodeps.txt
	@touch $@

venv: $(VENV)/.installed

# The C++ test files build as one unity executable (build/tests/all_tests; see tests/cpp/CMakeLists.txt):
# 417 s of compiler time as 40 executables, 163 s as one, on 2 cores. The library is unity-built
# too (a few files per translation unit): a clean build takes 3 min 51 s instead of 6 min 31 s on 2
# cores. An edit recompiles its file's batch. A plain `cmake -S . -B dir` build (the GPU machine's
# tests/gpu/run.sh) still compiles file by file, so a file that leans on another's includes fails
# there.
$(BUILD)/build.ninja: CMakeLists.txt | deps $(VENV)/.installed
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_UNITY_BUILD=ON -DLT_TESTS_IN_ONE_BINARY=ON \
	  -DPython3_EXECUTABLE=$(PY) -Dpybind11_DIR=$$($(PY) -m pybind11 --cmakedir)

configure: deps venv $(BUILD)/build.ninja

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# ctest keeps passing tests' output in its log: the counts issue 9 asks for are printed from there.
test-cpp: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	@grep -hE "^(bad inputs tried|soak:)" $(BUILD)/Testing/Temporary/LastTest.log || \
	  { echo "test-cpp: the bad-input and soak tests printed no summary"; exit 1; }

# One pytest worker per core (pytest-xdist): the tests share no files (tmp_path) and no cache
# (LT_CACHE_DIR=off), and each worker is its own process with its own lazy registry. worksteal: an
# idle worker takes queued tests from the other, so a few long tests at the end do not leave a core
# idle.
test-python: build
	PYTHONPATH=$(BUILD)/python LT_CACHE_DIR=off $(PY) -m pytest -q -n $(JOBS) --dist worksteal tests/python

# The C++ suite again under AddressSanitizer + UndefinedBehaviorSanitizer (Debug, own build dir;
# -g1: line tables are all a report needs, and the build is ~20% faster than with full -g).
# Unity-built (a few source files per translation unit) with the test files in one executable:
# each header is parsed once per batch, not once per file, and the build takes half the time
# (496 -> 254 s on 2 cores). ctest still runs each test in its own process.
# Any report aborts the test that caused it (-fno-sanitize-recover), so a green run means zero reports.
# Not run here (test-cpp runs them): the three sweeps that compile every primitive, cast and
# reduction of every dtype with NVRTC, whose time (~30 s under ASan) is NVRTC's, not our code's;
# the code generation they drive runs under ASan in the other CudaCodegen tests.
ASAN_EXCLUDE := ^CudaCodegen\.Every
test-asan: deps venv
	cmake -S . -B $(ASAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-g1 -DLT_SANITIZE=ON \
	  -DCMAKE_UNITY_BUILD=ON -DLT_TESTS_IN_ONE_BINARY=ON \
	  -DLT_WITH_PYTHON=OFF -DPython3_EXECUTABLE=$(PY) >/dev/null
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && $(CURDIR)/tests/asan_ctest.sh $(JOBS) '$(ASAN_EXCLUDE)'
	@echo "sanitizer reports: 0 (ASan+UBSan, every C++ test passed with -fno-sanitize-recover)"

# The multi-threaded tests under ThreadSanitizer (own build dir; only their targets are built,
# the library unity-built and without the CUDA backend, which none of them runs without a GPU;
# -O1 -g1, TSan's usual level, compiles in half the time of -O2 -g; at -O1 GCC 12 warns falsely
# that llvm::unique_function's storage may be used uninitialized, inside LLVM's headers).
# halt_on_error=1: the first report fails the run. tests/tsan.supp names third-party frames only.
TSAN_TESTS := threads_test threads_stress_test cpu_codegen_test
TSAN_FILTER := Threads.*:ThreadsStress.*:CpuCodegen.Thread*
test-tsan: deps venv
	cmake -S . -B $(TSAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG -Wno-maybe-uninitialized" -DLT_SANITIZE_THREAD=ON \
	  -DCMAKE_UNITY_BUILD=ON -DLT_WITH_CUDA=OFF -DLT_WITH_PYTHON=OFF -DPython3_EXECUTABLE=$(PY) >/dev/null
	cmake --build $(TSAN_BUILD) -j $(JOBS) $(addprefix --target ,$(TSAN_TESTS))
	@cd $(TSAN_BUILD) && export LT_CACHE_DIR=off \
	  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$(CURDIR)/tests/tsan.supp" && \
	for t in $(TSAN_TESTS); do ./tests/$$t --gtest_filter='$(TSAN_FILTER)' || exit 1; done && \
	LT_SOURCE_LOCATIONS=1 ./tests/threads_test  # again with C++ source capture (runtime/cpp_source.cc)
	@echo "tsan reports: 0"

# libFuzzer (clang-14) on the two file readers, each seeded from tests/fuzz/corpus/<name> and run for
# FUZZ_SECONDS: the trace-file loader (ir/) and the safetensors reader (nn/safetensors.cc, which
# needs only ir/). A crash fails the run; its input becomes a corpus file and a ctest case.
# Each run draws new random inputs (libFuzzer is not reproducible even from a fixed seed: the
# coverage it sees differs run to run), so look for bugs before a push with a long run, e.g.
# `make test-fuzz FUZZ_SECONDS=1800`; make test's 20 s is a smoke test.
# ir/ is compiled once (one object per file, in parallel) and linked into both fuzzers.
FUZZ_DIR := $(BUILD)/fuzz
FUZZ_CXX := clang++-14 -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I.
IR_HDR := $(wildcard ir/*.h ir/*.def)
FUZZ_IR_OBJ := $(patsubst ir/%.cc,$(FUZZ_DIR)/ir/%.o,$(wildcard ir/*.cc))
$(FUZZ_DIR)/ir/%.o: ir/%.cc $(IR_HDR) | deps
	@mkdir -p $(FUZZ_DIR)/ir
	$(FUZZ_CXX) -c $< -o $@
$(FUZZ_DIR)/trace_loader_fuzz: tests/fuzz/trace_loader_fuzz.cc $(FUZZ_IR_OBJ) | deps
	$(FUZZ_CXX) $^ -o $@
$(FUZZ_DIR)/safetensors_fuzz: tests/fuzz/safetensors_fuzz.cc nn/safetensors.cc nn/safetensors.h $(FUZZ_IR_OBJ) | deps
	$(FUZZ_CXX) $(filter %.cc %.o,$^) -o $@

# Lowering of graphs from trace files, and plan files read back (tests/fuzz/lowering_fuzz.cc): not
# part of make test (it builds lowering/ too); run it when lowering changes, e.g.
# `make fuzz-lowering FUZZ_SECONDS=1800`.
FUZZ_LOWERING_OBJ := $(patsubst lowering/%.cc,$(FUZZ_DIR)/lowering/%.o,$(wildcard lowering/*.cc))
$(FUZZ_DIR)/lowering/%.o: lowering/%.cc $(IR_HDR) $(wildcard lowering/*.h) | deps
	@mkdir -p $(FUZZ_DIR)/lowering
	$(FUZZ_CXX) -c $< -o $@
$(FUZZ_DIR)/lowering_fuzz: tests/fuzz/lowering_fuzz.cc $(FUZZ_IR_OBJ) $(FUZZ_LOWERING_OBJ) | deps
	$(FUZZ_CXX) $^ -o $@
fuzz-lowering: | deps
	$(MAKE) -j$(JOBS) $(FUZZ_DIR)/lowering_fuzz
	tests/fuzz/run_fuzzers.sh $(FUZZ_DIR) $(FUZZ_SECONDS) lowering_fuzz:trace

# The two fuzzers are built in parallel and run side by side (tests/fuzz/run_fuzzers.sh).
test-fuzz: | deps
	$(MAKE) -j$(JOBS) $(FUZZ_DIR)/trace_loader_fuzz $(FUZZ_DIR)/safetensors_fuzz
	tests/fuzz/run_fuzzers.sh $(FUZZ_DIR) $(FUZZ_SECONDS) trace_loader_fuzz:trace safetensors_fuzz:safetensors
	@echo "fuzz crashes: 0"

# C++ formatting (.clang-format: Google base, 100 columns): every tracked C++ file as clang-format
# would write it, or make test fails naming the file and line. `make format` rewrites them.
# (Outside a git checkout: the source folders' files.)
CXX_SOURCES = $(or $(shell git ls-files '*.cc' '*.h' '*.cu' '*.c' '*.cpp' 2>/dev/null),\
  $(shell find ir lowering backends runtime autograd capture nn bindings tools tests bench examples include \
          -name '*.cc' -o -name '*.h' -o -name '*.cu' -o -name '*.c' -o -name '*.cpp' 2>/dev/null))
test-format: | deps
	@clang-format-14 --dry-run --Werror $(CXX_SOURCES)
	@echo "unformatted C++ files: 0"
format: | deps
	clang-format-14 -i $(CXX_SOURCES)

# Each stage timed (its build included), then the times together: what to trim when make test
# nears its 30 minutes on CI's 2 cores. The stages still run one after another and stop at the
# first failure.
TEST_STAGES := test-format test-cpp test-python test-asan test-tsan test-fuzz
test:
	@times=""; for t in $(TEST_STAGES); do \
	  start=$$(date +%s); $(MAKE) --no-print-directory $$t || exit 1; \
	  times="$$times $$t $$(( $$(date +%s) - start ))s"; \
	done; echo "make test stage times:$$times"

demo: build
	PYTHONPATH=$(BUILD)/python $(PY) examples/python/demo.py

install: build
	cmake --install $(BUILD)

clean:
	rm -rf $(BUILD)
