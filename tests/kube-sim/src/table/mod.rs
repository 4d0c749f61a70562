//! Server-side printing: the `meta.k8s.io/v1` `Table` that `kubectl get` asks for
//! (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io,...`).
//!
//! What kube-apiserver v1.29 answers, re-implemented over plain JSON objects:
//!
//! * built-in kinds that have a printer get its columns (name, type, format, priority,
//!   description) and its cells: JSON numbers where the printer emits integers, booleans where
//!   it emits booleans, strings otherwise (cell types follow the printer, not the column type;
//!   e.g. Deployment `Up-to-date` is declared `string` but carries a number);
//! * the server always prints "wide": priority-1 columns carry cells too and kubectl hides them
//!   unless `-o wide`;
//! * kinds without a printer (Role, ClusterRole, LimitRange, CustomResourceDefinition, ...) get
//!   the default `Name` / `Created At` table;
//! * custom resources get `Name` plus the CRD version's additionalPrinterColumns, evaluated with
//!   a JSONPath subset (`.a.b`, `[0]`, `[-1]`, `[*]`, `['key']`, `[?(@.type=="Ready")]`); a
//!   version without columns gets the default `Age` column, as apiextensions-apiserver does;
//! * `rows[].object` is absent, a `PartialObjectMetadata` or the full object.
//!
//! Objects may have any shape. A missing field reads as the value API defaulting would have
//! stored (Deployment replicas 1, Service type ClusterIP, PV reclaim policy Retain, ...) or as
//! the zero value; mistyped fields read as missing. Nothing here panics.

use chrono::{DateTime, Utc};
use serde_json::{json, Map, Value};

/// Column specs per kind, in upstream order. Descriptions are upstream's: its own words or the
/// field documentation of the API types (constants at the end of that file).
#[rustfmt::skip]
mod columns;
mod core_group;
mod custom;
mod fields;
mod networking;
mod other_groups;
mod workloads;
#[cfg(test)]
#[rustfmt::skip]
mod tests;

use columns::*;
use core_group::{
    configmap_row, event_row, events_v1_row, namespace_row, node_row, pv_row, pvc_row,
    resource_quota_row, secret_row, service_account_row,
};
use custom::{custom_cell, custom_columns, eval};
use fields::{at, name, s, st, time};
use networking::{
    endpoint_slice_row, endpoints_row, ingress_class_row, ingress_row, network_policy_row,
    service_row,
};
use other_groups::{
    admission_policy_binding_row, admission_policy_row, csr_row, hpa_row, lease_row,
    priority_class_row, role_binding_row, runtime_class_row, storage_class_row, webhooks_row,
};
use workloads::{
    controller_revision_row, cronjob_row, daemonset_row, deployment_row, job_row, pdb_row, pod_row,
    pod_template_row, rc_row, rs_row, statefulset_row,
};

/// What `rows[].object` holds (the `includeObject` query parameter).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum IncludeObject {
    /// No `object` in the rows.
    None,
    /// A `PartialObjectMetadata` carrying the object's whole `metadata` (the default).
    Metadata,
    /// The full object, as given.
    Object,
}

type Now = DateTime<Utc>;
type RowFn = fn(&Value, Now) -> Vec<Value>;

/// Build a meta.k8s.io/v1 Table for `items` (full objects of one `kind` of `group`), with `resource_version`
/// and optional `continue_token` in its list metadata. `include_headers` false leaves columnDefinitions empty
/// (used for every watch event after the first). `now` is the server's clock (for the Age column).
#[allow(clippy::too_many_arguments)]
pub fn to_table(
    group: &str,
    kind: &str,
    items: &[Value],
    include_headers: bool,
    include: IncludeObject,
    resource_version: &str,
    continue_token: Option<&str>,
    now: DateTime<Utc>,
) -> Value {
    let (cols, row) = printer(group, kind).unwrap_or((DEFAULT, default_row));
    let rows = items
        .iter()
        .map(|item| {
            make_row(
                row(item, now),
                pod_conditions(group, kind, item),
                item,
                include,
            )
        })
        .collect();
    let headers = include_headers.then(|| cols.iter().map(Col::to_json).collect());
    assemble(headers, rows, resource_version, continue_token)
}

