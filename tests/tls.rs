//! TLS on the gRPC port: certificates from `[tls]`, required client certificates with
//! `client_ca_file`, and certificates reloaded (file changes, SIGHUP) without a restart.

mod common;

use std::{
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use frontdesk_api::v1::{workflow_service_client::WorkflowServiceClient, ListWorkflowsRequest};
use frontdesk_llm::ScriptedModel;
use frontdesk_server::{
    app::{App, Overrides, RunningServer, StartError},
    config::{Config, TlsConfig},
    workflows::Parts,
};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};

/// A certificate authority that signs server and client certificates.
struct Ca {
    pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl Ca {
    fn new(name: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        Ca { pem: cert.pem(), issuer: Issuer::new(params, key) }
    }

    /// A leaf certificate and its key, as PEM.
    fn sign(&self, names: &[&str]) -> (String, String) {
        let params = CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    fn server_cert(&self) -> (String, String) {
        self.sign(&["localhost", "127.0.0.1"])
    }

    fn certificate(&self) -> Certificate {
        Certificate::from_pem(&self.pem)
    }
}

/// Writes a server certificate and key as the server's `cert.pem` and `key.pem`, each through a
/// rename so that a file check never sees half a file.
fn install(dir: &Path, (cert, key): &(String, String)) {
    for (name, pem) in [("cert.pem", cert), ("key.pem", key)] {
        let tmp = dir.join(format!("{name}.tmp"));
        std::fs::write(&tmp, pem).unwrap();
        std::fs::rename(&tmp, dir.join(name)).unwrap();
    }
}

fn tls_config(dir: &Path, client_ca: Option<PathBuf>, reload_check_secs: u64) -> TlsConfig {
    TlsConfig {
        cert_file: Some(dir.join("cert.pem")),
        key_file: Some(dir.join("key.pem")),
        client_ca_file: client_ca,
        reload_check_secs,
    }
}

/// A server on 127.0.0.1:0 in this process with `tls` and a scripted model.
async fn start(tls: TlsConfig) -> (Result<RunningServer, StartError>, common::TestStore) {
    let store = common::test_store().await;
    let mut config = Config::default();
    config.database.url = store.url.clone();
    config.shutdown_grace_secs = 5;
    config.tls = tls;
    let overrides = Overrides { model: Some(Arc::new(ScriptedModel::new("scripted-tls"))), parts: Parts::default() };
    // Certificates are read when the app is built, before the database is opened.
    let app = match App::build(config, overrides).await {
        Ok(app) => app,
        Err(error) => return (Err(error), store),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    (app.serve_on(listener).await, store)
}

/// A client trusting `ca`, presenting `identity` if given, verifying the name `localhost`.
fn tls_client(ca: &Ca, identity: Option<&(String, String)>) -> ClientTlsConfig {
    let mut tls = ClientTlsConfig::new().ca_certificate(ca.certificate()).domain_name("localhost");
    if let Some((cert, key)) = identity {
        tls = tls.identity(Identity::from_pem(cert, key));
    }
    tls
}

type Error = Box<dyn std::error::Error + Send + Sync>;

/// Connects (a new connection every time) and calls `WorkflowService/ListWorkflows`.
async fn list_workflows(addr: &str, tls: Option<ClientTlsConfig>) -> Result<usize, Error> {
    let call = async {
        let mut endpoint = Endpoint::from_shared(match tls {
            Some(_) => format!("https://{addr}"),
            None => format!("http://{addr}"),
        })?
        .connect_timeout(Duration::from_secs(5));
        if let Some(tls) = tls {
            endpoint = endpoint.tls_config(tls)?;
        }
        let channel = endpoint.connect().await?;
        let reply = WorkflowServiceClient::new(channel).list_workflows(ListWorkflowsRequest {}).await?;
        Ok::<_, Error>(reply.into_inner().workflows.len())
    };
    tokio::time::timeout(Duration::from_secs(15), call).await.map_err(|_| "call timed out")?
}

/// The error of a call expected to fail, with its causes (rustls' reason among them).
async fn refused(addr: &str, tls: Option<ClientTlsConfig>) -> String {
    match list_workflows(addr, tls).await {
        Ok(_) => panic!("the call succeeded"),
        Err(err) => {
            eprintln!("refused: {err:?}");
            format!("{err:?}")
        }
    }
}

/// Retries `list_workflows` until it succeeds (a reload has taken effect) or `within` passes.
async fn connects_within(addr: &str, tls: impl Fn() -> ClientTlsConfig, within: Duration) -> Result<usize, Error> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match list_workflows(addr, Some(tls())).await {
            Ok(n) => return Ok(n),
            Err(err) if tokio::time::Instant::now() >= deadline => return Err(err),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

#[tokio::test]
async fn tls_serves_calls_and_refuses_plaintext() {
    let certs = tempfile::tempdir().unwrap();
    let ca = Ca::new("frontdesk test ca");
    install(certs.path(), &ca.server_cert());
    let (server, _dir) = start(tls_config(certs.path(), None, 0)).await;
    let server = server.expect("server starts with tls");
    let addr = server.addr.to_string();

    // A connection that never starts its handshake holds only its own task, not the accept loop.
    let _stalled = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let workflows = list_workflows(&addr, Some(tls_client(&ca, None))).await.expect("a client trusting the CA calls");
    assert!(workflows > 0);
    // The server reads the HTTP/2 preface as a malformed TLS record and closes the connection.
    refused(&addr, None).await;
    let other = Ca::new("another ca");
    let err = refused(&addr, Some(tls_client(&other, None))).await;
    assert!(err.contains("UnknownIssuer"), "a client trusting another CA rejects the server: {err}");

    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn client_certificates_are_required_with_a_client_ca() {
    let certs = tempfile::tempdir().unwrap();
    let server_ca = Ca::new("server ca");
    let client_ca = Ca::new("client ca");
    install(certs.path(), &server_ca.server_cert());
    let client_ca_file = certs.path().join("client-ca.pem");
    std::fs::write(&client_ca_file, &client_ca.pem).unwrap();
    let (server, _dir) = start(tls_config(certs.path(), Some(client_ca_file), 0)).await;
    let server = server.expect("server starts with mtls");
    let addr = server.addr.to_string();

    let err = refused(&addr, Some(tls_client(&server_ca, None))).await;
    assert!(err.contains("CertificateRequired"), "a client without a certificate is refused: {err}");
    let signed = client_ca.sign(&["client-a"]);
    list_workflows(&addr, Some(tls_client(&server_ca, Some(&signed))))
        .await
        .expect("a CA-signed client cert is accepted");
    let stranger = Ca::new("stranger ca").sign(&["client-b"]);
    let err = refused(&addr, Some(tls_client(&server_ca, Some(&stranger)))).await;
    assert!(err.contains("UnknownCA"), "a client certificate another CA signed is refused: {err}");

    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn unusable_files_stop_start_up_naming_the_file() {
    let certs = tempfile::tempdir().unwrap();
    let ca = Ca::new("ca");
    install(certs.path(), &ca.server_cert());
    std::fs::write(certs.path().join("key.pem"), "not a key").unwrap();
    let (server, _dir) = start(tls_config(certs.path(), None, 0)).await;
    let err = server.err().expect("start-up fails");
    let mut message = err.to_string();
    let mut source = std::error::Error::source(&err);
    while let Some(cause) = source {
        message.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    let key = certs.path().join("key.pem");
    assert!(matches!(err, StartError::Tls(_)), "{message}");
    assert!(message.contains("tls.key_file") && message.contains(&key.display().to_string()), "{message}");

    let missing = TlsConfig { cert_file: Some(certs.path().join("nowhere.pem")), ..tls_config(certs.path(), None, 0) };
    let (server, _dir) = start(missing).await;
    let err = server.err().expect("start-up fails");
    assert!(format!("{err:?}").contains("nowhere.pem"), "{err:?}");
}

/// File changes reload the certificates for new connections; a bad file keeps the old ones, and
/// established connections carry on throughout.
#[tokio::test]
async fn changed_files_reload_for_new_connections() {
    let certs = tempfile::tempdir().unwrap();
    let first = Ca::new("first ca");
    let second = Ca::new("second ca");
    install(certs.path(), &first.server_cert());
    let (server, _dir) = start(tls_config(certs.path(), None, 1)).await;
    let server = server.expect("server starts with tls");
    let addr = server.addr.to_string();

    let channel = Endpoint::from_shared(format!("https://{addr}"))
        .unwrap()
        .tls_config(tls_client(&first, None))
        .unwrap()
        .connect()
        .await
        .expect("a client trusting the first CA connects");
    let mut established = WorkflowServiceClient::new(channel);
    established.list_workflows(ListWorkflowsRequest {}).await.unwrap();

    // A certificate file that does not parse: the check (every second) tries it, keeps the old
    // configuration and logs the error.
    std::fs::write(certs.path().join("cert.pem"), "-----BEGIN CERTIFICATE-----\nnot base64!\n").unwrap();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    list_workflows(&addr, Some(tls_client(&first, None))).await.expect("the old certificate is still served");

    install(certs.path(), &second.server_cert());
    connects_within(&addr, || tls_client(&second, None), Duration::from_secs(10))
        .await
        .expect("a client trusting only the second CA connects after the reload");
    let err = refused(&addr, Some(tls_client(&first, None))).await;
    assert!(err.contains("UnknownIssuer"), "a new client trusting only the first CA fails: {err}");
    established.list_workflows(ListWorkflowsRequest {}).await.expect("the established connection carries on");

    server.shutdown().await.unwrap();
}

/// The real binary: `[tls]` from `FRONTDESK__TLS__*` variables, reloaded on `kill -HUP`.
#[tokio::test]
async fn sighup_reloads_the_binary() {
    let dir = tempfile::tempdir().unwrap();
    let first = Ca::new("first ca");
    let second = Ca::new("second ca");
    install(dir.path(), &first.server_cert());
    let cert = dir.path().join("cert.pem").display().to_string();
    let key = dir.path().join("key.pem").display().to_string();
    let db = dir.path().join("frontdesk.db");
    let script = serde_json::json!({"model": "scripted-tls", "replies": []});
    let server = common::process::spawn_replica(
        &db,
        &script,
        dir.path(),
        "tls",
        "tls-replica",
        &[("FRONTDESK__TLS__CERT_FILE", cert.as_str()), ("FRONTDESK__TLS__KEY_FILE", key.as_str())],
    );

    list_workflows(&server.addr, Some(tls_client(&first, None))).await.expect("a client trusting the first CA calls");
    install(dir.path(), &second.server_cert());
    // No file check is configured: the old certificate is served until the signal.
    list_workflows(&server.addr, Some(tls_client(&first, None))).await.expect("nothing reloads before SIGHUP");

    let status = std::process::Command::new("kill").arg("-HUP").arg(server.pid().to_string()).status().unwrap();
    assert!(status.success());
    connects_within(&server.addr, || tls_client(&second, None), Duration::from_secs(10))
        .await
        .expect("a client trusting only the second CA connects after SIGHUP");
    let err = refused(&server.addr, Some(tls_client(&first, None))).await;
    assert!(err.contains("UnknownIssuer"), "a new client trusting only the first CA fails: {err}");
    server.terminate();
}
