#!/usr/bin/env bash
# A real node for the test control plane (scripts/k8s-testenv.sh): the real
# kubelet (built by scripts/k8s-testbin.sh from the control plane's Go module)
# on Debian's containerd and runc, so that deploy/ runs on a kubelet with the
# real image (tests/controlplane/real_kubelet.rs).
#
#   scripts/k8s-testnode.sh up      start containerd and the kubelet (idempotent)
#   scripts/k8s-testnode.sh import ARCHIVE...   import OCI image archives (scripts/image.sh)
#   scripts/k8s-testnode.sh down    stop them, remove the node's state and network
#
# What this machine allows, and the choices that follow (docs/testing.md,
# "A real kubelet"):
# - cgroup v1 only: the kubelet runs with `failCgroupV1: false` and the
#   cgroupfs driver (Debian's containerd 1.6 has no RuntimeConfig RPC, so
#   the kubelet falls back to its own cgroupDriver, which v1.36 still does).
# - Root without CAP_SYS_RESOURCE: containerd clamps the pods' oom_score_adj
#   to its own (restrict_oom_score_adj), else every sandbox fails to start.
# - No registry: the sandbox image is `localhost/pause:3.10`, built from
#   testbin/pause by scripts/k8s-testbin.sh and packaged by scripts/image.sh,
#   imported before the kubelet starts; pods use images imported locally.
# - Pods get their own network namespace on a bridge (Debian's CNI plugins:
#   bridge + host-local), so two replicas can both listen on :8080 and the
#   kubelet probes pod IPs as in any cluster. There is no kube-proxy: the
#   `kubernetes` Service (10.0.0.1:443, what in-cluster clients use) is
#   DNATed to the API server on 127.0.0.1 (route_localnet on the bridge). The
#   host is reachable from pods at the bridge's address ($node_gw).
#
# The Node is tainted slicectl.dev/test-node=true:NoSchedule: only pods
# that tolerate it run here, never other tests' pods meant for hollow nodes.
#
# Needs root, containerd, runc, iptables and containernetworking-plugins
# (Debian packages; .ci/run installs them). Everything lives under
# $SLICECTL_K8S_DIR/node; `down` removes it.
#
# Environment: SLICECTL_K8S_DIR (the control plane's state dir, default
# /tmp/slicectl-k8s), SLICECTL_K8S_NODE (node name, default slicectl-node),
# SLICECTL_K8S_TIMEOUT (seconds to wait for each component, default 90).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
plane=${SLICECTL_K8S_DIR:-/tmp/slicectl-k8s}
dir=$plane/node
node=${SLICECTL_K8S_NODE:-slicectl-node}
timeout=${SLICECTL_K8S_TIMEOUT:-90}
bridge=slctest0
node_cidr=10.89.7.0/24
node_gw=10.89.7.1
pause_tag=3.10

