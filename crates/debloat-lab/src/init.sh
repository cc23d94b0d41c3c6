#!/bin/sh
# PID 1 of the debloat lab's User-Mode Linux guest. The root is the host's filesystem, read-only
# (hostfs). Mount what a shell, tc and network namespaces need, run the payload from the host
# directory given as lab_out= on the kernel's command line, write its output there, power off.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
for d in /run /tmp /var/tmp /root; do mount -t tmpfs tmpfs "$d"; done
OUT=$(sed -n 's/.* lab_out=\([^ ]*\).*/\1/p' /proc/cmdline)
MODPROBE=$(sed -n 's/.* lab_modprobe=\([^ ]*\).*/\1/p' /proc/cmdline)
MODULES=$(sed -n 's/.* lab_modules=\([^ ]*\).*/\1/p' /proc/cmdline)
mkdir -p /run/out
mount -t hostfs none /run/out -o "$OUT"
# The host may have no /lib/modules (and the root is read-only): the guest's module tree under
# /run, and a modprobe the kernel calls when tc asks for a qdisc.
mkdir -p "/run/modroot/lib/modules/$(uname -r)"
mount --bind "$MODULES/$(uname -r)" "/run/modroot/lib/modules/$(uname -r)"
printf '#!/bin/sh\nexec %s -d /run/modroot "$@"\n' "$MODPROBE" > /run/modprobe
chmod +x /run/modprobe
echo /run/modprobe > /proc/sys/kernel/modprobe
/run/modprobe ipv6 2>/dev/null
ip link set lo up
cd /run/out && sh /run/out/payload.sh > /run/out/stdout 2> /run/out/stderr
echo $? > /run/out/rc
sync
poweroff -f
