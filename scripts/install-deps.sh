#!/bin/sh
# Installs what building and testing flashc needs, only what is missing.
# Debian packages: LLVM/MLIR 22 (C API, lit, FileCheck), flex, bison, cmake, clang (libFuzzer),
# pkg-config (test/install: the installed .pc files).
set -e
need=""
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
for p in libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools flex bison cmake make gcc g++ clang libclang-rt-14-dev python3 pkg-config; do
  have_pkg "$p" || need="$need $p"
done
[ -z "$need" ] && exit 0
if [ "$(id -u)" != 0 ]; then
  SUDO=sudo
  command -v sudo >/dev/null 2>&1 || {
    echo "flashc: missing packages:$need" >&2
    echo "flashc: run as root: apt-get update && apt-get install -y$need" >&2
    exit 1
  }
  echo "flashc: installing$need needs root; running: sudo apt-get install -y$need" >&2
fi
export DEBIAN_FRONTEND=noninteractive
${SUDO:-} apt-get update -qq
${SUDO:-} apt-get install -y -qq --no-install-recommends$need
