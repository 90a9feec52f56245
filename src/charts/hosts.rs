//! Which chart URLs fluxplan may fetch. A pull request chooses URLs (a new HelmRepository can
//! point anywhere), so a host is fetched from only when the base revision's sources (or its
//! charts' dependencies) or the cluster's already use it, or the operator allow-listed it; and an
//! address on loopback, link-local, private or shared ranges or a cloud metadata address is
//! refused unless that exact host and port is allow-listed. Mirrors (`--registry-mirror
//! HOST=MIRROR`) replace a host and keep the path; a mirror is trusted as the operator's, but it
//! allows no URL by itself.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use url::Url;

/// Why a URL or an address is not fetched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("{0} is not a chart URL fluxplan fetches (http, https or oci only)")]
    Scheme(String),
    #[error(
        "{0} is not used by the base revision's or the cluster's sources: a pull request may not make \
         fluxplan fetch from a new host (allow it with --chart-hosts)"
    )]
    NewHost(String),
    #[error(
        "credentials are sent only to hosts the operator names: {0} is not in --chart-hosts (a pull request \
         may point a source with a secretRef anywhere it may fetch from)"
    )]
    Credentials(String),
    #[error("{host} resolves to {address}, a {kind} address: refused (allow exactly {host}:{port} with --chart-hosts)")]
    Address { host: String, port: u16, address: IpAddr, kind: &'static str },
}

/// `host` or `host:port`, as the allow-list writes them.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Allowed {
    host: String,
    port: Option<u16>,
}

#[derive(Debug, Clone, Default)]
pub struct HostPolicy {
    /// Hosts the base revision's and the live cluster's sources use.
    known: BTreeSet<String>,
    /// The operator's allow-list (`--chart-hosts`, the policy file).
    allowed: BTreeSet<Allowed>,
    /// `HOST` → the mirror URL that replaces it.
    mirrors: BTreeMap<String, Url>,
}

impl HostPolicy {
    /// `known`: hosts of URLs the base revision's and the live cluster's sources use.
    /// `allowed`: `host` or `host:port` entries; `mirrors`: `HOST=MIRROR` entries.
    pub fn new<'a>(
        known: impl IntoIterator<Item = &'a str>,
        allowed: impl IntoIterator<Item = &'a str>,
        mirrors: impl IntoIterator<Item = &'a str>,
    ) -> Result<Self, String> {
        let known = known.into_iter().filter_map(host_of).collect();
        let allowed = allowed
            .into_iter()
            .map(|entry| match entry.rsplit_once(':') {
                Some((host, port)) if !host.contains(':') || host.ends_with(']') => {
                    let port = port
                        .parse()
                        .map_err(|_| format!("--chart-hosts {entry}: the port is not a number"))?;
                    Ok(Allowed { host: normalize_host(host), port: Some(port) })
                }
                _ => Ok(Allowed { host: normalize_host(entry), port: None }),
            })
            .collect::<Result<_, String>>()?;
        let mirrors = mirrors
            .into_iter()
            .map(|entry| {
                let (host, mirror) = entry
                    .split_once('=')
                    .ok_or_else(|| format!("--registry-mirror {entry}: write HOST=MIRROR"))?;
                let mirror =
                    if mirror.contains("://") { mirror.to_string() } else { format!("https://{mirror}") };
                let mirror =
                    Url::parse(&mirror).map_err(|e| format!("--registry-mirror {entry}: not a URL ({e})"))?;
                Ok((normalize_host(host), mirror))
            })
            .collect::<Result<_, String>>()?;
        Ok(HostPolicy { known, allowed, mirrors })
    }

    /// The URL to fetch for `url` (a mirror's when one is configured for its host), or why not.
    pub fn check(&self, url: &str) -> Result<Url, Refused> {
        let parsed = Url::parse(url).map_err(|_| Refused::Scheme(url.to_string()))?;
        if !matches!(parsed.scheme(), "http" | "https" | "oci") {
            return Err(Refused::Scheme(url.to_string()));
        }
        let host = parsed.host_str().map(normalize_host).ok_or_else(|| Refused::Scheme(url.to_string()))?;
        let listed = self.allowed.iter().any(|a| a.host == host);
        if !self.known.contains(&host) && !listed {
            return Err(Refused::NewHost(host));
        }
        match self.mirrors.get(&host) {
            Some(mirror) => mirrored(&parsed, mirror).ok_or_else(|| Refused::Scheme(url.to_string())),
            None => Ok(parsed),
        }
    }

    /// Whether a source's credentials may be sent to `host`: only to hosts the operator names
    /// (`--chart-hosts`, mirrors), never merely because the base revision uses them.
    pub fn check_credentials(&self, host: &str) -> Result<(), Refused> {
        let host = normalize_host(host);
        let named = self.allowed.iter().any(|a| a.host == host)
            || self
                .mirrors
                .values()
                .any(|m| m.host_str().map(normalize_host).as_deref() == Some(host.as_str()));
        if named {
            Ok(())
        } else {
            Err(Refused::Credentials(host))
        }
    }

    /// Whether `host` may resolve to `address` for a connection on some port: the exact port is
    /// checked before each request (`check_address`).
    pub fn may_resolve(&self, host: &str, address: IpAddr) -> bool {
        let host = normalize_host(host);
        special_kind(address).is_none()
            || self.allowed.iter().any(|a| a.host == host && a.port.is_some())
            || self
                .mirrors
                .values()
                .any(|m| m.host_str().map(normalize_host).as_deref() == Some(host.as_str()))
    }

    /// Whether a connection to `address` for `host:port` may be made (checked on every
    /// connection, redirects included, after name resolution).
    pub fn check_address(&self, host: &str, port: u16, address: IpAddr) -> Result<(), Refused> {
        let host = normalize_host(host);
        let Some(kind) = special_kind(address) else { return Ok(()) };
        let exactly = self.allowed.iter().any(|a| a.host == host && a.port == Some(port));
        // A mirror's own address, on the mirror's own port.
        let mirror = self.mirrors.values().any(|m| {
            m.host_str().map(normalize_host).as_deref() == Some(host.as_str())
                && m.port_or_known_default() == Some(port)
        });
        if exactly || mirror {
            return Ok(());
        }
        Err(Refused::Address { host, port, address, kind })
    }
}

