//! Helm charts in OCI registries, pulled as the distribution API serves them: a tag, the highest
//! tag a semver range matches, or a digest; the manifest's chart layer fetched and checked
//! against its digest. Public registries want an anonymous bearer token first (`WWW-Authenticate`
//! on a 401): its realm is a URL like any other, checked by the same policy.

use super::fetch::{Auth, FetchError, Fetcher, Presented};
use super::version::Constraint;
use serde_json::Value;
use sha2::{Digest, Sha256};
use url::Url;

/// The media type of a Helm chart's content layer.
pub const CHART_LAYER: &str = "application/vnd.cncf.helm.chart.content.v1.tar+gzip";
const MANIFEST_TYPES: &str =
    "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json";
const MAX_MANIFEST_BYTES: u64 = 4 << 20;

/// Which version of an OCI artifact.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Reference {
    Tag(String),
    /// The highest tag this range matches (Masterminds syntax).
    Semver(String),
    Digest(String),
}

impl std::fmt::Display for Reference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reference::Tag(tag) => write!(f, "tag {tag}"),
            Reference::Semver(range) => write!(f, "semver {range}"),
            Reference::Digest(digest) => write!(f, "digest {digest}"),
        }
    }
}

/// A chart pulled from a registry.
pub struct Pulled {
    pub bytes: Vec<u8>,
    /// `sha256:…` of the chart layer.
    pub digest: String,
    /// What source-controller records as an OCIRepository's artifact revision: `TAG@sha256:…`
    /// (the manifest's digest), or the digest alone when pinned by digest.
    pub revision: String,
}

/// Pulls the chart at `url` (`oci://host/path/chart`): its archive's bytes and digest.
pub fn pull_chart(
    fetcher: &Fetcher,
    url: &str,
    reference: &Reference,
    credentials: Option<&Auth>,
    limit: u64,
) -> Result<Pulled, String> {
    let target = fetcher.target(url).map_err(|e| e.to_string())?;
    let repository = target.path().trim_start_matches('/').to_string();
    // The distribution spec's grammar: path components of lower-case letters, digits and
    // separators. Anything else (`..`, `%2e`) is not a repository, and must not become another
    // path on the registry.
    let component = |c: &str| {
        !c.is_empty()
            && c.chars()
                .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || matches!(ch, '.' | '_' | '-'))
            && c.chars().next().is_some_and(|ch| ch.is_ascii_alphanumeric())
            && c.chars().last().is_some_and(|ch| ch.is_ascii_alphanumeric())
    };
    if repository.is_empty() || !repository.split('/').all(component) {
        return Err(format!("{url} does not name an OCI repository"));
    }
    let mut session = Session { fetcher, base: target, repository, credentials, token: None };
    let reference = match reference {
        Reference::Tag(tag) => tag.replace('+', "_"),
        Reference::Digest(digest) => digest.clone(),
        Reference::Semver(range) => session.best_tag(range)?,
    };
    let is_digest = reference.starts_with("sha256:");
    if !(if is_digest { is_sha256_digest(&reference) } else { is_tag(&reference) }) {
        return Err(format!("{url}: {reference:?} is neither a tag nor a sha256 digest"));
    }
    let manifest_bytes =
        session.bytes(&format!("manifests/{reference}"), Some(MANIFEST_TYPES), MAX_MANIFEST_BYTES)?;
    // Pinned by digest: the manifest must be the one pinned.
    if is_digest
        && !format!("sha256:{}", hex::encode(Sha256::digest(&manifest_bytes)))
            .eq_ignore_ascii_case(&reference)
    {
        return Err(format!("{url}: the manifest served for {reference} is not the one that digest names"));
    }
    let manifest: Value = serde_json::from_slice(&manifest_bytes)
        .map_err(|e| format!("{url} {reference}: the manifest is not JSON: {e}"))?;
    let layer = manifest["layers"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|layer| layer["mediaType"] == CHART_LAYER)
        .ok_or_else(|| format!("{url} {reference} is not a Helm chart (no {CHART_LAYER} layer)"))?;
    let digest = layer["digest"]
        .as_str()
        .ok_or_else(|| format!("{url} {reference}: the chart layer has no digest"))?;
    if !is_sha256_digest(digest) {
        return Err(format!("{url} {reference}: the chart layer's digest {digest:?} is not a sha256 digest"));
    }
    let bytes = session.bytes(&format!("blobs/{digest}"), None, limit)?;
    let actual = format!("sha256:{}", hex::encode(Sha256::digest(&bytes)));
    if actual != digest {
        return Err(format!("{url} {reference}: the chart layer's content is {actual}, not {digest}"));
    }
    let manifest_digest = format!("sha256:{}", hex::encode(Sha256::digest(&manifest_bytes)));
    let revision = if is_digest { manifest_digest } else { format!("{reference}@{manifest_digest}") };
    Ok(Pulled { bytes, digest: actual, revision })
}

