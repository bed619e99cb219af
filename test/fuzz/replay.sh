#!/bin/sh
# replay.sh FLASHC DIR: runs every file of DIR through `FLASHC -emit=ast` and
# `-emit=spec`. Exit status 0 or 1 is fine (input errors); anything else, a
# crash (signal) included, fails. Prints "replayed N files" at the end.
flashc=$1
dir=$2
n=0
for f in "$dir"/*; do
  [ -f "$f" ] || continue
  for emit in ast spec; do
    "$flashc" "$f" -emit=$emit >/dev/null 2>&1
    rc=$?
    if [ $rc -gt 1 ]; then
      echo "FAIL: $f -emit=$emit exited with $rc"
      exit 1
    fi
  done
  n=$((n + 1))
done
echo "replayed $n files"
