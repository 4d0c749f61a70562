//! Endpoints (core/v1) and EndpointSlice (discovery.k8s.io/v1) validation, as
//! kube-apiserver v1.29's `ValidateEndpoints*` (pkg/apis/core/validation) and
//! `ValidateEndpointSlice*` (pkg/apis/discovery/validation) check them, with the IP parsing
//! those rules rest on (k8s.io/utils/net's `ParseIPSloppy`: Go's pre-1.17 `net.ParseIP`,
//! which still takes IPv4 octets with leading zeros).

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde_json::Value;

use super::{
    arr, child, idx, int_of, is_dns1123_label, is_dns1123_subdomain, is_label_value,
    is_qualified_name, is_valid_port_num, obj, q, str_of, Errs,
};

/// EndpointSlice limits (upstream's `maxEndpoints`, `maxAddresses`, `maxPorts`,
/// `maxZoneHints`). The API documentation says "a maximum of 100 ports" per slice, but the
/// validation of v1.29 enforces 20000.
const MAX_ENDPOINTS: usize = 1000;
const MAX_ADDRESSES: usize = 100;
const MAX_PORTS: usize = 20000;
const MAX_ZONE_HINTS: usize = 8;

const ADDRESS_TYPES: &[&str] = &["FQDN", "IPv4", "IPv6"];
const PORT_PROTOCOLS: &[&str] = &["SCTP", "TCP", "UDP"];

// ---------------------------------------------------------------------------------------
// IP addresses the way Go parses them
// ---------------------------------------------------------------------------------------

/// Go's old `parseIPv4`: four dot-separated decimal octets, leading zeros allowed.
fn parse_ipv4_sloppy(s: &str) -> Option<Ipv4Addr> {
    let mut octets = [0u8; 4];
    let mut parts = s.split('.');
    for octet in &mut octets {
        let part = parts.next()?;
        if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let digits = part.trim_start_matches('0');
        if digits.len() > 3 {
            return None;
        }
        let n: u32 = if digits.is_empty() {
            0
        } else {
            digits.parse().ok()?
        };
        *octet = u8::try_from(n).ok()?;
    }
    parts.next().is_none().then(|| Ipv4Addr::from(octets))
}

/// An IP address as k8s.io/utils/net's `ParseIPSloppy` reads it, or `None` where that
/// returns nil. IPv4-mapped IPv6 addresses come back as IPv4, as Go's `To4()` sees them.
pub(crate) fn parse_ip_sloppy(s: &str) -> Option<IpAddr> {
    // The first '.' or ':' decides the family, as Go's ParseIP does.
    match s.bytes().find(|b| *b == b'.' || *b == b':')? {
        b'.' => parse_ipv4_sloppy(s).map(IpAddr::V4),
        _ => {
            let v6: Ipv6Addr = match s.rsplit_once(':') {
                // An embedded IPv4 tail may have leading zeros too.
                Some((head, tail)) if tail.contains('.') => {
                    let v4 = parse_ipv4_sloppy(tail)?;
                    let o = v4.octets();
                    format!(
                        "{head}:{:x}:{:x}",
                        u16::from_be_bytes([o[0], o[1]]),
                        u16::from_be_bytes([o[2], o[3]])
                    )
                    .parse()
                    .ok()?
                }
                _ => s.parse().ok()?,
            };
            Some(match v6.to_ipv4_mapped() {
                Some(v4) => IpAddr::V4(v4),
                None => IpAddr::V6(v6),
            })
        }
    }
}

/// `validation.IsValidIP`.
pub(crate) fn is_valid_ip(s: &str) -> Vec<String> {
    match parse_ip_sloppy(s) {
        Some(_) => vec![],
        None => vec!["must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)".into()],
    }
}

fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.octets()[0] == 127,
        IpAddr::V6(v6) => v6 == Ipv6Addr::LOCALHOST,
    }
}

fn is_link_local_unicast(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.octets()[..2] == [169, 254],
        IpAddr::V6(v6) => {
            let o = v6.octets();
            o[0] == 0xfe && o[1] & 0xc0 == 0x80
        }
    }
}

fn is_link_local_multicast(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.octets()[..3] == [224, 0, 0],
        IpAddr::V6(v6) => {
            let o = v6.octets();
            o[0] == 0xff && o[1] & 0x0f == 0x02
        }
    }
}

