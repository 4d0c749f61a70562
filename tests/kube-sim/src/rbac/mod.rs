//! Authorization as kube-apiserver runs it with `--authorization-mode=RBAC`: members of
//! `system:masters` are always allowed (the privileged-group authorizer, which gives no
//! reason), everyone else is allowed what the Roles, ClusterRoles and their bindings stored in
//! the cluster grant them, and nothing more. The policy is read from kube-sim's own store, so a
//! binding created or deleted through the API counts from the next request on; it is compiled
//! once per change of any RBAC object (the store's `rbac_rv`) and shared by every request.
//!
//! A refusal is kube-apiserver's 403 `Status` with its message word for word; an allowed
//! SubjectAccessReview names the binding that allowed it, as upstream's `reason` does. At start
//! the cluster holds the bootstrap policy a real v1.29.6 server creates
//! ([`bootstrap_objects`]).

pub mod escalation;
pub mod impersonation;
pub mod request_info;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

use serde_json::{json, Value};

use crate::request::User;
use crate::status::{ApiError, Subject};
use crate::store::{ResKey, Store};
use crate::validation::q;

pub const GROUP: &str = "rbac.authorization.k8s.io";

/// The group whose members every authorizer chain lets through.
pub const PRIVILEGED_GROUP: &str = "system:masters";

/// The RBAC objects a fresh kube-apiserver v1.29.6 creates, as a real one served them.
const BOOTSTRAP_POLICY: &str = include_str!("bootstrap-policy.json");

/// What a request asks to do, as an authorizer sees it (upstream's `authorizer.Attributes`,
/// without the user).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Attributes {
    /// Kubernetes verb for resource requests (`get`, `list`, `watch`, `create`, ...), the
    /// lowercase HTTP method for the others.
    pub verb: String,
    /// Present for requests on an API resource.
    pub resource: Option<ResourceAttributes>,
    /// The request path, what a non-resource request is judged on.
    pub path: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResourceAttributes {
    pub group: String,
    pub version: String,
    pub resource: String,
    pub subresource: String,
    pub name: String,
    pub namespace: String,
}

impl Attributes {
    /// A resource request's attributes.
    pub fn resource(verb: &str, r: ResourceAttributes) -> Attributes {
        Attributes {
            verb: verb.to_string(),
            resource: Some(r),
            path: String::new(),
        }
    }

    /// A non-resource request's attributes.
    pub fn non_resource(verb: &str, path: &str) -> Attributes {
        Attributes {
            verb: verb.to_string(),
            resource: None,
            path: path.to_string(),
        }
    }
}

/// An authorizer's answer. `reason` is what a SubjectAccessReview reports and what follows
/// the message of a 403.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    pub reason: String,
}

/// One `PolicyRule`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rule {
    pub verbs: Vec<String>,
    pub api_groups: Vec<String>,
    pub resources: Vec<String>,
    pub resource_names: Vec<String>,
    pub non_resource_urls: Vec<String>,
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

fn has(set: &[String], s: &str) -> bool {
    set.iter().any(|x| x == s)
}

impl Rule {
    pub fn from_json(v: &Value) -> Rule {
        Rule {
            verbs: strings(&v["verbs"]),
            api_groups: strings(&v["apiGroups"]),
            resources: strings(&v["resources"]),
            resource_names: strings(&v["resourceNames"]),
            non_resource_urls: strings(&v["nonResourceURLs"]),
        }
    }

    /// The rules of a Role or ClusterRole (`rules: null` holds none).
    pub fn list_from_json(v: &Value) -> Vec<Rule> {
        v.as_array()
            .map(|a| a.iter().map(Rule::from_json).collect())
            .unwrap_or_default()
    }

    /// Whether this rule lets the request through (upstream's `RuleAllows`).
    pub fn allows(&self, a: &Attributes) -> bool {
        if !self.verb_matches(&a.verb) {
            return false;
        }
        match &a.resource {
            Some(r) => {
                self.api_group_matches(&r.group)
                    && self.resource_matches(&r.resource, &r.subresource)
                    && self.resource_name_matches(&r.name)
            }
            None => self.non_resource_url_matches(&a.path),
        }
    }

    fn verb_matches(&self, verb: &str) -> bool {
        self.verbs.iter().any(|v| v == "*" || v == verb)
    }

    fn api_group_matches(&self, group: &str) -> bool {
        self.api_groups.iter().any(|g| g == "*" || g == group)
    }

