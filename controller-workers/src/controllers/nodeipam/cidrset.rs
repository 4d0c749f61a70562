//! One cluster CIDR cut into node-sized blocks, with a bitmap of the blocks in use
//! (upstream's `ipam/cidrset`). Allocation is round-robin: it resumes after the block it
//! handed out last, so a released block is handed out again only once the others have
//! been, which keeps a deleted node's CIDR from going straight to a new node.

use super::cidr::{host_bits, Cidr};
use super::metrics::CidrSetMetrics;

/// Upstream's limit on how many bits longer an IPv6 node mask may be than the cluster's.
const IPV6_MAX_SUBNET_BITS: u8 = 16;

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum CidrSetError {
    #[error("CIDR allocation failed; there are no remaining CIDRs left to allocate in the accepted range")]
    NoCidrsRemaining,
    #[error("New CIDR set failed; the node CIDR size is too big")]
    SubnetTooBig,
    #[error(
        "node CIDR mask size {node} is longer than the {width} bits of cluster CIDR {cluster}"
    )]
    MaskTooLong { cluster: Cidr, node: u8, width: u8 },
    #[error("cidr {cidr} is out the range of cluster cidr {cluster}")]
    OutOfRange { cidr: Cidr, cluster: Cidr },
    #[error("CIDR: {address}/{node_prefix} is out of the range of CIDR allocator")]
    IndexOutOfRange { address: String, node_prefix: u8 },
}

pub(crate) struct CidrSet {
    cluster: Cidr,
    node_prefix: u8,
    max: u64,
    allocated: u64,
    next_candidate: u64,
    /// One bit per block, grown up to the highest block used (a /8 cut into /32s would
    /// otherwise take 2 MiB at once).
    used: Vec<u64>,
    label: String,
    metrics: CidrSetMetrics,
}

impl CidrSet {
    pub(crate) fn new(
        cluster: Cidr,
        node_prefix: u8,
        metrics: CidrSetMetrics,
    ) -> Result<CidrSet, CidrSetError> {
        if node_prefix > cluster.width() {
            return Err(CidrSetError::MaskTooLong {
                cluster,
                node: node_prefix,
                width: cluster.width(),
            });
        }
        if node_prefix < cluster.prefix() {
            // The caller checks this with upstream's message; a set cannot exist.
            return Err(CidrSetError::OutOfRange {
                cidr: Cidr::new(cluster.value(), cluster.is_ipv6(), node_prefix),
                cluster,
            });
        }
        let bits = node_prefix - cluster.prefix();
        if cluster.is_ipv6() && bits > IPV6_MAX_SUBNET_BITS {
            return Err(CidrSetError::SubnetTooBig);
        }
        let max = 1u64 << bits;
        let label = cluster.to_string();
        metrics.set_max(&label, max);
        Ok(CidrSet {
            cluster,
            node_prefix,
            max,
            allocated: 0,
            next_candidate: 0,
            used: Vec::new(),
            label,
            metrics,
        })
    }

    pub(crate) fn cluster(&self) -> &Cidr {
        &self.cluster
    }

    #[cfg(test)]
    pub(crate) fn allocated(&self) -> u64 {
        self.allocated
    }

    fn is_used(&self, index: u64) -> bool {
        let word = (index / 64) as usize;
        self.used
            .get(word)
            .is_some_and(|bits| bits & (1 << (index % 64)) != 0)
    }

    /// Sets or clears a block's bit; whether it changed.
    fn set_used(&mut self, index: u64, used: bool) -> bool {
        if self.is_used(index) == used {
            return false;
        }
        let word = (index / 64) as usize;
        if self.used.len() <= word {
            self.used.resize(word + 1, 0);
        }
        self.used[word] ^= 1 << (index % 64);
        true
    }

    fn block(&self, index: u64) -> Cidr {
        let shift = self.cluster.width() - self.node_prefix;
        let offset = if shift >= 128 {
            0
        } else {
            u128::from(index) << shift
        };
        Cidr::new(
            self.cluster.value() | offset,
            self.cluster.is_ipv6(),
            self.node_prefix,
        )
    }

