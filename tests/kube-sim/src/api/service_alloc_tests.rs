use serde_json::{json, Value};

use super::*;

fn sim() -> Sim {
    Sim::new(100, "10.96.0.0/12")
}

fn svc(spec: Value) -> Value {
    json!({"metadata": {"name": "s", "namespace": "default"}, "spec": spec})
}

fn nodeport(ports: Value) -> Value {
    svc(json!({"type": "NodePort", "ports": ports}))
}

fn cause(e: &ApiError) -> (String, String) {
    let c = e
        .details
        .as_deref()
        .map(|d| d["causes"][0].clone())
        .unwrap_or_default();
    (
        c["field"].as_str().unwrap_or("").into(),
        c["message"].as_str().unwrap_or("").into(),
    )
}

#[test]
fn create_allocates_in_range_and_shares_a_port_number() {
    let sim = sim();
    let t = sim.store.lock();
    let mut s = nodeport(json!([
        {"name": "a", "port": 80, "protocol": "TCP"},
        {"name": "b", "port": 80, "protocol": "UDP"},
        {"name": "c", "port": 443, "protocol": "TCP", "nodePort": 30443},
    ]));
    let txn = sim.allocate_service_create(&t, &mut s, "s");
    assert!(txn.is_ok());
    let p = node_ports(&s);
    assert_eq!(p.len(), 3, "{s}");
    assert!((30000..=32767).contains(&p[0]), "{s}");
    assert_eq!(p[0], p[1], "ports with one number share the node port");
    assert_eq!(p[2], 30443);
    assert_eq!(cluster_ip(&s), "10.96.0.1");
}

#[test]
fn refusals_carry_the_allocator_messages() {
    let sim = sim();
    let t = sim.store.lock();
    let mut first = nodeport(json!([{"port": 80, "nodePort": 30080}]));
    let kept = sim.allocate_service_create(&t, &mut first, "a");
    let cases = [
        (
            30080,
            "Invalid value: 30080: provided port is already allocated",
        ),
        (
            80,
            "Invalid value: 80: provided port is not in the valid range. The range of valid ports is 30000-32767",
        ),
    ];
    for (port, message) in cases {
        let mut s = nodeport(json!([{"port": 80, "nodePort": port}]));
        let e = sim
            .allocate_service_create(&t, &mut s, "b")
            .err()
            .unwrap_or_else(|| ApiError::internal("allocated"));
        assert_eq!(e.code, 422);
        assert_eq!(cause(&e), ("spec.ports[0].nodePort".into(), message.into()));
    }
    // The failed creates took nothing: their cluster IPs went back.
    assert!(sim.cluster_ips().reserve("10.96.0.2").is_ok());
    assert!(sim.cluster_ips().reserve("10.96.0.3").is_ok());
    drop(kept);
}

#[test]
fn an_uncommitted_write_gives_its_ports_back() {
    let sim = sim();
    let mut t = sim.store.lock();
    let mut s = nodeport(json!([{"port": 80, "nodePort": 30080}]));
    drop(sim.allocate_service_create(&t, &mut s, "a"));
    let mut again = nodeport(json!([{"port": 80, "nodePort": 30080}]));
    let txn = sim.allocate_service_create(&t, &mut again, "a");
    assert!(txn.is_ok());
    if let Ok(txn) = txn {
        txn.commit(&mut t, &again, false);
    }
    assert!(sim.node_ports().has(30080));
    sim.release_service(&mut t, &again);
    assert!(!sim.node_ports().has(30080));
}

