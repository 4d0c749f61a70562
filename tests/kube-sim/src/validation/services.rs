//! Services: ports, types, IP families and the update rules.

use super::formats::{is_dns1123_label, is_valid_port_name, is_valid_port_num};
use super::helpers::{
    arr, child, go_string_slice, idx, int_of, obj, q, scalar_string, str_of, Errs,
};
use super::meta::validate_labels;
use super::pods::validate_protocol;
use super::{endpoints, is_dns1123_subdomain, FieldCause};
use serde_json::Value;
use std::collections::HashSet;

/// The key upstream compares ports by: a ServicePort holding only protocol and port.
fn go_service_port(p: &Value) -> String {
    let key = serde_json::json!({
        "protocol": str_of(p.get("protocol")),
        "port": int_of(p.get("port")).unwrap_or(0),
    });
    crate::go_value::go_syntax("core.ServicePort", Some(&key))
}

pub(super) fn validate_service(e: &mut Errs, o: &Value) {
    let spec = o.get("spec").filter(|s| s.is_object());
    let get = |k: &str| spec.and_then(|s| s.get(k));
    let ty = match str_of(get("type")) {
        "" => "ClusterIP",
        t => t,
    };
    let headless = str_of(get("clusterIP")) == "None";
    let ports = arr(get("ports"));
    if ports.is_empty() && !headless && ty != "ExternalName" {
        e.required("spec.ports", "");
    }
    match ty {
        "LoadBalancer" | "NodePort" => {
            // The kubelet-port check comes first, then the headless one.
            if ty == "LoadBalancer" {
                for (i, p) in ports.iter().enumerate() {
                    if int_of(p.get("port")) == Some(10250) {
                        e.invalid(
                            &idx("spec.ports", i),
                            "10250",
                            "may not expose port 10250 externally since it is used by kubelet",
                        );
                    }
                }
            }
            if headless {
                e.invalid(
                    "spec.clusterIPs[0]",
                    &q("None"),
                    &format!("may not be set to 'None' for {ty} services"),
                );
            }
        }
        "ExternalName" => {
            let ips = arr(get("clusterIPs"));
            if !ips.is_empty() || !str_of(get("clusterIP")).is_empty() {
                e.forbidden(
                    "spec.clusterIPs",
                    "may not be set for ExternalName services",
                );
            }
            let cname = str_of(get("externalName"));
            let cname = cname.strip_suffix('.').unwrap_or(cname);
            if cname.is_empty() {
                e.required("spec.externalName", "");
            } else {
                e.invalid_msgs("spec.externalName", cname, is_dns1123_subdomain(cname));
            }
        }
        _ => {}
    }
    let mut names = HashSet::new();
    for (i, p) in ports.iter().enumerate() {
        let pp = idx("spec.ports", i);
        let name = str_of(p.get("name"));
        if ports.len() > 1 && name.is_empty() {
            e.required(&child(&pp, "name"), "");
        } else if !name.is_empty() {
            e.invalid_msgs(&child(&pp, "name"), name, is_dns1123_label(name));
            if !names.insert(name.to_string()) {
                e.duplicate(&child(&pp, "name"), &q(name));
            }
        }
        let port = int_of(p.get("port")).unwrap_or(0);
        for m in is_valid_port_num(port) {
            e.invalid(&child(&pp, "port"), &port.to_string(), &m);
        }
        validate_protocol(e, p.get("protocol"), &child(&pp, "protocol"));
        match p.get("targetPort") {
            Some(Value::String(s)) => {
                e.invalid_msgs(&child(&pp, "targetPort"), s, is_valid_port_name(s))
            }
            Some(n @ Value::Number(_)) => {
                let n = int_of(Some(n)).unwrap_or(0);
                for m in is_valid_port_num(n) {
                    e.invalid(&child(&pp, "targetPort"), &n.to_string(), &m);
                }
            }
            _ => {}
        }
    }
    validate_labels(e, get("selector"), "spec.selector");
    let sa = str_of(get("sessionAffinity"));
    if !sa.is_empty() && !matches!(sa, "ClientIP" | "None") {
        e.not_supported("spec.sessionAffinity", &q(sa), &["ClientIP", "None"]);
    }
    if !str_of(get("type")).is_empty()
        && !matches!(
            ty,
            "ClusterIP" | "ExternalName" | "LoadBalancer" | "NodePort"
        )
    {
        e.not_supported(
            "spec.type",
            &q(ty),
            &["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"],
        );
    }
    if ty == "ClusterIP" {
        for (i, p) in ports.iter().enumerate() {
            if int_of(p.get("nodePort")).is_some_and(|n| n != 0) {
                e.forbidden(
                    &format!("spec.ports[{i}].nodePort"),
                    "may not be used when `type` is 'ClusterIP'",
                );
            }
        }
    }
    // A node port may be used once per protocol.
    let mut node_ports = HashSet::new();
    for (i, p) in ports.iter().enumerate() {
        let Some(np) = int_of(p.get("nodePort")).filter(|n| *n != 0) else {
            continue;
        };
        if !node_ports.insert((str_of(p.get("protocol")).to_string(), np)) {
            e.duplicate(&child(&idx("spec.ports", i), "nodePort"), &np.to_string());
        }
    }
    let mut seen = HashSet::new();
    for (i, p) in ports.iter().enumerate() {
        let proto = match str_of(p.get("protocol")) {
            "" => "TCP",
            s => s,
        };
        if !seen.insert((proto.to_string(), int_of(p.get("port")).unwrap_or(0))) {
            e.duplicate(&idx("spec.ports", i), &go_service_port(p));
        }
    }
}

