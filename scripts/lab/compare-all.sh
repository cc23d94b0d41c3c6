#!/bin/sh
# Every discipline family side by side with the real kernel's (issue 26):
#   scripts/lab/compare-all.sh [OUTDIR]     (36 lines, about 55 s each; needs user-mode-linux and kmod)
# Each line is one `debloat lab compare`: the same real TCP uploads through the kernel's
# discipline and through debloat's gateway in one guest. OUTDIR gets NAME.txt (the table) and
# NAME.json (both runs' figures); the last line printed says how many differed.
# `python3 scripts/lab/compare-table.py OUTDIR` makes the run's Markdown table (docs/kernel-lab.md).
D=${DEBLOAT:-debloat}
OUT=${1:-lab-compare}
mkdir -p "$OUT"
fail=0
c() {
    name=$1; shift
    if "$D" lab compare "$@" --json "$OUT/$name.json" > "$OUT/$name.txt" 2>&1; then r=ok; else r=DIFFERENT; fail=$((fail + 1)); fi
    echo "$name: $r"
}
R="--rate 10Mbit/2Mbit --delay 10ms"
C="--delay 10ms"
c pfifo-50              "pfifo limit 50" $R
c bfifo-75k             "bfifo limit 75000" $R
c codel                 "codel" $R
c codel-ecn             "codel ecn" $R --ecn
c fq_codel-pi55         "fq_codel limit 1001 noecn" --rate 5500kbit/500kbit --delay 2ms
c fq_codel-ecn          "fq_codel" $R --ecn
c fq_codel-limit-100    "fq_codel limit 100 noecn" $R
c fq_codel-memlimit     "fq_codel memory_limit 200kb noecn" $R
c cake-besteffort       "cake bandwidth 10Mbit besteffort" --down "cake bandwidth 2Mbit besteffort" $C
c cake-diffserv3        "cake bandwidth 10Mbit diffserv3" --down "cake bandwidth 2Mbit diffserv3" --hosts 2,2 --tos 0x20,0 $C
c cake-diffserv4        "cake bandwidth 10Mbit diffserv4" --down "cake bandwidth 2Mbit diffserv4" --hosts 2,2 --tos 0x20,0 $C
c cake-diffserv8        "cake bandwidth 10Mbit diffserv8" --down "cake bandwidth 2Mbit diffserv8" --hosts 2,2 --tos 0x20,0 $C
c cake-ecn              "cake bandwidth 10Mbit besteffort" --down "cake bandwidth 2Mbit besteffort" --ecn $C
for m in flowblind srchost dsthost hosts flows dual-srchost dual-dsthost triple-isolate; do
    c "cake-$m" "cake bandwidth 10Mbit $m" --down "cake bandwidth 2Mbit $m" --hosts 1,4 $C
done
c cake-ack-filter       "cake bandwidth 10Mbit" --down "cake bandwidth 300kbit ack-filter" $C
c cake-ack-aggressive   "cake bandwidth 10Mbit" --down "cake bandwidth 300kbit ack-filter-aggressive" $C
c cake-atm              "cake bandwidth 10Mbit atm overhead 44 mpu 84" --down "cake bandwidth 2Mbit atm overhead 44" $C
c cake-ptm              "cake bandwidth 10Mbit ptm overhead 30 mpu 64" --down "cake bandwidth 2Mbit ptm overhead 30" $C
c cake-ingress          "cake bandwidth 10Mbit ingress" --down "cake bandwidth 2Mbit" $C
c netem-delay-jitter    "pfifo" --netem "delay 20ms 5ms rate 10Mbit" --rate 10Mbit/2Mbit --delay 1ms --no-match-rtt
c netem-loss            "pfifo" --netem "rate 10Mbit loss 1%" --rate 10Mbit/2Mbit --delay 10ms
c cake-autorate-ingress "cake bandwidth 100Mbit autorate-ingress besteffort" --down fq_codel --upstream-rate 8Mbit $C
c netem-slot            "pfifo" --netem "rate 10Mbit slot 2ms 4ms" --rate 10Mbit/2Mbit --delay 10ms
# tupdate in whole 10 ms: the lab's kernel counts it in jiffies of HZ=100 (docs/algorithms.md §6.1).
c pie                   "pie tupdate 20ms" $R
c pie-ecn               "pie tupdate 20ms ecn" $R --ecn
c pie-dq-rate           "pie tupdate 20ms dq_rate_estimator" $R
# On the lab's bridge every frame has priority 0 (a veth clears it): one band (docs/algorithms.md §7).
c pfifo_fast            "pfifo_fast" $R --hosts 2,2 --tos 0x10,0x08
c tbf                   "tbf rate 10Mbit burst 10kb latency 50ms" --down "tbf rate 2Mbit burst 5kb latency 50ms" $C
# fq on the bridge differs (the sender's socket reaches it: docs/kernel-lab.md); behind the
# pass-through gateway the kernel's fq sees forwarded frames as debloat's does.
c fq-bridge             "fq" $R --hosts 1,4
c fq                    "fq" $R --hosts 1,4 --kernel-via-gateway
c fq-maxrate            "fq flow_limit 20 maxrate 3Mbit" $R --hosts 1,4 --kernel-via-gateway
# HTB: two hosts' classes (2 and 6 Mbit/s) borrowing from a 10 Mbit/s parent; the tree built in
# the kernel by tc's own commands (docs/algorithms.md §12).
c htb-borrowing         "htb default 30 class 1:1 rate 10Mbit class 1:10 parent 1:1 rate 2Mbit ceil 10Mbit match src 198.18.1.2 qdisc fq_codel class 1:20 parent 1:1 rate 6Mbit ceil 10Mbit match src 198.18.1.3 qdisc fq_codel class 1:30 parent 1:1 rate 2Mbit ceil 10Mbit qdisc fq_codel" --down fq_codel $R --hosts 2,2
echo "$fail differed"