log() { printf '[k8s-testnode] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
now_ms() { local t=${EPOCHREALTIME/./}; echo $((t / 1000)); }
since() { local ms=$(($(now_ms) - $1)); printf '%d.%03ds' $((ms / 1000)) $((ms % 1000)); }
running() { [ -f "$dir/$1.pid" ] && kill -0 "$(cat "$dir/$1.pid")" 2>/dev/null; }
wait_for() { # wait_for WHAT CMD... — until CMD succeeds, at most $timeout s
  local what=$1 i; shift
  for ((i = 0; i < timeout * 5; i++)); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  die "$what did not happen within ${timeout}s (logs: $dir/logs)"
}
ctr_() { ctr --address "$dir/containerd.sock" "$@"; }

up() {
  [ "$(id -u)" = 0 ] || die "needs root (containerd, runc, a bridge and iptables)"
  for t in containerd runc ctr iptables; do
    command -v "$t" >/dev/null || die "$t is missing (Debian: apt-get install containerd runc iptables containernetworking-plugins)"
  done
  [ -x /usr/lib/cni/bridge ] || die "no CNI plugins in /usr/lib/cni (Debian: apt-get install containernetworking-plugins)"
  [ -s "$plane/admin.kubeconfig" ] || die "no control plane in $plane: run SLICECTL_K8S_DIR=$plane scripts/k8s-testenv.sh up first"
  if running containerd && running kubelet; then log "already running"; env_lines; return; fi
  local bin api_port t0 t
  bin=$("$root/scripts/k8s-testbin.sh")
  api_port=$(cat "$plane/apiserver.port")
  t0=$(now_ms)
  mkdir -p "$dir"/{logs,cni,cni-ipam,kubelet,pods,containerd}

  # The sandbox image.
  "$root/scripts/image.sh" --name pause --binary "$bin/pause" --tag "$pause_tag" \
    --out "$dir/pause.oci.tar" >/dev/null 2>>"$dir/logs/image.log"

  cat >"$dir/containerd.toml" <<EOF
version = 2
root = "$dir/containerd/root"
state = "$dir/containerd/state"
[grpc]
  address = "$dir/containerd.sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "$dir/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "localhost/pause:$pause_tag"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  # This machine's root lacks CAP_SYS_RESOURCE, so no process may lower its
  # oom_score_adj: runc fails the sandbox's -998 ("nsexec: failed to update
  # /proc/self/oom_score_adj: Permission denied"). Clamp to containerd's own.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$dir/cni"
EOF
  cat >"$dir/cni/10-slicectl-test.conflist" <<EOF
{"cniVersion": "0.4.0", "name": "slicectl-test", "plugins": [
  {"type": "bridge", "bridge": "$bridge", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "dataDir": "$dir/cni-ipam",
            "ranges": [[{"subnet": "$node_cidr", "gateway": "$node_gw"}]], "routes": [{"dst": "0.0.0.0/0"}]}}]}
EOF
  # The bridge exists before the first pod, so that the kubernetes Service's DNAT works at once.
  ip link show "$bridge" >/dev/null 2>&1 || ip link add "$bridge" type bridge
  ip addr replace "$node_gw/24" dev "$bridge"
  ip link set "$bridge" up
  sysctl -qw "net.ipv4.conf.$bridge.route_localnet=1"
  nat_rule -A "$api_port"

  t=$(now_ms)
  containerd --config "$dir/containerd.toml" >"$dir/logs/containerd.log" 2>&1 &
  echo $! >"$dir/containerd.pid"
  wait_for "containerd to serve" ctr_ version
  ctr_ -n k8s.io images import --all-platforms "$dir/pause.oci.tar" >>"$dir/logs/image.log"
  log "containerd $(containerd --version | awk '{print $3}') ready, pause image imported in $(since "$t")"

  cat >"$dir/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This machine has cgroup v1 only; the kubelet refuses it unless told.
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://$dir/containerd.sock
podLogsDir: $dir/pods
# Ports of our own, on loopback: several planes may share the machine.
address: 127.0.0.1
port: 0
readOnlyPort: 0
healthzPort: 0
authentication: {anonymous: {enabled: false}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
failSwapOn: false
# The QoS cgroup tree is not needed for one test node; nothing is reserved.
cgroupsPerQOS: false
enforceNodeAllocatable: []
resolvConf: /etc/resolv.conf
# Keep the disk of a shared machine from evicting the test's pods.
evictionHard: {}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
syncFrequency: 5s
fileCheckFrequency: 5s
nodeStatusUpdateFrequency: 5s
serializeImagePulls: false
EOF
  t=$(now_ms)
  "$bin/kubelet" --config="$dir/kubelet.yaml" --kubeconfig="$plane/admin.kubeconfig" \
    --root-dir="$dir/kubelet" --cert-dir="$dir/kubelet/pki" --hostname-override="$node" \
    --node-ip="$node_gw" \
    --node-labels=iam.gke.io/gke-metadata-server-enabled=true,slicectl.dev/test-node=true \
    --register-with-taints=slicectl.dev/test-node=true:NoSchedule \
    >"$dir/logs/kubelet.log" 2>&1 &
  echo $! >"$dir/kubelet.pid"
  wait_for "the Node $node to be Ready" node_ready
  log "kubelet $("$bin/kubelet" --version | awk '{print $2}') Ready as Node $node in $(since "$t"); node up in $(since "$t0")"
  env_lines
}

node_ready() {
  kubectl --kubeconfig "$plane/admin.kubeconfig" get node "$node" \
    -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' | grep -qx True
}

nat_rule() { # nat_rule -A|-D API_PORT — the kubernetes Service, as kube-proxy would
  iptables -t nat "$1" PREROUTING -i "$bridge" -d 10.0.0.1/32 -p tcp --dport 443 \
    -j DNAT --to-destination "127.0.0.1:$2" -m comment --comment "slicectl-testnode $plane"
}

env_lines() {
  echo "export SLICECTL_TEST_NODE=$node"
  echo "export SLICECTL_TEST_NODE_CONTAINERD=$dir/containerd.sock"
  echo "export SLICECTL_TEST_NODE_HOST_IP=$node_gw"
}

stop() { # stop NAME — SIGTERM, wait up to 20 s, SIGKILL
  local pid i
  [ -f "$dir/$1.pid" ] || return 0
  pid=$(cat "$dir/$1.pid")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    for ((i = 0; i < 100; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
  fi
  rm -f "$dir/$1.pid"
}

down() {
  [ -d "$dir" ] || { log "no node in $dir"; return 0; }
  stop kubelet
  # The Node object, so that the next `up` registers it afresh (labels, taint, Ready).
  if [ -s "$plane/admin.kubeconfig" ]; then
    kubectl --kubeconfig "$plane/admin.kubeconfig" delete node "$node" --ignore-not-found --wait=false >/dev/null 2>&1 || true
  fi
  # The pods' containers and sandboxes (their shims outlive containerd).
  if running containerd; then
    local ids
    ids=$(ctr_ -n k8s.io tasks ls -q 2>/dev/null || true)
    for id in $ids; do ctr_ -n k8s.io tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true; done
    sleep 1
    for id in $ids; do ctr_ -n k8s.io tasks delete -f "$id" >/dev/null 2>&1 || true; done
  fi
  stop containerd
  if [ -f "$plane/apiserver.port" ]; then nat_rule -D "$(cat "$plane/apiserver.port")" 2>/dev/null || true; fi
  ip link del "$bridge" 2>/dev/null || true
  # Mounts left by the kubelet and containerd (overlay snapshots, the pods' volumes).
  grep -o " $dir/[^ ]*" /proc/self/mounts | sort -r | while read -r m; do umount -l "$m" || true; done
  rm -rf "$dir"
  log "node down"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  import)
    shift
    for a in "$@"; do ctr_ -n k8s.io images import --all-platforms "$a"; done
    ;;
  *) echo "usage: $0 up|down|import ARCHIVE..." >&2; exit 2 ;;
esac
