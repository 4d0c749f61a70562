//! The binder's flags (KCM's `PersistentVolumeBinderControllerOptions`, names, defaults and
//! help as upstream), and the recycler pod templates they name, read once at start as
//! KCM's `ProbeControllerVolumePlugins` reads them.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use tracing::warn;

use crate::flags::parse_go_duration;

use super::recycler::{default_recycler_pod_template, RecyclerConfig};

#[derive(Clone, Debug, clap::Args)]
#[group(skip)]
pub struct Options {
    /// The period for syncing persistent volumes and persistent volume claims.
    #[arg(long, default_value = "15s", value_parser = parse_go_duration)]
    pub pvclaimbinder_sync_period: Duration,
    /// Enable dynamic provisioning for environments that support it.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub enable_dynamic_provisioning: bool,
    /// Enable HostPath PV provisioning when running without a cloud provider. This allows
    /// testing and development of provisioning features. HostPath provisioning is not
    /// supported in any way, won't work in a multi-node cluster, and should not be used for
    /// anything other than testing or development.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub enable_hostpath_provisioner: bool,
    /// The file path to a pod definition used as a template for HostPath persistent volume
    /// recycling. This is for development and testing only and will not work in a
    /// multi-node cluster.
    #[arg(long, default_value = "")]
    pub pv_recycler_pod_template_filepath_hostpath: String,
    /// The minimum ActiveDeadlineSeconds to use for a HostPath Recycler pod. This is for
    /// development and testing only and will not work in a multi-node cluster.
    #[arg(long, default_value_t = 60, allow_negative_numbers = true)]
    pub pv_recycler_minimum_timeout_hostpath: i32,
    /// the increment of time added per Gi to ActiveDeadlineSeconds for a HostPath scrubber
    /// pod. This is for development and testing only and will not work in a multi-node
    /// cluster.
    #[arg(long, default_value_t = 30, allow_negative_numbers = true)]
    pub pv_recycler_timeout_increment_hostpath: i32,
    /// The file path to a pod definition used as a template for NFS persistent volume
    /// recycling.
    #[arg(long, default_value = "")]
    pub pv_recycler_pod_template_filepath_nfs: String,
    /// The minimum ActiveDeadlineSeconds to use for an NFS Recycler pod.
    #[arg(long, default_value_t = 300, allow_negative_numbers = true)]
    pub pv_recycler_minimum_timeout_nfs: i32,
    /// the increment of time added per Gi to ActiveDeadlineSeconds for an NFS scrubber pod.
    #[arg(long, default_value_t = 30, allow_negative_numbers = true)]
    pub pv_recycler_increment_timeout_nfs: i32,
    /// Full path of the directory in which the flex volume plugin should search for
    /// additional third party volume plugins (accepted; rkcm has no flex volume plugins).
    #[arg(
        long,
        default_value = "/usr/libexec/kubernetes/kubelet-plugins/volume/exec/"
    )]
    pub flex_volume_plugin_dir: String,
    /// A comma-separated list of CIDR ranges to avoid from volume plugins (deprecated:
    /// this flag is currently no-op and will be deleted).
    #[arg(long, value_delimiter = ',')]
    pub volume_host_cidr_denylist: Vec<String>,
    /// If false, deny local loopback IPs in addition to any CIDR ranges in
    /// --volume-host-cidr-denylist (deprecated: this flag is currently no-op and will be
    /// deleted).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub volume_host_allow_local_loopback: bool,
}

/// The recycler settings of the two recycling plugins.
#[derive(Clone, Debug)]
pub(super) struct Recyclers {
    pub host_path: RecyclerConfig,
    pub nfs: RecyclerConfig,
}

impl Options {
    /// Reads the recycler pod templates the flags name (KCM exits when one cannot be read);
    /// the launcher calls it at start so that a bad file stops it before any worker runs.
    pub fn validate(&self) -> anyhow::Result<()> {
        self.validate_period()?;
        self.recyclers().map(|_| ())
    }

    /// A zero period would resync without pause.
    pub(super) fn validate_period(&self) -> anyhow::Result<()> {
        if self.pvclaimbinder_sync_period.is_zero() {
            anyhow::bail!("--pvclaimbinder-sync-period must be greater than 0");
        }
        Ok(())
    }

    /// The recycler configurations: each plugin's template (the file's, or the default),
    /// minimum timeout and increment per Gi.
    pub(super) fn recyclers(&self) -> anyhow::Result<Recyclers> {
        let host_path = RecyclerConfig {
            template: template_or_default(
                &self.pv_recycler_pod_template_filepath_hostpath,
                "hostpath",
            )?,
            minimum_timeout: self.pv_recycler_minimum_timeout_hostpath,
            timeout_increment: self.pv_recycler_timeout_increment_hostpath,
        };
        let nfs = RecyclerConfig {
            template: template_or_default(&self.pv_recycler_pod_template_filepath_nfs, "NFS")?,
            minimum_timeout: self.pv_recycler_minimum_timeout_nfs,
            timeout_increment: self.pv_recycler_increment_timeout_nfs,
        };
        Ok(Recyclers { host_path, nfs })
    }

