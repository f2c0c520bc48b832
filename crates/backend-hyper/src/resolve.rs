//! Name resolution for every connection of this backend: the system resolver (hyper-util's
//! `GaiResolver`), and for a wire that follows a redirect, a check of every address a name
//! resolves to. Core refuses a redirect whose target resolves to a metadata address when it
//! follows it; the name can resolve elsewhere by the time a connection opens (DNS
//! rebinding), so the addresses actually connected to are checked again here. And the
//! connector every connection opens through, built on that resolver.

use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::connect::dns::{GaiResolver, Name};
use sluice_core::StoreConfig;
use sluice_core::wire::redirect::forbidden_ip;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tower_service::Service;

/// The system resolver, refusing forbidden addresses when `guard` is set.
#[derive(Debug, Clone)]
pub struct GuardedResolver {
    inner: GaiResolver,
    guard: bool,
}

impl GuardedResolver {
    pub fn new(guard: bool) -> Self {
        Self {
            inner: GaiResolver::new(),
            guard,
        }
    }
}

/// The addresses to connect to, or why none may be: with `guard`, one forbidden address
/// refuses the name (an attacker's name resolving to a public address and the metadata
/// service would otherwise be raced into the latter).
pub fn checked(
    name: &str,
    addrs: Vec<SocketAddr>,
    guard: bool,
) -> io::Result<std::vec::IntoIter<SocketAddr>> {
    if guard && let Some(bad) = addrs.iter().find(|a| forbidden_ip(a.ip())) {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{name} resolves to {}, a link-local, unspecified or metadata address: \
                 not connecting for a redirect",
                bad.ip()
            ),
        ));
    }
    Ok(addrs.into_iter())
}

impl Service<Name> for GuardedResolver {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<Self::Response>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, name: Name) -> Self::Future {
        let guard = self.guard;
        let resolving = self.inner.call(name.clone());
        Box::pin(async move { checked(name.as_str(), resolving.await?.collect(), guard) })
    }
}

/// The connector every connection of this backend opens through.
pub type Tcp = HttpConnector<GuardedResolver>;

/// How every connection of this backend is opened (hyper's and the direct path's alike):
/// addresses tried as hyper-util does (IPv6 and IPv4 raced), no Nagle, TCP keepalive, the
/// connect timeout; for a redirect's target, no metadata address (`resolve`).
pub fn tcp_connector(cfg: &StoreConfig) -> Tcp {
    let mut http =
        HttpConnector::new_with_resolver(GuardedResolver::new(cfg.refuse_metadata_addresses));
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(Some(cfg.timeouts.connect));
    http.set_keepalive(Some(Duration::from_secs(60)));
    http
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guarded_name_with_any_metadata_address_is_refused() {
        let a = |s: &str| -> SocketAddr { s.parse().unwrap() };
        let public = vec![a("192.0.2.7:443")];
        let mixed = vec![a("192.0.2.7:443"), a("169.254.169.254:443")];
        let nat64 = vec![a("[64:ff9b::a9fe:a9fe]:80")];
        assert_eq!(checked("s", public.clone(), true).unwrap().count(), 1);
        for bad in [mixed.clone(), nat64] {
            let e = checked("evil.example", bad, true).unwrap_err();
            assert!(e.to_string().contains("evil.example resolves to"), "{e}");
        }
        // Unguarded (the configured endpoint): the user's own choice.
        assert_eq!(checked("s", mixed, false).unwrap().count(), 2);
    }

    #[tokio::test]
    async fn the_system_resolver_answers_through_it() {
        let mut r = GuardedResolver::new(true);
        let addrs: Vec<SocketAddr> = r
            .call("localhost".parse().unwrap())
            .await
            .unwrap()
            .collect();
        assert!(!addrs.is_empty() && addrs.iter().all(|a| a.ip().is_loopback()));
    }
}
