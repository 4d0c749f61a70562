//! IP addresses read as Kubernetes reads the addresses of Endpoints and pods
//! (`k8s.io/utils/net` `ParseIPSloppy`, Go's parser from before 1.17): IPv4 octets may
//! carry leading zeros (`010.0.0.1` is 10.0.0.1), which Rust's parser refuses; and an
//! IPv4-mapped IPv6 address (`::ffff:10.0.0.1`) is of the IPv4 family, as Go's `To4`
//! says.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The EndpointSlice `addressType` of IPv4 addresses.
pub const ADDRESS_TYPE_IPV4: &str = "IPv4";
/// The EndpointSlice `addressType` of IPv6 addresses.
pub const ADDRESS_TYPE_IPV6: &str = "IPv6";

/// Go's largest intermediate value while reading a decimal octet.
const DECIMAL_LIMIT: u32 = 0xFF_FFFF;

/// A dotted-quad IPv4 address whose octets are decimal numbers up to 255, leading zeros
/// allowed.
fn parse_ipv4_sloppy(text: &str) -> Option<Ipv4Addr> {
    let mut octets = [0u8; 4];
    let mut parts = text.split('.');
    for octet in &mut octets {
        let part = parts.next()?;
        if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let mut value: u32 = 0;
        for digit in part.bytes() {
            value = value * 10 + u32::from(digit - b'0');
            if value >= DECIMAL_LIMIT {
                return None;
            }
        }
        *octet = u8::try_from(value).ok()?;
    }
    parts.next().is_none().then(|| Ipv4Addr::from(octets))
}

/// The address, or `None` when it is not one (upstream `ParseIPSloppy`): whichever of `.`
/// and `:` comes first says the family.
pub fn parse_ip_sloppy(text: &str) -> Option<IpAddr> {
    let separator = text.bytes().find(|b| *b == b'.' || *b == b':')?;
    if separator == b'.' {
        return parse_ipv4_sloppy(text).map(IpAddr::V4);
    }
    let (head, tail) = text.rsplit_once(':')?;
    if tail.contains('.') {
        // An embedded IPv4 tail is read as loosely as a plain IPv4 address.
        let tail = parse_ipv4_sloppy(tail)?;
        return format!("{head}:{tail}")
            .parse::<Ipv6Addr>()
            .ok()
            .map(IpAddr::V6);
    }
    text.parse::<Ipv6Addr>().ok().map(IpAddr::V6)
}

/// The EndpointSlice address type of an IP, `None` when it is not an IP.
pub fn address_type_of(text: &str) -> Option<&'static str> {
    match parse_ip_sloppy(text)? {
        IpAddr::V4(_) => Some(ADDRESS_TYPE_IPV4),
        IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some() => Some(ADDRESS_TYPE_IPV4),
        IpAddr::V6(_) => Some(ADDRESS_TYPE_IPV6),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_read_as_go_reads_them() {
        for (text, family) in [
            ("10.0.0.1", Some(ADDRESS_TYPE_IPV4)),
            ("010.000.0.1", Some(ADDRESS_TYPE_IPV4)),
            ("0000000255.0.0.0", Some(ADDRESS_TYPE_IPV4)),
            ("2001:db8::1", Some(ADDRESS_TYPE_IPV6)),
            ("::1", Some(ADDRESS_TYPE_IPV6)),
            ("::ffff:10.0.0.1", Some(ADDRESS_TYPE_IPV4)),
            ("::ffff:010.0.0.1", Some(ADDRESS_TYPE_IPV4)),
            ("::10.0.0.1", Some(ADDRESS_TYPE_IPV6)),
            ("256.0.0.1", None),
            ("10.0.0", None),
            ("10.0.0.1.2", None),
            ("10.0.0.1:80", None),
            ("10..0.1", None),
            ("-1.0.0.1", None),
            ("fe80::1%eth0", None),
            ("a.b.c.d", None),
            ("example.com", None),
            ("", None),
            ("1", None),
        ] {
            assert_eq!(address_type_of(text), family, "{text:?}");
        }
        assert_eq!(
            parse_ip_sloppy("010.000.0.1"),
            Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)))
        );
    }
}
