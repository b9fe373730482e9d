//! Where a webhook may go: not inside the network the server runs in.
//!
//! An administrator's endpoint URL is a request the server makes on their behalf. Aimed at a loopback port, a
//! private address or a cloud's metadata service it reaches what only the server can reach, and the delivery log
//! (status, error, duration) would answer for it. So, unless `[webhooks] allow_internal_targets` is on (local
//! development), a target is refused when
//!
//! - its host is a literal address of an internal range ([`internal_ip`]), in whatever form the URL parser
//!   normalises (`2130706433`, `0x7f.1`, `0177.0.0.1` and `[::ffff:127.0.0.1]` are all `127.0.0.1`): at
//!   registration and again at each delivery (the key may have been on when it was registered);
//! - its host is a special-use or internal name ([`internal_name`]: `localhost`, `*.localhost`, `*.internal`, a
//!   name of one label …), at registration and at each delivery;
//! - its name resolves to internal addresses, at each delivery: [`Resolver`] resolves the name itself, drops
//!   every internal address, and the connection is made to the addresses it kept and to no other (it is the
//!   HTTP client's only resolver). The check and the connection use one answer, so a name that answers a public
//!   address at one moment and an internal one the next (DNS rebinding) cannot slip between them.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Why a target was refused: an internal address or name. The delivery log shows it as `blocked`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Blocked(pub String);

/// Whether `ip` is in a range that is not the public internet: loopback, private (RFC 1918), shared address
/// space (CGNAT, RFC 6598), link-local (where the clouds' metadata services answer), unique-local IPv6,
/// unspecified ("this network"), multicast, broadcast and reserved ranges, and every IPv6 form that carries an
/// IPv4 address (mapped, compatible, NAT64, 6to4), judged by that address.
pub fn internal_ip(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => internal_v4(v4),
        IpAddr::V6(v6) => internal_v6(v6),
    }
}

fn internal_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    a == 0 // "this network", 0.0.0.0 included
        || a == 10
        || a == 127
        || (a == 100 && (64..128).contains(&b)) // shared address space (CGNAT), 100.100.100.200 included
        || (a == 169 && b == 254) // link-local: 169.254.169.254, the metadata services
        || (a == 172 && (16..32).contains(&b))
        || (a == 192 && b == 168)
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments
        || (a == 198 && (18..20).contains(&b)) // benchmarking
        || a >= 224 // multicast, reserved, and the broadcast address
}

fn internal_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    if let Some(v4) = ip.to_ipv4_mapped() {
        return internal_v4(v4);
    }
    let embedded = |hi: u16, lo: u16| Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo));
    // IPv4-compatible (::a.b.c.d, deprecated but still parsed) and NAT64 (64:ff9b::a.b.c.d): the IPv4 address
    // decides. `::` and `::1` are of the first form (0.0.0.0 and 0.0.0.1: "this network").
    if s[..6] == [0; 6] || s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return internal_v4(embedded(s[6], s[7]));
    }
    // 6to4 (2002:a.b.c.d::/48): the relay would carry it to that IPv4 address.
    if s[0] == 0x2002 {
        return internal_v4(embedded(s[1], s[2]));
    }
    (s[0] & 0xfe00) == 0xfc00 // unique local (fd00:ec2::254 is a metadata service)
        || (s[0] & 0xffc0) == 0xfe80 // link-local
        || (s[0] & 0xffc0) == 0xfec0 // site-local (deprecated)
        || (s[0] & 0xff00) == 0xff00 // multicast
}

/// Names that are internal by definition or by custom: `localhost` and `*.localhost` (RFC 6761), names of one
/// label (`redis`, `metadata`: resolved through the local search domains), and the suffixes reserved or commonly
/// used for private networks (`.internal`, which holds `metadata.google.internal`, `.local`, `.localdomain`,
/// `.home.arpa`, and `.intranet`, `.private`, `.corp`, `.home`, `.lan` of RFC 6762's appendix G).
pub fn internal_name(host: &str) -> bool {
    const SUFFIXES: [&str; 10] =
        ["localhost", "internal", "local", "localdomain", "home.arpa", "intranet", "private", "corp", "home", "lan"];
    // A trailing dot names the same host ("localhost." is localhost).
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    !host.contains('.')
        || SUFFIXES.iter().any(|s| host == *s || host.strip_suffix(s).is_some_and(|rest| rest.ends_with('.')))
}

/// Refuses a URL's host when it is an internal address or name (see the module's documentation).
pub fn check_host(host: url::Host<&str>) -> Result<(), Blocked> {
    match host {
        url::Host::Ipv4(ip) if internal_v4(ip) => Err(Blocked(format!("{ip} is an internal address"))),
        url::Host::Ipv6(ip) if internal_v6(ip) => Err(Blocked(format!("[{ip}] is an internal address"))),
        url::Host::Domain(name) if internal_name(name) => Err(Blocked(format!("{name} is an internal name"))),
        _ => Ok(()),
    }
}

/// The deliverer's only resolver: the system's answer (`getaddrinfo`, as any other client would use) without its
/// internal addresses. A name with nothing else is refused ([`Blocked`]); the HTTP client connects only to what
/// this answers, so the addresses checked are the addresses connected to.
#[derive(Debug, Clone, Default)]
pub struct Resolver {
    /// `[webhooks] allow_internal_targets`: nothing is dropped.
    pub allow_internal: bool,
    /// The configured proxy's host: the client resolves it through this resolver too, and it may well be on the
    /// private network.
    pub proxy_host: Option<String>,
}

