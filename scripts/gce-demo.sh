#!/usr/bin/env bash
# The self-managed GCE backend end to end, in one command, on this machine:
# the GCP simulator (as a server) creates the workload policy, instance
# template and BULK MIG; its simulated TPU VMs join a REAL Kubernetes control
# plane (the test suite's: kube-apiserver, etcd, kube-controller-manager
# built from the upstream Go modules) through bootstrap-token discovery and
# a CSR the real controller-manager signs; slicectl labels the Nodes, ensures
# the device plugin, shows the status, then tears everything down in reverse
# order. Nothing real is touched.
#
#   scripts/gce-demo.sh            run the demo and clean up
#   scripts/gce-demo.sh --keep     leave the control plane and simulator up
#                                  (prints how to use and stop them)
#
# Needs Go (the control-plane binaries are built once into a cache outside the
# clone, about 15 minutes on 2 cores the first time) and Rust.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
keep=${1:-}
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "building slicectl and the control-plane binaries (cached after the first run)"
cargo build -q
slicectl=$root/target/debug/slicectl
scripts/k8s-testbin.sh >/dev/null

work=$(mktemp -d "${TMPDIR:-/tmp}/slicectl-gce-demo.XXXXXX")
export SLICECTL_K8S_DIR=$work/k8s
sim_pid=
cleanup() {
  local rc=$?
  if [ "$keep" = --keep ] && [ "$rc" -eq 0 ]; then return; fi
  [ -n "$sim_pid" ] && kill "$sim_pid" 2>/dev/null
  scripts/k8s-testenv.sh down >/dev/null 2>&1 || true
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT

say "starting a real Kubernetes control plane"
eval "$(scripts/k8s-testenv.sh up)"
kubeconfig=$SLICECTL_TEST_KUBECONFIG
endpoint=$(awk '/server:/ {sub("https://", "", $2); print $2; exit}' "$kubeconfig")

say "starting the GCP simulator"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$slicectl" sim --listen "127.0.0.1:$port" --sim-latency 1s >"$work/sim.log" 2>&1 &
sim_pid=$!
export SLICECTL_API_ENDPOINT=http://127.0.0.1:$port
for _ in $(seq 50); do curl -sf "$SLICECTL_API_ENDPOINT/_sim/stats" >/dev/null && break; sleep 0.2; done

mkdir -p "$work/specs"
cat >"$work/specs/target.yaml" <<YAML
apiVersion: slicectl.dev/v1alpha1
kind: Target
metadata:
  name: demo-kubeadm
spec:
  project: example-project
  zone: us-central1-b
  ownerId: gce-demo
  gce:
    controlPlaneEndpoint: "$endpoint"
    kubeApi:
      kubeconfig: "$kubeconfig"
YAML
cat >"$work/specs/slice.yaml" <<'YAML'
apiVersion: slicectl.dev/v1alpha1
kind: Slice
metadata:
  name: demo-v6e
spec:
  target: demo-kubeadm
  backend: gce
  accelerator: tpu-v6e-slice
  topology: "4x4"            # 16 chips: 4 VMs of 4 chips, one workload policy
  nodeLabels:
    team: research
  gce:
    image: projects/ubuntu-os-accelerator-images/global/images/family/ubuntu-accel-2404-amd64-tpu-v6e
    bootstrap:
      kubeadm:
        kubernetesVersion: "1.36"
YAML

say "slicectl plan"
"$slicectl" plan "$work/specs"
say "slicectl apply (VMs boot, read their metadata, join with a bootstrap token)"
"$slicectl" apply "$work/specs" --auto-approve
say "the Nodes, as kubectl sees them"
kubectl --kubeconfig "$kubeconfig" get nodes -l slicectl.dev/slice=demo-v6e \
  -L cloud.google.com/gke-tpu-accelerator,cloud.google.com/gke-tpu-topology,cloud.google.com/gke-accelerator-count
say "a second apply changes nothing"
"$slicectl" apply "$work/specs" --auto-approve
if [ "$keep" = --keep ]; then
  say "left running"
  echo "export SLICECTL_API_ENDPOINT=$SLICECTL_API_ENDPOINT KUBECONFIG=$kubeconfig"
  echo "specs: $work/specs   stop: kill $sim_pid; SLICECTL_K8S_DIR=$SLICECTL_K8S_DIR scripts/k8s-testenv.sh down"
  exit 0
fi
say "slicectl destroy (cordon, MIG, template, policy, then Nodes and Secrets, then the device plugin)"
"$slicectl" destroy "$work/specs" --auto-approve
kubectl --kubeconfig "$kubeconfig" get nodes
