#!/bin/sh
# Runs HERE (the registry is reachable): NVIDIA's cuobjdump and nvdisasm from
# their PyPI wheels (nvidia-cuda-cuobjdump, nvidia-cuda-nvdisasm) into
# .tools/bin, so SASS can be read on the build machine, without device time:
#   sh scripts/fetch-sass-tools.sh && export PATH=$PWD/.tools/bin:$PATH
#   ptxas --gpu-name sm_90a K.ptx -o K.cubin && cuobjdump -sass K.cubin
#   python3 scripts/sass-loops.py K.ptx KERNEL       (scripts/sass-report.sh too)
# ptxas comes with the CUDA toolkit the build machine already has; these two
# read what it writes (sm_90a included).
set -eu
cd "$(dirname "$0")/.."
mkdir -p .tools/bin .tools/wheels
pip download --no-deps nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm -d .tools/wheels >/dev/null
for w in .tools/wheels/*.whl; do python3 -m zipfile -e "$w" .tools/unpacked; done
for t in cuobjdump nvdisasm; do
  f=$(find .tools/unpacked -type f -name "$t" | head -1)
  [ -n "$f" ] || { echo "fetch-sass-tools: no $t in the wheels"; exit 1; }
  cp "$f" .tools/bin/$t && chmod +x .tools/bin/$t
done
.tools/bin/cuobjdump --version | tail -1
echo "fetch-sass-tools: .tools/bin/cuobjdump, .tools/bin/nvdisasm"
