//! Field ownership: `metadata.managedFields`, as kube-apiserver keeps it.
//!
//! Every write names a manager (the `fieldManager` parameter, else the client's user agent up
//! to its first `/`). An update's manager takes the fields the write added or changed, compared
//! with the object before it (for a create: the empty object of the kind, as Go serialises it,
//! so struct fields Go always writes are not "added"); other managers lose what the write
//! changed or removed. A server-side apply's manager owns exactly the fields of its
//! configuration, and a change to a field another manager owns is a conflict (HTTP 409) unless
//! forced. The comparison is made after defaulting and before admission and the strategy, so
//! defaults count as the writer's and admission's additions (service account volume, pod
//! priority, tolerations) do not.
//!
//! Sets are trees of path elements (`f:name`, `k:{"name":"c"}`, `v:"x"`, `i:0`); a node that is
//! itself in the set and has children carries `.`. How a list or map is walked depends on the
//! field's type: lists keyed by fields (containers by name, ports by port and protocol), sets
//! of scalars (finalizers), and atomic values (label selectors, tolerations, a Service's
//! selector) that are owned as one leaf. The OpenAPI definitions of the built-in types say
//! which (see [`schema`]); a custom resource is a map of what it holds.
//!
//! Submodules by concern: `field_set` (paths and sets), `types` and `schema` (how each field
//! is walked), `walk` (comparing objects, their field sets), `managers` (the
//! `managedFields` entries), `operation` (what one write does to them, and apply conflicts).

mod field_set;
mod managers;
mod operation;
mod schema;
mod types;
mod walk;

pub use field_set::{display_path, FieldSet, Pe};
pub use managers::{decode, encode, Entry};
pub use operation::{manager_name, Conflicts, Operation};
pub use types::{as_converted, zero_object, ElemTy, Ty};
pub use walk::{compare, remove_path, to_field_set, Comparison};

#[cfg(test)]
mod tests;
