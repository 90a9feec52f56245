//! Charts from a registry behind a private CA that asks for client certificates (Debian's
//! `docker-registry` over TLS on loopback): read with the source's `certSecretRef`, taken from the
//! live cluster (the fake Kubernetes API) with `--read-secrets` only; the client certificate goes
//! only where the operator allows credentials; the TLS material never shows. The CA and the
//! certificates are made at test time with the `openssl` command.

use crate::fake_kube::FakeKube;
use crate::fixture::{has_alert, helm, sorted_changes, sorted_pairs, unit_in, Repo};
use crate::helm_fetch::{fleet, package, Registry};
use base64::Engine as _;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A private CA, a server certificate for 127.0.0.1 and a client certificate, made by openssl.
struct Pki {
    dir: tempfile::TempDir,
}

impl Pki {
    fn generate() -> Pki {
        let dir = tempfile::tempdir().unwrap();
        let openssl = |args: &[&str]| {
            let output =
                Command::new("openssl").args(args).current_dir(dir.path()).output().unwrap_or_else(|e| {
                    panic!("this test needs the openssl command (apt-get install openssl): {e}")
                });
            assert!(output.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&output.stderr));
        };
        let key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];
        openssl(
            &[&["req", "-x509"][..], &key, &["-keyout", "ca.key", "-out", "ca.crt", "-days", "2"]]
                .concat()
                .into_iter()
                .chain([
                    "-subj",
                    "/CN=fluxplan test CA",
                    "-addext",
                    "basicConstraints=critical,CA:TRUE",
                    "-addext",
                    "keyUsage=critical,keyCertSign,cRLSign",
                ])
                .collect::<Vec<_>>(),
        );
        for (name, usage, san) in
            [("server", "serverAuth", "\nsubjectAltName=IP:127.0.0.1"), ("client", "clientAuth", "")]
        {
            std::fs::write(
                dir.path().join(format!("{name}.ext")),
                format!("basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage={usage}{san}\n"),
            )
            .unwrap();
            let (key_file, csr, crt, ext) =
                (format!("{name}.key"), format!("{name}.csr"), format!("{name}.crt"), format!("{name}.ext"));
            openssl(
                &[&["req"][..], &key, &["-keyout", &key_file, "-out", &csr, "-subj", &format!("/CN={name}")]]
                    .concat(),
            );
            openssl(&[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                "ca.crt",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-out",
                &crt,
                "-days",
                "2",
                "-extfile",
                &ext,
            ]);
        }
        Pki { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn pem(&self, name: &str) -> String {
        std::fs::read_to_string(self.path(name)).unwrap()
    }

    /// A registry serving over TLS with the server certificate, requiring a client certificate
    /// the CA signed.
    fn registry(&self) -> Registry {
        let path = |name: &str| self.path(name).display().to_string();
        Registry::start_with(&format!(
            "  tls:\n    certificate: {}\n    key: {}\n    clientcas:\n      - {}\n",
            path("server.crt"),
            path("server.key"),
            path("ca.crt")
        ))
    }

    /// `helm push` of `archive` to `registry`, trusting the CA and presenting the client certificate.
    fn push(&self, registry: &Registry, archive: &Path) -> String {
        let path = |name: &str| self.path(name).display().to_string();
        let (ca, cert, key) = (path("ca.crt"), path("client.crt"), path("client.key"));
        registry.push_with(archive, &["--ca-file", &ca, "--cert-file", &cert, "--key-file", &key])
    }

    /// A PKI, and a registry over TLS serving the chart `db` at each (version, StatefulSet name),
    /// packaged into the directory returned.
    fn serving(charts: &[(&str, &str)]) -> (Pki, Registry, tempfile::TempDir) {
        let _ = helm(4);
        let pki = Pki::generate();
        let registry = pki.registry();
        let packages = tempfile::tempdir().unwrap();
        for (version, statefulset) in charts {
            pki.push(&registry, &package(packages.path(), version, statefulset));
        }
        (pki, registry, packages)
    }

    /// The lines of the client's private key that hold key material (never to be shown).
    fn key_material(&self) -> Vec<String> {
        self.pem("client.key").lines().filter(|l| !l.starts_with("-----")).map(str::to_string).collect()
    }
}

