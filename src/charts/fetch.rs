//! HTTP GETs for chart content a pull request names, guarded: every URL (redirects included)
//! passes the host policy, every address a connection may use passes the address policy, bodies
//! are capped, and the whole is bounded in time. Redirects are followed here, one at a time, so
//! each is checked; names are resolved here, so no connection reaches an address the policy
//! refuses. A source's CA is trusted besides the system's roots; its client certificate is a
//! credential like its login: presented only to hosts the operator names, only to the origin
//! asked for.

use super::failed_hosts::{Contact, FailedHosts, HostFailed};
use super::hosts::{HostPolicy, Refused};
use super::tls::SourceTls;
use reqwest::blocking::{Client, Response};
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::header::{HeaderMap, HeaderValue, ACCEPT, AUTHORIZATION, LOCATION};
use reqwest::{Certificate, Identity, Method};
use std::collections::BTreeSet;
use std::io::Read;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use url::Url;

/// How many redirects one GET follows.
const MAX_REDIRECTS: usize = 5;
/// One request's time limit (connect, send, read the body).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// Why a GET gave nothing.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FetchError {
    #[error(transparent)]
    Refused(#[from] Refused),
    #[error("{url}: {message}")]
    Failed { url: String, message: String },
    #[error("{url}: HTTP {status}")]
    Status { url: String, status: u16, www_authenticate: Option<String> },
    #[error("{url}: larger than {limit} bytes")]
    TooLarge { url: String, limit: u64 },
    /// The host could not be resolved or gave no answer: said alike for every chart it serves,
    /// and asked once (`failed_hosts`).
    #[error("{host} failed: {message} (a host that failed is not asked again)")]
    Unreachable { host: String, message: String },
}

impl From<HostFailed> for FetchError {
    fn from(failed: HostFailed) -> Self {
        FetchError::Unreachable { host: failed.host, message: failed.message }
    }
}

/// True when a fetch's message says the server wants credentials it was not given or refused
/// (HTTP 401 or 403, as `FetchError::Status` prints them, or a registry's challenge fluxplan
/// cannot answer).
pub fn wants_credentials(message: &str) -> bool {
    [": HTTP 401", ": HTTP 403", "the registry wants credentials"].iter().any(|said| message.contains(said))
}

/// Credentials for one source (its `secretRef`, read from the cluster with `--read-secrets`).
/// Never shown: `Debug` says only which kind it is.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Auth {
    Basic { username: String, password: String },
    Bearer(String),
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Auth::Basic { .. } => "Auth::Basic(hidden)",
            Auth::Bearer(_) => "Auth::Bearer(hidden)",
        })
    }
}

impl Auth {
    fn header(&self) -> Option<HeaderValue> {
        use base64::Engine as _;
        let text = match self {
            Auth::Basic { username, password } => format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{username}:{password}"))
            ),
            Auth::Bearer(token) => format!("Bearer {token}"),
        };
        let mut value = HeaderValue::from_str(&text).ok()?;
        value.set_sensitive(true);
        Some(value)
    }
}

/// What one GET presents of its source's credentials.
#[derive(Debug, Clone, Copy, Default)]
pub struct Presented<'a> {
    /// The Authorization header.
    pub auth: Option<&'a Auth>,
    /// The source's client certificate, when its `Fetcher` has one.
    pub client_certificate: bool,
}

impl<'a> Presented<'a> {
    /// Nothing: an anonymous request.
    pub fn nothing() -> Self {
        Presented::default()
    }

    /// `auth` and the source's client certificate: a request to the source's own registry or
    /// repository.
    pub fn source(auth: Option<&'a Auth>) -> Self {
        Presented { auth, client_certificate: true }
    }
}

/// What may be fetched, and how.
#[derive(Debug, Clone, Default)]
pub struct Access {
    pub hosts: HostPolicy,
    /// `host:port` entries reached over plain HTTP whatever the URL says (a loopback mirror, a
    /// test registry).
    pub insecure: BTreeSet<String>,
    pub timeout: Option<Duration>,
    /// Hosts that failed: not asked again.
    pub failed_hosts: FailedHosts,
}

impl Access {
    /// The URL `url` is fetched from: the policy's (a mirror's when one is set) and plain HTTP
    /// for an insecure registry.
    pub fn target(&self, url: &str) -> Result<Url, FetchError> {
        let mut target = self.hosts.check(url)?;
        if target.scheme() == "oci" || self.is_insecure(&target) {
            let scheme = if self.is_insecure(&target) { "http" } else { "https" };
            let text = format!("{scheme}{}", &target.as_str()[target.scheme().len()..]);
            target = Url::parse(&text).map_err(|_| Refused::Scheme(url.to_string()))?;
        }
        // Credentials go only in the Authorization header fluxplan sets: never from a URL (nor
        // into a message that quotes it).
        let _ = target.set_username("");
        let _ = target.set_password(None);
        Ok(target)
    }

