//! Validation of the alpha kinds served only when `--runtime-config` enables them
//! (`crate::gated_apis`): `networking.k8s.io/v1alpha1` ServiceCIDR and IPAddress
//! (upstream `pkg/apis/networking/validation`) and `internal.apiserver.k8s.io/v1alpha1`
//! StorageVersion (`pkg/apis/apiserverinternal/validation`).
//!
//! Left out: the apiVersion syntax checks of a StorageVersion's encoding, decodable and
//! served versions (only their relations are checked).

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use serde_json::Value;

use super::{
    arr, go_string_slice, is_dns1035_label, is_dns1123_subdomain, is_path_segment_name, q, sem_eq,
    str_of, Errs,
};

/// Go's `netip.ParseAddr` error for a string that is no address (the message for the
/// common case; Go words a few malformed literals more precisely).
fn parse_addr_error(s: &str) -> String {
    if s.is_empty() {
        return "ParseAddr(\"\"): unable to parse IP".to_string();
    }
    format!("ParseAddr({}): unable to parse IP", q(s))
}

/// `ValidateIPAddressName`: a canonical IP address.
pub(super) fn ip_address_name_errors(name: &str) -> Vec<String> {
    match name.parse::<IpAddr>() {
        Err(_) => vec![parse_addr_error(name)],
        Ok(ip) if ip.to_string() != name => vec!["must be a canonical format IP address".into()],
        Ok(_) => Vec::new(),
    }
}

/// `ValidateStorageVersionName`: `<group>.<resource>`.
pub(super) fn storage_version_name_errors(name: &str) -> Vec<String> {
    let Some(idx) = name.rfind('.') else {
        return vec!["name must be in the form of <group>.<resource>".into()];
    };
    let mut errs: Vec<String> = is_dns1123_subdomain(&name[..idx])
        .into_iter()
        .map(|m| format!("the group segment {m}"))
        .collect();
    errs.extend(
        is_dns1035_label(&name[idx + 1..])
            .into_iter()
            .map(|m| format!("the resource segment {m}")),
    );
    errs
}

/// A parsed CIDR `addr/bits`, as Go's `netip.ParsePrefix` takes it.
pub(crate) fn parse_prefix(s: &str) -> Result<(IpAddr, u8), String> {
    let head = format!("netip.ParsePrefix({})", q(s));
    let Some((addr, bits)) = s.rsplit_once('/') else {
        return Err(format!("{head}: no '/'"));
    };
    let ip: IpAddr = addr
        .parse()
        .map_err(|_| format!("{head}: {}", parse_addr_error(addr)))?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    let bits: u8 = match bits.parse::<u8>() {
        Ok(b) if !bits.starts_with('+') && (bits == "0" || !bits.starts_with('0')) => b,
        _ => return Err(format!("{head}: bad bits after slash: {}", q(bits))),
    };
    if bits > max {
        return Err(format!("{head}: prefix length out of range"));
    }
    Ok((ip, bits))
}

/// The network address of `ip/bits`.
pub(crate) fn masked(ip: IpAddr, bits: u8) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => {
            let mask = if bits == 0 {
                0
            } else {
                u32::MAX << (32 - u32::from(bits))
            };
            IpAddr::V4((u32::from(v4) & mask).into())
        }
        IpAddr::V6(v6) => {
            let mask = if bits == 0 {
                0
            } else {
                u128::MAX << (128 - u32::from(bits))
            };
            IpAddr::V6((u128::from(v6) & mask).into())
        }
    }
}

fn validate_cidr(e: &mut Errs, cidr: &str, field: &str) {
    match parse_prefix(cidr) {
        Err(msg) => e.invalid(field, &q(cidr), &msg),
        Ok((ip, bits)) => {
            if masked(ip, bits) != ip {
                e.invalid(
                    field,
                    &q(cidr),
                    "wrong CIDR format, IP doesn't match network IP address",
                );
            }
            if format!("{ip}/{bits}") != cidr {
                e.invalid(field, &q(cidr), "CIDR not in RFC 5952 canonical format");
            }
        }
    }
}