/// The service REST storage's checks of `clusterIPs`, `ipFamilies` and `ipFamilyPolicy`
/// before it allocates (`ValidateServiceClusterIPsRelatedFields`, then `initIPFamilyFields`)
/// on create, for kube-sim's single-stack IPv4 cluster. `o` is the defaulted Service as
/// the client sent it, before the storage fills in families and IPs.
pub fn service_ip_family_errors(o: &Value) -> Vec<FieldCause> {
    let spec = o.get("spec");
    if str_of(spec.and_then(|s| s.get("type"))) == "ExternalName" {
        return Vec::new();
    }
    let mut f = ServiceIpFields::read(spec);
    let mut e = Errs::default();
    cluster_ips_related_errors(&f, &mut e);
    if e.0.is_empty() {
        init_ip_family_errors(&mut f, &mut e);
    }
    e.0
}

/// The IP-related fields of a Service's spec as the create checks read them.
struct ServiceIpFields<'a> {
    /// `clusterIP` as sent.
    cluster_ip: &'a str,
    /// `clusterIPs`, or `clusterIP` alone when the plural field is empty.
    ips: Vec<String>,
    /// `ips` as Go's `%#v` prints a `[]string`.
    ips_go: String,
    /// `ipFamilies` as sent (completed from the IPs by `initIPFamilyFields`).
    families: Vec<String>,
    /// `ipFamilyPolicy` as sent.
    policy_set: Option<&'a str>,
    /// The policy in force: as sent, or its default.
    policy: String,
    headless: bool,
    selectorless: bool,
}

impl<'a> ServiceIpFields<'a> {
    fn read(spec: Option<&'a Value>) -> Self {
        let get = |k: &str| spec.and_then(|s| s.get(k));
        let cluster_ip = str_of(get("clusterIP"));
        let mut ips: Vec<String> = arr(get("clusterIPs")).iter().map(scalar_string).collect();
        if ips.is_empty() && !cluster_ip.is_empty() {
            ips.push(cluster_ip.to_string());
        }
        let ips_value = Value::Array(ips.iter().map(|ip| Value::String(ip.clone())).collect());
        let ips_go = go_string_slice(Some(&ips_value));
        let families: Vec<String> = arr(get("ipFamilies")).iter().map(scalar_string).collect();
        let headless = ips.first().map(String::as_str) == Some("None");
        let selectorless = obj(get("selector")).is_none_or(|m| m.is_empty());
        let policy_set = get("ipFamilyPolicy").and_then(Value::as_str);
        let policy = match policy_set {
            Some(p) => p.to_string(),
            None if headless && selectorless => "RequireDualStack".into(),
            None => "SingleStack".into(),
        };
        ServiceIpFields {
            cluster_ip,
            ips,
            ips_go,
            families,
            policy_set,
            policy,
            headless,
            selectorless,
        }
    }
}

/// Whether a (sloppily parsed) IP is an IPv6 address.
fn is_v6(ip: &str) -> bool {
    matches!(
        endpoints::parse_ip_sloppy(ip),
        Some(std::net::IpAddr::V6(_))
    )
}

