#!/usr/bin/env python3
"""Writes a forward-kind tile kernel whose O holds Philox4x32 bits (issue 18):
element (b, h, q, c) of O is byte c % 4 of word (c // 4) % 4 of
philox4x32_R(counter = (q, c, h, b), key = (KEY0, KEY1)), as a float (exact
in f16). test/codegen/philox_u32.test compiles it; test/gpu/philox_bits.py
runs its PTX on the GPU against a host Philox.

    python3 philox_tile.py [ROUNDS] > philox_bits.tile
"""
import sys

M0, M1, W0, W1 = 0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85
KEY0, KEY1 = 0x12345678, 0x9ABCDEF0
D, H = 16, 2
FULL = f"64x{D}"


class Body:
    """Emits u32 ops, tracking each value's shape (None: a scalar)."""

    def __init__(self):
        self.lines, self.shape, self.n = [], {}, 0

    def emit(self, line):
        self.lines.append("        " + line)

    def op(self, kind, a, b):
        sa, sb = self.shape[a], self.shape[b]
        s = sb if sa is None else sa if sb is None or sa == sb else FULL
        self.n += 1
        r = f"%t{self.n}"
        self.shape[r] = s
        self.emit(f"{r} = {kind} {a}, {b} : {'u32' if s is None else f'tile<{s}xu32, rows>'}")
        return r


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    consts = {"m0": M0, "m1": M1, "w0": W0, "w1": W1, "key0": KEY0, "key1": KEY1, "eight": 8,
              "byte": 255}
    g = Body()
    g.shape.update({"%" + k: None for k in consts})
    g.shape.update({"%x0": "64x1", "%x1": f"1x{D}", "%x2": None, "%x3": None, "%zero": FULL})
    g.emit("%q0 = mul %i, %br : index")
    g.emit("%rows = iota {axis = 0} : tile<64x1xindex, rows>")
    g.emit("%qi = add %rows, %q0 : tile<64x1xindex, rows>")
    g.emit(f"%cols = iota {{axis = 1}} : tile<1x{D}xindex, rows>")
    g.emit("%x0 = cast %qi : tile<64x1xu32, rows>")
    g.emit(f"%x1 = cast %cols : tile<1x{D}xu32, rows>")
    g.emit("%x2 = cast %h : u32")
    g.emit("%x3 = cast %b : u32")
    g.emit(f"%zero = full {{value = 0}} : tile<{FULL}xu32, rows>")
    c, k = ["%x0", "%x1", "%x2", "%x3"], ["%key0", "%key1"]
    for r in range(rounds):
        if r:
            k = [g.op("add", k[0], "%w0"), g.op("add", k[1], "%w1")]
        hi0, lo0 = g.op("mulhi", c[0], "%m0"), g.op("mul", c[0], "%m0")
        hi1, lo1 = g.op("mulhi", c[2], "%m1"), g.op("mul", c[2], "%m1")
        c = [g.op("xor", g.op("xor", hi1, c[1]), k[0]), lo1, g.op("xor", g.op("xor", hi0, c[3]), k[1]), lo0]
    # every word as a full tile, then column c picks word (c / 4) % 4, byte c % 4
    words = [w if g.shape[w] == FULL else g.op("add", w, "%zero") for w in c]
    g.emit(f"%cq = div %cols, %four : tile<1x{D}xindex, rows>")
    g.emit(f"%wsel = rem %cq, %four : tile<1x{D}xindex, rows>")
    g.emit(f"%bsel = rem %cols, %four : tile<1x{D}xindex, rows>")
    sel = words[3]
    for i in (2, 1, 0):
        g.emit(f"%is{i} = cmp %wsel, %i{i} {{pred = eq}} : tile<1x{D}xi1, rows>")
        g.emit(f"%pick{i} = select %is{i}, {words[i]}, {sel} : tile<{FULL}xu32, rows>")
        sel = f"%pick{i}"
    g.emit(f"%sh8 = cast %bsel : tile<1x{D}xu32, rows>")
    g.emit(f"%sh = mul %sh8, %eight : tile<1x{D}xu32, rows>")
    g.emit(f"%shifted = shr {sel}, %sh : tile<{FULL}xu32, rows>")
    g.emit(f"%bits = and %shifted, %byte : tile<{FULL}xu32, rows>")
    g.emit(f"%f = cast %bits : tile<{FULL}xf32, rows>")
    g.emit(f"%oc = cast %f : tile<{FULL}xf16, rows>")
    g.emit("store %o, %b, %h, %q0, %oc")
    g.emit("yield")

    t = f"tensor<f16, [batch, seqlen_q, {H}, {D}]>"
    tk = f"tensor<f16, [batch, seqlen_k, {H}, {D}]>"
    print(f"kernel @philox_bits(%q: {t}, %k: {tk}, %v: {tk}, %o: {t}, "
          f"%lse: tensor<f32, [batch, {H}, seqlen_q]>, %batch: index, %seqlen_q: index, "
          f"%seqlen_k: index) attributes {{dtype = f16, head_dim = {D}, v_head_dim = {D}, "
          f"heads = {H}, kv_heads = {H}, scale = 0.25, mask = none, mode = forward, "
          f"target = sm_90a, schedule = fa2, tile_q = 64, tile_kv = 64, warps = 4, stages = 1}} {{")
    print("  %c0 = const {value = 0} : index")
    print(f"  %nheads = const {{value = {H}}} : index")
    print("  %br = const {value = 64} : index")
    print("  %four = const {value = 4} : index")
    for i in range(3):
        print(f"  %i{i} = const {{value = {i}}} : index")
    print("  %nq = ceildiv %seqlen_q, %br : index")
    for name, v in consts.items():
        print(f"  %{name} = const {{value = {v}}} : u32")
    print("  for %b = %c0 to %batch parallel {")
    print("    for %h = %c0 to %nheads parallel {")
    print("      for %i = %c0 to %nq parallel {")
    print("\n".join(g.lines))
    print("      }\n      yield\n    }\n    yield\n  }\n  return\n}")


if __name__ == "__main__":
    main()