    fn resource_matches(&self, resource: &str, subresource: &str) -> bool {
        self.resources.iter().any(|r| {
            if r == "*" {
                return true;
            }
            // `resource/subresource` without allocating the combined name.
            let combined = match r.split_once('/') {
                None => subresource.is_empty() && r == resource,
                Some((res, sub)) => res == resource && sub == subresource,
            };
            // `*/scale` is every resource's scale subresource.
            combined || (!subresource.is_empty() && r.strip_prefix("*/") == Some(subresource))
        })
    }

    fn resource_name_matches(&self, name: &str) -> bool {
        self.resource_names.is_empty() || has(&self.resource_names, name)
    }

    fn non_resource_url_matches(&self, path: &str) -> bool {
        self.non_resource_urls.iter().any(|u| {
            u == "*"
                || u == path
                || u.strip_suffix('*')
                    .is_some_and(|prefix| path.starts_with(prefix))
        })
    }
}

/// One subject of a binding, with the user name a ServiceAccount subject stands for.
#[derive(Clone, Debug)]
struct BindingSubject {
    kind: String,
    name: String,
    namespace: String,
    /// `system:serviceaccount:NS:NAME` for a ServiceAccount (its namespace defaults to the
    /// binding's); `None` when it can match nobody.
    service_account_user: Option<String>,
}

impl BindingSubject {
    fn from_json(v: &Value, binding_namespace: &str) -> BindingSubject {
        let s = |k: &str| v[k].as_str().unwrap_or("").to_string();
        let (kind, name, namespace) = (s("kind"), s("name"), s("namespace"));
        let service_account_user = (kind == "ServiceAccount")
            .then(|| {
                let ns = if namespace.is_empty() {
                    binding_namespace
                } else {
                    &namespace
                };
                (!ns.is_empty()).then(|| format!("system:serviceaccount:{ns}:{name}"))
            })
            .flatten();
        BindingSubject {
            kind,
            name,
            namespace,
            service_account_user,
        }
    }

    fn applies_to(&self, user: &User) -> bool {
        match self.kind.as_str() {
            "User" => user.name == self.name,
            "Group" => has(&user.groups, &self.name),
            "ServiceAccount" => self.service_account_user.as_deref() == Some(&user.name),
            _ => false,
        }
    }

    /// `ServiceAccount "name/ns"`, `User "u"`, `Group "g"`, as upstream describes subjects.
    fn describe(&self, binding_namespace: &str) -> String {
        if self.kind == "ServiceAccount" {
            let ns = if self.namespace.is_empty() {
                binding_namespace
            } else {
                &self.namespace
            };
            format!("{} {}", self.kind, q(&format!("{}/{ns}", self.name)))
        } else {
            format!("{} {}", self.kind, q(&self.name))
        }
    }
}

/// A RoleBinding or ClusterRoleBinding with the rules of the role it refers to resolved
/// (or the error resolving them gave).
#[derive(Clone, Debug)]
struct Binding {
    name: String,
    /// Empty for a ClusterRoleBinding.
    namespace: String,
    role_kind: String,
    role_name: String,
    subjects: Vec<BindingSubject>,
    rules: Result<Arc<[Rule]>, String>,
}

impl Binding {
    fn subject_for(&self, user: &User) -> Option<&BindingSubject> {
        self.subjects.iter().find(|s| s.applies_to(user))
    }

    /// What upstream names as the source of an allowing rule.
    fn describe(&self, subject: &BindingSubject) -> String {
        if self.namespace.is_empty() {
            format!(
                "ClusterRoleBinding {} of {} {} to {}",
                q(&self.name),
                self.role_kind,
                q(&self.role_name),
                subject.describe("")
            )
        } else {
            format!(
                "RoleBinding {} of {} {} to {}",
                q(&format!("{}/{}", self.name, self.namespace)),
                self.role_kind,
                q(&self.role_name),
                subject.describe(&self.namespace)
            )
        }
    }
}