#[test]
fn load_balancers_get_node_ports_and_a_health_check_port_as_asked() {
    let sim = sim();
    let t = sim.store.lock();
    let cases = [
        (json!({}), 1, false),
        (json!({"allocateLoadBalancerNodePorts": false}), 0, false),
        (json!({"externalTrafficPolicy": "Local"}), 1, true),
        (
            json!({"externalTrafficPolicy": "Local", "allocateLoadBalancerNodePorts": false}),
            0,
            true,
        ),
    ];
    for (extra, ports, health) in cases {
        let mut spec = json!({"type": "LoadBalancer", "ports": [{"port": 80}]});
        for (k, v) in extra.as_object().into_iter().flatten() {
            spec[k] = v.clone();
        }
        let mut s = svc(spec);
        let _txn = sim.allocate_service_create(&t, &mut s, "lb");
        assert_eq!(node_ports(&s).len(), ports, "{s}");
        assert_eq!(s["spec"]["healthCheckNodePort"].is_i64(), health, "{s}");
    }
}

#[test]
fn updates_keep_ports_and_type_changes_release_them() {
    let sim = sim();
    let mut t = sim.store.lock();
    let mut old = svc(
        json!({"type": "LoadBalancer", "externalTrafficPolicy": "Local",
                              "allocateLoadBalancerNodePorts": true,
                              "ports": [{"name": "http", "port": 80}]}),
    );
    if let Ok(txn) = sim.allocate_service_create(&t, &mut old, "s") {
        txn.commit(&mut t, &old, false);
    }
    let np = node_ports(&old)[0];
    let hc = int(&old["spec"]["healthCheckNodePort"]);
    // A client that leaves the node ports out keeps them.
    let mut same = old.clone();
    set_node_port(&mut ports_mut(&mut same)[0], 0);
    set_health_check_node_port(&mut same, 0);
    if let Ok(txn) = sim.allocate_service_update(&t, &mut same, &old, "s") {
        txn.commit(&mut t, &same, false);
    }
    assert_eq!(node_ports(&same), vec![np]);
    assert_eq!(int(&same["spec"]["healthCheckNodePort"]), hc);
    // Back to ClusterIP: the fields go and the ports are free again.
    let mut back = same.clone();
    back["spec"]["type"] = json!("ClusterIP");
    if let Ok(txn) = sim.allocate_service_update(&t, &mut back, &same, "s") {
        txn.commit(&mut t, &back, false);
    }
    assert_eq!(node_ports(&back), Vec::<i64>::new(), "{back}");
    assert!(back["spec"].get("healthCheckNodePort").is_none(), "{back}");
    assert!(back["spec"].get("allocateLoadBalancerNodePorts").is_none());
    assert!(back["spec"].get("externalTrafficPolicy").is_none());
    assert!(!sim.node_ports().has(np) && !sim.node_ports().has(hc));
}

#[test]
fn patch_allocated_values_fills_by_port_name_unless_used() {
    let old = nodeport(json!([{"name": "a", "port": 80, "nodePort": 30001},
                              {"name": "b", "port": 81, "nodePort": 30002}]));
    let mut new = nodeport(json!([{"name": "a", "port": 80},
                                  {"name": "b", "port": 81, "nodePort": 30001}]));
    patch_allocated_values(&mut new, &old);
    // 30001 is used by port b now, so port a does not get it back.
    assert_eq!(node_ports(&new), vec![30001]);
    let mut new = nodeport(json!([{"name": "b", "port": 81}]));
    patch_allocated_values(&mut new, &old);
    assert_eq!(node_ports(&new), vec![30002]);
}

#[test]
fn duplicate_node_ports_on_update_are_an_internal_error() {
    let sim = sim();
    let t = sim.store.lock();
    let old = nodeport(json!([{"name": "a", "port": 80, "nodePort": 30001}]));
    let mut new = nodeport(json!([{"name": "a", "port": 80, "nodePort": 30001},
                                  {"name": "b", "port": 81, "nodePort": 30001}]));
    let e = sim.allocate_service_update(&t, &mut new, &old, "s").err();
    assert_eq!(
        e.map(|e| (e.code, e.message)),
        Some((
            500,
            "Internal error occurred: duplicate nodePort: {TCP 30001}".into()
        ))
    );
}
