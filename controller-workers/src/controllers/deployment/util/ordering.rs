//! The orders ReplicaSets are sorted in.

use super::*;
use crate::meta::ResourceNames;

/// Oldest first; ties broken by name so the order is total and stable.
/// A missing timestamp sorts first, like Go's zero time.
pub fn cmp_by_creation_timestamp(a: &ReplicaSet, b: &ReplicaSet) -> Ordering {
    a.metadata
        .creation_timestamp
        .cmp(&b.metadata.creation_timestamp)
        .then_with(|| a.name_str().cmp(b.name_str()))
}

/// Largest first; equal sizes oldest first. Used when scaling up, so the
/// surplus goes to the biggest, oldest ReplicaSets.
pub fn cmp_by_size_older(a: &ReplicaSet, b: &ReplicaSet) -> Ordering {
    replica_set_replicas(b)
        .cmp(&replica_set_replicas(a))
        .then_with(|| cmp_by_creation_timestamp(a, b))
}

/// Largest first; equal sizes newest first. Used when scaling down, so the
/// newest of equally sized ReplicaSets shrinks first.
pub fn cmp_by_size_newer(a: &ReplicaSet, b: &ReplicaSet) -> Ordering {
    replica_set_replicas(b)
        .cmp(&replica_set_replicas(a))
        .then_with(|| cmp_by_creation_timestamp(b, a))
}

/// Lowest revision first; equal revisions by creation timestamp then name.
///
/// Upstream falls back to timestamps whenever either revision is unparsable,
/// which is not a total order (Rust's sort requires one); here unparsable
/// revisions count as 0, the same value a missing annotation has.
pub fn cmp_by_revision(a: &ReplicaSet, b: &ReplicaSet) -> Ordering {
    let rev = |rs: &ReplicaSet| revision(&rs.metadata).unwrap_or(0);
    rev(a)
        .cmp(&rev(b))
        .then_with(|| cmp_by_creation_timestamp(a, b))
}

/// Sorts oldest first (see [`cmp_by_creation_timestamp`]).
pub fn sort_replica_sets_by_creation_timestamp<R: Borrow<ReplicaSet>>(rss: &mut [R]) {
    rss.sort_by(|a, b| cmp_by_creation_timestamp(a.borrow(), b.borrow()));
}

/// Sorts largest first, ties oldest first (see [`cmp_by_size_older`]).
pub fn sort_replica_sets_by_size_older<R: Borrow<ReplicaSet>>(rss: &mut [R]) {
    rss.sort_by(|a, b| cmp_by_size_older(a.borrow(), b.borrow()));
}

/// Sorts largest first, ties newest first (see [`cmp_by_size_newer`]).
pub fn sort_replica_sets_by_size_newer<R: Borrow<ReplicaSet>>(rss: &mut [R]) {
    rss.sort_by(|a, b| cmp_by_size_newer(a.borrow(), b.borrow()));
}

/// Sorts lowest revision first (see [`cmp_by_revision`]).
pub fn sort_replica_sets_by_revision<R: Borrow<ReplicaSet>>(rss: &mut [R]) {
    rss.sort_by(|a, b| cmp_by_revision(a.borrow(), b.borrow()));
}