/// `ValidateNonSpecialIP`: Endpoints, EndpointSlices and external IPs may not point at
/// unspecified, loopback or link-local addresses.
pub(super) fn validate_non_special_ip(e: &mut Errs, value: &str, path: &str) {
    let Some(ip) = parse_ip_sloppy(value) else {
        e.invalid(path, &q(value), "must be a valid IP address");
        return;
    };
    if ip.is_unspecified() {
        e.invalid(
            path,
            &q(value),
            &format!("may not be unspecified ({value})"),
        );
    }
    if is_loopback(ip) {
        e.invalid(
            path,
            &q(value),
            "may not be in the loopback range (127.0.0.0/8, ::1/128)",
        );
    }
    if is_link_local_unicast(ip) {
        e.invalid(
            path,
            &q(value),
            "may not be in the link-local range (169.254.0.0/16, fe80::/10)",
        );
    }
    if is_link_local_multicast(ip) {
        e.invalid(
            path,
            &q(value),
            "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)",
        );
    }
}

// ---------------------------------------------------------------------------------------
// Shared pieces
// ---------------------------------------------------------------------------------------

fn dns1123_label(e: &mut Errs, value: &str, path: &str) {
    e.invalid_msgs(path, value, is_dns1123_label(value));
}

fn node_name(e: &mut Errs, value: Option<&Value>, path: &str) {
    if let Some(name) = value.and_then(Value::as_str) {
        e.invalid_msgs(path, name, is_dns1123_subdomain(name));
    }
}

fn app_protocol(e: &mut Errs, value: Option<&Value>, path: &str) {
    if let Some(p) = value.and_then(Value::as_str) {
        e.invalid_msgs(path, p, is_qualified_name(p));
    }
}

fn protocol(e: &mut Errs, value: Option<&Value>, path: &str) {
    match value.and_then(Value::as_str) {
        None | Some("") => e.required(path, ""),
        Some(p) if !PORT_PROTOCOLS.contains(&p) => e.not_supported(path, &q(p), PORT_PROTOCOLS),
        Some(_) => {}
    }
}

// ---------------------------------------------------------------------------------------
// core/v1 Endpoints
// ---------------------------------------------------------------------------------------

fn endpoint_address(e: &mut Errs, address: &Value, path: &str) {
    let ip = str_of(address.get("ip"));
    let ip_path = child(path, "ip");
    e.invalid_msgs(&ip_path, ip, is_valid_ip(ip));
    let hostname = str_of(address.get("hostname"));
    if !hostname.is_empty() {
        dns1123_label(e, hostname, &child(path, "hostname"));
    }
    node_name(e, address.get("nodeName"), &child(path, "nodeName"));
    validate_non_special_ip(e, ip, &ip_path);
}

fn endpoint_port(e: &mut Errs, port: &Value, require_name: bool, path: &str) {
    let name = str_of(port.get("name"));
    if require_name && name.is_empty() {
        e.required(&child(path, "name"), "");
    } else if !name.is_empty() {
        dns1123_label(e, name, &child(path, "name"));
    }
    let number = int_of(port.get("port")).unwrap_or(0);
    for m in is_valid_port_num(number) {
        e.invalid(&child(path, "port"), &number.to_string(), &m);
    }
    protocol(e, port.get("protocol"), &child(path, "protocol"));
    app_protocol(e, port.get("appProtocol"), &child(path, "appProtocol"));
}

/// `ValidateEndpoints` (create and update alike; metadata is checked by the caller).
pub(super) fn validate_endpoints(e: &mut Errs, o: &Value) {
    for (i, subset) in arr(o.get("subsets")).iter().enumerate() {
        let path = idx("subsets", i);
        let ready = arr(subset.get("addresses"));
        let not_ready = arr(subset.get("notReadyAddresses"));
        if ready.is_empty() && not_ready.is_empty() {
            e.required(&path, "must specify `addresses` or `notReadyAddresses`");
        }
        for (j, a) in ready.iter().enumerate() {
            endpoint_address(e, a, &idx(&child(&path, "addresses"), j));
        }
        for (j, a) in not_ready.iter().enumerate() {
            endpoint_address(e, a, &idx(&child(&path, "notReadyAddresses"), j));
        }
        let ports = arr(subset.get("ports"));
        for (k, p) in ports.iter().enumerate() {
            endpoint_port(e, p, ports.len() > 1, &idx(&child(&path, "ports"), k));
        }
    }
}