/// Go's `%#v` of a ServiceCIDRSpec, as a field error prints it.
fn go_spec(cidrs: &[Value]) -> String {
    let items: Vec<String> = cidrs.iter().map(|c| q(c.as_str().unwrap_or(""))).collect();
    format!(
        "networking.ServiceCIDRSpec{{CIDRs:[]string{{{}}}}}",
        items.join(", ")
    )
}

/// Go's `%#v` of a ParentReference (a nil one prints as `null`).
fn go_parent(parent: Option<&Value>) -> String {
    match parent.filter(|p| p.is_object()) {
        None => "null".into(),
        Some(p) => format!(
            "networking.ParentReference{{Group:{}, Resource:{}, Namespace:{}, Name:{}}}",
            q(str_of(p.get("group"))),
            q(str_of(p.get("resource"))),
            q(str_of(p.get("namespace"))),
            q(str_of(p.get("name")))
        ),
    }
}

/// `ValidateServiceCIDR` and, on update, the immutability of `spec.cidrs`.
pub(super) fn validate_service_cidr(e: &mut Errs, obj: &Value, old: Option<&Value>) {
    let cidrs = arr(obj.get("spec").and_then(|s| s.get("cidrs")));
    if let Some(old) = old {
        let before = old.get("spec").and_then(|s| s.get("cidrs"));
        let now = obj.get("spec").and_then(|s| s.get("cidrs"));
        if !sem_eq(now, before) {
            e.invalid("spec.cidrs", &go_string_slice(now), "field is immutable");
        }
        return;
    }
    let field = "spec.cidrs";
    if cidrs.is_empty() {
        e.required(field, "at least one CIDR required");
        return;
    }
    if cidrs.len() > 2 {
        e.invalid(field, &go_spec(cidrs), "may only hold up to 2 values");
        return;
    }
    if cidrs.len() == 2 {
        let families: Vec<Option<bool>> = cidrs
            .iter()
            .map(|c| {
                parse_prefix(c.as_str().unwrap_or(""))
                    .ok()
                    .map(|(ip, _)| ip.is_ipv4())
            })
            .collect();
        let dual = matches!(families.as_slice(), [Some(a), Some(b)] if a != b);
        if !dual {
            e.invalid(
                field,
                &go_spec(cidrs),
                "may specify no more than one IP for each IP family, i.e 192.168.0.0/24 and 2001:db8::/64",
            );
            return;
        }
    }
    for (i, cidr) in cidrs.iter().enumerate() {
        validate_cidr(e, cidr.as_str().unwrap_or(""), &format!("{field}[{i}]"));
    }
}

/// `ValidateIPAddress` (its parent reference) and, on update, the reference's immutability.
pub(super) fn validate_ip_address(e: &mut Errs, obj: &Value, old: Option<&Value>) {
    let parent = obj.get("spec").and_then(|s| s.get("parentRef"));
    if let Some(old) = old {
        let before = old.get("spec").and_then(|s| s.get("parentRef"));
        if !sem_eq(parent, before) {
            e.invalid("spec.parentRef", &go_parent(parent), "field is immutable");
        }
        return;
    }
    let Some(parent) = parent.filter(|p| p.is_object()) else {
        e.required("spec.parentRef", "");
        return;
    };
    let path = "spec.parentRef";
    let group = str_of(parent.get("group"));
    if !group.is_empty() {
        for msg in is_dns1123_subdomain(group) {
            e.invalid(&format!("{path}.group"), &q(group), &msg);
        }
    }
    for (key, required) in [("resource", true), ("name", true), ("namespace", false)] {
        let value = str_of(parent.get(key));
        if value.is_empty() {
            if required {
                e.required(&format!("{path}.{key}"), "");
            }
            continue;
        }
        for msg in is_path_segment_name(value) {
            e.invalid(&format!("{path}.{key}"), &q(value), &msg);
        }
    }
}

