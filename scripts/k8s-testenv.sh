#!/usr/bin/env bash
# A real Kubernetes control plane on loopback for slicectl's tests:
# etcd + kube-apiserver + kube-controller-manager + kube-scheduler (binaries
# from scripts/k8s-testbin.sh), generated certificates, an admin kubeconfig, and the
# kubeadm token-discovery setup (kube-public/cluster-info + RBAC) made by the
# real `kubeadm init phase bootstrap-token` / `upload-config`. The
# controller-manager approves and signs kubelet client CSRs with the CA that is
# the apiserver's --client-ca-file, so a node can join with a bootstrap token.
# The scheduler binds pods to Nodes and the node-lifecycle controller lifts the
# `node.kubernetes.io/not-ready` taint of Nodes whose kubelet reports Ready
# (kubemark hollow nodes, SLICECTL_TEST_KUBEMARK), so pods run here.
# The controller-manager's Job controller and the real JobSet controller
# (sigs.k8s.io/jobset, built by scripts/k8s-testbin.sh; its CRD applied
# server-side) turn JobSets into Jobs and pods (SLICECTL_TEST_JOBSET).
#
# The JobSet controller runs without leader election, without its internal
# cert management, metrics or health endpoints; its webhook server (always
# started) listens on 127.0.0.1 with a throwaway certificate. No
# Validating/MutatingWebhookConfiguration is installed, so the API server
# never calls it: JobSets get no webhook defaults, and tests spell out what
# the mutating webhook would default (completionMode Indexed, restartPolicy,
# successPolicy, startupPolicy, network).
#
# The node-lifecycle controller also watches Nodes no kubelet keeps alive (a
# test that creates a Node object by hand): it syncs their condition taints
# at once (a Node created with no Ready condition loses the `not-ready` taint
# the admission added), and after --node-startup-grace-period (60s, the
# default) it marks them Ready=Unknown and taints them
# `node.kubernetes.io/unreachable` (NoSchedule and NoExecute). No pod is ever
# evicted for it: the taint-eviction-controller is not started. Tests that
# create such Nodes must not assume the condition taints stay as created.
#
#   scripts/k8s-testenv.sh up      start (idempotent: a healthy plane just prints env)
#   scripts/k8s-testenv.sh env     print `export SLICECTL_TEST_KUBECONFIG=...` for eval
#   scripts/k8s-testenv.sh status  say what runs
#   scripts/k8s-testenv.sh down    stop everything (SIGTERM, wait, SIGKILL) and remove the state dir
#
# Use: eval "$(scripts/k8s-testenv.sh up)"  (up prints the same lines as env)
#
# Environment:
#   SLICECTL_K8S_DIR      state dir (certs, kubeconfig, etcd data, pid files, logs);
#                         default /tmp/slicectl-k8s
#   SLICECTL_K8S_TIMEOUT  seconds to wait for each component (default 90)
#   SLICECTL_TESTBIN_CACHE  see scripts/k8s-testbin.sh
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dir=${SLICECTL_K8S_DIR:-/tmp/slicectl-k8s}
timeout=${SLICECTL_K8S_TIMEOUT:-90}
marker="$dir/.slicectl-k8s-testenv"
components=(etcd kube-apiserver kube-controller-manager kube-scheduler jobset-controller)
service_cidr=10.0.0.0/24
gke_user=gke-user@example-project.iam.gserviceaccount.com
controllers=serviceaccount-token-controller,serviceaccount-controller,namespace-controller,garbage-collector-controller,daemonset-controller,bootstrap-signer-controller,token-cleaner-controller,root-ca-certificate-publisher-controller
# Node TLS bootstrap (kubelet client CSRs): auto-approval of bootstrap-token
# CSRs after a SubjectAccessReview, signing with the cluster CA, clean-up.
controllers+=,certificatesigningrequest-approving-controller,certificatesigningrequest-signing-controller,certificatesigningrequest-cleaner-controller
# Node health: Ready/NotReady/unreachable condition taints from kubelet leases;
# and the pod garbage collector, which force-deletes the pods of Nodes that are
# gone (a deleted node pool's), as in any cluster.
controllers+=,node-lifecycle-controller,pod-garbage-collector-controller
# PodDisruptionBudgets: the disruption controller computes a budget's
# status.disruptionsAllowed, which the Eviction API reads (a budget whose
# status was never written refuses every eviction), as in any cluster.
controllers+=,disruption-controller
# Jobs make pods (JobSet's replicated Jobs).
controllers+=,job-controller

