//! Request accounting at `/metrics`, in Prometheus text: upstream's
//! `apiserver_request_total` and `apiserver_longrunning_requests` (same names and labels, so
//! a query written for a real apiserver works here), and `kube_sim_watches{resource,
//! user_agent}` so a test can prove how many watches each client holds, and
//! `kube_sim_requests_by_user_total{user, verb, group, resource, subresource, code}` so it can
//! prove which identity made which requests.

use std::collections::HashMap;
use std::sync::Mutex;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::resources::ResourceDef;

type Labels = Vec<(String, String)>;

pub struct Metrics {
    registry: Mutex<Registry>,
    requests: Family<Labels, Counter>,
    longrunning: Family<Labels, Gauge>,
    watches: Family<Labels, Gauge>,
    by_user: Family<Labels, Counter>,
    /// The same counters as `by_user`, by their label values, so they can be read back.
    by_user_index: Mutex<HashMap<UserRequestKey, Counter>>,
}

/// `user`, `verb`, `group`, `resource`, `subresource` and `code` joined by NUL (which no
/// label value holds): one allocation per request to find its counter.
type UserRequestKey = String;

const KEY_SEPARATOR: char = '\0';

/// How many requests one identity made of one kind, from `kube_sim_requests_by_user_total`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct UserRequests {
    pub user: String,
    /// The authorizer's verb: `create`, `update`, `patch`, `delete`, `get`, `list`, `watch`, ...
    pub verb: String,
    pub group: String,
    pub resource: String,
    pub subresource: String,
    pub code: u16,
    pub count: u64,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

/// Keeps a watch counted while it is open.
pub struct WatchGuard {
    longrunning: Gauge,
    watches: Gauge,
}

impl Drop for WatchGuard {
    fn drop(&mut self) {
        self.longrunning.dec();
        self.watches.dec();
    }
}

