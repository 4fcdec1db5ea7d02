#!/usr/bin/env bash
# Slices for pending JobSets, end to end, in one command, on this machine:
# a real Kubernetes control plane with the real JobSet controller and
# kube-scheduler (scripts/k8s-testenv.sh), the GCP simulator with a GKE
# cluster linked to it (its node pools' VMs join as kubemark hollow nodes),
# and `slicectl controller` with the Target of examples/jobset/specs. It
# submits examples/jobset/jobsets/single-slice.yaml and shows, in order:
# the leader pod Unschedulable, the node pool the controller creates for it,
# its Nodes, the JobSet's pods Running on them, the SliceStatus object, and,
# once the JobSet is deleted, the release after the grace period.
# Nothing real is touched.
#
#   scripts/demo-jobsets.sh           run the demo and clean up
#   scripts/demo-jobsets.sh --keep    leave everything up (prints how to use and stop it)
#
# With SLICECTL_TEST_KUBECONFIG set (a plane already up: `eval "$(scripts/k8s-testenv.sh up)"`),
# that plane is used and left running; the demo's namespaces are removed.
# Needs Go the first time (the control-plane binaries are built once into a
# cache outside the clone, about 15 minutes on 2 cores), Rust and kubectl.
# SLICECTL_BIN=PATH uses that slicectl binary instead of building one.
# `e2e_jobsets::the_demo_script_runs_on_the_test_plane` runs this script on
# the test plane (docs/workloads.md).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
keep=${1:-}
grace=${DEMO_GRACE:-20s}
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
die() { printf 'demo-jobsets: %s\n' "$*" >&2; exit 1; }
wait_for() { # wait_for SECONDS WHAT CMD...: until CMD succeeds
  local t=$1 what=$2; shift 2
  for _ in $(seq "$((t * 5))"); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
  die "timed out after ${t}s waiting for $what"
}

slicectl=${SLICECTL_BIN:-}
if [ -z "$slicectl" ]; then
  say "building slicectl (and, below, the control-plane binaries: cached after the first run)"
  cargo build -q --bin slicectl
  slicectl=${CARGO_TARGET_DIR:-$root/target}/debug/slicectl
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/slicectl-jobset-demo.XXXXXX")
own_plane=
if [ -z "${SLICECTL_TEST_KUBECONFIG:-}" ]; then
  scripts/k8s-testbin.sh >/dev/null
  export SLICECTL_K8S_DIR=$work/k8s
  own_plane=1
