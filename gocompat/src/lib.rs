//! The Go-compatibility layer: the apimachinery behaviours both the product
//! (controller-workers, informer-server) and the development cluster (kube-sim, node-sim)
//! must reproduce exactly, written once.
//!
//! - [`quantity`]: `resource.Quantity`, parsed with the API server's messages, written in
//!   Go's canonical `String()` form, with the arithmetic the controllers use.
//! - [`labels`]: the label-selector grammar (`labels.Parse`) with upstream's errors,
//!   matching, and the `metav1.LabelSelector` conversion (`LabelSelectorAsSelector`).
//! - [`fields`]: the field-selector grammar and each resource's selectable field labels.
//! - [`validation`]: qualified-name, label-value and DNS-subdomain validation with
//!   upstream's wording.
//! - [`duration`]: `time.ParseDuration` and `Duration.String()` with Go's limits and
//!   messages.
//! - [`gofmt`]: Go's `%q` quoting, as upstream's messages print strings.
//!
//! Where the product and kube-sim share a behaviour here, tests pin it against answers
//! recorded from a real v1.29 API server (`RKCM_APISERVER_REFERENCE`), so a shared mistake
//! cannot pass both.

pub mod duration;
pub mod fields;
pub mod gofmt;
pub mod labels;
pub mod quantity;
pub mod validation;

#[cfg(test)]
mod recorded;

pub use fields::FieldSelector;
pub use labels::LabelSelector;
pub use quantity::{Format, Quantity, QuantityError};
