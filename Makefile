# The two commands a newcomer types: `make run` and `make check`.
# Both install what is missing (scripts/install-deps.sh), configure and build.
BUILD ?= build
EXAMPLE ?= examples/llama3_prefill.fa
JOBS ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: all deps build run check layers fuzz clean

all: build

deps:
	@sh scripts/install-deps.sh

$(BUILD)/CMakeCache.txt: | deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

# Compiles the default example spec and shows the last stage that exists.
run: build
	@sh scripts/run-example.sh $(BUILD) $(EXAMPLE)

# Every test: lit + FileCheck suites, differential interpreter tests, the bounded fuzz run.
check: build
	/usr/lib/llvm-22/bin/lit -sv --no-progress-bar $(BUILD)/test

# Only the layering check (scripts/layers.txt, docs/layers.md); check runs it too.
layers:
	@python3 scripts/check-layers.py

clean:
	rm -rf $(BUILD)
