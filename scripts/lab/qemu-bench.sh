#!/bin/sh
# `debloat bench gateway` in a QEMU guest under software emulation (TCG), with Debian's generic
# Linux 6.1 kernel: the second bed for issue 26's cost comparison. The kernel lab's User-Mode
# Linux turns every system call of a guest process into a round trip through the host kernel
# (and has no vDSO, so a clock read is one too): a tax on a userspace forwarder that the
# kernel's own forwarding does not pay. Under TCG every instruction is emulated, user and kernel
# alike, and system calls stay inside the guest, so the same comparison there shows how much of
# UML's verdict is UML's.
#
#   scripts/lab/qemu-bench.sh [OUTDIR] [-- ARGS FOR bench gateway]
#     default ARGS: --qdisc cake --kernel-qdisc --one-cpu --no-busy-poll --realtime 0
#     DEBLOAT=path/to/debloat (default: target/release/debloat), QEMU_SMP=N vCPUs (default 1),
#     KIT=dir for the kernel and initramfs (default /var/cache/debloat-qemu)
#
# Needs root. Installs qemu-system-x86, busybox-static and kmod if missing; fetches Debian's
# linux-image-*-amd64 package (≈70 MB) once into $KIT and unpacks it there (nothing goes into
# the host's /boot or /lib/modules); builds a small initramfs: busybox loads virtio and 9p and
# makes the guest's root a tmpfs with the host's /usr, /etc and /var/lib bound in read-only over
# virtio-9p (nothing is mounted onto a 9p directory: the guest drops such a dentry whenever the
# host changes the directory — the host's /proc, say — and the mount with it). The guest has no
# NIC; the bench builds its veths inside. About 5–15 minutes: TCG runs the guest 10–50 times
# slower than the host.
set -eu
OUT=${1:-qemu-bench}
[ $# -gt 0 ] && shift
[ "${1:-}" = "--" ] && shift
ARGS=${*:---qdisc cake --kernel-qdisc --one-cpu --no-busy-poll --realtime 0}
KIT=${KIT:-/var/cache/debloat-qemu}
D=${DEBLOAT:-target/release/debloat}
SMP=${QEMU_SMP:-1}

need() { command -v "$1" >/dev/null 2>&1; }
if ! need qemu-system-x86_64 || ! [ -x /bin/busybox ] || ! need depmod; then
    apt-get install -y -qq --no-install-recommends qemu-system-x86 busybox-static kmod >/dev/null
fi
[ -x "$D" ] || { echo "no debloat binary at $D (cargo build --release, or set DEBLOAT)" >&2; exit 2; }

initramfs_init() {
    cat <<'INIT'
#!/bin/busybox sh
B=/bin/busybox
$B mkdir -p /proc /dev
$B mount -t proc proc /proc
$B mount -t devtmpfs dev /dev
for m in $($B cat /mods/order); do $B insmod /mods/$m.ko; done
R=/newroot
$B mount -t tmpfs -o mode=755 tmpfs $R
$B mkdir -p $R/host $R/usr $R/etc $R/var/lib $R/proc $R/sys $R/dev $R/run $R/tmp $R/root $R/out
$B chmod 1777 $R/tmp
for l in bin sbin lib lib64; do $B ln -s usr/$l $R/$l; done
$B ln -s /run $R/var/run
$B ln -s /tmp $R/var/tmp
o=trans=virtio,version=9p2000.L,msize=512000
$B mount -t 9p -o $o,cache=loose,ro root $R/host || $B poweroff -f
for d in usr etc var/lib; do $B mount -o bind $R/host/$d $R/$d; done
$B mount -t 9p -o $o out $R/out || $B poweroff -f
$B umount /dev /proc
exec $B switch_root $R /bin/sh /out/guest.sh
INIT
}

# The kernel and the initramfs, once.
mkdir -p "$KIT"
if ! [ -e "$KIT/ready" ]; then
    pkg=$(apt-cache depends linux-image-amd64 | sed -n 's/.*Depends: \(linux-image-[0-9].*-amd64\)$/\1/p' | head -1)
    [ -n "$pkg" ] || { echo "cannot find Debian's linux-image-amd64 (apt-get update?)" >&2; exit 2; }
    echo "fetching $pkg …"
    (cd "$KIT" && rm -rf root ./*.deb && apt-get download "$pkg" >/dev/null 2>&1 && dpkg-deb -x ./*.deb root && rm -f ./*.deb)
    kver=$(ls "$KIT/root/lib/modules")
    depmod -b "$KIT/root" "$kver"
    rm -rf "$KIT/initrd" && mkdir -p "$KIT/initrd/bin" "$KIT/initrd/mods" "$KIT/initrd/newroot"
    cp /bin/busybox "$KIT/initrd/bin/busybox"
    M="$KIT/root/lib/modules/$kver/kernel"
    # virtio-9p's modules, each after what it needs (modules.dep).
    for m in drivers/virtio/virtio_ring drivers/virtio/virtio drivers/virtio/virtio_pci_legacy_dev \
             drivers/virtio/virtio_pci_modern_dev drivers/virtio/virtio_pci fs/netfs/netfs \
             fs/fscache/fscache net/9p/9pnet net/9p/9pnet_virtio fs/9p/9p; do
        cp "$M/$m.ko" "$KIT/initrd/mods/"
        basename "$m" >> "$KIT/initrd/mods/order"
    done
    initramfs_init > "$KIT/initrd/init"
    chmod +x "$KIT/initrd/init"
    (cd "$KIT/initrd" && find . | /bin/busybox cpio -o -H newc 2>/dev/null | gzip -1 > "$KIT/initrd.gz")
    echo "$kver" > "$KIT/ready"
fi
kver=$(cat "$KIT/ready")

# The run's directory (the guest's /out): the binary, the guest's script, what it writes.
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
cp "$D" "$OUT/debloat"
cat > "$OUT/guest.sh" <<GUEST
#!/bin/sh
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /run/modroot/lib/modules/$kver
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,ro kit /run/modroot/lib/modules/$kver
printf '#!/bin/sh\nexec /usr/sbin/modprobe -d /run/modroot "\$@"\n' > /run/modprobe
chmod +x /run/modprobe
echo /run/modprobe > /proc/sys/kernel/modprobe
ip link set lo up
cd /out
{ uname -r; nproc; } > /out/guest
/out/debloat bench gateway $ARGS > /out/stdout 2> /out/stderr
echo \$? > /out/rc
sync
poweroff -f
GUEST
rm -f "$OUT/rc" "$OUT/stdout" "$OUT/stderr"
echo "booting Debian's $kver under QEMU (TCG, $SMP vCPU) and running: debloat bench gateway $ARGS"
start=$(date +%s)
timeout 3600 qemu-system-x86_64 -accel tcg,thread=multi -cpu max -smp "$SMP" -m 1024 -nic none \
    -display none -no-reboot -serial "file:$OUT/console.log" -monitor none \
    -kernel "$KIT/root/boot/vmlinuz-$kver" -initrd "$KIT/initrd.gz" \
    -append "console=ttyS0 quiet panic=-1" \
    -virtfs local,path=/,mount_tag=root,security_model=none,readonly=on,multidevs=remap \
    -virtfs "local,path=$OUT,mount_tag=out,security_model=none" \
    -virtfs "local,path=$KIT/root/lib/modules/$kver,mount_tag=kit,security_model=none,readonly=on" || true
echo "guest ran $(( $(date +%s) - start )) s"
[ -e "$OUT/rc" ] || { echo "the guest did not run the payload; console:" >&2; tail -30 "$OUT/console.log" >&2; exit 2; }
cat "$OUT/stdout"
cat "$OUT/stderr" >&2
exit "$(cat "$OUT/rc")"
