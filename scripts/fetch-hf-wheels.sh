#!/bin/sh
# Runs HERE (the registry is reachable; the GPU machine has no network):
# downloads Hugging Face transformers (4.x) and its dependencies as wheels for
# the GPU machine's Python (3.12, manylinux x86_64) into .device/wheels, for
# examples/hf_attention.py in `TRAIN=1 bash scripts/gpu-round.sh` (~38 MB of
# the 64 MB a device call carries).
set -eu
cd "$(dirname "$0")/.."
PY=${PY:-3.12}
pip download "transformers<5" --python-version "$PY" --only-binary=:all: \
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux_2_28_x86_64 -d .device/wheels
du -sh .device/wheels
