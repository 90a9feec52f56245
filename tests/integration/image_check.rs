//! Images that exist (issue 37, point 3): the image references a pull request brings, asked of a
//! real registry (Debian's `docker-registry` on loopback; images pushed through the distribution
//! API): a present tag, a missing tag, a digest, and the same behind token authentication (the
//! registry's `auth: token` with a certificate made here by openssl, and a token server here that
//! mints the JWT it verifies, signed by openssl).

use crate::fixture::{alert_codes, fluxplan_bin, wait_for, Repo, WAIT};
use crate::helm_fetch::Registry;
use base64::Engine as _;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::process::Command;

const ISSUER: &str = "fluxplan-test-issuer";
const SERVICE: &str = "fluxplan-test-registry";

fn deployment(name: &str, image: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  namespace: shop\nspec:\n  selector:\n    \
         matchLabels:\n      app: {name}\n  template:\n    metadata:\n      labels:\n        app: {name}\n    spec:\n      \
         containers:\n      - name: web\n        image: {image}\n"
    )
}

fn cron_job(name: &str, init_image: &str, image: &str) -> String {
    format!(
        "apiVersion: batch/v1\nkind: CronJob\nmetadata:\n  name: {name}\n  namespace: shop\nspec:\n  schedule: \"@daily\"\n  \
         jobTemplate:\n    spec:\n      template:\n        spec:\n          restartPolicy: Never\n          initContainers:\n          \
         - name: migrate\n            image: {init_image}\n          containers:\n          - name: job\n            image: {image}\n"
    )
}

/// `fluxplan plan --format json` of HEAD~1..HEAD with image checks on (the fixture's runner
/// turns them off for every other test); returns the plan and the exit code.
fn plan_json(repo: &Repo, base: &str, head: &str, extra: &[&str]) -> (Value, i32) {
    let out = Command::new(fluxplan_bin())
        .args(["plan", "--no-cache", "--base", base, "--head", head, "--format", "json", "--repo"])
        .arg(repo.path())
        .args(extra)
        .env_remove("FLUXPLAN_NO_IMAGE_CHECK")
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let plan = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{e}: {stdout}{}", String::from_utf8_lossy(&out.stderr)));
    (plan, out.status.code().unwrap())
}

fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// Pushes a one-layer OCI image as `repository:tag` through the distribution API (blob uploads,
/// then the manifest), presenting `token` when given; returns the manifest's digest.
fn push_image(host: &str, repository: &str, tag: &str, token: Option<&str>) -> String {
    let client = reqwest::blocking::Client::new();
    let base = format!("http://{host}");
    let authorized = |request: reqwest::blocking::RequestBuilder| match token {
        Some(token) => request.bearer_auth(token),
        None => request,
    };
    let blob = |bytes: &[u8]| -> Value {
        let digest = sha256(bytes);
        let start = authorized(client.post(format!("{base}/v2/{repository}/blobs/uploads/"))).send().unwrap();
        assert_eq!(start.status(), 202, "{}", start.text().unwrap_or_default());
        let location = start.headers()["location"].to_str().unwrap().to_string();
        let url = if location.starts_with("http") { location } else { format!("{base}{location}") };
        let separator = if url.contains('?') { '&' } else { '?' };
        let put = authorized(client.put(format!("{url}{separator}digest={digest}")))
            .header("content-type", "application/octet-stream")
            .body(bytes.to_vec())
            .send()
            .unwrap();
        assert_eq!(put.status(), 201, "{}", put.text().unwrap_or_default());
        json!({"digest": digest, "size": bytes.len()})
    };
    let layer = format!("the layer of {repository}:{tag}").into_bytes();
    let config = serde_json::to_vec(&json!({"architecture": "amd64", "os": "linux",
        "rootfs": {"type": "layers", "diff_ids": [sha256(&layer)]}, "config": {}}))
    .unwrap();
    let mut config_descriptor = blob(&config);
    config_descriptor["mediaType"] = json!("application/vnd.oci.image.config.v1+json");
    let mut layer_descriptor = blob(&layer);
    layer_descriptor["mediaType"] = json!("application/vnd.oci.image.layer.v1.tar");
    let manifest = serde_json::to_vec(&json!({"schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": config_descriptor, "layers": [layer_descriptor]}))
    .unwrap();
    let put = authorized(client.put(format!("{base}/v2/{repository}/manifests/{tag}")))
        .header("content-type", "application/vnd.oci.image.manifest.v1+json")
        .body(manifest.clone())
        .send()
        .unwrap();
    assert_eq!(put.status(), 201, "{}", put.text().unwrap_or_default());
    sha256(&manifest)
}

