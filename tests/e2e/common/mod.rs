//! Shared pieces of the end-to-end tests: the real `rkcm` binary started as a separate
//! process against the test cluster, and a gRPC client on its socket.

#![allow(dead_code)]

pub(crate) const RKCM: &str = env!("CARGO_BIN_EXE_rkcm");

mod metrics;
mod nodes;
mod processes;
mod stacks;

#[allow(unused_imports)]
pub(crate) use metrics::*;
#[allow(unused_imports)]
pub(crate) use nodes::*;
#[allow(unused_imports)]
pub(crate) use processes::*;
#[allow(unused_imports)]
pub(crate) use stacks::*;

/// Declares a suite's own stack, `struct NAME(STACK)`, dereferencing to `STACK` (a
/// [`LauncherStack`] or a [`WorkerStack`]), for the suite's helpers to be its methods.
#[allow(unused_macros)] // Not every suite has a stack of its own.
macro_rules! suite_stack {
    ($(#[$meta:meta])* struct $name:ident($inner:ty);) => {
        $(#[$meta])*
        struct $name($inner);

        impl std::ops::Deref for $name {
            type Target = $inner;
            fn deref(&self) -> &$inner {
                &self.0
            }
        }
    };
}
#[allow(unused_imports)]
pub(crate) use suite_stack;

/// The image the workload suites' pods run, and the one a rollout moves them to.
pub(crate) const IMAGE_1: &str = "registry.k8s.io/pause:3.9";
pub(crate) const IMAGE_2: &str = "registry.k8s.io/pause:3.10";
