//! What an HTTP request asks to do, in the authorizer's terms, worked out from its method,
//! path and query the way kube-apiserver's RequestInfo does: `/api/...` and `/apis/...` paths
//! with a resource are resource requests with a Kubernetes verb (a GET without a name is a
//! `list`, or a `watch` with `?watch`; a DELETE without one a `deletecollection`; a list
//! restricted to one `metadata.name` names that object), anything else is a non-resource
//! request judged on its path with the lowercase HTTP method as verb.

use http::Method;

use super::{Attributes, ResourceAttributes};
use crate::request::percent_decode;
use crate::validation::is_path_segment_name;
use rkcm_gocompat::FieldSelector;

/// Namespace subresources: `/namespaces/NAME/status` is the namespace's, not a resource in it.
const NAMESPACE_SUBRESOURCES: [&str; 2] = ["status", "finalize"];

pub fn attributes(method: &Method, path: &str, query: &[(String, String)]) -> Attributes {
    let non_resource = || Attributes::non_resource(&method.as_str().to_ascii_lowercase(), path);
    let trimmed = path.trim_matches('/');
    let parts: Vec<String> = if trimmed.is_empty() {
        Vec::new()
    } else {
        trimmed.split('/').map(percent_decode).collect()
    };
    if parts.len() < 3 {
        return non_resource();
    }
    let (group, mut rest) = match parts[0].as_str() {
        "api" => ("", &parts[1..]),
        "apis" if parts.len() >= 4 => (parts[1].as_str(), &parts[2..]),
        _ => return non_resource(),
    };
    let version = rest[0].clone();
    rest = &rest[1..];
    let mut verb = match rest[0].as_str() {
        // The deprecated `/watch/` and `/proxy/` path forms name their verb.
        special @ ("watch" | "proxy") => {
            if rest.len() < 2 {
                // Upstream cannot tell the resource and refuses the request; judged on its
                // path here, which only an admin's rules cover.
                return non_resource();
            }
            rest = &rest[1..];
            special.to_string()
        }
        _ => match *method {
            Method::POST => "create",
            Method::GET | Method::HEAD => "get",
            Method::PUT => "update",
            Method::PATCH => "patch",
            Method::DELETE => "delete",
            _ => "",
        }
        .to_string(),
    };
    let mut namespace = String::new();
    if rest[0] == "namespaces" && rest.len() > 1 {
        // `/namespaces/NAME` is the namespace itself, in its own namespace.
        namespace = rest[1].clone();
        if rest.len() > 2 && !NAMESPACE_SUBRESOURCES.contains(&rest[2].as_str()) {
            rest = &rest[2..];
        }
    }
    let resource = rest[0].clone();
    let mut name = rest.get(1).cloned().unwrap_or_default();
    let subresource = rest
        .get(2)
        .filter(|_| verb != "proxy")
        .cloned()
        .unwrap_or_default();
    if name.is_empty() && verb == "get" {
        verb = if wants_watch(query) { "watch" } else { "list" }.to_string();
        if let Some(n) = single_name(query) {
            name = n;
        }
    }
    if name.is_empty() && verb == "delete" {
        verb = "deletecollection".into();
    }
    Attributes::resource(
        &verb,
        ResourceAttributes {
            group: group.to_string(),
            version,
            resource,
            subresource,
            name,
            namespace,
        },
    )
}

/// `?watch` as upstream's parameter decoding reads a bool: present and not `0` or `false`.
fn wants_watch(query: &[(String, String)]) -> bool {
    query
        .iter()
        .find(|(k, _)| k == "watch")
        .is_some_and(|(_, v)| v != "0" && !v.eq_ignore_ascii_case("false"))
}