/// The product part of a user agent (`kubectl/v1.32.4 (linux/amd64) ...` -> `kubectl/v1.32.4`).
fn agent(ua: &str) -> String {
    ua.split_whitespace().next().unwrap_or("").to_string()
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let requests = Family::<Labels, Counter>::default();
        let longrunning = Family::<Labels, Gauge>::default();
        let watches = Family::<Labels, Gauge>::default();
        let by_user = Family::<Labels, Counter>::default();
        registry.register(
            "apiserver_request",
            "Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code.",
            requests.clone(),
        );
        registry.register(
            "apiserver_longrunning_requests",
            "Gauge of all active long-running apiserver requests broken out by verb, group, version, resource, scope and component. Not all requests are tracked this way.",
            longrunning.clone(),
        );
        registry.register(
            "kube_sim_watches",
            "Open watches per resource and client user agent.",
            watches.clone(),
        );
        registry.register(
            "kube_sim_requests_by_user",
            "Resource requests per authenticated (or impersonated) user, authorizer verb, group, resource, subresource and HTTP response code.",
            by_user.clone(),
        );
        Metrics {
            registry: Mutex::new(registry),
            requests,
            longrunning,
            watches,
            by_user,
            by_user_index: Mutex::new(HashMap::new()),
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub fn request(
        &self,
        verb: &str,
        group: &str,
        version: &str,
        resource: &str,
        subresource: &str,
        scope: &str,
        code: u16,
    ) {
        self.requests
            .get_or_create(&vec![
                ("code".into(), code.to_string()),
                ("component".into(), "apiserver".into()),
                ("dry_run".into(), String::new()),
                ("group".into(), group.into()),
                ("resource".into(), resource.into()),
                ("scope".into(), scope.into()),
                ("subresource".into(), subresource.into()),
                ("verb".into(), verb.into()),
                ("version".into(), version.into()),
            ])
            .inc();
    }

    /// Counts one resource request of `user` (after impersonation).
    pub fn request_by_user(
        &self,
        user: &str,
        verb: &str,
        group: &str,
        resource: &str,
        subresource: &str,
        code: u16,
    ) {
        let s = KEY_SEPARATOR;
        let key: UserRequestKey =
            format!("{user}{s}{verb}{s}{group}{s}{resource}{s}{subresource}{s}{code}");
        let mut index = self.by_user_index.lock().unwrap_or_else(|p| p.into_inner());
        let counter = index.entry(key).or_insert_with(|| {
            self.by_user
                .get_or_create(&vec![
                    ("user".into(), user.into()),
                    ("verb".into(), verb.into()),
                    ("group".into(), group.into()),
                    ("resource".into(), resource.into()),
                    ("subresource".into(), subresource.into()),
                    ("code".into(), code.to_string()),
                ])
                .clone()
        });
        counter.inc();
    }

    /// Every `kube_sim_requests_by_user_total` series, sorted.
    pub fn requests_by_user(&self) -> Vec<UserRequests> {
        let index = self.by_user_index.lock().unwrap_or_else(|p| p.into_inner());
        let mut out: Vec<UserRequests> = index
            .iter()
            .filter_map(|(key, c)| {
                let mut parts = key.split(KEY_SEPARATOR).map(String::from);
                Some(UserRequests {
                    user: parts.next()?,
                    verb: parts.next()?,
                    group: parts.next()?,
                    resource: parts.next()?,
                    subresource: parts.next()?,
                    code: parts.next()?.parse().ok()?,
                    count: c.get(),
                })
            })
            .collect();
        out.sort();
        out
    }

    pub fn watch_opened(&self, def: &ResourceDef, user_agent: &str) -> WatchGuard {
        let longrunning = self
            .longrunning
            .get_or_create(&vec![
                ("component".into(), "apiserver".into()),
                ("group".into(), def.group.clone()),
                ("resource".into(), def.resource.clone()),
                (
                    "scope".into(),
                    if def.namespaced {
                        "namespace".into()
                    } else {
                        "cluster".into()
                    },
                ),
                ("subresource".into(), String::new()),
                ("verb".into(), "WATCH".into()),
                ("version".into(), def.version.clone()),
            ])
            .clone();
        let resource = def.qualified_resource();
        let watches = self
            .watches
            .get_or_create(&vec![
                ("resource".into(), resource),
                ("user_agent".into(), agent(user_agent)),
            ])
            .clone();
        longrunning.inc();
        watches.inc();
        WatchGuard {
            longrunning,
            watches,
        }
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        let reg = self.registry.lock().unwrap_or_else(|p| p.into_inner());
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &reg);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watch_gauges_follow_open_watches() {
        let m = Metrics::new();
        let reg = crate::resources::Registry::builtin();
        let pods = reg.lookup("", "v1", "pods").unwrap();
        let g = m.watch_opened(&pods, "rkcm-informer-server/0.1.0 (linux)");
        let text = m.render();
        assert!(
            text.contains(
                "kube_sim_watches{resource=\"pods\",user_agent=\"rkcm-informer-server/0.1.0\"} 1"
            ),
            "{text}"
        );
        assert!(text.contains(
            "apiserver_longrunning_requests{component=\"apiserver\",group=\"\",resource=\"pods\""
        ));
        drop(g);
        assert!(m
            .render()
            .contains("user_agent=\"rkcm-informer-server/0.1.0\"} 0"));
        m.request("GET", "", "v1", "pods", "", "namespace", 200);
        assert!(m.render().contains("apiserver_request_total{code=\"200\""));
    }

    #[test]
    fn requests_are_counted_per_user() {
        let m = Metrics::new();
        let sa = "system:serviceaccount:kube-system:deployment-controller";
        m.request_by_user(sa, "create", "apps", "replicasets", "", 201);
        m.request_by_user(sa, "create", "apps", "replicasets", "", 201);
        m.request_by_user(sa, "update", "apps", "deployments", "status", 200);
        assert!(m.render().contains(&format!(
            "kube_sim_requests_by_user_total{{user=\"{sa}\",verb=\"create\",group=\"apps\",resource=\"replicasets\",subresource=\"\",code=\"201\"}} 2"
        )));
        let counts = m.requests_by_user();
        assert_eq!(counts.len(), 2);
        assert_eq!(
            counts[0],
            UserRequests {
                user: sa.into(),
                verb: "create".into(),
                group: "apps".into(),
                resource: "replicasets".into(),
                subresource: String::new(),
                code: 201,
                count: 2
            }
        );
    }
}
