//! The pure half of the private-address guard (CFG-102, SEC-11, DST-32): which configured URLs
//! the start must resolve, and which addresses are blocked. Resolving needs DNS, so the binary
//! does that part at start-up.

use std::net::IpAddr;

use crate::model::Config;
use crate::model_destination::{DestinationAuth, DestinationKind};

/// Every `baseUrl` and OAuth2 `tokenUrl`, with the key path an error must name.
pub fn outbound_urls(config: &Config) -> Vec<(String, &url::Url)> {
    let mut out = Vec::new();
    for (name, destination) in &config.destinations {
        let DestinationKind::Http(http) = &destination.kind else {
            continue;
        };
        out.push((format!("destinations.{name}.baseUrl"), &http.base_url));
        if let Some(DestinationAuth::Oauth2 { token_url, .. }) = &http.auth {
            out.push((format!("destinations.{name}.auth.tokenUrl"), token_url));
        }
    }
    out
}

/// Whether an address is loopback, unspecified, link-local, private or unique-local, the
/// ranges of DST-32. IPv4-mapped IPv6 addresses are judged as their IPv4 address.
pub fn is_blocked_address(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            v4.is_loopback() || v4.is_unspecified() || v4.is_link_local() || v4.is_private()
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_blocked_address(IpAddr::V4(v4));
            }
            let first = v6.segments()[0];
            v6.is_loopback()
                || v6.is_unspecified()
                || (first & 0xffc0) == 0xfe80 // fe80::/10 link-local
                || (first & 0xffc0) == 0xfec0 // fec0::/10 site-local
                || (first & 0xfe00) == 0xfc00 // fc00::/7 unique-local
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocked(text: &str) -> bool {
        is_blocked_address(text.parse().expect("an IP address"))
    }

    #[test]
    fn cfg_102_blocked_ranges_of_dst_32() {
        for ip in [
            "127.0.0.1",
            "127.255.0.9",
            "0.0.0.0",
            "169.254.1.1",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "::1",
            "::",
            "fe80::1",
            "fec0::1",
            "fc00::1",
            "fd12:3456::1",
            "::ffff:10.0.0.1",
        ] {
            assert!(blocked(ip), "{ip}");
        }
        for ip in [
            "8.8.8.8",
            "172.32.0.1",
            "192.169.0.1",
            "2001:db8::1",
            "::ffff:8.8.8.8",
        ] {
            assert!(!blocked(ip), "{ip}");
        }
    }
}