log() { printf '[k8s-testenv] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
now_ms() { local t=${EPOCHREALTIME/./}; echo $((t / 1000)); }
since() { local ms=$(($(now_ms) - $1)); printf '%d.%03ds' $((ms / 1000)) $((ms % 1000)); }

bindir() {
  local d
  d=$("$root/scripts/k8s-testbin.sh" dir)
  for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubeadm kubemark; do
    [ -x "$d/$b" ] || die "missing $d/$b — build the control-plane binaries first: scripts/k8s-testbin.sh"
  done
  echo "$d"
}

# The JobSet controller and its CRD (scripts/k8s-testbin.sh jobset-dir).
jobsetdir() {
  local d
  d=$("$root/scripts/k8s-testbin.sh" jobset-dir)
  if [ ! -x "$d/jobset-controller" ] || [ ! -s "$d/jobset.x-k8s.io_jobsets.yaml" ]; then
    die "missing $d/jobset-controller or its CRD — build them first: scripts/k8s-testbin.sh"
  fi
  echo "$d"
}
# The JobSet version the controller was built from (the cache entry's name, jobset-vX.Y.Z).
jobset_version() { basename "$("$root/scripts/k8s-testbin.sh" jobset-dir)" | sed 's/^jobset-//'; }

# A free TCP port on loopback (not listening now, not already chosen).
free_port() {
  local p used
  used=$(ss -Htan 2>/dev/null | awk '{print $4}' | sed 's/.*://')
  while :; do
    p=$((20000 + RANDOM % 40000))
    grep -qx "$p" <<<"$used" && continue
    case " ${chosen_ports:-} " in *" $p "*) continue ;; esac
    chosen_ports="${chosen_ports:-} $p"
    echo "$p"; return
  done
}

pid_of() { [ -f "$dir/$1.pid" ] && cat "$dir/$1.pid" || true; }
# Is component $1 running (the pid is alive and is that binary)?
running() {
  local pid; pid=$(pid_of "$1")
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] &&
    tr '\0' '\n' <"/proc/$pid/cmdline" | head -1 | grep -q "/$1\$"
}

curl_api() { # curl_api PATH — as the admin user
  curl -sS --max-time 5 --cacert "$dir/pki/ca.crt" --cert "$dir/pki/admin.crt" --key "$dir/pki/admin.key" \
    "https://127.0.0.1:$(cat "$dir/apiserver.port")$1"
}
healthy() {
  [ -f "$marker" ] || return 1
  for c in "${components[@]}"; do running "$c" || return 1; done
  [ "$(curl_api /readyz 2>/dev/null)" = ok ]
}

print_env() {
  cat <<EOF
export SLICECTL_TEST_KUBECONFIG=$dir/admin.kubeconfig
export SLICECTL_TEST_KUBEADM=$("$root/scripts/k8s-testbin.sh" dir)/kubeadm
export SLICECTL_TEST_KUBEMARK=$("$root/scripts/k8s-testbin.sh" dir)/kubemark
export SLICECTL_TEST_GKE_TOKEN_FILE=$dir/pki/gke-user.token
export SLICECTL_TEST_JOBSET=$(jobset_version)
# kubectl against the test control plane: export KUBECONFIG=$dir/admin.kubeconfig
# API server: https://127.0.0.1:$(cat "$dir/apiserver.port")  state/logs: $dir
EOF
}

fail_component() { # fail_component NAME MESSAGE — print the log tail, stop, exit 1
  log "ERROR: $1: $2"
  if [ -f "$dir/logs/$1.log" ]; then
    log "last lines of $dir/logs/$1.log:"
    tail -n 40 "$dir/logs/$1.log" >&2
  fi
  stop_all
  log "state (logs, certs) kept in $dir; 'scripts/k8s-testenv.sh down' removes it"
  exit 1
}