fi
sim_pid= ctl_pid=
cleanup() {
  local rc=$?
  set +e # clean up everything, whatever fails (a killed process's `wait` is 143)
  if [ "$keep" = --keep ] && [ "$rc" -eq 0 ]; then return; fi
  [ -n "$ctl_pid" ] && kill "$ctl_pid" 2>/dev/null && wait "$ctl_pid" 2>/dev/null
  [ -n "$sim_pid" ] && kill "$sim_pid" 2>/dev/null && wait "$sim_pid" 2>/dev/null
  if [ -n "${KUBECONFIG:-}" ]; then
    kubectl delete namespace ml-team slicectl-demo --wait=false >/dev/null 2>&1 || true
  fi
  [ -n "$own_plane" ] && { scripts/k8s-testenv.sh down >/dev/null 2>&1 || true; }
  [ "$rc" -ne 0 ] && echo "logs: $work (kept)" >&2 && exit "$rc"
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT

if [ -n "$own_plane" ]; then
  say "starting a real Kubernetes control plane (kube-scheduler, JobSet controller)"
  eval "$(scripts/k8s-testenv.sh up)"
else
  say "using the control plane of SLICECTL_TEST_KUBECONFIG"
fi
export KUBECONFIG=$SLICECTL_TEST_KUBECONFIG
[ -n "${SLICECTL_TEST_KUBEMARK:-}" ] || die "SLICECTL_TEST_KUBEMARK is not set (scripts/k8s-testenv.sh env)"

say "starting the GCP simulator, cluster train linked to that control plane"
cluster=projects/example-project/locations/us-central1/clusters/train
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$slicectl" sim --listen "127.0.0.1:$port" --sim-latency 500ms \
  --link-gke "$cluster=$KUBECONFIG" --kubemark "$SLICECTL_TEST_KUBEMARK" >"$work/sim.log" 2>&1 &
sim_pid=$!
export SLICECTL_API_ENDPOINT=http://127.0.0.1:$port
wait_for 30 "the simulator" curl -sf "$SLICECTL_API_ENDPOINT/_sim/stats"

say "the specs: examples/jobset/specs, the Target reaching the cluster by this kubeconfig, gracePeriod $grace"
mkdir -p "$work/specs"
sed -e "s|^    name: train\$|    name: train\n    kubeApi: {kubeconfig: \"$KUBECONFIG\"}|" \
    -e "s|gracePeriod: 2m |gracePeriod: $grace |" \
  examples/jobset/specs/target.yaml >"$work/specs/target.yaml"
grep -A3 '^  gke:' "$work/specs/target.yaml"
grep 'gracePeriod' "$work/specs/target.yaml"

say "namespaces ml-team (the team's) and slicectl-demo (the controller's), the SliceStatus CRD"
kubectl create namespace ml-team --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl create namespace slicectl-demo --dry-run=client -o yaml | kubectl apply -f - >/dev/null
"$slicectl" crd | kubectl apply --server-side -f - >/dev/null
kubectl wait --for=condition=Established crd/slicestatuses.slicectl.dev --timeout=60s >/dev/null

say "starting the controller (resync 10m: the pod and JobSet watches start the cycles)"
POD_NAME=demo "$slicectl" controller --namespace slicectl-demo --dir "$work/specs" \
  --listen "127.0.0.1:0" --resync 10m --trust-kubeconfig "$KUBECONFIG" >"$work/controller.log" 2>&1 &
ctl_pid=$!
wait_for 60 "the controller's JobSet watch" grep -q "watching pending TPU pods and JobSets" "$work/controller.log"

say "kubectl apply -f examples/jobset/jobsets/single-slice.yaml"
kubectl apply -f examples/jobset/jobsets/single-slice.yaml
leader_unschedulable() {
  kubectl get pods -n ml-team -l batch.kubernetes.io/job-completion-index=0 \
    -o jsonpath='{.items[0].status.conditions[?(@.type=="PodScheduled")].reason}' | grep -q Unschedulable
}
wait_for 60 "the leader pod to be Unschedulable" leader_unschedulable
kubectl get pods -n ml-team -o wide

say "the node pool the controller created for it (the simulator's nodePools.list)"
pools() { curl -sf "$SLICECTL_API_ENDPOINT/v1/$cluster/nodePools" | python3 -c '
import json, sys
for p in json.load(sys.stdin).get("nodePools", []):
    l = p["config"].get("labels", {})
    print(p["name"], p["status"], p["config"]["machineType"], p.get("initialNodeCount"),
          "jobset=" + l.get("slicectl.dev/jobset-namespace", "") + "/" + l.get("slicectl.dev/jobset-name", ""))'; }
has_pool() { [ -n "$(pools)" ]; }
wait_for 60 "a node pool" has_pool
pools

say "its Nodes join, and the JobSet's pods run on them"
running() { [ "$(kubectl get pods -n ml-team --field-selector=status.phase=Running -o name | wc -l)" -eq 2 ]; }
wait_for 120 "the JobSet's 2 pods to run" running
kubectl get nodes -l slicectl.dev/source=workload -L cloud.google.com/gke-nodepool,team 2>/dev/null \
  || kubectl get nodes -L cloud.google.com/gke-nodepool,team
kubectl get pods -n ml-team -o wide

say "its SliceStatus (Ready like a git slice's) and the JobSet's Events"
ready() { kubectl get slicestatus -n slicectl-demo -o jsonpath='{.items[*].status.conditions[?(@.type=="Ready")].status}' | grep -q True; }
wait_for 60 "the SliceStatus to be Ready" ready
kubectl get slicestatus -n slicectl-demo
kubectl get events -n ml-team --field-selector involvedObject.kind=JobSet \
  -o custom-columns=REASON:.reason,MESSAGE:.message

say "kubectl delete jobset train-single: the slice stays for gracePeriod $grace, then goes"
kubectl delete jobset -n ml-team train-single --wait=false
no_pool() { [ -z "$(pools)" ]; }
start=$(date +%s)
wait_for 180 "the release" no_pool
echo "node pool released $(( $(date +%s) - start ))s after the JobSet was deleted (gracePeriod $grace)"
grep -E 'released|stamped the released-at' "$work/controller.log" | tail -n 3 || true

say "done"
if [ "$keep" = --keep ]; then
  cat <<EOF
Left running: the simulator (pid $sim_pid, $SLICECTL_API_ENDPOINT) and the controller (pid $ctl_pid).
  export KUBECONFIG=$KUBECONFIG SLICECTL_API_ENDPOINT=$SLICECTL_API_ENDPOINT
  kubectl apply -f examples/jobset/jobsets/multislice.yaml    # three slices, in one plan
  logs: $work/controller.log $work/sim.log
Stop: kill $ctl_pid $sim_pid${own_plane:+; SLICECTL_K8S_DIR=$work/k8s scripts/k8s-testenv.sh down}
EOF
fi
