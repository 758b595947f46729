# Front door: `make demo`, `make test`, `make install`. Installs missing Debian packages first
# (apt-get update only when something is missing), then configures and builds with CMake.
BUILD ?= build
PY := /usr/bin/python3
JOBS ?= $(shell nproc)
DEB_PKGS := cmake ninja-build g++ llvm-19-dev libdnnl-dev nlohmann-json3-dev libgtest-dev \
            pybind11-dev python3-dev python3-numpy python3-pytest python3-torch \
            libopenblas0-pthread zlib1g-dev libzstd-dev libedit-dev libxml2-dev libffi-dev

.PHONY: all deps configure build test test-cpp test-python demo install clean

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

test: test-cpp test-python

demo: build
	PYTHONPATH=$(BUILD)/python $(PY) examples/python/demo.py

install: build
	cmake --install $(BUILD)

clean:
	rm -rf $(BUILD)
