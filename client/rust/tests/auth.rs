//! API keys and TLS: the client and the `frontdesk` CLI against an in-process WorkflowService
//! that checks `authorization` as the server's auth layer does, over plaintext and over mutual
//! TLS (the certificates of client/testdata/tls).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::pin::Pin;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use frontdesk_client::{
    v1, Certificate, Client, ClientError, ClientTlsConfig, Credentials, Identity, QUOTA_EXCEEDED, SCOPE_MISSING,
    UNAUTHENTICATED,
};
use futures::{Stream, StreamExt};
use tonic::transport::{Server, ServerTlsConfig};
use tonic::{Code, Request, Response, Status};
use tonic_types::{ErrorDetails, StatusExt};
use v1::workflow_service_server::{WorkflowService, WorkflowServiceServer};

const KEY: &str = "fdk_0123456789abcdef_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-_abcde";
/// A key whose scopes lack `workflow:read`.
const NARROW_KEY: &str = "fdk_fedcba9876543210_narrowNarrowNarrowNarrowNarrowNarrowNarrow12";
/// A key whose tenant is over its request quota.
const BUSY_KEY: &str = "fdk_00000000000000ff_busyBusyBusyBusyBusyBusyBusyBusyBusyBusyBusy1";
/// The part of a key that is secret; it must never be printed.
const SECRET: &str = "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-_abcde";

struct Mock;

type RunStream = Pin<Box<dyn Stream<Item = Result<v1::SubscribeRunResponse, Status>> + Send>>;

#[tonic::async_trait]
impl WorkflowService for Mock {
    type SubscribeRunStream = RunStream;

    async fn subscribe_run(&self, request: Request<v1::SubscribeRunRequest>) -> Result<Response<RunStream>, Status> {
        let run_id = request.into_inner().run_id;
        let items = (1..=3).map(move |id| {
            Ok(v1::SubscribeRunResponse {
                event: Some(v1::RunEvent { run_id: run_id.clone(), event_id: id, ..Default::default() }),
                skipped: 0,
            })
        });
        Ok(Response::new(Box::pin(futures::stream::iter(items.collect::<Vec<_>>()))))
    }

    async fn list_workflows(
        &self,
        _request: Request<v1::ListWorkflowsRequest>,
    ) -> Result<Response<v1::ListWorkflowsResponse>, Status> {
        let workflow = v1::Workflow { name: "intake".into(), ..Default::default() };
        Ok(Response::new(v1::ListWorkflowsResponse { workflows: vec![workflow] }))
    }

    async fn describe_workflow(
        &self,
        _request: Request<v1::DescribeWorkflowRequest>,
    ) -> Result<Response<v1::DescribeWorkflowResponse>, Status> {
        Err(Status::unimplemented("not in this mock"))
    }

    async fn cancel_run(
        &self,
        _request: Request<v1::CancelRunRequest>,
    ) -> Result<Response<v1::CancelRunResponse>, Status> {
        Ok(Response::new(v1::CancelRunResponse { cancelled: true }))
    }

    async fn list_llm_calls(
        &self,
        _request: Request<v1::ListLlmCallsRequest>,
    ) -> Result<Response<v1::ListLlmCallsResponse>, Status> {
        Err(Status::unimplemented("not in this mock"))
    }
}

fn refusal(code: Code, reason: &str, metadata: &[(&str, &str)], retry: Option<Duration>) -> Status {
    let metadata: HashMap<String, String> = metadata.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let mut details = ErrorDetails::with_error_info(reason, "frontdesk.dev", metadata);
    if let Some(delay) = retry {
        details.set_retry_info(Some(delay));
    }
    Status::with_error_details(code, format!("refused: {reason}"), details)
}

/// What the auth layer would answer, and every `authorization` value that reached it (`None`
/// for a call without one).
fn admit(seen: &Mutex<Vec<Option<String>>>, request: &Request<()>) -> Result<(), Status> {
    let header = request.metadata().get("authorization").map(|v| v.to_str().unwrap().to_owned());
    seen.lock().unwrap().push(header.clone());
    match header.as_deref() {
        Some(h) if h == format!("Bearer {KEY}") => Ok(()),
        Some(h) if h == format!("Bearer {NARROW_KEY}") => {
            Err(refusal(Code::PermissionDenied, SCOPE_MISSING, &[("scope", "workflow:read")], None))
        }
        Some(h) if h == format!("Bearer {BUSY_KEY}") => Err(refusal(
            Code::ResourceExhausted,
            QUOTA_EXCEEDED,
            &[("quota", "requests_per_sec")],
            Some(Duration::from_millis(1500)),
        )),
        _ => Err(refusal(Code::Unauthenticated, UNAUTHENTICATED, &[], None)),
    }
}

type Seen = Arc<Mutex<Vec<Option<String>>>>;

