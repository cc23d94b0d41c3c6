#!/bin/bash
# Two builds of debloat, the same simulations, byte for byte: for structural changes that must
# leave every simulator figure as it was (docs/testing.md, "Refactoring the data path").
#   scripts/sim-identical.sh OLD_DEBLOAT NEW_DEBLOAT
# runs 16 configurations (every device, shaper, impairment, trace, controller, Wi-Fi and
# marking path the simulator has, a pcap capture of both directions) with each binary and
# prints DIFF for each that differs; exit 1 if any does.
set -u
[ $# -eq 2 ] || { echo "usage: $0 OLD_DEBLOAT NEW_DEBLOAT" >&2; exit 2; }
ROOT=$(cd "$(dirname "$0")/.." && pwd)
T=$ROOT/data/link-traces/Verizon-LTE-short.down.mahi
Q=$ROOT/crates/debloat/tests/data/qosify/00-defaults.conf
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
runs() {
  local b=$1 o=$2 s="--length 20 --delay 2"
  mkdir -p "$o/pcap"
  $b sim rrul --link 20Mbit/5Mbit --qdisc "cake bandwidth 18Mbit" $s >"$o/rrul-cake"
  $b sim tcp_bidirectional --link 20Mbit/1Mbit --qdisc-up "cake bandwidth 900kbit ack-filter" --qdisc-down "cake bandwidth 19Mbit" $s >"$o/ack-filter"
  $b sim tcp_nup --link 100Mbit --qdisc fq_codel --ring 256 --bql --irq-coalesce 1ms $s >"$o/bql-irq"
  $b sim tcp_ndown --link 50Mbit --ring 128 --qdisc "pfifo limit 100" $s >"$o/ring"
  $b sim rrul_be --link 10Mbit --qdisc codel --ecn --loss 0.5% $s >"$o/codel-ecn-loss"
  $b sim tcp_ndown --link 20Mbit --impair "slot 2ms 6ms packets 16" --qdisc fq_codel $s >"$o/slot"
  $b sim tcp_1up --link 10Mbit --jitter 2ms --qdisc "cake bandwidth 9Mbit" --framing pppoe-vcmux $s >"$o/jitter-atm"
  $b sim tcp_ndown --link "trace:$T/10Mbit" --qdisc "cake bandwidth 8Mbit" $s >"$o/trace"
  $b sim tcp_ndown --link "trace:$T/10Mbit" --qdisc "cake bandwidth 8Mbit" --autorate-down min=2Mbit,base=8Mbit,max=20Mbit $s >"$o/autorate-passive"
  $b sim tcp_ndown --link "trace:$T/10Mbit" --qdisc "cake bandwidth 8Mbit" --autorate-down min=2Mbit,base=8Mbit,max=20Mbit --autorate-mode cake-autorate $s >"$o/autorate-cake"
  $b sim tcp_nup --link 20Mbit --cc bbr $s >"$o/bbr"
  $b sim tcp_ndown --wifi airtime --stations 6.5,65 $s >"$o/wifi"
  $b sim rtt_fair_var_up --rtts 10ms,50ms,100ms --qdisc "cake bandwidth 19Mbit" --link 20Mbit $s >"$o/rtt-fair"
  $b sim rrul --link 20Mbit/5Mbit --qdisc "cake bandwidth 18Mbit diffserv4" --classify "$Q" $s >"$o/marking"
  $b sim rrul --wifi airtime --stations 6.5,65 --classify "$Q" $s >"$o/marking-wifi"
  $b sim tcp_bidirectional --link 10Mbit --loss 1% --impair "delay 5ms 1ms reorder 1% duplicate 1%" --qdisc fq_codel --ring 64 --bql --length 10 --delay 1 --pcap "$o/pcap" >/dev/null
}
runs "$1" "$OUT/old"
runs "$2" "$OUT/new"
bad=0
for f in "$OUT"/old/* "$OUT"/old/pcap/*; do
  [ -f "$f" ] || continue
  n=${f#"$OUT"/old/}
  if cmp -s "$f" "$OUT/new/$n"; then echo "same $n"; else echo "DIFF $n"; bad=1; fi
done
exit $bad