/// `ValidateServiceClusterIPsRelatedFields` on create: the IPs against `clusterIP`, the
/// families and policy against their enums, each IP's syntax and family.
fn cluster_ips_related_errors(f: &ServiceIpFields, e: &mut Errs) {
    const FAMILIES: &[&str] = &["IPv4", "IPv6"];
    const POLICIES: &[&str] = &["PreferDualStack", "RequireDualStack", "SingleStack"];
    let (ips, ips_go) = (&f.ips, f.ips_go.as_str());
    if f.cluster_ip.is_empty() {
        // On create the plural field is filled from the singular one, never the reverse.
        if !ips.is_empty() {
            e.invalid(
                "spec.clusterIPs",
                ips_go,
                "must be empty when `clusterIP` is not specified",
            );
        }
    } else if ips.first().map(String::as_str) != Some(f.cluster_ip) {
        e.invalid(
            "spec.clusterIPs",
            ips_go,
            "first value must match `clusterIP`",
        );
    }
    let mut seen = HashSet::new();
    for (i, fam) in f.families.iter().enumerate() {
        if !FAMILIES.contains(&fam.as_str()) {
            e.not_supported(&idx("spec.ipFamilies", i), &q(fam), FAMILIES);
        }
        if !seen.insert(fam.clone()) {
            e.duplicate(&idx("spec.ipFamilies", i), &q(fam));
        }
    }
    if let Some(p) = f.policy_set.filter(|p| !POLICIES.contains(p)) {
        e.not_supported("spec.ipFamilyPolicy", &q(p), POLICIES);
    }
    let mut bad_ips = false;
    for (i, ip) in ips.iter().enumerate() {
        if i == 0 && ip == "None" {
            if ips.len() > 1 {
                bad_ips = true;
                e.invalid(
                    "spec.clusterIPs",
                    ips_go,
                    "'None' must be the first and only value",
                );
            }
            continue;
        }
        let msgs = endpoints::is_valid_ip(ip);
        bad_ips |= !msgs.is_empty();
        e.invalid_msgs(&idx("spec.clusterIPs", i), ip, msgs);
    }
    if ips.len() > 2 {
        e.invalid("spec.clusterIPs", ips_go, "may only hold up to 2 values");
    }
    if bad_ips {
        return;
    }
    if ips.len() > 1 && is_v6(&ips[0]) == is_v6(&ips[1]) {
        e.invalid(
            "spec.clusterIPs",
            ips_go,
            "may specify no more than one IP for each IP family",
        );
    }
    if !f.headless {
        for (i, (ip, family)) in ips.iter().zip(&f.families).enumerate() {
            let want_v6 = match family.as_str() {
                "IPv4" => false,
                "IPv6" => true,
                _ => continue,
            };
            if want_v6 != is_v6(ip) {
                e.invalid(
                    &idx("spec.clusterIPs", i),
                    &q(ip),
                    &format!("expected an {family} value as indicated by `ipFamilies[{i}]`"),
                );
            }
        }
    }
}

/// `initIPFamilyFields` on kube-sim's single-stack IPv4 cluster: the policy against the
/// number of IPs and families, the families completed from the IPs, then what this
/// cluster cannot serve.
fn init_ip_family_errors(f: &mut ServiceIpFields, e: &mut Errs) {
    let policy = f.policy.as_str();
    if policy == "SingleStack" {
        if f.ips.len() == 2 {
            e.invalid(
                "spec.ipFamilyPolicy",
                &q(policy),
                "must be 'RequireDualStack' or 'PreferDualStack' when multiple cluster IPs are specified",
            );
        }
        if f.families.len() == 2 {
            e.invalid(
                "spec.ipFamilyPolicy",
                &q(policy),
                "must be 'RequireDualStack' or 'PreferDualStack' when multiple IP families are specified",
            );
        }
    }
    for (i, ip) in f.ips.iter().enumerate() {
        if ip == "None" {
            break;
        }
        let family = if is_v6(ip) { "IPv6" } else { "IPv4" };
        if i >= f.families.len() {
            if family == "IPv6" {
                e.invalid(
                    &idx("spec.clusterIPs", i),
                    &f.ips_go,
                    "IPv6 is not configured on this cluster",
                );
            } else {
                f.families.push(family.to_string());
            }
        }
    }
    if !e.0.is_empty() || (f.headless && f.selectorless) {
        return;
    }
    if policy == "RequireDualStack" {
        e.invalid(
            "spec.ipFamilyPolicy",
            &q(policy),
            "this cluster is not configured for dual-stack services",
        );
    }
    for (i, fam) in f.families.iter().enumerate() {
        if fam != "IPv4" {
            e.invalid(
                &idx("spec.ipFamilies", i),
                &q(fam),
                "not configured on this cluster",
            );
        }
    }
}

fn service_primary_ip(spec: Option<&Value>) -> Option<String> {
    let spec = spec?;
    let ip = str_of(spec.get("clusterIP"));
    if !ip.is_empty() {
        return Some(ip.to_string());
    }
    arr(spec.get("clusterIPs"))
        .first()
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(String::from)
}

pub(super) fn validate_service_update(e: &mut Errs, new: &Value, old: &Value) {
    let ty = |o: &Value| str_of(o.get("spec").and_then(|s| s.get("type"))).to_string();
    if ty(new) == "ExternalName" || ty(old) == "ExternalName" {
        return;
    }
    match (
        service_primary_ip(new.get("spec")),
        service_primary_ip(old.get("spec")),
    ) {
        (Some(n), Some(o)) if n != o => {
            // A changed clusterIP replaces the list (upstream normalises clusterIPs from it).
            let mut ips: Vec<Value> =
                arr(new.get("spec").and_then(|s| s.get("clusterIPs"))).to_vec();
            if ips.first().and_then(Value::as_str) != Some(n.as_str()) {
                ips = vec![Value::String(n)];
            }
            e.invalid(
                "spec.clusterIPs[0]",
                &go_string_slice(Some(&Value::Array(ips))),
                "may not change once set",
            );
        }
        _ => {}
    }
}