fn normalize_host(host: &str) -> String {
    host.trim_start_matches('[').trim_end_matches(']').trim_end_matches('.').to_ascii_lowercase()
}

/// The host of a URL a source writes (`oci://ghcr.io/x`, `https://charts.example/`).
fn host_of(url: &str) -> Option<String> {
    Url::parse(url).ok()?.host_str().map(normalize_host)
}

/// `url` with its scheme, host and port taken from `mirror`, its path kept (after the mirror's).
fn mirrored(url: &Url, mirror: &Url) -> Option<Url> {
    let base = mirror.path().trim_end_matches('/');
    // An OCI reference keeps its scheme (https), unless the mirror says plain `http://`; the mirror
    // gives the registry (and its path prefix).
    let scheme = if url.scheme() == "oci" && mirror.scheme() != "http" { "oci" } else { mirror.scheme() };
    let host = mirror.host_str().unwrap_or_default();
    let port = mirror.port().map(|p| format!(":{p}")).unwrap_or_default();
    let query = url.query().map(|q| format!("?{q}")).unwrap_or_default();
    let text = format!("{scheme}://{host}{port}{base}{}{query}", url.path());
    Url::parse(&text).ok()
}

/// The kind of address a pull request must not reach, if `address` is one.
fn special_kind(address: IpAddr) -> Option<&'static str> {
    match address {
        IpAddr::V4(v4) => special_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => special_v4(v4),
            None => special_v6(v6),
        },
    }
}

fn special_v4(a: Ipv4Addr) -> Option<&'static str> {
    let [first, second, ..] = a.octets();
    // AWS, GCP and Azure (169.254.169.254), Alibaba (100.100.100.200), Azure's wire server.
    if a == Ipv4Addr::new(169, 254, 169, 254)
        || a == Ipv4Addr::new(100, 100, 100, 200)
        || a == Ipv4Addr::new(168, 63, 129, 16)
    {
        Some("cloud metadata")
    } else if a.is_loopback() {
        Some("loopback")
    } else if a.is_link_local() {
        Some("link-local")
    } else if a.is_private() {
        Some("private")
    } else if first == 100 && (64..128).contains(&second) {
        Some("shared (carrier-grade NAT)")
    } else if first == 198 && (18..20).contains(&second) {
        Some("benchmarking (198.18.0.0/15)")
    } else if a.is_unspecified() || a.is_broadcast() || a.is_multicast() || first == 0 || first >= 240 {
        Some("reserved")
    } else {
        None
    }
}

