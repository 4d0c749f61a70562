//! The node-ipam controller's flags checked as KCM checks them at start
//! (`startNodeIpamController`, `setNodeCIDRMaskSizes`, `NewNodeIpamController`, the
//! options' `Validate`), with upstream's messages, and turned into what the range
//! allocator needs. Both `rkcm worker` and `rkcm launcher` run these checks, so a bad
//! combination stops the launcher (exit 2) before it starts any child.

use super::cidr::{cluster_cidrs, is_dual_stack, Cidr};
use super::Options;

const DEFAULT_NODE_MASK_IPV4: i32 = 24;
const DEFAULT_NODE_MASK_IPV6: i32 = 64;
const IPV6_MAX_SUBNET_BITS: i32 = 16;

/// What the range allocator starts from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct AllocatorConfig {
    /// One per family, in the order given; `spec.podCIDRs[i]` comes from `cluster_cidrs[i]`.
    pub cluster_cidrs: Vec<Cidr>,
    /// The node mask for each cluster CIDR.
    pub node_prefixes: Vec<u8>,
    /// The service ranges that parsed (their blocks are never handed to nodes).
    pub service_cidrs: Vec<Cidr>,
    /// Service ranges that did not parse: KCM only logs them.
    pub warnings: Vec<String>,
}

/// `None` when `--allocate-node-cidrs` is off (the controller does not start); the first
/// error otherwise, in KCM's order and words.
pub(crate) fn validate(options: &Options) -> Result<Option<AllocatorConfig>, String> {
    let service_ranges: Vec<&str> = options.service_cluster_ip_range.split(',').collect();
    if service_ranges.len() > 2 {
        return Err("--service-cluster-ip-range can not contain more than two entries".into());
    }
    if !options.allocate_node_cidrs {
        return Ok(None);
    }
    if options.cidr_allocator_type == "CloudAllocator" {
        return Err(
            "--cidr-allocator-type is set to 'CloudAllocator' but cloud provider is not configured"
                .into(),
        );
    }
    let cluster_cidrs = cluster_cidrs(&options.cluster_cidr)?;

    let mut service_cidrs = Vec::new();
    let mut warnings = Vec::new();
    for range in service_ranges
        .iter()
        .map(|r| r.trim())
        .filter(|r| !r.is_empty())
    {
        match Cidr::parse(range) {
            Ok(cidr) => service_cidrs.push(cidr),
            Err(error) => warnings.push(format!(
                "Warning: unsuccessful parsing of service CIDR {range}: {error}"
            )),
        }
    }
    if service_cidrs.len() == 2 && !is_dual_stack(&service_cidrs) {
        return Err(
            "serviceCIDR and secondaryServiceCIDR are not dualstack (from different IPfamiles)"
                .into(),
        );
    }

    let masks = node_mask_sizes(options, &cluster_cidrs)?;
    let mut node_prefixes = Vec::with_capacity(masks.len());
    for (cidr, mask) in cluster_cidrs.iter().zip(masks) {
        if i32::from(cidr.prefix()) > mask {
            return Err("Controller: Invalid --cluster-cidr, mask size of cluster CIDR must be less than or equal to --node-cidr-mask-size configured for CIDR family".into());
        }
        if cidr.is_ipv6() && mask - i32::from(cidr.prefix()) > IPV6_MAX_SUBNET_BITS {
            return Err("New CIDR set failed; the node CIDR size is too big".into());
        }
        let prefix = u8::try_from(mask)
            .ok()
            .filter(|p| *p <= cidr.width())
            .ok_or_else(|| {
                format!(
                    "node CIDR mask size {mask} is longer than the {} bits of cluster CIDR {cidr}",
                    cidr.width()
                )
            })?;
        node_prefixes.push(prefix);
    }

    match options.cidr_allocator_type.as_str() {
        "RangeAllocator" => {}
        "IPAMFromCluster" | "IPAMFromCloud" => {
            return Err(format!(
                "--cidr-allocator-type {}: only RangeAllocator is supported by this version",
                options.cidr_allocator_type
            ))
        }
        other => return Err(format!("invalid CIDR allocator type: {other}")),
    }

    Ok(Some(AllocatorConfig {
        cluster_cidrs,
        node_prefixes,
        service_cidrs,
        warnings,
    }))
}

