//! Row printers of the networking kinds: Service, Endpoints, EndpointSlice, Ingress,
//! IngressClass and NetworkPolicy.

use super::fields::{
    age, at, format_label_selector, format_labels, int, list, name, num, or, s, st,
};
use super::Now;
use serde_json::Value;

pub(super) fn service_row(o: &Value, now: Now) -> Vec<Value> {
    let ty = or(st(o, "spec.type"), "ClusterIP");
    let cluster_ip = match list(o, "spec.clusterIPs").first().and_then(Value::as_str) {
        Some(ip) => ip,
        None => or(st(o, "spec.clusterIP"), "<none>"),
    };
    let external: Vec<&str> = list(o, "spec.externalIPs")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let external = match ty {
        "ClusterIP" | "NodePort" if !external.is_empty() => external.join(","),
        "ClusterIP" | "NodePort" => "<none>".into(),
        "LoadBalancer" => {
            let mut all = load_balancer_ingress(at(o, "status.loadBalancer.ingress"));
            if all.is_empty() && external.is_empty() {
                "<pending>".into()
            } else {
                all.extend(external.iter().map(|e| e.to_string()));
                all.join(",")
            }
        }
        "ExternalName" => st(o, "spec.externalName").to_string(),
        _ => "<unknown>".into(),
    };
    let ports: Vec<String> = list(o, "spec.ports")
        .iter()
        .map(|p| {
            let (port, protocol) = (int(p, "port"), or(st(p, "protocol"), "TCP"));
            match int(p, "nodePort") {
                n if n > 0 => format!("{port}:{n}/{protocol}"),
                _ => format!("{port}/{protocol}"),
            }
        })
        .collect();
    let ports = if ports.is_empty() {
        "<none>".into()
    } else {
        ports.join(",")
    };
    vec![
        s(name(o)),
        s(ty),
        s(cluster_ip),
        s(external),
        s(ports),
        age(o, now),
        s(format_labels(at(o, "spec.selector"))),
    ]
}

/// Sorted, de-duplicated IPs (or hostnames when there is no IP) of load-balancer ingress points.
fn load_balancer_ingress(ingress: Option<&Value>) -> Vec<String> {
    let mut out: Vec<String> = ingress
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice)
        .iter()
        .map(|i| or(st(i, "ip"), st(i, "hostname")).to_string())
        .filter(|x| !x.is_empty())
        .collect();
    out.sort();
    out.dedup();
    out
}

pub(super) fn ingress_row(o: &Value, now: Now) -> Vec<Value> {
    let class = at(o, "spec.ingressClassName")
        .and_then(Value::as_str)
        .unwrap_or("<none>");
    let rules = list(o, "spec.rules");
    let mut hosts: Vec<&str> = Vec::new();
    let mut more = false;
    for r in rules {
        if hosts.len() == 3 {
            more = true;
        }
        if !more && !st(r, "host").is_empty() {
            hosts.push(st(r, "host"));
        }
    }
    let hosts = match (hosts.is_empty(), more) {
        (true, _) => "*".to_string(),
        (false, true) => format!(
            "{} + {} more...",
            hosts.join(","),
            rules.len().saturating_sub(3)
        ),
        (false, false) => hosts.join(","),
    };
    let address = load_balancer_ingress(at(o, "status.loadBalancer.ingress")).join(",");
    let ports = if list(o, "spec.tls").is_empty() {
        "80"
    } else {
        "80, 443"
    };
    vec![
        s(name(o)),
        s(class),
        s(hosts),
        s(address),
        s(ports),
        age(o, now),
    ]
}

pub(super) fn ingress_class_row(o: &Value, now: Now) -> Vec<Value> {
    let params = match at(o, "spec.parameters") {
        None => "<none>".to_string(),
        Some(p) => {
            let group = at(p, "apiGroup")
                .and_then(Value::as_str)
                .map(|g| format!(".{g}"))
                .unwrap_or_default();
            format!("{}{group}/{}", st(p, "kind"), st(p, "name"))
        }
    };
    vec![
        s(name(o)),
        s(st(o, "spec.controller")),
        s(params),
        age(o, now),
    ]
}

pub(super) fn network_policy_row(o: &Value, now: Now) -> Vec<Value> {
    // A missing podSelector is the empty selector: both print as <none>.
    vec![
        s(name(o)),
        s(format_label_selector(at(o, "spec.podSelector"))),
        age(o, now),
    ]
}

pub(super) fn endpoints_row(o: &Value, now: Now) -> Vec<Value> {
    let subsets = list(o, "subsets");
    if subsets.is_empty() {
        return vec![s(name(o)), s("<none>"), age(o, now)];
    }
    let (mut shown, mut count, mut more) = (Vec::new(), 0usize, false);
    for ss in subsets {
        let addrs = list(ss, "addresses");
        let ports = list(ss, "ports");
        // Headless services may have no ports: list the bare IPs then.
        let port_list: Vec<Option<i64>> = if ports.is_empty() {
            vec![None]
        } else {
            ports.iter().map(|p| Some(int(p, "port"))).collect()
        };
        for port in port_list {
            count += addrs.len();
            for a in addrs {
                if shown.len() == 3 {
                    more = true;
                    break;
                }
                let ip = st(a, "ip");
                shown.push(match port {
                    None => ip.to_string(),
                    Some(port) if ip.contains(':') => format!("[{ip}]:{port}"),
                    Some(port) => format!("{ip}:{port}"),
                });
            }
        }
    }
    let mut cell = shown.join(",");
    if more {
        cell = format!("{cell} + {} more...", count.saturating_sub(3));
    }
    vec![s(name(o)), s(cell), age(o, now)]
}

pub(super) fn endpoint_slice_row(o: &Value, now: Now) -> Vec<Value> {
    let ports = list(o, "ports").iter().map(|p| {
        match (at(p, "port"), at(p, "name").and_then(Value::as_str)) {
            (Some(port), _) => num(port).to_string(),
            (None, Some(n)) => n.to_string(),
            (None, None) => "*".to_string(),
        }
    });
    let addresses = list(o, "endpoints").iter().flat_map(|e| {
        list(e, "addresses")
            .iter()
            .map(|a| a.as_str().unwrap_or("").to_string())
    });
    vec![
        s(name(o)),
        s(st(o, "addressType")),
        s(list_with_more(ports, "<unset>")),
        s(list_with_more(addresses, "<unset>")),
        age(o, now),
    ]
}

/// The first three entries joined by commas, then " + N more...".
fn list_with_more(items: impl Iterator<Item = String>, empty: &str) -> String {
    let all: Vec<String> = items.collect();
    let joined = all.iter().take(3).cloned().collect::<Vec<_>>().join(",");
    if all.len() > 3 {
        format!("{joined} + {} more...", all.len() - 3)
    } else if joined.is_empty() {
        empty.to_string()
    } else {
        joined
    }
}