    fn index_of(&self, address: u128) -> Result<u64, CidrSetError> {
        let shift = u32::from(self.cluster.width() - self.node_prefix);
        let offset = (self.cluster.value() ^ address)
            .checked_shr(shift)
            .unwrap_or(0);
        match u64::try_from(offset) {
            Ok(index) if index < self.max => Ok(index),
            _ => Err(CidrSetError::IndexOutOfRange {
                address: Cidr::new(address, self.cluster.is_ipv6(), self.cluster.width())
                    .address()
                    .to_string(),
                node_prefix: self.node_prefix,
            }),
        }
    }

    /// The first and last block `cidr` touches (all of them when it holds the cluster).
    fn span(&self, cidr: &Cidr) -> Result<(u64, u64), CidrSetError> {
        if !self.cluster.overlaps(cidr) {
            return Err(CidrSetError::OutOfRange {
                cidr: *cidr,
                cluster: self.cluster,
            });
        }
        if cidr.prefix() <= self.cluster.prefix() {
            return Ok((0, self.max - 1));
        }
        let node_mask = !host_bits(self.cluster.width(), self.node_prefix);
        let begin = self.index_of(cidr.value() & node_mask)?;
        let end = self.index_of(cidr.last() & node_mask)?;
        Ok((begin, end))
    }

    /// The next free block after the last one handed out.
    pub(crate) fn allocate_next(&mut self) -> Result<Cidr, CidrSetError> {
        if self.allocated == self.max {
            return Err(CidrSetError::NoCidrsRemaining);
        }
        let mut candidate = self.next_candidate;
        let mut tries = 0;
        while tries < self.max && self.is_used(candidate) {
            candidate = (candidate + 1) % self.max;
            tries += 1;
        }
        self.next_candidate = (candidate + 1) % self.max;
        self.set_used(candidate, true);
        self.allocated += 1;
        self.metrics.allocated(&self.label, tries);
        self.metrics
            .set_usage(&self.label, self.allocated, self.max);
        Ok(self.block(candidate))
    }

    /// Marks every block `cidr` touches as in use (a node's existing CIDR, the service
    /// range).
    pub(crate) fn occupy(&mut self, cidr: &Cidr) -> Result<(), CidrSetError> {
        let (begin, end) = self.span(cidr)?;
        let mut count = 0;
        for index in begin..=end {
            if self.set_used(index, true) {
                count += 1;
            }
        }
        self.allocated += count;
        self.metrics.occupied(&self.label, count);
        self.metrics
            .set_usage(&self.label, self.allocated, self.max);
        Ok(())
    }

