#!/usr/bin/env bash
# Build debloat's Debian package with Debian's own dpkg-deb: the binary, the systemd unit, the
# example configuration (a conffile), man pages and shell completions made by the binary itself
# (`debloat man`, `debloat completions`), and the docs. The link traces are embedded in the binary.
#
#   scripts/package-deb.sh [OUTDIR]            # builds target/release/debloat first
#   BIN=path/to/debloat scripts/package-deb.sh OUTDIR   # package an existing binary
#
# Prints the .deb's path. Install with `apt-get install ./debloat_*.deb` (or `dpkg -i`); the
# service is installed but not enabled: docs/deploy.md.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-target/debian}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
if [ -z "${BIN:-}" ]; then
  cargo build --release -q -p debloat
  BIN=target/release/debloat
fi
version="$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)"
arch="$(dpkg --print-architecture)"
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
root="$stage/debloat_${version}_${arch}"

install -d "$root/DEBIAN" "$root/usr/bin" "$root/lib/systemd/system" "$root/etc/debloat" \
  "$root/usr/share/man/man1" "$root/usr/share/doc/debloat" \
  "$root/usr/share/bash-completion/completions" "$root/usr/share/zsh/vendor-completions" \
  "$root/usr/share/fish/vendor_completions.d"
# The release profile keeps line tables for profiling; the package does not need them.
install -m 0755 "$BIN" "$root/usr/bin/debloat"
strip --strip-debug "$root/usr/bin/debloat"
sed -e 's|/usr/local/bin/debloat|/usr/bin/debloat|g' \
    -e 's|file:///usr/local/share/doc/debloat/README.md|man:debloat-gateway(1) file:///usr/share/doc/debloat/deploy.md|' \
    contrib/debloat-gateway.service > "$root/lib/systemd/system/debloat-gateway.service"
install -m 0644 contrib/gateway.toml "$root/etc/debloat/gateway.toml"
"$root/usr/bin/debloat" man "$root/usr/share/man/man1" > /dev/null
gzip -9n "$root"/usr/share/man/man1/*.1
"$root/usr/bin/debloat" completions bash > "$root/usr/share/bash-completion/completions/debloat"
"$root/usr/bin/debloat" completions zsh > "$root/usr/share/zsh/vendor-completions/_debloat"
"$root/usr/bin/debloat" completions fish > "$root/usr/share/fish/vendor_completions.d/debloat.fish"
install -m 0644 README.md docs/deploy.md docs/install.md "$root/usr/share/doc/debloat/"
cat > "$root/usr/share/doc/debloat/copyright" <<EOF
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: debloat
Files: *
License: MIT or Apache-2.0
Files: the six LTE capacity traces embedded in /usr/bin/debloat
Source: mahimahi (ravinet/mahimahi, traces/, commit ae477d4), recorded for Winstein,
 Sivaraman and Balakrishnan, NSDI 2013; unchanged (data/link-traces/README.md)
License: as mahimahi distributes them
EOF

size_kb="$(du -sk "$root" | cut -f1)"
cat > "$root/DEBIAN/control" <<EOF
Package: debloat
Version: $version
Architecture: $arch
Maintainer: the debloat developers <debloat@localhost>
Installed-Size: $size_kb
Depends: libc6 (>= 2.34), iproute2, ethtool
Recommends: irtt
Suggests: flent
Section: net
Priority: optional
Description: queue management outside the kernel: CoDel, FQ-CoDel, CAKE, PIE, TBF
 debloat cuts queuing delay (bufferbloat). Its gateway forwards between two
 interfaces through cake or fq_codel in userspace (a systemd service:
 debloat-gateway); its probe measures latency under load (debloat test,
 debloat server); its simulator runs flent's tests in virtual time.
EOF
echo /etc/debloat/gateway.toml > "$root/DEBIAN/conffiles"
# Maintainer scripts: tell systemd about the unit; enabling it is the operator's step, after
# /etc/debloat/gateway.toml names the two ports (docs/deploy.md). Nothing when installed into
# another root (DPKG_ROOT) or where systemd is not running.
for s in postinst postrm; do
  cat > "$root/DEBIAN/$s" <<'EOF'
#!/bin/sh
set -e
if [ -z "${DPKG_ROOT:-}" ] && [ -d /run/systemd/system ]; then
  systemctl daemon-reload >/dev/null 2>&1 || true
fi
EOF
  chmod 0755 "$root/DEBIAN/$s"
done
deb="$out/debloat_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz -z6 --build "$root" "$deb" > /dev/null
echo "$deb"
