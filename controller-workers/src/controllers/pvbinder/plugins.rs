//! The in-tree volume plugins KCM gives the binder (`ProbeControllerVolumePlugins`:
//! host-path, nfs, portworx, rbd, azure-file, local and csi), reduced to what the binder
//! asks of them: which plugin a volume belongs to (for the `pv_collector` metric and the
//! deleter and recycler searches), which plugin a name means (provisioner and
//! `pv.kubernetes.io/provisioned-by` lookups), and whether it can provision, delete or
//! recycle. Only host-path and nfs do anything here (host-path provisions and deletes
//! under `/tmp`, both recycle with a pod); portworx and rbd need their storage backends,
//! which rkcm does not talk to, and say so when asked to work.

use k8s_openapi::api::core::v1::PersistentVolume;

/// An in-tree plugin the binder knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Plugin {
    HostPath,
    Nfs,
    Portworx,
    Rbd,
    AzureFile,
    Local,
    Csi,
}

pub(super) const HOST_PATH: &str = "kubernetes.io/host-path";
pub(super) const CSI: &str = "kubernetes.io/csi";

/// The prefix of in-tree plugin names; a provisioner without it is external.
pub(super) const IN_TREE_PREFIX: &str = "kubernetes.io/";

const ALL: [Plugin; 7] = [
    Plugin::HostPath,
    Plugin::Nfs,
    Plugin::Portworx,
    Plugin::Rbd,
    Plugin::AzureFile,
    Plugin::Local,
    Plugin::Csi,
];

impl Plugin {
    pub(super) fn name(self) -> &'static str {
        match self {
            Plugin::HostPath => HOST_PATH,
            Plugin::Nfs => "kubernetes.io/nfs",
            Plugin::Portworx => "kubernetes.io/portworx-volume",
            Plugin::Rbd => "kubernetes.io/rbd",
            Plugin::AzureFile => "kubernetes.io/azure-file",
            Plugin::Local => "kubernetes.io/local-volume",
            Plugin::Csi => CSI,
        }
    }

    /// `CanSupport` for a PersistentVolume: its source is the plugin's.
    fn supports(self, volume: &PersistentVolume) -> bool {
        let Some(spec) = volume.spec.as_ref() else {
            return false;
        };
        match self {
            Plugin::HostPath => spec.host_path.is_some(),
            Plugin::Nfs => spec.nfs.is_some(),
            Plugin::Portworx => spec.portworx_volume.is_some(),
            Plugin::Rbd => spec.rbd.is_some(),
            Plugin::AzureFile => spec.azure_file.is_some(),
            Plugin::Local => spec.local.is_some(),
            Plugin::Csi => spec.csi.is_some(),
        }
    }

    /// Implements `DeletableVolumePlugin`.
    pub(super) fn deletable(self) -> bool {
        matches!(
            self,
            Plugin::HostPath | Plugin::Portworx | Plugin::Rbd | Plugin::AzureFile
        )
    }

    /// Implements `ProvisionableVolumePlugin`.
    pub(super) fn provisionable(self) -> bool {
        matches!(
            self,
            Plugin::HostPath | Plugin::Portworx | Plugin::Rbd | Plugin::AzureFile
        )
    }

    /// Implements `RecyclableVolumePlugin`.
    pub(super) fn recyclable(self) -> bool {
        matches!(self, Plugin::HostPath | Plugin::Nfs)
    }
}

/// `FindPluginBySpec` for a PersistentVolume.
pub(super) fn find_by_volume(volume: &PersistentVolume) -> Result<Plugin, String> {
    let matched: Vec<Plugin> = ALL.into_iter().filter(|p| p.supports(volume)).collect();
    match matched.as_slice() {
        [] => Err("no volume plugin matched".into()),
        [plugin] => Ok(*plugin),
        several => Err(format!(
            "multiple volume plugins matched: {}",
            several
                .iter()
                .map(|p| p.name())
                .collect::<Vec<_>>()
                .join(",")
        )),
    }
}

/// `FindPluginByName`.
pub(super) fn find_by_name(name: &str) -> Result<Plugin, String> {
    ALL.into_iter()
        .find(|plugin| plugin.name() == name)
        .ok_or_else(|| format!("no volume plugin matched name: {name}"))
}

