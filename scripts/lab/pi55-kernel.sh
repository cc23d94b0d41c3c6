#!/bin/sh
# `debloat lab run scripts/lab/pi55-kernel.sh --keep out/`: PI-55 (issue 26) on the real kernel.
# PI-55 on the kernel's fq_codel under HTB: client -> gw -> server, 5.5 Mbit/s up, 0.5 Mbit/s down.
set -e
D=${DEBLOAT:-debloat}
for n in c g s; do ip netns add k$n; ip -n k$n link set lo up; done
ip link add kc0 netns kc type veth peer name kg0 netns kg
ip link add kg1 netns kg type veth peer name ks0 netns ks
for x in "kc kc0 198.18.11.2/24" "kg kg0 198.18.11.1/24" "kg kg1 198.18.12.1/24" "ks ks0 198.18.12.2/24"; do set -- $x; ip -n $1 addr add $3 dev $2; ip -n $1 link set $2 up; done
ip -n kc route add default via 198.18.11.1
ip -n ks route add default via 198.18.12.1
ip netns exec kg sysctl -qw net.ipv4.ip_forward=1
for i in "kc kc0" "kg kg0" "kg kg1" "ks ks0"; do set -- $i; ip netns exec $1 ethtool -K $2 tx off rx off gso off tso off gro off >/dev/null 2>&1 || true; done
# up: gw -> server on kg1 at 5.5 Mbit/s; down: gw -> client on kg0 at 0.5 Mbit/s
tc -n kg qdisc add dev kg1 root handle 1: htb default 1
tc -n kg class add dev kg1 parent 1: classid 1:1 htb rate 5500kbit
tc -n kg qdisc add dev kg1 parent 1:1 fq_codel limit 1001 noecn
tc -n kg qdisc add dev kg0 root handle 1: htb default 1
tc -n kg class add dev kg0 parent 1: classid 1:1 htb rate 500kbit
tc -n kg qdisc add dev kg0 parent 1:1 fq_codel limit 1001 noecn
ip netns exec ks $D testbed tcp-sink --listen 0.0.0.0:5201 --seconds 40 > sink.txt &
sleep 0.5
ip netns exec kc ping -i 0.2 -w 32 198.18.12.2 > ping.txt &
ip netns exec kc $D testbed tcp-send --to 198.18.12.2:5201 --streams 4 --seconds 30 > send.txt
sleep 2
tc -n kg -s qdisc show dev kg1 > tc_up.txt
cat send.txt; grep -E "Sent|dropped" tc_up.txt
