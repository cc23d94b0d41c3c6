#!/usr/bin/env bash
# The long tier: the tests marked `#[ignore = "long tier: …"]` — the published rows reproduced on
# real TCP through the testbed, the LTE-trace autorate run, the soak, and the kernel lab's longer
# comparisons (PI-55 on the kernel's qdiscs, netem's delay and jitter, the kernel behind the
# forwarder). Each takes one to three minutes, which is why CI (30 minutes, build included)
# leaves them out; they are the same tests, run by this command. Run as root, on an otherwise
# idle machine (about 17 minutes); put the date, the machine, the kernel and the outcome in
# docs/testing.md. Extra arguments go to the test binaries (e.g. a test name, --nocapture).
set -euo pipefail
cd "$(dirname "$0")/.."
export CI="${CI:-true}" # here too a missing tool is a failure, not a SKIP
# Cloudflare's mach (crates.io cf-mach), the second client of the IETF responsiveness test in
# tests/testbed_nq.rs; it builds BoringSSL, which needs cmake and libclang.
if ! command -v mach >/dev/null 2>&1; then
  apt-get install -y -qq cmake clang libclang-dev >/dev/null
  cargo install --locked cf-mach
fi
cargo test --workspace --release -- --ignored "$@"