/// A cluster `prod` whose Kustomization `apps` applies `files` at base, then `head` at head.
fn fleet(base: &[(&str, String)], head: &[(&str, String)]) -> Repo {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    repo.write("apps/namespace.yaml", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n");
    for (file, text) in base {
        repo.write(file, text);
    }
    repo.commit("base");
    for (file, text) in head {
        repo.write(file, text);
    }
    repo.commit("head");
    repo
}

/// (severity, message) of the alerts of `code`.
fn alerts_of(plan: &Value, code: &str) -> Vec<(String, String)> {
    plan["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["code"] == code)
        .map(|a| (a["severity"].as_str().unwrap().to_string(), a["message"].as_str().unwrap().to_string()))
        .collect()
}

fn access(hosts: &[String]) -> Vec<String> {
    let hosts = hosts.join(",");
    vec!["--chart-hosts".into(), hosts.clone(), "--insecure-registry".into(), hosts]
}

/// A present tag and a pinned digest pass; a missing tag and a missing digest block, naming the
/// object, the container and the reference. Near misses: an image that does not exist but base
/// already runs is not asked (not new); `--no-image-check` asks nothing.
#[test]
fn a_loopback_registry_answers_for_a_present_tag_a_missing_tag_and_a_digest() {
    let registry = Registry::start();
    let host = registry.host();
    push_image(&host, "team/web", "0.9", None);
    push_image(&host, "team/web", "1.0", None);
    let digest = push_image(&host, "team/worker", "2.0", None);
    let missing_digest = format!("sha256:{}", "0".repeat(64));
    let repo = fleet(
        &[
            ("apps/web.yaml", deployment("web", &format!("{host}/team/web:0.9"))),
            // Never pushed, but running already: not the merge's to check.
            ("apps/legacy.yaml", deployment("legacy", &format!("{host}/team/gone:1"))),
        ],
        &[
            ("apps/web.yaml", deployment("web", &format!("{host}/team/web:1.0"))),
            ("apps/typo.yaml", deployment("typo", &format!("{host}/team/web:1.1"))),
            ("apps/pinned.yaml", deployment("pinned", &format!("{host}/team/worker@{digest}"))),
            ("apps/ghost.yaml", deployment("ghost", &format!("{host}/team/worker:2.0@{missing_digest}"))),
            (
                "apps/nightly.yaml",
                cron_job("nightly", &format!("{host}/team/migrate:3"), &format!("{host}/team/web:1.0")),
            ),
            ("apps/legacy.yaml", deployment("legacy", &format!("{host}/team/gone:1"))),
        ],
    );
    let (plan, code) = plan_json(
        &repo,
        "HEAD~1",
        "HEAD",
        &access(std::slice::from_ref(&host)).iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let mut missing = alerts_of(&plan, "image-missing");
    missing.sort();
    assert_eq!(
        missing,
        [
            (
                "danger".to_string(),
                format!("Deployment shop/ghost containers/web: image {host}/team/worker:2.0@{missing_digest} does not exist: {host} has no manifest for team/worker@{missing_digest}")
            ),
            (
                "danger".to_string(),
                format!("CronJob shop/nightly initContainers/migrate: image {host}/team/migrate:3 does not exist: {host} has no manifest for team/migrate:3")
            ),
            (
                "danger".to_string(),
                format!("Deployment shop/typo containers/web: image {host}/team/web:1.1 does not exist: {host} has no manifest for team/web:1.1")
            ),
        ]
        .into_iter()
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect::<Vec<_>>(),
        "{plan:#}"
    );
    assert!(alerts_of(&plan, "image-unchecked").is_empty(), "{plan:#}");
    assert_eq!(code, 2, "a missing image blocks: {:?}", alert_codes(&plan));

    // Checks off: nothing asked, nothing said.
    let mut off = access(std::slice::from_ref(&host));
    off.push("--no-image-check".into());
    let (plan, code) =
        plan_json(&repo, "HEAD~1", "HEAD", &off.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(alert_codes(&plan).iter().all(|(_, c)| !c.starts_with("image-")), "{:?}", alert_codes(&plan));
    assert_eq!(code, 1);
}

/// An RSA key and a self-signed certificate for the token issuer, made by openssl.
struct Issuer {
    dir: tempfile::TempDir,
    /// The certificate, DER, as the JWT's `x5c` carries it.
    der: Vec<u8>,
}

impl Issuer {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let openssl = |args: &[&str]| {
            let output = Command::new("openssl").args(args).current_dir(dir.path()).output().unwrap_or_else(|e| {
                panic!("this test needs openssl (apt-get install openssl) for the token issuer's certificate: {e}")
            });
            assert!(output.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&output.stderr));
            output.stdout
        };
        openssl(&[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "key.pem",
            "-out",
            "cert.pem",
            "-days",
            "2",
            "-subj",
            "/CN=fluxplan-test-issuer",
        ]);
        let der = openssl(&["x509", "-in", "cert.pem", "-outform", "DER"]);
        Issuer { dir, der }
    }

    fn certificate(&self) -> std::path::PathBuf {
        self.dir.path().join("cert.pem")
    }

    /// A JWT as distribution's token authentication verifies it, granting `actions` on
    /// `repository`, signed RS256 by openssl.
    fn mint(&self, repository: &str, actions: &[&str]) -> String {
        let b64 = |bytes: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
        let header = json!({"alg": "RS256", "typ": "JWT",
            "x5c": [base64::engine::general_purpose::STANDARD.encode(&self.der)]});
        let claims = json!({"iss": ISSUER, "sub": "", "aud": SERVICE, "exp": now + 300, "nbf": now - 30,
            "iat": now, "jti": format!("{now}-{repository}"),
            "access": [{"type": "repository", "name": repository, "actions": actions}]});
        let input = format!(
            "{}.{}",
            b64(&serde_json::to_vec(&header).unwrap()),
            b64(&serde_json::to_vec(&claims).unwrap())
        );
        let mut child = Command::new("openssl")
            .args(["dgst", "-sha256", "-sign"])
            .arg(self.dir.path().join("key.pem"))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success());
        format!("{input}.{}", b64(&output.stdout))
    }
}

/// A token server on loopback: `GET /token?service=…&scope=repository:NAME:ACTIONS` answers a
/// token for that scope, to anyone (anonymous pulls). Records what it was asked.
struct TokenServer {
    port: u16,
    asked: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl TokenServer {
    fn start(issuer: std::sync::Arc<Issuer>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let asked = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = asked.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                if reader.read_line(&mut line).is_err() {
                    continue;
                }
                let mut header = String::new();
                while reader.read_line(&mut header).is_ok_and(|n| n > 2) {
                    header.clear();
                }
                let target = line.split_whitespace().nth(1).unwrap_or("").to_string();
                log.lock().unwrap().push(target.clone());
                let url = url::Url::parse(&format!("http://x{target}")).unwrap();
                let scope = url.query_pairs().find(|(k, _)| k == "scope").map(|(_, v)| v.to_string());
                let body = match scope.as_deref().and_then(|s| s.strip_prefix("repository:")) {
                    Some(rest) => {
                        let (repository, actions) = rest.rsplit_once(':').unwrap();
                        let actions: Vec<&str> = actions.split(',').collect();
                        json!({"token": issuer.mint(repository, &actions)}).to_string()
                    }
                    None => json!({"token": ""}).to_string(),
                };
                let mut stream = stream;
                let _ = stream.write_all(
                    format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    )
                    .as_bytes(),
                );
            }
        });
        TokenServer { port, asked }
    }

    fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

