//! Secrets given as a value or as a file (`--github-token-file`, `FLUXPLAN_GITHUB_TOKEN_FILE`):
//! Kubernetes mounts a Secret's keys as files, which keeps them out of the environment. Messages
//! name the settings and the file, never what it holds.

use anyhow::{bail, Result};
use std::path::Path;

/// A secret setting by its flag and environment variable (the file's are these with `-file`,
/// `_FILE`).
#[derive(Debug, Clone, Copy)]
pub struct Secret {
    pub flag: &'static str,
    pub env: &'static str,
}

impl Secret {
    /// The secret given as a value or in `file`; `None` when neither is.
    pub fn read(self, value: Option<String>, file: Option<&Path>) -> Result<Option<String>> {
        match (value, file) {
            (Some(_), Some(_)) => bail!(self.both_given()),
            (value, None) => Ok(value),
            (None, Some(file)) => self.read_file(file).map(Some),
        }
    }

    /// A list of secrets (comma-separated while rotating) given as values or in `file`, which
    /// holds them comma-separated or one per line.
    pub fn read_list(self, values: Vec<String>, file: Option<&Path>) -> Result<Vec<String>> {
        let Some(file) = file else { return Ok(values) };
        if !values.is_empty() {
            bail!(self.both_given());
        }
        let text = self.read_file(file)?;
        Ok(text
            .split([',', '\n'])
            .map(|s| s.trim_end_matches('\r'))
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect())
    }

    fn both_given(self) -> String {
        format!(
            "{flag} ({env}) and {flag}-file ({env}_FILE) are both set: give the secret one way, as a value or as a file",
            flag = self.flag,
            env = self.env
        )
    }

    /// The file's text without its trailing line break (`echo`, editors and `kubectl create
    /// secret --from-file` of such a file leave one).
    fn read_file(self, file: &Path) -> Result<String> {
        // The error is the system's (not found, permission denied, not UTF-8): never the content.
        match std::fs::read_to_string(file) {
            Ok(text) => Ok(text.trim_end_matches(['\n', '\r']).to_string()),
            Err(e) => bail!("{}-file ({}_FILE): cannot read {}: {e}", self.flag, self.env, file.display()),
        }
    }
}

pub const DATABASE_URL: Secret = Secret { flag: "--database-url", env: "DATABASE_URL" };
pub const GITHUB_TOKEN: Secret = Secret { flag: "--github-token", env: "FLUXPLAN_GITHUB_TOKEN" };
pub const GITHUB_APP_PRIVATE_KEY: Secret =
    Secret { flag: "--github-app-private-key", env: "FLUXPLAN_GITHUB_APP_PRIVATE_KEY" };
pub const GITHUB_WEBHOOK_SECRET: Secret =
    Secret { flag: "--github-webhook-secret", env: "FLUXPLAN_GITHUB_WEBHOOK_SECRET" };
pub const GITLAB_TOKEN: Secret = Secret { flag: "--gitlab-token", env: "FLUXPLAN_GITLAB_TOKEN" };
pub const GITLAB_WEBHOOK_TOKEN: Secret =
    Secret { flag: "--gitlab-webhook-token", env: "FLUXPLAN_GITLAB_WEBHOOK_TOKEN" };
pub const RUNS_TOKEN: Secret = Secret { flag: "--runs-token", env: "FLUXPLAN_RUNS_TOKEN" };
pub const MCP_TOKEN: Secret = Secret { flag: "--mcp-token", env: "FLUXPLAN_MCP_TOKEN" };

#[cfg(test)]
mod tests {
    use super::*;

    const VALUE: &str = "s3cr3t-value";

    #[test]
    fn a_file_gives_the_secret_without_its_trailing_line_break() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        for written in [VALUE.to_string(), format!("{VALUE}\n"), format!("{VALUE}\r\n")] {
            std::fs::write(&file, written).unwrap();
            assert_eq!(GITHUB_TOKEN.read(None, Some(&file)).unwrap().as_deref(), Some(VALUE));
        }
        assert_eq!(GITHUB_TOKEN.read(Some("v".into()), None).unwrap().as_deref(), Some("v"));
        assert_eq!(GITHUB_TOKEN.read(None, None).unwrap(), None);
        std::fs::write(&file, "old,new\nnewest\n").unwrap();
        assert_eq!(
            GITHUB_WEBHOOK_SECRET.read_list(Vec::new(), Some(&file)).unwrap(),
            ["old", "new", "newest"]
        );
        assert_eq!(GITHUB_WEBHOOK_SECRET.read_list(vec!["a".into()], None).unwrap(), ["a"]);
    }

    #[test]
    fn both_ways_or_an_unreadable_file_is_an_error_that_never_shows_the_secret() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        std::fs::write(&file, VALUE).unwrap();
        let both = GITLAB_TOKEN.read(Some(VALUE.into()), Some(&file)).unwrap_err().to_string();
        assert_eq!(
            both,
            "--gitlab-token (FLUXPLAN_GITLAB_TOKEN) and --gitlab-token-file (FLUXPLAN_GITLAB_TOKEN_FILE) are both \
             set: give the secret one way, as a value or as a file"
        );
        let both = GITLAB_WEBHOOK_TOKEN.read_list(vec![VALUE.into()], Some(&file)).unwrap_err().to_string();
        assert!(both.contains("are both set") && !both.contains(VALUE), "{both}");
        let missing = dir.path().join("missing");
        let error = DATABASE_URL.read(None, Some(&missing)).unwrap_err().to_string();
        assert!(error.starts_with("--database-url-file (DATABASE_URL_FILE): cannot read "), "{error}");
        assert!(error.contains(&missing.display().to_string()), "{error}");
        // Not UTF-8: the error says so, and quotes nothing of it.
        std::fs::write(&file, [b'z', b'q', b'7', b'k', 0xff]).unwrap();
        let error = RUNS_TOKEN.read(None, Some(&file)).unwrap_err().to_string();
        assert!(error.starts_with("--runs-token-file (FLUXPLAN_RUNS_TOKEN_FILE): cannot read"), "{error}");
        assert!(!error.contains("zq7k"), "{error}");
    }
}