// ---------------------------------------------------------------------------------------
// discovery.k8s.io/v1 EndpointSlice
// ---------------------------------------------------------------------------------------

/// `validation.IsFullyQualifiedDomainName`: a DNS subdomain of at least two labels, with an
/// optional trailing dot.
fn fully_qualified_domain_name(e: &mut Errs, name: &str, path: &str) {
    if name.is_empty() {
        e.required(path, "");
        return;
    }
    let name = name.strip_suffix('.').unwrap_or(name);
    let errs = is_dns1123_subdomain(name);
    if !errs.is_empty() {
        e.invalid(path, &q(name), &errs.join(","));
        return;
    }
    if name.split('.').count() < 2 {
        e.invalid(
            path,
            &q(name),
            "should be a domain with at least two segments separated by dots",
        );
        return;
    }
    for label in name.split('.') {
        let errs = is_dns1123_label(label);
        if !errs.is_empty() {
            e.invalid(path, &q(label), &errs.join(","));
            return;
        }
    }
}

fn slice_address(e: &mut Errs, address_type: &str, address: &str, path: &str) {
    match address_type {
        "IPv4" => {
            if !matches!(parse_ip_sloppy(address), Some(IpAddr::V4(_))) {
                e.invalid(path, &q(address), "must be a valid IPv4 address");
            }
            validate_non_special_ip(e, address, path);
        }
        "IPv6" => {
            if !matches!(parse_ip_sloppy(address), Some(IpAddr::V6(_))) {
                e.invalid(path, &q(address), "must be a valid IPv6 address");
            }
            validate_non_special_ip(e, address, path);
        }
        "FQDN" => fully_qualified_domain_name(e, address, path),
        // Unknown types are reported on addressType and not looked into.
        _ => {}
    }
}

fn hints(e: &mut Errs, hints: &Value, path: &str) {
    let path = child(path, "forZones");
    let zones = arr(hints.get("forZones"));
    if zones.len() > MAX_ZONE_HINTS {
        e.too_many(&path, zones.len(), MAX_ZONE_HINTS);
        return;
    }
    let mut seen = HashSet::new();
    for (i, zone) in zones.iter().enumerate() {
        let name = str_of(zone.get("name"));
        let zone_path = child(&idx(&path, i), "name");
        if !seen.insert(name) {
            e.duplicate(&zone_path, &q(name));
        }
        e.invalid_msgs(&zone_path, name, is_label_value(name));
    }
}

fn slice_endpoints(e: &mut Errs, o: &Value, address_type: &str) {
    let endpoints = arr(o.get("endpoints"));
    if endpoints.len() > MAX_ENDPOINTS {
        e.too_many("endpoints", endpoints.len(), MAX_ENDPOINTS);
        return;
    }
    for (i, ep) in endpoints.iter().enumerate() {
        let path = idx("endpoints", i);
        let addresses_path = child(&path, "addresses");
        let addresses = arr(ep.get("addresses"));
        if addresses.is_empty() {
            e.required(&addresses_path, "must contain at least 1 address");
        } else if addresses.len() > MAX_ADDRESSES {
            e.too_many(&addresses_path, addresses.len(), MAX_ADDRESSES);
        }
        for (j, a) in addresses.iter().enumerate() {
            slice_address(
                e,
                address_type,
                a.as_str().unwrap_or(""),
                &idx(&addresses_path, j),
            );
        }
        node_name(e, ep.get("nodeName"), &child(&path, "nodeName"));
        if let Some(hostname) = ep.get("hostname").and_then(Value::as_str) {
            dns1123_label(e, hostname, &child(&path, "hostname"));
        }
        if let Some(h) = ep.get("hints").filter(|h| h.is_object()) {
            hints(e, h, &child(&path, "hints"));
        }
    }
}

fn slice_ports(e: &mut Errs, o: &Value) {
    let ports = arr(o.get("ports"));
    if ports.len() > MAX_PORTS {
        e.too_many("ports", ports.len(), MAX_PORTS);
        return;
    }
    let mut names = HashSet::new();
    for (i, p) in ports.iter().enumerate() {
        let path = idx("ports", i);
        // Defaulting has made the name "" when it was left out.
        let name = str_of(p.get("name"));
        if !name.is_empty() {
            dns1123_label(e, name, &child(&path, "name"));
        }
        if !names.insert(name) {
            e.duplicate(&child(&path, "name"), &q(name));
        }
        protocol(e, p.get("protocol"), &child(&path, "protocol"));
        app_protocol(e, p.get("appProtocol"), &child(&path, "appProtocol"));
    }
}

