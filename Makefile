# make run  : install missing Debian packages, build, and plan the built-in default configuration
# make test : install missing Debian packages, build, and run every test this machine can run
# make test-sanitized : the CPU suite (and the readers' fuzz at CI size) built with ASan + UBSan
#   in build-asan, CUDA off; what .ci/run adds after make test (about 15 min to build on 2 cores)
# EPO_WITH_MPI=1 (e.g. make EPO_WITH_MPI=1 test): also build `epo run` over MPI (mpirun), in
# build-mpi by default; setup.sh then installs Open MPI as well.
EPO_WITH_MPI ?= 0
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
ifeq ($(EPO_WITH_MPI),1)
BUILD ?= build-mpi
CMAKE_FLAGS += -DEPO_WITH_MPI=ON
endif
BUILD ?= build

.PHONY: all setup configure build run test test-sanitized clean

all: build

setup:
	@EPO_WITH_MPI=$(EPO_WITH_MPI) ./tools/setup.sh

$(BUILD)/CMakeCache.txt: | setup
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

configure: setup $(BUILD)/CMakeCache.txt

build: configure
	cmake --build $(BUILD) -j $(JOBS)

run: build
	./$(BUILD)/cli/epo plan

# GPU tests run only where a GPU answers; multigpu tests only where two or more do. Chromium
# (for the HTML reports' browser test) is installed where the machine allows.
test: build
	@./tools/setup.sh --browser
	@gpus=$$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true); \
	if [ "$${gpus:-0}" -ge 2 ]; then labels=''; \
	elif [ "$${gpus:-0}" -ge 1 ]; then labels='-LE multigpu'; \
	else labels='-L cpu'; fi; \
	echo "epo: $${gpus:-0} GPU(s) found; ctest $$labels"; \
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) $$labels

test-sanitized: setup
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEPO_SANITIZE=ON -DEPO_WITH_CUDA=OFF
	cmake --build build-asan -j $(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j $(JOBS) -L cpu -E browser

clean:
	rm -rf $(BUILD) build-asan
