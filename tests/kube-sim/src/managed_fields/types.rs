//! Types: how each field of a kind is walked (keyed lists, sets, atomic values, maps), and the
//! empty object of a kind as Go serialises it.

use super::schema;
use serde_json::{json, Value};

/// How a field's value is walked (read from the OpenAPI definitions, see [`schema`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Ty {
    /// A struct, by definition name (`Some`), or a value without a definition of its own
    /// (`None`: a scalar, or anything below it): a `null` there is nothing to own.
    Obj(Option<&'static str>),
    /// A map, or a value with no schema: keys are entries, lists below are atomic.
    Deduced,
    /// Owned as one leaf, whatever its shape.
    Atomic,
    /// A list keyed by these fields; elements of the given type.
    Keyed(&'static [&'static str], ElemTy),
    /// A list of scalars treated as a set.
    Set,
}

/// The element type of a keyed list.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ElemTy {
    Obj(Option<&'static str>),
    Atomic,
}

const TYPE: &[&str] = &["type"];
const CONDITIONS: Ty = Ty::Keyed(TYPE, ElemTy::Obj(None));

/// The root type of a kind's objects: its OpenAPI definition (see [`schema`]). Custom
/// resources are maps of what they hold; a kind of a `*.k8s.io` group without a definition (a
/// custom resource there) is an object with metadata and a status whose conditions are keyed
/// by type.
pub(super) fn root(group: &str, kind: &str) -> Ty {
    if group.contains('.') && !group.ends_with(".k8s.io") {
        return Ty::Deduced;
    }
    Ty::Obj(Some(schema::root(group, kind).unwrap_or(OBJECT)))
}

/// The stand-in for objects without a definition, and its status.
const OBJECT: &str = "meta.Object";
const STATUS: &str = "meta.Status";
const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

/// The type of field `name` of struct `t`; `None` for a field `t` does not have.
fn field(t: &str, name: &str) -> Option<Ty> {
    match (t, name) {
        (OBJECT, "metadata") => Some(Ty::Obj(Some(OBJECT_META))),
        (OBJECT, "status") => Some(Ty::Obj(Some(STATUS))),
        (STATUS, "conditions") => Some(CONDITIONS),
        (OBJECT | STATUS, _) => None,
        _ => schema::field(t, name),
    }
}

/// The type of `key` below a value of type `ty`.
pub(super) fn child(ty: Ty, key: &str) -> Ty {
    match ty {
        Ty::Obj(Some(t)) => field(t, key).unwrap_or(Ty::Obj(None)),
        Ty::Obj(None) => Ty::Obj(None),
        _ => Ty::Deduced,
    }
}

pub(super) fn elem(ty: Ty) -> Ty {
    match ty {
        Ty::Keyed(_, ElemTy::Obj(t)) => Ty::Obj(t),
        Ty::Keyed(_, ElemTy::Atomic) => Ty::Atomic,
        _ => Ty::Deduced,
    }
}

