//! Who the client is: the address of the connection's peer, or, when that peer is a configured
//! proxy (`trusted_proxies`), the address its `X-Forwarded-For` names.
//!
//! Only a proxy's word is taken: a client that is not one may send any `X-Forwarded-For` it likes,
//! and it is ignored. Behind a chain of proxies the header is read from its right end (what the
//! nearest proxy appended), skipping every address that is itself a configured proxy; the first
//! address that is not one is the client. A proxy that names no client leaves the request without
//! an address, so nothing keyed by address (login throttling, connection caps) lumps every user
//! behind it together.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;
use std::sync::Arc;

use axum::extract::ConnectInfo;
use axum::http::HeaderMap;
use axum::http::request::Parts;

/// The header a proxy names the client in.
const FORWARDED_FOR: &str = "x-forwarded-for";

/// One network of proxies: an address and the length of its prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Network {
    address: IpAddr,
    prefix: u8,
}

impl Network {
    /// Whether `address` is in this network (an IPv4 address mapped into IPv6 counts as IPv4).
    pub fn contains(&self, address: IpAddr) -> bool {
        match (self.address, canonical(address)) {
            (IpAddr::V4(network), IpAddr::V4(address)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(network) & mask == u32::from(address) & mask
            }
            (IpAddr::V6(network), IpAddr::V6(address)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(network) & mask == u128::from(address) & mask
            }
            _ => false,
        }
    }
}

impl FromStr for Network {
    type Err = String;

    /// `ADDRESS` or `ADDRESS/PREFIX`, such as `10.0.0.0/8` or `::1`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let (address, prefix) = match text.split_once('/') {
            Some((address, prefix)) => (address, Some(prefix)),
            None => (text, None),
        };
        let address =
            canonical(address.trim().parse::<IpAddr>().map_err(|_| {
                format!("`{text}` is not an address or a network such as 10.0.0.0/8")
            })?);
        let most = if address.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => most,
            Some(prefix) => prefix
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|prefix| *prefix <= most)
                .ok_or_else(|| format!("`{text}` has a prefix length over {most}"))?,
        };
        Ok(Network { address, prefix })
    }
}

impl fmt::Display for Network {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.address, self.prefix)
    }
}

/// The proxies whose `X-Forwarded-For` is believed. Empty by default: no proxy is trusted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies(Arc<[Network]>);

impl TrustedProxies {
    pub fn new(networks: Vec<Network>) -> Self {
        TrustedProxies(networks.into())
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `address` is one of the configured proxies.
    pub fn contains(&self, address: IpAddr) -> bool {
        self.0.iter().any(|network| network.contains(address))
    }

    /// The client behind a connection from `peer` carrying `headers`: `peer` itself unless it is
    /// a configured proxy, else the address the proxies name, or none.
    pub fn client(&self, peer: IpAddr, headers: &HeaderMap) -> Option<IpAddr> {
        let peer = canonical(peer);
        if !self.contains(peer) {
            return Some(peer);
        }
        let mut named = headers
            .get_all(FORWARDED_FOR)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split(','))
            .map(str::trim)
            .collect::<Vec<_>>();
        named.reverse();
        for entry in named {
            let Some(address) = parse_forwarded(entry) else {
                // Something a proxy did not write: trust nothing further left.
                return None;
            };
            if !self.contains(address) {
                return Some(address);
            }
        }
        None
    }
}

/// One entry of `X-Forwarded-For`: an address, possibly with a port (`[::1]:443`, `1.2.3.4:80`).
fn parse_forwarded(entry: &str) -> Option<IpAddr> {
    if let Ok(address) = entry.parse::<IpAddr>() {
        return Some(canonical(address));
    }
    entry
        .parse::<SocketAddr>()
        .ok()
        .map(|socket| canonical(socket.ip()))
}

/// IPv4 addresses mapped into IPv6 (a dual-stack listener's view of an IPv4 peer) as IPv4.
fn canonical(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 @ IpAddr::V4(_) => v4,
    }
}

/// The client's address as the server worked it out for this request, put in its extensions by
/// the connection that carried it. `None` when a trusted proxy named no client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientAddress(pub Option<IpAddr>);

/// The client's address: what the connection worked out, else the peer's (a request sent without
/// a socket, in tests, has neither and no address).
pub fn of(parts: &Parts) -> Option<IpAddr> {
    if let Some(ClientAddress(address)) = parts.extensions.get::<ClientAddress>() {
        return *address;
    }
    parts
        .extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(address)| canonical(address.ip()))
}

/// Whether the connection itself comes from this machine (never a proxy's word).
pub fn peer_is_loopback(parts: &Parts) -> bool {
    parts
        .extensions
        .get::<ConnectInfo<SocketAddr>>()
        .is_some_and(|ConnectInfo(address)| canonical(address.ip()).is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn proxies(list: &[&str]) -> TrustedProxies {
        TrustedProxies::new(list.iter().map(|n| n.parse().unwrap()).collect())
    }

    fn forwarded(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(FORWARDED_FOR, HeaderValue::from_str(value).unwrap());
        headers
    }

    #[test]
    fn only_a_configured_proxy_names_the_client() {
        let trusted = proxies(&["10.0.0.0/8", "::1"]);
        let client: IpAddr = "203.0.113.7".parse().unwrap();
        let peer: IpAddr = "10.1.2.3".parse().unwrap();
        assert_eq!(
            trusted.client(peer, &forwarded("198.51.100.1, 203.0.113.7")),
            Some(client),
            "the rightmost address that is not a proxy"
        );
        assert_eq!(
            trusted.client(peer, &forwarded("203.0.113.7, 10.9.9.9")),
            Some(client),
            "a chain of trusted proxies is skipped"
        );
        let stranger: IpAddr = "192.0.2.1".parse().unwrap();
        assert_eq!(
            trusted.client(stranger, &forwarded("203.0.113.7")),
            Some(stranger),
            "a peer that is not a proxy is the client, whatever it says"
        );
        assert_eq!(trusted.client(peer, &HeaderMap::new()), None);
        assert_eq!(trusted.client(peer, &forwarded("not an address")), None);
        assert_eq!(
            trusted.client("::1".parse().unwrap(), &forwarded("[2001:db8::5]:443")),
            Some("2001:db8::5".parse().unwrap())
        );
    }

    #[test]
    fn networks_parse_and_match() {
        let network: Network = "192.168.0.0/16".parse().unwrap();
        assert!(network.contains("192.168.44.1".parse().unwrap()));
        assert!(network.contains("::ffff:192.168.1.1".parse().unwrap()));
        assert!(!network.contains("192.169.0.1".parse().unwrap()));
        let all: Network = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains("8.8.8.8".parse().unwrap()));
        assert!("10.0.0.0/33".parse::<Network>().is_err());
        assert!("proxy.example".parse::<Network>().is_err());
        let v6: Network = "2001:db8::/32".parse().unwrap();
        assert!(v6.contains("2001:db8:ffff::1".parse().unwrap()));
        assert!(!v6.contains("2001:db9::1".parse().unwrap()));
    }
}