    fn is_insecure(&self, url: &Url) -> bool {
        let port = url.port().unwrap_or(if url.scheme() == "http" { 80 } else { 443 });
        url.host_str().is_some_and(|host| self.insecure.contains(&format!("{host}:{port}")))
    }

    /// The failure `url`'s host is remembered for, asked with the TLS settings `tls`: known
    /// before a client is made to fetch it.
    pub fn remembered_failure(&self, url: &str, tls: Option<&SourceTls>) -> Option<FetchError> {
        let target = self.target(url).ok()?;
        let (key, shown) = host_key(&target, &tls_settings(tls));
        self.failed_hosts.remembered(&key, &shown).map(FetchError::from)
    }
}

/// A client that fetches only what `Access` allows.
pub struct Fetcher {
    /// Made on first use (a host that does not resolve needs none): each client loads the
    /// system's roots and starts a thread.
    client: OnceLock<Result<Client, String>>,
    /// The same, presenting the source's client certificate: a client of its own, so that no
    /// connection it opens (nor its TLS session) serves a request that must not present it.
    identified: OnceLock<Result<Client, String>>,
    /// The source's CA certificates and client certificate.
    roots: Vec<Certificate>,
    identity: Option<Identity>,
    access: Arc<Access>,
    /// What of the source's TLS settings a failed host is remembered with.
    tls_settings: String,
}

impl Fetcher {
    pub fn new(access: Access) -> Result<Self, String> {
        Self::for_source(access, None)
    }

    /// A client for one source: trusting its CA besides the system's roots (as source-controller
    /// does), and able to present its client certificate.
    pub fn for_source(access: Access, tls: Option<&SourceTls>) -> Result<Self, String> {
        Ok(Fetcher {
            client: OnceLock::new(),
            identified: OnceLock::new(),
            roots: tls.map(SourceTls::roots).transpose()?.unwrap_or_default(),
            identity: tls.map(SourceTls::identity).transpose()?.flatten(),
            access: Arc::new(access),
            tls_settings: tls_settings(tls),
        })
    }

    /// The client for a request to `url`: the one presenting the client certificate when it
    /// goes there.
    fn client(&self, identified: bool, url: &Url) -> Result<&Client, FetchError> {
        let (slot, identity) = match &self.identity {
            Some(identity) if identified => (&self.identified, Some(identity)),
            _ => (&self.client, None),
        };
        let build = || {
            crate::tls::install_crypto_provider();
            let mut builder = Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .dns_resolver(Arc::new(CheckedResolver { access: self.access.clone() }))
                .no_proxy()
                .timeout(self.access.timeout.unwrap_or(DEFAULT_TIMEOUT))
                .connect_timeout(Duration::from_secs(15))
                .user_agent(concat!("fluxplan/", env!("CARGO_PKG_VERSION")))
                .tls_certs_merge(self.roots.clone());
            if let Some(identity) = identity {
                builder = builder.identity(identity.clone());
            }
            builder.build().map_err(|e| format!("cannot start an HTTP client: {}", error_chain(&e)))
        };
        slot.get_or_init(build).as_ref().map_err(|message| failed(url, message))
    }

    /// The URL `url` is fetched from (see `Access::target`).
    pub fn target(&self, url: &str) -> Result<Url, FetchError> {
        self.access.target(url)
    }

    /// GETs `url` (already a target: see `target`), at most `limit` bytes, following checked
    /// redirects. `accept` becomes the Accept header; what is `presented` goes to `url`'s
    /// origin only.
    pub fn get(
        &self,
        url: &Url,
        accept: Option<&str>,
        presented: Presented,
        limit: u64,
    ) -> Result<(Vec<u8>, HeaderMap), FetchError> {
        self.send(Method::GET, url, accept, presented, limit)
    }

    /// HEADs `url` as `get` GETs it (the same checks, redirects and credentials rules): the
    /// answer's headers, no body read.
    pub fn head(
        &self,
        url: &Url,
        accept: Option<&str>,
        presented: Presented,
    ) -> Result<HeaderMap, FetchError> {
        self.send(Method::HEAD, url, accept, presented, 0).map(|(_, headers)| headers)
    }

