//! rkcm's informer-server: the one process that lists and watches the API server, once
//! per resource whatever the number of workers, caches the objects, and serves the cache
//! over gRPC (`rkcm.informer.v1`): List and Get from the cache, Watch as a resumable stream
//! of typed deltas with a coalescing queue per subscriber.
//!
//! Object flow: [`reflector`] (LIST+WATCH) -> [`cache`] (objects, indexes, history) ->
//! [`subscriber_queue`] (one per Watch) -> [`service`] (the gRPC stream). The other end,
//! used by controller workers, is the `rkcm-client` crate's `informer` module.

pub mod cache;
pub mod informers;
pub mod metrics;
pub mod object;
pub mod projection;
pub mod readable;
pub mod reflector;
pub mod selector;
pub mod server;
pub mod service;
pub mod subscriber_queue;
pub mod trim;
pub mod unix_authority;

pub use server::{run, Args};
