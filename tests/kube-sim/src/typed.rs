//! Decoding a request body as the served type, the way kube-apiserver's decoder does:
//! the JSON is read into the Kubernetes type (k8s-openapi), which rejects wrong field types
//! and drops fields the type does not have. The dropped fields are the "unknown fields" that
//! `fieldValidation=Strict` rejects and `Warn` reports in a `Warning` header.

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

/// The body decoded as its type: the object the server keeps (unknown fields dropped)
/// and the paths of the fields that were dropped, as upstream prints them (`spec.foo`).
pub struct Decoded {
    pub object: Value,
    pub unknown_fields: Vec<String>,
}

fn roundtrip<T: DeserializeOwned + Serialize>(v: &Value) -> Result<Value, String> {
    let t: T = serde_json::from_value(v.clone()).map_err(|e| e.to_string())?;
    serde_json::to_value(&t).map_err(|e| e.to_string())
}

macro_rules! typed {
    ($gvk:expr, $v:expr, { $( ($g:literal, $ver:literal, $k:literal) => $t:ty ),* $(,)? }) => {
        match $gvk {
            $( ($g, $ver, $k) => Some(roundtrip::<$t>($v)), )*
            _ => None,
        }
    };
}

/// Decode `body` as `group/version, kind`. `None` when kube-sim has no type for the kind
/// (custom resources): the body is then kept as sent.
pub fn decode(
    group: &str,
    version: &str,
    kind: &str,
    body: &Value,
) -> Option<Result<Decoded, String>> {
    use k8s_openapi::api::admissionregistration::v1beta1 as admreg_beta;
    use k8s_openapi::api::{
        apps::v1 as apps, autoscaling::v1 as as1, autoscaling::v2 as as2, batch::v1 as batch,
        certificates::v1 as certs, coordination::v1 as coord, core::v1 as core,
        discovery::v1 as disc, events::v1 as ev, networking::v1 as net, policy::v1 as policy,
        rbac::v1 as rbac, scheduling::v1 as sched, storage::v1 as storage,
    };
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiext;
    let out = typed!((group, version, kind), body, {
        ("", "v1", "Pod") => core::Pod,
        ("", "v1", "Node") => core::Node,
        ("", "v1", "Namespace") => core::Namespace,
        ("", "v1", "Service") => core::Service,
        ("", "v1", "Endpoints") => core::Endpoints,
        ("", "v1", "ConfigMap") => core::ConfigMap,
        ("", "v1", "Secret") => core::Secret,
        ("", "v1", "ServiceAccount") => core::ServiceAccount,
        ("", "v1", "Event") => core::Event,
        ("", "v1", "PersistentVolume") => core::PersistentVolume,
        ("", "v1", "PersistentVolumeClaim") => core::PersistentVolumeClaim,
        ("", "v1", "ReplicationController") => core::ReplicationController,
        ("", "v1", "ResourceQuota") => core::ResourceQuota,
        ("", "v1", "LimitRange") => core::LimitRange,
        ("", "v1", "PodTemplate") => core::PodTemplate,
        ("apps", "v1", "Deployment") => apps::Deployment,
        ("apps", "v1", "ReplicaSet") => apps::ReplicaSet,
        ("apps", "v1", "StatefulSet") => apps::StatefulSet,
        ("apps", "v1", "DaemonSet") => apps::DaemonSet,
        ("apps", "v1", "ControllerRevision") => apps::ControllerRevision,
        ("batch", "v1", "Job") => batch::Job,
        ("batch", "v1", "CronJob") => batch::CronJob,
        ("policy", "v1", "PodDisruptionBudget") => policy::PodDisruptionBudget,
        ("discovery.k8s.io", "v1", "EndpointSlice") => disc::EndpointSlice,
        ("coordination.k8s.io", "v1", "Lease") => coord::Lease,
        ("events.k8s.io", "v1", "Event") => ev::Event,
        ("rbac.authorization.k8s.io", "v1", "Role") => rbac::Role,
        ("rbac.authorization.k8s.io", "v1", "ClusterRole") => rbac::ClusterRole,
        ("rbac.authorization.k8s.io", "v1", "RoleBinding") => rbac::RoleBinding,
        ("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding") => rbac::ClusterRoleBinding,
        ("certificates.k8s.io", "v1", "CertificateSigningRequest") => certs::CertificateSigningRequest,
        ("autoscaling", "v1", "HorizontalPodAutoscaler") => as1::HorizontalPodAutoscaler,
        ("autoscaling", "v2", "HorizontalPodAutoscaler") => as2::HorizontalPodAutoscaler,
        ("storage.k8s.io", "v1", "StorageClass") => storage::StorageClass,
        ("storage.k8s.io", "v1", "VolumeAttachment") => storage::VolumeAttachment,
        ("storage.k8s.io", "v1", "CSINode") => storage::CSINode,
        ("storage.k8s.io", "v1", "CSIDriver") => storage::CSIDriver,
        ("networking.k8s.io", "v1", "Ingress") => net::Ingress,
        ("networking.k8s.io", "v1", "NetworkPolicy") => net::NetworkPolicy,
        ("scheduling.k8s.io", "v1", "PriorityClass") => sched::PriorityClass,
        ("apiextensions.k8s.io", "v1", "CustomResourceDefinition") => apiext::CustomResourceDefinition,
        ("admissionregistration.k8s.io", "v1beta1", "ValidatingAdmissionPolicy") => admreg_beta::ValidatingAdmissionPolicy,
        ("admissionregistration.k8s.io", "v1beta1", "ValidatingAdmissionPolicyBinding") => admreg_beta::ValidatingAdmissionPolicyBinding,
    })?;
    Some(out.map(|mut object| {
        let mut unknown_fields = Vec::new();
        dropped_fields(body, &object, "", &mut unknown_fields);
        if (group, kind) == ("", "Pod") {
            crate::dra::restore_pod_claims(body, &mut object, &mut unknown_fields);
        }
        Decoded {
            object: restore_nulls(body, object),
            unknown_fields,
        }
    }))
}