impl Resolver {
    /// The addresses of `name` a delivery may connect to.
    pub async fn vetted(&self, name: &str) -> Result<Vec<SocketAddr>, Box<dyn std::error::Error + Send + Sync>> {
        let found: Vec<SocketAddr> = tokio::net::lookup_host((name, 0)).await?.collect();
        let exempt = self.allow_internal || self.proxy_host.as_deref().is_some_and(|p| p.eq_ignore_ascii_case(name));
        if exempt {
            return Ok(found);
        }
        let kept: Vec<SocketAddr> = found.iter().copied().filter(|a| !internal_ip(a.ip())).collect();
        if kept.is_empty() && !found.is_empty() {
            return Err(Box::new(Blocked(format!("{name} resolves to internal addresses only"))));
        }
        Ok(kept)
    }
}

impl reqwest::dns::Resolve for Resolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let this = self.clone();
        Box::pin(async move {
            let addrs = this.vetted(name.as_str()).await?;
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// What the delivery log says of an attempt that got no answer: one word, never the error's detail.
///
/// - `blocked`: the target is internal (this module's checks); nothing was sent.
/// - `connect`: no connection (refused, unreachable, the name unknown, timed out while connecting, TLS failed).
///   One word for all of them, so that the log does not tell a closed port from a filtered one or from a host
///   that is not there: read the other way, a log that did would be a port scanner.
/// - `timed out`: connected, no answer within `[webhooks] timeout_ms`.
/// - `request failed`: connected, the exchange broke off.
pub(super) fn describe(e: &reqwest::Error) -> String {
    let mut source: Option<&dyn std::error::Error> = std::error::Error::source(e);
    while let Some(inner) = source {
        if inner.downcast_ref::<Blocked>().is_some() {
            return "blocked".to_owned();
        }
        source = inner.source();
    }
    let what = if e.is_connect() {
        "connect"
    } else if e.is_timeout() {
        "timed out"
    } else {
        "request failed"
    };
    what.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host_of(raw: &str) -> Result<(), Blocked> {
        let url = url::Url::parse(raw).unwrap();
        check_host(url.host().unwrap())
    }

    #[test]
    fn literal_internal_addresses_are_refused_in_every_form_the_parser_normalises() {
        for raw in [
            "https://169.254.169.254/latest/meta-data/",
            "https://10.0.0.1/",
            "http://127.0.0.1:9100/metrics",
            "http://2130706433:9100/",
            "http://0x7f.1/",
            "http://0177.0.0.1/",
            "http://127.1/",
            "https://0.0.0.0/",
            "https://100.100.100.200/",
            "https://172.31.255.255/",
            "https://192.168.1.1/",
            "https://224.0.0.1/",
            "https://255.255.255.255/",
            "https://[::1]/",
            "https://[::]/",
            "https://[::ffff:127.0.0.1]/",
            "https://[::ffff:a9fe:a9fe]/",
            "https://[::127.0.0.1]/",
            "https://[64:ff9b::a9fe:a9fe]/",
            "https://[2002:0a00:0001::1]/",
            "https://[fd00:ec2::254]/",
            "https://[fe80::1]/",
            "https://[ff02::1]/",
        ] {
            assert!(host_of(raw).is_err(), "{raw} was allowed");
        }
    }

    #[test]
    fn internal_names_are_refused_and_public_ones_pass() {
        for raw in [
            "https://localhost/",
            "https://LOCALHOST./",
            "https://api.localhost/",
            "https://metadata.google.internal/",
            "https://redis/",
            "https://printer.local/",
            "https://nas.home.arpa/",
            "https://git.corp/",
        ] {
            assert!(host_of(raw).is_err(), "{raw} was allowed");
        }
        for raw in [
            "https://example.com/hook",
            "https://8.8.8.8/",
            "https://[2606:4700::1111]/",
            "https://notlocalhost.com/",
            "https://internal.example.com/",
            "https://100.128.0.1/",
            "https://172.32.0.1/",
        ] {
            assert!(host_of(raw).is_ok(), "{raw} was refused");
        }
    }

    /// The rebinding guarantee at the level where it lives: the answer the resolver gives the HTTP client has no
    /// internal address, whatever the system's resolver says at that moment. `localhost` is the one name known to
    /// answer an internal address on every machine.
    #[tokio::test]
    async fn the_resolver_hands_the_client_no_internal_address() {
        let strict = Resolver::default();
        let refused = strict.vetted("localhost").await.expect_err("localhost resolved");
        assert!(refused.downcast_ref::<Blocked>().is_some(), "{refused}");
        let open = Resolver { allow_internal: true, proxy_host: None };
        let found = open.vetted("localhost").await.unwrap();
        assert!(found.iter().all(|a| a.ip().is_loopback()) && !found.is_empty(), "{found:?}");
        let proxy = Resolver { allow_internal: false, proxy_host: Some("localhost".into()) };
        assert!(!proxy.vetted("localhost").await.unwrap().is_empty());
    }

    /// Through the real HTTP client: a name resolving inside is never connected to, and the error says `blocked`.
    #[tokio::test]
    async fn the_client_refuses_a_name_resolving_inside_before_connecting() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();
        let client = reqwest::Client::builder()
            .no_proxy()
            .dns_resolver(std::sync::Arc::new(Resolver::default()))
            .build()
            .unwrap();
        let error = client.get(format!("http://localhost:{port}/")).send().await.expect_err("delivered");
        assert_eq!(super::describe(&error), "blocked");
        assert!(listener.accept().is_err(), "a connection reached the listener");
    }
}
