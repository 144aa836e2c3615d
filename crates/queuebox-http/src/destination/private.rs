//! DST-32: with `http.blockPrivateAddresses`, the start stops for an HTTP `baseUrl` or OAuth2
//! `tokenUrl` whose host is, or resolves to, a non-public address. Checked once, at start.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use url::{Host, Url};

use super::DestinationError;

/// Resolves the host of each URL once and fails on the first loopback, unspecified,
/// link-local, private or unique-local address, naming the key and the address. IP literals
/// are checked directly; a host that does not resolve passes (it fails at publish time).
pub async fn check_private_addresses(targets: &[(String, Url)]) -> Result<(), DestinationError> {
    for (key, url) in targets {
        let Some(host) = url.host() else { continue };
        let addresses: Vec<IpAddr> = match host {
            Host::Ipv4(ip) => vec![IpAddr::V4(ip)],
            Host::Ipv6(ip) => vec![IpAddr::V6(ip)],
            Host::Domain(domain) => {
                let port = url.port_or_known_default().unwrap_or(443);
                match tokio::net::lookup_host((domain, port)).await {
                    Ok(found) => found.map(|socket| socket.ip()).collect(),
                    Err(_) => Vec::new(),
                }
            }
        };
        if let Some(address) = addresses.into_iter().find(|ip| is_blocked_address(*ip)) {
            return Err(DestinationError::PrivateAddress {
                key: key.clone(),
                host: url.host_str().unwrap_or_default().to_owned(),
                address,
            });
        }
    }
    Ok(())
}

/// The ranges of DST-32. An IPv4-mapped IPv6 address is judged as its IPv4 address, or
/// `::ffff:127.0.0.1` would slip through.
pub fn is_blocked_address(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => blocked_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => blocked_v4(v4),
            None => blocked_v6(v6),
        },
    }
}

fn blocked_v4(ip: Ipv4Addr) -> bool {
    // loopback 127/8, unspecified, link-local 169.254/16, private 10/8, 172.16/12, 192.168/16
    ip.is_loopback() || ip.is_unspecified() || ip.is_link_local() || ip.is_private()
}

fn blocked_v6(ip: Ipv6Addr) -> bool {
    let first = ip.segments()[0];
    ip.is_loopback()
        || ip.is_unspecified()
        || (first & 0xffc0) == 0xfe80 // link-local fe80::/10
        || (first & 0xffc0) == 0xfec0 // site-local fec0::/10
        || (first & 0xfe00) == 0xfc00 // unique-local fc00::/7
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocked(text: &str) -> bool {
        is_blocked_address(text.parse().unwrap())
    }

    #[test]
    fn dst_32_blocked_ipv4_ranges() {
        for ip in [
            "127.0.0.1",
            "127.255.255.254",
            "0.0.0.0",
            "169.254.169.254",
            "10.0.0.1",
            "10.255.255.255",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
        ] {
            assert!(blocked(ip), "{ip}");
        }
    }

    #[test]
    fn dst_32_public_ipv4_passes() {
        for ip in [
            "8.8.8.8",
            "172.15.255.255",
            "172.32.0.1",
            "192.169.0.1",
            "169.253.0.1",
            "11.0.0.1",
        ] {
            assert!(!blocked(ip), "{ip}");
        }
    }

    #[test]
    fn dst_32_blocked_ipv6_ranges() {
        for ip in [
            "::1",
            "::",
            "fe80::1",
            "febf::1",
            "fec0::1",
            "feff::1",
            "fc00::1",
            "fdff::1",
            "::ffff:10.1.2.3",
        ] {
            assert!(blocked(ip), "{ip}");
        }
    }

    #[test]
    fn dst_32_public_ipv6_passes() {
        for ip in [
            "2001:4860:4860::8888",
            "fe7f::1",
            "fbff::1",
            "::ffff:8.8.8.8",
        ] {
            assert!(!blocked(ip), "{ip}");
        }
    }

    #[tokio::test]
    async fn dst_32_loopback_literal_stops_the_start_naming_key_and_address() {
        let targets = vec![
            (
                "destinations.ok.baseUrl".to_owned(),
                Url::parse("https://8.8.8.8").unwrap(),
            ),
            (
                "destinations.orders.baseUrl".to_owned(),
                Url::parse("http://127.0.0.1:9000").unwrap(),
            ),
        ];
        let err = check_private_addresses(&targets).await.unwrap_err();
        let text = err.to_string();
        assert!(text.starts_with("destinations.orders.baseUrl:"), "{text}");
        assert!(text.contains("127.0.0.1"), "{text}");
    }

    #[tokio::test]
    async fn dst_32_ipv6_literal_and_localhost_name_are_checked() {
        let v6 = vec![("k".to_owned(), Url::parse("http://[::1]:9000").unwrap())];
        assert!(check_private_addresses(&v6).await.is_err());
        let name = vec![("k".to_owned(), Url::parse("http://localhost:9000").unwrap())];
        assert!(check_private_addresses(&name).await.is_err());
    }

    #[tokio::test]
    async fn dst_32_unresolvable_host_passes() {
        let targets = vec![(
            "k".to_owned(),
            Url::parse("https://no-such-host.invalid").unwrap(),
        )];
        assert!(check_private_addresses(&targets).await.is_ok());
    }
}