/// `ValidateEndpointSliceCreate` / `ValidateEndpointSliceUpdate` (metadata is checked by
/// the caller).
pub(super) fn validate_endpoint_slice(e: &mut Errs, o: &Value, old: Option<&Value>) {
    let address_type = str_of(o.get("addressType"));
    if address_type.is_empty() {
        e.required("addressType", "");
    } else if !ADDRESS_TYPES.contains(&address_type) {
        e.not_supported("addressType", &q(address_type), ADDRESS_TYPES);
    }
    slice_endpoints(e, o, address_type);
    slice_ports(e, o);
    if let Some(old) = old {
        if address_type != str_of(old.get("addressType")) {
            e.invalid("addressType", &q(address_type), "field is immutable");
        }
    }
}

/// A slice's endpoints keep no `deprecatedTopology` written through discovery.k8s.io/v1: the
/// strategy drops it on every v1 create and update (after copying a `kubernetes.io/hostname`
/// the stored slice already had into `nodeName`; a slice written through v1 never has one).
pub(crate) fn drop_deprecated_topology(o: &mut serde_json::Map<String, Value>) {
    if let Some(endpoints) = o.get_mut("endpoints").and_then(Value::as_array_mut) {
        for ep in endpoints {
            if let Some(m) = ep.as_object_mut() {
                m.remove("deprecatedTopology");
            }
        }
    }
}

/// `apiequality.Semantic.DeepEqual` on the JSON of EndpointSlice content: an empty list
/// equals a nil one, an absent member a null one. (An empty object stays different from
/// null: the slice's nested objects are structs behind pointers, or always set.)
pub(crate) fn semantic_eq(a: &Value, b: &Value) -> bool {
    let empty_list = |v: &Value| match v {
        Value::Null => true,
        Value::Array(x) => x.is_empty(),
        _ => false,
    };
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => x.keys().chain(y.keys()).all(|k| {
            semantic_eq(
                x.get(k).unwrap_or(&Value::Null),
                y.get(k).unwrap_or(&Value::Null),
            )
        }),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| semantic_eq(p, q))
        }
        _ if empty_list(a) && empty_list(b) => true,
        _ => a == b,
    }
}

fn is_empty_list(v: Option<&Value>) -> bool {
    v.and_then(Value::as_array).is_some_and(|a| a.is_empty())
}

/// What etcd gives back for a slice written with empty lists: protobuf keeps no empty
/// repeated field, so `endpoints: []` and `ports: []` read back as nil, which Go writes
/// as null (neither field is `omitempty`), and an empty `hints.forZones` goes.
pub(crate) fn null_empty_lists(o: &mut serde_json::Map<String, Value>) {
    for field in ["endpoints", "ports"] {
        if !o.contains_key(field) || is_empty_list(o.get(field)) {
            o.insert(field.into(), Value::Null);
        }
    }
    for ep in o
        .get_mut("endpoints")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        if let Some(hints) = ep.get_mut("hints").and_then(Value::as_object_mut) {
            if is_empty_list(hints.get("forZones")) {
                hints.remove("forZones");
            }
        }
    }
}

/// The same for Endpoints, whose lists are all `omitempty`: empty `subsets`, and a subset's
/// empty `addresses`, `notReadyAddresses` and `ports`, are not there when read back.
pub(crate) fn drop_empty_endpoints_lists(o: &mut serde_json::Map<String, Value>) {
    if is_empty_list(o.get("subsets")) {
        o.remove("subsets");
    }
    for subset in o
        .get_mut("subsets")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        if let Some(m) = subset.as_object_mut() {
            for field in ["addresses", "notReadyAddresses", "ports"] {
                if is_empty_list(m.get(field)) {
                    m.remove(field);
                }
            }
        }
    }
}

/// Whether the labels differ, nil and empty maps being equal (`apiequality.Semantic`).
pub(crate) fn labels_differ(a: &Value, b: &Value) -> bool {
    let labels = |v: &Value| {
        obj(v.get("metadata").and_then(|m| m.get("labels")))
            .filter(|m| !m.is_empty())
            .cloned()
    };
    labels(a) != labels(b)
}

#[cfg(test)]
mod tests {
    use super::super::{validate, FieldCause};
    use super::*;
    use serde_json::json;

