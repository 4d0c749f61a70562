//! ControllerRevisions: the history of pod templates a StatefulSet or DaemonSet keeps
//! (upstream `pkg/controller/history`).
//!
//! A revision stores a patch that replaces the owner's `spec.template`:
//! `{"spec":{"template":{...,"$patch":"replace"}}}`, serialised as Go's `encoding/json`
//! serialises a `map[string]interface{}` (keys sorted, HTML characters escaped, compact).
//! Revisions are compared by those bytes and StatefulSet revisions are named by their
//! FNV-1 hash, so producing the same bytes as kube-controller-manager matters: rkcm
//! taking over from KCM finds KCM's revisions equal to the current template instead of
//! creating new ones (which would roll every pod).

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kube::api::{Api, PostParams};
use serde_json::{json, Value};

use crate::api_errors::{is_conflict, is_not_found};
use crate::meta::ResourceNames;

/// The label every revision carries with its hash (`history.ControllerRevisionHashLabel`).
pub const CONTROLLER_REVISION_HASH_LABEL: &str = "controller.kubernetes.io/hash";
/// The label StatefulSet and DaemonSet pods carry naming their revision
/// (`apps.ControllerRevisionHashLabelKey`, also `DefaultDaemonSetUniqueLabelKey`).
pub const POD_REVISION_LABEL: &str = "controller-revision-hash";

/// `prefix-hash`, the prefix cut so the name stays a valid object name.
pub fn revision_name(prefix: &str, hash: &str) -> String {
    let mut cut = prefix.len().min(223);
    while !prefix.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}-{hash}", &prefix[..cut])
}

/// 32-bit FNV-1 (multiply, then xor), Go's `hash/fnv.New32`.
fn fnv1_32(chunks: &[&[u8]]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in chunks.iter().flat_map(|c| c.iter()) {
        h = h.wrapping_mul(0x0100_0193);
        h ^= u32::from(*b);
    }
    h
}

/// 32-bit FNV-1a.
pub(crate) fn fnv1a32(chunks: &[&[u8]]) -> u32 {
    const OFFSET: u32 = 0x811c_9dc5;
    const PRIME: u32 = 0x0100_0193;
    let mut h = OFFSET;
    for b in chunks.iter().flat_map(|c| c.iter()) {
        h ^= u32::from(*b);
        h = h.wrapping_mul(PRIME);
    }
    h
}

/// A pod template's hash (upstream `controller.ComputeHash`): the Deployment's
/// `pod-template-hash` label and ReplicaSet name suffix, and the hash a new DaemonSet
/// revision is named and labelled with.
///
/// FNV-1a (32-bit) over the template's JSON serialisation, followed — when a
/// collision count is set — by the count as 8 bytes (little-endian u32 plus
/// four zero bytes, the same trailer upstream writes), so bumping
/// `status.collisionCount` yields a fresh name. The decimal form of the hash
/// is then mapped onto the safe alphabet.
///
/// The value differs from kube-controller-manager's (which hashes a Go
/// debug dump of the struct). That only affects the names of new objects:
/// ReplicaSets are matched to templates by content (`equal_ignore_hash`) and
/// DaemonSet revisions by their data, never by hash, so taking over from upstream
/// is fine. JSON omits unset fields, so the hash is also stable when new optional
/// API fields appear.
pub fn compute_hash(template: &PodTemplateSpec, collision_count: Option<i32>) -> String {
    let body =
        serde_json::to_vec(template).unwrap_or_else(|_| format!("{template:?}").into_bytes());
    let mut trailer = [0u8; 8];
    let mut chunks: Vec<&[u8]> = vec![&body];
    if let Some(count) = collision_count {
        trailer[..4].copy_from_slice(&(count as u32).to_le_bytes());
        chunks.push(&trailer);
    }
    safe_encode_string(&fnv1a32(&chunks).to_string())
}

/// Characters hash-derived names are made of (apimachinery's `rand.SafeEncodeString`).
pub const SAFE_ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

pub fn safe_encode_string(s: &str) -> String {
    s.bytes()
        .map(|b| SAFE_ALPHANUMS[b as usize % SAFE_ALPHANUMS.len()] as char)
        .collect()
}

/// A revision's hash: FNV-1 of its data bytes, then of the collision count in decimal
/// when there is one (`history.HashControllerRevision`).
pub fn hash_revision(data: &[u8], collision_count: Option<i32>) -> String {
    let probe = collision_count.map(|c| c.to_string());
    let mut chunks: Vec<&[u8]> = vec![data];
    if let Some(probe) = &probe {
        chunks.push(probe.as_bytes());
    }
    safe_encode_string(&fnv1_32(&chunks).to_string())
}

