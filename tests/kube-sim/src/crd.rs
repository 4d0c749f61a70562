//! CustomResourceDefinitions: what apiextensions-apiserver does when one is created or
//! changed — check its names, mark it Established, and serve its resource (namespaced or
//! cluster-scoped, with the status and scale subresources it declares).

use serde_json::{json, Value};

use crate::api::{now, timestamp};
use crate::resources::{CustomInfo, Registry, ResourceDef, ScalePaths, SubresourceDef};
use crate::validation::FieldCause;

const VERBS: [&str; 8] = [
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "create",
    "update",
    "watch",
];

fn cause(field: &str, message: String) -> FieldCause {
    FieldCause {
        reason: "FieldValueInvalid",
        message,
        field: field.to_string(),
    }
}

/// Validate a CRD and fill its status (acceptedNames, conditions, storedVersions).
pub fn accept(crd: &mut Value) -> Result<(), Vec<FieldCause>> {
    let spec = &crd["spec"];
    let group = spec["group"].as_str().unwrap_or("");
    let plural = spec["names"]["plural"].as_str().unwrap_or("");
    let kind = spec["names"]["kind"].as_str().unwrap_or("");
    let name = crd["metadata"]["name"].as_str().unwrap_or("");
    let mut causes = Vec::new();
    if group.is_empty() {
        causes.push(FieldCause {
            reason: "FieldValueRequired",
            message: "Required value".into(),
            field: "spec.group".into(),
        });
    }
    if plural.is_empty() {
        causes.push(FieldCause {
            reason: "FieldValueRequired",
            message: "Required value".into(),
            field: "spec.names.plural".into(),
        });
    }
    if kind.is_empty() {
        causes.push(FieldCause {
            reason: "FieldValueRequired",
            message: "Required value".into(),
            field: "spec.names.kind".into(),
        });
    }
    if !group.is_empty() && !plural.is_empty() && name != format!("{plural}.{group}") {
        causes.push(cause(
            "metadata.name",
            format!("Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    let scope = spec["scope"].as_str().unwrap_or("");
    if scope != "Namespaced" && scope != "Cluster" {
        causes.push(FieldCause {
            reason: "FieldValueNotSupported",
            message: format!(
                "Unsupported value: \"{scope}\": supported values: \"Cluster\", \"Namespaced\""
            ),
            field: "spec.scope".into(),
        });
    }
    let versions = spec["versions"].as_array().cloned().unwrap_or_default();
    if versions.is_empty() {
        causes.push(FieldCause {
            reason: "FieldValueRequired",
            message: "Required value: must have at least one version".into(),
            field: "spec.versions".into(),
        });
    }
    let storage: Vec<&Value> = versions
        .iter()
        .filter(|v| v["storage"] == json!(true))
        .collect();
    if !versions.is_empty() && storage.len() != 1 {
        causes.push(cause(
            "spec.versions",
            format!(
                "Invalid value: {}: must have exactly one version marked as storage version",
                versions.len()
            ),
        ));
    }
    if !causes.is_empty() {
        return Err(causes);
    }
    let storage_version = storage[0]["name"].clone();
    let mut names = spec["names"].clone();
    if names["singular"].as_str().unwrap_or("").is_empty() {
        names["singular"] = json!(kind.to_lowercase());
    }
    if names["listKind"].as_str().unwrap_or("").is_empty() {
        names["listKind"] = json!(format!("{kind}List"));
    }
    crd["spec"]["names"] = names;
    let mut stored: Vec<Value> = crd["status"]["storedVersions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if !stored.contains(&storage_version) {
        stored.push(storage_version);
    }
    // As the API answers a create: the names are not accepted yet; the establishing
    // controller does that right after (see `establish`).
    if crd["status"]["acceptedNames"]["kind"]
        .as_str()
        .is_none_or(str::is_empty)
    {
        crd["status"] = json!({"conditions": null, "acceptedNames": {"plural": "", "kind": ""}, "storedVersions": stored});
    } else {
        crd["status"]["storedVersions"] = json!(stored);
    }
    Ok(())
}

/// Discovery's storageVersionHash of a custom resource: the first 8 bytes of the SHA-256
/// of `group/version/kind`, base64-encoded, as kube-apiserver computes it.
pub fn storage_version_hash(group: &str, version: &str, kind: &str) -> String {
    use base64::Engine;
    use sha2::Digest;
    let digest = sha2::Sha256::digest(format!("{group}/{version}/{kind}").as_bytes());
    base64::engine::general_purpose::STANDARD.encode(&digest[..8])
}

/// What apiextensions-apiserver's naming and establishing controllers do next: accept the
/// names and mark the CRD NamesAccepted and Established.
pub fn establish(crd: &Value) -> Value {
    let mut out = crd.clone();
    let t = timestamp(now());
    out["status"]["acceptedNames"] = crd["spec"]["names"].clone();
    out["status"]["conditions"] = json!([
        {"type": "NamesAccepted", "status": "True", "lastTransitionTime": t, "reason": "NoConflicts", "message": "no conflicts found"},
        {"type": "Established", "status": "True", "lastTransitionTime": t, "reason": "InitialNamesAccepted", "message": "the initial names have been accepted"}
    ]);
    out
}

/// The resources a (stored, accepted) CRD serves.
pub fn resource_defs(crd: &Value) -> Vec<ResourceDef> {
    let spec = &crd["spec"];
    let s = |v: &Value| v.as_str().unwrap_or("").to_string();
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    let group = s(&spec["group"]);
    let names = &spec["names"];
    let mut out = Vec::new();
    for v in spec["versions"].as_array().cloned().unwrap_or_default() {
        if v["served"] != json!(true) {
            continue;
        }
        let kind = s(&names["kind"]);
        let mut subresources = Vec::new();
        let status = v["subresources"]["status"].is_object();
        if status {
            subresources.push(SubresourceDef {
                name: "status".into(),
                group: String::new(),
                version: String::new(),
                kind: kind.clone(),
                verbs: vec!["get".into(), "patch".into(), "update".into()],
            });
        }
        let scale = v["subresources"]["scale"].as_object().map(|sc| ScalePaths {
            spec_replicas: sc
                .get("specReplicasPath")
                .and_then(Value::as_str)
                .unwrap_or(".spec.replicas")
                .to_string(),
            status_replicas: sc
                .get("statusReplicasPath")
                .and_then(Value::as_str)
                .unwrap_or(".status.replicas")
                .to_string(),
            label_selector: sc
                .get("labelSelectorPath")
                .and_then(Value::as_str)
                .map(String::from),
        });
        if scale.is_some() {
            subresources.push(SubresourceDef {
                name: "scale".into(),
                group: "autoscaling".into(),
                version: "v1".into(),
                kind: "Scale".into(),
                verbs: vec!["get".into(), "patch".into(), "update".into()],
            });
        }
        out.push(ResourceDef {
            group: group.clone(),
            version: s(&v["name"]),
            resource: s(&names["plural"]),
            kind,
            singular: s(&names["singular"]),
            namespaced: spec["scope"] == "Namespaced",
            verbs: VERBS.iter().map(|v| v.to_string()).collect(),
            short_names: strings(&names["shortNames"]),
            categories: strings(&names["categories"]),
            storage_version_hash: storage_version_hash(&group, &s(&v["name"]), &s(&names["kind"])),
            subresources,
            custom: Some(CustomInfo {
                printer_columns: v["additionalPrinterColumns"].clone(),
                scale,
                status,
            }),
        });
    }
    out
}

pub fn register(registry: &Registry, crd: &Value) {
    let name = crd["metadata"]["name"].as_str().unwrap_or("");
    if !crd["metadata"]["deletionTimestamp"].is_null() {
        return;
    }
    let defs = resource_defs(crd);
    let versions = defs.iter().map(|d| d.version.clone()).collect();
    registry.register_crd(name, defs, versions);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn widget_crd() -> Value {
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                    "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}}}]}})
    }

    #[test]
    fn an_accepted_crd_is_established_and_serves_its_resource() {
        let mut crd = widget_crd();
        accept(&mut crd).unwrap();
        assert!(
            crd["status"]["conditions"].is_null(),
            "not established on create"
        );
        let crd = establish(&crd);
        assert_eq!(crd["status"]["conditions"][1]["type"], "Established");
        assert_eq!(crd["status"]["acceptedNames"]["listKind"], "WidgetList");
        let defs = resource_defs(&crd);
        assert_eq!(defs.len(), 1);
        assert!(defs[0].namespaced && defs[0].subresource("scale").is_some());
        let r = Registry::builtin();
        register(&r, &crd);
        assert!(r.lookup("example.com", "v1", "widgets").is_some());
        r.unregister_crd("widgets.example.com");
        assert!(r.lookup("example.com", "v1", "widgets").is_none());
    }

    #[test]
    fn storage_version_hash_is_upstreams() {
        // The value a real kube-apiserver v1.29.6 advertised for this kind.
        assert_eq!(
            storage_version_hash("example.com", "v1", "Widget"),
            "gIwvi5rymmg="
        );
    }

    #[test]
    fn a_crd_whose_name_is_not_plural_dot_group_is_invalid() {
        let mut crd = widget_crd();
        crd["metadata"]["name"] = json!("widget.example.com");
        let causes = accept(&mut crd).unwrap_err();
        assert_eq!(causes[0].field, "metadata.name");
    }
}
