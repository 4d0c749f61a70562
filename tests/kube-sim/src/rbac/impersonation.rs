//! Impersonation (`Impersonate-User`, `Impersonate-Group`, `Impersonate-Uid`,
//! `Impersonate-Extra-KEY`), as kube-apiserver's filter does it after authentication and
//! before authorization: every part asked for is an `impersonate` request the authenticated
//! user must be allowed (`users`, `groups`, `serviceaccounts` in their namespace, `uids`,
//! `userextras/KEY`), and the request then runs as the identity asked for. A ServiceAccount
//! name without groups gets the ServiceAccount groups; a non-anonymous identity gets
//! `system:authenticated` unless it names `system:authenticated` or `system:unauthenticated`.

use std::collections::BTreeMap;

use http::HeaderMap;

use super::{forbidden, Attributes, Authorizer, ResourceAttributes};
use crate::request::{percent_decode, User};
use crate::status::ApiError;
use crate::store::Store;
use crate::validation::{is_dns1123_label, is_dns1123_subdomain};

const USER: &str = "impersonate-user";
const GROUP: &str = "impersonate-group";
const UID: &str = "impersonate-uid";
const EXTRA_PREFIX: &str = "impersonate-extra-";

const SA_PREFIX: &str = "system:serviceaccount:";

/// Why impersonation was refused.
#[derive(Debug)]
pub enum Refusal {
    /// The requester may not impersonate what it asked for: upstream's 403.
    Forbidden(ApiError),
    /// The headers make no sense (groups, extras or a uid without a user): upstream answers
    /// with a plain-text 500 holding this text.
    Internal(String),
}

/// One thing impersonation asks for, as upstream lists them (an ObjectReference).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Target {
    kind: &'static str,
    namespace: String,
    name: String,
    api_version: &'static str,
    field_path: String,
}

impl Target {
    fn new(kind: &'static str, name: &str) -> Target {
        Target {
            kind,
            namespace: String::new(),
            name: name.to_string(),
            api_version: "",
            field_path: String::new(),
        }
    }

    /// Go's `%v` of the ObjectReference (its seven string fields, space separated).
    fn go_value(&self) -> String {
        format!(
            "{{{} {} {} {} {} {} {}}}",
            self.kind, self.namespace, self.name, "", self.api_version, "", self.field_path
        )
    }
}

/// `(namespace, name)` of a ServiceAccount user name, when it is one (upstream's
/// `serviceaccount.SplitUsername`).
pub fn split_service_account(user: &str) -> Option<(&str, &str)> {
    let rest = user.strip_prefix(SA_PREFIX)?;
    let (ns, name) = rest.split_once(':')?;
    if name.contains(':') || !is_dns1123_label(ns).is_empty() {
        return None;
    }
    is_dns1123_subdomain(name).is_empty().then_some((ns, name))
}

fn targets(headers: &HeaderMap) -> Result<Vec<Target>, String> {
    let value = |v: &http::HeaderValue| String::from_utf8_lossy(v.as_bytes()).into_owned();
    let mut out = Vec::new();
    let user = headers.get(USER).map(value).unwrap_or_default();
    if !user.is_empty() {
        out.push(match split_service_account(&user) {
            Some((ns, name)) => Target {
                namespace: ns.to_string(),
                ..Target::new("ServiceAccount", name)
            },
            None => Target::new("User", &user),
        });
    }
    let mut others = false;
    for g in headers.get_all(GROUP) {
        others = true;
        out.push(Target::new("Group", &value(g)));
    }
    // Header names arrive lowercased; the key is what follows the prefix, unescaped.
    let mut extras: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, v) in headers {
        if let Some(key) = name.as_str().strip_prefix(EXTRA_PREFIX) {
            // Path unescaping: `+` stays a plus.
            extras
                .entry(percent_decode(&key.replace('+', "%2B")))
                .or_default()
                .push(value(v));
        }
    }
    for (key, values) in extras {
        others = true;
        for v in values {
            out.push(Target {
                api_version: "authentication.k8s.io/v1",
                field_path: key.clone(),
                ..Target::new("UserExtra", &v)
            });
        }
    }
    let uid = headers.get(UID).map(value).unwrap_or_default();
    if !uid.is_empty() {
        others = true;
        out.push(Target {
            api_version: "authentication.k8s.io/v1",
            ..Target::new("UID", &uid)
        });
    }
    if others && user.is_empty() {
        let listed: Vec<String> = out.iter().map(Target::go_value).collect();
        return Err(format!(
            "requested [{}] without impersonating a user",
            listed.join(" ")
        ));
    }
    Ok(out)
}

