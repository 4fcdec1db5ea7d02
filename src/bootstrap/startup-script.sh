#!/bin/bash
# slicectl node bootstrap: the `startup-script` of a slice's instance template.
#
# Every value comes from this VM's metadata server; nothing is pasted into
# this text, and every value is checked against a strict pattern before use.
#   template metadata:  slicectl-kubernetes-version (e.g. 1.36), kube-labels
#                       (k=v,...), kube-taints (key=value:Effect,...)
#   VM metadata, written by slicectl once the VM is RUNNING:
#                       kubeadm-join-token, kubeadm-api-endpoint, kubeadm-ca-hash
# Progress goes to guest attribute slicectl/bootstrap: waiting-for-token,
# joining, joined, or "failed: <reason>" (never the token).
#
# Steps: host setup (swap off, overlay/br_netfilter, sysctls); containerd and
# kubelet/kubeadm of the requested minor from pkgs.k8s.io (skipped when a
# kubeadm of that minor is already on PATH); long-poll the metadata server
# until token, endpoint and CA hash are present; `kubeadm join` with a
# JoinConfiguration, retried with backoff (`kubeadm reset -f` in between,
# re-reading the metadata in case slicectl rotated the token).
#
# Environment (all optional):
#   GCE_METADATA_HOST            metadata server host[:port], as Google's client
#                                libraries read it (default metadata.google.internal)
#   SLICECTL_SKIP_HOST_SETUP=1   skip host setup and installs: for pre-baked
#                                images (containerd, kubelet, kubeadm present and
#                                the host prepared) and for tests
#   SLICECTL_JOIN_ATTEMPTS       kubeadm join attempts (default 5)
#   SLICECTL_JOIN_BACKOFF_SEC    first pause between attempts, doubling, capped
#                                at 120 s (default 15)
#   SLICECTL_DISCOVERY_TIMEOUT   kubeadm timeouts.discovery per attempt (default 5m)
#   SLICECTL_POLL_TIMEOUT_SEC    metadata long-poll timeout_sec (default 60)
#
# Never add `set -x`: the token would be traced.
set -Eeuo pipefail
umask 077

readonly MD="http://${GCE_METADATA_HOST:-metadata.google.internal}/computeMetadata/v1"
readonly KUBELET_CONF=/etc/kubernetes/kubelet.conf

log() { printf '[slicectl-bootstrap] %s\n' "$*" >&2; }

# Environment tunables, checked (they end up in arithmetic and YAML).
num_env() { # num_env NAME DEFAULT
  local v=${!1:-$2}
  [[ $v =~ ^[0-9]{1,5}$ ]] || { log "$1 must be a number, got '$v'"; exit 2; }
  printf '%s' "$v"
}
JOIN_ATTEMPTS=$(num_env SLICECTL_JOIN_ATTEMPTS 5)
JOIN_BACKOFF=$(num_env SLICECTL_JOIN_BACKOFF_SEC 15)
POLL_TIMEOUT=$(num_env SLICECTL_POLL_TIMEOUT_SEC 60)
DISCOVERY_TIMEOUT=${SLICECTL_DISCOVERY_TIMEOUT:-5m}
[[ $DISCOVERY_TIMEOUT =~ ^[0-9]{1,5}[smh]$ ]] || { log "SLICECTL_DISCOVERY_TIMEOUT must look like 90s or 5m"; exit 2; }
readonly JOIN_ATTEMPTS JOIN_BACKOFF POLL_TIMEOUT DISCOVERY_TIMEOUT

workdir=$(mktemp -d)
reported_final=
secret=
failed_line=

# report STATUS: guest attribute slicectl/bootstrap (best effort).
report() {
  if ! printf '%s' "$1" | curl -sS --max-time 10 --retry 3 --retry-connrefused -X PUT \
    -H 'Metadata-Flavor: Google' --data-binary @- \
    "$MD/instance/guest-attributes/slicectl/bootstrap" >/dev/null; then
    log "could not write guest attribute slicectl/bootstrap"
  fi
}

