"""Symbolic warp-level simulator for Triton-generated PTX (one warp, num_warps=1).

Executes the PTX of a kernel for 32 lanes in lockstep: integer/pointer registers
are concrete per lane (params get distinct fake bases, ctaid=0, index loads
return 0), float registers are hash-consed symbolic expression nodes whose
leaves are global-memory elements ("region", byte offset). Shuffles and shared
memory are simulated exactly, so every stored value becomes a canonical
expression tree (commutative operands sorted). Comparing the trees of two
kernels shows exactly which floating-point computation differs.

usage: ptx_warp_sym.py decode.ptx verify.ptx
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict

NODES: dict = {}
NODE_LIST: list = []
COMMUTATIVE = {"add", "mul"}


def node(op, *args):
    if op in COMMUTATIVE:
        args = tuple(sorted(args, key=lambda a: (0, a) if isinstance(a, int) else (1, a.i)))
    if op == "fma":  # a*b+c, a/b commute
        a, b, c = args
        args = tuple(sorted((a, b))) + (c,)
    key = (op, args)
    if key not in NODES:
        NODES[key] = len(NODE_LIST)
        NODE_LIST.append(key)
    return Sym(NODES[key])


class Sym:
    __slots__ = ("i",)

    def __init__(self, i):
        self.i = i

    def __eq__(self, o):
        return isinstance(o, Sym) and o.i == self.i

    def __hash__(self):
        return hash(("S", self.i))

    def __lt__(self, o):
        return self.i < o.i

    def __repr__(self):
        return f"n{self.i}"


def leaf(*desc):
    return node("leaf", *desc)


# ----------------------------------------------------------------------------
def parse(path):
    instrs, labels = [], {}
    for raw in open(path):
        line = raw.split("//")[0].strip()
        if not line or line in "{}" or line.startswith("."):
            continue
        if line.startswith("$L") and line.endswith(":"):
            labels[line[:-1]] = len(instrs)
            continue
        if line.startswith(")"):
            continue
        m = re.match(r"^(@!?%p\d+)?\s*([a-z][\w.:]*)\s*(.*?);?$", line)
        if not m:
            continue
        pred, op, rest = m.groups()
        ops = [o.strip() for o in re.findall(r"\s*(\{[^}]*\}|\[[^\]]*\]|[^,]+)", rest) if o.strip()]
        instrs.append((pred, op, ops, raw.strip()))
    return instrs, labels


MASK = {8: 0xFF, 16: 0xFFFF, 32: 0xFFFFFFFF, 64: 0xFFFFFFFFFFFFFFFF}


def sx(v, bits):
    v &= MASK[bits]
    return v - (1 << bits) if v >> (bits - 1) else v


class Warp:
    def __init__(self, param_regions, scalar_params, taken_sym_branches=True, max_iters=3):
        self.R = defaultdict(lambda: [None] * 32)
        self.param_regions = param_regions  # param index -> region name
        self.scalar_params = scalar_params  # param index -> leaf name
        self.smem = {}
        self.origin = {}  # node -> first PTX line that produced it
        self.stores = []  # (iteration, region, offset, lane, value)
        self.iter = 0
        self.max_iters = max_iters
        self.taken = taken_sym_branches

    # operand evaluation ---------------------------------------------------
    def val(self, o, lane):
        o = o.strip()
        if o.startswith("%"):
            if o == "%tid.x":
                return lane
            if o.startswith("%ctaid") or o.startswith("%tid"):
                return 0
            return self.R[o][lane]
        if o.startswith("0f"):
            return leaf("const", o)
        if o == "global_smem":
            return 0x10000
        return int(o, 0)

    def addr(self, o, lane):
        m = re.match(r"\[\s*(%?\w+)\s*(?:\+\s*(-?\d+))?\s*\]", o)
        base, off = m.group(1), int(m.group(2) or 0)
        return self.val(base, lane) + off

    def region(self, a):
        return (a >> 40, a & ((1 << 40) - 1))

    # --------------------------------------------------------------------
    def run(self, instrs, labels):
        pc = 0
        while pc < len(instrs):
            pred, op, ops, raw = instrs[pc]
            pc += 1
            lanes = list(range(32))
            if pred:
                neg = pred.startswith("@!")
                pr = pred.lstrip("@!")
                pv = [self.R[pr][lane] for lane in lanes]
                pv = [bool(v) if isinstance(v, int) else v for v in pv]
                if op.startswith("bra"):
                    vals = set(map(lambda v: v if isinstance(v, bool) else "sym", pv))
                    assert len(vals) == 1, (raw, vals)
                    v = vals.pop()
                    if v == "sym":
                        v = self.taken
                    if v != neg:
                        pc = self.jump(ops[0], labels)
                    continue
                lanes = [lane for lane in lanes if (pv[lane] is True) != neg or isinstance(pv[lane], Sym)]
            if op.startswith("bra"):
                pc = self.jump(ops[0], labels)
                continue
            if op.startswith("ret"):
                return
            self.exec1(op, ops, lanes, raw)
            if self.iter >= self.max_iters:
                return

    def jump(self, lab, labels):
        return labels[lab]

    def exec1(self, op, ops, lanes, raw):
        R, V = self.R, self.val
        base = op.split(".")[0]
        if base in ("bar",):
            return
        if op.startswith("ld.param"):
            idx = int(re.search(r"param_(\d+)", ops[1]).group(1))
            for lane in lanes:
                if idx in self.scalar_params:
                    R[ops[0]][lane] = leaf("param", self.scalar_params[idx])
                else:
                    R[ops[0]][lane] = self.param_regions[idx] << 40
            return
        if op.startswith("ld.global") or op.startswith("ld.shared"):
            dsts = [d.strip() for d in ops[0].strip("{}").split(",")]
            width = 16 if op.endswith("b16") else 32
            for lane in lanes:
                a = self.addr(ops[1], lane)
                for j, d in enumerate(dsts):
                    aj = a + j * width // 8
                    if op.startswith("ld.shared"):
                        R[d][lane] = self.smem[(aj, width)]
                    else:
                        reg, off = self.region(aj)
                        if reg in ("ssm_idx", "inter_idx"):
                            R[d][lane] = 0
                        else:
                            R[d][lane] = leaf("m%d" % width, reg, off)
            return
        if op.startswith("st.global") or op.startswith("st.shared"):
            srcs = [s.strip() for s in ops[1].strip("{}").split(",")]
            width = 16 if op.endswith("b16") else 32
            for lane in lanes:
                a = self.addr(ops[0], lane)
                for j, s in enumerate(srcs):
                    aj = a + j * width // 8
                    v = V(s, lane)
                    if op.startswith("st.shared"):
                        self.smem[(aj, width)] = v
                    else:
                        reg, off = self.region(aj)
                        self.stores.append((self.iter, reg, off, lane, width, v))
                        if reg == "o" and width == 16 and lane == 0 and len(srcs) == 1:
                            pass
            if op.startswith("st.global") and width == 32:
                pass
            return
        if op.startswith("shfl.sync"):
            d, s, b = ops[0], ops[1], ops[2]
            src = list(R[s]) if s.startswith("%") else [V(s, 0)] * 32
            out = R[d]
            for lane in lanes:
                bv = V(b, lane)
                tgt = lane ^ bv if ".bfly" in op else bv
                out[lane] = src[tgt & 31]
            return
        if op == "mov.b32" and ops[0].startswith("{"):  # unpack
            lo, hi = [x.strip() for x in ops[0].strip("{}").split(",")]
            for lane in lanes:
                v = V(ops[1], lane)
                R[lo][lane], R[hi][lane] = unpack(v)
            return
        if op.startswith("cvt.rn.f16x2.f32"):
            for lane in lanes:
                R[ops[0]][lane] = node("pack", V(ops[2], lane), V(ops[1], lane))  # (lo, hi)
            return
        for lane in lanes:
            args = [V(o, lane) for o in ops[1:]]
            R[ops[0]][lane] = r = self.alu(op, args, raw)
            if isinstance(r, Sym) and r not in self.origin:
                self.origin[r] = raw
        # loop iteration tracking: verify's latch increments %rd81
        if raw.startswith("setp.eq.b64") and "4718592" in raw:
            self.iter += 1

    def alu(self, op, a, raw):
        parts = op.split(".")
        base = parts[0]
        ty = parts[-1]
        isf = ty in ("f32", "f16") and base not in ("cvt",)
        if base == "cvt":
            dt, st = parts[-2], parts[-1]
            if st == "f16" and dt == "f32":
                return node("f16to32", a[0])
            if dt == "f16" and st == "f32":
                return node("f32to16", a[0])
            if dt == "f32" and st == "s32":
                return node("i2f", a[0]) if isinstance(a[0], Sym) else leaf("const", a[0])
            bits = int(dt[1:])
            v = a[0]
            if isinstance(v, Sym):
                return node("cvt", op, v)
            sbits = int(st[1:])
            if st[0] == "s":
                v = sx(v, sbits)
            else:
                v &= MASK[sbits]
            return v & MASK[bits] if dt[0] != "s" else sx(v, bits)
        if base == "mov":
            return a[0]
        if any(isinstance(x, Sym) for x in a) or isf:
            if base == "setp":
                return node("setp", parts[1], *a)
            if base == "selp":
                if isinstance(a[2], bool):
                    return a[0] if a[2] else a[1]
                return node("selp", *a)
            name = {"fma": "fma", "mul": "mul", "add": "add", "sub": "sub", "neg": "neg", "div": "div", "sqrt": "sqrt", "ex2": "ex2"}.get(base, base)
            mods = ".".join(parts[1:-1])
            if name in ("fma", "mul", "add", "sub", "div", "sqrt", "ex2") and mods:
                if name == "fma" and mods == "rn":
                    pass
                elif name == "mul" and mods == "":
                    pass
                else:
                    return node(name + "." + mods, *a) if name not in COMMUTATIVE and name != "fma" else node(name, *a)
            if name not in ("fma", "mul", "add", "sub", "neg", "div", "sqrt", "ex2", "selp", "setp"):
                return node(op, *a)
            return node(name, *a)
        bits = int(ty[1:]) if ty[1:].isdigit() else 32
        signed = ty[0] == "s"
        m = MASK[bits]
        if base == "add":
            return (a[0] + a[1]) & m
        if base == "sub":
            return (a[0] - a[1]) & m
        if base == "mul":
            x, y = (sx(a[0], bits), sx(a[1], bits)) if signed else (a[0] & m, a[1] & m)
            if parts[1] == "wide":
                return (x * y) & MASK[2 * bits]
            if parts[1] == "hi":
                return ((x * y) >> bits) & m
            return (x * y) & m
        if base == "mad":
            x, y = (sx(a[0], bits), sx(a[1], bits)) if signed else (a[0] & m, a[1] & m)
            if parts[1] == "wide":
                return (x * y + a[2]) & MASK[2 * bits]
            return (x * y + a[2]) & m
        if base == "shl":
            return (a[0] << a[1]) & m
        if base == "shr":
            return ((sx(a[0], bits) if signed else a[0] & m) >> a[1]) & m
        if base == "and":
            return a[0] & a[1] & m
        if base == "or":
            return (a[0] | a[1]) & m
        if base == "xor":
            return (a[0] ^ a[1]) & m
        if base == "bfe":
            return (a[0] >> a[1]) & ((1 << a[2]) - 1)
        if base == "setp":
            cmp = parts[1]
            x, y = (sx(a[0], bits), sx(a[1], bits)) if signed or ty[0] == "b" and False else (a[0] & m, a[1] & m)
            if signed:
                x, y = sx(a[0], bits), sx(a[1], bits)
            return {"lt": x < y, "le": x <= y, "eq": x == y, "ne": x != y, "gt": x > y, "ge": x >= y}[cmp]
        if base == "selp":
            return a[0] if a[2] else a[1]
        raise NotImplementedError(raw)


def unpack(v):
    if isinstance(v, int):
        return v & 0xFFFF, (v >> 16) & 0xFFFF
    key = NODE_LIST[v.i]
    if key[0] == "pack":
        return key[1]
    if key[0] == "leaf" and key[1][0] == "m32":
        _, reg, off = key[1]
        return leaf("m16", reg, off), leaf("m16", reg, off + 2)
    return node("lo", v), node("hi", v)


# ----------------------------------------------------------------------------
def show(n, depth=0, maxdepth=6):
    if not isinstance(n, Sym):
        return repr(n)
    op, args = NODE_LIST[n.i]
    if op == "leaf":
        return "%s%s" % (args[0], args[1:])
    if depth >= maxdepth:
        return f"<{op} n{n.i}>"
    return "%s(%s)" % (op, ", ".join(show(x, depth + 1, maxdepth) for x in args))


def first_diff(a, b, path=()):
    """Descend two trees pairing children by their leaf sets; return the topmost
    nodes where they stop matching: (path, a, b)."""
    if a == b:
        return []
    if not (isinstance(a, Sym) and isinstance(b, Sym)):
        return [(path, a, b)]
    oa, aa = NODE_LIST[a.i]
    ob, ab = NODE_LIST[b.i]
    if oa != ob or len(aa) != len(ab) or oa == "leaf":
        return [(path, a, b)]
    used, pairs = set(), []
    for i, x in enumerate(aa):
        lx = leaves_of(x)
        for j, y in enumerate(ab):
            if j not in used and leaves_of(y) == lx and (x == y or not isinstance(x, Sym) or NODE_LIST[x.i][0] == NODE_LIST[y.i][0] if isinstance(y, Sym) else x == y):
                used.add(j)
                pairs.append((i, x, y))
                break
        else:
            return [(path, a, b)]
    out = []
    for i, x, y in pairs:
        out += first_diff(x, y, path + ((oa, i),))
    return out


_LEAVES = {}


def leaves_of(n):
    if not isinstance(n, Sym):
        return frozenset()
    if n.i in _LEAVES:
        return _LEAVES[n.i]
    op, args = NODE_LIST[n.i]
    if op == "leaf":
        r = frozenset([args]) if args[0] != "const" else frozenset()
    else:
        r = frozenset().union(*[leaves_of(x) for x in args])
    _LEAVES[n.i] = r
    return r


DECODE_PARAMS = {0: "mixed", 1: "a", 2: "b", 3: "A_log", 4: "dt_bias", 5: "o", 6: "h0", 7: "ht", 8: "ssm_idx", 10: "scratch0", 11: "scratch1"}
VERIFY_PARAMS = {0: "mixed", 1: "a", 2: "b", 3: "A_log", 4: "dt_bias", 5: "o", 6: "h0", 7: "ht", 8: "ssm_idx", 9: "inter_idx", 11: "scratch0", 12: "scratch1"}


class Regions(dict):
    pass


def simulate(path, params, scalar):
    names = sorted(set(params.values()))
    idmap = {n: i + 1 for i, n in enumerate(names)}
    rev = {i: n for n, i in idmap.items()}
    w = Warp({k: idmap[v] for k, v in params.items()}, scalar)
    orig_region = w.region
    w.region = lambda a: (rev.get(a >> 40, "abs"), a & ((1 << 40) - 1))
    instrs, labels = parse(path)
    w.run(instrs, labels)
    return w


def main():
    dec = simulate(sys.argv[1], DECODE_PARAMS, {9: "scale"})
    ver = simulate(sys.argv[2], VERIFY_PARAMS, {10: "scale"})

    def outs(w, region, it):
        d = {}
        for i, reg, off, lane, width, v in w.stores:
            if reg == region and i == it:
                d[(off, lane)] = v
        return d

    for region in ("o", "ht"):
        do, vo = outs(dec, region, 0), outs(ver, region, 0)
        # ht in verify is intermediate_states at step 0: same offsets with idx 0
        print(f"== region {region}: decode {len(do)} stores, verify {len(vo)} stores")
        common = sorted(set(do) & set(vo))
        ndiff = 0
        for k in common:
            if do[k] != vo[k]:
                ndiff += 1
        print(f"   common keys {len(common)}, differing {ndiff}")
        shown = 0
        for k in common:
            if do[k] != vo[k] and shown < 2:
                shown += 1
                print(f"-- first differing store {region}{k}")
                for path, a, b in first_diff(do[k], vo[k])[:6]:
                    print("   path:", " > ".join(f"{o}[{i}]" for o, i in path))
                    print("   decode:", show(a, maxdepth=4))
                    print("   verify:", show(b, maxdepth=4))
                    print("   same leaf set:", leaves_of(a) == leaves_of(b))


if __name__ == "__main__":
    main()


def label(n):
    """Short name for a sub-expression of the output reduction."""
    ls = leaves_of(n)
    h = sorted({off // 2 for kind, *rest in ls if kind == "m16" for reg, off in [rest] if reg == "h0"})
    if h:
        return "Hnew[r%d,c%d]" % (h[0] // 128, h[0] % 128) if len(h) == 1 else "H{%d..}" % len(h)
    q = sorted({off // 2 for kind, *rest in ls if kind == "m16" for reg, off in [rest] if reg == "mixed" and off < 4096})
    if len(q) <= 2:
        return "Q?" + str(q)
    return "Qn[..]"


def sum_tree(n, depth=0):
    """Render the add/fma skeleton of a reduction, naming products by their operands."""
    op, args = NODE_LIST[n.i]
    if op == "add":
        return "(" + " + ".join(sum_tree(a, depth + 1) for a in args) + ")"
    if op == "fma":
        a, b, c = args
        return "fma(%s*%s, %s)" % (short(a), short(b), sum_tree(c, depth + 1))
    if op == "mul":
        return "%s*%s" % tuple(short(x) for x in args)
    return short(n)


def short(n):
    op, args = NODE_LIST[n.i]
    if op == "div.full":  # normalized q (or k) element, pre-scale
        (kind, reg, off), = [l for l in leaves_of(args[0])]
        return "qn%d" % (off // 2 % 128) if off < 4096 else "kn%d" % (off // 2 % 128)
    if op == "mul" and any(NODE_LIST[a.i][0] == "leaf" and NODE_LIST[a.i][1][0] == "param" for a in args if isinstance(a, Sym)):
        other = [a for a in args if not (NODE_LIST[a.i][0] == "leaf")][0]
        return "scale*" + short(other)
    if op == "mul" and any(NODE_LIST[a.i][0] == "ex2.approx" for a in args):
        other = [a for a in args if NODE_LIST[a.i][0] != "ex2.approx"][0]
        (kind, reg, off), = leaves_of(other)
        return "hd[c%d]" % (off // 2 % 128)  # decayed state h*exp(g)
    if op == "fma":
        # state update element: fma(k, vcorr, hdecay)
        a, b, c = args
        return "Hnew(" + short(c) + ")"
    if op == "mul":
        return "(" + "*".join(short(a) for a in args) + ")"
    if op == "leaf":
        return str(args)
    return "<%s>" % op


def per_thread_partials(n, levels=4):
    """Strip `levels` butterfly-shuffle adds from the top; return the per-thread partial sums."""
    cur = [n]
    for _ in range(levels):
        nxt = []
        for x in cur:
            op, args = NODE_LIST[x.i]
            assert op == "add"
            nxt += list(args)
        cur = nxt
    return cur