/// Columns for a custom resource: name + additionalPrinterColumns (JSONPath subset: `.spec.x`, `.status.y[0].z`,
/// `[-1]`, `[*]`, `['k']`, `[?(@.type=="Ready")]`) from the CRD version, as apiextensions-apiserver does.
///
/// `printer_columns` is the version's `additionalPrinterColumns` array (null when absent), or the
/// CRD version object holding it. Age: an empty or missing list yields the single default `Age`
/// column (type `date`); that is the only case where apiextensions-apiserver adds Age itself, so a
/// CRD that lists columns shows exactly those (CRDs usually list `.metadata.creationTimestamp`).
/// Columns stop at the first JSONPath this subset cannot parse.
pub fn to_table_custom(
    printer_columns: &Value,
    items: &[Value],
    include_headers: bool,
    include: IncludeObject,
    resource_version: &str,
    continue_token: Option<&str>,
    now: DateTime<Utc>,
) -> Value {
    let (defs, cols) = custom_columns(printer_columns);
    let rows = items
        .iter()
        .map(|item| {
            let mut cells = vec![s(name(item))];
            cells.extend(
                cols.iter()
                    .map(|(ty, path)| custom_cell(ty, eval(item, path).first().copied(), now)),
            );
            make_row(cells, None, item, include)
        })
        .collect();
    assemble(
        include_headers.then_some(defs),
        rows,
        resource_version,
        continue_token,
    )
}

// ---------------------------------------------------------------------------------------------
// Table assembly

fn assemble(columns: Option<Vec<Value>>, rows: Vec<Value>, rv: &str, cont: Option<&str>) -> Value {
    let mut meta = Map::new();
    if !rv.is_empty() {
        meta.insert("resourceVersion".into(), s(rv));
    }
    if let Some(c) = cont.filter(|c| !c.is_empty()) {
        meta.insert("continue".into(), s(c));
    }
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": meta,
        "columnDefinitions": columns.unwrap_or_default(),
        "rows": rows,
    })
}

fn make_row(
    cells: Vec<Value>,
    conditions: Option<Value>,
    item: &Value,
    include: IncludeObject,
) -> Value {
    let mut row = Map::new();
    row.insert("cells".into(), Value::Array(cells));
    if let Some(c) = conditions {
        row.insert("conditions".into(), c);
    }
    match include {
        IncludeObject::None => {}
        IncludeObject::Metadata => {
            let meta = item.get("metadata").filter(|m| m.is_object()).cloned();
            row.insert(
                "object".into(),
                json!({
                    "kind": "PartialObjectMetadata",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": meta.unwrap_or_else(|| json!({})),
                }),
            );
        }
        IncludeObject::Object => {
            row.insert("object".into(), item.clone());
        }
    }
    Value::Object(row)
}

/// Succeeded and Failed pods carry a `Completed` row condition.
fn pod_conditions(group: &str, kind: &str, pod: &Value) -> Option<Value> {
    if (group, kind) != ("", "Pod") {
        return None;
    }
    let (reason, message) = match st(pod, "status.phase") {
        "Succeeded" => ("Succeeded", "The pod has completed successfully."),
        "Failed" => ("Failed", "The pod failed."),
        _ => return None,
    };
    Some(json!([{"type": "Completed", "status": "True", "reason": reason, "message": message}]))
}

// ---------------------------------------------------------------------------------------------
// Column specs

struct Col {
    name: &'static str,
    ty: &'static str,
    format: &'static str,
    desc: &'static str,
    priority: u8,
}

impl Col {
    fn to_json(&self) -> Value {
        json!({"name": self.name, "type": self.ty, "format": self.format,
               "description": self.desc, "priority": self.priority})
    }
}

const fn col(name: &'static str, ty: &'static str, desc: &'static str) -> Col {
    Col {
        name,
        ty,
        format: "",
        desc,
        priority: 0,
    }
}

