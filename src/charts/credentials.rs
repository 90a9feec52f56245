//! A chart source's credentials as one value: its login (`secretRef`) and its TLS material
//! (`certSecretRef`). Also the login a `.dockerconfigjson` holds for one registry, picked by
//! host as Docker and ORAS pick it.

use super::fetch::Auth;
use super::tls::SourceTls;
use serde_json::Value;

/// What a source authenticates with. The default is none. `Debug` shows no secret.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct SourceCredentials {
    pub auth: Option<Auth>,
    pub tls: Option<SourceTls>,
}

impl SourceCredentials {
    pub fn is_none(&self) -> bool {
        self.auth.is_none() && self.tls.is_none()
    }
}

/// Docker Hub's names: each finds a login written under any other.
const DOCKER_HUB: [&str; 4] =
    ["docker.io", "index.docker.io", "registry-1.docker.io", "registry.hub.docker.com"];

/// The login for `registry` (`host` or `host:port`) in a `.dockerconfigjson`: the `auths` entry
/// whose key names that registry (with or without a scheme and path, as `docker login` writes
/// keys), Docker Hub's names counting as one. `Err` says why there is none, never a secret.
pub fn docker_login(config: &str, registry: &str) -> Result<Auth, String> {
    let config: Value =
        serde_json::from_str(config).map_err(|_| "its .dockerconfigjson is not JSON".to_string())?;
    let auths = config["auths"].as_object().ok_or("its .dockerconfigjson has no auths")?;
    let wanted = registry_key(registry);
    let entry = auths
        .iter()
        .find(|(key, _)| registry_key(key) == wanted)
        .map(|(_, entry)| entry)
        .ok_or_else(|| format!("its .dockerconfigjson has no login for {registry}"))?;
    if let (Some(username), Some(password)) = (entry["username"].as_str(), entry["password"].as_str()) {
        return Ok(Auth::Basic { username: username.into(), password: password.into() });
    }
    use base64::Engine as _;
    let decoded = entry["auth"]
        .as_str()
        .and_then(|a| base64::engine::general_purpose::STANDARD.decode(a).ok())
        .and_then(|b| String::from_utf8(b).ok());
    match decoded.as_deref().and_then(|d| d.split_once(':')) {
        Some((username, password)) => {
            Ok(Auth::Basic { username: username.into(), password: password.into() })
        }
        None => Err(format!("its .dockerconfigjson login for {registry} has no username and password")),
    }
}

/// A registry as an `auths` key names it: scheme and path dropped (`https://index.docker.io/v1/`
/// is `index.docker.io`), lower case, Docker Hub's names as one.
fn registry_key(key: &str) -> String {
    let bare = key.trim();
    let bare = bare.strip_prefix("https://").or_else(|| bare.strip_prefix("http://")).unwrap_or(bare);
    let host = bare.split('/').next().unwrap_or("").to_ascii_lowercase();
    if DOCKER_HUB.contains(&host.as_str()) {
        DOCKER_HUB[0].to_string()
    } else {
        host
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basic(username: &str, password: &str) -> Auth {
        Auth::Basic { username: username.into(), password: password.into() }
    }

    #[test]
    fn the_login_of_the_registry_is_picked_whatever_its_place() {
        let config = r#"{"auths": {
            "ghcr.io": {"username": "first", "password": "p1"},
            "https://registry.example.com:5000/v2/": {"auth": "c2Vjb25kOnAy"},
            "https://index.docker.io/v1/": {"username": "hub", "password": "p3"}
        }}"#;
        assert_eq!(docker_login(config, "registry.example.com:5000").unwrap(), basic("second", "p2"));
        assert_eq!(docker_login(config, "GHCR.io").unwrap(), basic("first", "p1"));
        assert_eq!(docker_login(config, "registry-1.docker.io").unwrap(), basic("hub", "p3"));
        assert_eq!(docker_login(config, "docker.io").unwrap(), basic("hub", "p3"));
    }

    #[test]
    fn no_login_for_the_registry_says_so() {
        let config = r#"{"auths": {"ghcr.io": {"username": "u", "password": "secret-p"}}}"#;
        let error = docker_login(config, "registry.example.com").unwrap_err();
        assert!(
            error.contains("no login for registry.example.com") && !error.contains("secret-p"),
            "{error}"
        );
        // Another port is another registry.
        assert!(docker_login(r#"{"auths": {"r.example:5000": {"auth": "dTpw"}}}"#, "r.example:5001").is_err());
        assert!(docker_login("not json", "ghcr.io").unwrap_err().contains("not JSON"));
    }
}
