//! The health monitor (every `--node-monitor-period`): it judges each node by its Ready
//! heartbeat and its Lease, turns a silent node's conditions Unknown, marks the pods of a
//! node that stopped being Ready as not Ready, queues not-Ready nodes on their zone's
//! tainter and sets each zone's eviction rate from its state; and the tainting pass that
//! gives queued nodes their NoExecute taint as fast as their zone's rate allows.

use super::*;

impl Controller {
    /// One pass of the health monitor (`monitorNodeHealth`).
    pub(super) async fn monitor_node_health(self: &Arc<Self>) {
        let started = Instant::now();
        let nodes = self.nodes.list();
        let Classified {
            added,
            deleted,
            new_zones,
        } = self.classify(&nodes);
        for node in &new_zones {
            self.add_zone(node);
        }
        for node in &added {
            let name = node_name(node);
            info!(controller = NAME, node = name, "observed a new node");
            self.node_event(
                name,
                node.metadata.uid.as_deref(),
                NORMAL,
                "RegisteredNode",
                &format!("Registered Node {name} in Controller"),
            );
            lock(&self.known).insert(name.to_string(), node.clone());
            self.add_zone(node);
            if let Err(error) = self.mark_node_as_reachable(node).await {
                warn!(controller = NAME, node = name, error = %error, "cannot remove the NoExecute taints of a new node");
            }
        }
        for node in &deleted {
            let name = node_name(node);
            info!(controller = NAME, node = name, "observed a node deletion");
            self.node_event(
                name,
                node.metadata.uid.as_deref(),
                NORMAL,
                "RemovingNode",
                &format!("Removing Node {name} from Controller"),
            );
            lock(&self.known).remove(name);
            lock(&self.health).remove(name);
        }
        let results: Vec<Option<(String, Option<NodeCondition>)>> =
            futures::stream::iter(nodes.iter().cloned())
                .map(|node| {
                    let controller = self.clone();
                    async move { controller.update_node(node).await }
                })
                .buffer_unordered(NODE_WORKERS)
                .collect()
                .await;
        let mut zone_conditions: HashMap<String, Vec<Option<NodeCondition>>> = HashMap::new();
        for (zone, ready) in results.into_iter().flatten() {
            zone_conditions.entry(zone).or_default().push(ready);
        }
        self.handle_disruption(&zone_conditions, &nodes).await;
        self.metrics
            .update_all_nodes_health
            .observe(started.elapsed().as_secs_f64());
    }

    /// (added, deleted, already known but in a zone not seen yet).
    pub(super) fn classify(&self, nodes: &[Arc<Node>]) -> Classified {
        let known = lock(&self.known);
        let zones = lock(&self.zones);
        let mut added = Vec::new();
        let mut new_zones = Vec::new();
        for node in nodes {
            if !known.contains_key(node_name(node)) {
                added.push(node.clone());
            } else if !zones.states.contains_key(&zones::zone_key(node)) {
                new_zones.push(node.clone());
            }
        }
        let present: HashSet<&str> = nodes.iter().map(|n| node_name(n)).collect();
        let deleted = known
            .iter()
            .filter(|(name, _)| !present.contains(name.as_str()))
            .map(|(_, node)| node.clone())
            .collect();
        Classified {
            added,
            deleted,
            new_zones,
        }
    }

    pub(super) fn add_zone(&self, node: &Node) {
        let zone = zones::zone_key(node);
        let mut zones = lock(&self.zones);
        if !zones.states.contains_key(&zone) {
            info!(controller = NAME, zone = %zone.replace('\0', "\\0"), "initializing eviction metric for zone");
            zones.states.insert(zone.clone(), ZoneState::Initial);
            zones.tainters.insert(
                zone.clone(),
                Tainter::new(self.options.node_eviction_rate, Instant::now()),
            );
            self.metrics.init_zone(&zone);
        }
    }