/// What a visit of the policy yields: a rule with where it came from, or an error resolving
/// a binding's role.
enum Visit<'a> {
    Rule(&'a Binding, &'a BindingSubject, &'a Rule),
    Error(&'a str),
}

/// The compiled policy: every binding, with its role's rules, as of one RBAC resourceVersion.
#[derive(Debug, Default)]
pub struct Policy {
    rv: u64,
    cluster: Vec<Binding>,
    namespaced: HashMap<String, Vec<Binding>>,
    cluster_roles: HashMap<String, Arc<[Rule]>>,
    /// By namespace, then name.
    roles: HashMap<String, HashMap<String, Arc<[Rule]>>>,
}

/// The stored objects of the four RBAC resources.
#[derive(Default)]
pub struct PolicyObjects {
    pub cluster_roles: Vec<Arc<Value>>,
    pub roles: Vec<Arc<Value>>,
    pub cluster_role_bindings: Vec<Arc<Value>>,
    pub role_bindings: Vec<Arc<Value>>,
}

fn meta_str<'a>(o: &'a Value, key: &str) -> &'a str {
    o["metadata"][key].as_str().unwrap_or("")
}

impl Policy {
    pub fn compile(rv: u64, objects: &PolicyObjects) -> Policy {
        let mut policy = Policy {
            rv,
            ..Policy::default()
        };
        for r in &objects.cluster_roles {
            policy.cluster_roles.insert(
                meta_str(r, "name").to_string(),
                Rule::list_from_json(&r["rules"]).into(),
            );
        }
        for r in &objects.roles {
            policy
                .roles
                .entry(meta_str(r, "namespace").to_string())
                .or_default()
                .insert(
                    meta_str(r, "name").to_string(),
                    Rule::list_from_json(&r["rules"]).into(),
                );
        }
        let binding = |o: &Value, namespace: &str| {
            let role_kind = o["roleRef"]["kind"].as_str().unwrap_or("").to_string();
            let role_name = o["roleRef"]["name"].as_str().unwrap_or("").to_string();
            Binding {
                name: meta_str(o, "name").to_string(),
                namespace: namespace.to_string(),
                subjects: o["subjects"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .map(|s| BindingSubject::from_json(s, namespace))
                            .collect()
                    })
                    .unwrap_or_default(),
                rules: policy.role_rules(&role_kind, namespace, &role_name),
                role_kind,
                role_name,
            }
        };
        let cluster = objects
            .cluster_role_bindings
            .iter()
            .map(|b| binding(b, ""))
            .collect();
        let mut namespaced: HashMap<String, Vec<Binding>> = HashMap::new();
        for b in &objects.role_bindings {
            let ns = meta_str(b, "namespace");
            if !ns.is_empty() {
                namespaced
                    .entry(ns.to_string())
                    .or_default()
                    .push(binding(b, ns));
            }
        }
        policy.cluster = cluster;
        policy.namespaced = namespaced;
        policy
    }

    /// The rules a binding in `namespace` ("" for a ClusterRoleBinding) refers to, or the
    /// error upstream's `GetRoleReferenceRules` gives.
    pub fn role_rules(
        &self,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Arc<[Rule]>, String> {
        match kind {
            "ClusterRole" => self
                .cluster_roles
                .get(name)
                .cloned()
                .ok_or_else(|| format!("clusterrole.{GROUP} {} not found", q(name))),
            "Role" => self
                .roles
                .get(namespace)
                .and_then(|r| r.get(name))
                .cloned()
                .ok_or_else(|| format!("role.{GROUP} {} not found", q(name))),
            other => Err(format!("unsupported role reference kind: {}", q(other))),
        }
    }

    /// Every rule that applies to `user` in `namespace` (ClusterRoleBindings first, then the
    /// namespace's RoleBindings), until `f` says stop.
    fn visit(&self, user: &User, namespace: &str, f: &mut dyn FnMut(Visit) -> bool) {
        let local = (!namespace.is_empty())
            .then(|| self.namespaced.get(namespace))
            .flatten();
        for b in self.cluster.iter().chain(local.into_iter().flatten()) {
            let Some(subject) = b.subject_for(user) else {
                continue;
            };
            match &b.rules {
                Ok(rules) => {
                    for r in rules.iter() {
                        if !f(Visit::Rule(b, subject, r)) {
                            return;
                        }
                    }
                }
                Err(e) => {
                    if !f(Visit::Error(e)) {
                        return;
                    }
                }
            }
        }
    }

    /// RBAC's answer alone (no privileged group): allowed with the binding that allows it,
    /// else no opinion, with the errors met on the way as the reason.
    pub fn authorize(&self, user: &User, a: &Attributes) -> Decision {
        let namespace = a.resource.as_ref().map_or("", |r| r.namespace.as_str());
        let mut allowed_by = None;
        let mut errors = Vec::new();
        self.visit(user, namespace, &mut |v| match v {
            Visit::Rule(b, s, r) if r.allows(a) => {
                allowed_by = Some(b.describe(s));
                false
            }
            Visit::Rule(..) => true,
            Visit::Error(e) => {
                errors.push(e.to_string());
                true
            }
        });
        match allowed_by {
            Some(source) => Decision {
                allowed: true,
                reason: format!("RBAC: allowed by {source}"),
            },
            None if errors.is_empty() => Decision::default(),
            None => Decision {
                allowed: false,
                reason: format!("RBAC: {}", aggregate(&errors)),
            },
        }
    }

    /// Every rule `user` holds in `namespace`, and the errors resolving them (upstream's
    /// `RulesFor`).
    pub fn rules_for(&self, user: &User, namespace: &str) -> (Vec<Rule>, Vec<String>) {
        let mut rules = Vec::new();
        let mut errors = Vec::new();
        self.visit(user, namespace, &mut |v| {
            match v {
                Visit::Rule(_, _, r) => rules.push(r.clone()),
                Visit::Error(e) => errors.push(e.to_string()),
            }
            true
        });
        (rules, errors)
    }
}

