#!/bin/sh
# check_all.sh FLASHC DIR: every DIR/*.fa must parse and check cleanly
# (exit 0 for -emit=ast and -emit=spec, nothing on stderr). Prints one line a
# file and a count.
flashc=$1
dir=$2
n=0
for f in "$dir"/*.fa; do
  for emit in ast spec; do
    if ! "$flashc" "$f" -emit=$emit >/dev/null 2>"${TMPDIR:-/tmp}/check_all.$$"; then
      echo "FAIL: $f -emit=$emit"
      cat "${TMPDIR:-/tmp}/check_all.$$"
    elif [ -s "${TMPDIR:-/tmp}/check_all.$$" ]; then
      echo "FAIL: $f -emit=$emit wrote to stderr"
      cat "${TMPDIR:-/tmp}/check_all.$$"
    fi
  done
  echo "ok: $(basename "$f")"
  n=$((n + 1))
done
rm -f "${TMPDIR:-/tmp}/check_all.$$"
echo "checked $n files"