# fail REASON: report "failed: REASON" (one line) and exit 1.
fail() {
  local reason=${1//$'\n'/ }
  log "FAILED: $reason"
  report "failed: $reason"
  reported_final=1
  exit 1
}

on_exit() {
  local rc=$?
  rm -rf "$workdir"
  if [[ $rc -ne 0 && -z $reported_final ]]; then
    report "failed: startup script exited with status $rc${failed_line:+ at line $failed_line}"
  fi
}
trap on_exit EXIT
trap 'failed_line=$LINENO' ERR

# redact: copy stdin to stdout with the token secret replaced.
redact() {
  local line
  while IFS= read -r line || [[ -n $line ]]; do
    if [[ -n $secret ]]; then line=${line//"$secret"/<redacted>}; fi
    printf '%s\n' "$line"
  done
}

# md_get PATH: print a metadata value. Returns 1 when it does not exist (404)
# and 2 on any other failure; transient errors (5xx, refused) are retried.
md_get() {
  local code
  code=$(curl -sS --max-time 30 --retry 10 --retry-max-time 120 --retry-connrefused \
    -H 'Metadata-Flavor: Google' -o "$workdir/value" -w '%{http_code}' "$MD/$1") || return 2
  case $code in
    200) cat "$workdir/value" ;;
    404) return 1 ;;
    *) log "metadata $1: HTTP $code"; return 2 ;;
  esac
}

# md_required PATH: a value that must exist (fails the bootstrap otherwise).
md_required() {
  local v
  v=$(md_get "$1") || fail "cannot read metadata $1"
  printf '%s' "$v"
}

# check NAME VALUE REGEX: the value matches or the bootstrap fails.
check() {
  [[ $2 =~ $3 ]] || fail "metadata $1 is malformed"
}

# Label keys (optional DNS prefix + name) and values, as Kubernetes validates
# them (apimachinery validation.IsQualifiedName / IsValidLabelValue).
readonly RE_NAME='[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?'
readonly RE_KEY="^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?$RE_NAME\$"
readonly RE_VALUE="^($RE_NAME)?\$"

host_setup() {
  log "host setup: swap off, kernel modules, sysctls"
  swapoff -a
  sed -i -E '/^[^#].*[[:space:]]swap[[:space:]]/s/^/#/' /etc/fstab
  printf '%s\n' overlay br_netfilter >/etc/modules-load.d/slicectl-k8s.conf
  modprobe overlay
  modprobe br_netfilter
  printf '%s\n' 'net.bridge.bridge-nf-call-iptables = 1' 'net.bridge.bridge-nf-call-ip6tables = 1' \
    'net.ipv4.ip_forward = 1' >/etc/sysctl.d/99-slicectl-k8s.conf
  sysctl --system >/dev/null
}

have_kubeadm_minor() { # have_kubeadm_minor 1.36
  local v
  command -v kubeadm >/dev/null || return 1
  v=$(kubeadm version -o short 2>/dev/null) || return 1
  [[ $v == "v$1."* ]]
}

install_packages() { # install_packages MINOR
  local minor=$1 repo apt=(apt-get -q -o DPkg::Lock::Timeout=600)
  if have_kubeadm_minor "$minor"; then
    log "kubeadm v$minor is already installed; skipping installs"
    return
  fi
  log "installing containerd and kubelet/kubeadm v$minor"
  export DEBIAN_FRONTEND=noninteractive
  "${apt[@]}" update
  "${apt[@]}" install -y apt-transport-https ca-certificates curl gpg containerd
  mkdir -p /etc/containerd
  containerd config default >/etc/containerd/config.toml
  sed -i 's/SystemdCgroup = false/SystemdCgroup = true/' /etc/containerd/config.toml
  systemctl restart containerd
  systemctl enable containerd
  repo="https://pkgs.k8s.io/core:/stable:/v$minor/deb/"
  install -d -m 755 /etc/apt/keyrings
  curl -fsSL --retry 5 "${repo}Release.key" | gpg --dearmor --yes -o /etc/apt/keyrings/kubernetes-apt-keyring.gpg
  printf 'deb [signed-by=/etc/apt/keyrings/kubernetes-apt-keyring.gpg] %s /\n' "$repo" \
    >/etc/apt/sources.list.d/kubernetes.list
  "${apt[@]}" update
  "${apt[@]}" install -y kubelet kubeadm kubectl
  apt-mark hold kubelet kubeadm kubectl
  systemctl enable kubelet
}