async fn serve(tls: Option<ServerTlsConfig>) -> (SocketAddr, Seen) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen: Seen = Arc::default();
    let recorder = seen.clone();
    let service = WorkflowServiceServer::with_interceptor(Mock, move |request: Request<()>| {
        admit(&recorder, &request)?;
        Ok(request)
    });
    let mut builder = Server::builder();
    if let Some(tls) = tls {
        // tonic's server side uses the process-wide provider (its client side picks ring itself).
        let _ = rustls::crypto::ring::default_provider().install_default();
        builder = builder.tls_config(tls).unwrap();
    }
    tokio::spawn(
        builder.add_service(service).serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    (addr, seen)
}

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!("{}/../testdata/tls/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

async fn exercise(client: &Client) {
    assert_eq!(client.list_workflows().await.unwrap()[0].name, "intake");
    let events: Vec<u64> = client
        .subscribe_run("run-1", 0)
        .await
        .unwrap()
        .map(|item| item.unwrap().event.unwrap().event_id)
        .collect()
        .await;
    assert_eq!(events, [1, 2, 3]);
    let raw = client.workflows().cancel_run(v1::CancelRunRequest { run_id: "run-1".into() }).await.unwrap();
    assert!(raw.into_inner().cancelled);
}

#[tokio::test]
async fn api_key_is_sent_with_every_call() {
    let (addr, seen) = serve(None).await;
    let client = Client::builder(format!("http://{addr}")).api_key(KEY).connect().await.unwrap();
    assert!(client.has_api_key());
    exercise(&client).await;
    let want = Some(format!("Bearer {KEY}"));
    assert_eq!(*seen.lock().unwrap(), vec![want.clone(); 3], "unary, streaming and raw-stub calls");

    // A channel of one's own, with the key added afterwards; and a lazy connection.
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}")).unwrap().connect_lazy();
    exercise(&Client::from_channel(channel).with_api_key(KEY).unwrap()).await;
    exercise(&Client::builder(format!("http://{addr}")).api_key(KEY).connect_lazy().unwrap()).await;
    assert_eq!(*seen.lock().unwrap(), vec![want; 9]);
}

#[tokio::test]
async fn refusals_carry_their_reasons() {
    let (addr, seen) = serve(None).await;
    let anonymous = Client::connect(format!("http://{addr}")).await.unwrap();
    assert!(!anonymous.has_api_key());
    let err = anonymous.list_workflows().await.unwrap_err();
    assert_eq!(err.code(), Some(Code::Unauthenticated));
    assert_eq!(err.reason(), Some(UNAUTHENTICATED));
    assert!(err.api().unwrap().is_reason(v1::ErrorReason::Unauthenticated));
    assert_eq!(seen.lock().unwrap().as_slice(), [None]);

    let narrow = Client::builder(format!("http://{addr}")).api_key(NARROW_KEY).connect().await.unwrap();
    let err = narrow.subscribe_run("run-1", 0).await.err().expect("refused");
    let api = err.api().unwrap();
    assert_eq!((api.code, api.reason.as_deref()), (Code::PermissionDenied, Some(SCOPE_MISSING)));
    assert!(api.is_reason(v1::ErrorReason::ScopeMissing));
    assert_eq!(api.metadata["scope"], "workflow:read");

    let busy = Client::builder(format!("http://{addr}")).api_key(BUSY_KEY).connect().await.unwrap();
    let err = busy.list_workflows().await.unwrap_err();
    let api = err.api().unwrap();
    assert_eq!((api.code, api.reason.as_deref()), (Code::ResourceExhausted, Some(QUOTA_EXCEEDED)));
    assert!(api.is_reason(v1::ErrorReason::QuotaExceeded));
    assert_eq!(api.metadata["quota"], "requests_per_sec");
    assert_eq!(api.retry_after, Some(Duration::from_millis(1500)));
    assert_eq!(err.to_string(), "RESOURCE_EXHAUSTED: refused: QUOTA_EXCEEDED [QUOTA_EXCEEDED]; retry after 1.50s");
}

#[tokio::test]
async fn the_key_is_never_printed() {
    let (addr, _) = serve(None).await;
    let tls = ClientTlsConfig::new().identity(Identity::from_pem(fixture("client.pem"), fixture("client.key")));
    let builder = Client::builder(format!("http://{addr}")).api_key(KEY).tls(tls);
    let client = Client::builder(format!("http://{addr}")).api_key(KEY).connect().await.unwrap();
    let credentials = Credentials::api_key(KEY).unwrap();
    for text in [format!("{builder:?}"), format!("{client:?}"), format!("{credentials:?}"), format!("{client:#?}")] {
        assert!(!text.contains(SECRET), "{text}");
        assert!(!text.contains("PRIVATE KEY"), "{text}");
        assert!(text.contains("<redacted>"), "{text}");
    }
    assert!(format!("{:?}", Credentials::default()).contains("none"));

    let err = Client::builder(format!("http://{addr}")).api_key(format!("{KEY}\n")).connect().await;
    assert!(err.is_ok(), "surrounding whitespace is trimmed");
    let err =
        Client::builder(format!("http://{addr}")).api_key(format!("{SECRET}\u{7f}x")).connect().await.unwrap_err();
    assert!(matches!(err, ClientError::InvalidApiKey), "{err:?}");
    let empty = Client::builder(format!("http://{addr}")).api_key(" ").connect_lazy().unwrap_err();
    assert!(matches!(empty, ClientError::InvalidApiKey), "{empty:?}");
    assert!(!err.to_string().contains(SECRET) && !format!("{err:?}").contains(SECRET));
}

