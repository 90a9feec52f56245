//! Container images a pull request names, checked against their registries: one manifest HEAD
//! per distinct reference (`/v2/<name>/manifests/<tag-or-digest>`, the OCI distribution spec's
//! "checking if content exists"), through the same guarded client as charts (`fetch`): the same
//! host policy, mirrors, insecure registries and failed-host memory. A registry that wants a
//! token says so with a `401` and a `WWW-Authenticate: Bearer realm=…,service=…,scope=…`
//! challenge; an anonymous pull token is asked from that realm and the HEAD retried (Docker's
//! token authentication specification).
//!
//! The realm is the registry's choice, as a redirect is (Docker Hub's registry-1.docker.io hands
//! out tokens from auth.docker.io): it is followed like a redirect — http or https only, never
//! from https down to http, every address it resolves to checked by the address policy — and is
//! sent no credential.
//!
//! References are read as the container runtime reads them (distribution's `reference`
//! grammar and its normalisation): a first component without `.`, `:` or `localhost` is a Docker
//! Hub path, Docker Hub's one-component names live under `library/`, the tag defaults to
//! `latest`, and a digest, when written, is what is pulled.

use super::fetch::{Access, Auth, FetchError, Fetcher, Presented};
use super::Settings;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use url::Url;

/// What a HEAD accepts: image indexes and manifests, OCI's and Docker's. A registry that cannot
/// serve one of these for a reference would make the runtime fail to pull it too.
pub const MANIFEST_ACCEPT: &str = "application/vnd.oci.image.index.v1+json, \
     application/vnd.oci.image.manifest.v1+json, \
     application/vnd.docker.distribution.manifest.list.v2+json, \
     application/vnd.docker.distribution.manifest.v2+json";
/// One request's time limit: a HEAD and a token are small; a registry that hangs leaves the
/// image unchecked, the plan goes on.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(15);
/// Requests in flight at once.
const PARALLEL: usize = 4;
/// A token answer is a few kilobytes; more is not a token.
const MAX_TOKEN_BYTES: u64 = 64 << 10;
/// How long `serve` trusts a tag's answer (a tag can be pushed or deleted); a digest's answer
/// never changes.
pub const SERVE_TAG_MEMORY: Duration = Duration::from_secs(300);
/// Answers `serve` keeps at most: then it starts afresh.
const MAX_CACHED: usize = 50_000;
/// References one check asks at most: a pull request that renders thousands of new references
/// (a chart's loop, one tag each) must not hold a worker for hours nor have the bot rate-limited
/// by a registry every plan shares. The rest are left unchecked, and said so.
pub const MAX_ASKED: usize = 256;

const DOCKER_HUB: &str = "docker.io";
/// Where Docker Hub's registry API answers.
const DOCKER_HUB_API: &str = "registry-1.docker.io";

/// An image reference, normalised as the container runtime does.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ImageRef {
    /// `host` or `host:port` as written (`docker.io` for Docker Hub, `index.docker.io` included).
    pub registry: String,
    /// `library/nginx`, `acme/web`.
    pub repository: String,
    pub tag: Option<String>,
    /// `algorithm:hex`, when pinned: what the runtime pulls (a tag beside it is not asked).
    pub digest: Option<String>,
}

impl std::fmt::Display for ImageRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.registry, self.repository)?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = &self.digest {
            write!(f, "@{digest}")?;
        }
        Ok(())
    }
}

