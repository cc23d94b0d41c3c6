#!/usr/bin/env python3
"""The benchmark's tree of 10,000 circuits as a `tc -batch` file, for the kernel's own HTB.

    scripts/lab/circuits-tree.py DEV LEAF > tree.tc

The same shape `cargo bench … '^circuits'` builds through debloat's LibreQoS reader: the link's
class 1:1 at 100 Gbit/s, 50 sites × 10 access points (rate 95 Gbit/s, ceiling 100 Gbit/s, as
debloat sets a node's rate to 95 % of its ceiling), 10,000 circuits of rate 1 Mbit/s and ceiling
1 Gbit/s spread over the access points in turn; tc's default bursts. LEAF is the qdisc under each
circuit: `pfifo`, `cake` (cake diffserv4 under the first 1,024 circuits, the ones the traffic
reaches, pfifo under the rest: the kernel allocates every CAKE whole, about 0.7 MB each) or
`none` (HTB's default leaf).

Circuit i has the source address 198.19.(i / 256).(i % 256), what `debloat testbed blast
--spread-sources` sends from. The kernel classifies with u32 hash tables two levels deep (third,
then fourth byte of the source address): a hash look-up per level, as debloat's prefix trie does
its look-up (LibreQoS itself steers with an eBPF map; cls_flower and cls_bpf are not in every
kernel this runs on).
"""
import sys

SITES, APS, CIRCUITS, CAKES = 50, 10, 10_000, 1024


def tree(dev: str, leaf: str) -> str:
    out = [
        f"qdisc add dev {dev} root handle 1: htb default 65534",
        f"class add dev {dev} parent 1: classid 1:1 htb rate 100gbit ceil 100gbit",
    ]
    minor, aps = 2, []
    for _ in range(SITES):
        site = minor
        minor += 1
        out.append(
            f"class add dev {dev} parent 1:1 classid 1:{site:x} htb rate 95gbit ceil 100gbit"
        )
        for _ in range(APS):
            out.append(
                f"class add dev {dev} parent 1:{site:x} classid 1:{minor:x} htb rate 95gbit ceil 100gbit"
            )
            aps.append(minor)
            minor += 1
    filters = [f"filter add dev {dev} parent 1: prio 1 handle 100: protocol ip u32 divisor 256"]
    for h in range((CIRCUITS + 255) // 256):
        filters.append(
            f"filter add dev {dev} parent 1: prio 1 handle {h + 1:x}: protocol ip u32 divisor 256"
        )
        filters.append(
            f"filter add dev {dev} parent 1: prio 1 protocol ip u32 ht 100:{h:x}: "
            f"match ip src 198.19.{h}.0/24 hashkey mask 0x000000ff at 12 link {h + 1:x}:"
        )
    filters.append(
        f"filter add dev {dev} parent 1: prio 1 protocol ip u32 ht 800:: "
        f"match ip src 198.19.0.0/16 hashkey mask 0x0000ff00 at 12 link 100:"
    )
    for i in range(CIRCUITS):
        c = minor
        minor += 1
        ap = aps[i % len(aps)]
        out.append(
            f"class add dev {dev} parent 1:{ap:x} classid 1:{c:x} htb rate 1mbit ceil 1000mbit"
        )
        if leaf == "pfifo" or (leaf == "cake" and i >= CAKES):
            out.append(f"qdisc add dev {dev} parent 1:{c:x} pfifo")
        elif leaf == "cake":
            out.append(f"qdisc add dev {dev} parent 1:{c:x} cake diffserv4")
        h, low = i >> 8, i & 255
        filters.append(
            f"filter add dev {dev} parent 1: prio 1 protocol ip u32 ht {h + 1:x}:{low:x}: "
            f"match ip src 198.19.{h}.{low} classid 1:{c:x}"
        )
    return "\n".join(out + filters) + "\n"


def main() -> int:
    if len(sys.argv) != 3 or sys.argv[2] not in ("pfifo", "cake", "none"):
        print(__doc__, file=sys.stderr)
        print("usage: circuits-tree.py DEV pfifo|cake|none", file=sys.stderr)
        return 2
    sys.stdout.write(tree(sys.argv[1], sys.argv[2]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