    /// Judges one node, writes its Unknown conditions if needed, acts on its Ready
    /// condition; returns its zone and Ready condition unless it is excluded from the
    /// zone's state or could not be judged.
    pub(super) async fn update_node(
        &self,
        node: Arc<Node>,
    ) -> Option<(String, Option<NodeCondition>)> {
        let started = Instant::now();
        let name = node_name(&node).to_string();
        let mut node = (*node).clone();
        let mut attempt = 0;
        let assessment = loop {
            let saved = lock(&self.health).get(&name).cloned();
            let assessment = health::assess(
                &node,
                saved.as_ref(),
                self.lease_renew(&name),
                Timestamp::now(),
                self.options.node_monitor_grace_period,
                self.options.node_startup_grace_period,
            );
            let Some(status) = assessment.new_status.clone() else {
                lock(&self.health).insert(name.clone(), assessment.health.clone());
                break assessment;
            };
            let mut updated = node.clone();
            updated.status = Some(status.clone());
            let api: Api<Node> = Api::all(self.client.clone());
            let written = api
                .replace_status(&name, &PostParams::default(), &updated)
                .await
                .map_err(anyhow::Error::new);
            match written {
                Ok(_) => {
                    lock(&self.health).insert(
                        name.clone(),
                        NodeHealth {
                            status,
                            ready_transition: Timestamp::now(),
                            lease_renew: self.lease_renew(&name),
                            ..assessment.health.clone()
                        },
                    );
                    node = updated;
                    break assessment;
                }
                Err(error) => {
                    lock(&self.health).insert(name.clone(), assessment.health.clone());
                    attempt += 1;
                    if attempt >= HEALTH_UPDATE_RETRIES {
                        warn!(controller = NAME, node = %name, error = %crate::controller::describe(&error), "cannot update the node's health; no pods will be evicted this pass");
                        return None;
                    }
                    debug!(controller = NAME, node = %name, error = %crate::controller::describe(&error), "node status update failed; retrying");
                    tokio::time::sleep(HEALTH_RETRY_SLEEP).await;
                    let api: Api<Node> = Api::all(self.client.clone());
                    match api.get_opt(&name).await {
                        Ok(Some(fresh)) => node = fresh,
                        Ok(None) => return None,
                        Err(error) => {
                            warn!(controller = NAME, node = %name, error = %error, "cannot read the node again to retry its health update");
                            return None;
                        }
                    }
                }
            }
        };
        let observed = &assessment.observed_ready;
        if let Some(current) = &assessment.current_ready {
            let pods = self.pods_on(&name);
            self.taint_for_eviction(&node, observed).await;
            let needs_retry = lock(&self.retry_pods).contains(&name);
            let became_not_ready = current.status != "True" && observed.status == "True";
            if became_not_ready {
                self.recorder.event_for(
                    node_reference(&name, node.metadata.uid.as_deref()),
                    NORMAL,
                    "NodeNotReady",
                    format!("Node {name} status is now: NodeNotReady"),
                );
            }
            if became_not_ready || (needs_retry && observed.status != "True") {
                if let Err(error) = self.mark_pods_not_ready(&pods, &name).await {
                    warn!(controller = NAME, node = %name, error = %crate::controller::describe(&error), "will retry marking pods not ready");
                    lock(&self.retry_pods).insert(name.clone());
                    return self.zone_entry(&node, &assessment);
                }
            }
        }
        lock(&self.retry_pods).remove(&name);
        self.metrics
            .update_node_health
            .observe(started.elapsed().as_secs_f64());
        self.zone_entry(&node, &assessment)
    }

    pub(super) fn zone_entry(
        &self,
        node: &Node,
        assessment: &health::Assessment,
    ) -> Option<(String, Option<NodeCondition>)> {
        (!zones::excluded_from_disruption(node))
            .then(|| (zones::zone_key(node), assessment.current_ready.clone()))
    }