impl ImageRef {
    /// Reads `text` as a pod's `image:` field; `Err` says what is wrong with it.
    pub fn parse(text: &str) -> Result<Self, String> {
        if text.is_empty() || text.len() > 4096 || text.trim() != text {
            return Err("not an image reference".into());
        }
        let (name, digest) = match text.split_once('@') {
            Some((name, digest)) => (name, Some(digest)),
            None => (text, None),
        };
        // A tag is what follows the last `:` after the last `/` (a registry's port comes before).
        let (name, tag) = match name.rsplit_once(':') {
            Some((before, tag)) if !tag.contains('/') => (before, Some(tag)),
            _ => (name, None),
        };
        let (registry, repository) = match name.split_once('/') {
            Some((first, rest))
                if first.contains(['.', ':'])
                    || first == "localhost"
                    || first.chars().any(|c| c.is_ascii_uppercase()) =>
            {
                (first.to_string(), rest.to_string())
            }
            _ => (DOCKER_HUB.to_string(), name.to_string()),
        };
        // Only the legacy `index.docker.io` is Docker Hub's name to the runtime (distribution's
        // `normalize.go`): `registry-1.docker.io/nginx` is asked there as `nginx`, not
        // `library/nginx`, and so must it be here.
        let registry = if registry == "index.docker.io" { DOCKER_HUB.to_string() } else { registry };
        let repository = if registry == DOCKER_HUB && !repository.contains('/') {
            format!("library/{repository}")
        } else {
            repository
        };
        if !is_registry(&registry) {
            return Err(format!("{registry:?} is not a registry host"));
        }
        if repository.len() > 255 || !repository.split('/').all(is_path_component) {
            return Err(format!(
                "{repository:?} is not a repository name (lower-case letters, digits, separators)"
            ));
        }
        if let Some(tag) = tag {
            if !is_tag(tag) {
                return Err(format!("{tag:?} is not a tag"));
            }
        }
        if let Some(digest) = digest {
            if !is_digest(digest) {
                return Err(format!(
                    "{digest:?} is not a digest (sha256:64 hex digits, sha384:96 or sha512:128)"
                ));
            }
        }
        let tag = match (tag, digest) {
            (None, None) => Some("latest".to_string()),
            (tag, _) => tag.map(str::to_string),
        };
        Ok(ImageRef { registry, repository, tag, digest: digest.map(str::to_string) })
    }

    /// What the manifest is asked by: the digest when pinned, else the tag.
    pub fn reference(&self) -> &str {
        self.digest.as_deref().or(self.tag.as_deref()).unwrap_or("latest")
    }

    /// Where the registry's API answers (Docker Hub's is not docker.io).
    pub fn api_host(&self) -> &str {
        if self.registry == DOCKER_HUB {
            DOCKER_HUB_API
        } else {
            &self.registry
        }
    }
}

/// `host`, `host:port`, `[v6]:port`.
fn is_registry(text: &str) -> bool {
    let (host, port) = match text.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() && (host.ends_with(']') || !host.contains(':')) => {
            (host, Some(port))
        }
        _ => (text, None),
    };
    let host_ok = if let Some(v6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        v6.parse::<std::net::Ipv6Addr>().is_ok()
    } else {
        !host.is_empty()
            && host.split('.').all(|label| {
                !label.is_empty()
                    && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                    && !label.starts_with('-')
                    && !label.ends_with('-')
            })
    };
    host_ok && port.is_none_or(|p| p.parse::<u16>().is_ok())
}

/// A path component of the distribution grammar: lower-case alphanumerics joined by `.`, `_`,
/// `__` or runs of `-`.
fn is_path_component(text: &str) -> bool {
    let bytes = text.as_bytes();
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    if bytes.is_empty() || !alnum(bytes[0]) || !alnum(bytes[bytes.len() - 1]) {
        return false;
    }
    let mut separator = String::new();
    for &b in bytes {
        if alnum(b) {
            if !(separator.is_empty()
                || separator == "."
                || separator == "_"
                || separator == "__"
                || separator.bytes().all(|s| s == b'-'))
            {
                return false;
            }
            separator.clear();
        } else if matches!(b, b'.' | b'_' | b'-') {
            separator.push(b as char);
        } else {
            return false;
        }
    }
    true
}

fn is_tag(text: &str) -> bool {
    text.len() <= 128
        && text.chars().next().is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        && text.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

/// The algorithms go-digest, which the runtime's reference parser validates with, knows.
fn is_digest(text: &str) -> bool {
    let hex = |h: &str, n: usize| {
        h.len() == n && h.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    match text.split_once(':') {
        Some(("sha256", h)) => hex(h, 64),
        Some(("sha384", h)) => hex(h, 96),
        Some(("sha512", h)) => hex(h, 128),
        _ => false,
    }
}

/// What a registry said of one reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Present,
    /// No manifest for that tag or digest (HTTP 404: `MANIFEST_UNKNOWN`, `NAME_UNKNOWN`).
    Missing,
    /// Not asked, or no answer: `why` (host-level for an unreachable or refused host).
    Unchecked {
        why: String,
    },
}

/// Answers by reference: a present digest's for good, a tag's (and a missing digest's) for the
/// plan (or `SERVE_TAG_MEMORY` in `serve`). Shared by every clone. Unchecked references are not
/// kept: failed hosts are remembered by `failed_hosts`.
#[derive(Clone)]
pub struct Cache(Arc<CacheShared>);

struct CacheShared {
    /// How long a tag's answer holds; `None`: as long as the cache lives (one plan).
    tag_memory: Option<Duration>,
    clock: super::failed_hosts::Clock,
    answers: Mutex<HashMap<ImageRef, (bool, Instant)>>,
}

impl Default for Cache {
    fn default() -> Self {
        Self::new(None, Arc::new(Instant::now))
    }
}

impl std::fmt::Debug for Cache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("images::Cache").field("tag_memory", &self.0.tag_memory).finish_non_exhaustive()
    }
}