    fn msgs(c: &[FieldCause]) -> Vec<String> {
        c.iter()
            .map(|c| format!("{}|{}|{}", c.reason, c.field, c.message))
            .collect()
    }

    fn slice(addr_type: &str, endpoints: Value, ports: Value) -> Value {
        json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
               "metadata": {"name": "s", "namespace": "ns"},
               "addressType": addr_type, "endpoints": endpoints, "ports": ports})
    }

    fn check_slice(o: &Value) -> Vec<String> {
        msgs(&validate(
            "discovery.k8s.io",
            "v1",
            "EndpointSlice",
            o,
            None,
        ))
    }

    fn check_endpoints(subsets: Value) -> Vec<String> {
        let o = json!({"apiVersion": "v1", "kind": "Endpoints",
                       "metadata": {"name": "e", "namespace": "ns"}, "subsets": subsets});
        msgs(&validate("", "v1", "Endpoints", &o, None))
    }

    #[test]
    fn ips_parse_the_way_go_parses_them() {
        let v4 = |s: &str| parse_ip_sloppy(s);
        assert_eq!(v4("10.0.0.1"), Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1))));
        assert_eq!(
            v4("010.000.0.001"),
            Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)))
        );
        assert_eq!(
            v4("::ffff:1.2.3.4"),
            Some(IpAddr::V4(Ipv4Addr::new(1, 2, 3, 4)))
        );
        assert_eq!(
            v4("::ffff:01.2.3.4"),
            Some(IpAddr::V4(Ipv4Addr::new(1, 2, 3, 4)))
        );
        assert_eq!(v4("2001:db8::1"), "2001:db8::1".parse().ok());
        for bad in [
            "",
            "1.2.3",
            "1.2.3.4.5",
            "256.1.1.1",
            "1.2.3.4 ",
            "a.b.c.d",
            "fe80::1%eth0",
            "foo",
            "1..2.3",
        ] {
            assert_eq!(v4(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn endpoint_slices_are_checked_like_upstream() {
        let ok = slice(
            "IPv4",
            json!([{"addresses": ["10.0.0.1"], "conditions": {}, "hostname": "a",
                    "nodeName": "n1", "hints": {"forZones": [{"name": "zone-a"}]}}]),
            json!([{"name": "http", "protocol": "TCP", "port": 80, "appProtocol": "http"}]),
        );
        assert!(check_slice(&ok).is_empty(), "{:?}", check_slice(&ok));

        let bad = slice(
            "IPv4",
            json!([{"addresses": []},
                   {"addresses": ["2001:db8::1", "127.0.0.1", "nonsense", "0.0.0.0", "169.254.1.1", "224.0.0.5"],
                    "hostname": "A_B", "nodeName": "N!"}]),
            json!([{"name": "x", "protocol": "TCP"}, {"name": "x", "protocol": "ICMP"},
                   {"name": "Bad_Name", "protocol": "UDP", "appProtocol": "a/b/c"}]),
        );
        let got = check_slice(&bad);
        let want = [
            "FieldValueRequired|endpoints[0].addresses|Required value: must contain at least 1 address",
            "FieldValueInvalid|endpoints[1].addresses[0]|Invalid value: \"2001:db8::1\": must be a valid IPv4 address",
            "FieldValueInvalid|endpoints[1].addresses[1]|Invalid value: \"127.0.0.1\": may not be in the loopback range (127.0.0.0/8, ::1/128)",
            "FieldValueInvalid|endpoints[1].addresses[2]|Invalid value: \"nonsense\": must be a valid IPv4 address",
            "FieldValueInvalid|endpoints[1].addresses[2]|Invalid value: \"nonsense\": must be a valid IP address",
            "FieldValueInvalid|endpoints[1].addresses[3]|Invalid value: \"0.0.0.0\": may not be unspecified (0.0.0.0)",
            "FieldValueInvalid|endpoints[1].addresses[4]|Invalid value: \"169.254.1.1\": may not be in the link-local range (169.254.0.0/16, fe80::/10)",
            "FieldValueInvalid|endpoints[1].addresses[5]|Invalid value: \"224.0.0.5\": may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)",
        ];
        assert_eq!(&got[..want.len()], &want[..], "{got:#?}");
        let rest = &got[want.len()..];
        assert!(rest[0].starts_with("FieldValueInvalid|endpoints[1].nodeName|Invalid value: \"N!\": a lowercase RFC 1123 subdomain"), "{rest:#?}");
        assert!(rest[1].starts_with("FieldValueInvalid|endpoints[1].hostname|Invalid value: \"A_B\": a lowercase RFC 1123 label"), "{rest:#?}");
        assert_eq!(
            rest[2],
            "FieldValueDuplicate|ports[1].name|Duplicate value: \"x\""
        );
        assert_eq!(
            rest[3],
            "FieldValueNotSupported|ports[1].protocol|Unsupported value: \"ICMP\": supported values: \"SCTP\", \"TCP\", \"UDP\""
        );
        assert!(rest[4].starts_with("FieldValueInvalid|ports[2].name|Invalid value: \"Bad_Name\": a lowercase RFC 1123 label"), "{rest:#?}");
        assert!(
            rest[5].starts_with(
                "FieldValueInvalid|ports[2].appProtocol|Invalid value: \"a/b/c\": a qualified name"
            ),
            "{rest:#?}"
        );
        assert_eq!(rest.len(), 6, "{rest:#?}");

        // IPv6 slices take IPv6 addresses only; FQDN slices domain names.
        let v6 = slice(
            "IPv6",
            json!([{"addresses": ["10.0.0.1", "::1", "fe80::1", "ff02::1", "2001:db8::2"]}]),
            json!([]),
        );
        assert_eq!(
            check_slice(&v6),
            [
                "FieldValueInvalid|endpoints[0].addresses[0]|Invalid value: \"10.0.0.1\": must be a valid IPv6 address",
                "FieldValueInvalid|endpoints[0].addresses[1]|Invalid value: \"::1\": may not be in the loopback range (127.0.0.0/8, ::1/128)",
                "FieldValueInvalid|endpoints[0].addresses[2]|Invalid value: \"fe80::1\": may not be in the link-local range (169.254.0.0/16, fe80::/10)",
                "FieldValueInvalid|endpoints[0].addresses[3]|Invalid value: \"ff02::1\": may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)",
            ]
        );
        let fqdn = slice(
            "FQDN",
            json!([{"addresses": ["example.com.", "localhost", "Bad.Example"]}]),
            json!([]),
        );
        let got = check_slice(&fqdn);
        assert_eq!(got.len(), 2, "{got:#?}");
        assert_eq!(got[0], "FieldValueInvalid|endpoints[0].addresses[1]|Invalid value: \"localhost\": should be a domain with at least two segments separated by dots");
        assert!(got[1].starts_with("FieldValueInvalid|endpoints[0].addresses[2]|Invalid value: \"Bad.Example\": a lowercase RFC 1123 subdomain"), "{got:#?}");

        // The address type is required, one of three, and immutable.
        assert_eq!(
            check_slice(&slice("", json!([]), json!([]))),
            ["FieldValueRequired|addressType|Required value"]
        );
        assert_eq!(
            check_slice(&slice("IP", json!([{"addresses": ["x"]}]), json!([]))),
            ["FieldValueNotSupported|addressType|Unsupported value: \"IP\": supported values: \"FQDN\", \"IPv4\", \"IPv6\""]
        );
        let old = slice("IPv4", json!([]), json!([]));
        let new = slice("IPv6", json!([]), json!([]));
        assert_eq!(
            msgs(&validate(
                "discovery.k8s.io",
                "v1",
                "EndpointSlice",
                &new,
                Some(&old)
            )),
            ["FieldValueInvalid|addressType|Invalid value: \"IPv6\": field is immutable"]
        );
    }

    #[test]
    fn endpoint_slice_limits() {
        let many: Vec<Value> = (0..1001)
            .map(|i| json!({"addresses": [format!("10.0.{}.{}", i / 250, i % 250 + 1)]}))
            .collect();
        assert_eq!(
            check_slice(&slice("IPv4", json!(many[..1000]), json!([]))),
            Vec::<String>::new()
        );
        assert_eq!(
            check_slice(&slice("IPv4", json!(many), json!([]))),
            ["FieldValueTooMany|endpoints|Too many: 1001: must have at most 1000 items"]
        );
        let addresses: Vec<String> = (1..=101).map(|i| format!("10.1.0.{i}")).collect();
        assert_eq!(
            check_slice(&slice("IPv4", json!([{"addresses": addresses}]), json!([]))),
            ["FieldValueTooMany|endpoints[0].addresses|Too many: 101: must have at most 100 items"]
        );
        let ports: Vec<Value> = (0..101)
            .map(|i| json!({"name": format!("p{i}"), "protocol": "TCP", "port": 1000 + i}))
            .collect();
        assert!(check_slice(&slice("IPv4", json!([]), json!(ports))).is_empty());
        let zones: Vec<Value> = (0..9).map(|i| json!({"name": format!("z{i}")})).collect();
        assert_eq!(
            check_slice(&slice(
                "IPv4",
                json!([{"addresses": ["10.0.0.1"], "hints": {"forZones": zones}}]),
                json!([])
            )),
            ["FieldValueTooMany|endpoints[0].hints.forZones|Too many: 9: must have at most 8 items"]
        );
        assert_eq!(
            check_slice(&slice(
                "IPv4",
                json!([{"addresses": ["10.0.0.1"], "hints": {"forZones": [{"name": "a"}, {"name": "a"}]}}]),
                json!([])
            )),
            ["FieldValueDuplicate|endpoints[0].hints.forZones[1].name|Duplicate value: \"a\""]
        );
    }

    #[test]
    fn endpoints_are_checked_like_upstream() {
        assert!(check_endpoints(
            json!([{"addresses": [{"ip": "10.0.0.1", "hostname": "h", "nodeName": "n"}],
                                        "notReadyAddresses": [{"ip": "2001:db8::1"}],
                                        "ports": [{"name": "a", "port": 80, "protocol": "TCP"},
                                                  {"name": "b", "port": 81, "protocol": "UDP"}]}])
        )
        .is_empty());
        // Endpoints without subsets, and a subset without ports (a headless Service's), are fine.
        assert!(check_endpoints(json!([])).is_empty());
        assert!(check_endpoints(json!([{"addresses": [{"ip": "10.0.0.1"}]}])).is_empty());

        let got = check_endpoints(json!([
            {"ports": [{"port": 80, "protocol": "TCP"}]},
            {"addresses": [{"ip": "x"}, {"ip": "127.0.0.1"}],
             "notReadyAddresses": [{"ip": "::"}],
             "ports": [{"port": 0, "protocol": "TCP"}, {"name": "b", "port": -1, "protocol": "ICMP"}]},
        ]));
        assert_eq!(
            got,
            [
                "FieldValueRequired|subsets[0]|Required value: must specify `addresses` or `notReadyAddresses`",
                "FieldValueInvalid|subsets[1].addresses[0].ip|Invalid value: \"x\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
                "FieldValueInvalid|subsets[1].addresses[0].ip|Invalid value: \"x\": must be a valid IP address",
                "FieldValueInvalid|subsets[1].addresses[1].ip|Invalid value: \"127.0.0.1\": may not be in the loopback range (127.0.0.0/8, ::1/128)",
                "FieldValueInvalid|subsets[1].notReadyAddresses[0].ip|Invalid value: \"::\": may not be unspecified (::)",
                "FieldValueRequired|subsets[1].ports[0].name|Required value",
                "FieldValueInvalid|subsets[1].ports[0].port|Invalid value: 0: must be between 1 and 65535, inclusive",
                "FieldValueInvalid|subsets[1].ports[1].port|Invalid value: -1: must be between 1 and 65535, inclusive",
                "FieldValueNotSupported|subsets[1].ports[1].protocol|Unsupported value: \"ICMP\": supported values: \"SCTP\", \"TCP\", \"UDP\"",
            ]
        );
    }

    #[test]
    fn semantic_equality_treats_empty_lists_as_nil() {
        assert!(semantic_eq(&json!({"a": null}), &json!({})));
        assert!(semantic_eq(&json!({"a": []}), &json!({"a": null})));
        assert!(semantic_eq(&json!({"a": []}), &json!({})));
        assert!(!semantic_eq(&json!({"hints": {}}), &json!({})));
        assert!(!semantic_eq(&json!([1]), &json!([])));
        assert!(!semantic_eq(&json!({"a": "b"}), &json!({})));
    }

    #[test]
    fn slice_labels_compare_nil_and_empty_as_equal() {
        let none = json!({"metadata": {}});
        let empty = json!({"metadata": {"labels": {}}});
        let some = json!({"metadata": {"labels": {"a": "b"}}});
        assert!(!labels_differ(&none, &empty));
        assert!(labels_differ(&none, &some));
        assert!(!labels_differ(&some, &some.clone()));
    }
}
