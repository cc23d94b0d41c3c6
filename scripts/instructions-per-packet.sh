#!/usr/bin/env bash
# Instructions per enqueue+dequeue pair for each spec given (default: the benchmark set), counted
# by valgrind (cachegrind) as the difference between 200,000 and 100,000 pairs, so setup cancels.
# Needs valgrind (apt-get install valgrind).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build -q --release -p debloat-core --example qdisc_cost
bin=target/release/examples/qdisc_cost
specs=("$@")
if [ ${#specs[@]} -eq 0 ]; then
  specs=("pfifo limit 10000" "codel limit 10000" "fq_codel" "cake bandwidth 100Gbit besteffort flows"
         "cake bandwidth 100Gbit besteffort triple-isolate" "cake bandwidth 100Gbit diffserv4 triple-isolate")
fi
count() { valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null "$bin" "$1" "$2" 2>&1 | awk '/I +refs/ {gsub(",","",$4); print $4}'; }
base=""
for s in "${specs[@]}"; do
  a=$(count "$s" 100000); b=$(count "$s" 200000)
  per=$(( (b - a) / 100000 ))
  [ -z "$base" ] && base=$per
  printf '%-52s %6d instr/pkt  %5.2fx\n' "$s" "$per" "$(echo "$per / $base" | bc -l)"
done