# wait_for NAME WHAT CMD... — poll CMD until it succeeds, failing fast if NAME's process died.
wait_for() {
  local name=$1 what=$2 deadline=$((SECONDS + timeout)); shift 2
  until "$@" >/dev/null 2>&1; do
    for c in "${components[@]}"; do
      if [ -f "$dir/$c.pid" ] && ! running "$c"; then fail_component "$c" "exited while waiting for $what"; fi
    done
    [ $SECONDS -lt $deadline ] || fail_component "$name" "timed out after ${timeout}s waiting for $what"
    sleep 0.2
  done
}

start() { # start NAME ARGS... — start $bin/NAME detached, logging to logs/NAME.log
  start_from "$bin" "$@"
}
start_from() { # start_from DIR NAME ARGS... — start DIR/NAME detached, logging to logs/NAME.log
  local from=$1 name=$2; shift 2
  setsid "$from/$name" "$@" >"$dir/logs/$name.log" 2>&1 </dev/null &
  echo $! >"$dir/$name.pid"
}

gen_certs() {
  local pki=$dir/pki
  mkdir -p "$pki"
  ec_key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
  ec_key "$pki/ca.key"
  openssl req -x509 -new -key "$pki/ca.key" -subj "/CN=slicectl-test-ca" -days 3650 -out "$pki/ca.crt" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" 2>/dev/null
  leaf() { # leaf NAME SUBJECT EXTENSIONS
    ec_key "$pki/$1.key"
    openssl req -new -key "$pki/$1.key" -subj "$2" -out "$pki/$1.csr" 2>/dev/null
    openssl x509 -req -in "$pki/$1.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -set_serial "0x$(openssl rand -hex 16)" \
      -days 365 -out "$pki/$1.crt" -extfile <(printf '%s\n' "$3" "basicConstraints=critical,CA:FALSE") 2>/dev/null
    rm -f "$pki/$1.csr"
  }
  leaf apiserver "/CN=kube-apiserver" \
    "$(printf '%s\n' 'subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local' \
      'keyUsage=critical,digitalSignature,keyEncipherment' 'extendedKeyUsage=serverAuth')"
  leaf admin "/O=system:masters/CN=kubernetes-admin" \
    "$(printf '%s\n' 'keyUsage=critical,digitalSignature,keyEncipherment' 'extendedKeyUsage=clientAuth')"
  # The JobSet controller's webhook server (controller-runtime reads
  # tls.crt/tls.key from its certDir); the test CA signs it, so a
  # WebhookConfiguration could name it with caBundle = ca.crt.
  leaf jobset-webhook "/CN=jobset-webhook" \
    "$(printf '%s\n' 'subjectAltName=IP:127.0.0.1,DNS:localhost' \
      'keyUsage=critical,digitalSignature,keyEncipherment' 'extendedKeyUsage=serverAuth')"
  mkdir -p "$pki/jobset-webhook"
  mv "$pki/jobset-webhook.crt" "$pki/jobset-webhook/tls.crt"
  mv "$pki/jobset-webhook.key" "$pki/jobset-webhook/tls.key"
  # ServiceAccount token signing key pair.
  openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$pki/sa.key" 2>/dev/null
  openssl pkey -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
  # A bearer token standing for a Google identity, as GKE's API server
  # accepts the caller's Google access token (SLICECTL_TEST_GKE_TOKEN_FILE):
  # user gke-user@example-project.iam.gserviceaccount.com, bound to
  # cluster-admin below as IAM's roles/container.admin would be.
  openssl rand -hex 32 >"$pki/gke-user.token"
  printf '%s,%s,%s\n' "$(cat "$pki/gke-user.token")" "$gke_user" gke-user >"$pki/tokens.csv"
  chmod 600 "$pki"/*.key "$pki/gke-user.token" "$pki/tokens.csv"
}

write_kubeconfig() {
  local kc=$dir/admin.kubeconfig
  kubectl config set-cluster slicectl-test --kubeconfig="$kc" --server="https://127.0.0.1:$api_port" \
    --certificate-authority="$dir/pki/ca.crt" --embed-certs=true >/dev/null
  kubectl config set-credentials kubernetes-admin --kubeconfig="$kc" --client-certificate="$dir/pki/admin.crt" \
    --client-key="$dir/pki/admin.key" --embed-certs=true >/dev/null
  kubectl config set-context slicectl-test --kubeconfig="$kc" --cluster=slicectl-test --user=kubernetes-admin >/dev/null
  kubectl config use-context slicectl-test --kubeconfig="$kc" >/dev/null
  chmod 600 "$kc"
}

write_kubeadm_config() {
  # Used only by the `kubeadm init phase` calls below. kubeadm refuses a
  # loopback advertiseAddress (it then looks for a global IP on lo) and the
  # phases we run never use it, so an RFC 5737 documentation address stands in.
  # What nodes see is controlPlaneEndpoint (and cluster-info's server, taken
  # from admin.kubeconfig): https://127.0.0.1:<port>.
  cat >"$dir/kubeadm.yaml" <<EOF
apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
localAPIEndpoint:
  advertiseAddress: 198.51.100.1
  bindPort: $api_port
nodeRegistration:
  name: slicectl-test-control-plane
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
clusterName: slicectl-test
kubernetesVersion: $("$bin/kube-apiserver" --version | awk '{print $2}')
controlPlaneEndpoint: 127.0.0.1:$api_port
certificatesDir: $dir/pki
networking:
  serviceSubnet: $service_cidr
EOF
}

stop_all() {
  local c pid i
  for ((i = ${#components[@]} - 1; i >= 0; i--)); do
    c=${components[i]}
    running "$c" || { rm -f "$dir/$c.pid"; continue; }
    pid=$(pid_of "$c")
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do running "$c" || break; sleep 0.1; done
    if running "$c"; then
      log "$c (pid $pid) did not stop after SIGTERM; sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      for _ in $(seq 1 50); do running "$c" || break; sleep 0.1; done
    fi
    log "stopped $c (pid $pid)"
    rm -f "$dir/$c.pid"
  done
}

cmd_up() {
  if healthy; then
    log "already up and ready ($dir)"
    print_env
    return
  fi
  if [ -f "$marker" ]; then
    log "cleaning up a stale control plane in $dir"
    cmd_down
  elif [ -e "$dir" ] && [ -n "$(ls -A "$dir")" ]; then
    die "$dir exists, is not empty and is not a slicectl test control plane; set SLICECTL_K8S_DIR"
  fi
  bin=$(bindir)
  jsbin=$(jobsetdir)
  command -v openssl >/dev/null || die "openssl is needed to generate certificates"
  command -v kubectl >/dev/null || die "kubectl is needed"
  local t0 t; t0=$(now_ms)
  mkdir -p "$dir/logs" && touch "$marker"

  t=$(now_ms)
  local etcd_port etcd_peer_port
  etcd_port=$(free_port); etcd_peer_port=$(free_port); api_port=$(free_port)
  echo "$api_port" >"$dir/apiserver.port"
  gen_certs
  write_kubeconfig
  write_kubeadm_config
  log "certificates and kubeconfig in $(since "$t")"

  t=$(now_ms)
  start etcd --name=slicectl-test --data-dir="$dir/etcd" \
    --listen-client-urls="http://127.0.0.1:$etcd_port" --advertise-client-urls="http://127.0.0.1:$etcd_port" \
    --listen-peer-urls="http://127.0.0.1:$etcd_peer_port" --initial-advertise-peer-urls="http://127.0.0.1:$etcd_peer_port" \
    --initial-cluster="slicectl-test=http://127.0.0.1:$etcd_peer_port" \
    --unsafe-no-fsync --log-level=warn
  wait_for etcd "etcd /health" curl -sf --max-time 2 "http://127.0.0.1:$etcd_port/health"
  log "etcd ready on 127.0.0.1:$etcd_port in $(since "$t")"

  t=$(now_ms)
  local pki=$dir/pki
  start kube-apiserver \
    --etcd-servers="http://127.0.0.1:$etcd_port" \
    --bind-address=127.0.0.1 --secure-port="$api_port" \
    --advertise-address=127.0.0.1 --endpoint-reconciler-type=none \
    --tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
    --client-ca-file="$pki/ca.crt" \
    --authorization-mode=Node,RBAC \
    --enable-bootstrap-token-auth \
    --token-auth-file="$pki/tokens.csv" \
    --enable-admission-plugins=NodeRestriction \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$pki/sa.pub" --service-account-signing-key-file="$pki/sa.key" \
    --service-cluster-ip-range="$service_cidr" \
    --allow-privileged=true --profiling=false
  wait_for kube-apiserver "kube-apiserver /readyz" api_ready
  log "kube-apiserver ready on https://127.0.0.1:$api_port in $(since "$t")"

  t=$(now_ms)
  start kube-controller-manager \
    --kubeconfig="$dir/admin.kubeconfig" --leader-elect=false --secure-port=0 \
    --root-ca-file="$pki/ca.crt" --service-account-private-key-file="$pki/sa.key" \
    --service-cluster-ip-range="$service_cidr" \
    --cluster-signing-cert-file="$pki/ca.crt" --cluster-signing-key-file="$pki/ca.key" \
    --controllers="$controllers"

  # kubeadm's token-discovery and node-bootstrap setup, by kubeadm itself.
  local ka=(--config "$dir/kubeadm.yaml" --kubeconfig "$dir/admin.kubeconfig")
  "$bin/kubeadm" init phase upload-config all "${ka[@]}" >"$dir/logs/kubeadm.log" 2>&1 ||
    fail_component kubeadm "kubeadm init phase upload-config all failed"
  "$bin/kubeadm" init phase bootstrap-token "${ka[@]}" --skip-token-print >>"$dir/logs/kubeadm.log" 2>&1 ||
    fail_component kubeadm "kubeadm init phase bootstrap-token failed"
  delete_kubeadm_default_token
  kc create clusterrolebinding slicectl-test-gke-user --clusterrole=cluster-admin --user="$gke_user" >/dev/null ||
    fail_component kube-apiserver "creating the ClusterRoleBinding of $gke_user failed"
  log "kubeadm cluster-info and bootstrap RBAC in $(since "$t")"

  t=$(now_ms)
  wait_for kube-controller-manager "ServiceAccount default/default" kc get serviceaccount default -n default
  wait_for kube-controller-manager "ConfigMap default/kube-root-ca.crt" kc get configmap kube-root-ca.crt -n default
  log "controller-manager working (default ServiceAccount, kube-root-ca.crt) in $(since "$t")"

  t=$(now_ms)
  # The scheduler has no port (--secure-port=0) and no lease
  # (--leader-elect=false): ready once it has synced its informers and logs so.
  start kube-scheduler --kubeconfig="$dir/admin.kubeconfig" --leader-elect=false --secure-port=0
  wait_for kube-scheduler "kube-scheduler to start" grep -q "Starting Kubernetes Scheduler" "$dir/logs/kube-scheduler.log"
  log "kube-scheduler started in $(since "$t")"

  start_jobset
  log "control plane up in $(since "$t0")"
  print_env
}

# The JobSet CRD (server-side: the CRD is too big for the last-applied
# annotation), then the controller; ready once a JobSet in a scratch
# namespace gets its Job.
start_jobset() {
  local t; t=$(now_ms)
  kc apply --server-side --field-manager=slicectl-testenv -f "$jsbin/jobset.x-k8s.io_jobsets.yaml" >/dev/null ||
    fail_component kube-apiserver "applying the JobSet CRD failed"
  wait_for kube-apiserver "the JobSet CRD Established" crd_established jobsets.jobset.x-k8s.io
  log "JobSet CRD applied and established in $(since "$t")"
  t=$(now_ms)
  local webhook_port
  webhook_port=$(free_port)
  # api/config/v1alpha1 (configuration_types.go, defaults.go) of sigs.k8s.io/jobset.
  cat >"$dir/jobset-config.yaml" <<EOF
apiVersion: config.jobset.x-k8s.io/v1alpha1
kind: Configuration
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
webhook:
  host: 127.0.0.1
  port: $webhook_port
  certDir: $dir/pki/jobset-webhook
metrics:
  bindAddress: "0"
health:
  healthProbeBindAddress: "0"
EOF
  start_from "$jsbin" jobset-controller --config="$dir/jobset-config.yaml" --kubeconfig="$dir/admin.kubeconfig"
  kc create namespace slicectl-testenv-probe >/dev/null ||
    fail_component kube-apiserver "creating namespace slicectl-testenv-probe failed"
  # A JobSet whose pod no Node takes (and the webhook's defaults spelled out).
  kc apply -n slicectl-testenv-probe -f - >/dev/null <<EOF ||
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: probe
spec:
  network: {enableDNSHostnames: false}
  successPolicy: {operator: All}
  startupPolicy: {startupPolicyOrder: AnyOrder}
  replicatedJobs:
  - name: probe
    replicas: 1
    template:
      spec:
        completionMode: Indexed
        template:
          spec:
            restartPolicy: Never
            nodeSelector: {slicectl.dev/testenv-probe: none}
            containers: [{name: probe, image: registry.invalid/probe:1}]
EOF
    fail_component kube-apiserver "creating the probe JobSet failed"
  wait_for jobset-controller "the probe JobSet's Job (the JobSet controller reconciling)" \
    kc get job -n slicectl-testenv-probe probe-probe-0
  # The namespace controller and the garbage collector remove the rest.
  kc delete namespace slicectl-testenv-probe --wait=false >/dev/null ||
    fail_component kube-apiserver "deleting namespace slicectl-testenv-probe failed"
  log "JobSet controller $(jobset_version) ready (a probe JobSet got its Job) in $(since "$t")"
}

crd_established() { # crd_established NAME
  [ "$(kc get crd "$1" -o jsonpath='{.status.conditions[?(@.type=="Established")].status}')" = True ]
}

api_ready() { [ "$(curl_api /readyz 2>/dev/null)" = ok ]; }
kc() { kubectl --kubeconfig="$dir/admin.kubeconfig" --request-timeout=5s "$@"; }

# `kubeadm init phase bootstrap-token` always creates one default token (24h);
# the tests make their own, so drop it rather than leave a live credential.
delete_kubeadm_default_token() {
  local s
  for s in $(kc get secrets -n kube-system --field-selector type=bootstrap.kubernetes.io/token -o name); do
    kc delete -n kube-system "$s" >/dev/null
  done
}

cmd_down() {
  if [ ! -e "$dir" ]; then log "nothing to stop ($dir does not exist)"; return; fi
  [ -f "$marker" ] || die "$dir is not a slicectl test control plane; not touching it"
  stop_all
  rm -rf "$dir"
  log "removed $dir"
}

cmd_status() {
  if [ ! -f "$marker" ]; then echo "not running (no state in $dir)"; return 1; fi
  local c rc=0
  for c in "${components[@]}"; do
    if running "$c"; then echo "$c: running (pid $(pid_of "$c"))"; else echo "$c: NOT running"; rc=1; fi
  done
  if [ "$(curl_api /readyz 2>/dev/null)" = ok ]; then
    echo "kube-apiserver /readyz: ok (https://127.0.0.1:$(cat "$dir/apiserver.port"))"
  else
    echo "kube-apiserver /readyz: not ready"; rc=1
  fi
  echo "kubeconfig: $dir/admin.kubeconfig"
  return $rc
}

case "${1:-}" in
  up) cmd_up ;;
  down) cmd_down ;;
  env)
    healthy || die "no ready control plane in $dir; run scripts/k8s-testenv.sh up"
    print_env ;;
  status) cmd_status ;;
  *) echo "usage: $0 up|down|env|status" >&2; exit 2 ;;
esac
