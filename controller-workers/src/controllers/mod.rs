//! KCM's controllers, one folder each, named as KCM names them. Each folder's `mod.rs`
//! declares what the controller reads (`RESOURCES`), its flags (`Options`, when it has
//! any) and its `build`; the registry ([`crate::registry`]) lists them with KCM's names.

pub mod attachdetach;
pub mod bootstrap;
pub mod certificates;
pub mod cloudnodelifecycle;
pub mod clusterroleaggregation;
pub mod cronjob;
pub mod daemonset;
pub mod deployment;
pub mod disruption;
pub mod endpoint;
pub mod endpointslice;
pub mod endpointslicemirroring;
pub mod ephemeral;
pub mod expand;
pub mod garbagecollector;
pub mod job;
pub mod legacysatokencleaner;
pub mod namespace;
pub mod nodeipam;
pub mod nodelifecycle;
pub mod podautoscaler;
pub mod podgc;
pub mod pvbinder;
pub mod pvcprotection;
pub mod pvprotection;
pub mod replicaset;
pub mod resourceclaim;
pub mod resourcequota;
pub mod rootcacertpublisher;
pub mod route;
pub mod service;
pub mod serviceaccount;
pub mod serviceaccounttoken;
pub mod servicecidrs;
pub mod statefulset;
pub mod storageversiongc;
pub mod tainteviction;
pub mod ttl;
pub mod ttlafterfinished;
pub mod validatingadmissionpolicystatus;
