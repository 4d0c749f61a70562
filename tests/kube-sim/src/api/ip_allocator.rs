//! Service cluster IPs from `--service-cluster-ip-range`.

use crate::validation;

/// Service cluster IPs from `--service-cluster-ip-range` (IPv4).
pub(super) struct IpAllocator {
    pub(super) base: u32,
    size: u32,
    next: u32,
    used: std::collections::HashSet<u32>,
}

impl IpAllocator {
    pub(super) fn new(cidr: &str) -> Self {
        let (ip, bits) = cidr.split_once('/').unwrap_or((cidr, "24"));
        let base: u32 = ip
            .parse::<std::net::Ipv4Addr>()
            .map(u32::from)
            .unwrap_or(0x0a60_0000);
        let bits: u32 = bits.parse().unwrap_or(12).clamp(8, 30);
        let size = 1u32 << (32 - bits);
        IpAllocator {
            base: base & !(size - 1),
            size,
            next: 1,
            used: Default::default(),
        }
    }

    pub(super) fn allocate(&mut self) -> Option<String> {
        for _ in 0..self.size {
            let off = self.next;
            self.next = if self.next + 2 >= self.size {
                1
            } else {
                self.next + 1
            };
            if self.used.insert(off) {
                return Some(std::net::Ipv4Addr::from(self.base + off).to_string());
            }
        }
        None
    }

    /// The range as `net.IPNet` prints it.
    pub(super) fn cidr(&self) -> String {
        format!(
            "{}/{}",
            std::net::Ipv4Addr::from(self.base),
            32 - self.size.trailing_zeros()
        )
    }

    /// Take a requested IP; the error is the bitmap allocator's.
    pub(super) fn reserve(&mut self, ip: &str) -> Result<(), String> {
        let addr = match crate::validation::endpoints::parse_ip_sloppy(ip) {
            Some(std::net::IpAddr::V4(a)) => a,
            _ => return Err(format!("failed to parse service IP {}", validation::q(ip))),
        };
        let off = u32::from(addr).wrapping_sub(self.base);
        if off == 0 || off >= self.size - 1 {
            return Err(format!(
                "the provided IP ({addr}) is not in the valid range. The range of valid IPs is {}",
                self.cidr()
            ));
        }
        if !self.used.insert(off) {
            return Err("provided IP is already allocated".into());
        }
        Ok(())
    }

    pub(super) fn release(&mut self, ip: &str) {
        if let Ok(addr) = ip.parse::<std::net::Ipv4Addr>() {
            self.used.remove(&u32::from(addr).wrapping_sub(self.base));
        }
    }
}