    /// What the node's Ready condition (as it reported it) asks of its NoExecute taints
    /// (`processTaintBaseEviction`): a swap at once when it already has the other one,
    /// otherwise a place in its zone's queue; none for a Ready node.
    pub(super) async fn taint_for_eviction(&self, node: &Node, observed: &NodeCondition) {
        let name = node_name(node);
        let not_ready = template(NOT_READY, NO_EXECUTE);
        let unreachable = template(UNREACHABLE, NO_EXECUTE);
        let (wanted, other) = match observed.status.as_str() {
            "False" => (not_ready, unreachable),
            "Unknown" => (unreachable, not_ready),
            "True" => {
                match self.mark_node_as_reachable(node).await {
                    Ok(true) => info!(
                        controller = NAME,
                        node = name,
                        "node is healthy again, removing all taints"
                    ),
                    Ok(false) => {}
                    Err(error) => {
                        warn!(controller = NAME, node = name, error = %crate::controller::describe(&error), "cannot remove the node's NoExecute taints; next pass retries")
                    }
                }
                return;
            }
            _ => return,
        };
        if taints::has_taint(node, &other) {
            if let Err(error) = taints::swap_taints(&self.client, node, &[wanted], &[other]).await {
                warn!(controller = NAME, node = name, error = %crate::controller::describe(&error), "cannot swap the node's NoExecute taint; next pass retries");
            }
            return;
        }
        let zone = zones::zone_key(node);
        let mut zones = lock(&self.zones);
        let Some(tainter) = zones.tainters.get_mut(&zone) else {
            return;
        };
        // A node queued for the other taint is queued again for this one.
        if !taints::has_taint(node, &wanted) {
            tainter.remove(name);
        }
        if tainter.add(name, Instant::now()) {
            info!(controller = NAME, node = name, status = %observed.status, "node is not ready; queued for its NoExecute taint");
        }
    }

    /// Removes both NoExecute taints and forgets the node in its zone's queue; says
    /// whether it was queued (`markNodeAsReachable`).
    pub(super) async fn mark_node_as_reachable(&self, node: &Node) -> anyhow::Result<bool> {
        let remove = [
            template(UNREACHABLE, NO_EXECUTE),
            template(NOT_READY, NO_EXECUTE),
        ];
        if remove.iter().any(|t| taints::has_taint(node, t)) {
            taints::swap_taints(&self.client, node, &[], &remove).await?;
        }
        let zone = zones::zone_key(node);
        Ok(lock(&self.zones)
            .tainters
            .get_mut(&zone)
            .is_some_and(|tainter| tainter.remove(node_name(node))))
    }

    /// Drains every zone's queue as far as its rate allows (`doNoExecuteTaintingPass`).
    pub(super) async fn no_execute_tainting_pass(&self) {
        let zone_keys: Vec<String> = lock(&self.zones).tainters.keys().cloned().collect();
        for zone in zone_keys {
            loop {
                let due = lock(&self.zones)
                    .tainters
                    .get_mut(&zone)
                    .and_then(|tainter| tainter.next_due(Instant::now()));
                let Some(due) = due else { break };
                let done = self.taint_now(&due.node).await;
                if let Some(tainter) = lock(&self.zones).tainters.get_mut(&zone) {
                    tainter.finish(&due.node, done, Duration::ZERO, Instant::now());
                }
            }
        }
    }

    /// Gives one queued node the NoExecute taint its Ready condition calls for; false to
    /// try again.
    pub(super) async fn taint_now(&self, name: &str) -> bool {
        let Some(node) = self.nodes.get(name) else {
            return true;
        };
        let ready = taints::conditions_of(&node)
            .iter()
            .find(|c| c.type_ == "Ready")
            .map(|c| c.status.clone());
        let not_ready = template(NOT_READY, NO_EXECUTE);
        let unreachable = template(UNREACHABLE, NO_EXECUTE);
        let (wanted, other) = match ready.as_deref() {
            Some("False") => (not_ready, unreachable),
            Some("Unknown") => (unreachable, not_ready),
            _ => return true,
        };
        match taints::swap_taints(&self.client, &node, &[wanted], &[other]).await {
            Ok(_) => {
                self.metrics.eviction(&zones::zone_key(&node));
                true
            }
            Err(error) => {
                warn!(controller = NAME, node = name, error = %crate::controller::describe(&error), "cannot taint the node; retrying");
                false
            }
        }
    }

