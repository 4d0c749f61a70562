//! The client side every rkcm process shares: loading a kubeconfig (with its TLS material
//! checked, [`kube_config`](mod@kube_config)), client-go's token bucket for `--kube-api-qps` /
//! `--kube-api-burst` ([`rate_limit`]), the worker's end of the informer stream
//! ([`informer`]), and giving freed heap memory back to the system ([`memory`]). It sits below the informer-server and the controller-workers, so a
//! worker links no gRPC server.

pub mod informer;
pub mod kube_config;
pub mod memory;
pub mod rate_limit;
mod tls_material;

pub use kube_config::kube_config;