/// The identity a request acts as: `None` when it asks for no impersonation.
pub fn impersonate(
    authorizer: &Authorizer,
    store: &Store,
    requester: &User,
    headers: &HeaderMap,
    request_uri: &str,
) -> Result<Option<User>, Refusal> {
    let targets = targets(headers).map_err(|e| {
        Refusal::Internal(
            format!(
                "Internal Server Error: {}: {e}",
                crate::validation::q(request_uri)
            )
            .replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;"),
        )
    })?;
    if targets.is_empty() {
        return Ok(None);
    }
    let groups_given = headers.contains_key(GROUP);
    let mut who = User::default();
    for t in &targets {
        let (group, resource, subresource) = match t.kind {
            "ServiceAccount" => {
                who.name = format!("{SA_PREFIX}{}:{}", t.namespace, t.name);
                if !groups_given {
                    who.groups = vec![
                        "system:serviceaccounts".into(),
                        format!("system:serviceaccounts:{}", t.namespace),
                    ];
                }
                ("", "serviceaccounts", "")
            }
            "User" => {
                who.name = t.name.clone();
                ("", "users", "")
            }
            "Group" => {
                who.groups.push(t.name.clone());
                ("", "groups", "")
            }
            "UserExtra" => {
                who.extra
                    .entry(t.field_path.clone())
                    .or_default()
                    .push(t.name.clone());
                ("authentication.k8s.io", "userextras", t.field_path.as_str())
            }
            _ => {
                who.uid = t.name.clone();
                ("authentication.k8s.io", "uids", "")
            }
        };
        let attrs = Attributes::resource(
            "impersonate",
            ResourceAttributes {
                group: group.into(),
                version: "v1".into(),
                resource: resource.into(),
                subresource: subresource.into(),
                name: t.name.clone(),
                namespace: t.namespace.clone(),
            },
        );
        let decision = authorizer.authorize(store, requester, &attrs);
        if !decision.allowed {
            return Err(Refusal::Forbidden(forbidden(
                requester,
                &attrs,
                &decision.reason,
            )));
        }
    }
    let has = |g: &str| who.groups.iter().any(|x| x == g);
    if who.name != "system:anonymous" {
        if !has("system:authenticated") && !has("system:unauthenticated") {
            who.groups.push("system:authenticated".into());
        }
    } else if !has("system:unauthenticated") {
        who.groups.push("system:unauthenticated".into());
    }
    Ok(Some(who))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        h
    }

    fn admin() -> User {
        User {
            name: "admin".into(),
            groups: vec!["system:masters".into()],
            ..User::default()
        }
    }

    fn run(pairs: &[(&str, &str)]) -> Result<Option<User>, Refusal> {
        let store = Store::new(10);
        impersonate(
            &Authorizer::default(),
            &store,
            &admin(),
            &headers(pairs),
            "/api/v1/pods",
        )
    }

    #[test]
    fn service_account_names_are_split_like_upstream() {
        assert_eq!(
            split_service_account("system:serviceaccount:kube-system:deployment-controller"),
            Some(("kube-system", "deployment-controller"))
        );
        for not_sa in [
            "system:serviceaccount:ns",
            "system:serviceaccount:ns:a:b",
            "system:serviceaccount:Bad:x",
            "system:serviceaccount::x",
            "jane",
        ] {
            assert_eq!(split_service_account(not_sa), None, "{not_sa}");
        }
    }

    #[test]
    fn identities_are_built_as_upstream_builds_them() {
        let u = run(&[(
            "Impersonate-User",
            "system:serviceaccount:kube-system:deployment-controller",
        )])
        .unwrap()
        .unwrap();
        assert_eq!(
            u.groups,
            [
                "system:serviceaccounts",
                "system:serviceaccounts:kube-system",
                "system:authenticated"
            ]
        );
        // Record 011: given groups replace the ServiceAccount's, system:authenticated is added.
        let u = run(&[
            (
                "Impersonate-User",
                "system:serviceaccount:kube-system:deployment-controller",
            ),
            ("Impersonate-Group", "system:serviceaccounts"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(u.groups, ["system:serviceaccounts", "system:authenticated"]);
        let u = run(&[
            ("Impersonate-User", "jane"),
            ("Impersonate-Group", "a"),
            ("Impersonate-Group", "system:unauthenticated"),
            ("Impersonate-Uid", "1234"),
            ("Impersonate-Extra-Scopes", "x"),
            ("Impersonate-Extra-Scopes", "y"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(
            (u.name.as_str(), u.uid.as_str(), u.groups.clone()),
            (
                "jane",
                "1234",
                vec!["a".into(), "system:unauthenticated".into()]
            )
        );
        assert_eq!(u.extra["scopes"], ["x", "y"]);
        assert!(run(&[]).unwrap().is_none());
    }

    #[test]
    fn groups_without_a_user_are_an_internal_error() {
        let Err(Refusal::Internal(text)) = run(&[("Impersonate-Group", "g")]) else {
            panic!("accepted")
        };
        assert_eq!(
            text,
            "Internal Server Error: \"/api/v1/pods\": requested [{Group  g    }] without impersonating a user"
        );
    }

    #[test]
    fn a_user_without_the_impersonate_verb_is_refused() {
        let store = Store::new(10);
        let jane = User {
            name: "jane".into(),
            groups: vec!["system:authenticated".into()],
            ..User::default()
        };
        let Err(Refusal::Forbidden(e)) = impersonate(
            &Authorizer::default(),
            &store,
            &jane,
            &headers(&[("Impersonate-User", "system:serviceaccount:ns:sa")]),
            "/api",
        ) else {
            panic!("allowed")
        };
        assert_eq!(
            e.message,
            "serviceaccounts \"sa\" is forbidden: User \"jane\" cannot impersonate resource \"serviceaccounts\" in API group \"\" in the namespace \"ns\""
        );
        assert_eq!(e.code, 403);
    }
}