/// `value` as Go's `json.Marshal` writes an untyped map: object keys sorted bytewise,
/// no spaces, `<`, `>`, `&`, U+2028 and U+2029 escaped.
pub fn go_json(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    write_go_json(value, &mut out);
    out
}

fn write_go_json(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Number(n) => out.extend_from_slice(n.to_string().as_bytes()),
        Value::String(s) => write_go_string(s, out),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_go_json(item, out);
            }
            out.push(b']');
        }
        Value::Object(map) => {
            let sorted: BTreeMap<&String, &Value> = map.iter().collect();
            out.push(b'{');
            for (i, (key, item)) in sorted.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_go_string(key, out);
                out.push(b':');
                write_go_json(item, out);
            }
            out.push(b'}');
        }
    }
}

fn write_go_string(s: &str, out: &mut Vec<u8>) {
    out.push(b'"');
    for c in s.chars() {
        match c {
            '"' => out.extend_from_slice(b"\\\""),
            '\\' => out.extend_from_slice(b"\\\\"),
            '\n' => out.extend_from_slice(b"\\n"),
            '\r' => out.extend_from_slice(b"\\r"),
            '\t' => out.extend_from_slice(b"\\t"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' | '\u{0}'..='\u{1f}' => {
                out.extend_from_slice(format!("\\u{:04x}", c as u32).as_bytes())
            }
            c => {
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
    out.push(b'"');
}

/// The template as Go's typed encoder writes it: JSON omits nothing Go would write.
/// Go always writes `metadata.creationTimestamp` (null when unset) and each
/// container's `resources` (a struct, `{}` when empty); a typed Rust round trip drops
/// both.
pub fn go_template_value(template: &PodTemplateSpec) -> Value {
    let mut value = serde_json::to_value(template).unwrap_or_else(|_| json!({}));
    if let Value::Object(map) = &mut value {
        let metadata = map
            .entry("metadata")
            .or_insert_with(|| Value::Object(Default::default()));
        if let Value::Object(metadata) = metadata {
            metadata.entry("creationTimestamp").or_insert(Value::Null);
        }
        if let Some(Value::Object(spec)) = map.get_mut("spec") {
            for list in ["initContainers", "containers", "ephemeralContainers"] {
                if let Some(Value::Array(containers)) = spec.get_mut(list) {
                    for container in containers {
                        if let Value::Object(container) = container {
                            container
                                .entry("resources")
                                .or_insert_with(|| Value::Object(Default::default()));
                        }
                    }
                }
            }
        }
    }
    value
}

/// The data of a revision of `template`: a patch replacing the owner's template
/// (upstream's `getPatch` of StatefulSet and DaemonSet).
pub fn template_patch(template: &PodTemplateSpec) -> Value {
    let mut template = go_template_value(template);
    if let Value::Object(map) = &mut template {
        map.insert("$patch".into(), Value::String("replace".into()));
    }
    json!({"spec": {"template": template}})
}

/// A revision's data as the bytes upstream compares and hashes.
pub fn data_bytes(revision: &ControllerRevision) -> Vec<u8> {
    match &revision.data {
        Some(RawExtension(value)) if !value.is_null() => go_json(value),
        _ => Vec::new(),
    }
}

/// The template a revision restores (upstream applies the patch to the owner; the
/// patch replaces the whole template, so the template is the patch's).
pub fn template_of(revision: &ControllerRevision) -> Option<PodTemplateSpec> {
    let RawExtension(value) = revision.data.as_ref()?;
    let mut template = value.get("spec")?.get("template")?.clone();
    if let Value::Object(map) = &mut template {
        map.remove("$patch");
    }
    serde_json::from_value(template).ok()
}

/// A new revision of an owner (`history.NewControllerRevision`): the template's labels
/// plus the hash label, the owner as controller, named `owner-hash`.
pub fn new_revision(
    owner: &OwnerReference,
    namespace: &str,
    template_labels: Option<&BTreeMap<String, String>>,
    data: Value,
    revision: i64,
    collision_count: Option<i32>,
) -> ControllerRevision {
    let hash = hash_revision(&go_json(&data), collision_count);
    let mut labels = template_labels.cloned().unwrap_or_default();
    labels.insert(CONTROLLER_REVISION_HASH_LABEL.into(), hash.clone());
    ControllerRevision {
        metadata: ObjectMeta {
            name: Some(revision_name(&owner.name, &hash)),
            namespace: Some(namespace.into()),
            labels: Some(labels),
            owner_references: Some(vec![owner.clone()]),
            ..ObjectMeta::default()
        },
        data: Some(RawExtension(data)),
        revision,
    }
}

/// Oldest first: by revision number, then creation time, then name
/// (`history.SortControllerRevisions`, stable).
pub fn sort_revisions(revisions: &mut [Arc<ControllerRevision>]) {
    revisions.sort_by(|a, b| compare_revisions(a, b));
}

fn compare_revisions(a: &ControllerRevision, b: &ControllerRevision) -> Ordering {
    a.revision.cmp(&b.revision).then_with(|| {
        let created = |r: &ControllerRevision| r.metadata.creation_timestamp.clone().map(|t| t.0);
        match created(a).cmp(&created(b)) {
            Ordering::Equal => a.metadata.name.cmp(&b.metadata.name),
            other => other,
        }
    })
}

/// Do two revisions hold the same template? Numeric hash labels that differ say no
/// at once; otherwise the data decides (`history.EqualRevision`).
pub fn equal_revision(a: &ControllerRevision, b: &ControllerRevision) -> bool {
    let numeric_hash = |r: &ControllerRevision| {
        r.metadata
            .labels
            .as_ref()?
            .get(CONTROLLER_REVISION_HASH_LABEL)?
            .parse::<i32>()
            .ok()
            .map(|h| h as u32)
    };
    if let (Some(x), Some(y)) = (numeric_hash(a), numeric_hash(b)) {
        if x != y {
            return false;
        }
    }
    data_bytes(a) == data_bytes(b)
}

/// The revisions equal to `needle`, in the order given.
pub fn find_equal_revisions(
    revisions: &[Arc<ControllerRevision>],
    needle: &ControllerRevision,
) -> Vec<Arc<ControllerRevision>> {
    revisions
        .iter()
        .filter(|r| equal_revision(r, needle))
        .cloned()
        .collect()
}

/// The number the next revision gets: one past the last of a sorted history, or 1.
pub fn next_revision(sorted: &[Arc<ControllerRevision>]) -> i64 {
    sorted.last().map(|r| r.revision + 1).unwrap_or(1)
}

/// Creates `revision` under the hash of its data and `collision_count`; a name taken by
/// a revision with other data bumps the count and tries the next name, one with the
/// same data is the revision (`realHistory.CreateControllerRevision`).
pub async fn create_revision(
    api: &Api<ControllerRevision>,
    owner_name: &str,
    revision: &ControllerRevision,
    collision_count: &mut i32,
) -> Result<ControllerRevision, kube::Error> {
    let bytes = data_bytes(revision);
    let mut clone = revision.clone();
    loop {
        let hash = hash_revision(&bytes, Some(*collision_count));
        let name = revision_name(owner_name, &hash);
        clone.metadata.name = Some(name.clone());
        match api.create(&PostParams::default(), &clone).await {
            Err(kube::Error::Api(status))
                if status.code == 409 && status.reason == "AlreadyExists" =>
            {
                let existing = api.get(&name).await?;
                if data_bytes(&existing) == bytes {
                    return Ok(existing);
                }
                *collision_count += 1;
            }
            other => return other,
        }
    }
}

/// Sets a revision's number, re-reading it on conflicts (`UpdateControllerRevision`).
pub async fn update_revision_number(
    api: &Api<ControllerRevision>,
    revision: &ControllerRevision,
    number: i64,
) -> Result<ControllerRevision, kube::Error> {
    let mut clone = revision.clone();
    let name = clone.name_str().to_string();
    let mut attempts = 0;
    loop {
        if clone.revision == number {
            return Ok(clone);
        }
        clone.revision = number;
        match api.replace(&name, &PostParams::default(), &clone).await {
            Ok(updated) => return Ok(updated),
            Err(error) if is_conflict(&error) && attempts < 5 => {
                attempts += 1;
                clone = api.get(&name).await?;
            }
            Err(error) => return Err(error),
        }
    }
}

/// Deletes a revision; one already gone is fine.
pub async fn delete_revision(api: &Api<ControllerRevision>, name: &str) -> Result<(), kube::Error> {
    match api.delete(name, &Default::default()).await {
        Ok(_) => Ok(()),
        Err(error) if is_not_found(&error) => Ok(()),
        Err(error) => Err(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1_reference_vectors() {
        // Go: fnv.New32() of "", "a", "foobar".
        assert_eq!(fnv1_32(&[b""]), 0x811c_9dc5);
        assert_eq!(fnv1_32(&[b"a"]), 0x050c_5d7e);
        assert_eq!(fnv1_32(&[b"foobar"]), 0x31f0_b262);
        assert_eq!(fnv1_32(&[b"foo", b"bar"]), 0x31f0_b262);
    }

    #[test]
    fn hash_includes_the_collision_count_in_decimal() {
        let data = br#"{"spec":{}}"#;
        let plain = hash_revision(data, None);
        assert_eq!(plain, safe_encode_string(&fnv1_32(&[data]).to_string()));
        assert_eq!(
            hash_revision(data, Some(12)),
            safe_encode_string(&fnv1_32(&[data, b"12"]).to_string())
        );
        assert_ne!(
            hash_revision(data, Some(0)),
            plain,
            "a zero count still hashes \"0\""
        );
    }

    #[test]
    fn go_json_sorts_keys_and_escapes_like_go() {
        let value = json!({"b": 1, "a": {"z": [true, null], "y": "<a&b>\u{2028}\u{1}"}});
        assert_eq!(
            String::from_utf8(go_json(&value)).unwrap(),
            r#"{"a":{"y":"\u003ca\u0026b\u003e\u2028\u0001","z":[true,null]},"b":1}"#
        );
    }

    #[test]
    fn template_patch_matches_what_kcm_stores() {
        let template: PodTemplateSpec = serde_json::from_value(json!({
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "nginx", "image": "nginx:1.25",
                                     "ports": [{"containerPort": 80, "protocol": "TCP"}]}]}
        }))
        .unwrap();
        assert_eq!(
            String::from_utf8(go_json(&template_patch(&template))).unwrap(),
            concat!(
                r#"{"spec":{"template":{"$patch":"replace","metadata":{"creationTimestamp":null,"labels":{"app":"web"}},"#,
                r#""spec":{"containers":[{"image":"nginx:1.25","name":"nginx","ports":[{"containerPort":80,"protocol":"TCP"}],"resources":{}}]}}}}"#
            )
        );
    }

    #[test]
    fn an_api_server_defaulted_template_gives_the_bytes_and_name_kcm_would() {
        // spec.template of a StatefulSet as kube-apiserver v1.29.6 returns it (defaults
        // filled in), read through k8s-openapi as the worker reads it.
        let served = json!({"metadata": {"creationTimestamp": null, "labels": {"app": "db"}},
            "spec": {"containers": [{"name": "c", "image": "nginx:1", "resources": {},
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent"}],
                "restartPolicy": "Always", "terminationGracePeriodSeconds": 30,
                "dnsPolicy": "ClusterFirst", "securityContext": {},
                "schedulerName": "default-scheduler"}});
        let template: PodTemplateSpec = serde_json::from_value(served).unwrap();
        // What Go's json.Marshal writes for the map KCM builds from that object.
        let kcm = concat!(
            r#"{"spec":{"template":{"$patch":"replace","metadata":{"creationTimestamp":null,"labels":{"app":"db"}},"#,
            r#""spec":{"containers":[{"image":"nginx:1","imagePullPolicy":"IfNotPresent","name":"c","resources":{},"#,
            r#""terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File"}],"dnsPolicy":"ClusterFirst","#,
            r#""restartPolicy":"Always","schedulerName":"default-scheduler","securityContext":{},"terminationGracePeriodSeconds":30}}}}"#
        );
        let bytes = go_json(&template_patch(&template));
        assert_eq!(String::from_utf8(bytes.clone()).unwrap(), kcm);
        // FNV-1 of those bytes and the collision count "0", computed independently.
        assert_eq!(fnv1_32(&[&bytes, b"0"]), 9_747_241);
        assert_eq!(hash_revision(&bytes, Some(0)), "fc8c685");
    }

    #[test]
    fn revision_names_keep_the_hash_whole() {
        assert_eq!(revision_name("web", "abc"), "web-abc");
        let long = "x".repeat(300);
        assert_eq!(revision_name(&long, "h").len(), 225);
    }

    #[test]
    fn template_round_trips_through_a_revision() {
        let template: PodTemplateSpec = serde_json::from_value(json!({
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "i"}]}
        }))
        .unwrap();
        let owner = OwnerReference {
            name: "web".into(),
            ..OwnerReference::default()
        };
        let revision = new_revision(&owner, "ns", None, template_patch(&template), 3, None);
        let restored = template_of(&revision).unwrap();
        assert_eq!(go_template_value(&restored), go_template_value(&template));
        assert_eq!(
            revision.metadata.labels.unwrap()[CONTROLLER_REVISION_HASH_LABEL],
            hash_revision(&go_json(&template_patch(&template)), None)
        );
        assert!(revision.metadata.name.unwrap().starts_with("web-"));
    }

    #[test]
    fn sorting_is_by_number_then_age_then_name() {
        let rev = |name: &str, number: i64| {
            Arc::new(ControllerRevision {
                metadata: ObjectMeta {
                    name: Some(name.into()),
                    ..ObjectMeta::default()
                },
                revision: number,
                data: None,
            })
        };
        let mut revisions = vec![rev("c", 2), rev("b", 1), rev("a", 2)];
        sort_revisions(&mut revisions);
        let names: Vec<_> = revisions
            .iter()
            .map(|r| r.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(names, ["b", "a", "c"]);
        assert_eq!(next_revision(&revisions), 3);
        assert_eq!(next_revision(&[]), 1);
    }
}