impl Cache {
    /// `serve`'s: tags asked again after `SERVE_TAG_MEMORY`.
    pub fn serving() -> Self {
        Self::new(Some(SERVE_TAG_MEMORY), Arc::new(Instant::now))
    }

    pub fn new(tag_memory: Option<Duration>, clock: super::failed_hosts::Clock) -> Self {
        Cache(Arc::new(CacheShared { tag_memory, clock, answers: Mutex::default() }))
    }

    fn get(&self, image: &ImageRef) -> Option<Outcome> {
        let answers = self.0.answers.lock().unwrap_or_else(|e| e.into_inner());
        let (present, at) = answers.get(image)?;
        // A digest that is present stays so; one that is missing may be pushed any time (CI
        // pushes the image the pull request already pins): asked again as a tag is.
        let stale = (image.digest.is_none() || !*present)
            && self
                .0
                .tag_memory
                .is_some_and(|memory| (self.0.clock)().saturating_duration_since(*at) >= memory);
        (!stale).then_some(if *present { Outcome::Present } else { Outcome::Missing })
    }

    fn put(&self, image: &ImageRef, outcome: &Outcome) {
        let present = match outcome {
            Outcome::Present => true,
            Outcome::Missing => false,
            Outcome::Unchecked { .. } => return,
        };
        let mut answers = self.0.answers.lock().unwrap_or_else(|e| e.into_inner());
        if answers.len() >= MAX_CACHED {
            answers.clear();
        }
        answers.insert(image.clone(), (present, (self.0.clock)()));
    }
}

/// The access image checks have under `settings`, with `image_hosts` (hosts of the images the
/// base revision already runs) known besides the chart sources' hosts. Docker Hub's names
/// allow and mirror its API host. `Err`: checks are off, or the settings are wrong.
pub fn access(settings: &Settings, image_hosts: &[String]) -> Result<Access, String> {
    if settings.offline {
        return Err("chart and image fetching is off (--no-chart-fetch)".into());
    }
    if settings.no_image_check {
        return Err("image checks are off (--no-image-check)".into());
    }
    let mut settings = settings.clone();
    let mut known = settings.known_urls.take().unwrap_or_default();
    known.extend(image_hosts.iter().map(|host| format!("oci://{}", api_host_of(host))));
    settings.known_urls = Some(known);
    let hub = |host: &str| matches!(host, "docker.io" | "index.docker.io");
    let hub_allowed = settings.allowed_hosts.iter().any(|h| hub(h));
    if hub_allowed {
        settings.allowed_hosts.push(DOCKER_HUB_API.into());
    }
    let hub_mirror = settings
        .mirrors
        .iter()
        .find_map(|m| m.split_once('=').filter(|(host, _)| hub(host)).map(|(_, mirror)| mirror.to_string()));
    if let Some(mirror) = hub_mirror {
        settings.mirrors.push(format!("{DOCKER_HUB_API}={mirror}"));
    }
    let mut access = settings.access(&[])?;
    access.timeout = Some(access.timeout.unwrap_or(DEFAULT_TIMEOUT));
    Ok(access)
}

/// `registry-1.docker.io` for Docker Hub's names, else `host` itself.
fn api_host_of(host: &str) -> &str {
    match host {
        "docker.io" | "index.docker.io" => DOCKER_HUB_API,
        _ => host,
    }
}

/// Asks the registries of `images` (each distinct reference once, `PARALLEL` at a time) through
/// `access`, answering from `cache` what it knows.
pub fn check(access: Access, cache: &Cache, images: &[ImageRef]) -> BTreeMap<ImageRef, Outcome> {
    check_until(access, cache, images, &crate::cancel::CancelToken::new())
}