    /// Says which deprecated no-op flags were given a non-default value (pflag's
    /// deprecation notice).
    pub(super) fn warn_deprecated(&self) {
        const NOTICE: &str = "This flag is currently no-op and will be deleted.";
        if !self.volume_host_cidr_denylist.is_empty() {
            warn!("Flag --volume-host-cidr-denylist has been deprecated, {NOTICE}");
        }
        if !self.volume_host_allow_local_loopback {
            warn!("Flag --volume-host-allow-local-loopback has been deprecated, {NOTICE}");
        }
    }
}

fn template_or_default(path: &str, plugin: &str) -> anyhow::Result<Pod> {
    if path.is_empty() {
        return Ok(default_recycler_pod_template());
    }
    load_recycler_template(Path::new(path)).map_err(|error| {
        anyhow::anyhow!("could not create {plugin} recycler pod from file {path:?}: {error}")
    })
}

/// `AttemptToLoadRecycler`: a Pod manifest (YAML or JSON) with at least one volume.
pub(super) fn load_recycler_template(path: &Path) -> Result<Pod, String> {
    let text = std::fs::read(path)
        .map_err(|error| format!("failed to read file path {}: {error}", path.display()))?;
    if text.is_empty() {
        return Err(format!("file was empty: {}", path.display()));
    }
    let pod = decode_pod(&text).map_err(|error| format!("failed decoding file: {error}"))?;
    let volumes = pod.spec.as_ref().and_then(|spec| spec.volumes.as_ref());
    if volumes.is_none_or(|volumes| volumes.is_empty()) {
        return Err(format!(
            "pod specification ({}): does not contain any volume(s)",
            path.display()
        ));
    }
    Ok(pod)
}

/// A Pod from a manifest, which must say what it is (`apiVersion: v1`, `kind: Pod`), as
/// the API machinery's universal decoder requires.
fn decode_pod(text: &[u8]) -> Result<Pod, String> {
    let value: serde_json::Value = serde_yaml::from_slice(text).map_err(|e| e.to_string())?;
    match value.get("kind").and_then(|kind| kind.as_str()) {
        None | Some("") => return Err("Object 'Kind' is missing".into()),
        Some("Pod") => {}
        Some(other) => return Err(format!("expected a Pod, the file holds a {other}")),
    }
    match value.get("apiVersion").and_then(|v| v.as_str()) {
        Some("v1") => {}
        other => {
            return Err(format!(
                "expected apiVersion v1 for a Pod, the file says {:?}",
                other.unwrap_or_default()
            ))
        }
    }
    serde_json::from_value(value).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn defaults_are_kcms() {
        let options = crate::registry::ControllerOptions::default().pv_binder;
        assert_eq!(options.pvclaimbinder_sync_period, Duration::from_secs(15));
        assert!(options.enable_dynamic_provisioning);
        assert!(!options.enable_hostpath_provisioner);
        assert_eq!(options.pv_recycler_minimum_timeout_hostpath, 60);
        assert_eq!(options.pv_recycler_timeout_increment_hostpath, 30);
        assert_eq!(options.pv_recycler_minimum_timeout_nfs, 300);
        assert_eq!(options.pv_recycler_increment_timeout_nfs, 30);
        assert_eq!(
            options.flex_volume_plugin_dir,
            "/usr/libexec/kubernetes/kubelet-plugins/volume/exec/"
        );
        assert!(options.volume_host_cidr_denylist.is_empty());
        assert!(options.volume_host_allow_local_loopback);
        let recyclers = options.recyclers().unwrap();
        assert_eq!(
            recyclers.host_path.template,
            default_recycler_pod_template()
        );
    }

    #[test]
    fn templates_are_read_and_checked() {
        let dir = std::env::temp_dir().join(format!("rkcm-pvbinder-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let good = write(
            &dir,
            "good.yaml",
            "apiVersion: v1\nkind: Pod\nmetadata:\n  namespace: default\n  annotations:\n    sim.rkcm.io/exit-after: 1s\nspec:\n  restartPolicy: Never\n  volumes:\n  - name: vol\n  containers:\n  - name: c\n    image: busybox\n",
        );
        let pod = load_recycler_template(&good).unwrap();
        assert_eq!(
            pod.metadata.annotations.unwrap()["sim.rkcm.io/exit-after"],
            "1s"
        );

        let cases = [
            ("empty.yaml", "", "file was empty"),
            (
                "novolume.json",
                r#"{"apiVersion": "v1", "kind": "Pod", "spec": {"containers": []}}"#,
                "does not contain any volume(s)",
            ),
            (
                "nokind.yaml",
                "apiVersion: v1\nspec: {}\n",
                "Object 'Kind' is missing",
            ),
            (
                "service.yaml",
                "apiVersion: v1\nkind: Service\n",
                "expected a Pod",
            ),
            ("garbage.yaml", "{[", "failed decoding file"),
        ];
        for (name, text, want) in cases {
            let path = write(&dir, name, text);
            let error = load_recycler_template(&path).unwrap_err();
            assert!(error.contains(want), "{name}: {error}");
        }
        let missing = load_recycler_template(&dir.join("missing.yaml")).unwrap_err();
        assert!(missing.starts_with("failed to read file path"), "{missing}");

        let options = Options {
            pv_recycler_pod_template_filepath_nfs: dir.join("empty.yaml").display().to_string(),
            ..crate::registry::ControllerOptions::default().pv_binder
        };
        let error = options.validate().unwrap_err().to_string();
        assert!(
            error.starts_with("could not create NFS recycler pod from file"),
            "{error}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
