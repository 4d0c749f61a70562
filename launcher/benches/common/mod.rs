//! Pieces the benchmarks share: reading a process's memory from /proc, and making a
//! namespace on the test cluster.

#![allow(dead_code)]

use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::{Api, PostParams};
use serde_json::json;

/// A `/proc/PID/status` size field (`VmRSS:`, `VmHWM:`) in bytes; 0 if unreadable.
pub fn proc_status_bytes(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with(field)).and_then(|l| {
                l.split_whitespace()
                    .nth(1)
                    .and_then(|kb| kb.parse::<u64>().ok())
            })
        })
        .unwrap_or(0)
        * 1024
}

/// Creates the namespace `name`, and its `default` ServiceAccount when pods will run in
/// it without rkcm's serviceaccount controller.
pub async fn namespace(
    client: &kube::Client,
    name: &str,
    with_account: bool,
) -> anyhow::Result<()> {
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": name}}))?,
        )
        .await?;
    if with_account {
        Api::<ServiceAccount>::namespaced(client.clone(), name)
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": "default"}}))?,
            )
            .await?;
    }
    Ok(())
}