/// `check`, asking nothing more once `cancel` is cancelled (the plan superseded or out of its
/// time): what is left is unchecked.
pub fn check_until(
    access: Access,
    cache: &Cache,
    images: &[ImageRef],
    cancel: &crate::cancel::CancelToken,
) -> BTreeMap<ImageRef, Outcome> {
    let mut results = BTreeMap::new();
    let mut todo = Vec::new();
    // Not `todo.contains`: a pull request may bring a hundred thousand references.
    let mut queued = std::collections::BTreeSet::new();
    for image in images {
        if results.contains_key(image) || !queued.insert(image) {
            continue;
        }
        // The host policy first: the cache is shared by every plan `serve` makes, and an answer
        // another repository's plan was allowed to get is no answer for a host this plan may not
        // ask (it would tell which images exist there).
        if let Err(refused) = access.target(&format!("oci://{}/{}", image.api_host(), image.repository)) {
            results.insert(image.clone(), Outcome::Unchecked { why: refused.to_string() });
            continue;
        }
        match cache.get(image) {
            Some(outcome) => {
                results.insert(image.clone(), outcome);
            }
            None => todo.push(image),
        }
    }
    if todo.len() > MAX_ASKED {
        let why = format!(
            "the pull request brings more than {MAX_ASKED} new image references: the rest are not asked"
        );
        for image in todo.split_off(MAX_ASKED) {
            results.insert(image.clone(), Outcome::Unchecked { why: why.clone() });
        }
    }
    if todo.is_empty() {
        return results;
    }
    let timeout = access.timeout.unwrap_or(DEFAULT_TIMEOUT);
    let fetcher = match Fetcher::new(access) {
        Ok(fetcher) => fetcher,
        Err(why) => {
            results.extend(todo.into_iter().map(|i| (i.clone(), Outcome::Unchecked { why: why.clone() })));
            return results;
        }
    };
    let workers = PARALLEL.min(todo.len());
    let queue = Mutex::new(todo.into_iter());
    let found = Mutex::new(Vec::new());
    // A registry that let a request run out its time is not asked again in this check: a pull
    // request naming a hundred images on a host that hangs costs one timeout per worker, not a
    // hundred. (The failed-host memory keeps only hosts that gave no answer at all.)
    let slow: Mutex<HashMap<String, String>> = Mutex::default();
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                let next = queue.lock().unwrap_or_else(|e| e.into_inner()).next();
                let Some(image) = next else { break };
                let host = slow_key(image);
                let known_slow = slow.lock().unwrap_or_else(|e| e.into_inner()).get(&host).cloned();
                let outcome = match known_slow {
                    Some(why) => Outcome::Unchecked { why },
                    None if cancel.reason().is_some() => Outcome::Unchecked {
                        why: format!(
                            "not asked: {}",
                            cancel.reason().map(|r| r.to_string()).unwrap_or_default()
                        ),
                    },
                    None => {
                        let started = Instant::now();
                        let outcome = check_one(&fetcher, image);
                        if let Outcome::Unchecked { why } = &outcome {
                            if started.elapsed() >= timeout {
                                slow.lock().unwrap_or_else(|e| e.into_inner()).insert(host, why.clone());
                            }
                        }
                        outcome
                    }
                };
                cache.put(image, &outcome);
                found.lock().unwrap_or_else(|e| e.into_inner()).push((image.clone(), outcome));
            });
        }
    });
    results.extend(found.into_inner().unwrap_or_else(|e| e.into_inner()));
    results
}

/// What a registry that ran out its time is remembered by: its host, in lower case, whatever
/// the port. `GHCR.io`, `ghcr.io:81`, `ghcr.io:82`… are one host to the network; were they told
/// apart, a pull request could spell a known host that drops connections on most ports a new
/// way for each image, and buy a timeout with each.
fn slow_key(image: &ImageRef) -> String {
    let registry = image.api_host().to_ascii_lowercase();
    let host = match registry.rsplit_once(':') {
        Some((host, port))
            if port.bytes().all(|b| b.is_ascii_digit()) && (!host.contains(':') || host.ends_with(']')) =>
        {
            host
        }
        _ => registry.as_str(),
    };
    host.trim_end_matches('.').to_string()
}