/// `FindDeletablePluginBySpec`.
pub(super) fn find_deletable_by_volume(volume: &PersistentVolume) -> Result<Plugin, String> {
    let plugin = find_by_volume(volume)?;
    if plugin.deletable() {
        Ok(plugin)
    } else {
        Err("no deletable volume plugin matched".into())
    }
}

/// `FindDeletablePluginByName`.
pub(super) fn find_deletable_by_name(name: &str) -> Result<Plugin, String> {
    let plugin = find_by_name(name)?;
    if plugin.deletable() {
        Ok(plugin)
    } else {
        Err("no deletable volume plugin matched".into())
    }
}

/// `FindProvisionablePluginByName`.
pub(super) fn find_provisionable_by_name(name: &str) -> Result<Plugin, String> {
    let plugin = find_by_name(name)?;
    if plugin.provisionable() {
        Ok(plugin)
    } else {
        Err("no provisionable volume plugin matched".into())
    }
}

/// `FindRecyclablePluginBySpec`.
pub(super) fn find_recyclable_by_volume(volume: &PersistentVolume) -> Result<Plugin, String> {
    let plugin = find_by_volume(volume)?;
    if plugin.recyclable() {
        Ok(plugin)
    } else {
        Err("no recyclable volume plugin matched".into())
    }
}

/// The plugin name the `pv_collector_total_pv_count` metric reports for a volume
/// (`GetFullQualifiedPluginNameForVolume`: `kubernetes.io/csi:<driver>` for CSI), or
/// `N/A` when no plugin supports it.
pub(super) fn metric_plugin_name(volume: &PersistentVolume) -> String {
    match find_by_volume(volume) {
        Ok(Plugin::Csi) => {
            let driver = volume
                .spec
                .as_ref()
                .and_then(|spec| spec.csi.as_ref())
                .map(|csi| csi.driver.as_str())
                .unwrap_or_default();
            format!("{CSI}:{driver}")
        }
        Ok(plugin) => plugin.name().to_string(),
        Err(_) => "N/A".to_string(),
    }
}

/// Why rkcm cannot do a plugin's backend work (portworx, rbd and azure-file talk to their
/// storage systems through client libraries rkcm does not carry).
pub(super) fn backend_unavailable(plugin: Plugin) -> String {
    format!(
        "volume plugin {} needs its storage backend, which rkcm does not support",
        plugin.name()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pv(spec: serde_json::Value) -> PersistentVolume {
        serde_json::from_value(json!({"metadata": {"name": "pv"}, "spec": spec})).unwrap()
    }

    #[test]
    fn plugins_by_source_and_name() {
        let host = pv(json!({"hostPath": {"path": "/tmp/x"}}));
        let local = pv(json!({"local": {"path": "/mnt"}}));
        let csi = pv(json!({"csi": {"driver": "csi.sim.rkcm.io", "volumeHandle": "h"}}));
        let gce = pv(json!({"gcePersistentDisk": {"pdName": "d"}}));
        assert_eq!(find_by_volume(&host), Ok(Plugin::HostPath));
        assert_eq!(
            metric_plugin_name(&csi),
            "kubernetes.io/csi:csi.sim.rkcm.io"
        );
        assert_eq!(metric_plugin_name(&local), "kubernetes.io/local-volume");
        assert_eq!(metric_plugin_name(&gce), "N/A");
        assert_eq!(
            find_deletable_by_volume(&local),
            Err("no deletable volume plugin matched".into())
        );
        assert_eq!(
            find_deletable_by_volume(&gce),
            Err("no volume plugin matched".into())
        );
        assert_eq!(find_deletable_by_volume(&host), Ok(Plugin::HostPath));
        assert_eq!(
            find_recyclable_by_volume(&pv(json!({"nfs": {"server": "s", "path": "/"}}))),
            Ok(Plugin::Nfs)
        );
        assert_eq!(
            find_provisionable_by_name("kubernetes.io/no-provisioner"),
            Err("no volume plugin matched name: kubernetes.io/no-provisioner".into())
        );
        assert_eq!(
            find_provisionable_by_name("kubernetes.io/local-volume"),
            Err("no provisionable volume plugin matched".into())
        );
        assert_eq!(find_provisionable_by_name(HOST_PATH), Ok(Plugin::HostPath));
    }
}
