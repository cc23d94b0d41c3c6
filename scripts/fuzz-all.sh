#!/usr/bin/env bash
# Run every cargo-fuzz target for SECONDS each (default 60), one after another, starting from the
# seeds in fuzz/seeds/TARGET (inputs from the tests) and the corpus cargo-fuzz keeps in
# fuzz/corpus/TARGET; print a table: target, inputs tried, result. A failing input is kept by
# cargo-fuzz in fuzz/artifacts/TARGET; add it to fuzz/seeds/TARGET once fixed, as a regression.
#
# Needs cargo-fuzz (`cargo install cargo-fuzz`) and a nightly compiler: the nightly toolchain if
# rustup has it, otherwise the stable one with RUSTC_BOOTSTRAP=1 (which lets stable take the
# sanitizer flags cargo-fuzz passes; what CI does, having only stable).
# FUZZ_SANITIZER=none builds without AddressSanitizer (cargo-fuzz's default, kept otherwise):
# what the targets reach is safe Rust (debloat-core forbids unsafe code; the gateway's and the
# probe's unsafe system calls are not on any target's path), where the fuzzer catches panics and
# overflows with or without it, and the build takes 2.1 min instead of 3.5 (CI uses it).
# Usage: [FUZZ_SANITIZER=none] [FUZZ_PROFILE=dev] scripts/fuzz-all.sh [SECONDS] [TARGET...]
set -uo pipefail
cd "$(dirname "$0")/.."
secs="${1:-60}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(sed -n 's/^name = "\(.*\)"$/\1/p' fuzz/Cargo.toml | grep -v '^debloat-fuzz$')
fi
if rustc +nightly --version >/dev/null 2>&1; then
  fuzz=(cargo +nightly fuzz)
  compiler=$(rustc +nightly --version)
else
  export RUSTC_BOOTSTRAP=1
  fuzz=(cargo fuzz)
  compiler="$(rustc --version) with RUSTC_BOOTSTRAP=1"
fi
"${fuzz[@]}" --version >/dev/null 2>&1 || { echo "needs cargo-fuzz: cargo install cargo-fuzz"; exit 2; }
san=()
[ -n "${FUZZ_SANITIZER:-}" ] && san=(--sanitizer "$FUZZ_SANITIZER")
# FUZZ_PROFILE=dev builds the targets unoptimised (cargo fuzz --dev): 1.3 min to build against
# 2 min, fewer inputs a second; what CI's 2 s a target uses, as a check that the seeds and what
# lies near them still pass. Longer runs keep the optimised build.
[ "${FUZZ_PROFILE:-}" = dev ] && san+=(--dev)
echo "fuzzing with $compiler, $secs s per target, sanitizer ${FUZZ_SANITIZER:-address}, ${FUZZ_PROFILE:-release} build"
mkdir -p target/fuzz-logs
"${fuzz[@]}" build "${san[@]}" >target/fuzz-logs/build.log 2>&1 || { tail -30 target/fuzz-logs/build.log; exit 2; }
printf '%-20s %12s  %s\n' target inputs result
failed=0
for t in "${targets[@]}"; do
  mkdir -p "fuzz/corpus/$t" "fuzz/seeds/$t"
  log="target/fuzz-logs/$t.log"
  "${fuzz[@]}" run "${san[@]}" "$t" "fuzz/corpus/$t" "fuzz/seeds/$t" -- -max_total_time="$secs" >"$log" 2>&1
  rc=$?
  runs=$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$log" | tail -1)
  if [ $rc -eq 0 ]; then res=ok; else res="FAILED (rc $rc, see $log)"; failed=1; fi
  printf '%-20s %12s  %s\n' "$t" "${runs:-?}" "$res"
done
exit $failed