/// One manifest HEAD, with an anonymous token when the registry asks for one.
fn check_one(fetcher: &Fetcher, image: &ImageRef) -> Outcome {
    let unchecked = |why: String| Outcome::Unchecked { why };
    // As charts' OCI repositories: a mirror's path prefix becomes part of the repository.
    let target = match fetcher.target(&format!("oci://{}/{}", image.api_host(), image.repository)) {
        Ok(target) => target,
        Err(e) => return unchecked(e.to_string()),
    };
    let repository = target.path().trim_start_matches('/').to_string();
    let mut url = target;
    url.set_path(&format!("/v2/{repository}/manifests/{}", image.reference()));
    url.set_query(None);
    let mut token = None;
    for attempt in 0..2 {
        let presented = Presented { auth: token.as_ref(), client_certificate: false };
        match fetcher.head(&url, Some(MANIFEST_ACCEPT), presented) {
            Ok(headers) => return answered(&url, image, &headers),
            Err(FetchError::Status { status: 404, .. }) => return Outcome::Missing,
            Err(FetchError::Status { status: 401, www_authenticate: Some(challenge), .. })
                if attempt == 0 && challenge.trim_start().to_ascii_lowercase().starts_with("bearer") =>
            {
                match anonymous_token(fetcher, &url, &repository, &challenge) {
                    Ok(value) => token = Some(Auth::Bearer(value)),
                    Err(why) => return unchecked(why),
                }
            }
            Err(FetchError::Status { status: 401 | 403, url, .. }) => {
                return unchecked(format!(
                    "{url}: the registry wants credentials (a private image, or a repository that does not \
                     exist: registries do not say which)"
                ))
            }
            Err(e) => return unchecked(e.to_string()),
        }
    }
    unchecked(format!("{url}: the registry refused its own token"))
}

/// What a successful HEAD says: present only when the answer is a registry's manifest (its
/// `Docker-Content-Digest`, or a manifest media type as `Content-Type`). A login page an
/// authenticating proxy redirects to, or a web server answering `200` for every path, is no
/// manifest: such a host is left unchecked, never taken to hold every image asked. A digest
/// answered with another digest is not the image asked for either.
fn answered(url: &Url, image: &ImageRef, headers: &reqwest::header::HeaderMap) -> Outcome {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    let digest = header("docker-content-digest").filter(|d| is_digest(d));
    let media_type = header("content-type")
        .and_then(|t| t.split(';').next())
        .map(|t| t.trim().to_ascii_lowercase())
        .unwrap_or_default();
    let manifest_type = MANIFEST_ACCEPT.split(',').any(|accepted| accepted.trim() == media_type);
    if let (Some(asked), Some(given)) = (&image.digest, digest) {
        if asked != given {
            return Outcome::Unchecked {
                why: format!("{url}: the registry answered for digest {given}, not the one asked"),
            };
        }
    }
    if digest.is_some() || manifest_type {
        Outcome::Present
    } else {
        Outcome::Unchecked {
            why: format!(
                "{url}: the answer is no image manifest (no Docker-Content-Digest, content type {:?}): \
                 not a registry, or one behind a login",
                media_type
            ),
        }
    }
}

/// A pull token from the realm of a `Bearer` challenge, asked anonymously.
fn anonymous_token(
    fetcher: &Fetcher,
    registry: &Url,
    repository: &str,
    challenge: &str,
) -> Result<String, String> {
    let params = super::oci::challenge_params(challenge)
        .ok_or_else(|| format!("{registry}: a challenge fluxplan cannot read ({challenge})"))?;
    let realm = params
        .iter()
        .find(|(k, _)| k == "realm")
        .map(|(_, v)| v.clone())
        .ok_or_else(|| format!("{registry}: a token challenge without a realm"))?;
    let mut url = registry.join(&realm).map_err(|e| format!("{registry}: the token realm {realm:?}: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("{registry}: the token realm {url} is neither http nor https: refused"));
    }
    if registry.scheme() == "https" && url.scheme() != "https" {
        return Err(format!("{registry}: the token realm {url} is plain HTTP behind https: refused"));
    }
    let _ = url.set_username("");
    let _ = url.set_password(None);
    {
        let mut query = url.query_pairs_mut();
        for (key, value) in params.iter().filter(|(k, _)| k == "service" || k == "scope") {
            query.append_pair(key, value);
        }
        if !params.iter().any(|(k, _)| k == "scope") {
            query.append_pair("scope", &format!("repository:{repository}:pull"));
        }
    }
    let (bytes, _) =
        fetcher.get(&url, None, Presented::nothing(), MAX_TOKEN_BYTES).map_err(|e| e.to_string())?;
    let answer: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|e| format!("{url}: the token answer is not JSON: {e}"))?;
    answer["token"]
        .as_str()
        .or_else(|| answer["access_token"].as_str())
        .map(str::to_string)
        .ok_or_else(|| format!("{url} gave no token"))
}

#[cfg(test)]
mod tests;
