//! IP networks as the node-ipam controller handles them: parsed from flags and from
//! `spec.podCIDRs`, compared, and turned into numbers so the [`super::cidrset`] bitmap can
//! index them. IPv4 and IPv6 share one representation (the address as a `u128` and its
//! width in bits).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Cidr {
    /// The network address (host bits cleared).
    value: u128,
    ipv6: bool,
    prefix: u8,
}

/// The bits of an address below a prefix of `prefix` in a `width`-bit address.
pub(crate) fn host_bits(width: u8, prefix: u8) -> u128 {
    let host = u32::from(width.saturating_sub(prefix));
    if host >= 128 {
        u128::MAX
    } else {
        (1u128 << host) - 1
    }
}

impl Cidr {
    /// `a.b.c.d/n` or `x:y::/n`; like Go's `net.ParseCIDR`, the host bits are dropped
    /// (`10.0.0.1/8` is `10.0.0.0/8`). The error is Go's wording.
    pub(crate) fn parse(text: &str) -> Result<Cidr, String> {
        let invalid = || format!("invalid CIDR address: {text}");
        let (address, prefix) = text.split_once('/').ok_or_else(invalid)?;
        if prefix.is_empty() || !prefix.bytes().all(|b| b.is_ascii_digit()) {
            return Err(invalid());
        }
        let address: IpAddr = address.parse().map_err(|_| invalid())?;
        let prefix: u8 = prefix.parse().map_err(|_| invalid())?;
        let (value, ipv6) = match address {
            IpAddr::V4(v4) => (u128::from(u32::from(v4)), false),
            IpAddr::V6(v6) => (u128::from(v6), true),
        };
        let width = if ipv6 { 128 } else { 32 };
        if prefix > width {
            return Err(invalid());
        }
        Ok(Cidr::new(value, ipv6, prefix))
    }

    /// The network of `prefix` bits that holds address `value`.
    pub(crate) fn new(value: u128, ipv6: bool, prefix: u8) -> Cidr {
        let width = if ipv6 { 128 } else { 32 };
        Cidr {
            value: value & !host_bits(width, prefix),
            ipv6,
            prefix,
        }
    }

    pub(crate) fn is_ipv6(&self) -> bool {
        self.ipv6
    }

    /// 32 or 128.
    pub(crate) fn width(&self) -> u8 {
        if self.ipv6 {
            128
        } else {
            32
        }
    }

    pub(crate) fn prefix(&self) -> u8 {
        self.prefix
    }

    /// The network address as a number.
    pub(crate) fn value(&self) -> u128 {
        self.value
    }

    /// The last address of the network as a number.
    pub(crate) fn last(&self) -> u128 {
        self.value | host_bits(self.width(), self.prefix)
    }

    pub(crate) fn contains(&self, ipv6: bool, address: u128) -> bool {
        ipv6 == self.ipv6 && address & !host_bits(self.width(), self.prefix) == self.value
    }

    /// Whether one network holds the other (upstream's two-way containment test, so a
    /// service range larger than the cluster range counts too).
    pub(crate) fn overlaps(&self, other: &Cidr) -> bool {
        self.contains(other.ipv6, other.value) || other.contains(self.ipv6, self.value)
    }

    pub(crate) fn address(&self) -> IpAddr {
        if self.ipv6 {
            IpAddr::V6(Ipv6Addr::from(self.value))
        } else {
            IpAddr::V4(Ipv4Addr::from(self.value as u32))
        }
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.address(), self.prefix)
    }
}

/// Whether the list holds at least one network of each family (`IsDualStackCIDRs`).
pub(crate) fn is_dual_stack(cidrs: &[Cidr]) -> bool {
    cidrs.iter().any(Cidr::is_ipv6) && cidrs.iter().any(|c| !c.is_ipv6())
}

/// `--cluster-cidr` checked as KCM's `validateCIDRs` (node-ipam and the route controller
/// share it): one network, or one of each family.
pub(crate) fn cluster_cidrs(flag: &str) -> Result<Vec<Cidr>, String> {
    let mut cidrs = Vec::new();
    for (index, text) in flag.trim().split(',').enumerate() {
        let cidr =
            Cidr::parse(text).map_err(|error| format!("invalid CIDR[{index}]: <nil> ({error})"))?;
        cidrs.push(cidr);
    }
    if cidrs.len() > 1 && !is_dual_stack(&cidrs) {
        return Err(format!(
            "len of ClusterCIDRs=={} and they are not configured as dual stack (at least one from each IPFamily",
            cidrs.len()
        ));
    }
    if cidrs.len() > 2 {
        return Err(format!(
            "length of clusterCIDRs is:{} more than max allowed of 2",
            cidrs.len()
        ));
    }
    Ok(cidrs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_both_families_and_drops_host_bits() {
        let v4 = Cidr::parse("10.244.3.7/16").unwrap();
        assert_eq!(v4.to_string(), "10.244.0.0/16");
        assert!(!v4.is_ipv6());
        let v6 = Cidr::parse("fd00:10:244::1/56").unwrap();
        assert_eq!(v6.to_string(), "fd00:10:244::/56");
        assert!(v6.is_ipv6());
        assert_eq!(
            Cidr::parse("0.0.0.0/0").unwrap().last(),
            u128::from(u32::MAX)
        );
        assert_eq!(Cidr::parse("::/0").unwrap().last(), u128::MAX);
        for bad in [
            "",
            "10.0.0.0",
            "10.0.0.0/33",
            "10.0.0/8",
            "x/8",
            "10.0.0.0/+8",
            "::/129",
        ] {
            assert_eq!(
                Cidr::parse(bad),
                Err(format!("invalid CIDR address: {bad}")),
                "{bad}"
            );
        }
    }

    #[test]
    fn overlap_is_two_way_and_per_family() {
        let cluster = Cidr::parse("10.0.0.0/16").unwrap();
        assert!(cluster.overlaps(&Cidr::parse("10.0.5.0/24").unwrap()));
        assert!(cluster.overlaps(&Cidr::parse("10.0.0.0/8").unwrap()));
        assert!(!cluster.overlaps(&Cidr::parse("10.1.0.0/16").unwrap()));
        assert!(!cluster.overlaps(&Cidr::parse("::/0").unwrap()));
        assert!(is_dual_stack(&[cluster, Cidr::parse("fd00::/48").unwrap()]));
        assert!(!is_dual_stack(&[
            cluster,
            Cidr::parse("10.1.0.0/16").unwrap()
        ]));
    }
}