/// A Secret `data/NAME` holding `pairs`, as the API serves it.
pub(crate) fn secret(name: &str, pairs: &[(&str, &str)]) -> Value {
    let data: serde_json::Map<String, Value> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), json!(base64::engine::general_purpose::STANDARD.encode(v))))
        .collect();
    json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
           "metadata": {"name": name, "namespace": "data"}, "data": data})
}

/// An OCIRepository `data/db` at `url`, by `tag`, with `certSecretRef` when given.
pub(crate) fn oci_repository(url: &str, tag: &str, cert_secret: Option<&str>) -> String {
    let cert = cert_secret.map(|name| format!("  certSecretRef:\n    name: {name}\n")).unwrap_or_default();
    format!(
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: OCIRepository\nmetadata:\n  name: db\n  namespace: data\nspec:\n  \
         url: {url}\n  ref:\n    tag: {tag}\n{cert}"
    )
}

pub(crate) const CHART_REF: &str = "  chartRef:\n    kind: OCIRepository\n    name: db\n";

/// `fluxplan plan --kube` against `fake` (HEAD~1 → HEAD): the plan, and all it printed.
fn plan_live(repo: &Repo, fake: &FakeKube, extra: &[&str]) -> (Value, String) {
    let dir = tempfile::tempdir().unwrap();
    let (stdout, stderr, _) = crate::kube_view::plan_as(repo, &fake.kubeconfig(dir.path()), "json", extra);
    let printed = format!("{stdout}{stderr}");
    (serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {printed}")), printed)
}

fn assert_never_shown(printed: &str, pki: &Pki) {
    for line in pki.key_material() {
        assert!(!printed.contains(&line), "the client key shows: {printed}");
    }
    let encoded = base64::engine::general_purpose::STANDARD.encode(pki.pem("client.key"));
    assert!(!printed.contains(&encoded[..40]), "the client key shows, encoded: {printed}");
}

/// A registry behind a private CA that wants a client certificate: with the source's
/// certSecretRef read from the live cluster, the chart is fetched, the bump planned, and the
/// release is what `helm template` prints; without --read-secrets it is `external` and says what
/// to give; a source without certSecretRef fails the certificate check, said so.
#[test]
fn a_registry_behind_a_private_ca_is_read_with_the_sources_cert_secret_ref() {
    let (pki, registry, packages) = Pki::serving(&[("1.0.0", "db"), ("2.0.0", "db-v2")]);
    let url = format!("oci://{}/charts/db", registry.host());
    let repo = fleet(&oci_repository(&url, "1.0.0", Some("registry-tls")), CHART_REF);
    repo.write("apps/db/sources.yaml", &oci_repository(&url, "2.0.0", Some("registry-tls")));
    repo.commit("db 2.0.0");
    let (ca, cert, key) = (pki.pem("ca.crt"), pki.pem("client.crt"), pki.pem("client.key"));
    let fake = FakeKube::start(vec![secret(
        "registry-tls",
        &[("ca.crt", &ca), ("tls.crt", &cert), ("tls.key", &key)],
    )]);
    let host = registry.host();

    let (plan, printed) = plan_live(&repo, &fake, &["--read-secrets", "--chart-hosts", &host]);
    let release = unit_in(&plan, "HelmRelease", "data/db");
    assert_eq!(release["chart"], "db 1.0.0 → 2.0.0", "{release:#}");
    // The live cluster has no release installed yet: the head's objects are created.
    assert_eq!(sorted_changes(release), sorted_pairs(&[("create", "data_db-v2_apps_StatefulSet")]));
    assert_never_shown(&printed, &pki);
    assert!(fake.requests().iter().all(|(method, _)| method == "GET"));

    // What is rendered from the chart fetched over TLS is what Helm prints for the pushed archive
    // (`build` reads the same Secret from a snapshot).
    let snapshot = tempfile::NamedTempFile::new().unwrap();
    let secret_yaml = serde_json::to_string(&secret(
        "registry-tls",
        &[("ca.crt", &ca), ("tls.crt", &cert), ("tls.key", &key)],
    ))
    .unwrap();
    std::fs::write(
        snapshot.path(),
        format!("{{\"kind\": \"ClusterSnapshot\", \"secrets\": [{secret_yaml}]}}"),
    )
    .unwrap();
    crate::helm_plan::built_as_helm_prints(
        &repo,
        &["--chart-hosts", &host, "--cluster-snapshot", snapshot.path().to_str().unwrap()],
        &packages.path().join("db-2.0.0.tgz"),
        "replicas: 2\n",
        ("db", "data"),
    );

    // Without --read-secrets: not read, not fetched, and the reason says what to give.
    let asked_before = fake.requests().len();
    let (plan, _) = plan_live(&repo, &fake, &["--chart-hosts", &host]);
    let release = unit_in(&plan, "HelmRelease", "data/db");
    assert_eq!(release["status"], "external", "{release:#}");
    let notes = release["notes"].to_string();
    for expected in
        ["Secret data/registry-tls (spec.certSecretRef)", "--read-secrets", "--chart data/db=DIR|TGZ"]
    {
        assert!(notes.contains(expected), "{expected}: {notes}");
    }
    let asked = fake.requests().split_off(asked_before);
    assert!(
        !asked.iter().any(|(_, path)| path.contains("/secrets")),
        "a Secret read without --read-secrets: {asked:?}"
    );

    // The same source without its certSecretRef: the private CA is not trusted, said so.
    repo.write("apps/db/sources.yaml", &oci_repository(&url, "2.0.0", None));
    repo.commit("no certSecretRef");
    let (plan, _) = plan_live(&repo, &fake, &["--read-secrets", "--chart-hosts", &host]);
    let release = unit_in(&plan, "HelmRelease", "data/db");
    assert_eq!(release["status"], "external", "{release:#}");
    assert!(has_alert(&plan, "warning", "chart-unavailable"), "{plan:#}");
    let notes = release["notes"].to_string();
    assert!(notes.contains("certificate") && notes.contains("UnknownIssuer"), "{notes}");
}

/// A pull request points a source that carries a certSecretRef at a host the base revision uses
/// but the operator does not name for credentials: nothing is sent there. A Secret whose PEM is
/// not PEM fails the release with a message that names the key, not its content.
#[test]
fn a_sources_client_certificate_goes_only_where_the_operator_allows_credentials() {
    let (pki, registry, _packages) = Pki::serving(&[("1.0.0", "db")]);
    let host = registry.host();
    let url = format!("oci://{host}/charts/db");
    // The base also uses a public Helm repository: its host is one fluxplan may fetch from.
    let public =
        "---\napiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\nmetadata:\n  name: public\n  \
                  namespace: data\nspec:\n  url: https://charts.example.com/stable\n";
    let repo = fleet(&format!("{}{public}", oci_repository(&url, "1.0.0", Some("registry-tls"))), CHART_REF);
    repo.write(
        "apps/db/sources.yaml",
        &format!(
            "{}{public}",
            oci_repository("oci://charts.example.com/charts/db", "1.0.0", Some("registry-tls"))
        ),
    );
    repo.commit("the source elsewhere");
    let (ca, cert, key) = (pki.pem("ca.crt"), pki.pem("client.crt"), pki.pem("client.key"));
    let fake = FakeKube::start(vec![
        secret("registry-tls", &[("ca.crt", &ca), ("tls.crt", &cert), ("tls.key", &key)]),
        secret("broken-tls", &[("tls.crt", &cert), ("tls.key", "hunter2-not-a-key")]),
    ]);
    let (plan, printed) = plan_live(&repo, &fake, &["--read-secrets", "--chart-hosts", &host]);
    let release = unit_in(&plan, "HelmRelease", "data/db");
    assert_eq!(release["status"], "external", "{release:#}");
    assert!(has_alert(&plan, "warning", "chart-unavailable"), "{plan:#}");
    let notes = release["notes"].to_string();
    assert!(
        notes.contains("credentials are sent only to hosts the operator names: charts.example.com"),
        "{notes}"
    );
    assert_never_shown(&printed, &pki);

    // A Secret whose key is not PEM: a clear failure, no crash, nothing of it quoted.
    repo.write("apps/db/sources.yaml", &oci_repository(&url, "1.0.0", Some("broken-tls")));
    repo.commit("a broken Secret");
    let (plan, printed) = plan_live(&repo, &fake, &["--read-secrets", "--chart-hosts", &host]);
    let release = unit_in(&plan, "HelmRelease", "data/db");
    assert_eq!(release["status"], "failed", "{release:#}");
    assert!(printed.contains("tls.key holds no PEM private key"), "{printed}");
    assert!(!printed.contains("hunter2"), "{printed}");
    assert_never_shown(&printed, &pki);
}
