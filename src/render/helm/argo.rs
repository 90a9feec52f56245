//! Argo CD Helm sources, rendered as the repo-server renders them: `helm template` of the chart
//! (a path of this repository, or a chart of a Helm repository or OCI registry) with the values
//! merged in the repo-server's order (value files, then `values`/`valuesObject`, then
//! `parameters` and `fileParameters`), the release named after the Application unless
//! `releaseName` says otherwise. Same engine, sandbox, fetch rules and cache as HelmReleases.

use super::engine::Template;
use super::release::{template_key, ChartIdentity};
use super::shared::{int64_assignments, map_to_json, merge_maps, new_map, SharedMap};
use super::strvals::{parse_into, Budget, Dialect, Reader};
use super::values::values_file;
use super::Charts;
use crate::argocd::application::HelmOptions;
use crate::cancel::CancelToken;
use crate::charts::oci;
use crate::charts::store::ChartRequest;
use serde_json::Value;
use std::path::Path;

/// Why a Helm source gives no objects.
pub enum NotRendered {
    /// fluxplan cannot reproduce it (no Helm, a chart it cannot have, remote value files).
    External(String),
    /// The repo-server fails too.
    Failed(String),
}

/// One Helm source of an Application.
pub struct Source<'a> {
    /// The chart's directory.
    pub chart: &'a Path,
    /// The digest of the archive it was unpacked from (in the chart store), when it was.
    pub digest: Option<&'a str>,
    pub options: &'a HelmOptions,
    /// The Application's name and destination namespace.
    pub application: &'a str,
    pub namespace: Option<&'a str>,
    /// Reads a `valueFiles` or `fileParameters` path: `Ok(None)` when it does not exist.
    pub read: &'a dyn Fn(&str) -> Result<Option<String>, NotRendered>,
}

/// The chart a Helm repository or registry source names (`repoURL` with `chart`; an OCI
/// repoURL has no scheme, or `oci://`), at `targetRevision` (a version or a range).
pub fn request(repo_url: &str, chart: &str, revision: Option<&str>) -> ChartRequest {
    let version = revision.filter(|r| !r.is_empty() && *r != "HEAD").unwrap_or("*").to_string();
    if repo_url.starts_with("http://") || repo_url.starts_with("https://") {
        ChartRequest::Repository { url: repo_url.to_string(), chart: chart.to_string(), version }
    } else {
        let registry = repo_url.trim_start_matches("oci://").trim_end_matches('/');
        ChartRequest::Oci {
            url: format!("oci://{registry}/{chart}"),
            reference: oci::Reference::Semver(version),
        }
    }
}

/// The source's objects as the repo-server renders them: hooks included (Argo CD maps Helm's
/// hook annotations to its own), test hooks left out.
pub fn render(charts: &Charts, source: &Source, cancel: &CancelToken) -> Result<Vec<Value>, NotRendered> {
    let helm = charts.helm.as_ref().map_err(|why| NotRendered::External(format!("not rendered: {why}")))?;
    let options = source.options;
    let count = options.parameters.len() + options.file_parameters.len() + options.value_files.len();
    if count > super::values::MAX_VALUE_SOURCES {
        return Err(NotRendered::Failed(format!(
            "more than {} value files and parameters",
            super::values::MAX_VALUE_SOURCES
        )));
    }
    let dialect = Dialect::of_major(helm.major());
    let (values, int64s) = values_of(source, dialect)?;
    let release = options.release_name.as_deref().unwrap_or(source.application);
    let namespace = options.namespace.as_deref().or(source.namespace).unwrap_or("default");
    let mut api_versions = charts.api_versions.to_vec();
    api_versions.extend(options.api_versions.iter().cloned());
    let template = Template {
        chart: source.chart,
        readable: source.chart,
        release,
        namespace,
        values: &values,
        int64s: &int64s,
        kube_version: options.kube_version.as_deref().or(charts.kube_version),
        api_versions: &api_versions,
        include_crds: !options.skip_crds,
        is_upgrade: false,
        // The repo-server fetches what a schema refers to; the sandbox cannot.
        skip_schema_validation: super::schema::remote_reference(source.chart).is_some(),
        // The repo-server runs `helm template` without a post-renderer.
        through_kyaml: false,
    };
    let identity = match source.digest {
        Some(digest) => ChartIdentity::Unpacked(digest.to_string()),
        None => ChartIdentity::Directory(source.chart.to_path_buf()),
    };
    let key = template_key(helm, &template, &identity)
        .map_err(|e| NotRendered::Failed(format!("cannot read the chart: {e}")))?;
    let printed = (charts.templates)(&key, &|| helm.template(&template, cancel)).map_err(|e| match e {
        // Dependencies the repo-server would fetch (`helm dependency build`): not a failure.
        crate::render::kustomize::BuildError::Failed(message) if message.contains("missing in charts/") => {
            NotRendered::External(format!("its chart's dependencies are not vendored in charts/: {message}"))
        }
        other => NotRendered::Failed(format!("helm template failed: {other}")),
    })?;
    let hooks = printed.hooks.into_iter().map(|(_, hook)| hook);
    Ok(printed.crds.into_iter().chain(printed.objects).chain(hooks).collect())
}