    fn send(
        &self,
        method: Method,
        url: &Url,
        accept: Option<&str>,
        presented: Presented,
        limit: u64,
    ) -> Result<(Vec<u8>, HeaderMap), FetchError> {
        let auth = presented.auth;
        // Plain HTTP has no handshake to present a certificate in.
        let certificate = presented.client_certificate && self.identity.is_some() && url.scheme() == "https";
        // A source's own credentials go only where the operator says; a token a registry handed
        // out goes back to that registry.
        if certificate {
            self.access.hosts.check_credentials(url.host_str().unwrap_or(""))?;
        }
        if let Some(Auth::Basic { .. }) = auth {
            self.access.hosts.check_credentials(url.host_str().unwrap_or(""))?;
            // Never in clear text, but to a registry the operator says speaks plain HTTP.
            if url.scheme() != "https" && !self.access.is_insecure(url) {
                return Err(FetchError::Failed {
                    url: url.to_string(),
                    message: "credentials are sent over https only (or to an --insecure-registry)".into(),
                });
            }
        }
        let mut current = url.clone();
        for _ in 0..=MAX_REDIRECTS {
            let mut contact = self.contact(&current)?;
            self.check_connection(&current, &mut contact)?;
            let client = self.client(certificate && same_origin(&current, url), &current)?;
            let mut request = client.request(method.clone(), current.clone());
            if let Some(accept) = accept {
                request = request.header(ACCEPT, accept);
            }
            // Credentials are for the origin they were given for (scheme, host and port): never sent
            // on to another, nor in clear text after a redirect from https.
            if let Some(value) = auth.filter(|_| same_origin(&current, url)).and_then(Auth::header) {
                request = request.header(AUTHORIZATION, value);
            }
            let response = match request.send() {
                Ok(response) => response,
                Err(e) if e.is_builder() => return Err(failed(&current, error_chain(&e))),
                // Too slow for this request: the host is not taken as down for the others (a
                // pull request may name a slow path on a host every repository fetches from).
                Err(e) if e.is_timeout() => return Err(failed(&current, error_chain(&e.without_url()))),
                // No answer: said in words that name no URL, as every chart of this host will be.
                Err(e) => return Err(contact.failed(error_chain(&e.without_url())).into()),
            };
            contact.answered();
            let status = response.status();
            if status.is_redirection() {
                let location =
                    response.headers().get(LOCATION).and_then(|l| l.to_str().ok()).ok_or_else(|| {
                        FetchError::Failed {
                            url: current.to_string(),
                            message: "a redirect without a Location".into(),
                        }
                    })?;
                let next = current.join(location).map_err(|e| failed(&current, e))?;
                // The server chose this URL, not the pull request: registries send blobs on to their
                // CDNs. The addresses are checked as for any URL (no private or metadata address
                // unless allowed exactly), and never from https down to http.
                if current.scheme() == "https" && next.scheme() != "https" {
                    return Err(FetchError::Failed {
                        url: current.to_string(),
                        message: format!("redirects to {next}, from https to plain HTTP: refused"),
                    });
                }
                if !matches!(next.scheme(), "http" | "https") {
                    return Err(Refused::Scheme(next.to_string()).into());
                }
                current = next;
                continue;
            }
            if !status.is_success() {
                let www_authenticate = response
                    .headers()
                    .get("www-authenticate")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_string);
                return Err(FetchError::Status {
                    url: current.to_string(),
                    status: status.as_u16(),
                    www_authenticate,
                });
            }
            let headers = response.headers().clone();
            if method == Method::HEAD {
                return Ok((Vec::new(), headers));
            }
            return Ok((read_capped(response, &current, limit)?, headers));
        }
        Err(FetchError::Failed {
            url: url.to_string(),
            message: format!("more than {MAX_REDIRECTS} redirects"),
        })
    }

    /// Leave to send a request to `url`'s host, unless it failed before (with the same scheme,
    /// port and TLS settings).
    fn contact(&self, url: &Url) -> Result<Contact, FetchError> {
        let (key, shown) = host_key(url, &self.tls_settings);
        Ok(self.access.failed_hosts.contact(&key, &shown)?)
    }

    /// Every address `url`'s host has passes the address policy for its port (the resolver
    /// checks again when the connection is made). A name that does not resolve fails `contact`.
    fn check_connection(&self, url: &Url, contact: &mut Contact) -> Result<(), FetchError> {
        let host = url.host_str().ok_or_else(|| Refused::Scheme(url.to_string()))?;
        let port = url.port_or_known_default().unwrap_or(443);
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let addresses: Vec<IpAddr> = match bare.parse::<IpAddr>() {
            Ok(ip) => vec![ip],
            Err(_) => (bare, port)
                .to_socket_addrs()
                .map_err(|e| contact.failed(format!("cannot resolve {host}: {e}")))?
                .map(|a| a.ip())
                .collect(),
        };
        for address in addresses {
            self.access.hosts.check_address(bare, port, address)?;
        }
        Ok(())
    }
}

