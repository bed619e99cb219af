#!/bin/sh
# make run: compile the default example to the last stage that exists and,
# when a GPU is present, run it end to end.
set -e
BUILD=$1
EXAMPLE=$2
FLASHC=$BUILD/tools/flashc
out=$BUILD/run
mkdir -p "$out"
name=$(basename "$EXAMPLE" .fa)
echo "== $FLASHC $EXAMPLE -emit=tile"
"$FLASHC" "$EXAMPLE" -emit=tile | head -n 60
echo "   ..."
echo "== $FLASHC $EXAMPLE -emit=ptx --stats -o $out/$name.ptx"
"$FLASHC" "$EXAMPLE" -emit=ptx --stats -o "$out/$name.ptx"
# the tensor-core instructions the kernels use: wgmma (sm_90a) or mma.sync
wg=$(grep -c "wgmma.mma_async" "$out/$name.ptx" || true)
ms=$(grep -c "mma.sync" "$out/$name.ptx" || true)
echo "   tensor-core instructions in the PTX: $wg wgmma.mma_async, $ms mma.sync"
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && [ -x "$BUILD/examples/host_forward" ]; then
  echo "== $BUILD/examples/host_forward $out/$name.ptx"
  "$BUILD/examples/host_forward" "$out/$name.ptx"
else
  echo "== no GPU here: stopping after the PTX ($out/$name.ptx)."
fi
