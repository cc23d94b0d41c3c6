#!/bin/sh
# What Linux's own HTB costs per packet on the benchmark's tree of 10,000 circuits (issue 43's
# "cost per packet" bound), measured the only way the kernel's qdiscs can be: frames pushed
# through them by a sender, one at a time (the device is faster than the sender, so each frame
# is enqueued into an empty discipline and dequeued at once), and the time per frame compared
# with the same sender through no qdisc at all.
#
#   scripts/lab/circuits-cost.sh [OUTDIR]
#     ROUNDS=5 SECONDS_EACH=3 DEBLOAT=target/release/debloat
#
# Two beds, in one run:
#  * host: this machine's kernel, natively, on a veth in a namespace of its own: no qdisc, pfifo,
#    and the tree with pfifo leaves (needs root, and a kernel with sch_htb and cls_u32 — most
#    have them; this host's has no sch_cake, so CAKE is measured in the lab only);
#  * lab: the kernel lab's User-Mode Linux (`debloat lab run`), on a dummy device: no qdisc,
#    pfifo, one flat `cake bandwidth 100Gbit diffserv4 triple-isolate` (the benchmark's
#    baseline), the tree with pfifo leaves and the tree with cake diffserv4 leaves. UML's
#    absolute times are not the host's; its ratios between disciplines are what it is for.
# The sender is `debloat testbed blast` (AF_PACKET, 32 frames a system call, 1024 flows from
# 1024 source addresses 198.19.0.0–198.19.3.255, 1514-byte frames), pinned to CPU 1 on the host.
# Per frame: elapsed / sent, in ns, median of the rounds (the configurations alternate, round
# after round). Results are dated in BENCHMARKS.md ("Circuits against Linux's HTB").
set -eu
OUT=${1:-circuits-cost}
ROUNDS=${ROUNDS:-5}
SECS=${SECONDS_EACH:-3}
D=$(readlink -f "${DEBLOAT:-target/release/debloat}")
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
[ -x "$D" ] || { echo "no debloat binary at $D (cargo build --release, or DEBLOAT=…)" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "needs root (a namespace and tc on the host)" >&2; exit 2; }
python3 "$HERE/circuits-tree.py" vt0 pfifo > "$OUT/host-pfifo.tc"
python3 "$HERE/circuits-tree.py" d0 pfifo > "$OUT/lab-pfifo.tc"
python3 "$HERE/circuits-tree.py" d0 cake > "$OUT/lab-cake.tc"
: > "$OUT/samples.txt"

# One line `BED CONFIG NS_PER_FRAME` from blast's JSON on standard input.
per_frame() {
    python3 -c 'import json,sys
r = json.loads(sys.stdin.read().strip().splitlines()[-1])
print("%s %s %.1f" % (sys.argv[1], sys.argv[2], 1e9 * r["elapsed_s"] / max(r["sent"], 1)))' "$1" "$2"
}

echo "host: $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
NS=circuits-cost-$$
ip netns add "$NS"
trap 'ip netns del "$NS" 2>/dev/null || true' EXIT
N="ip netns exec $NS"
$N ip link add vt0 type veth peer name vt1
$N ip link set vt0 up
$N ip link set vt1 up
hblast() {
    $N "$D" testbed blast --iface vt0 --dst-mac 02:00:00:00:00:02 --src-ip 198.18.0.1 \
        --dst-ip 198.18.0.2 --size 1514 --flows 1024 --spread-sources --seconds "$SECS" --cpu 1 \
        | per_frame host "$1" | tee -a "$OUT/samples.txt"
}
r=0
while [ $r -lt "$ROUNDS" ]; do
    r=$((r + 1))
    $N tc qdisc del dev vt0 root 2>/dev/null || true
    hblast noqueue
    $N tc qdisc replace dev vt0 root pfifo limit 10000
    hblast pfifo
    $N tc qdisc del dev vt0 root
    $N tc -batch "$OUT/host-pfifo.tc" > /dev/null 2>&1 || { echo "tc -batch failed (sch_htb, cls_u32?)" >&2; exit 1; }
    hblast htb10k_pfifo
    [ $r = 1 ] && $N tc -s class show dev vt0 classid 1:3 > "$OUT/host-class-ap.txt"
done
$N tc qdisc del dev vt0 root 2>/dev/null || true

cat > "$OUT/payload.sh" <<EOF
modprobe dummy
ip link add d0 type dummy
ip link set d0 up
echo "lab: \$(uname -r)" >&2
lblast() {
    \$DEBLOAT testbed blast --iface d0 --dst-mac 02:00:00:00:00:02 --src-ip 198.18.0.1 \
        --dst-ip 198.18.0.2 --size 1514 --flows 1024 --spread-sources --seconds $SECS | tail -1 \
        | sed "s/^/\$1 /"
}
r=0
while [ \$r -lt $ROUNDS ]; do
    r=\$((r + 1))
    tc qdisc del dev d0 root 2>/dev/null
    lblast noqueue
    tc qdisc replace dev d0 root pfifo limit 10000
    lblast pfifo
    tc qdisc replace dev d0 root cake bandwidth 100Gbit diffserv4 triple-isolate
    lblast flat_cake
    tc qdisc del dev d0 root
    tc -batch $OUT/lab-pfifo.tc > /dev/null 2>&1 || echo "tc -batch failed" >&2
    lblast htb10k_pfifo
    tc qdisc del dev d0 root
    tc -batch $OUT/lab-cake.tc > /dev/null 2>&1 || echo "tc -batch failed" >&2
    lblast htb10k_cake
    tc qdisc del dev d0 root
done
EOF
"$D" lab run "$OUT/payload.sh" --mem 2048 > "$OUT/lab.txt"
while read -r cfg json; do
    echo "$json" | per_frame lab "$cfg" | tee -a "$OUT/samples.txt"
done < "$OUT/lab.txt"

python3 - "$OUT/samples.txt" <<'EOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    bed, cfg, ns = line.split()
    rows.setdefault((bed, cfg), []).append(float(ns))
med = {k: statistics.median(v) for k, v in rows.items()}
print("\nmedian ns per frame; the discipline's own = less the same bed's `noqueue`")
for (bed, cfg), m in med.items():
    own = m - med[(bed, "noqueue")]
    line = f"{bed:5} {cfg:13} {m:8.1f} ns   own {own:7.1f} ns"
    if (bed, "flat_cake") in med and cfg != "noqueue":
        line += f"   × flat cake's own {own / (med[(bed, 'flat_cake')] - med[(bed, 'noqueue')]):.2f}"
    print(line)
# Per round (the n-th sample of each configuration): the tree with cake leaves against the flat
# cake, each less that round's `noqueue`.
if (("lab", "flat_cake") in rows) and (("lab", "htb10k_cake") in rows):
    base, flat, tree = rows[("lab", "noqueue")], rows[("lab", "flat_cake")], rows[("lab", "htb10k_cake")]
    ratios = [(t - b) / (f - b) for b, f, t in zip(base, flat, tree)]
    print("lab, each round: the tree with cake leaves × the flat cake: "
          + " ".join(f"{r:.2f}" for r in ratios))
EOF