# wait_for_change: long-poll the instance attributes until they change from
# $etag (or timeout_sec passes); updates $etag. Failures back off and return.
etag=NONE
poll_failures=0
wait_for_change() {
  local hdr=$workdir/headers new
  if curl -sS -f --max-time $((POLL_TIMEOUT + 10)) -H 'Metadata-Flavor: Google' -D "$hdr" -o /dev/null \
    "$MD/instance/attributes/?recursive=true&wait_for_change=true&last_etag=$etag&timeout_sec=$POLL_TIMEOUT"; then
    new=$(tr -d '\r' <"$hdr" | awk -F': *' 'tolower($1) == "etag" { print $2 }')
    if [[ $new =~ ^[0-9a-f]{1,64}$ ]]; then etag=$new; else etag=NONE; fi
    poll_failures=0
  else
    poll_failures=$((poll_failures + 1))
    sleep $((poll_failures < 12 ? 5 * poll_failures : 60))
  fi
}

# await_join_values: sets token, endpoint and ca_hash once all three are in
# this VM's metadata and well-formed (no fixed number of tries: slicectl
# writes them when the VM is RUNNING, which may take a while).
await_join_values() {
  local announced="" bad
  while :; do
    token=$(md_get instance/attributes/kubeadm-join-token) || token=
    endpoint=$(md_get instance/attributes/kubeadm-api-endpoint) || endpoint=
    ca_hash=$(md_get instance/attributes/kubeadm-ca-hash) || ca_hash=
    if [[ -n $token && -n $endpoint && -n $ca_hash ]]; then
      bad=
      [[ $token =~ ^[a-z0-9]{6}\.[a-z0-9]{16}$ ]] || bad="kubeadm-join-token"
      [[ $endpoint =~ ^([A-Za-z0-9.-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\]):[0-9]{1,5}$ ]] || bad="${bad:+$bad, }kubeadm-api-endpoint"
      [[ $ca_hash =~ ^sha256:[0-9a-f]{64}$ ]] || bad="${bad:+$bad, }kubeadm-ca-hash"
      if [[ -z $bad ]]; then
        secret=${token#*.}
        return
      fi
      # slicectl may correct it: report and keep waiting.
      report "failed: metadata $bad is malformed; waiting for a new value"
      log "metadata $bad is malformed; waiting for a change"
      announced=
    elif [[ -z $announced ]]; then
      report waiting-for-token
      log "waiting for kubeadm-join-token, kubeadm-api-endpoint and kubeadm-ca-hash in metadata"
      announced=1
    fi
    wait_for_change
  done
}

# write_join_config FILE: kubeadm's JoinConfiguration (v1beta4, the version
# kubeadm 1.31+ writes and 1.36 reads). All values were checked above, and
# are double-quoted YAML scalars.
write_join_config() {
  local item key value effect kv
  {
    printf '%s\n' 'apiVersion: kubeadm.k8s.io/v1beta4' 'kind: JoinConfiguration' 'discovery:' '  bootstrapToken:'
    printf '    token: "%s"\n    apiServerEndpoint: "%s"\n    caCertHashes: ["%s"]\n' "$token" "$endpoint" "$ca_hash"
    printf 'nodeRegistration:\n  name: "%s"\n  kubeletExtraArgs:\n' "$instance"
    printf '  - name: provider-id\n    value: "%s"\n' "$provider_id"
    if [[ -n $labels ]]; then printf '  - name: node-labels\n    value: "%s"\n' "$labels"; fi
    if [[ ${#taints[@]} -eq 0 ]]; then
      printf '  taints: []\n'
    else
      printf '  taints:\n'
      for item in "${taints[@]}"; do
        effect=${item##*:}
        kv=${item%:*}
        key=${kv%%=*}
        value=
        if [[ $kv == *=* ]]; then value=${kv#*=}; fi
        printf '  - key: "%s"\n    value: "%s"\n    effect: "%s"\n' "$key" "$value" "$effect"
      done
    fi
    printf 'timeouts:\n  discovery: %s\n' "$DISCOVERY_TIMEOUT"
  } >"$1"
}

# why FILE: one line saying why kubeadm failed (from its redacted output).
why() {
  if grep -q 'are pinned' "$1"; then
    echo "CA hash mismatch: the cluster CA in cluster-info does not match kubeadm-ca-hash"
  elif grep -q 'could not find a JWS signature' "$1"; then
    echo "token rejected: cluster-info has no signature for token id ${token%%.*} (unknown or expired token)"
  elif grep -qE 'connection refused|no route to host|i/o timeout|dial tcp' "$1"; then
    echo "cannot reach the API server at $endpoint"
  else
    grep -E '^(error|\[ERROR|.*error execution phase)' "$1" | tail -n 1 | cut -c1-200 |
      grep . || echo "kubeadm join failed (see the serial console log)"
  fi
}

main() {
  local minor project zone label_text taint_text item kv attempt backoff out reason items=()

  minor=$(md_required instance/attributes/slicectl-kubernetes-version)
  check slicectl-kubernetes-version "$minor" '^1\.[0-9]{1,3}$'
  instance=$(md_required instance/name)
  check instance/name "$instance" '^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$'
  project=$(md_required project/project-id)
  check project/project-id "$project" '^([a-z][-a-z0-9.]{0,62}:)?[a-z][-a-z0-9]{4,28}[a-z0-9]$'
  zone=$(md_required instance/zone)
  zone=${zone##*/}
  check instance/zone "$zone" '^[a-z]+-[a-z]+[0-9]+-[a-z]$'
  provider_id="gce://$project/$zone/$instance"

  label_text=$(md_get instance/attributes/kube-labels) || label_text=
  labels=
  if [[ -n $label_text ]]; then
    IFS=, read -r -a items <<<"$label_text"
    for item in "${items[@]}"; do
      [[ $item == *=* && ${item%%=*} =~ $RE_KEY && ${item#*=} =~ $RE_VALUE ]] ||
        fail "metadata kube-labels has a malformed item"
    done
    labels=$label_text
  fi
  taint_text=$(md_get instance/attributes/kube-taints) || taint_text=
  taints=()
  if [[ -n $taint_text ]]; then
    IFS=, read -r -a taints <<<"$taint_text"
    for item in "${taints[@]}"; do
      kv=${item%:*}
      [[ $item == *:* && ${item##*:} =~ ^(NoSchedule|PreferNoSchedule|NoExecute)$ &&
        ${kv%%=*} =~ $RE_KEY && ( $kv != *=* || ${kv#*=} =~ $RE_VALUE ) ]] ||
        fail "metadata kube-taints has a malformed item"
    done
  fi

  if [[ -f $KUBELET_CONF ]]; then
    log "$KUBELET_CONF exists: this node has joined already"
    report joined
    reported_final=1
    return
  fi

  if [[ ${SLICECTL_SKIP_HOST_SETUP:-} == 1 ]]; then
    log "SLICECTL_SKIP_HOST_SETUP=1: skipping host setup and installs"
  else
    host_setup
    install_packages "$minor"
  fi
  command -v kubeadm >/dev/null || fail "kubeadm is not installed"
  have_kubeadm_minor "$minor" || log "warning: kubeadm on PATH is not v$minor"

  backoff=$JOIN_BACKOFF
  out=$workdir/kubeadm.out
  for ((attempt = 1; ; attempt++)); do
    await_join_values
    write_join_config "$workdir/join.yaml"
    report joining
    log "kubeadm join as $instance via $endpoint (attempt $attempt/$JOIN_ATTEMPTS)"
    if kubeadm join --config "$workdir/join.yaml" >"$out" 2>&1; then
      redact <"$out" >&2
      rm -f "$workdir/join.yaml"
      log "joined the cluster"
      report joined
      reported_final=1
      return
    fi
    redact <"$out" >"$out.redacted"
    cat "$out.redacted" >&2
    reason=$(why "$out.redacted")
    log "kubeadm join failed: $reason"
    if ((attempt >= JOIN_ATTEMPTS)); then
      fail "$reason (attempt $attempt/$JOIN_ATTEMPTS)"
    fi
    report "failed: $reason; retrying"
    kubeadm reset -f 2>&1 | redact >&2 || log "kubeadm reset -f failed"
    log "retrying in ${backoff}s"
    sleep "$backoff"
    backoff=$((backoff * 2 > 120 ? 120 : backoff * 2))
  done
}

main "$@"