const fn wide(name: &'static str, ty: &'static str, desc: &'static str) -> Col {
    Col {
        name,
        ty,
        format: "",
        desc,
        priority: 1,
    }
}

/// The printer registered for a group/kind; `None` means the default Name/Created At table.
fn printer(group: &str, kind: &str) -> Option<(&'static [Col], RowFn)> {
    let p: (&'static [Col], RowFn) = match (group, kind) {
        ("", "Pod") => (POD, pod_row),
        ("", "PodTemplate") => (POD_TEMPLATE, pod_template_row),
        ("", "ReplicationController") => (RC, rc_row),
        ("", "Service") => (SERVICE, service_row),
        ("", "Endpoints") => (ENDPOINTS, endpoints_row),
        ("", "Node") => (NODE, node_row),
        ("", "Event") => (EVENT, event_row),
        ("events.k8s.io", "Event") => (EVENT, events_v1_row),
        ("", "Namespace") => (NAMESPACE, namespace_row),
        ("", "Secret") => (SECRET, secret_row),
        ("", "ServiceAccount") => (SERVICE_ACCOUNT, service_account_row),
        ("", "PersistentVolume") => (PV, pv_row),
        ("", "PersistentVolumeClaim") => (PVC, pvc_row),
        ("", "ConfigMap") => (CONFIGMAP, configmap_row),
        ("", "ResourceQuota") => (RESOURCE_QUOTA, resource_quota_row),
        ("apps", "Deployment") => (DEPLOYMENT, deployment_row),
        ("apps", "ReplicaSet") => (RS, rs_row),
        ("apps", "StatefulSet") => (STATEFULSET, statefulset_row),
        ("apps", "DaemonSet") => (DS, daemonset_row),
        ("apps", "ControllerRevision") => (CONTROLLER_REVISION, controller_revision_row),
        ("batch", "Job") => (JOB, job_row),
        ("batch", "CronJob") => (CRONJOB, cronjob_row),
        ("policy", "PodDisruptionBudget") => (PDB, pdb_row),
        ("autoscaling", "HorizontalPodAutoscaler") => (HPA, hpa_row),
        ("networking.k8s.io", "Ingress") => (INGRESS, ingress_row),
        ("networking.k8s.io", "IngressClass") => (INGRESS_CLASS, ingress_class_row),
        ("networking.k8s.io", "NetworkPolicy") => (NETWORK_POLICY, network_policy_row),
        ("rbac.authorization.k8s.io", "RoleBinding") => (ROLE_BINDING, role_binding_row),
        ("rbac.authorization.k8s.io", "ClusterRoleBinding") => {
            (CLUSTER_ROLE_BINDING, role_binding_row)
        }
        ("certificates.k8s.io", "CertificateSigningRequest") => (CSR, csr_row),
        ("coordination.k8s.io", "Lease") => (LEASE, lease_row),
        ("storage.k8s.io", "StorageClass") => (STORAGE_CLASS, storage_class_row),
        ("scheduling.k8s.io", "PriorityClass") => (PRIORITY_CLASS, priority_class_row),
        ("node.k8s.io", "RuntimeClass") => (RUNTIME_CLASS, runtime_class_row),
        (
            "admissionregistration.k8s.io",
            "MutatingWebhookConfiguration" | "ValidatingWebhookConfiguration",
        ) => (WEBHOOKS, webhooks_row),
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy") => {
            (ADMISSION_POLICY, admission_policy_row)
        }
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding") => {
            (ADMISSION_POLICY_BINDING, admission_policy_binding_row)
        }
        ("discovery.k8s.io", "EndpointSlice") => (ENDPOINT_SLICE, endpoint_slice_row),
        _ => return None,
    };
    Some(p)
}

fn default_row(o: &Value, _now: Now) -> Vec<Value> {
    let created = time(at(o, "metadata.creationTimestamp")).map_or_else(
        || "0001-01-01T00:00:00Z".to_string(),
        |t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string(),
    );
    vec![s(name(o)), s(created)]
}
