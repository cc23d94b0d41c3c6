#!/bin/sh
# `debloat lab run scripts/lab/pi55-gateway.sh --keep out/`: PI-55 through debloat gateway, in the same guest.
set -e
D=${DEBLOAT:-debloat}
$D testbed up --rate 500kbit/5500kbit --rtt 300us --egress "fq_codel limit 1001 noecn" --ingress "fq_codel limit 1001 noecn" --prefix d > up.txt 2>&1
ip netns exec d-server $D testbed tcp-sink --listen 0.0.0.0:5201 --seconds 40 > sink.txt &
sleep 0.5
ip netns exec d-client ping -i 0.2 -w 32 198.18.2.2 > ping.txt &
ip netns exec d-client $D testbed tcp-send --to 198.18.2.2:5201 --streams 4 --seconds 30 > send.txt
sleep 2
$D gateway stats --control /run/debloat/d.sock > stats.txt 2>&1 || true
cat send.txt; grep -E "qdisc|Sent" stats.txt | head -6