/// `sha256:` and 64 hexadecimal digits.
fn is_sha256_digest(text: &str) -> bool {
    text.strip_prefix("sha256:")
        .is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// A tag as the distribution spec allows it.
fn is_tag(text: &str) -> bool {
    text.len() <= 128
        && text.chars().next().is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        && text.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

/// Requests to one repository of a registry, with the token it asked for.
struct Session<'a> {
    fetcher: &'a Fetcher,
    /// The registry (scheme, host, port) as the policy allows it.
    base: Url,
    repository: String,
    /// The source's credentials: sent as they are, or exchanged for a token.
    credentials: Option<&'a Auth>,
    token: Option<Auth>,
}

impl Session<'_> {
    fn url(&self, path: &str) -> Url {
        let mut url = self.base.clone();
        url.set_path(&format!("/v2/{}/{path}", self.repository));
        url.set_query(None);
        url
    }

    fn bytes(&mut self, path: &str, accept: Option<&str>, limit: u64) -> Result<Vec<u8>, String> {
        let url = self.url(path);
        for attempt in 0..2 {
            let presented = Presented::source(self.token.as_ref().or(self.credentials));
            match self.fetcher.get(&url, accept, presented, limit) {
                Ok((bytes, _)) => return Ok(bytes),
                Err(FetchError::Status { status: 401, www_authenticate: Some(challenge), .. })
                    if attempt == 0 && challenge.trim_start().to_ascii_lowercase().starts_with("bearer") =>
                {
                    self.token = Some(Auth::Bearer(self.token_for(&challenge)?));
                }
                Err(e) => return Err(e.to_string()),
            }
        }
        Err(format!("{url}: the registry refused its own token"))
    }

    fn json(&mut self, path: &str, accept: Option<&str>, limit: u64) -> Result<Value, String> {
        let bytes = self.bytes(path, accept, limit)?;
        serde_json::from_slice(&bytes).map_err(|e| format!("{}: not JSON: {e}", self.url(path)))
    }

    /// The highest tag `range` matches (Helm writes `+` in versions as `_` in tags).
    fn best_tag(&mut self, range: &str) -> Result<String, String> {
        let constraint = Constraint::parse(range).map_err(|e| format!("semver '{range}': {e}"))?;
        let tags = self.json("tags/list", None, super::store::MAX_INDEX_BYTES)?;
        let versions: Vec<String> = tags["tags"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(|t| t.replace('_', "+"))
            .collect();
        let best = constraint
            .best(versions.iter().map(String::as_str))
            .ok_or_else(|| format!("no tag of {} matches '{range}'", self.repository))?;
        Ok(best.original().replace('+', "_"))
    }

    /// A pull token from the realm a `Bearer` challenge names: anonymous, or for the source's
    /// credentials.
    fn token_for(&self, challenge: &str) -> Result<String, String> {
        let params = challenge_params(challenge)
            .ok_or_else(|| format!("the registry wants credentials ({challenge})"))?;
        let realm = params
            .iter()
            .find(|(k, _)| k == "realm")
            .map(|(_, v)| v.clone())
            .ok_or("a challenge without a realm")?;
        let mut url = self.fetcher.target(&realm).map_err(|e| e.to_string())?;
        {
            let mut query = url.query_pairs_mut();
            for (key, value) in params.iter().filter(|(k, _)| k == "service" || k == "scope") {
                query.append_pair(key, value);
            }
            if !params.iter().any(|(k, _)| k == "scope") {
                query.append_pair("scope", &format!("repository:{}:pull", self.repository));
            }
        }
        let (bytes, _) = self
            .fetcher
            .get(&url, None, Presented::source(self.credentials), 1 << 20)
            .map_err(|e| e.to_string())?;
        let answer: Value = serde_json::from_slice(&bytes).map_err(|e| format!("{realm}: not JSON: {e}"))?;
        answer["token"]
            .as_str()
            .or_else(|| answer["access_token"].as_str())
            .map(str::to_string)
            .ok_or_else(|| format!("{realm} gave no token"))
    }
}

/// The parameters of a `Bearer realm="…",service="…"` challenge.
pub(super) fn challenge_params(challenge: &str) -> Option<Vec<(String, String)>> {
    let rest =
        challenge.trim().strip_prefix("Bearer ").or_else(|| challenge.trim().strip_prefix("bearer "))?;
    let mut params = Vec::new();
    for part in rest.split(',') {
        let (key, value) = part.trim().split_once('=')?;
        params.push((key.trim().to_ascii_lowercase(), value.trim().trim_matches('"').to_string()));
    }
    Some(params)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_challenges_are_read() {
        let params = challenge_params(
            r#"Bearer realm="https://ghcr.io/token",service="ghcr.io",scope="repository:a/b:pull""#,
        )
        .unwrap();
        assert_eq!(
            params,
            [
                ("realm".to_string(), "https://ghcr.io/token".to_string()),
                ("service".to_string(), "ghcr.io".to_string()),
                ("scope".to_string(), "repository:a/b:pull".to_string())
            ]
        );
        assert!(challenge_params("Basic realm=x").is_none());
    }
}
