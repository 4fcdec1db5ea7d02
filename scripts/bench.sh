#!/usr/bin/env bash
# The benchmark suite (docs/benchmarks.md): builds slicectl in release and
# runs benches/suite against the embedded GCP simulator, printing a table of
# ratios measured in this run. Arguments go to the suite, e.g.
#
#   scripts/bench.sh                  # full: plan 1k and 10k, converge, busy, idle, gcloud
#   scripts/bench.sh --quick          # smaller fleets, one run each
#   scripts/bench.sh --skip-gcloud --latency 5s --write-rate 10
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo bench --bench suite -- "$@"
