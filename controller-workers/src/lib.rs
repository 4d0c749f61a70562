//! rkcm's controller-workers: the processes that run KCM's controllers.
//!
//! A worker holds local stores fed by the informer-server's stream ([`informer`]), turns
//! their changes into keys on client-go-style work queues ([`queue`]), and runs each
//! controller's reconcile on those keys, writing straight to the API server. Shared
//! controller machinery (expectations, owner-reference adoption, pod creation, events)
//! lives beside the runtime, as upstream's `controller_utils`; each controller has its
//! own folder under [`controllers`].

pub mod api_errors;
mod api_types;
pub mod client;
pub mod cloud;
pub mod controller;
pub mod controller_ref;
pub mod controllers;
pub mod credentials;
pub mod endpointutil;
pub mod expectations;
pub mod factory;
pub mod features;
pub mod flags;
pub mod generic_options;
pub mod history;
pub mod informer;
mod locks;
mod meta;
pub mod metrics;
pub mod pod_control;
pub mod pods;
pub mod projection;
pub mod queue;
pub mod rate_limiter;
pub mod recorder;
pub mod registry;
pub mod scheduling;
pub mod selector;
pub mod store;
pub mod volume_util;
pub mod worker;