#[tokio::test]
async fn mutual_tls() {
    let server_tls = ServerTlsConfig::new()
        .identity(Identity::from_pem(fixture("server.pem"), fixture("server.key")))
        .client_ca_root(Certificate::from_pem(fixture("ca.pem")));
    let (addr, seen) = serve(Some(server_tls)).await;
    let ca = Certificate::from_pem(fixture("ca.pem"));
    let identity = Identity::from_pem(fixture("client.pem"), fixture("client.key"));

    // By IP address (the certificate names 127.0.0.1), by name, and with TLS settings on an
    // http:// address (taken as https://).
    for url in [format!("https://{addr}"), format!("https://localhost:{}", addr.port()), format!("http://{addr}")] {
        let tls = ClientTlsConfig::new().ca_certificate(ca.clone()).identity(identity.clone());
        let client = Client::builder(url).api_key(KEY).tls(tls).connect().await.unwrap();
        exercise(&client).await;
    }
    assert_eq!(*seen.lock().unwrap(), vec![Some(format!("Bearer {KEY}")); 9]);

    // Without a client certificate the server refuses the handshake; without the CA the client
    // does not trust the server; plaintext does not speak TLS.
    let tls = ClientTlsConfig::new().ca_certificate(ca.clone());
    let refused = match Client::builder(format!("https://{addr}")).api_key(KEY).tls(tls).connect().await {
        Ok(client) => client.list_workflows().await.map(|_| ()).unwrap_err(),
        Err(e) => e,
    };
    // (tonic reports a handshake the server broke off as UNKNOWN "transport error".)
    let broken = matches!(refused.code(), Some(Code::Unavailable | Code::Unknown));
    assert!(matches!(refused, ClientError::Transport(_)) || broken, "{refused:?}");
    let untrusted = Client::builder(format!("https://{addr}")).api_key(KEY).connect().await.unwrap_err();
    assert!(matches!(untrusted, ClientError::Transport(_)), "{untrusted:?}");
    let plaintext = Client::builder(format!("http://{addr}")).api_key(KEY).connect_lazy().unwrap();
    assert!(plaintext.list_workflows().await.is_err());
    assert_eq!(seen.lock().unwrap().len(), 9, "no refused connection reached a service");
}

struct Run {
    ok: bool,
    stdout: String,
    stderr: String,
}

async fn cli(args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_frontdesk"));
    command.args(args).env_remove("FRONTDESK_KEY").env("NO_COLOR", "1");
    for (k, v) in env {
        command.env(k, v);
    }
    let child = command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let out = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output()).await.unwrap().unwrap();
    Run {
        ok: out.status.success(),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

#[tokio::test]
async fn cli_sends_the_key_over_tls() {
    let server_tls = ServerTlsConfig::new()
        .identity(Identity::from_pem(fixture("server.pem"), fixture("server.key")))
        .client_ca_root(Certificate::from_pem(fixture("ca.pem")));
    let (addr, seen) = serve(Some(server_tls)).await;
    let dir = format!("{}/../testdata/tls", env!("CARGO_MANIFEST_DIR"));
    let (ca, cert, key) = (format!("{dir}/ca.pem"), format!("{dir}/client.pem"), format!("{dir}/client.key"));
    let server = format!("https://localhost:{}", addr.port());
    let tls = ["--server", &server, "--tls-ca", &ca, "--tls-cert", &cert, "--tls-key", &key];

    let run = cli(&[&tls[..], &["--api-key", KEY, "workflows"]].concat(), &[]).await;
    assert!(run.ok, "{}\n{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("intake"), "{}", run.stdout);
    // The key from the environment; a refusal names its reason and never the key.
    let run = cli(&[&tls[..], &["workflows"]].concat(), &[("FRONTDESK_KEY", KEY)]).await;
    assert!(run.ok, "{}\n{}", run.stdout, run.stderr);
    let run = cli(&[&tls[..], &["workflows"]].concat(), &[("FRONTDESK_KEY", BUSY_KEY)]).await;
    assert!(!run.ok);
    assert!(run.stderr.contains("RESOURCE_EXHAUSTED") && run.stderr.contains("QUOTA_EXCEEDED"), "{}", run.stderr);
    assert!(!run.stderr.contains("busyBusy"), "{}", run.stderr);
    assert_eq!(
        *seen.lock().unwrap(),
        [Some(format!("Bearer {KEY}")), Some(format!("Bearer {KEY}")), Some(format!("Bearer {BUSY_KEY}"))]
    );

    // --help shows the variable, never its value.
    let run = cli(&["--help"], &[("FRONTDESK_KEY", KEY)]).await;
    assert!(run.ok && run.stdout.contains("FRONTDESK_KEY") && !run.stdout.contains(SECRET), "{}", run.stdout);
    let run = cli(&["--server", &server, "--tls-ca", "/nonexistent/ca.pem", "workflows"], &[]).await;
    assert!(!run.ok && run.stderr.contains("/nonexistent/ca.pem"), "{}", run.stderr);
}