/// The empty object of a kind as Go serialises it: the "before" of a create. Only what a new
/// object can also hold matters; fields a kind lacks are harmless here.
pub fn zero_object(group: &str, version: &str, kind: &str) -> Value {
    let meta = json!({"creationTimestamp": null});
    let template = json!({"metadata": meta, "spec": {"containers": null}});
    let job_spec = json!({"template": template});
    let (spec, extra) = match (group, kind) {
        ("", "Pod") => (json!({"containers": null}), json!({})),
        ("", "PodTemplate") => (Value::Null, json!({"template": template})),
        ("", "ConfigMap" | "Secret" | "ServiceAccount" | "Endpoints") => (Value::Null, json!({})),
        ("", "Event") => (
            Value::Null,
            json!({"involvedObject": {}, "source": {}, "firstTimestamp": null,
                   "lastTimestamp": null, "eventTime": null, "reportingComponent": "",
                   "reportingInstance": ""}),
        ),
        ("", "PersistentVolumeClaim") => (json!({"resources": {}}), json!({})),
        ("", "LimitRange") => (json!({"limits": null}), json!({})),
        ("apps", "Deployment") => (
            json!({"selector": null, "template": template, "strategy": {}}),
            json!({}),
        ),
        ("apps", "ReplicaSet") => (json!({"selector": null, "template": template}), json!({})),
        ("apps", "StatefulSet") => (
            json!({"selector": null, "template": template, "serviceName": "",
                   "updateStrategy": {}}),
            json!({}),
        ),
        ("apps", "DaemonSet") => (
            json!({"selector": null, "template": template, "updateStrategy": {}}),
            json!({}),
        ),
        ("apps", "ControllerRevision") => (Value::Null, json!({"data": null, "revision": 0})),
        ("batch", "Job") => (job_spec.clone(), json!({})),
        ("batch", "CronJob") => (
            json!({"schedule": "", "jobTemplate": {"metadata": meta, "spec": job_spec}}),
            json!({}),
        ),
        ("autoscaling", "HorizontalPodAutoscaler") => (
            json!({"scaleTargetRef": {"kind": "", "name": ""}, "maxReplicas": 0}),
            json!({}),
        ),
        ("discovery.k8s.io", "EndpointSlice") => (
            Value::Null,
            json!({"addressType": "", "endpoints": null, "ports": null}),
        ),
        ("events.k8s.io", "Event") => (
            Value::Null,
            json!({"eventTime": null, "deprecatedSource": {}, "deprecatedFirstTimestamp": null,
                   "deprecatedLastTimestamp": null}),
        ),
        ("certificates.k8s.io", "CertificateSigningRequest") => {
            (json!({"request": null, "signerName": ""}), json!({}))
        }
        ("apiextensions.k8s.io", "CustomResourceDefinition") => (
            json!({"group": "", "names": {"plural": "", "kind": ""}, "scope": "",
                   "versions": null}),
            json!({}),
        ),
        ("rbac.authorization.k8s.io", "Role" | "ClusterRole") => {
            (Value::Null, json!({"rules": null}))
        }
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding") => (
            Value::Null,
            json!({"roleRef": {"apiGroup": "", "kind": "", "name": ""}}),
        ),
        ("scheduling.k8s.io", "PriorityClass") => (Value::Null, json!({"value": 0})),
        ("storage.k8s.io", "StorageClass") => (Value::Null, json!({"provisioner": ""})),
        ("networking.k8s.io", "NetworkPolicy") => (json!({"podSelector": {}}), json!({})),
        ("coordination.k8s.io", "Lease") => (json!({}), json!({})),
        (g, _) if g.contains('.') && !g.ends_with(".k8s.io") => {
            // A custom resource starts from nothing at all.
            return json!({"apiVersion": format!("{g}/{version}"), "kind": kind});
        }
        _ => (json!({}), json!({"status": {}})),
    };
    let mut obj = json!({"metadata": meta});
    if !spec.is_null() {
        obj["spec"] = spec;
    }
    if let (Some(o), Some(e)) = (obj.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            o.insert(k.clone(), v.clone());
        }
    }
    obj
}

/// What kube-apiserver's conversion to its internal types and back leaves on an object before
/// field ownership is worked out: a DaemonSet always carries its template generation
/// annotation (0 until the strategy sets it), so its writer owns that annotation.
pub fn as_converted(group: &str, kind: &str, obj: &Value) -> Option<Value> {
    const TEMPLATE_GENERATION: &str = "deprecated.daemonset.template.generation";
    if group != "apps"
        || kind != "DaemonSet"
        || !obj["metadata"]["annotations"][TEMPLATE_GENERATION].is_null()
    {
        return None;
    }
    let mut obj = obj.clone();
    let m = obj.get_mut("metadata")?.as_object_mut()?;
    let ann = m.entry("annotations").or_insert_with(|| json!({}));
    if !ann.is_object() {
        *ann = json!({});
    }
    ann[TEMPLATE_GENERATION] = json!("0");
    Some(obj)
}
