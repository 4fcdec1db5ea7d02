#!/usr/bin/env python3
"""Prune Google's compute discovery document to what the simulator serves.

Usage: prune-discovery.py SRC_COMPUTE_V1_JSON OUT_JSON

Keeps the document's identity fields, the methods the simulator serves
(crates/slicectl-sim/src routes) and every schema reachable from their request/response
bodies. The output is committed as crates/slicectl-sim/src/discovery/compute-v1-pruned.json;
tests/integration/sim_discovery.rs re-runs this script and fails if the committed file
drifted. Add a method here when the simulator starts serving it.
"""
import json
import sys

METHODS = {
    "resourcePolicies": ["insert", "get", "list", "delete", "aggregatedList"],
    "regionOperations": ["get", "list", "wait"],
    "zoneOperations": ["get", "list", "wait"],
    "globalOperations": ["get", "list", "wait", "aggregatedList"],
    "zones": ["get"],
    "regions": ["get"],
    "instanceTemplates": ["insert", "get", "list", "delete", "aggregatedList"],
    "instanceGroupManagers": ["insert", "get", "list", "delete",
                              "listManagedInstances", "listErrors",
                              "recreateInstances", "patch", "aggregatedList"],
    "instances": ["list", "get", "setMetadata", "getGuestAttributes",
                  "aggregatedList"],
    "autoscalers": ["list"],
    "instanceGroups": ["list"],
    "reservations": ["get", "list", "aggregatedList"],
}

KEEP_TOP = ["kind", "discoveryVersion", "id", "name", "version", "revision",
            "title", "rootUrl", "servicePath", "basePath", "batchPath",
            "parameters", "protocol"]


def refs(node, out):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "$ref" and isinstance(v, str):
                out.add(v)
            else:
                refs(v, out)
    elif isinstance(node, list):
        for v in node:
            refs(v, out)


def main():
    src, dst = sys.argv[1], sys.argv[2]
    with open(src, encoding="utf-8") as f:
        doc = json.load(f)
    out = {k: doc[k] for k in KEEP_TOP if k in doc}
    resources = {}
    seeds = set()
    for res in sorted(METHODS):
        methods = {}
        for m in METHODS[res]:
            spec = doc["resources"][res]["methods"][m]
            methods[m] = spec
            refs({"request": spec.get("request"), "response": spec.get("response")}, seeds)
        resources[res] = {"methods": methods}
    out["resources"] = resources
    keep = set()
    todo = sorted(seeds)
    while todo:
        name = todo.pop()
        if name in keep:
            continue
        keep.add(name)
        found = set()
        refs(doc["schemas"][name], found)
        todo.extend(sorted(found - keep))
    out["schemas"] = {k: doc["schemas"][k] for k in sorted(keep)}
    with open(dst, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1, sort_keys=False, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
