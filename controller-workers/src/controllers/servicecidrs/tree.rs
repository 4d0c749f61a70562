//! The prefixes of the ServiceCIDRs and the questions the controller asks of them
//! (upstream keeps them in a radix tree, `pkg/util/iptree`; a handful of ServiceCIDRs make
//! a map enough): which ServiceCIDRs hold a prefix, lie within it, or hold a host address.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

/// A CIDR in its network form, as Go's `netip.ParsePrefix` reads it (the address bits
/// beyond the prefix dropped).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Prefix {
    network: IpAddr,
    bits: u8,
}

fn to_bits(ip: IpAddr) -> (u128, u8) {
    match ip {
        IpAddr::V4(v4) => (u128::from(u32::from(v4)), 32),
        IpAddr::V6(v6) => (u128::from(v6), 128),
    }
}

fn from_bits(value: u128, width: u8) -> IpAddr {
    if width == 32 {
        IpAddr::V4(std::net::Ipv4Addr::from(value as u32))
    } else {
        IpAddr::V6(std::net::Ipv6Addr::from(value))
    }
}

fn mask(width: u8, bits: u8) -> u128 {
    if bits == 0 {
        0
    } else {
        let all = if width == 32 {
            u128::from(u32::MAX)
        } else {
            u128::MAX
        };
        (all << (width - bits)) & all
    }
}

impl Prefix {
    /// Parses `addr/bits` (canonical or not, as `netip.ParsePrefix` does); `None` for
    /// anything else.
    pub(crate) fn parse(cidr: &str) -> Option<Prefix> {
        let (addr, bits) = cidr.split_once('/')?;
        let ip: IpAddr = addr.parse().ok()?;
        let bits: u8 = bits.parse().ok()?;
        let (value, width) = to_bits(ip);
        if bits > width {
            return None;
        }
        Some(Prefix {
            network: from_bits(value & mask(width, bits), width),
            bits,
        })
    }

    fn width(&self) -> u8 {
        to_bits(self.network).1
    }

    fn is_ipv4(&self) -> bool {
        self.network.is_ipv4()
    }

    /// Whether `other` (a prefix of the same family) lies within this one.
    fn covers(&self, other: &Prefix) -> bool {
        if self.is_ipv4() != other.is_ipv4() || self.bits > other.bits {
            return false;
        }
        let width = self.width();
        (to_bits(other.network).0 & mask(width, self.bits)) == to_bits(self.network).0
    }

    /// `prefixContainIP`: the address is in the prefix and is neither its network
    /// address nor, for IPv4, its broadcast address (the allocators never hand those out).
    fn holds_host(&self, ip: IpAddr) -> bool {
        if ip.is_ipv4() != self.is_ipv4() {
            return false;
        }
        let width = self.width();
        let (value, _) = to_bits(ip);
        let network = to_bits(self.network).0;
        if value & mask(width, self.bits) != network || value == network {
            return false;
        }
        let broadcast = network | (!mask(width, self.bits) & mask(width, width));
        !(self.is_ipv4() && value == broadcast)
    }

    /// `IPv4` or `IPv6`, as the allocator's family label spells it.
    pub(crate) fn family(&self) -> &'static str {
        if self.is_ipv4() {
            "IPv4"
        } else {
            "IPv6"
        }
    }
}

/// Each prefix with the ServiceCIDRs that list it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Tree(BTreeMap<Prefix, BTreeSet<String>>);

impl Tree {
    /// The tree of these ServiceCIDRs, `(name, cidrs)`; unparsable CIDRs are skipped.
    pub(crate) fn build<'a>(cidrs: impl IntoIterator<Item = (&'a str, &'a [String])>) -> Tree {
        let mut tree = Tree::default();
        for (name, list) in cidrs {
            for prefix in list.iter().filter_map(|c| Prefix::parse(c)) {
                tree.0.entry(prefix).or_default().insert(name.to_string());
            }
        }
        tree
    }

    /// `WalkPath`: the ServiceCIDRs of the prefixes that hold `prefix` (itself included).
    pub(crate) fn holding(&self, prefix: &Prefix) -> BTreeSet<String> {
        self.0
            .iter()
            .filter(|(p, _)| p.covers(prefix))
            .flat_map(|(_, names)| names.iter().cloned())
            .collect()
    }

    /// `WalkPrefix`: the ServiceCIDRs of the prefixes within `prefix` (itself included).
    pub(crate) fn within(&self, prefix: &Prefix) -> BTreeSet<String> {
        self.0
            .iter()
            .filter(|(p, _)| prefix.covers(p))
            .flat_map(|(_, names)| names.iter().cloned())
            .collect()
    }

    /// `GetHostIPPrefixMatches`: each prefix holding `ip` as a host address, with its
    /// ServiceCIDRs.
    pub(crate) fn host_matches(&self, ip: IpAddr) -> Vec<&BTreeSet<String>> {
        self.0
            .iter()
            .filter(|(p, _)| p.holds_host(ip))
            .map(|(_, names)| names)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Prefix {
        Prefix::parse(s).unwrap()
    }

    fn names(set: BTreeSet<String>) -> Vec<String> {
        set.into_iter().collect()
    }

    #[test]
    fn prefixes_parse_as_go_reads_them() {
        assert_eq!(p("10.0.0.7/24"), p("10.0.0.0/24"));
        assert_eq!(Prefix::parse("10.0.0.0/33"), None);
        assert_eq!(Prefix::parse("10.0.0.0"), None);
        assert_eq!(p("fd00::/64").family(), "IPv6");
        assert_eq!(p("0.0.0.0/0").family(), "IPv4");
    }

    #[test]
    fn the_tree_answers_containment_both_ways() {
        let wide = vec!["10.0.0.0/16".to_string()];
        let narrow = vec!["10.0.1.0/24".to_string(), "fd00::/64".to_string()];
        let twin = vec!["10.0.1.0/24".to_string()];
        let tree = Tree::build([
            ("wide", wide.as_slice()),
            ("narrow", narrow.as_slice()),
            ("twin", twin.as_slice()),
        ]);
        assert_eq!(
            names(tree.holding(&p("10.0.1.0/24"))),
            ["narrow", "twin", "wide"]
        );
        assert_eq!(names(tree.holding(&p("10.0.0.0/16"))), ["wide"]);
        assert_eq!(
            names(tree.within(&p("10.0.0.0/16"))),
            ["narrow", "twin", "wide"]
        );
        assert_eq!(names(tree.within(&p("fd00::/48"))), ["narrow"]);
        assert!(tree.holding(&p("192.168.0.0/24")).is_empty());
    }

    #[test]
    fn network_and_broadcast_addresses_are_not_hosts() {
        let cidrs = vec!["10.0.1.0/24".to_string(), "fd00::/64".to_string()];
        let tree = Tree::build([("a", cidrs.as_slice())]);
        let host = |s: &str| tree.host_matches(s.parse().unwrap()).len();
        assert_eq!(host("10.0.1.5"), 1);
        assert_eq!(host("10.0.1.0"), 0);
        assert_eq!(host("10.0.1.255"), 0);
        assert_eq!(host("10.0.2.1"), 0);
        assert_eq!(host("fd00::"), 0);
        assert_eq!(host("fd00::ffff:ffff:ffff:ffff"), 1);
    }
}
