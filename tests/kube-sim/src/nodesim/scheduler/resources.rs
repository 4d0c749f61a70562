//! What pods ask of nodes and what nodes already hold, as kube-scheduler's
//! NodeResourcesFit counts them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;

use crate::nodesim::quantity;

/// Resource amounts in thousandths (cpu in millicores, memory in milli-bytes), by name.
pub type Resources = BTreeMap<String, i128>;

/// What a node already holds: the sum of its pods' requests and their number.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeUsage {
    pub requested: Resources,
    pub pods: i64,
}

impl NodeUsage {
    pub fn add(&mut self, requests: &Resources) {
        for (k, v) in requests {
            *self.requested.entry(k.clone()).or_default() += v;
        }
        self.pods += 1;
    }
}

/// The effective requests of a pod, as upstream's `PodRequests` computes them: the sum over
/// its containers (and restartable init containers, i.e. sidecars), or the largest single
/// init container if that is more, plus the pod overhead.
pub fn pod_requests(pod: &Pod) -> Resources {
    let mut total = Resources::new();
    let Some(spec) = &pod.spec else { return total };
    let requests_of = |c: &k8s_openapi::api::core::v1::Container| -> Resources {
        let mut r = Resources::new();
        if let Some(res) = c.resources.as_ref() {
            // A limit without a request defaults the request (the API server does this on create;
            // repeated here so a pod from any server counts the same).
            for source in [res.limits.as_ref(), res.requests.as_ref()]
                .into_iter()
                .flatten()
            {
                for (k, q) in source {
                    if let Some(m) = quantity::milli(&q.0) {
                        r.insert(k.clone(), m);
                    }
                }
            }
        }
        r
    };
    let mut sidecars = Resources::new();
    let mut init_peak = Resources::new();
    for c in spec.init_containers.iter().flatten() {
        let r = requests_of(c);
        if c.restart_policy.as_deref() == Some("Always") {
            for (k, v) in r {
                *sidecars.entry(k).or_default() += v;
            }
        } else {
            // A regular init container runs alongside the sidecars started before it.
            for (k, v) in r {
                let with_sidecars = v + sidecars.get(&k).copied().unwrap_or(0);
                let e = init_peak.entry(k).or_default();
                *e = (*e).max(with_sidecars);
            }
        }
    }
    for c in &spec.containers {
        for (k, v) in requests_of(c) {
            *total.entry(k).or_default() += v;
        }
    }
    for (k, v) in sidecars {
        *total.entry(k).or_default() += v;
    }
    for (k, v) in init_peak {
        let e = total.entry(k).or_default();
        *e = (*e).max(v);
    }
    for (k, q) in spec.overhead.iter().flatten() {
        if let Some(m) = quantity::milli(&q.0) {
            *total.entry(k.clone()).or_default() += m;
        }
    }
    total
}
