//! The packing rules: at most max per slice, reuse, no rebalancing, recycling, the
//! placeholder.

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

use super::super::reconciler::recycle;
use super::*;

#[test]
fn endpoints_are_packed_into_slices_of_at_most_max() {
    let nodes = nodes();
    let svc = service(json!({}));
    let all = pods(250);
    let plan = planner(&nodes, 100, None).plan_address_type(&svc, &all, &[], "IPv4");
    let slices = apply(&[], &plan);
    assert_eq!(sizes(&slices), vec![100, 100, 50]);
    let ips = addresses(&slices);
    assert_eq!(ips.len(), 250);
    assert_eq!(
        ips.iter().collect::<BTreeSet<_>>().len(),
        250,
        "each IP once"
    );

    // Nothing changed: nothing written.
    let again = planner(&nodes, 100, None).plan_address_type(&svc, &all, &slices, "IPv4");
    assert!(again.to_create.is_empty() && again.to_update.is_empty() && again.to_delete.is_empty());

    // With 20 per slice.
    let plan = planner(&nodes, 20, None).plan_address_type(&svc, &all, &[], "IPv4");
    let small = apply(&[], &plan);
    assert_eq!(small.len(), 13);
    assert!(sizes(&small).iter().all(|n| *n <= 20));
    assert_eq!(addresses(&small).len(), 250);
}

#[test]
fn new_endpoints_reuse_slices_by_upstreams_rules() {
    let nodes = nodes();
    let svc = service(json!({}));
    let p = planner(&nodes, 100, None);
    let all = pods(400);
    // Existing: a full slice (100) and a half one (50).
    let existing = apply(&[], &p.plan_address_type(&svc, &all[..150], &[], "IPv4"));
    assert_eq!(sizes(&existing), vec![100, 50]);

    // 30 more, fewer than a slice's worth: into the unchanged slice they fill most
    // exactly (the half one), no new slice.
    let plan = p.plan_address_type(&svc, &all[..180], &existing, "IPv4");
    assert!(plan.to_create.is_empty());
    assert_eq!(plan.to_update.len(), 1);
    assert_eq!(plan.to_update[0].endpoints.len(), 80);
    let existing = apply(&existing, &plan);
    assert_eq!(sizes(&existing), vec![100, 80]);

    // 30 more do not fit any slice: a new one.
    let plan = p.plan_address_type(&svc, &all[..210], &existing, "IPv4");
    assert!(plan.to_update.is_empty());
    assert_eq!(plan.to_create.len(), 1);
    assert_eq!(plan.to_create[0].endpoints.len(), 30);
    let existing = apply(&existing, &plan);
    assert_eq!(sizes(&existing), vec![100, 80, 30]);

    // One endpoint gone from the full slice and 15 new: the slice being updated anyway
    // is filled first, the rest goes to the unchanged slice it fills most exactly.
    let mut next: Vec<Arc<Pod>> = all[1..210].to_vec();
    next.extend_from_slice(&all[210..225]);
    let plan = p.plan_address_type(&svc, &next, &existing, "IPv4");
    assert!(plan.to_create.is_empty());
    assert_eq!(plan.removed, 1);
    assert_eq!(plan.added, 15);
    let mut updated: Vec<usize> = plan.to_update.iter().map(|s| s.endpoints.len()).collect();
    updated.sort();
    assert_eq!(
        updated,
        vec![94, 100],
        "the full slice refilled, the rest into the 80"
    );
    let existing = apply(&existing, &plan);
    assert_eq!(addresses(&existing).len(), 224);

    // A whole slice's worth or more: new slices, unchanged ones left alone.
    let plan = p.plan_address_type(&svc, &all[1..400], &existing, "IPv4");
    assert!(plan.to_update.is_empty(), "no rebalancing");
    let created: Vec<usize> = plan.to_create.iter().map(|s| s.endpoints.len()).collect();
    assert_eq!(created, vec![100, 75]);
}

#[test]
fn a_slice_that_would_be_deleted_is_recycled_for_a_new_one() {
    let nodes = nodes();
    let svc = service(json!({}));
    let p = planner(&nodes, 100, None);
    let all = pods(20);
    let existing = apply(&[], &p.plan_address_type(&svc, &all[..10], &[], "IPv4"));
    let old_name = existing[0].metadata.name.clone();
    // Every old pod replaced by a new one.
    let mut plan = p.plan_address_type(&svc, &all[10..], &existing, "IPv4");
    assert_eq!((plan.to_create.len(), plan.to_delete.len()), (1, 1));
    recycle(
        &svc,
        &mut plan.to_create,
        &mut plan.to_update,
        &mut plan.to_delete,
    );
    assert!(plan.to_create.is_empty() && plan.to_delete.is_empty());
    assert_eq!(plan.to_update.len(), 1);
    assert_eq!(plan.to_update[0].metadata.name, old_name);
    assert_eq!(plan.to_update[0].endpoints.len(), 10);

    // Not a slice another Service (an older one of the same name) owns.
    let other = service(json!({"metadata": {"uid": "new-uid"}}));
    let mut plan = p.plan_address_type(&other, &all[10..], &existing, "IPv4");
    assert_eq!(
        (plan.to_create.len(), plan.to_delete.len()),
        (1, 1),
        "replaced"
    );
    recycle(
        &other,
        &mut plan.to_create,
        &mut plan.to_update,
        &mut plan.to_delete,
    );
    assert_eq!(
        (
            plan.to_create.len(),
            plan.to_delete.len(),
            plan.to_update.len()
        ),
        (1, 1, 0)
    );
}

#[test]
fn a_service_without_endpoints_keeps_one_placeholder() {
    let nodes = nodes();
    let svc = service(json!({}));
    let p = planner(&nodes, 100, None);
    let plan = p.plan_address_type(&svc, &[], &[], "IPv4");
    assert_eq!(plan.to_create.len(), 1);
    let placeholder = &plan.to_create[0];
    assert!(placeholder.endpoints.is_empty());
    assert_eq!(placeholder.ports.as_deref(), Some(&[][..]));
    let existing = apply(&[], &plan);

    // Kept as it is.
    let plan = p.plan_address_type(&svc, &[], &existing, "IPv4");
    assert!(plan.to_create.is_empty() && plan.to_update.is_empty() && plan.to_delete.is_empty());

    // Pods arrive: the placeholder goes, recycled into the new slice.
    let mut plan = p.plan_address_type(&svc, &pods(2), &existing, "IPv4");
    assert_eq!((plan.to_create.len(), plan.to_delete.len()), (1, 1));
    recycle(
        &svc,
        &mut plan.to_create,
        &mut plan.to_update,
        &mut plan.to_delete,
    );
    assert_eq!(plan.to_update.len(), 1);
    let existing = apply(&existing, &plan);
    assert_eq!(sizes(&existing), vec![2]);

    // And they all go: the slice is emptied and a placeholder put in its place.
    let mut plan = p.plan_address_type(&svc, &[], &existing, "IPv4");
    assert_eq!((plan.to_create.len(), plan.to_delete.len()), (1, 1));
    recycle(
        &svc,
        &mut plan.to_create,
        &mut plan.to_update,
        &mut plan.to_delete,
    );
    assert_eq!(plan.to_update.len(), 1);
    assert!(plan.to_update[0].endpoints.is_empty());
}
