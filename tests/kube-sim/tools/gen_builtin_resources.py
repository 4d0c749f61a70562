#!/usr/bin/env python3
"""Regenerate src/builtin_resources.json from the recorded discovery answers of a real
kube-apiserver v1.29.6 (shared/apiserver-reference: 021/022 aggregated discovery, 006 group
order, 007-019 legacy documents for storageVersionHash).

Only what kube-sim actually serves is kept: subresources it implements, and no
componentstatuses. Usage: gen_builtin_resources.py REFERENCE_DIR > src/builtin_resources.json
"""
import json, os, sys

SERVED_SUBRESOURCES = {"status", "scale", "binding", "eviction", "finalize", "token", "approval"}
DROPPED_RESOURCES = {("", "componentstatuses")}

ref = sys.argv[1]
load = lambda n: json.load(open(os.path.join(ref, n)))["response"]["body"]
hashes = {}
for f in sorted(os.listdir(ref)):
    if f.startswith("0") and "discovery_ap" in f:
        body = load(f)
        if body.get("kind") != "APIResourceList":
            continue
        gv = body["groupVersion"]
        for r in body["resources"]:
            if "storageVersionHash" in r:
                hashes[(gv, r["name"])] = r["storageVersionHash"]

out = {"groups": [], "resources": []}
for fname, legacy in (("022-aggregated-discovery_api.json", True), ("021-aggregated-discovery_apis.json", False)):
    for item in load(fname)["items"]:
        group = item["metadata"].get("name", "")
        versions = [v["version"] for v in item["versions"]]
        if not legacy:
            out["groups"].append({"name": group, "versions": versions})
        for v in item["versions"]:
            gv = v["version"] if legacy else f"{group}/{v['version']}"
            for r in v["resources"]:
                if (group, r["resource"]) in DROPPED_RESOURCES:
                    continue
                subs = []
                for s in r.get("subresources", []):
                    if s["subresource"] not in SERVED_SUBRESOURCES:
                        continue
                    rk = s["responseKind"]
                    subs.append({"name": s["subresource"], "group": rk.get("group", ""),
                                 "version": rk.get("version", ""), "kind": rk["kind"], "verbs": s["verbs"]})
                out["resources"].append({
                    "group": group, "version": v["version"], "resource": r["resource"],
                    "kind": r["responseKind"]["kind"], "singular": r.get("singularResource", ""),
                    "namespaced": r["scope"] == "Namespaced", "verbs": r.get("verbs", []),
                    "shortNames": r.get("shortNames", []), "categories": r.get("categories", []),
                    "storageVersionHash": hashes.get((gv, r["resource"]), ""), "subresources": subs,
                })
json.dump(out, sys.stdout, indent=1)
print()