    /// Zone states, rates and the all-zones-down mode (`handleDisruption`).
    pub(super) async fn handle_disruption(
        &self,
        zone_conditions: &HashMap<String, Vec<Option<NodeCondition>>>,
        nodes: &[Arc<Node>],
    ) {
        let mut new_states = HashMap::new();
        let mut all_down_now = true;
        {
            let mut zones = lock(&self.zones);
            for (zone, conditions) in zone_conditions {
                let (unhealthy, state) =
                    zones::zone_state(conditions, self.options.unhealthy_zone_threshold);
                self.metrics.set_zone(zone, conditions.len(), unhealthy);
                if state != ZoneState::FullDisruption {
                    all_down_now = false;
                }
                new_states.insert(zone.clone(), state);
                zones
                    .states
                    .entry(zone.clone())
                    .or_insert(ZoneState::Initial);
            }
        }
        let all_down_before = {
            let mut zones = lock(&self.zones);
            let gone: Vec<String> = zones
                .states
                .keys()
                .filter(|zone| !zone_conditions.contains_key(*zone))
                .cloned()
                .collect();
            for zone in &gone {
                self.metrics.set_zone(zone, 0, 0);
                zones.states.remove(zone);
            }
            zones
                .states
                .values()
                .all(|state| *state == ZoneState::FullDisruption)
        };
        if all_down_now && all_down_before {
            return;
        }
        if all_down_now {
            info!(
                controller = NAME,
                "all nodes are not ready: entering master disruption mode, no evictions"
            );
            for node in nodes {
                if let Err(error) = self.mark_node_as_reachable(node).await {
                    warn!(controller = NAME, node = node_name(node), error = %crate::controller::describe(&error), "cannot remove the node's NoExecute taints");
                }
            }
            let mut zones = lock(&self.zones);
            let now = Instant::now();
            let keys: Vec<String> = zones.states.keys().cloned().collect();
            for zone in keys {
                if let Some(tainter) = zones.tainters.get_mut(&zone) {
                    tainter.swap_limiter(0.0, now);
                }
                zones.states.insert(zone, ZoneState::FullDisruption);
            }
            return;
        }
        let now = Instant::now();
        if all_down_before {
            info!(
                controller = NAME,
                "some nodes are ready again: leaving master disruption mode"
            );
            let wall = Timestamp::now();
            {
                let mut health = lock(&self.health);
                for node in nodes {
                    if let Some(entry) = health.get_mut(node_name(node)) {
                        entry.probe = wall;
                        entry.ready_transition = wall;
                    }
                }
            }
            let mut zones = lock(&self.zones);
            let keys: Vec<String> = zones.states.keys().cloned().collect();
            for zone in keys {
                let state = new_states.get(&zone).copied().unwrap_or(ZoneState::Normal);
                self.set_rate(&mut zones, &zone, zone_conditions, state, now);
                zones.states.insert(zone, state);
            }
            return;
        }
        let mut zones = lock(&self.zones);
        let keys: Vec<String> = zones.states.keys().cloned().collect();
        for zone in keys {
            let Some(state) = new_states.get(&zone).copied() else {
                continue;
            };
            if zones.states.get(&zone) == Some(&state) {
                continue;
            }
            info!(controller = NAME, zone = %zone.replace('\0', "\\0"), state = ?state, "zone is now in a new state");
            self.set_rate(&mut zones, &zone, zone_conditions, state, now);
            zones.states.insert(zone, state);
        }
    }

    pub(super) fn set_rate(
        &self,
        zones: &mut Zones,
        zone: &str,
        zone_conditions: &HashMap<String, Vec<Option<NodeCondition>>>,
        state: ZoneState,
        now: Instant,
    ) {
        let size = zone_conditions.get(zone).map_or(0, Vec::len);
        let rate = zones::zone_rate(
            state,
            size,
            self.options.node_eviction_rate,
            self.options.secondary_node_eviction_rate,
            self.options.large_cluster_size_threshold,
        );
        if let Some(tainter) = zones.tainters.get_mut(zone) {
            tainter.swap_limiter(rate, now);
        }
    }
}
