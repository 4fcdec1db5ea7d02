#!/usr/bin/env python3
"""Writes the seed inputs of the front-end fuzz targets into fuzz/corpus/TARGET/
(files named seed-*), from the repository's own specs, corpus, golden cases and
examples, plus a few hand-written cloud answers and kubeconfigs. Idempotent:
run it again after adding specs or golden cases (docs/testing.md, "Fuzzing the
front end"). The files the fuzzer found (named by their SHA-1) are kept."""
import base64
import glob
import hashlib
import json
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "fuzz", "corpus")


def put(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-")
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


def rel(p):
    return os.path.relpath(p, ROOT)


def yaml_files(d):
    out = []
    for ext in ("yaml", "yml"):
        out += glob.glob(os.path.join(d, "**", "*." + ext), recursive=True)
    return sorted(out)


def read(p):
    with open(p, "rb") as f:
        return f.read()


# spec: every spec file in the repository.
spec_dirs = [os.path.join(ROOT, d) for d in ("tests/corpus", "specs", "examples")]
spec_dirs += sorted(glob.glob(os.path.join(ROOT, "tests/golden/*/specs")))
for d in spec_dirs:
    for p in yaml_files(d):
        put("spec", rel(p), read(p))

# configmap: each spec directory as the ConfigMap the API would answer.
dirs = [os.path.join(ROOT, "specs"), os.path.join(ROOT, "tests/corpus/valid")]
dirs += sorted(glob.glob(os.path.join(ROOT, "examples/*")))
dirs += sorted(glob.glob(os.path.join(ROOT, "tests/golden/*/specs")))
for d in dirs:
    data, binary = {}, {}
    for p in yaml_files(d):
        key = os.path.relpath(p, d).replace("/", "-")
        raw = read(p)
        try:
            data[key] = raw.decode()
        except UnicodeDecodeError:
            binary[key] = base64.b64encode(raw).decode()
    if not data and not binary:
        continue
    data["README.md"] = "not a spec"
    cm = {"apiVersion": "v1", "kind": "ConfigMap",
          "metadata": {"name": "specs", "namespace": "slicectl"}, "data": data}
    if binary:
        cm["binaryData"] = binary
    put("configmap", rel(d), json.dumps(cm, indent=1))
put("configmap", "binary-data", json.dumps({
    "metadata": {"name": "specs"},
    "binaryData": {"a.yaml": base64.b64encode(b"\xff\xfe not utf-8").decode(),
                   "b.yml": base64.b64encode(b"apiVersion: slicectl.dev/v1alpha1\n").decode()},
    "data": {"..data": "x", ".hidden.yaml": "{}", "x.yaml.bak": "", "c.YAML": "kind: Slice\n"}}))

# live: every golden case's live.json, planned against its own specs.
for case in sorted(glob.glob(os.path.join(ROOT, "tests/golden/*/live.json"))):
    name = os.path.basename(os.path.dirname(case))
    live = json.loads(read(case))
    live["fleet"] = "golden/" + name
    opts = os.path.join(os.path.dirname(case), "options.json")
    if os.path.exists(opts) and json.loads(read(opts)).get("mode") == "destroy":
        live["destroy"] = True
    put("live", "golden-" + name, json.dumps(live, indent=1))

node = {"metadata": {"name": "gke-n-0", "labels": {
    "cloud.google.com/gke-nodepool": "llm-0",
    "cloud.google.com/gke-tpu-accelerator": "tpu-v5p-slice",
    "cloud.google.com/gke-tpu-topology": "2x2x2"}},
    "spec": {"providerID": "gce://p/us-east5-a/vm-0"},
    "status": {"conditions": [{"type": "Ready", "status": "True"}],
               "allocatable": {"google.com/tpu": "4"}, "capacity": {"google.com/tpu": "4"}}}
running = {"metadata": {"name": "train-0", "namespace": "ml",
                        "annotations": {"slicectl.dev/do-not-disrupt": "true"},
                        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u"}]},
           "spec": {"nodeName": "gke-n-0", "containers": [{"name": "c"}]},
           "status": {"phase": "Running"}}
pending = {"metadata": {"name": "leader-0", "namespace": "ml", "labels": {
    "jobset.sigs.k8s.io/jobset-name": "train", "jobset.sigs.k8s.io/replicatedjob-name": "workers",
    "jobset.sigs.k8s.io/job-index": "0", "batch.kubernetes.io/job-completion-index": "0"},
    "annotations": {"jobset.sigs.k8s.io/job-key": "abc"}},
    "spec": {"nodeSelector": {"cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
                              "cloud.google.com/gke-tpu-topology": "2x4"},
             "containers": [{"name": "c", "resources": {"requests": {"google.com/tpu": "4"}}}]},
    "status": {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}}
jobset = {"metadata": {"name": "train", "namespace": "ml", "uid": "js-uid"},
          "status": {"conditions": [{"type": "Completed", "status": "True",
                                     "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}
for fleet in ("examples/jobset", "specs", "golden/replace"):
    put("live", "cluster-" + fleet, json.dumps({
        "fleet": fleet, "now": "2026-01-01T01:00:00Z",
        "cluster": {"nodes": [node], "pods": [running, pending], "jobsets": [jobset]}}, indent=1))

# cloud: the first byte picks the answer type (src/fuzzing/cloud.rs).
bodies = {}
for case in sorted(glob.glob(os.path.join(ROOT, "tests/golden/*/live.json"))):
    for kind, entries in json.loads(read(case)).items():
        if isinstance(entries, list):
            for e in entries:
                if isinstance(e, dict) and "body" in e:
                    bodies.setdefault(kind, []).append(e["body"])


def cloud(n, name, body):
    text = body if isinstance(body, bytes) else json.dumps(body).encode()
    put("cloud", name, bytes([n]) + text)


cloud(0, "gke-node-pools", {"nodePools": bodies.get("node_pool", [])})
gke_op = {"name": "operation-1", "zone": "us-central2-b", "operationType": "CREATE_NODE_POOL",
          "status": "DONE", "selfLink": "https://container.googleapis.com/v1/projects/p/locations/us-central2-b/operations/operation-1",
          "targetLink": "https://container.googleapis.com/v1/projects/p/locations/us-central2-b/clusters/c/nodePools/np",
          "error": {"code": 8, "message": "stockout"},
          "clusterConditions": [{"code": "GCE_STOCKOUT", "message": "no capacity", "canonicalCode": "RESOURCE_EXHAUSTED"}],
          "startTime": "2026-01-01T00:00:00Z"}
cloud(1, "gke-operation-stockout", gke_op)
cloud(2, "gke-operations", {"operations": [gke_op, dict(gke_op, status="RUNNING", error=None, clusterConditions=[])]})
cloud(3, "gke-cluster", {"name": "c", "endpoint": "34.1.2.3",
                         "masterAuth": {"clusterCaCertificate": base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n").decode()},
                         "privateClusterConfig": {"privateEndpoint": "10.0.0.2"},
                         "controlPlaneEndpointsConfig": {"dnsEndpointConfig": {"endpoint": "gke-abc.us-central2.gke.goog", "allowExternalTraffic": True},
                                                         "ipEndpointsConfig": {"enabled": True}}})
cloud(4, "gke-clusters", {"clusters": [{"name": "c", "location": "us-central2",
                                        "nodePools": [{"name": "np", "config": {"labels": {"a": "b"}}}]}],
                          "missingZones": ["us-central2-b"]})
compute_op = {"kind": "compute#operation", "name": "operation-2", "operationType": "insert",
              "status": "DONE", "zone": "https://www.googleapis.com/compute/v1/projects/p/zones/us-east5-a",
              "selfLink": "https://www.googleapis.com/compute/v1/projects/p/zones/us-east5-a/operations/operation-2",
              "targetLink": "https://www.googleapis.com/compute/v1/projects/p/zones/us-east5-a/instanceGroupManagers/m",
              "error": {"errors": [{"code": "ZONE_RESOURCE_POOL_EXHAUSTED", "message": "no room"}]},
              "httpErrorStatusCode": 503, "httpErrorMessage": "SERVICE UNAVAILABLE"}
cloud(5, "compute-operation", compute_op)
cloud(6, "compute-operations", {"items": [compute_op, {"name": "op-3", "status": "RUNNING",
                                                        "region": "https://www.googleapis.com/compute/v1/projects/p/regions/us-east5"}]})
cloud(7, "compute-resource-policies", {"items": bodies.get("workload_policy", [])})
cloud(8, "compute-templates", {"items": bodies.get("instance_template", [])})
migs = bodies.get("mig", [])
cloud(9, "compute-migs-aggregated", {"items": {"zones/us-east5-a": {"instanceGroupManagers": migs},
                                               "zones/us-east5-b": {"warning": {"code": "NO_RESULTS_ON_PAGE"}}}})
for i, m in enumerate(migs[:3]):
    cloud(10, "compute-mig-%d" % i, m)
cloud(11, "compute-managed-instances", {"managedInstances": [
    {"instance": "https://www.googleapis.com/compute/v1/projects/p/zones/z/instances/vm-0",
     "instanceStatus": "RUNNING", "currentAction": "NONE",
     "lastAttempt": {"errors": {"errors": [{"code": "ZONE_RESOURCE_POOL_EXHAUSTED", "message": "m"}]}}}]})
cloud(12, "compute-guest-attributes", {"queryPath": "slicectl/", "queryValue": {"items": [
    {"namespace": "slicectl", "key": "bootstrap", "value": "failed: x (attempt 3/3)"}]}})
cloud(13, "compute-region", {"name": "us-east5", "quotas": [{"metric": "TPUS_V5P", "limit": 64.0, "usage": 8.0}]})
for status, body in ((429, {"error": {"code": 429, "status": "RESOURCE_EXHAUSTED",
                                      "message": "Reservation does not have enough resources for the request: x",
                                      "errors": [{"reason": "rateLimitExceeded"}]}}),
                     (404, {"error": {"code": 404, "message": "not found", "status": "NOT_FOUND",
                                      "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "NOT_FOUND"}]}}),
                     (502, b"<html>bad gateway</html>")):
    text = body if isinstance(body, bytes) else json.dumps(body).encode()
    put("cloud", "error-%d" % status, bytes([15]) + status.to_bytes(2, "big") + text)

# kubeconfig: inline credentials, refused forms, several documents.
INLINE = """apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: 'https://127.0.0.1:6443', certificate-authority-data: Zm9v}
users:
- name: u
  user: {token: abc}
contexts:
- name: x
  context: {cluster: c, user: u, namespace: ns}
current-context: x
"""
put("kubeconfig", "inline", INLINE)
put("kubeconfig", "exec", INLINE.replace("user: {token: abc}", "user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: gke-gcloud-auth-plugin\n      args: ['--x']"))
put("kubeconfig", "files", INLINE.replace("certificate-authority-data: Zm9v", "certificate-authority: /etc/ca.pem").replace("{token: abc}", "{tokenFile: /t, client-certificate: /c, client-key: /k}"))
put("kubeconfig", "auth-provider", INLINE.replace("{token: abc}", "{auth-provider: {name: gcp, config: {cmd-path: /bin/true}}}"))
put("kubeconfig", "two-documents", INLINE + "---\n" + INLINE.replace("name: c", "name: d").replace("x", "y"))
put("kubeconfig", "proxy-tls", INLINE.replace("certificate-authority-data: Zm9v", "proxy-url: 'socks5://p:1080', tls-server-name: k, insecure-skip-tls-verify: true"))

# planfile: each golden case's plan.json sealed as `slicectl plan --out` seals
# it (the digest is SHA-256 of the body's compact JSON, in field order).
def sealed(specs_dir, plan, command=None):
    body = {"kind": "slicectl-plan", "file_version": 2, "format_version": plan.get("format_version", 1)}
    if command:
        body["command"] = command
    body["options"] = {"max_destroy": 10, "allow_empty_source": False, "allow_unverified_delete": False}
    body["specs"] = [{"path": rel(p), "text": read(p).decode()} for p in yaml_files(specs_dir)]
    body["plan"] = plan
    compact = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
    body["digest"] = hashlib.sha256(compact).hexdigest()
    return json.dumps(body, ensure_ascii=False, indent=2)


for case in sorted(glob.glob(os.path.join(ROOT, "tests/golden/*/plan.json"))):
    d = os.path.dirname(case)
    put("planfile", "golden-" + os.path.basename(d), sealed(os.path.join(d, "specs"), json.loads(read(case))))
replace = os.path.join(ROOT, "tests/golden/replace")
plan = json.loads(read(os.path.join(replace, "plan.json")))
put("planfile", "adopt", sealed(os.path.join(replace, "specs"), plan, {"adopt": {"target": "t", "names": ["a-0"]}}))
put("planfile", "release", sealed(os.path.join(replace, "specs"), plan, {"release": {"slices": ["a"]}}))
