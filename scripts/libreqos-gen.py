#!/usr/bin/env python3
"""Write a LibreQoS network.json and ShapedDevices.csv of a given size, for trying debloat's
circuit trees at an ISP's scale (docs/circuits.md).

    scripts/libreqos-gen.py OUTDIR [--sites 50] [--aps 10] [--circuits 10000]

Sites of 10 Gbit/s (5 up) hold access points of 1 Gbit/s (500 Mbit/s up); circuits are spread
over the access points in turn, each one device with an IPv4 address in 100.64.0.0/10 and an
IPv6 /56 in fd00::/8, plans of 25 to 500 Mbit/s down (a fifth of that up, at least 2), minimum
1/1 as LibreQoS recommends. The same arguments always give the same files.
"""
import argparse
import json
import os

PLANS = [25, 50, 100, 250, 500]


def main():
    a = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    a.add_argument("outdir")
    a.add_argument("--sites", type=int, default=50)
    a.add_argument("--aps", type=int, default=10, help="access points per site")
    a.add_argument("--circuits", type=int, default=10000)
    o = a.parse_args()
    if o.circuits > 4_000_000:
        a.error("at most 4,000,000 circuits fit in 100.64.0.0/10")
    os.makedirs(o.outdir, exist_ok=True)
    net, aps = {}, []
    for s in range(o.sites):
        children = {}
        for p in range(o.aps):
            name = f"AP_{s + 1}_{p + 1}"
            children[name] = {"downloadBandwidthMbps": 1000, "uploadBandwidthMbps": 500}
            aps.append(name)
        net[f"Site_{s + 1}"] = {
            "downloadBandwidthMbps": 10000,
            "uploadBandwidthMbps": 5000,
            "children": children,
        }
    with open(os.path.join(o.outdir, "network.json"), "w") as f:
        json.dump(net, f, indent=2)
    with open(os.path.join(o.outdir, "ShapedDevices.csv"), "w") as f:
        f.write("Circuit ID,Circuit Name,Device ID,Device Name,Parent Node,MAC,IPv4,IPv6,"
                "Download Min Mbps,Upload Min Mbps,Download Max Mbps,Upload Max Mbps,Comment\n")
        for i in range(o.circuits):
            v4 = f"100.{64 + (i >> 16)}.{(i >> 8) & 255}.{i & 255}"
            v6 = f"fd00:{i >> 16:x}:{i & 0xffff:x}::/56"
            down = PLANS[i % len(PLANS)]
            up = max(2, down // 5)
            ap = aps[i % len(aps)] if aps else ""
            f.write(f"{i + 1},Subscriber {i + 1},{i + 1},CPE {i + 1},{ap},,{v4},{v6},1,1,{down},{up},\n")


if __name__ == "__main__":
    main()
