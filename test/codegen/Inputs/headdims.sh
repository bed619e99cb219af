#!/bin/sh
# headdims.sh FLASHC TARGET TMPDIR
# Every head dim the language admits (multiples of 8 from 8 to 256), each a
# forward kernel, compiled to PTX for TARGET and, where ptxas is on PATH,
# assembled; then forward + backward modules (grad = true) for a sample of
# them and of v_head_dim != head_dim. One line per spec; exits 1 on any
# failure (an internal codegen error must never reach a user).
flashc=$1 target=$2 tmp=$3
mkdir -p "$tmp"
status=0
asm=0
command -v ptxas >/dev/null 2>&1 && asm=1
one() { # name, spec text
  printf '%s\n' "$2" > "$tmp/$1.fa"
  if ! "$flashc" -emit=ptx --target="$target" "$tmp/$1.fa" -o "$tmp/$1.ptx" 2>"$tmp/err"; then
    echo "FAIL codegen $1"; cat "$tmp/err"; status=1; return
  fi
  if [ $asm = 1 ] && ! ptxas --gpu-name "$target" "$tmp/$1.ptx" -o "$tmp/$1.cubin" 2>"$tmp/err"; then
    echo "FAIL ptxas $1"; cat "$tmp/err"; status=1; return
  fi
  echo "ok $1"
}
d=8
while [ $d -le 256 ]; do
  one "fwd_d$d" "attention fwd_d$d { dtype = bf16; head_dim = $d; heads = 4; kv_heads = 2; mask = causal; }"
  d=$((d + 8))
done
for d in 8 24 40 72 120 136 200 248; do
  one "bwd_d$d" "attention bwd_d$d { dtype = fp16; head_dim = $d; heads = 4; kv_heads = 2; mask = causal; grad = true; }"
done
for dv in "64 40" "40 64" "128 24" "256 8" "24 256"; do
  set -- $dv
  one "bwd_d$1_dv$2" "attention bwd_d$1_dv$2 { dtype = bf16; head_dim = $1; v_head_dim = $2; heads = 4; kv_heads = 1; grad = true; }"
done
exit $status
