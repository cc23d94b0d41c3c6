#!/usr/bin/env bash
# Instructions the gateway process spends per forwarded frame, counted by callgrind (a count,
# not a time: it does not depend on the machine's load or CPU model). Frames cross the
# testbed's namespaces at 2,000 a second, so each turn of the forwarding loop carries one frame
# (the per-frame cost with no batching to share it); the gateway runs twice, under a blast of
# 8 s and one of 2 s, and the difference over the 12,000 frames between cancels the start and
# the end. Method and results: docs/gateway-speed.md. Root; needs valgrind.
#
#   scripts/gateway-instructions.sh [DEBLOAT_BINARY] [IO]
#
# KEEP=DIR keeps the callgrind files there (callgrind_annotate reads them).
# prints one line per (forwarder, frame size): the do-nothing forwarder (--passthrough) and
# the gateway with cake besteffort, at 60 and 1514 bytes. IO is af_xdp (default) or packet.
set -euo pipefail
bin=$(realpath "${1:-target/release/debloat}")
io=${2:-af_xdp}
p=dbgi
out=$(mktemp -d)
trap '"$bin" testbed down --prefix $p >/dev/null 2>&1 || true; rm -rf "$out"' EXIT
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (network namespaces)"; exit 0; }
command -v valgrind >/dev/null || { echo "needs valgrind: apt-get install valgrind" >&2; exit 1; }

"$bin" testbed up --prefix $p --io "$io" >/dev/null
kill "$(cat /run/debloat/$p.pid)" 2>/dev/null || true
sleep 1
mac=$(ip netns exec $p-server cat /sys/class/net/eth0/address)

# count SECONDS SIZE ARGS…: instructions of one gateway run under a blast of SECONDS.
count() {
  local secs=$1 size=$2; shift 2
  local cg=$out/cg.$secs
  ip netns exec $p-gw valgrind --tool=callgrind --callgrind-out-file="$cg" \
    "$bin" gateway --lan lan0 --wan wan0 --io "$io" --control "$out/ctl.sock" "$@" \
    >"$out/gw.log" 2>&1 &
  local gw=$!
  for _ in $(seq 100); do [ -S "$out/ctl.sock" ] && break; sleep 0.2; done
  sleep 1
  ip netns exec $p-client "$bin" testbed blast --iface eth0 --dst-mac "$mac" \
    --size "$size" --flows 64 --pps 2000 --seconds "$secs" >/dev/null
  sleep 0.5
  kill -INT $gw
  wait $gw || true
  rm -f "$out/ctl.sock"
  if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP"; cp "$cg" "$KEEP/$what.$size.$secs"; fi
  awk '/^summary:|^totals:/ {print $2; exit}' "$cg"
}

for size in 60 1514; do
  for what in passthrough cake; do
    if [ $what = passthrough ]; then args=(--passthrough); else args=(--egress "cake besteffort" --ingress "cake besteffort"); fi
    long=$(count 8 $size "${args[@]}")
    short=$(count 2 $size "${args[@]}")
    printf '%-12s %5d B: %6d instructions a frame (%s - %s over 12,000 frames)\n' \
      $what $size $(( (long - short) / 12000 )) "$long" "$short"
  done
done