/// The node mask for each cluster CIDR: `--node-cidr-mask-size` for a single-stack
/// cluster, the per-family flags (or their defaults) otherwise; 0 means "not given".
fn node_mask_sizes(options: &Options, cluster_cidrs: &[Cidr]) -> Result<Vec<i32>, String> {
    let per_family = |v4: i32, v6: i32| -> Vec<i32> {
        cluster_cidrs
            .iter()
            .map(|c| if c.is_ipv6() { v6 } else { v4 })
            .collect()
    };
    let given = |mask: i32| (mask != 0).then_some(mask);
    let mask = given(options.node_cidr_mask_size);
    let mask_v4 = given(options.node_cidr_mask_size_ipv4);
    let mask_v6 = given(options.node_cidr_mask_size_ipv6);
    if cluster_cidrs.len() > 1 {
        if mask.is_some() {
            return Err(
                "usage of --node-cidr-mask-size is not allowed with dual-stack clusters".into(),
            );
        }
        return Ok(per_family(
            mask_v4.unwrap_or(DEFAULT_NODE_MASK_IPV4),
            mask_v6.unwrap_or(DEFAULT_NODE_MASK_IPV6),
        ));
    }
    if let Some(mask) = mask {
        if mask_v4.is_some() || mask_v6.is_some() {
            return Err("usage of --node-cidr-mask-size-ipv4 and --node-cidr-mask-size-ipv6 is not allowed if --node-cidr-mask-size is set. For dual-stack clusters please unset it and use IPFamily specific flags".into());
        }
        return Ok(per_family(mask, mask));
    }
    let ipv6_only = cluster_cidrs.first().is_some_and(Cidr::is_ipv6);
    if mask_v4.is_some() && ipv6_only {
        return Err(
            "usage of --node-cidr-mask-size-ipv4 is not allowed for a single-stack IPv6 cluster"
                .into(),
        );
    }
    if mask_v6.is_some() && !ipv6_only {
        return Err(
            "usage of --node-cidr-mask-size-ipv6 is not allowed for a single-stack IPv4 cluster"
                .into(),
        );
    }
    Ok(per_family(
        mask_v4.unwrap_or(DEFAULT_NODE_MASK_IPV4),
        mask_v6.unwrap_or(DEFAULT_NODE_MASK_IPV6),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(flags: &[&str]) -> Options {
        use clap::{Args as _, FromArgMatches as _};
        let matches = Options::augment_args(clap::Command::new("options"))
            .no_binary_name(true)
            .try_get_matches_from(flags)
            .unwrap();
        Options::from_arg_matches(&matches).unwrap()
    }

    fn check(flags: &[&str]) -> Result<Option<AllocatorConfig>, String> {
        validate(&options(flags))
    }

    /// The node blocks each family gets, as `cluster/node` strings.
    fn plan(flags: &[&str]) -> Vec<String> {
        let config = check(flags).unwrap().expect("enabled");
        config
            .cluster_cidrs
            .iter()
            .zip(&config.node_prefixes)
            .map(|(c, p)| format!("{c}->/{p}"))
            .collect()
    }

    #[test]
    fn off_unless_allocate_node_cidrs() {
        assert_eq!(check(&[]), Ok(None));
        assert_eq!(check(&["--cluster-cidr=garbage"]), Ok(None));
        assert_eq!(
            check(&["--allocate-node-cidrs=false", "--cluster-cidr=x"]),
            Ok(None)
        );
        assert!(
            check(&["--allocate-node-cidrs", "--cluster-cidr=10.0.0.0/8"])
                .unwrap()
                .is_some()
        );
    }

    #[test]
    fn mask_sizes_per_family() {
        let on = "--allocate-node-cidrs=true";
        assert_eq!(
            plan(&[on, "--cluster-cidr=10.244.0.0/16"]),
            ["10.244.0.0/16->/24"]
        );
        assert_eq!(
            plan(&[
                on,
                "--cluster-cidr=10.244.0.0/16",
                "--node-cidr-mask-size=26"
            ]),
            ["10.244.0.0/16->/26"]
        );
        assert_eq!(
            plan(&[
                on,
                "--cluster-cidr=10.244.0.0/16",
                "--node-cidr-mask-size-ipv4=25"
            ]),
            ["10.244.0.0/16->/25"]
        );
        assert_eq!(plan(&[on, "--cluster-cidr=fd00::/56"]), ["fd00::/56->/64"]);
        assert_eq!(
            plan(&[
                on,
                "--cluster-cidr=fd00::/56",
                "--node-cidr-mask-size-ipv6=60"
            ]),
            ["fd00::/56->/60"]
        );
        assert_eq!(
            plan(&[on, "--cluster-cidr= fd00::/56,10.244.0.0/16 "]),
            ["fd00::/56->/64", "10.244.0.0/16->/24"]
        );
        assert_eq!(
            plan(&[
                on,
                "--cluster-cidr=10.244.0.0/16,fd00::/56",
                "--node-cidr-mask-size-ipv4=20",
                "--node-cidr-mask-size-ipv6=72",
            ]),
            ["10.244.0.0/16->/20", "fd00::/56->/72"]
        );
        let config = check(&[
            on,
            "--cluster-cidr=10.244.0.0/16",
            "--service-cluster-ip-range=10.96.0.0/12,fd00:96::/108",
        ])
        .unwrap()
        .unwrap();
        assert_eq!(config.service_cidrs.len(), 2);
        let config = check(&[
            on,
            "--cluster-cidr=10.244.0.0/16",
            "--service-cluster-ip-range=nope",
        ])
        .unwrap()
        .unwrap();
        assert!(config.service_cidrs.is_empty());
        assert_eq!(
            config.warnings.len(),
            1,
            "an unparsable service range is only logged"
        );
    }

    #[test]
    fn bad_combinations_fail_with_upstreams_messages() {
        let on = "--allocate-node-cidrs";
        let table: &[(&[&str], &str)] = &[
            (
                &["--service-cluster-ip-range=10.0.0.0/16,fd00::/108,10.1.0.0/16"],
                "--service-cluster-ip-range can not contain more than two entries",
            ),
            (
                &[on, "--cidr-allocator-type=CloudAllocator", "--cluster-cidr=10.0.0.0/8"],
                "--cidr-allocator-type is set to 'CloudAllocator' but cloud provider is not configured",
            ),
            (&[on], "invalid CIDR[0]: <nil> (invalid CIDR address: )"),
            (
                &[on, "--cluster-cidr=10.244.0.0/16,bogus"],
                "invalid CIDR[1]: <nil> (invalid CIDR address: bogus)",
            ),
            (
                &[on, "--cluster-cidr=10.244.0.0/16,10.245.0.0/16"],
                "len of ClusterCIDRs==2 and they are not configured as dual stack (at least one from each IPFamily",
            ),
            (
                &[on, "--cluster-cidr=10.244.0.0/16,fd00::/56,10.245.0.0/16"],
                "length of clusterCIDRs is:3 more than max allowed of 2",
            ),
            (
                &[on, "--cluster-cidr=10.0.0.0/8", "--service-cluster-ip-range=10.96.0.0/12,10.97.0.0/16"],
                "serviceCIDR and secondaryServiceCIDR are not dualstack (from different IPfamiles)",
            ),
            (
                &[on, "--cluster-cidr=10.244.0.0/16,fd00::/56", "--node-cidr-mask-size=24"],
                "usage of --node-cidr-mask-size is not allowed with dual-stack clusters",
            ),
            (
                &[on, "--cluster-cidr=10.244.0.0/16", "--node-cidr-mask-size=24", "--node-cidr-mask-size-ipv4=24"],
                "usage of --node-cidr-mask-size-ipv4 and --node-cidr-mask-size-ipv6 is not allowed if --node-cidr-mask-size is set. For dual-stack clusters please unset it and use IPFamily specific flags",
            ),
            (
                &[on, "--cluster-cidr=fd00::/56", "--node-cidr-mask-size-ipv4=24"],
                "usage of --node-cidr-mask-size-ipv4 is not allowed for a single-stack IPv6 cluster",
            ),
            (
                &[on, "--cluster-cidr=10.244.0.0/16", "--node-cidr-mask-size-ipv6=64"],
                "usage of --node-cidr-mask-size-ipv6 is not allowed for a single-stack IPv4 cluster",
            ),
            (
                &[on, "--cluster-cidr=10.244.0.0/16", "--node-cidr-mask-size=8"],
                "Controller: Invalid --cluster-cidr, mask size of cluster CIDR must be less than or equal to --node-cidr-mask-size configured for CIDR family",
            ),
            (
                &[on, "--cluster-cidr=10.244.0.0/16", "--node-cidr-mask-size=-1"],
                "Controller: Invalid --cluster-cidr, mask size of cluster CIDR must be less than or equal to --node-cidr-mask-size configured for CIDR family",
            ),
            (
                &[on, "--cluster-cidr=fd00::/48", "--node-cidr-mask-size=65"],
                "New CIDR set failed; the node CIDR size is too big",
            ),
            (
                &[on, "--cluster-cidr=10.0.0.0/8", "--node-cidr-mask-size=33"],
                "node CIDR mask size 33 is longer than the 32 bits of cluster CIDR 10.0.0.0/8",
            ),
            (
                &[on, "--cluster-cidr=10.0.0.0/8", "--cidr-allocator-type=Frobnicator"],
                "invalid CIDR allocator type: Frobnicator",
            ),
        ];
        for (flags, expected) in table {
            assert_eq!(check(flags), Err(expected.to_string()), "{flags:?}");
        }
    }
}