/// `validateStorageVersionStatus`: unique server ids, each server's encoding version among
/// its decodable ones and its served ones too, the common encoding version consistent with
/// the servers', conditions unique with a reason and a message.
pub(super) fn validate_storage_version(e: &mut Errs, obj: &Value) {
    let status = obj.get("status");
    let servers = arr(status.and_then(|s| s.get("storageVersions")));
    let mut ids = BTreeSet::new();
    for (i, server) in servers.iter().enumerate() {
        let path = format!("status.storageVersions[{i}]");
        let id = str_of(server.get("apiServerID"));
        if !ids.insert(id) {
            e.duplicate(&format!("{path}.apiServerID"), &q(id));
        }
        for msg in is_dns1123_subdomain(id) {
            e.invalid(&format!("{path}.apiServerID"), &q(id), &msg);
        }
        let encoding = str_of(server.get("encodingVersion"));
        let decodable: Vec<&str> = arr(server.get("decodableVersions"))
            .iter()
            .map(|v| v.as_str().unwrap_or(""))
            .collect();
        let listed = format!("[{}]", decodable.join(" "));
        if !decodable.contains(&encoding) {
            e.invalid(
                &format!("{path}.decodableVersions"),
                &listed,
                &format!("decodableVersions must include encodingVersion {encoding}"),
            );
        }
        for (j, served) in arr(server.get("servedVersions")).iter().enumerate() {
            let served = served.as_str().unwrap_or("");
            if !decodable.contains(&served) {
                e.invalid(
                    &format!("{path}.servedVersions[{j}]"),
                    &q(served),
                    &format!(
                        "individual served version : {served} must be included in decodableVersions : {listed}"
                    ),
                );
            }
        }
    }
    validate_common_version(e, status, servers);
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, condition) in arr(status.and_then(|s| s.get("conditions")))
        .iter()
        .enumerate()
    {
        let kind = str_of(condition.get("type"));
        if let Some(first) = seen.insert(kind, i) {
            e.invalid(
                &format!("status[{i}].type"),
                &q(kind),
                &format!("the type of the condition is not unique, it also appears in conditions[{first}]"),
            );
        }
        if str_of(condition.get("reason")).is_empty() {
            e.required(&format!("status[{i}].reason"), "reason cannot be empty");
        }
        if str_of(condition.get("message")).is_empty() {
            e.required(&format!("status[{i}].message"), "message cannot be empty");
        }
    }
}

/// The encoding version every server agrees on, if they agree and there is one.
fn common_version(servers: &[Value]) -> Option<&str> {
    let first = str_of(servers.first()?.get("encodingVersion"));
    servers
        .iter()
        .all(|s| str_of(s.get("encodingVersion")) == first)
        .then_some(first)
}