fn special_v6(a: Ipv6Addr) -> Option<&'static str> {
    let segments = a.segments();
    let first = segments[0];
    // IPv4 carried in IPv6 (NAT64, 6to4): judged as the IPv4 address it reaches.
    let embedded = match segments {
        [0x64, 0xff9b, 0, 0, 0, 0, high, low] | [0x64, 0xff9b, 1, _, _, _, high, low] => Some((high, low)),
        [0x2002, high, low, ..] => Some((high, low)),
        _ => None,
    };
    if let Some((high, low)) = embedded {
        let v4 = Ipv4Addr::from(((high as u32) << 16) | low as u32);
        return special_v4(v4).or(Some("IPv4 translation"));
    }
    if first == 0x2001 && segments[1] == 0 {
        return Some("Teredo tunnel");
    }
    if first & 0xffc0 == 0xfec0 {
        return Some("site-local");
    }
    if a == "fd00:ec2::254".parse::<Ipv6Addr>().expect("valid address") {
        Some("cloud metadata")
    } else if a.is_loopback() {
        Some("loopback")
    } else if first & 0xffc0 == 0xfe80 {
        Some("link-local")
    } else if first & 0xfe00 == 0xfc00 {
        Some("private (unique local)")
    } else if a.is_unspecified() || a.is_multicast() || a.to_ipv4().is_some() {
        Some("reserved")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> HostPolicy {
        HostPolicy::new(
            ["https://charts.example.com/stable", "oci://ghcr.io/acme/charts"],
            ["registry.internal:5000", "Cache.Example.org"],
            ["ghcr.io=http://127.0.0.1:5001/mirror"],
        )
        .unwrap()
    }

    #[test]
    fn only_hosts_the_base_or_the_cluster_use_or_the_operator_allows_are_fetched() {
        let p = policy();
        assert!(p.check("https://charts.example.com/stable/index.yaml").is_ok());
        assert!(p.check("https://cache.example.org/x").is_ok());
        assert!(
            matches!(p.check("https://evil.example/index.yaml"), Err(Refused::NewHost(h)) if h == "evil.example")
        );
        for url in ["file:///etc/passwd", "gopher://charts.example.com/", "not a url"] {
            assert!(matches!(p.check(url), Err(Refused::Scheme(_))), "{url}");
        }
        // Spelling tricks name the same host.
        assert!(p.check("https://CHARTS.example.com./stable/index.yaml").is_ok());
    }

    #[test]
    fn credentials_go_only_to_hosts_the_operator_names() {
        let p = policy();
        // Known from the base revision, fetched from, but not trusted with a Secret's credentials.
        assert!(p.check("https://charts.example.com/stable/index.yaml").is_ok());
        assert!(matches!(p.check_credentials("charts.example.com"), Err(Refused::Credentials(_))));
        assert!(p.check_credentials("registry.internal").is_ok());
        assert!(p.check_credentials("cache.example.org").is_ok());
        assert!(p.check_credentials("127.0.0.1").is_ok(), "the mirror's host");
    }

    #[test]
    fn a_mirror_replaces_the_host_and_keeps_the_path() {
        let p = policy();
        let url = p.check("oci://ghcr.io/acme/charts/web:1.2.3").unwrap();
        assert_eq!(url.as_str(), "http://127.0.0.1:5001/mirror/acme/charts/web:1.2.3", "a plain-HTTP mirror");
        // The mirror's own loopback address is the operator's: allowed.
        assert!(p.check_address("127.0.0.1", 5001, "127.0.0.1".parse().unwrap()).is_ok());
    }

    #[test]
    fn loopback_private_link_local_and_metadata_addresses_are_refused_unless_exactly_allowed() {
        let p = policy();
        for address in [
            "127.0.0.1",
            "10.1.2.3",
            "172.20.0.1",
            "192.168.1.1",
            "168.63.129.16",
            "198.18.0.1",
            "64:ff9b::7f00:1",
            "2002:7f00:1::",
            "2001:0:4136:e378::1",
            "fec0::1",
            "169.254.169.254",
            "169.254.1.1",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fe80::1",
            "fd00:ec2::254",
            "fc00::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
        ] {
            let address: IpAddr = address.parse().unwrap();
            assert!(p.check_address("charts.example.com", 443, address).is_err(), "{address}");
        }
        assert!(p.check_address("charts.example.com", 443, "140.82.112.3".parse().unwrap()).is_ok());
        assert!(p.check_address("2606:50c0::153", 443, "2606:50c0::153".parse().unwrap()).is_ok());
        // Exactly this host and port, not another port.
        assert!(p.check_address("registry.internal", 5000, "10.0.0.5".parse().unwrap()).is_ok());
        assert!(p.check_address("registry.internal", 5001, "10.0.0.5".parse().unwrap()).is_err());
        // A host allowed without a port still gets no private address.
        assert!(p.check_address("cache.example.org", 443, "10.0.0.6".parse().unwrap()).is_err());
    }

    #[test]
    fn bad_settings_say_what_to_write() {
        assert!(HostPolicy::new([], ["host:port"], []).unwrap_err().contains("port is not a number"));
        assert!(HostPolicy::new([], [], ["ghcr.io"]).unwrap_err().contains("HOST=MIRROR"));
    }
}
