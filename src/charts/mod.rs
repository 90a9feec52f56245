//! Charts a HelmRelease names, fetched outside the sandbox: version resolution as
//! source-controller does it (`version`). The only module that will open network connections for
//! content a pull request names.

pub mod archive;
pub mod chart_files;
pub mod credentials;
pub mod failed_hosts;
pub mod fetch;
pub mod helmignore;
pub mod hosts;
pub mod images;
pub mod loader;
pub mod oci;
pub mod pack;
pub mod store;
pub mod tls;
pub mod unpacked;
pub mod version;

/// The ways to give fluxplan a chart it could not fetch (`why`) for HelmRelease `release`
/// (`NAMESPACE/NAME`): the flags of `plan` and `build` (docs/helm.md). With fetching off, only
/// the chart itself.
pub fn ways_to_supply(release: &str, why: &str) -> String {
    if why.contains("--no-chart-fetch") {
        return format!("give it with --chart {release}=DIR|TGZ");
    }
    format!(
        "give it with --chart {release}=DIR|TGZ, fetch it through a mirror with --registry-mirror HOST=MIRROR, \
         or allow its host with --chart-hosts HOST"
    )
}

/// The URLs written in the Flux source manifests of `commit` (`url:` lines of files naming
/// source.toolkit.fluxcd.io) and its charts' dependencies (`repository:`): the hosts a plan of a
/// pull request onto `commit` may fetch from.
pub fn base_source_urls(repo: &std::path::Path, commit: &str) -> Vec<String> {
    let sources = crate::git::yaml_lines(repo, commit, crate::flux::SOURCE_GROUP, r"^\s*(url|endpoint):");
    // Charts' dependencies name their repositories in Chart.yaml (and Chart.lock).
    let dependencies = crate::git::yaml_lines(repo, commit, "dependencies", r"^\s*-?\s*repository:");
    sources
        .iter()
        .chain(&dependencies)
        .filter_map(|line| {
            let value = line.split_once(':')?.1.trim();
            let value = value.split(" #").next()?.trim().trim_matches(|c| c == '"' || c == '\'');
            (!value.is_empty()).then(|| value.to_string())
        })
        .collect()
}

/// What the operator allows charts to be fetched from (flags, environment, clusters file).
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// `host` or `host:port` fetched from besides the hosts the base revision's sources use.
    pub allowed_hosts: Vec<String>,
    /// `HOST=MIRROR`: fetch from MIRROR what names HOST.
    pub mirrors: Vec<String>,
    /// `host:port` reached over plain HTTP.
    pub insecure: Vec<String>,
    /// URLs of the base revision's (and the cluster's) sources: their hosts may be fetched from.
    /// `None`: those of the revision being rendered (`build`, where no pull request is planned).
    pub known_urls: Option<Vec<String>>,
    /// Fetch nothing: every chart from a repository or registry is unavailable.
    pub offline: bool,
    /// Hosts that failed, shared by every clone of these settings: asked once per plan (the CLI
    /// makes one per process), or once a minute in `serve`.
    pub failed_hosts: failed_hosts::FailedHosts,
    /// Check no container image (`--no-image-check`).
    pub no_image_check: bool,
    /// Registries' answers for images, shared by every clone: for the plan, or (tags) a few
    /// minutes in `serve`.
    pub image_cache: images::Cache,
}

impl Settings {
    /// The access these settings give, `own_urls` being the rendered revision's source URLs.
    pub fn access(&self, own_urls: &[String]) -> Result<fetch::Access, String> {
        if self.offline {
            return Err("chart fetching is off (--no-chart-fetch)".into());
        }
        let known = self.known_urls.as_deref().unwrap_or(own_urls);
        let hosts = hosts::HostPolicy::new(
            known.iter().map(String::as_str),
            self.allowed_hosts.iter().map(String::as_str),
            self.mirrors.iter().map(String::as_str),
        )?;
        Ok(fetch::Access {
            hosts,
            insecure: self.insecure.iter().cloned().collect(),
            timeout: None,
            failed_hosts: self.failed_hosts.clone(),
        })
    }
}
