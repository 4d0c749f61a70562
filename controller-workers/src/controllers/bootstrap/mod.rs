//! The two controllers of bootstrap tokens, which kubeadm turns on
//! (`--controllers=*,bootstrapsigner,tokencleaner`; KCM runs neither by default) and which
//! share cluster-bootstrap's reading of a token Secret (upstream `pkg/controller/bootstrap`
//! and `staging/src/k8s.io/cluster-bootstrap`):
//! - [`bootstrapsigner`]: signs `kube-public/cluster-info` with every token allowed to;
//! - [`tokencleaner`]: deletes tokens once they expire.
//!
//! Both read token Secrets from `kube-system` only ([`secrets`]), whose `expiration` is a
//! time as Go's `time.Parse(time.RFC3339, …)` reads it ([`rfc3339`]); signatures are
//! detached JWS ([`jws`]).

pub mod bootstrapsigner;
mod jws;
mod rfc3339;
pub mod secrets;
pub mod tokencleaner;