/// Several errors as one, as apimachinery's `utilerrors.NewAggregate(...).Error()` prints
/// them: alone as itself, else de-duplicated in brackets.
pub fn aggregate(errors: &[String]) -> String {
    if let [one] = errors {
        return one.clone();
    }
    let mut seen: Vec<&str> = Vec::new();
    for e in errors {
        if !seen.contains(&e.as_str()) {
            seen.push(e);
        }
    }
    match seen.as_slice() {
        [one] => one.to_string(),
        many => format!("[{}]", many.join(", ")),
    }
}

/// The authorizer chain of a kube-apiserver started with `--authorization-mode=RBAC`, with
/// its compiled policy cached until an RBAC object changes.
#[derive(Default)]
pub struct Authorizer {
    policy: RwLock<Arc<Policy>>,
    /// Held while compiling, so a burst of requests after a change compiles once.
    compiling: Mutex<()>,
}

impl Authorizer {
    pub fn authorize(&self, store: &Store, user: &User, a: &Attributes) -> Decision {
        if user.groups.iter().any(|g| g == PRIVILEGED_GROUP) {
            return Decision {
                allowed: true,
                reason: String::new(),
            };
        }
        self.policy(store).authorize(user, a)
    }

    /// The policy as of the store's last RBAC write.
    pub fn policy(&self, store: &Store) -> Arc<Policy> {
        let current = store.rbac_rv();
        let cached = self.cached();
        if cached.rv == current {
            return cached;
        }
        let _compiling = self.compiling.lock().unwrap_or_else(|p| p.into_inner());
        let cached = self.cached();
        if cached.rv == store.rbac_rv() {
            return cached;
        }
        let (rv, objects) = {
            let t = store.lock();
            let all = |resource: &str| {
                t.range(&ResKey::new(GROUP, resource), None, None)
                    .map(|(_, o)| o.clone())
                    .collect::<Vec<_>>()
            };
            let objects = PolicyObjects {
                cluster_roles: all("clusterroles"),
                roles: all("roles"),
                cluster_role_bindings: all("clusterrolebindings"),
                role_bindings: all("rolebindings"),
            };
            // Read under the lock, which every write holds while moving it.
            (store.rbac_rv(), objects)
        };
        let policy = Arc::new(Policy::compile(rv, &objects));
        *self.policy.write().unwrap_or_else(|p| p.into_inner()) = policy.clone();
        policy
    }

