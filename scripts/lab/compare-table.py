"""The Markdown table of a `scripts/lab/compare-all.sh OUTDIR` run, as docs/kernel-lab.md has it:
    python3 scripts/lab/compare-table.py OUTDIR
Each row is one comparison's NAME.txt (kernel / debloat); a figure outside its tolerance in bold."""
import os
import re
import sys

d = sys.argv[1] if len(sys.argv) > 1 else "lab-compare"
# In the order they ran.
txts = [f for f in os.listdir(d) if f.endswith(".txt")]
order = [f[:-4] for f in sorted(txts, key=lambda f: os.path.getmtime(os.path.join(d, f)))]
print("| run | ping p50 added (k / d) | p99 added | goodput Mbit/s | dropped % | marked % | other | verdict |")
print("|---|---|---|---|---|---|---|---|")
for name in order:
    f = os.path.join(d, name + '.txt')
    if not os.path.exists(f):
        continue
    rows = {}
    for line in open(f):
        m = re.match(r'\s+(.+?)\s{2,}(-?[\d.]+)\s+(-?[\d.]+)\s+(.+?)\s{2,}(ok|DIFFERENT)\s*$', line)
        if m:
            rows[m.group(1)] = (m.group(2), m.group(3), m.group(5))
    def cell(k, unit=''):
        if k not in rows: return ''
        a, b, v = rows[k]
        s = f"{a} / {b}{unit}"
        return f"**{s}**" if v == 'DIFFERENT' else s
    other = []
    for k in ('host 1 share, %', 'capacity estimate, Mbit/s'):
        if k in rows:
            a, b, v = rows[k]
            s = f"{k.split(',')[0]} {a} / {b}"
            other.append(f"**{s}**" if v == 'DIFFERENT' else s)
    verdict = 'ok' if all(v == 'ok' for _, _, v in rows.values()) else 'DIFFERENT'
    print(f"| {name} | {cell('ping p50 added by load, ms',' ms')} | {cell('ping p99 added by load, ms',' ms')} | {cell('goodput, Mbit/s')} | {cell('dropped / offered, %')} | {cell('marked / sent, %')} | {'; '.join(other)} | {verdict} |")