    /// Frees every block `cidr` touches.
    pub(crate) fn release(&mut self, cidr: &Cidr) -> Result<(), CidrSetError> {
        let (begin, end) = self.span(cidr)?;
        let mut count = 0;
        for index in begin..=end {
            if self.set_used(index, false) {
                count += 1;
            }
        }
        self.allocated -= count;
        self.metrics.released(&self.label, count);
        self.metrics
            .set_usage(&self.label, self.allocated, self.max);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(cluster: &str, node_prefix: u8) -> CidrSet {
        CidrSet::new(
            Cidr::parse(cluster).unwrap(),
            node_prefix,
            CidrSetMetrics::unregistered(),
        )
        .unwrap()
    }

    fn cidr(text: &str) -> Cidr {
        Cidr::parse(text).unwrap()
    }

    fn allocate(set: &mut CidrSet) -> String {
        set.allocate_next().unwrap().to_string()
    }

    #[test]
    fn allocates_in_order_until_full() {
        let mut s = set("10.244.0.0/22", 24);
        let got: Vec<String> = (0..4).map(|_| allocate(&mut s)).collect();
        assert_eq!(
            got,
            [
                "10.244.0.0/24",
                "10.244.1.0/24",
                "10.244.2.0/24",
                "10.244.3.0/24"
            ]
        );
        assert_eq!(s.allocate_next(), Err(CidrSetError::NoCidrsRemaining));
        assert_eq!(
            CidrSetError::NoCidrsRemaining.to_string(),
            "CIDR allocation failed; there are no remaining CIDRs left to allocate in the accepted range"
        );
    }

    #[test]
    fn released_blocks_come_back_after_wrap_around() {
        let mut s = set("10.244.0.0/22", 24);
        for _ in 0..3 {
            allocate(&mut s);
        }
        s.release(&cidr("10.244.0.0/24")).unwrap();
        assert_eq!(s.allocated(), 2);
        // Round-robin: the untouched block first, then the released one.
        assert_eq!(allocate(&mut s), "10.244.3.0/24");
        assert_eq!(allocate(&mut s), "10.244.0.0/24");
        assert!(s.allocate_next().is_err());
        // Releasing a free block changes nothing.
        s.release(&cidr("10.244.1.0/24")).unwrap();
        s.release(&cidr("10.244.1.0/24")).unwrap();
        assert_eq!(s.allocated(), 3);
    }

    #[test]
    fn occupy_marks_existing_and_larger_or_smaller_ranges() {
        let mut s = set("10.244.0.0/16", 24);
        s.occupy(&cidr("10.244.0.0/24")).unwrap();
        s.occupy(&cidr("10.244.0.0/24")).unwrap();
        assert_eq!(s.allocated(), 1);
        // A /20 service range inside the cluster range takes 16 blocks.
        s.occupy(&cidr("10.244.16.0/20")).unwrap();
        assert_eq!(s.allocated(), 17);
        // A /28 takes the block that holds it.
        s.occupy(&cidr("10.244.1.16/28")).unwrap();
        assert_eq!(s.allocated(), 18);
        assert_eq!(allocate(&mut s), "10.244.2.0/24");
        // A range holding the cluster range takes everything.
        s.occupy(&cidr("10.0.0.0/8")).unwrap();
        assert_eq!(s.allocated(), 256);
        assert!(s.allocate_next().is_err());
        assert_eq!(
            s.occupy(&cidr("10.245.0.0/24")).unwrap_err().to_string(),
            "cidr 10.245.0.0/24 is out the range of cluster cidr 10.244.0.0/16"
        );
        assert!(s.occupy(&cidr("fd00::/64")).is_err());
    }

    #[test]
    fn ipv6_blocks_and_limits() {
        let mut s = set("fd00:10:244::/56", 64);
        assert_eq!(allocate(&mut s), "fd00:10:244::/64");
        assert_eq!(allocate(&mut s), "fd00:10:244:1::/64");
        s.occupy(&cidr("fd00:10:244:5::/64")).unwrap();
        s.release(&cidr("fd00:10:244::/64")).unwrap();
        assert_eq!(s.allocated(), 2);
        // Node masks past the middle of the address.
        let mut s = set("fd00::/112", 120);
        assert_eq!(allocate(&mut s), "fd00::/120");
        assert_eq!(allocate(&mut s), "fd00::100/120");
        assert_eq!(
            CidrSet::new(cidr("fd00::/48"), 65, CidrSetMetrics::unregistered()).err(),
            Some(CidrSetError::SubnetTooBig)
        );
        assert!(CidrSet::new(cidr("fd00::/48"), 64, CidrSetMetrics::unregistered()).is_ok());
    }

    #[test]
    fn whole_space_sets_are_lazy() {
        let mut s = set("10.0.0.0/8", 32);
        assert_eq!(allocate(&mut s), "10.0.0.0/32");
        assert_eq!(allocate(&mut s), "10.0.0.1/32");
        assert!(s.used.len() == 1);
        let mut s = set("10.0.0.0/8", 8);
        assert_eq!(allocate(&mut s), "10.0.0.0/8");
        assert!(s.allocate_next().is_err());
    }
}
