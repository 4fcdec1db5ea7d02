#!/usr/bin/env bash
# The project's single test command: builds the Kubernetes control-plane
# binaries and the JobSet controller if they are not cached
# (scripts/k8s-testbin.sh), starts a private control plane
# (scripts/k8s-testenv.sh) in a temporary directory with a real node
# (scripts/k8s-testnode.sh: kubelet, containerd, runc), runs
# `cargo fmt --all --check`, `cargo clippy --workspace --all-targets -- -D warnings`
# and `cargo test --workspace` against it (slicectl and the simulator crate,
# crates/slicectl-sim), then `cargo install --locked --path . --debug` into a
# temporary root (what docs/cli.md tells users to run, in the dev profile so
# it reuses the test build) and checks the installed binary's --version names
# this checkout's commit; and always stops the control plane on exit.
#
# Extra arguments are passed to `cargo test` (e.g. scripts/test.sh --test controlplane k8s_controlplane::).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
log() { printf '[test.sh] %s\n' "$*" >&2; }
now_ms() { local t=${EPOCHREALTIME/./}; echo $((t / 1000)); }
since() { local ms=$(($(now_ms) - $1)); printf '%d.%03ds' $((ms / 1000)) $((ms % 1000)); }

t=$(now_ms)
scripts/k8s-testbin.sh >/dev/null
log "control-plane binaries ready in $(since "$t")"

SLICECTL_K8S_DIR=$(mktemp -d "${TMPDIR:-/tmp}/slicectl-k8s-test.XXXXXX")
export SLICECTL_K8S_DIR
sampler_pid=
cleanup() {
  local rc=$?
  set +e # clean up everything, whatever fails
  if [ -n "$sampler_pid" ]; then kill "$sampler_pid" 2>/dev/null; wait "$sampler_pid" 2>/dev/null; fi
  if [ -f "$SLICECTL_K8S_DIR/peak-rss-kib" ]; then
    log "control plane peak RSS (etcd + kube-apiserver + kube-controller-manager + kube-scheduler + jobset-controller; hollow nodes not counted): $(( $(cat "$SLICECTL_K8S_DIR/peak-rss-kib") / 1024 )) MiB"
  fi
  scripts/k8s-testnode.sh down
  scripts/k8s-testenv.sh down
  rm -rf "$SLICECTL_K8S_DIR"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

t=$(now_ms)
eval "$(scripts/k8s-testenv.sh up)"
log "control plane started in $(since "$t") (SLICECTL_TEST_KUBECONFIG=$SLICECTL_TEST_KUBECONFIG)"
# A real node (the kubelet on containerd and runc) for deploy/ with the real
# image (tests/controlplane/real_kubelet.rs).
t=$(now_ms)
eval "$(scripts/k8s-testnode.sh up)"
log "node $SLICECTL_TEST_NODE started in $(since "$t")"

# Sample the control plane's summed RSS once a second while the tests run.
(
  peak=0
  while sleep 1; do
    sum=0
    for f in "$SLICECTL_K8S_DIR"/*.pid; do
      [ -f "$f" ] || continue
      rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$(cat "$f")/status" 2>/dev/null || true)
      sum=$((sum + ${rss:-0}))
    done
    if [ "$sum" -gt "$peak" ]; then peak=$sum; echo "$peak" >"$SLICECTL_K8S_DIR/peak-rss-kib"; fi
  done
) &
sampler_pid=$!

t=$(now_ms)
cargo fmt --all --check
log "cargo fmt --all --check ok in $(since "$t")"
t=$(now_ms)
cargo clippy --workspace --all-targets -- -D warnings
log "cargo clippy ok in $(since "$t")"
t=$(now_ms)
cargo test --workspace "$@"
log "cargo test ok in $(since "$t")"
if [ $# -eq 0 ]; then
  t=$(now_ms)
  install_root=$(mktemp -d "${TMPDIR:-/tmp}/slicectl-install.XXXXXX")
  cargo install --locked --path . --debug --root "$install_root" --quiet
  version=$("$install_root/bin/slicectl" --version)
  rm -rf "$install_root"
  commit=$(git rev-parse --short=12 HEAD)
  case "$version" in
    "slicectl $(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1) (commit $commit, "*) ;;
    *) log "cargo install: the installed slicectl says '$version', not this checkout's version and commit $commit"; exit 1 ;;
  esac
  log "cargo install --locked --path . ok in $(since "$t") ($version)"
fi