/// The values Helm builds from the repo-server's command line (`util/helm/cmd.go`, Helm's
/// `pkg/cli/values/options.go` `MergeValues`): the `valueFiles`, then `values`/`valuesObject` as
/// one more file, each merged with `MergeMaps`; then every `--set NAME=VALUE` (parameters), every
/// `--set-string` (`forceString`), every `--set-file`, each parsed with Helm's strvals.
fn values_of(source: &Source, dialect: Dialect) -> Result<(Value, Vec<String>), NotRendered> {
    let options = source.options;
    let mut files = Vec::new();
    for file in &options.value_files {
        if file.starts_with("http://") || file.starts_with("https://") {
            return Err(NotRendered::External(format!(
                "value file {file} is fetched by the repo-server from the network: not rendered by fluxplan"
            )));
        }
        match (source.read)(file)? {
            Some(text) => files.push((file.clone(), text)),
            None if options.ignore_missing_value_files => {}
            None => return Err(NotRendered::Failed(format!("value file {file} does not exist"))),
        }
    }
    // `ValuesYAML()`: the `values` text as written, unless `valuesObject` is set (its JSON, which
    // Go's YAML round trip leaves as it is).
    if options.values_object.is_none() {
        files.extend(options.values.clone().map(|text| ("helm.values".to_string(), text)));
    }
    let mut base = new_map([]);
    for (file, text) in &files {
        let document = values_file(text, dialect)
            .map_err(|e| NotRendered::Failed(format!("{file}: failed to parse the values: {e}")))?;
        base = merge_maps(&base, &document);
    }
    if let Some(object) = &options.values_object {
        base = merge_maps(&base, &super::values::as_map(object.clone()));
    }
    let env = ArgoEnv { application: source.application, namespace: source.namespace.unwrap_or("") };
    // The repo-server keeps parameters in Go maps by name (the last of a name wins) and passes
    // them in Go's random map order: where that order decides the values, nothing is planned.
    let mut set = Vec::<(String, String)>::new();
    let mut set_string = Vec::<(String, String)>::new();
    for (name, value, force_string) in &options.parameters {
        let group = if *force_string { &mut set_string } else { &mut set };
        let value = env.substitute(value)?;
        group.retain(|(n, _)| n != name);
        group.push((name.clone(), value));
    }
    let mut set_file = Vec::<(String, String)>::new();
    for (name, path) in &options.file_parameters {
        set_file.retain(|(n, _)| n != name);
        set_file.push((name.clone(), path.clone()));
    }
    let apply = |reversed: bool| -> Result<(Value, Vec<String>), NotRendered> {
        // A copy of the files' values: a parse writes into the maps it finds.
        let values = super::values::as_map(map_to_json(&base));
        let mut budget = Budget::default();
        let ordered = |group: &[(String, String)]| -> Vec<(String, String)> {
            let mut group = group.to_vec();
            if reversed {
                group.reverse();
            }
            group
        };
        for (flag, group, reader) in
            [("--set", ordered(&set), Reader::Typed), ("--set-string", ordered(&set_string), Reader::String)]
        {
            for (name, value) in group {
                let argument = format!("{name}={}", clean_set_parameter(&value));
                parse(&argument, &values, &reader, dialect, &mut budget, flag)?;
            }
        }
        let read = |path: &str| -> Result<String, String> {
            match (source.read)(path) {
                Ok(Some(text)) => Ok(text),
                Ok(None) => Err(format!("open {path}: no such file or directory")),
                Err(NotRendered::External(why) | NotRendered::Failed(why)) => Err(why),
            }
        };
        for (name, path) in ordered(&set_file) {
            let argument = format!("{name}={}", clean_set_parameter(&path));
            parse(&argument, &values, &Reader::File(&read), dialect, &mut budget, "--set-file")?;
        }
        Ok((map_to_json(&values), int64_assignments(&values)))
    };
    let values = apply(false)?;
    if set.len() > 1 || set_string.len() > 1 || set_file.len() > 1 {
        let other = apply(true);
        if other.as_ref().ok() != Some(&values) {
            return Err(NotRendered::External(
                "its helm.parameters give different values in different orders, and the repo-server passes them in \
                 Go's random map order: not rendered (give each value one parameter)"
                    .into(),
            ));
        }
    }
    Ok(values)
}

