"""Reads bench/wall_sampler.c's samples: the functions most often on the main thread's stack
(inclusive) and on top of it (self) between FROM_MS and TO_MS, and with FUNCTION, the call
chains above the frames whose names contain it.

usage: wall_sampler.py SAMPLES FROM_MS TO_MS [FUNCTION]
"""
import bisect
import collections
import subprocess
import sys

path, lo, hi = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
focus = sys.argv[4] if len(sys.argv) > 4 else None
maps, samples = [], []
for line in open(path):
    if line.startswith('M '):
        p = line[2:].split()
        if len(p) >= 6 and 'x' in p[1]:
            a, b = (int(x, 16) for x in p[0].split('-'))
            maps.append((a, b, int(p[2], 16), p[5]))
    elif line.startswith('S '):
        p = line.split()
        t = float(p[1])
        if lo <= t <= hi:
            samples.append([int(x, 16) for x in p[2:]])
maps.sort()
starts = [m[0] for m in maps]
def where(addr):
    i = bisect.bisect_right(starts, addr) - 1
    if i >= 0 and maps[i][0] <= addr < maps[i][1]:
        a, b, off, f = maps[i]
        return f, addr - a + off
    return '?', addr
need = collections.defaultdict(set)
for s in samples:
    for a in s[2:]:
        f, o = where(a - 1)
        need[f].add(o)
names = {}
for f, offs in need.items():
    offs = sorted(offs)
    if f == '?' or not f.startswith('/'):
        for o in offs:
            names[(f, o)] = f
        continue
    try:
        out = subprocess.run(['addr2line', '-f', '-C', '-e', f] + [hex(o) for o in offs],
                             capture_output=True, text=True).stdout.split('\n')
        for k, o in enumerate(offs):
            nm = out[2 * k] if 2 * k < len(out) else '??'
            names[(f, o)] = (nm if nm != '??' else f.split('/')[-1] + '+' + hex(o))[:150]
    except Exception:
        for o in offs:
            names[(f, o)] = f.split('/')[-1]
incl, selfc = collections.Counter(), collections.Counter()
for s in samples:
    fr = [names[where(a - 1)] for a in s[2:]]
    if fr:
        selfc[fr[0]] += 1
    for nm in set(fr):
        incl[nm] += 1
print(f'{len(samples)} samples in [{lo},{hi}]')
print('--- inclusive')
for n, c in incl.most_common(45):
    print(f'{c:6d} {n}')
print('--- self')
for n, c in selfc.most_common(20):
    print(f'{c:6d} {n}')

if focus:
    chains = collections.Counter()
    for s in samples:
        fr = [names[where(a - 1)] for a in s[2:]]
        for k, nm in enumerate(fr):
            if focus in nm:
                chains[' < '.join(x[:60] for x in fr[k:k + 8])] += 1
                break
    print('--- chains from', focus)
    for n, c in chains.most_common(12):
        print(f'{c:6d} {n}')
