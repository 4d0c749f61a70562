use super::*;

fn list(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

#[test]
fn gated_and_cloud_controllers_run_only_where_kcm_runs_them() {
    let mut options = ControllerOptions::default();
    let selected = [
        "deployment-controller",
        "service-cidr-controller",
        "storageversion-garbage-collector-controller",
        "service-lb-controller",
    ];
    let split = runnable(&selected, &options);
    assert_eq!(
        split.run,
        ["deployment-controller", "service-lb-controller"]
    );
    assert_eq!(
        split.skipped[1],
        (
            "storageversion-garbage-collector-controller",
            "Controller is disabled by a feature gate (requiredFeatureGates: APIServerIdentity, StorageVersionAPI)".to_string()
        )
    );
    options.generic.feature_gates = vec![
        "MultiCIDRServiceAllocator=true,StorageVersionAPI=true"
            .parse()
            .unwrap(),
        "APIServerIdentity=false".parse().unwrap(),
    ];
    options.generic.cloud_provider = "external".into();
    let split = runnable(&selected, &options);
    assert_eq!(
        split.run,
        ["deployment-controller", "service-cidr-controller"]
    );
    assert_eq!(split.skipped.len(), 2);
    assert!(split.skipped[1]
        .1
        .starts_with("Skipping a cloud provider controller"));
}

#[test]
fn star_aliases_and_negation() {
    let all = select(&list(&["*"])).unwrap();
    assert!(all.contains(&"deployment-controller"));
    assert!(all.contains(&"replicaset-controller"));
    assert!(all.contains(&"serviceaccount-controller"));
    let without = select(&list(&["*", "-deployment"])).unwrap();
    assert!(!without.contains(&"deployment-controller"));
    assert_eq!(
        select(&list(&["replicaset,deployment-controller"])).unwrap(),
        vec!["deployment-controller", "replicaset-controller"]
    );
    let without_svgc = select(&list(&["-storage-version-gc", "*"])).unwrap();
    assert!(all.contains(&"storageversion-garbage-collector-controller"));
    assert_eq!(
        without_svgc,
        all.iter()
            .copied()
            .filter(|c| *c != "storageversion-garbage-collector-controller")
            .collect::<Vec<_>>(),
        "negation by alias removes a feature-gated controller `*` selected"
    );
    let without_gc = select(&list(&["-garbagecollector", "*"])).unwrap();
    assert!(!without_gc.contains(&"garbage-collector-controller"));
    assert!(all.contains(&"garbage-collector-controller"));
}

/// Each controller's ServiceAccount is the one the recorded API server's bootstrap
/// policy binds to its `system:controller:*` role (checked when the record is there).
#[test]
fn service_accounts_are_the_bootstrap_policy_subjects() {
    let Ok(dir) = std::env::var("RKCM_APISERVER_REFERENCE") else {
        return;
    };
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(dir);
    let text = std::fs::read_to_string(dir.join("rbac/bootstrap-policy.json"))
        .expect("the recorded bootstrap policy");
    let policy: serde_json::Value = serde_json::from_str(&text).unwrap();
    let bound: BTreeSet<&str> = ["ClusterRoleBinding", "RoleBinding"]
        .iter()
        .flat_map(|kind| policy[kind].as_array().into_iter().flatten())
        .filter(|binding| {
            binding["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("system:controller:"))
        })
        .flat_map(|binding| binding["subjects"].as_array().into_iter().flatten())
        .filter(|subject| {
            subject["kind"] == "ServiceAccount" && subject["namespace"] == "kube-system"
        })
        .filter_map(|subject| subject["name"].as_str())
        .collect();
    for descriptor in CONTROLLERS {
        let Some(account) = descriptor.service_account else {
            continue;
        };
        // Controllers behind gates that are off in 1.29, or run only with a cloud
        // provider, get their roles from elsewhere.
        if matches!(descriptor.availability, FeatureGated(_) | Cloud)
            && !matches!(account, "service-controller" | "route-controller")
        {
            continue;
        }
        assert!(
            bound.contains(account),
            "{}: no bootstrap binding for ServiceAccount {account}",
            descriptor.name
        );
    }
}

/// What each controller's `build` asks the informers for is what its descriptor
/// declares (the launcher warms exactly the declared list on a standby).
#[tokio::test]
async fn each_controller_reads_what_it_declares() {
    use std::sync::Arc;
    let informer =
        rkcm_client::informer::connect("unix:///nonexistent/informer.sock", None).unwrap();
    let config = kube::Config::new("https://127.0.0.1:1".parse().unwrap());
    for descriptor in CONTROLLERS {
        let implementation = &descriptor.implementation;
        let informers = Arc::new(crate::factory::Informers::new(
            informer.clone(),
            "test".into(),
            std::time::Duration::from_secs(3600),
        ));
        let context = ControllerContext {
            informers: informers.clone(),
            clients: crate::client::ClientFactory::from_config(config.clone(), 20.0, 30, None)
                .unwrap(),
            metrics: crate::metrics::Metrics::new(),
            ready_checks: std::default::Default::default(),
        };
        let built = (implementation.build)(&context, &ControllerOptions::default()).unwrap();
        if built.is_empty() {
            // Disabled by its defaults (the token controller without a key file): it
            // reads nothing; its own tests check what it reads when it runs.
            continue;
        }
        let mut declared: Vec<String> = implementation
            .resources
            .iter()
            .map(|r| r.to_string())
            .collect();
        declared.sort();
        assert_eq!(informers.resources(), declared, "{}", descriptor.name);
    }
}

#[test]
fn options_have_kcms_defaults_once() {
    let options = ControllerOptions::default();
    assert_eq!(options.deployment.concurrent_deployment_syncs, 5);
    assert_eq!(options.daemonset.concurrent_daemonset_syncs, 2);
    assert_eq!(options.garbage_collector.concurrent_gc_syncs, 20);
    assert_eq!(options.ephemeral_volume.concurrent_ephemeralvolume_syncs, 5);
    assert!(options.garbage_collector.enable_garbage_collector);
    assert_eq!(
        options.namespace.namespace_sync_period,
        std::time::Duration::from_secs(300)
    );
    let flags = ControllerOptions::flags();
    assert!(flags.contains(&"concurrent-rc-syncs".to_string()));
    let unique: BTreeSet<&String> = flags.iter().collect();
    assert_eq!(unique.len(), flags.len(), "no flag is defined twice");
}

#[test]
fn sharding_splits_namespaced_keys_and_refuses_the_rest() {
    assert_eq!(
        whole_resources(&["daemonset-controller", "deployment-controller"]),
        vec!["v1/nodes"]
    );
    assert_eq!(sharding_refusal(&["deployment-controller"]), None);
    assert_eq!(sharding_refusal(&["garbage-collector-controller"]), None);
    let refusal = sharding_refusal(&["deployment-controller", "ttl-controller"])
        .expect("the ttl controller is refused");
    assert!(refusal.starts_with("ttl-controller cannot be sharded"));
    // Every whole resource is one the controller reads.
    for descriptor in CONTROLLERS {
        if let Implementation {
            sharding: Sharding::ByNamespace { whole },
            resources,
            ..
        } = &descriptor.implementation
        {
            for resource in *whole {
                assert!(
                    resources.contains(resource),
                    "{}: {resource}",
                    descriptor.name
                );
            }
        }
    }
}

#[test]
fn errors_say_what_is_wrong() {
    assert_eq!(
        select(&list(&["frobnicator"])),
        Err(SelectionError::Unknown("frobnicator".into()))
    );
    assert_eq!(select(&list(&[""])), Err(SelectionError::Empty));
    // Every controller of KCM 1.29 is one rkcm has: naming any is accepted.
    for descriptor in CONTROLLERS {
        assert_eq!(
            select(&list(&[descriptor.name])),
            Ok(vec![descriptor.name]),
            "{}",
            descriptor.name
        );
    }
}
