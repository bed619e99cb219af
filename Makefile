# The two commands a newcomer types: `make run` and `make check`.
# Both install what is missing (scripts/install-deps.sh), configure and build.
# SANITIZE=1: a separate build (build-asan) of flashc's code under ASan + UBSan.
ifeq ($(SANITIZE),1)
BUILD ?= build-asan
CMAKE_FLAGS += -DFLASHC_SANITIZE=ON
endif
BUILD ?= build
EXAMPLE ?= examples/llama3_prefill.fa
JOBS ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: all deps build run check layers fuzz clean

all: build

deps:
	@sh scripts/install-deps.sh

$(BUILD)/CMakeCache.txt: | deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS)

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

# Compiles the default example spec and shows the last stage that exists.
run: build
	@sh scripts/run-example.sh $(BUILD) $(EXAMPLE)

# Every test: lit + FileCheck suites, differential interpreter tests, the bounded
# fuzz runs (FUZZ_CHECK_SECONDS each, default 5). SANITIZE=1: all of it under
# ASan + UBSan, in build-asan.
check: build
	/usr/lib/llvm-22/bin/lit -sv --no-progress-bar $(BUILD)/test

# Only the layering check (scripts/layers.txt, docs/layers.md); check runs it too.
layers:
	@python3 scripts/check-layers.py

# Every libFuzzer harness for FUZZ_SECONDS (default 300), JOBS at a time; new
# inputs and crashes under $(BUILD)/fuzz (scripts/fuzz.sh). FUZZERS=a,b picks.
FUZZ_SECONDS ?= 300
FUZZERS ?=
fuzz: build
	@sh scripts/fuzz.sh $(BUILD) $(FUZZ_SECONDS) $(JOBS) $(FUZZERS)

clean:
	rm -rf $(BUILD)
