import sys, re
# Prints, for rows 0 and 2, the per-thread 8-column partial sum of the output reduction and the PTX lines producing it (uses ptx_warp_sym).
sys.path.insert(0,'/work/notes')
import ptx_warp_sym as m
dec = m.simulate('/work/notes/triton38-dumps/decode.ptx', m.DECODE_PARAMS, {9: "scale"})
ver = m.simulate('/work/notes/triton38-dumps/verify.ptx', m.VERIFY_PARAMS, {10: "scale"})
def outs(w): return {(off,lane):v for i,reg,off,lane,width,v in w.stores if reg=='o' and i==0}
do, vo = outs(dec), outs(ver)
def partials(n, acc):
    op,args = m.NODE_LIST[n.i]
    rows = {off//2//128 for kind,*rest in m.leaves_of(n) if kind=='m16' for reg,off in [rest] if reg=='h0'}
    if len(rows)==1 and op=='add':
        acc[rows.pop()] = n; return
    for a in args:
        if isinstance(a, m.Sym): partials(a, acc)
pd, pv = {}, {}
for k in do: partials(do[k], pd)
for k in vo: partials(vo[k], pv)
# the 4-term group containing c0..c7 of row r (lane 0 holds cols 0..7)
def group(n):
    found=[]
    def rec(x):
        op,args=m.NODE_LIST[x.i]
        if op!='add': return
        t=m.sum_tree(x)
        if t.count('fma(')==4 and 'hd[c0])' in t and 'hd[c7])' in t: found.append(x); return
        for a in args: rec(a)
    rec(n); return found[0]
for r in (0,2):
    for name,w,p in (("decode",dec,pd),("verify",ver,pv)):
        g=group(p[r])
        print(f"--- {name} row {r}: per-thread partial of cols 0..7  = {m.sum_tree(g)}")
        def dump(x, d=0):
            op,args=m.NODE_LIST[x.i]
            if op in ('add','fma','mul') and d<4:
                print("   "*d + w.origin.get(x,'?'))
                for a in args:
                    if isinstance(a,m.Sym) and m.NODE_LIST[a.i][0] in ('add','fma','mul'): dump(a,d+1)
        dump(g)
