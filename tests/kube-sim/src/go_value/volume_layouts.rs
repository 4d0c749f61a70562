//! The internal volume types (`k8s.io/kubernetes/pkg/apis/core`), written by hand from the
//! 1.29 declarations: `core.Volume`, its `core.VolumeSource` (one pointer per kind of
//! volume) and every struct those sources reach, including the PVC spec an ephemeral volume
//! carries. Fields in declaration order, with the `v1` JSON name each is read from (empty
//! for an embedded struct whose fields sit in the same JSON object).

use super::Field;

/// Struct layouts, by the name `%#v` prints.
pub(super) const VOLUME_STRUCTS: &[(&str, &[Field])] = &[
    (
        "core.Volume",
        &[
            ("Name", "name", "string"),
            ("VolumeSource", "", "core.VolumeSource"),
        ],
    ),
    (
        "core.VolumeSource",
        &[
            ("HostPath", "hostPath", "*core.HostPathVolumeSource"),
            ("EmptyDir", "emptyDir", "*core.EmptyDirVolumeSource"),
            (
                "GCEPersistentDisk",
                "gcePersistentDisk",
                "*core.GCEPersistentDiskVolumeSource",
            ),
            (
                "AWSElasticBlockStore",
                "awsElasticBlockStore",
                "*core.AWSElasticBlockStoreVolumeSource",
            ),
            ("GitRepo", "gitRepo", "*core.GitRepoVolumeSource"),
            ("Secret", "secret", "*core.SecretVolumeSource"),
            ("NFS", "nfs", "*core.NFSVolumeSource"),
            ("ISCSI", "iscsi", "*core.ISCSIVolumeSource"),
            ("Glusterfs", "glusterfs", "*core.GlusterfsVolumeSource"),
            (
                "PersistentVolumeClaim",
                "persistentVolumeClaim",
                "*core.PersistentVolumeClaimVolumeSource",
            ),
            ("RBD", "rbd", "*core.RBDVolumeSource"),
            ("Quobyte", "quobyte", "*core.QuobyteVolumeSource"),
            ("FlexVolume", "flexVolume", "*core.FlexVolumeSource"),
            ("Cinder", "cinder", "*core.CinderVolumeSource"),
            ("CephFS", "cephfs", "*core.CephFSVolumeSource"),
            ("Flocker", "flocker", "*core.FlockerVolumeSource"),
            (
                "DownwardAPI",
                "downwardAPI",
                "*core.DownwardAPIVolumeSource",
            ),
            ("FC", "fc", "*core.FCVolumeSource"),
            ("AzureFile", "azureFile", "*core.AzureFileVolumeSource"),
            ("ConfigMap", "configMap", "*core.ConfigMapVolumeSource"),
            (
                "VsphereVolume",
                "vsphereVolume",
                "*core.VsphereVirtualDiskVolumeSource",
            ),
            ("AzureDisk", "azureDisk", "*core.AzureDiskVolumeSource"),
            (
                "PhotonPersistentDisk",
                "photonPersistentDisk",
                "*core.PhotonPersistentDiskVolumeSource",
            ),
            ("Projected", "projected", "*core.ProjectedVolumeSource"),
            (
                "PortworxVolume",
                "portworxVolume",
                "*core.PortworxVolumeSource",
            ),
            ("ScaleIO", "scaleIO", "*core.ScaleIOVolumeSource"),
            ("StorageOS", "storageos", "*core.StorageOSVolumeSource"),
            ("CSI", "csi", "*core.CSIVolumeSource"),
            ("Ephemeral", "ephemeral", "*core.EphemeralVolumeSource"),
        ],
    ),
    (
        "core.HostPathVolumeSource",
        &[
            ("Path", "path", "string"),
            ("Type", "type", "*core.HostPathType"),
        ],
    ),
    (
        "core.EmptyDirVolumeSource",
        &[
            ("Medium", "medium", "core.StorageMedium"),
            ("SizeLimit", "sizeLimit", "*resource.Quantity"),
        ],
    ),
    (
        "core.GCEPersistentDiskVolumeSource",
        &[
            ("PDName", "pdName", "string"),
            ("FSType", "fsType", "string"),
            ("Partition", "partition", "int32"),
            ("ReadOnly", "readOnly", "bool"),
        ],
    ),
    (
        "core.AWSElasticBlockStoreVolumeSource",
        &[
            ("VolumeID", "volumeID", "string"),
            ("FSType", "fsType", "string"),
            ("Partition", "partition", "int32"),
            ("ReadOnly", "readOnly", "bool"),
        ],
    ),
    (
        "core.GitRepoVolumeSource",
        &[
            ("Repository", "repository", "string"),
            ("Revision", "revision", "string"),
            ("Directory", "directory", "string"),
        ],
    ),
    (
        "core.SecretVolumeSource",
        &[
            ("SecretName", "secretName", "string"),
            ("Items", "items", "[]core.KeyToPath"),
            ("DefaultMode", "defaultMode", "*int32"),
            ("Optional", "optional", "*bool"),
        ],
    ),
    (
        "core.KeyToPath",
        &[
            ("Key", "key", "string"),
            ("Path", "path", "string"),
            ("Mode", "mode", "*int32"),
        ],
    ),
    (
        "core.NFSVolumeSource",
        &[
            ("Server", "server", "string"),
            ("Path", "path", "string"),
            ("ReadOnly", "readOnly", "bool"),
        ],
    ),
    (
        "core.ISCSIVolumeSource",
        &[
            ("TargetPortal", "targetPortal", "string"),
            ("IQN", "iqn", "string"),
            ("Lun", "lun", "int32"),
            ("ISCSIInterface", "iscsiInterface", "string"),
            ("FSType", "fsType", "string"),
            ("ReadOnly", "readOnly", "bool"),
            ("Portals", "portals", "[]string"),
            ("DiscoveryCHAPAuth", "chapAuthDiscovery", "bool"),
            ("SessionCHAPAuth", "chapAuthSession", "bool"),
            ("SecretRef", "secretRef", "*core.LocalObjectReference"),
            ("InitiatorName", "initiatorName", "*string"),
        ],
    ),
    (
        "core.GlusterfsVolumeSource",
        &[
            ("EndpointsName", "endpoints", "string"),
            ("Path", "path", "string"),
            ("ReadOnly", "readOnly", "bool"),
        ],
    ),
    (
        "core.PersistentVolumeClaimVolumeSource",
        &[
            ("ClaimName", "claimName", "string"),
            ("ReadOnly", "readOnly", "bool"),
        ],
    ),
    (
        "core.RBDVolumeSource",
        &[
            ("CephMonitors", "monitors", "[]string"),
            ("RBDImage", "image", "string"),
            ("FSType", "fsType", "string"),
            ("RBDPool", "pool", "string"),
            ("RadosUser", "user", "string"),
            ("Keyring", "keyring", "string"),
            ("SecretRef", "secretRef", "*core.LocalObjectReference"),
            ("ReadOnly", "readOnly", "bool"),
        ],
    ),
    (
        "core.QuobyteVolumeSource",
        &[
            ("Registry", "registry", "string"),
            ("Volume", "volume", "string"),
            ("ReadOnly", "readOnly", "bool"),
            ("User", "user", "string"),
            ("Group", "group", "string"),
            ("Tenant", "tenant", "string"),
        ],
    ),
    (
        "core.FlexVolumeSource",
        &[
            ("Driver", "driver", "string"),
            ("FSType", "fsType", "string"),
            ("SecretRef", "secretRef", "*core.LocalObjectReference"),
            ("ReadOnly", "readOnly", "bool"),
            ("Options", "options", "map[string]string"),
        ],
    ),
    (
        "core.CinderVolumeSource",
        &[
            ("VolumeID", "volumeID", "string"),
            ("FSType", "fsType", "string"),
            ("ReadOnly", "readOnly", "bool"),
            ("SecretRef", "secretRef", "*core.LocalObjectReference"),
        ],
    ),
    (
        "core.CephFSVolumeSource",
        &[
            ("Monitors", "monitors", "[]string"),
            ("Path", "path", "string"),
            ("User", "user", "string"),
            ("SecretFile", "secretFile", "string"),
            ("SecretRef", "secretRef", "*core.LocalObjectReference"),
            ("ReadOnly", "readOnly", "bool"),
        ],
    ),
    (
        "core.FlockerVolumeSource",
        &[
            ("DatasetName", "datasetName", "string"),
            ("DatasetUUID", "datasetUUID", "string"),
        ],
    ),
    (
        "core.DownwardAPIVolumeSource",
        &[
            ("Items", "items", "[]core.DownwardAPIVolumeFile"),
            ("DefaultMode", "defaultMode", "*int32"),
        ],
    ),
    (
        "core.DownwardAPIVolumeFile",
        &[
            ("Path", "path", "string"),
            ("FieldRef", "fieldRef", "*core.ObjectFieldSelector"),
            (
                "ResourceFieldRef",
                "resourceFieldRef",
                "*core.ResourceFieldSelector",
            ),
            ("Mode", "mode", "*int32"),
        ],
    ),
    (
        "core.FCVolumeSource",
        &[
            ("TargetWWNs", "targetWWNs", "[]string"),
            ("Lun", "lun", "*int32"),
            ("FSType", "fsType", "string"),
            ("ReadOnly", "readOnly", "bool"),
            ("WWIDs", "wwids", "[]string"),
        ],
    ),
    (
        "core.AzureFileVolumeSource",
        &[
            ("SecretName", "secretName", "string"),
            ("ShareName", "shareName", "string"),
            ("ReadOnly", "readOnly", "bool"),
        ],
    ),
    (
        "core.ConfigMapVolumeSource",
        &[
            ("LocalObjectReference", "", "core.LocalObjectReference"),
            ("Items", "items", "[]core.KeyToPath"),
            ("DefaultMode", "defaultMode", "*int32"),
            ("Optional", "optional", "*bool"),
        ],
    ),
    (
        "core.VsphereVirtualDiskVolumeSource",
        &[
            ("VolumePath", "volumePath", "string"),
            ("FSType", "fsType", "string"),
            ("StoragePolicyName", "storagePolicyName", "string"),
            ("StoragePolicyID", "storagePolicyID", "string"),
        ],
    ),
    (
        "core.AzureDiskVolumeSource",
        &[
            ("DiskName", "diskName", "string"),
            ("DataDiskURI", "diskURI", "string"),
            (
                "CachingMode",
                "cachingMode",
                "*core.AzureDataDiskCachingMode",
            ),
            ("FSType", "fsType", "*string"),
            ("ReadOnly", "readOnly", "*bool"),
            ("Kind", "kind", "*core.AzureDataDiskKind"),
        ],
    ),
    (
        "core.PhotonPersistentDiskVolumeSource",
        &[("PdID", "pdID", "string"), ("FSType", "fsType", "string")],
    ),
    (
        "core.ProjectedVolumeSource",
        &[
            ("Sources", "sources", "[]core.VolumeProjection"),
            ("DefaultMode", "defaultMode", "*int32"),
        ],
    ),
    (
        "core.VolumeProjection",
        &[
            ("Secret", "secret", "*core.SecretProjection"),
            ("DownwardAPI", "downwardAPI", "*core.DownwardAPIProjection"),
            ("ConfigMap", "configMap", "*core.ConfigMapProjection"),
            (
                "ServiceAccountToken",
                "serviceAccountToken",
                "*core.ServiceAccountTokenProjection",
            ),
            (
                "ClusterTrustBundle",
                "clusterTrustBundle",
                "*core.ClusterTrustBundleProjection",
            ),
        ],
    ),
    (
        "core.SecretProjection",
        &[
            ("LocalObjectReference", "", "core.LocalObjectReference"),
            ("Items", "items", "[]core.KeyToPath"),
            ("Optional", "optional", "*bool"),
        ],
    ),
    (
        "core.DownwardAPIProjection",
        &[("Items", "items", "[]core.DownwardAPIVolumeFile")],
    ),
    (
        "core.ConfigMapProjection",
        &[
            ("LocalObjectReference", "", "core.LocalObjectReference"),
            ("Items", "items", "[]core.KeyToPath"),
            ("Optional", "optional", "*bool"),
        ],
    ),
    (
        "core.ServiceAccountTokenProjection",
        &[
            ("Audience", "audience", "string"),
            ("ExpirationSeconds", "expirationSeconds", "int64"),
            ("Path", "path", "string"),
        ],
    ),
    (
        "core.ClusterTrustBundleProjection",
        &[
            ("Name", "name", "*string"),
            ("SignerName", "signerName", "*string"),
            ("LabelSelector", "labelSelector", "*v1.LabelSelector"),
            ("Optional", "optional", "*bool"),
            ("Path", "path", "string"),
        ],
    ),
    (
        "core.PortworxVolumeSource",
        &[
            ("VolumeID", "volumeID", "string"),
            ("FSType", "fsType", "string"),
            ("ReadOnly", "readOnly", "bool"),
        ],
    ),
    (
        "core.ScaleIOVolumeSource",
        &[
            ("Gateway", "gateway", "string"),
            ("System", "system", "string"),
            ("SecretRef", "secretRef", "*core.LocalObjectReference"),
            ("SSLEnabled", "sslEnabled", "bool"),
            ("ProtectionDomain", "protectionDomain", "string"),
            ("StoragePool", "storagePool", "string"),
            ("StorageMode", "storageMode", "string"),
            ("VolumeName", "volumeName", "string"),
            ("FSType", "fsType", "string"),
            ("ReadOnly", "readOnly", "bool"),
        ],
    ),
    (
        "core.StorageOSVolumeSource",
        &[
            ("VolumeName", "volumeName", "string"),
            ("VolumeNamespace", "volumeNamespace", "string"),
            ("FSType", "fsType", "string"),
            ("ReadOnly", "readOnly", "bool"),
            ("SecretRef", "secretRef", "*core.LocalObjectReference"),
        ],
    ),
    (
        "core.CSIVolumeSource",
        &[
            ("Driver", "driver", "string"),
            ("ReadOnly", "readOnly", "*bool"),
            ("FSType", "fsType", "*string"),
            ("VolumeAttributes", "volumeAttributes", "map[string]string"),
            (
                "NodePublishSecretRef",
                "nodePublishSecretRef",
                "*core.LocalObjectReference",
            ),
        ],
    ),
    (
        "core.EphemeralVolumeSource",
        &[(
            "VolumeClaimTemplate",
            "volumeClaimTemplate",
            "*core.PersistentVolumeClaimTemplate",
        )],
    ),
    (
        "core.PersistentVolumeClaimTemplate",
        &[
            ("ObjectMeta", "metadata", "v1.ObjectMeta"),
            ("Spec", "spec", "core.PersistentVolumeClaimSpec"),
        ],
    ),
    (
        "core.PersistentVolumeClaimSpec",
        &[
            (
                "AccessModes",
                "accessModes",
                "[]core.PersistentVolumeAccessMode",
            ),
            ("Selector", "selector", "*v1.LabelSelector"),
            ("Resources", "resources", "core.VolumeResourceRequirements"),
            ("VolumeName", "volumeName", "string"),
            ("StorageClassName", "storageClassName", "*string"),
            ("VolumeMode", "volumeMode", "*core.PersistentVolumeMode"),
            (
                "DataSource",
                "dataSource",
                "*core.TypedLocalObjectReference",
            ),
            (
                "DataSourceRef",
                "dataSourceRef",
                "*core.TypedObjectReference",
            ),
            (
                "VolumeAttributesClassName",
                "volumeAttributesClassName",
                "*string",
            ),
        ],
    ),
    (
        "core.VolumeResourceRequirements",
        &[
            ("Limits", "limits", "core.ResourceList"),
            ("Requests", "requests", "core.ResourceList"),
        ],
    ),
    (
        "core.TypedLocalObjectReference",
        &[
            ("APIGroup", "apiGroup", "*string"),
            ("Kind", "kind", "string"),
            ("Name", "name", "string"),
        ],
    ),
    (
        "core.TypedObjectReference",
        &[
            ("APIGroup", "apiGroup", "*string"),
            ("Kind", "kind", "string"),
            ("Name", "name", "string"),
            ("Namespace", "namespace", "*string"),
        ],
    ),
];
