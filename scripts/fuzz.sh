#!/usr/bin/env bash
# Coverage-guided fuzzing of slicectl's front end (docs/testing.md, "Fuzzing
# the front end") with cargo-fuzz (libFuzzer) on the nightly toolchain.
#
#   scripts/fuzz.sh                      every target for 60 s
#   scripts/fuzz.sh 300                  every target for 300 s
#   scripts/fuzz.sh -runs=1000000        the long mode: a million inputs per target
#   scripts/fuzz.sh spec live -runs=2000000
#   scripts/fuzz.sh --merge              add what the runs found that covers new
#                                        code to the committed corpus (fuzz/corpus/)
#
# Each target starts from the committed corpus (fuzz/corpus/TARGET/, read
# only) and writes what it finds to fuzz/work/TARGET/. A crash stops that
# target and leaves its input in fuzz/artifacts/TARGET/; the script exits 1
# after the others ran. It prints inputs run and inputs/s per target.
# FUZZ_SANITIZER=address builds with ASan (default none: the targets are
# safe Rust, and a panic is what is looked for); FUZZ_JOBS=N runs N workers.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

targets=()
limit=(-max_total_time=60)
merge=false
for a in "$@"; do
  case "$a" in
    --merge) merge=true ;;
    -runs=*) limit=("$a") ;;
    ''|*[!0-9]*) targets+=("$a") ;;
    *) limit=(-max_total_time="$a") ;;
  esac
done
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(sed -n 's/^name = "\(.*\)"$/\1/p' fuzz/Cargo.toml | grep -v '^slicectl-fuzz$')
fi

rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
sanitizer="${FUZZ_SANITIZER:-none}"
jobs="${FUZZ_JOBS:-1}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/fuzz/target}"
cargo +nightly fuzz build -s "$sanitizer"

if $merge; then
  for t in "${targets[@]}"; do
    [ -d "fuzz/work/$t" ] || continue
    echo "== merging fuzz/work/$t into fuzz/corpus/$t"
    cargo +nightly fuzz run -s "$sanitizer" "$t" "fuzz/corpus/$t" "fuzz/work/$t" -- -merge=1 2>&1 | grep -E '^MERGE-OUTER: [0-9]+ new files' || true
  done
  exit 0
fi

failed=()
summary=()
for t in "${targets[@]}"; do
  mkdir -p "fuzz/work/$t" "fuzz/artifacts/$t"
  log="fuzz/work/$t.log"
  echo "== $t (${limit[*]}, log $log)"
  start=$(date +%s)
  status=0
  cargo +nightly fuzz run -s "$sanitizer" "$t" "fuzz/work/$t" "fuzz/corpus/$t" -- \
    "${limit[@]}" -timeout=10 -print_final_stats=1 -jobs="$jobs" -workers="$jobs" \
    -artifact_prefix="fuzz/artifacts/$t/" >"$log" 2>&1 || status=$?
  secs=$(( $(date +%s) - start ))
  runs=$(sed -n 's/^stat::number_executed_units: *//p' "$log" | awk '{s+=$1} END {print s+0}')
  rate=$(( runs / (secs > 0 ? secs : 1) ))
  summary+=("$(printf '%-12s %12s inputs %8s s %8s inputs/s  %s' "$t" "$runs" "$secs" "$rate" \
    "$([ $status -eq 0 ] && echo ok || echo "FAILED (see $log, fuzz/artifacts/$t/)")")")
  [ $status -eq 0 ] || failed+=("$t")
done
echo
printf '%s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  echo "crashed: ${failed[*]}; reproduce with: cargo +nightly fuzz run -s $sanitizer TARGET fuzz/artifacts/TARGET/crash-…" >&2
  exit 1
fi