fn validate_common_version(e: &mut Errs, status: Option<&Value>, servers: &[Value]) {
    let field = "status.commonEncodingVersion";
    let actual = common_version(servers);
    let stated = status
        .and_then(|s| s.get("commonEncodingVersion"))
        .and_then(Value::as_str);
    match (actual, stated) {
        (None, Some(stated)) => e.invalid(
            field,
            &q(stated),
            "should be nil if servers do not agree on the same encoding version, or if there is no server reporting the supported versions yet",
        ),
        (Some(actual), None) => e.invalid(
            field,
            "null",
            &format!("the common encoding version is {actual}"),
        ),
        (Some(actual), Some(stated)) if actual != stated => e.invalid(
            field,
            &q(stated),
            &format!("the actual common encoding version is {actual}"),
        ),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn errors(run: impl FnOnce(&mut Errs)) -> Vec<String> {
        let mut e = Errs::default();
        run(&mut e);
        e.0.into_iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect()
    }

    #[test]
    fn service_cidrs_are_checked_as_upstream_does() {
        let cases: &[(Value, &[&str])] = &[
            (json!({"spec": {"cidrs": ["10.0.0.0/24"]}}), &[]),
            (json!({"spec": {"cidrs": ["10.0.0.0/24", "fd00::/64"]}}), &[]),
            (json!({"spec": {}}), &["spec.cidrs: Required value: at least one CIDR required"]),
            (
                json!({"spec": {"cidrs": ["10.0.0.0/24", "10.1.0.0/24"]}}),
                &["spec.cidrs: Invalid value: networking.ServiceCIDRSpec{CIDRs:[]string{\"10.0.0.0/24\", \"10.1.0.0/24\"}}: may specify no more than one IP for each IP family, i.e 192.168.0.0/24 and 2001:db8::/64"],
            ),
            (
                json!({"spec": {"cidrs": ["a", "b", "c"]}}),
                &["spec.cidrs: Invalid value: networking.ServiceCIDRSpec{CIDRs:[]string{\"a\", \"b\", \"c\"}}: may only hold up to 2 values"],
            ),
            (
                json!({"spec": {"cidrs": ["10.0.0.1/24"]}}),
                &["spec.cidrs[0]: Invalid value: \"10.0.0.1/24\": wrong CIDR format, IP doesn't match network IP address"],
            ),
            (
                json!({"spec": {"cidrs": ["10.0.0.0"]}}),
                &["spec.cidrs[0]: Invalid value: \"10.0.0.0\": netip.ParsePrefix(\"10.0.0.0\"): no '/'"],
            ),
            (
                json!({"spec": {"cidrs": ["fd00:0::/64"]}}),
                &["spec.cidrs[0]: Invalid value: \"fd00:0::/64\": CIDR not in RFC 5952 canonical format"],
            ),
        ];
        for (obj, want) in cases {
            assert_eq!(
                errors(|e| validate_service_cidr(e, obj, None)),
                *want,
                "{obj}"
            );
        }
        let old = json!({"spec": {"cidrs": ["10.0.0.0/24"]}});
        let new = json!({"spec": {"cidrs": ["10.1.0.0/24"]}});
        assert_eq!(
            errors(|e| validate_service_cidr(e, &new, Some(&old))),
            ["spec.cidrs: Invalid value: []string{\"10.1.0.0/24\"}: field is immutable"]
        );
    }

    #[test]
    fn ip_addresses_need_a_canonical_name_and_a_parent() {
        assert!(ip_address_name_errors("10.0.0.1").is_empty());
        assert!(ip_address_name_errors("fd00::1").is_empty());
        assert_eq!(
            ip_address_name_errors("fd00:0::1"),
            ["must be a canonical format IP address"]
        );
        assert_eq!(
            ip_address_name_errors("web"),
            ["ParseAddr(\"web\"): unable to parse IP"]
        );
        let ok = json!({"spec": {"parentRef": {"resource": "services", "name": "web", "namespace": "default"}}});
        assert!(errors(|e| validate_ip_address(e, &ok, None)).is_empty());
        assert_eq!(
            errors(|e| validate_ip_address(e, &json!({"spec": {}}), None)),
            ["spec.parentRef: Required value"]
        );
        assert_eq!(
            errors(|e| validate_ip_address(
                e,
                &json!({"spec": {"parentRef": {"name": "x"}}}),
                None
            )),
            ["spec.parentRef.resource: Required value"]
        );
    }

    #[test]
    fn storage_versions_keep_their_status_consistent() {
        assert!(storage_version_name_errors("apps.deployments").is_empty());
        assert_eq!(
            storage_version_name_errors("pods"),
            ["name must be in the form of <group>.<resource>"]
        );
        let server = |id: &str, enc: &str| json!({"apiServerID": id, "encodingVersion": enc, "decodableVersions": [enc]});
        let ok = json!({"status": {"storageVersions": [server("a", "v1"), server("b", "v1")],
                                   "commonEncodingVersion": "v1"}});
        assert!(errors(|e| validate_storage_version(e, &ok)).is_empty());
        let bad = json!({"status": {"storageVersions": [server("a", "v1"), server("a", "v2")],
                                    "commonEncodingVersion": "v1",
                                    "conditions": [{"type": "X", "status": "True"}]}});
        assert_eq!(
            errors(|e| validate_storage_version(e, &bad)),
            [
                "status.storageVersions[1].apiServerID: Duplicate value: \"a\"",
                "status.commonEncodingVersion: Invalid value: \"v1\": should be nil if servers do not agree on the same encoding version, or if there is no server reporting the supported versions yet",
                "status[0].reason: Required value: reason cannot be empty",
                "status[0].message: Required value: message cannot be empty",
            ]
        );
        let missing = json!({"status": {"storageVersions": [server("a", "v1")]}});
        assert_eq!(
            errors(|e| validate_storage_version(e, &missing)),
            ["status.commonEncodingVersion: Invalid value: null: the common encoding version is v1"]
        );
    }
}
