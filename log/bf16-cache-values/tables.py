import re,statistics as st,glob,os
os.chdir(os.path.dirname(os.path.abspath(__file__)))
def load(f):
    d={}
    for l in open(f):
        m=re.match(r'(\w+)\s+(\d+)\s+(\d+)\s+(\d+)\s+([\d.]+)',l)
        if m: d[(m[1],int(m[2]),int(m[3]))]=float(m[5])
    return d
N=[load(f) for f in sorted(glob.glob('att-new-*.txt'))]; B=[load(f) for f in sorted(glob.glob('att-base-*.txt'))]
print("attention, us a layer (median of", len(N), "runs)")
print("| context | rows | f16 | bf16 keys only (before) | bf16 keys and values | q8 | bf16 now / before | bf16 now / f16 |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
for ctx in (256,2048,4096,8192):
  for rows in (1,4,8,16):
    med=lambda L,c: st.median(x[(c,ctx,rows)] for x in L)
    f,nb,bb,q=med(N,'f16'),med(N,'bf16'),med(B,'bf16'),med(N,'q8')
    print(f"| {ctx:,} | {rows} | {f:.1f} | {bb:.1f} | {nb:.1f} | {q:.1f} | {nb/bb:.2f} | {nb/f:.2f} |")
def ver(f):
    d={}
    for l in open(f):
        m=re.match(r'\s+(\d+)\s+([\d.]+)\s+[\d.]+x',l)
        if m: d[int(m[1])]=float(m[2])
    return d
print("\nverify steps, ms (range of the 2 runs' medians)")
print("| context | cache | T(1) | T(4) | T(16) | T(4)/T(1) | T(16)/T(1) |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for D in (4096,8192):
  for tag,C in (('new','f16'),('base','bf16'),('new','bf16'),('new','q8')):
    V=[ver(f) for f in sorted(glob.glob(f'ver-{tag}-{C}-{D}-*.txt'))]
    rng=lambda k: f"{min(v[k] for v in V):.2f}-{max(v[k] for v in V):.2f}"
    r4=[v[4]/v[1] for v in V]; r16=[v[16]/v[1] for v in V]
    name=C if tag=='new' else C+' (keys only, before)'
    print(f"| {D:,} | {name} | {rng(1)} | {rng(4)} | {rng(16)} | {min(r4):.2f}-{max(r4):.2f} | {min(r16):.2f}-{max(r16):.2f} |")
print("\nprefill tok/s")
for tag,C in (('new','f16'),('base','bf16'),('new','bf16')):
    row=[]
    for P in (256,4096,8192):
        vals=[float(open(f).read().split('\n')[[i for i,l in enumerate(open(f).read().split('\n')) if l.startswith('  2 ')][0]].split()[2]) for f in sorted(glob.glob(f'pre-{tag}-{C}-{P}-*.txt'))]
        row.append(vals)
    r4=[a/b for a in row[1] for b in row[0]]; r8=[a/b for a in row[2] for b in row[0]]
    print(tag,C,[f"{min(v):.0f}-{max(v):.0f}" for v in row], f"4096/256 {min(r4):.2f}-{max(r4):.2f} 8192/256 {min(r8):.2f}-{max(r8):.2f}")