fn parse(
    argument: &str,
    values: &SharedMap,
    reader: &Reader,
    dialect: Dialect,
    budget: &mut Budget,
    flag: &str,
) -> Result<(), NotRendered> {
    parse_into(argument, values, reader, dialect, budget)
        .map_err(|e| NotRendered::Failed(format!("helm template fails: failed parsing {flag} data: {e}")))
}

/// Argo CD's `cleanSetParameters`: a value that starts with `{` and ends with `}` is a list and
/// kept; in any other, a `,` not preceded by `\` becomes `\,` (a `\\,` is left alone: the
/// escaped backslash ends, the comma separates).
pub fn clean_set_parameter(value: &str) -> String {
    if value.starts_with('{') && value.ends_with('}') {
        return value.to_string();
    }
    let mut cleaned = String::with_capacity(value.len());
    let mut previous = None;
    for c in value.chars() {
        if c == ',' && previous != Some('\\') {
            cleaned.push_str("\\,");
        } else {
            cleaned.push(c);
        }
        previous = Some(c);
    }
    cleaned
}

/// The build environment the repo-server substitutes into parameter values
/// (`Env.Envsubst`, Go's `os.Expand`; `$$` is a `$`).
struct ArgoEnv<'a> {
    application: &'a str,
    namespace: &'a str,
}

impl ArgoEnv<'_> {
    fn value(&self, name: &str) -> Result<String, NotRendered> {
        match name {
            "$" => Ok("$".into()),
            "ARGOCD_APP_NAME" => Ok(self.application.to_string()),
            "ARGOCD_APP_NAMESPACE" => Ok(self.namespace.to_string()),
            other if other.starts_with("ARGOCD_APP_") => Err(NotRendered::External(format!(
                "a helm.parameters value reads ${other}, which only the repo-server knows: not rendered"
            ))),
            // Not in the repo-server's environment: it expands to nothing.
            _ => Ok(String::new()),
        }
    }

    /// Go's `os.Expand` of `text`.
    fn substitute(&self, text: &str) -> Result<String, NotRendered> {
        let bytes = text.as_bytes();
        let mut out = String::with_capacity(text.len());
        let mut copied = 0;
        let mut j = 0;
        while j < bytes.len() {
            if bytes[j] == b'$' && j + 1 < bytes.len() {
                out.push_str(&text[copied..j]);
                let (name, width) = shell_name(&text[j + 1..]);
                match (name, width) {
                    ("", w) if w > 0 => {}
                    ("", _) => out.push('$'),
                    (name, _) => out.push_str(&self.value(name)?),
                }
                j += width;
                copied = j + 1;
            }
            j += 1;
        }
        out.push_str(&text[copied.min(text.len())..]);
        Ok(out)
    }
}

/// Go's `getShellName`: the name after a `$`, and how many bytes it took.
fn shell_name(s: &str) -> (&str, usize) {
    let bytes = s.as_bytes();
    let special = |b: u8| matches!(b, b'*' | b'#' | b'$' | b'@' | b'!' | b'?' | b'-' | b'0'..=b'9');
    if bytes[0] == b'{' {
        if bytes.len() > 2 && special(bytes[1]) && bytes[2] == b'}' {
            return (&s[1..2], 3);
        }
        for i in 1..bytes.len() {
            if bytes[i] == b'}' {
                if i == 1 {
                    return ("", 2);
                }
                return (&s[1..i], i + 1);
            }
        }
        return ("", 1);
    }
    if special(bytes[0]) {
        return (&s[0..1], 1);
    }
    let end = bytes.iter().position(|b| !(b.is_ascii_alphanumeric() || *b == b'_')).unwrap_or(bytes.len());
    (&s[..end], end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_are_escaped_as_argo_cd_escapes_them() {
        assert_eq!(clean_set_parameter("a,b"), "a\\,b");
        assert_eq!(clean_set_parameter("a\\,b"), "a\\,b");
        assert_eq!(clean_set_parameter("{a,b}"), "{a,b}");
        assert_eq!(clean_set_parameter("{a},x=1,{b}"), "{a},x=1,{b}");
    }

    #[test]
    fn parameter_values_expand_the_build_environment_as_go_does() {
        let env = ArgoEnv { application: "web", namespace: "prod" };
        let expand = |t: &str| env.substitute(t).unwrap_or_else(|_| "EXTERNAL".into());
        assert_eq!(expand("$ARGOCD_APP_NAME-${ARGOCD_APP_NAMESPACE}"), "web-prod");
        assert_eq!(expand("$$x $unknown ${} $ end$"), "$x   $ end$");
        assert_eq!(expand("$ARGOCD_APP_REVISION"), "EXTERNAL");
        assert_eq!(expand("price: 5$"), "price: 5$");
    }
}