    fn cached(&self) -> Arc<Policy> {
        self.policy
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// kube-apiserver's 403 for a request its authorizers did not allow: the message of its
/// `forbiddenMessage` (with the authorizers' reason after a colon, when they gave one) in a
/// `NewForbidden` Status on the request's group, resource and name.
pub fn forbidden(user: &User, a: &Attributes, reason: &str) -> ApiError {
    let what = match &a.resource {
        None => format!(
            "User {} cannot {} path {}",
            q(&user.name),
            a.verb,
            q(&a.path)
        ),
        Some(r) => {
            let resource = if r.subresource.is_empty() {
                r.resource.clone()
            } else {
                format!("{}/{}", r.resource, r.subresource)
            };
            let scope = if r.namespace.is_empty() {
                "at the cluster scope".to_string()
            } else {
                format!("in the namespace {}", q(&r.namespace))
            };
            format!(
                "User {} cannot {} resource {} in API group {} {scope}",
                q(&user.name),
                a.verb,
                q(&resource),
                q(&r.group)
            )
        }
    };
    let message = if reason.is_empty() {
        what
    } else {
        format!("{what}: {reason}")
    };
    let (group, resource, name) = a.resource.as_ref().map_or(("", "", ""), |r| {
        (r.group.as_str(), r.resource.as_str(), r.name.as_str())
    });
    ApiError::forbidden(Subject::new(group, resource, name), &message)
}

/// A SubjectAccessReview's `spec` as authorizer attributes and the user they are for; the
/// `user`, `groups`, `uid` and `extra` of the spec are ignored when `who` is given (the self
/// reviews ask about the requester).
pub fn review_attributes(spec: &Value, who: Option<&User>) -> (User, Attributes) {
    let user = match who {
        Some(u) => u.clone(),
        None => User {
            name: spec["user"].as_str().unwrap_or("").to_string(),
            uid: spec["uid"].as_str().unwrap_or("").to_string(),
            groups: strings(&spec["groups"]),
            extra: spec["extra"]
                .as_object()
                .map(|m| m.iter().map(|(k, v)| (k.clone(), strings(v))).collect())
                .unwrap_or_default(),
        },
    };
    let attrs = match spec["resourceAttributes"].as_object() {
        Some(r) => {
            let s = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("").to_string();
            let version = s("version");
            Attributes::resource(
                &s("verb"),
                ResourceAttributes {
                    group: s("group"),
                    // An empty version asks about every version.
                    version: if version.is_empty() {
                        "*".into()
                    } else {
                        version
                    },
                    resource: s("resource"),
                    subresource: s("subresource"),
                    name: s("name"),
                    namespace: s("namespace"),
                },
            )
        }
        None => {
            let n = &spec["nonResourceAttributes"];
            Attributes::non_resource(
                n["verb"].as_str().unwrap_or(""),
                n["path"].as_str().unwrap_or(""),
            )
        }
    };
    (user, attrs)
}

/// A SelfSubjectRulesReview's `status` from the rules a user holds in a namespace.
pub fn rules_review_status(rules: &[Rule], errors: &[String]) -> Value {
    let list = |v: &[String]| json!(v);
    let mut resource_rules = Vec::new();
    let mut non_resource_rules = Vec::new();
    for r in rules {
        if !r.resources.is_empty() {
            let mut o = json!({"verbs": list(&r.verbs)});
            for (k, v) in [
                ("apiGroups", &r.api_groups),
                ("resources", &r.resources),
                ("resourceNames", &r.resource_names),
            ] {
                if !v.is_empty() {
                    o[k] = list(v);
                }
            }
            resource_rules.push(o);
        }
        if !r.non_resource_urls.is_empty() {
            non_resource_rules.push(
                json!({"verbs": list(&r.verbs), "nonResourceURLs": list(&r.non_resource_urls)}),
            );
        }
    }
    let mut status = json!({"resourceRules": resource_rules, "nonResourceRules": non_resource_rules,
                            "incomplete": false});
    if !errors.is_empty() {
        status["evaluationError"] = json!(aggregate(errors));
    }
    status
}

/// The bootstrap policy as `(resource, object)` pairs, ClusterRoles first so that bindings
/// find their roles: each object carries its apiVersion and kind and the metadata the real
/// server gave it (the `kubernetes.io/bootstrapping: rbac-defaults` label and the
/// `rbac.authorization.kubernetes.io/autoupdate` annotation).
pub fn bootstrap_objects() -> Vec<(&'static str, Value)> {
    let Ok(policy) = serde_json::from_str::<Value>(BOOTSTRAP_POLICY) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (kind, resource) in [
        ("ClusterRole", "clusterroles"),
        ("Role", "roles"),
        ("ClusterRoleBinding", "clusterrolebindings"),
        ("RoleBinding", "rolebindings"),
    ] {
        for o in policy[kind].as_array().into_iter().flatten() {
            let Some(fields) = o.as_object() else {
                continue;
            };
            let mut obj = serde_json::Map::new();
            obj.insert("apiVersion".into(), json!(format!("{GROUP}/v1")));
            obj.insert("kind".into(), json!(kind));
            for (k, v) in fields {
                obj.insert(k.clone(), v.clone());
            }
            out.push((resource, Value::Object(obj)));
        }
    }
    out
}

#[cfg(test)]
mod tests;