/// Fields present in `sent` (non-null) but absent from `kept`.
fn dropped_fields(sent: &Value, kept: &Value, path: &str, out: &mut Vec<String>) {
    match (sent, kept) {
        (Value::Object(s), Value::Object(k)) => {
            for (name, sv) in s {
                let p = if path.is_empty() {
                    name.clone()
                } else {
                    format!("{path}.{name}")
                };
                match k.get(name) {
                    Some(kv) => dropped_fields(sv, kv, &p, out),
                    None if !sv.is_null() && !is_empty_container(sv) => out.push(p),
                    None => {}
                }
            }
        }
        (Value::Array(s), Value::Array(k)) => {
            for (i, (sv, kv)) in s.iter().zip(k.iter()).enumerate() {
                dropped_fields(sv, kv, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

fn is_empty_container(v: &Value) -> bool {
    match v {
        Value::Object(m) => {
            m.is_empty() || m.values().all(|x| x.is_null() || is_empty_container(x))
        }
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

/// The typed round trip omits empty optional structs that the client sent explicitly
/// (`resources: {}`, `securityContext: {}`); kube-apiserver keeps those, so put them back.
fn restore_nulls(sent: &Value, mut kept: Value) -> Value {
    fn walk(sent: &Value, kept: &mut Value) {
        if let (Value::Object(s), Value::Object(k)) = (sent, &mut *kept) {
            for (name, sv) in s {
                match k.get_mut(name) {
                    Some(kv) => walk(sv, kv),
                    None => {
                        if matches!(sv, Value::Object(m) if m.is_empty()) {
                            k.insert(name.clone(), sv.clone());
                        }
                    }
                }
            }
        } else if let (Value::Array(s), Value::Array(k)) = (sent, kept) {
            for (sv, kv) in s.iter().zip(k.iter_mut()) {
                walk(sv, kv);
            }
        }
    }
    walk(sent, &mut kept);
    kept
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_fields_are_found_and_dropped() {
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "bogus": 1,
                          "data": {"a": "b"}});
        let d = decode("", "v1", "ConfigMap", &body).unwrap().unwrap();
        assert_eq!(d.unknown_fields, vec!["bogus"]);
        assert!(d.object.get("bogus").is_none());
        assert_eq!(d.object["data"]["a"], "b");
    }

    #[test]
    fn nested_unknown_fields_have_paths_and_empty_structs_survive() {
        let body = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "i", "resources": {}, "colour": "red"}]}});
        let d = decode("", "v1", "Pod", &body).unwrap().unwrap();
        assert_eq!(d.unknown_fields, vec!["spec.containers[0].colour"]);
        assert_eq!(d.object["spec"]["containers"][0]["resources"], json!({}));
    }

    #[test]
    fn wrong_field_types_are_errors() {
        let body = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                          "spec": {"replicas": "three"}});
        assert!(decode("apps", "v1", "Deployment", &body).unwrap().is_err());
    }
}
