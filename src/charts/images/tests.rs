use super::*;
use crate::charts::failed_hosts::FailedHosts;
use crate::charts::hosts::HostPolicy;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;

fn parsed(text: &str) -> String {
    ImageRef::parse(text)
        .map(|r| format!("{} {} {}", r.registry, r.repository, r.reference()))
        .unwrap_or_else(|e| e)
}

#[test]
fn references_are_normalised_as_the_container_runtime_does() {
    assert_eq!(parsed("nginx"), "docker.io library/nginx latest");
    assert_eq!(parsed("nginx:1.27"), "docker.io library/nginx 1.27");
    assert_eq!(parsed("docker.io/nginx"), "docker.io library/nginx latest");
    assert_eq!(parsed("index.docker.io/library/nginx:1"), "docker.io library/nginx 1");
    assert_eq!(parsed("index.docker.io/nginx:1"), "docker.io library/nginx 1");
    // Only the legacy name is Docker Hub to the runtime: these are asked where they point, as
    // written (distribution's normalize.go), so a reference the runtime cannot pull is not
    // taken for `library/nginx`.
    assert_eq!(parsed("registry-1.docker.io/nginx:1"), "registry-1.docker.io nginx 1");
    assert_eq!(parsed("registry.hub.docker.com/nginx:1"), "registry.hub.docker.com nginx 1");
    assert_eq!(parsed("bitnami/redis:7"), "docker.io bitnami/redis 7");
    assert_eq!(parsed("ghcr.io/acme/web:v1"), "ghcr.io acme/web v1");
    assert_eq!(parsed("localhost/web"), "localhost web latest");
    assert_eq!(parsed("registry.internal:5000/team/app/web:1.0"), "registry.internal:5000 team/app/web 1.0");
    let digest = format!("sha256:{}", "a".repeat(64));
    // A digest is what is pulled, a tag beside it notwithstanding.
    assert_eq!(parsed(&format!("ghcr.io/acme/web:v1@{digest}")), format!("ghcr.io acme/web {digest}"));
    assert_eq!(parsed(&format!("nginx@{digest}")), format!("docker.io library/nginx {digest}"));
    // go-digest's third algorithm: the runtime pulls it.
    let sha384 = format!("sha384:{}", "b".repeat(96));
    assert_eq!(parsed(&format!("nginx@{sha384}")), format!("docker.io library/nginx {sha384}"));
    assert_eq!(ImageRef::parse("nginx").unwrap().api_host(), "registry-1.docker.io");
    assert_eq!(ImageRef::parse("nginx:1").unwrap().to_string(), "docker.io/library/nginx:1");
    // Not references: upper case, spaces, a bad digest, path tricks.
    for bad in [
        "Nginx",
        "ghcr.io/Acme/web",
        "nginx:1 2",
        "nginx@sha256:abc",
        "ghcr.io/acme/../web",
        "ghcr.io/acme//web",
        "ghcr.io/acme/%2e%2e/web",
        "",
        " nginx",
        "ghcr.io:99999/x",
    ] {
        assert!(ImageRef::parse(bad).is_err(), "{bad:?}");
    }
}

/// A scripted HTTP server on loopback: `answer` gets the request line and headers and writes
/// the answer (or holds the connection). Records every request line.
struct Scripted {
    port: u16,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Scripted {
    fn start(answer: impl Fn(&str, &[String]) -> Option<String> + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let answer = Arc::new(answer);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let answer = answer.clone();
                let log = log.clone();
                std::thread::spawn(move || {
                    let mut reader = BufReader::new(stream.try_clone().unwrap());
                    let mut line = String::new();
                    if reader.read_line(&mut line).is_err() {
                        return;
                    }
                    let mut headers = Vec::new();
                    let mut header = String::new();
                    while reader.read_line(&mut header).is_ok_and(|n| n > 2) {
                        headers.push(header.trim().to_string());
                        header.clear();
                    }
                    log.lock().unwrap().push(line.trim().to_string());
                    match answer(line.trim(), &headers) {
                        Some(response) => {
                            let mut stream = stream;
                            let _ = stream.write_all(response.as_bytes());
                        }
                        // Hold the connection, answer nothing.
                        None => std::thread::sleep(Duration::from_secs(30)),
                    }
                });
            }
        });
        Scripted { port, seen }
    }

    fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

