#!/usr/bin/env bash
# The gateway's root tests on its AF_XDP back end: every testbed test (the CI ones and the long
# tier's) with the gateway started as `--io af_xdp` ($DEBLOAT_IO, which `gateway --io` takes as
# its default; the testbed then turns the hosts' checksum offload off, as XDP needs). CI runs
# them on the TPACKET back end, plus tests/testbed_io.rs on AF_XDP; this is the rest of the
# matrix (about 25 minutes). Not tests/checksum_offload.rs: it tests the TPACKET back end's
# completion of checksums that hosts left for a NIC, which AF_XDP cannot see (docs/gateway-io.md),
# and it asserts that the hosts' offload is on. Run as root on an otherwise idle machine and put the date, the
# machine and the outcome in docs/gateway-io.md. Extra arguments go to the test binaries.
set -euo pipefail
cd "$(dirname "$0")/.."
export CI="${CI:-true}"
export DEBLOAT_IO="${DEBLOAT_IO:-af_xdp}"
tests=()
for t in crates/debloat/tests/testbed*.rs crates/debloat/tests/soak.rs; do
  tests+=(--test "$(basename "$t" .rs)")
done
cargo test --release --no-fail-fast -p debloat "${tests[@]}" -- --include-ignored "$@"