/// The object a list or watch is restricted to by `fieldSelector=metadata.name=NAME`.
fn single_name(query: &[(String, String)]) -> Option<String> {
    let (_, selector) = query.iter().find(|(k, _)| k == "fieldSelector")?;
    let name = FieldSelector::parse(selector)
        .ok()?
        .requires_exact_match("metadata.name")?
        .to_string();
    is_path_segment_name(&name).is_empty().then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Vec<(String, String)> {
        crate::request::parse_query(Some(s))
    }

    fn res(method: Method, path: &str, query: &str) -> (String, ResourceAttributes) {
        let a = attributes(&method, path, &q(query));
        (a.verb, a.resource.expect("a resource request"))
    }

    #[test]
    fn verbs_follow_method_name_and_query() {
        let cases = [
            (Method::GET, "/api/v1/namespaces/a/pods/p", "", "get"),
            (Method::GET, "/api/v1/namespaces/a/pods", "", "list"),
            (Method::GET, "/api/v1/pods", "watch=true", "watch"),
            (Method::GET, "/api/v1/pods", "watch=1", "watch"),
            (Method::GET, "/api/v1/pods", "watch=false", "list"),
            (Method::GET, "/api/v1/watch/namespaces/a/pods", "", "watch"),
            (Method::POST, "/api/v1/namespaces/a/pods", "", "create"),
            (Method::PUT, "/api/v1/namespaces/a/pods/p", "", "update"),
            (Method::PATCH, "/api/v1/namespaces/a/pods/p", "", "patch"),
            (Method::DELETE, "/api/v1/namespaces/a/pods/p", "", "delete"),
            (
                Method::DELETE,
                "/api/v1/namespaces/a/pods",
                "",
                "deletecollection",
            ),
        ];
        for (m, p, query, want) in cases {
            assert_eq!(res(m.clone(), p, query).0, want, "{m} {p}?{query}");
        }
    }

    #[test]
    fn parts_are_split_like_request_info() {
        let (_, r) = res(
            Method::PUT,
            "/apis/apps/v1/namespaces/rb/deployments/d/status",
            "",
        );
        assert_eq!(
            r,
            ResourceAttributes {
                group: "apps".into(),
                version: "v1".into(),
                resource: "deployments".into(),
                subresource: "status".into(),
                name: "d".into(),
                namespace: "rb".into(),
            }
        );
        // The namespace object is in its own namespace; finalize is its subresource.
        let (_, r) = res(Method::GET, "/api/v1/namespaces/n", "");
        assert_eq!(
            (r.resource.as_str(), r.name.as_str(), r.namespace.as_str()),
            ("namespaces", "n", "n")
        );
        let (_, r) = res(Method::PUT, "/api/v1/namespaces/n/finalize", "");
        assert_eq!(
            (
                r.resource.as_str(),
                r.subresource.as_str(),
                r.namespace.as_str()
            ),
            ("namespaces", "finalize", "n")
        );
        let (verb, r) = res(Method::GET, "/api/v1/nodes", "");
        assert_eq!((verb.as_str(), r.namespace.as_str()), ("list", ""));
    }

    #[test]
    fn a_list_of_one_name_names_it() {
        let (verb, r) = res(
            Method::GET,
            "/api/v1/namespaces/kube-system/configmaps",
            "fieldSelector=metadata.name%3Dcm&watch=1",
        );
        assert_eq!((verb.as_str(), r.name.as_str()), ("watch", "cm"));
        let (_, r) = res(
            Method::GET,
            "/api/v1/configmaps",
            "fieldSelector=metadata.name!%3Dcm",
        );
        assert_eq!(r.name, "");
    }

    #[test]
    fn other_paths_are_non_resource_requests() {
        for p in [
            "/api",
            "/api/v1",
            "/apis",
            "/apis/apps",
            "/apis/apps/v1",
            "/healthz",
            "/openapi/v3/apis/apps/v1",
            "/metrics",
        ] {
            let a = attributes(&Method::GET, p, &[]);
            assert_eq!(a, Attributes::non_resource("get", p));
        }
        let a = attributes(&Method::POST, "/kube-sim/faults/pause", &[]);
        assert_eq!(a.verb, "post");
    }
}