/// The headers of a registry's answer for a manifest (distribution's, as Debian's
/// docker-registry sends them).
const MANIFEST: &str = "Content-Type: application/vnd.oci.image.manifest.v1+json\r\n\
     Docker-Content-Digest: sha256:0000000000000000000000000000000000000000000000000000000000000000\r\n";

fn status(code: &str, headers: &str, body: &str) -> Option<String> {
    Some(format!(
        "HTTP/1.1 {code}\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    ))
}

/// Access allowing exactly `allowed` (host:port), over plain HTTP, with a short timeout.
fn access(known: &[&str], allowed: &[String]) -> Access {
    Access {
        hosts: HostPolicy::new(known.iter().copied(), allowed.iter().map(String::as_str), []).unwrap(),
        insecure: allowed.iter().cloned().collect(),
        timeout: Some(Duration::from_millis(800)),
        failed_hosts: FailedHosts::for_plan(),
    }
}

fn outcome(access: Access, image: &str) -> Outcome {
    let image = ImageRef::parse(image).unwrap();
    check(access, &Cache::default(), std::slice::from_ref(&image)).remove(&image).unwrap()
}

fn unchecked_because(outcome: Outcome) -> String {
    match outcome {
        Outcome::Unchecked { why } => why,
        other => panic!("checked: {other:?}"),
    }
}

/// Attack: a pull request names images on the cloud metadata address, on a loopback port that
/// is not a registry, on a host nothing allows. None is asked. Near miss: the same loopback
/// registry allowed exactly is asked, and says which tag it lacks.
#[test]
fn images_on_hosts_the_policy_refuses_are_not_asked() {
    let registry = Scripted::start(|line, _| {
        if line.starts_with("HEAD /v2/team/web/manifests/1.0 ") {
            status("200 OK", MANIFEST, "")
        } else {
            status("404 Not Found", "", "")
        }
    });
    let allowed = [registry.host()];
    let refused = |image: &str| unchecked_because(outcome(access(&[], &allowed), image));
    assert!(refused("169.254.169.254/latest/meta-data:x").contains("not used by the base"), "metadata");
    assert!(refused("localhost:22/x/y:z").contains("not used by the base"), "ssh port");
    assert!(refused("evil.example/x:y").contains("not used by the base"), "a new host");
    // Known from the base, yet on loopback: the address is refused.
    let known = access(&["oci://localhost:22"], &allowed);
    assert!(unchecked_because(outcome(known, "localhost:22/x/y:z")).contains("loopback"));
    assert!(registry.seen.lock().unwrap().is_empty(), "asked: {:?}", registry.seen.lock().unwrap());
    // Near misses.
    assert_eq!(
        outcome(access(&[], &allowed), &format!("{}/team/web:1.0", registry.host())),
        Outcome::Present
    );
    assert_eq!(
        outcome(access(&[], &allowed), &format!("{}/team/web:1.1", registry.host())),
        Outcome::Missing
    );
    let seen = registry.seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        ["HEAD /v2/team/web/manifests/1.0 HTTP/1.1", "HEAD /v2/team/web/manifests/1.1 HTTP/1.1"]
    );
}

/// Attack: an allowed registry redirects the HEAD to another host (a loopback port nothing
/// allows) with the token it was given. The redirect is refused there; nothing reaches the other
/// host. Near miss: a redirect on the registry itself is followed.
#[test]
fn a_redirect_to_another_host_is_refused_and_carries_no_credential() {
    let elsewhere = Scripted::start(|_, _| status("200 OK", "", ""));
    let target = format!("http://{}/stolen", elsewhere.host());
    let registry = Scripted::start(move |line, _| {
        if line.contains("/manifests/away") {
            status("307 Temporary Redirect", &format!("Location: {target}\r\n"), "")
        } else if line.contains("/manifests/here") {
            status("307 Temporary Redirect", "Location: /v2/team/web/manifests/1.0\r\n", "")
        } else {
            status("200 OK", MANIFEST, "")
        }
    });
    let allowed = [registry.host()];
    let why =
        unchecked_because(outcome(access(&[], &allowed), &format!("{}/team/web:away", registry.host())));
    assert!(why.contains("loopback"), "{why}");
    assert!(elsewhere.seen.lock().unwrap().is_empty());
    assert_eq!(
        outcome(access(&[], &allowed), &format!("{}/team/web:here", registry.host())),
        Outcome::Present
    );
}

/// Attack: a registry's token realm on another host that nothing allows (the registry's choice,
/// followed as a redirect is: its address must pass the policy). Near miss: the realm on an
/// allowed host:port is asked, anonymously, and its token presented to the registry alone.
#[test]
fn a_token_realm_is_followed_only_where_the_address_policy_allows() {
    let tokens = Scripted::start(|line, headers| {
        assert!(!headers.iter().any(|h| h.to_ascii_lowercase().starts_with("authorization")), "{headers:?}");
        if line.contains("scope=repository%3Ateam%2Fweb%3Apull") && line.contains("service=test") {
            status("200 OK", "", r#"{"token":"t0k3n"}"#)
        } else {
            status("400 Bad Request", "", "")
        }
    });
    let realm = format!("http://{}/token", tokens.host());
    let registry = Scripted::start(move |_, headers| {
        if headers.iter().any(|h| h == "authorization: Bearer t0k3n" || h == "Authorization: Bearer t0k3n") {
            status("200 OK", MANIFEST, "")
        } else {
            status(
                "401 Unauthorized",
                &format!(
                    "WWW-Authenticate: Bearer realm=\"{realm}\",service=\"test\",scope=\"repository:team/web:pull\"\r\n"
                ),
                "",
            )
        }
    });
    let image = format!("{}/team/web:1.0", registry.host());
    let why = unchecked_because(outcome(access(&[], &[registry.host()]), &image));
    assert!(why.contains("loopback"), "{why}");
    assert!(tokens.seen.lock().unwrap().is_empty());
    assert_eq!(outcome(access(&[], &[registry.host(), tokens.host()]), &image), Outcome::Present);
    assert_eq!(tokens.seen.lock().unwrap().len(), 1);
}

/// Attack: a registry that never answers, and a token realm that answers without end. Each
/// image is left unchecked in bounded time; the check returns. Near miss: a registry that answers
/// slowly but within the time is heard.
#[test]
fn a_hanging_registry_or_a_huge_token_leaves_the_image_unchecked() {
    let hanging = Scripted::start(|_, _| None);
    let why =
        unchecked_because(outcome(access(&[], &[hanging.host()]), &format!("{}/a/b:1", hanging.host())));
    assert!(why.contains("timed out") || why.contains("operation"), "{why}");
    // Many images on it: once it has timed out, the rest are not asked.
    let many: Vec<ImageRef> =
        (0..40).map(|i| ImageRef::parse(&format!("{}/a/b:{i}", hanging.host())).unwrap()).collect();
    let asked_before = hanging.seen.lock().unwrap().len();
    let outcomes = check(access(&[], &[hanging.host()]), &Cache::default(), &many);
    assert!(outcomes.values().all(|o| matches!(o, Outcome::Unchecked { .. })));
    let asked = hanging.seen.lock().unwrap().len() - asked_before;
    assert!(asked <= PARALLEL, "{asked} requests to a registry that hangs");
    // The same host spelt another way (the case of its name, a port) is the same host.
    assert_eq!(slow_key(&ImageRef::parse("GHCR.io:81/a/b:1").unwrap()), "ghcr.io");
    assert_eq!(slow_key(&ImageRef::parse("[::1]:5000/a/b:1").unwrap()), "[::1]");
    assert_eq!(slow_key(&ImageRef::parse("nginx").unwrap()), "registry-1.docker.io");
    let huge = Scripted::start(|_, _| status("200 OK", "", &"x".repeat(MAX_TOKEN_BYTES as usize + 10)));
    let realm = format!("http://{}/token", huge.host());
    let registry = Scripted::start(move |_, _| {
        status(
            "401 Unauthorized",
            &format!("WWW-Authenticate: Bearer realm=\"{realm}\",service=\"s\"\r\n"),
            "",
        )
    });
    let why = unchecked_because(outcome(
        access(&[], &[registry.host(), huge.host()]),
        &format!("{}/a/b:1", registry.host()),
    ));
    assert!(why.contains("larger than"), "{why}");
    let slow = Scripted::start(|_, _| {
        std::thread::sleep(Duration::from_millis(100));
        status("200 OK", MANIFEST, "")
    });
    assert_eq!(outcome(access(&[], &[slow.host()]), &format!("{}/a/b:1", slow.host())), Outcome::Present);
}

/// Attack: a pull request's plan is superseded or runs out of its time while its images are
/// asked: nothing more is asked. Near miss: the same check, not cancelled, asks.
#[test]
fn a_cancelled_plan_asks_no_more_registries() {
    let registry = Scripted::start(|_, _| status("404 Not Found", "", ""));
    let many: Vec<ImageRef> =
        (0..20).map(|i| ImageRef::parse(&format!("{}/a/b:{i}", registry.host())).unwrap()).collect();
    let cancel = crate::cancel::CancelToken::new();
    cancel.cancel(crate::cancel::CancelReason::Superseded);
    let outcomes = check_until(access(&[], &[registry.host()]), &Cache::default(), &many, &cancel);
    assert!(outcomes.values().all(|o| matches!(o, Outcome::Unchecked { why } if why.contains("superseded"))));
    assert!(registry.seen.lock().unwrap().is_empty());
    let outcomes = check(access(&[], &[registry.host()]), &Cache::default(), &many);
    assert!(outcomes.values().all(|o| *o == Outcome::Missing));
}

#[test]
fn digests_are_remembered_for_good_and_tags_for_a_while() {
    let now = Arc::new(Mutex::new(Instant::now()));
    let clock = now.clone();
    let cache = Cache::new(Some(Duration::from_secs(300)), Arc::new(move || *clock.lock().unwrap()));
    let tag = ImageRef::parse("ghcr.io/a/b:1").unwrap();
    let digest = ImageRef::parse(&format!("ghcr.io/a/b@sha256:{}", "0".repeat(64))).unwrap();
    let pushed_later = ImageRef::parse(&format!("ghcr.io/a/b@sha256:{}", "1".repeat(64))).unwrap();
    cache.put(&tag, &Outcome::Present);
    cache.put(&digest, &Outcome::Present);
    cache.put(&pushed_later, &Outcome::Missing);
    cache.put(&ImageRef::parse("ghcr.io/a/c:1").unwrap(), &Outcome::Unchecked { why: "down".into() });
    assert_eq!(cache.get(&tag), Some(Outcome::Present));
    assert_eq!(cache.get(&pushed_later), Some(Outcome::Missing));
    assert_eq!(cache.get(&ImageRef::parse("ghcr.io/a/c:1").unwrap()), None);
    *now.lock().unwrap() += Duration::from_secs(301);
    assert_eq!(cache.get(&tag), None);
    assert_eq!(cache.get(&digest), Some(Outcome::Present));
    // A digest CI had not pushed yet when it was first asked: asked again, not missing for good.
    assert_eq!(cache.get(&pushed_later), None);
}

/// Attack: in `serve`, one repository's plan may ask a registry (its base pulls from it, or it
/// is allowed) and its answers are kept; another repository's pull request names images there
/// to learn from the cache which exist (or hides a missing one behind a host it may not ask).
/// The host policy is applied before the cache. Near miss: a host this plan may ask is answered
/// from the cache, without a request.
#[test]
fn a_cached_answer_is_no_answer_for_a_host_the_policy_refuses() {
    let cache = Cache::new(Some(Duration::from_secs(300)), Arc::new(Instant::now));
    let secret = ImageRef::parse("registry.corp.example/product/unreleased:2.0").unwrap();
    let missing = ImageRef::parse("registry.corp.example/product/web:typo").unwrap();
    cache.put(&secret, &Outcome::Present);
    cache.put(&missing, &Outcome::Missing);
    let outcomes = check(access(&[], &[]), &cache, &[secret.clone(), missing.clone()]);
    for image in [&secret, &missing] {
        assert!(unchecked_because(outcomes[image].clone()).contains("not used by the base"), "{image}");
    }
    let known =
        check(access(&["oci://registry.corp.example"], &[]), &cache, &[secret.clone(), missing.clone()]);
    assert_eq!(known[&secret], Outcome::Present);
    assert_eq!(known[&missing], Outcome::Missing);
}

/// Attack: a host the plan may ask answers `200` for every path (a login page an
/// authenticating proxy redirects to, a web server's catch-all), or answers a digest with
/// another digest: no image is taken as present for it. Near miss: a registry's answer (a
/// manifest type, or a Docker-Content-Digest) is.
#[test]
fn a_success_that_is_no_manifest_is_not_taken_for_an_image() {
    let asked = format!("sha256:{}", "0".repeat(64));
    let other = format!("sha256:{}", "1".repeat(64));
    let registry = Scripted::start(|line, _| {
        if line.contains("/manifests/login") {
            status("302 Found", "Location: /sso/login?next=/v2\r\n", "")
        } else if line.contains("/sso/login") {
            status("200 OK", "Content-Type: text/html; charset=utf-8\r\n", "<html>sign in</html>")
        } else if line.contains("/manifests/typed") {
            status(
                "200 OK",
                "Content-Type: application/vnd.docker.distribution.manifest.list.v2+json\r\n",
                "",
            )
        } else if line.contains("/manifests/sha256:") || line.contains("/manifests/1.0") {
            status("200 OK", MANIFEST, "")
        } else {
            status("200 OK", "", "")
        }
    });
    let allowed = [registry.host()];
    let host = registry.host();
    let why = unchecked_because(outcome(access(&[], &allowed), &format!("{host}/team/web:login")));
    assert!(why.contains("no image manifest"), "{why}");
    let why = unchecked_because(outcome(access(&[], &allowed), &format!("{host}/team/web:anything")));
    assert!(why.contains("no image manifest"), "{why}");
    // MANIFEST carries the digest `asked`: asked for `other`, it answers another image.
    let why = unchecked_because(outcome(access(&[], &allowed), &format!("{host}/team/web@{other}")));
    assert!(why.contains("not the one asked"), "{why}");
    // Near misses.
    assert_eq!(outcome(access(&[], &allowed), &format!("{host}/team/web@{asked}")), Outcome::Present);
    assert_eq!(outcome(access(&[], &allowed), &format!("{host}/team/web:1.0")), Outcome::Present);
    assert_eq!(outcome(access(&[], &allowed), &format!("{host}/team/web:typed")), Outcome::Present);
}

/// Attack: a pull request renders thousands of new references (one tag each) on a registry the
/// base uses: at most `MAX_ASKED` are asked, the rest are unchecked and said so. Near miss:
/// `MAX_ASKED` references are all asked.
#[test]
fn a_pull_request_with_thousands_of_images_asks_a_bounded_number() {
    let registry = Scripted::start(|_, _| status("404 Not Found", "", ""));
    let allowed = [registry.host()];
    let many: Vec<ImageRef> = (0..MAX_ASKED + 100)
        .map(|i| ImageRef::parse(&format!("{}/a/b:{i}", registry.host())).unwrap())
        .collect();
    let outcomes = check(access(&[], &allowed), &Cache::default(), &many[..MAX_ASKED]);
    assert!(outcomes.values().all(|o| *o == Outcome::Missing));
    assert_eq!(registry.seen.lock().unwrap().len(), MAX_ASKED);
    registry.seen.lock().unwrap().clear();
    let outcomes = check(access(&[], &allowed), &Cache::default(), &many);
    assert_eq!(registry.seen.lock().unwrap().len(), MAX_ASKED);
    let unchecked: Vec<_> = outcomes
        .values()
        .filter_map(|o| if let Outcome::Unchecked { why } = o { Some(why) } else { None })
        .collect();
    assert_eq!(unchecked.len(), 100);
    assert!(unchecked[0].contains(&format!("more than {MAX_ASKED}")), "{}", unchecked[0]);
}

#[test]
fn checks_off_ask_nothing() {
    let settings = Settings { no_image_check: true, ..Default::default() };
    assert!(access(&[], &[]).hosts.check("oci://x.example/a").is_err());
    assert!(super::access(&settings, &["ghcr.io".into()]).unwrap_err().contains("--no-image-check"));
    let offline = Settings { offline: true, ..Default::default() };
    assert!(super::access(&offline, &["ghcr.io".into()]).unwrap_err().contains("--no-chart-fetch"));
    // Docker Hub's name known from the base allows its API host.
    let hub = super::access(&Settings::default(), &["docker.io".into()]).unwrap();
    assert!(hub.hosts.check("oci://registry-1.docker.io/library/nginx").is_ok());
}
