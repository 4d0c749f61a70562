//! Request accounting at `/metrics`, in Prometheus text: upstream's
//! `apiserver_request_total` and `apiserver_longrunning_requests` (same names and labels, so
//! a query written for a real apiserver works here), and `kube_sim_watches{resource,
//! user_agent}` so a test can prove how many watches each client holds.

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
        Metrics {
            registry: Mutex::new(registry),
            requests,
            longrunning,
            watches,
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
}