fn registry_with_tokens(issuer: &Issuer, tokens: &TokenServer) -> Registry {
    let registry = Registry::configured(
        "",
        &format!(
            "auth:\n  token:\n    realm: http://{}/token\n    service: {SERVICE}\n    issuer: {ISSUER}\n    rootcertbundle: {}\n",
            tokens.host(),
            issuer.certificate().display()
        ),
    );
    // It does want a token: an anonymous HEAD is challenged with its realm.
    let client = reqwest::blocking::Client::new();
    let mut answer = None;
    wait_for("the registry's challenge", WAIT, || {
        answer = client.head(format!("http://{}/v2/team/web/manifests/1.0", registry.host())).send().ok();
        answer.is_some()
    });
    let answer = answer.unwrap();
    assert_eq!(answer.status(), 401);
    let challenge = answer.headers()["www-authenticate"].to_str().unwrap().to_string();
    assert!(challenge.starts_with("Bearer realm=") && challenge.contains(&tokens.host()), "{challenge}");
    registry
}

/// A registry behind token authentication: fluxplan gets an anonymous pull token from the realm
/// the challenge names and asks again: a present tag passes, a missing tag blocks. Attack: the
/// same realm not allowed (another host:port on loopback) is never asked: the images are
/// `image-unchecked`, once for the registry, and the plan completes.
#[test]
fn a_token_requiring_registry_is_answered_with_an_anonymous_token() {
    let issuer = std::sync::Arc::new(Issuer::new());
    let tokens = TokenServer::start(issuer.clone());
    let registry = registry_with_tokens(&issuer, &tokens);
    let host = registry.host();
    let push_token = issuer.mint("team/web", &["pull", "push"]);
    push_image(&host, "team/web", "1.0", Some(&push_token));
    tokens.asked.lock().unwrap().clear();
    let repo = fleet(
        &[],
        &[
            ("apps/web.yaml", deployment("web", &format!("{host}/team/web:1.0"))),
            ("apps/typo.yaml", deployment("typo", &format!("{host}/team/web:1.1"))),
        ],
    );
    let both = access(&[host.clone(), tokens.host()]);
    let (plan, code) =
        plan_json(&repo, "HEAD~1", "HEAD", &both.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(
        alerts_of(&plan, "image-missing"),
        [(
            "danger".to_string(),
            format!("Deployment shop/typo containers/web: image {host}/team/web:1.1 does not exist: {host} has no manifest for team/web:1.1")
        )],
        "{plan:#}"
    );
    assert!(alerts_of(&plan, "image-unchecked").is_empty(), "{plan:#}");
    assert_eq!(code, 2);
    let asked = tokens.asked.lock().unwrap().clone();
    assert!(
        !asked.is_empty() && asked.iter().all(|a| a.contains("scope=repository%3Ateam%2Fweb%3Apull")),
        "{asked:?}"
    );

    // The realm on a loopback port nothing allows: refused, said once for the registry.
    tokens.asked.lock().unwrap().clear();
    let only_registry = access(std::slice::from_ref(&host));
    let (plan, code) =
        plan_json(&repo, "HEAD~1", "HEAD", &only_registry.iter().map(String::as_str).collect::<Vec<_>>());
    let unchecked = alerts_of(&plan, "image-unchecked");
    assert_eq!(unchecked.len(), 1, "{plan:#}");
    assert!(unchecked[0].0 == "warning" && unchecked[0].1.contains("loopback"), "{unchecked:?}");
    assert!(alerts_of(&plan, "image-missing").is_empty());
    assert_eq!(code, 1);
    assert!(tokens.asked.lock().unwrap().is_empty());
}

/// A pull request naming images on the metadata address, on a loopback port that is no
/// registry, and on a host nothing allows: none is asked, each host is said once, the plan
/// completes. Near miss: an image on an allowed registry is asked (and found missing).
#[test]
fn images_on_refused_hosts_are_unchecked_once_per_host() {
    let registry = Registry::start();
    let host = registry.host();
    let repo = fleet(
        &[],
        &[
            ("apps/metadata.yaml", deployment("metadata", "169.254.169.254/latest/meta-data:x")),
            ("apps/ssh.yaml", deployment("ssh", "localhost:22/x/y:z")),
            ("apps/new.yaml", deployment("new", "registry.evil.example/x:1")),
            ("apps/new2.yaml", deployment("new2", "registry.evil.example/x:2")),
            ("apps/allowed.yaml", deployment("allowed", &format!("{host}/team/web:1"))),
        ],
    );
    let (plan, code) = plan_json(
        &repo,
        "HEAD~1",
        "HEAD",
        &access(std::slice::from_ref(&host)).iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let unchecked = alerts_of(&plan, "image-unchecked");
    let hosts: Vec<&str> = ["169.254.169.254", "localhost:22", "registry.evil.example"].to_vec();
    assert_eq!(unchecked.len(), hosts.len(), "{unchecked:#?}");
    for (alert, host) in unchecked.iter().zip(&hosts) {
        assert!(alert.1.starts_with(&format!("new images on {host} were not checked")), "{alert:?}");
    }
    assert_eq!(alerts_of(&plan, "image-missing").len(), 1, "{plan:#}");
    assert_eq!(code, 2);
}

/// A release's hooks run images too: a pre-upgrade migration Job whose image the registry lacks
/// fails the upgrade, so it blocks like a Deployment's. Near misses: the hook's image present
/// passes, and a test-only hook (run only by `helm test`) is not asked.
#[test]
fn a_hooks_missing_image_blocks_and_a_test_hooks_is_not_asked() {
    let registry = Registry::start();
    let host = registry.host();
    push_image(&host, "team/web", "1.0", None);
    push_image(&host, "team/migrate", "1.0", None);
    let job = |name: &str, hook: &str, image: &str| {
        format!(
            "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {name}\n  annotations:\n    helm.sh/hook: {hook}\n\
             spec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: run\n        \
             image: {image}\n"
        )
    };
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/web.yaml", "web", "./apps/web", "");
    repo.write("apps/web/namespace.yaml", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: apps\n");
    repo.helm_release("apps/web/release.yaml", "web", "apps", "./charts/web");
    repo.write("charts/web/Chart.yaml", "apiVersion: v2\nname: web\nversion: 1.0.0\n");
    repo.write(
        "charts/web/templates/web.yaml",
        &deployment("web", &format!("{host}/team/web:1.0")).replace("  namespace: shop\n", ""),
    );
    repo.commit("base");
    repo.write(
        "charts/web/templates/migrate.yaml",
        &job("migrate", "pre-upgrade", &format!("{host}/team/migrate:1.1")),
    );
    repo.write("charts/web/templates/smoke.yaml", &job("smoke", "test", &format!("{host}/team/smoke:9")));
    repo.commit("head");
    let flags = access(std::slice::from_ref(&host));
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &flags);
    let missing = alerts_of(&plan, "image-missing");
    assert_eq!(missing.len(), 1, "{plan:#}");
    assert!(missing[0].1.starts_with("Job apps/migrate containers/run: image "), "{missing:?}");
    assert!(missing[0].1.contains("team/migrate:1.1"), "{missing:?}");
    assert!(!plan.to_string().contains("team/smoke:9 does not exist"), "a test hook was asked: {plan:#}");
    assert_eq!(code, 2, "{:?}", alert_codes(&plan));

    // The hook's image pushed: nothing missing, the plan is not blocked by images.
    push_image(&host, "team/migrate", "1.1", None);
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &flags);
    assert!(alerts_of(&plan, "image-missing").is_empty(), "{plan:#}");
}
