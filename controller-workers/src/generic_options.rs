//! The flags KCM keeps in its generic configuration rather than in one controller's:
//! `--feature-gates` and the cloud-provider flags. They are part of
//! [`ControllerOptions`](crate::registry::ControllerOptions), so the launcher passes the
//! ones it was given on to every worker like any controller flag.

use clap::ArgAction;

use crate::features::{parse_feature_gates, FeatureGates};

/// KCM's in-tree cloud providers that 1.29 disables while the `DisableCloudProviders`
/// gate is on (its default).
const DEPRECATED_INTERNAL_PROVIDERS: &[&str] = &["azure", "gce", "vsphere"];

/// The `--cloud-provider` value that leaves the cloud controllers to an external
/// cloud-controller-manager.
pub const EXTERNAL_CLOUD_PROVIDER: &str = "external";

#[derive(Clone, Debug, clap::Args)]
#[group(skip)]
pub struct GenericOptions {
    /// A set of key=value pairs that describe feature gates for alpha/experimental
    /// features (KCM 1.29's gates and defaults; may be given more than once).
    #[arg(long = "feature-gates", value_parser = parse_feature_gates, action = ArgAction::Append)]
    pub feature_gates: Vec<FeatureGates>,
    /// The provider for cloud services. Empty string for no provider; `external` leaves the
    /// cloud controllers to a cloud-controller-manager.
    #[arg(long, default_value = "")]
    pub cloud_provider: String,
    /// The path to the cloud provider configuration file. Empty string for no
    /// configuration file.
    #[arg(long, default_value = "")]
    pub cloud_config: String,
    /// The instance prefix for the cluster (the cloud controllers name load balancers and
    /// routes with it).
    #[arg(long, default_value = "kubernetes")]
    pub cluster_name: String,
    /// Should CIDRs allocated by allocate-node-cidrs be configured on the cloud provider.
    #[arg(long, default_value_t = true, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub configure_cloud_routes: bool,
    /// Allow the cluster to run without the cluster-id on cloud instances (deprecated in
    /// KCM).
    #[arg(long, default_value_t = false, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub allow_untagged_cloud: bool,
}

impl GenericOptions {
    /// The gates in force: the defaults with every `--feature-gates` value over them.
    pub fn gates(&self) -> FeatureGates {
        let mut gates = FeatureGates::default();
        for given in &self.feature_gates {
            gates.merge(given);
        }
        gates
    }

    /// Whether the cloud controllers run in this process (KCM's `IncludeCloudLoops`):
    /// every `--cloud-provider` but `external`. With none given they start and each says
    /// that no cloud provider was provided, as KCM's do.
    pub fn includes_cloud_loops(&self) -> bool {
        self.cloud_provider != EXTERNAL_CLOUD_PROVIDER
    }

    /// KCM's refusal of a built-in cloud provider while `DisableCloudProviders` is on (it
    /// exits 1 with this message).
    pub fn cloud_provider_refusal(&self) -> Option<String> {
        (self.gates().enabled("DisableCloudProviders")
            && DEPRECATED_INTERNAL_PROVIDERS.contains(&self.cloud_provider.as_str()))
        .then(|| {
            format!(
                "cloud provider {:?} was specified, but built-in cloud providers are disabled. Please set --cloud-provider=external and migrate to an external cloud provider",
                self.cloud_provider
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{Args as _, FromArgMatches as _};

    fn parse(args: &[&str]) -> Result<GenericOptions, clap::Error> {
        let matches = GenericOptions::augment_args(clap::Command::new("t"))
            .no_binary_name(true)
            .try_get_matches_from(args)?;
        GenericOptions::from_arg_matches(&matches)
    }

    #[test]
    fn repeated_gates_merge_and_an_unknown_gate_is_a_usage_error() {
        let options = parse(&[
            "--feature-gates=MultiCIDRServiceAllocator=true",
            "--feature-gates",
            "StorageVersionAPI=true,MultiCIDRServiceAllocator=false",
        ])
        .unwrap();
        let gates = options.gates();
        assert!(!gates.enabled("MultiCIDRServiceAllocator"));
        assert!(gates.enabled("StorageVersionAPI"));
        let error = parse(&["--feature-gates=Nope=true"]).unwrap_err();
        assert_eq!(error.kind(), clap::error::ErrorKind::ValueValidation);
        assert!(error
            .to_string()
            .contains("unrecognized feature gate: Nope"));
    }

    #[test]
    fn cloud_provider_table() {
        let none = parse(&[]).unwrap();
        assert!(none.includes_cloud_loops());
        assert_eq!(none.cloud_provider_refusal(), None);
        assert_eq!(none.cluster_name, "kubernetes");
        let external = parse(&["--cloud-provider=external"]).unwrap();
        assert!(!external.includes_cloud_loops());
        let gce = parse(&["--cloud-provider=gce"]).unwrap();
        assert!(gce.cloud_provider_refusal().unwrap().starts_with(
            "cloud provider \"gce\" was specified, but built-in cloud providers are disabled."
        ));
        let gce_allowed = parse(&[
            "--cloud-provider=gce",
            "--feature-gates=DisableCloudProviders=false",
        ])
        .unwrap();
        assert_eq!(gce_allowed.cloud_provider_refusal(), None);
    }
}