/// What a failed host is remembered by (scheme, host, port and TLS settings), and how a message
/// names it.
fn host_key(url: &Url, tls_settings: &str) -> (String, String) {
    let host = url.host_str().unwrap_or_default();
    let port = url.port_or_known_default().unwrap_or(443);
    let shown = match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_string(),
    };
    (format!("{}://{host}:{port} {tls_settings}", url.scheme()), shown)
}

fn tls_settings(tls: Option<&SourceTls>) -> String {
    tls.map(SourceTls::fingerprint).unwrap_or_default()
}

fn failed(url: &Url, e: impl std::fmt::Display) -> FetchError {
    FetchError::Failed { url: url.to_string(), message: e.to_string() }
}

/// An error and its causes: reqwest's own message says only that a request failed, its causes
/// say why (a certificate no trusted CA signed, a refused connection).
fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut message = error.to_string();
    let mut cause = error.source();
    while let Some(inner) = cause {
        let text = inner.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        cause = inner.source();
    }
    message
}

fn read_capped(response: Response, url: &Url, limit: u64) -> Result<Vec<u8>, FetchError> {
    if response.content_length().is_some_and(|length| length > limit) {
        return Err(FetchError::TooLarge { url: url.to_string(), limit });
    }
    let mut body = Vec::new();
    response.take(limit + 1).read_to_end(&mut body).map_err(|e| failed(url, e))?;
    if body.len() as u64 > limit {
        return Err(FetchError::TooLarge { url: url.to_string(), limit });
    }
    Ok(body)
}

/// Resolves names and keeps only the addresses the policy allows for that host on some port:
/// the exact port was checked before the request (`check_connection`).
struct CheckedResolver {
    access: Arc<Access>,
}

impl Resolve for CheckedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let access = self.access.clone();
        let host = name.as_str().to_string();
        Box::pin(async move {
            let lookup = host.clone();
            let found: Vec<SocketAddr> =
                tokio::task::spawn_blocking(move || (lookup.as_str(), 0).to_socket_addrs())
                    .await
                    .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)?
                    .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)?
                    .collect();
            let allowed: Vec<SocketAddr> =
                found.into_iter().filter(|a| access.hosts.may_resolve(&host, a.ip())).collect();
            if allowed.is_empty() {
                return Err(format!("{host} resolves to no address fluxplan may connect to").into());
            }
            Ok(Box::new(allowed.into_iter()) as Addrs)
        })
    }
}

/// The same scheme, host and port.
fn same_origin(a: &Url, b: &Url) -> bool {
    a.scheme() == b.scheme()
        && a.host_str() == b.host_str()
        && a.port_or_known_default() == b.port_or_known_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Attack: a path of a shared host that answers too slowly. The request fails, but the host
    /// is not remembered as failed for every other chart. Near miss: a closed port is.
    #[test]
    fn a_slow_answer_fails_its_request_and_leaves_the_host_untried() {
        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let silent_addr = silent.local_addr().unwrap();
        let allowed = [silent_addr.to_string(), closed.to_string()];
        let failed_hosts = FailedHosts::for_plan();
        let access = Access {
            hosts: HostPolicy::new([], allowed.iter().map(String::as_str), []).unwrap(),
            insecure: allowed.iter().cloned().collect(),
            timeout: Some(Duration::from_millis(500)),
            failed_hosts: failed_hosts.clone(),
        };
        let fetcher = Fetcher::new(access).unwrap();
        let get = |addr: std::net::SocketAddr| {
            let url = Url::parse(&format!("http://{addr}/index.yaml")).unwrap();
            let outcome = fetcher.get(&url, None, Presented::default(), 1 << 20);
            (outcome.is_err(), failed_hosts.remembered(&host_key(&url, "").0, &addr.to_string()).is_some())
        };
        // The listener accepts (the kernel's backlog) and never answers.
        assert_eq!(get(silent_addr), (true, false));
        drop(silent);
        assert_eq!(get(closed), (true, true));
    }

    #[test]
    fn refusals_for_want_of_credentials_are_told_from_other_failures() {
        let status = |status| FetchError::Status {
            url: "https://charts.example.com/index.yaml".into(),
            status,
            www_authenticate: None,
        };
        assert!(wants_credentials(&status(401).to_string()));
        assert!(wants_credentials(&status(403).to_string()));
        assert!(!wants_credentials(&status(404).to_string()));
        assert!(!wants_credentials(&status(500).to_string()));
    }
}
