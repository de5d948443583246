//! The real server on its embedded model: the configuration a user gets with no endpoint
//! (provider `local`, Gemma 3 270M on llama.cpp), driven through the Rust client. Every
//! structured reply of the intake and triage graphs must be schema-valid for the run to
//! complete, so these tests catch a prompt or schema that the small model cannot finish (for
//! example an unbounded list of strings). They assert that runs complete, never the wording.
//!
//! Needs the model file: `export FRONTDESK_TEST_MODEL_PATH="$(scripts/ensure-model.sh | tail -n1)"`
//! (the test command does this). Without it the tests are skipped, unless
//! `FRONTDESK_REQUIRE_MODEL=1`, which makes them fail.

use std::path::PathBuf;

use frontdesk_client::{Client, SendOptions, StartOptions, TriageOptions};
use frontdesk_server::{
    app::{App, Overrides, RunningServer},
    config::{Config, ModelProvider},
};

struct EmbeddedServer {
    client: Client,
    addr: std::net::SocketAddr,
    _server: RunningServer,
    _dir: tempfile::TempDir,
    /// One server (one model on the 2 cores) at a time: two models sharing the cores would
    /// each run at half speed and could pass the request timeout on a slow reply.
    _turn: tokio::sync::MutexGuard<'static, ()>,
}

static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn model_path() -> Option<PathBuf> {
    let path = std::env::var_os("FRONTDESK_TEST_MODEL_PATH").filter(|p| !p.is_empty()).map(PathBuf::from);
    if path.is_none() {
        assert!(
            std::env::var("FRONTDESK_REQUIRE_MODEL").as_deref() != Ok("1"),
            "FRONTDESK_REQUIRE_MODEL=1 but FRONTDESK_TEST_MODEL_PATH is not set: run \
             `export FRONTDESK_TEST_MODEL_PATH=\"$(scripts/ensure-model.sh | tail -n1)\"`"
        );
        eprintln!("skipped: set FRONTDESK_TEST_MODEL_PATH (scripts/ensure-model.sh) to run the embedded model tests");
    }
    path
}

/// The server as `frontdesk-server` builds it with no endpoint configured, on a temporary
/// SQLite file; `None` when the model file is not configured.
async fn start() -> Option<EmbeddedServer> {
    let path = model_path()?;
    let turn = ONE_AT_A_TIME.lock().await;
    // The server's warnings (a failed model call says why) in the test's output.
    let _ = tracing_subscriber::fmt().with_env_filter("warn").with_test_writer().try_init();
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::default();
    config.database.url = format!("sqlite://{}", dir.path().join("frontdesk.db").display());
    config.model.provider = ModelProvider::Local;
    config.model.local_path = Some(path);
    let app = App::build(config, Overrides::default()).await.expect("server builds");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = app.serve_on(listener).await.expect("server starts");
    let client = Client::connect(format!("http://{}", server.addr)).await.expect("client connects");
    Some(EmbeddedServer { client, addr: server.addr, _server: server, _dir: dir, _turn: turn })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn triage_runs_end_to_end_on_the_embedded_model() {
    let Some(s) = start().await else { return };
    for (customer, message) in [
        ("CUST-002", "Webhook delivery fails with status 500 since this morning"),
        // Not English: language detection, one translation per message, and the reply
        // translated back.
        ("CUST-001", "Bonjour, ma facture de ce mois est deux fois plus élevée que d'habitude"),
    ] {
        let (resolution, events, result) = s
            .client
            .triage_ticket_and_wait(customer, message, TriageOptions::default())
            .await
            .unwrap_or_else(|e| panic!("triage of {message:?} failed: {e}"));
        assert!(resolution.ticket_id.starts_with("TKT-"), "{resolution:?}");
        assert!(!events.is_empty());
        assert!(!result.ticket_id.is_empty(), "{result:?}");
        assert!(!result.suggested_response.is_empty(), "{result:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intake_turns_run_end_to_end_on_the_embedded_model() {
    let Some(s) = start().await else { return };
    let started = s.client.start_conversation("intake", StartOptions::default()).await.expect("start");
    let id = started.conversation.expect("conversation").conversation_id;
    for text in ["Hello, I need to raise a change request", "The affected system is billing-db in production"] {
        let (events, result) = s
            .client
            .send_message_and_wait(&id, text, SendOptions::default())
            .await
            .unwrap_or_else(|e| panic!("turn {text:?} failed: {e}"));
        assert!(!events.is_empty());
        assert!(result.reply.is_some_and(|r| !r.text.is_empty()), "every turn ends with a reply");
    }
}

/// Collects an investigation stream; the last item is the investigation.
async fn investigation_of(
    stream: impl futures::Stream<Item = Result<frontdesk_api::v1::InvestigationProgress, tonic::Status>>,
) -> frontdesk_api::v1::Investigation {
    use frontdesk_api::v1::investigation_progress::Payload;
    use futures::StreamExt;
    let mut stream = std::pin::pin!(stream);
    let mut last = None;
    while let Some(item) = stream.next().await {
        if let Some(Payload::Investigation(i)) = item.expect("the run succeeds").payload {
            last = Some(i);
        }
    }
    last.expect("the stream ends with the investigation")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn investigations_run_end_to_end_on_the_embedded_model() {
    use frontdesk_api::v1::{
        self as pb, investigation_service_client::InvestigationServiceClient, start_investigation_request::Mutation,
    };
    use futures::StreamExt;
    let Some(s) = start().await else { return };
    let channel =
        tonic::transport::Channel::from_shared(format!("http://{}", s.addr)).unwrap().connect().await.unwrap();
    let client = InvestigationServiceClient::new(channel);
    let start = |id: &str| {
        let mut client = client.clone();
        let request = pb::StartInvestigationRequest {
            mutation: Some(Mutation::MutationId(id.into())),
            idempotency_key: String::new(),
        };
        async move {
            client.start_investigation(request).await.unwrap().into_inner().map(|r| r.map(|r| r.progress.unwrap()))
        }
    };
    let respond = |request: pb::RespondRequest| {
        let mut client = client.clone();
        async move { client.respond(request).await.unwrap().into_inner().map(|r| r.map(|r| r.progress.unwrap())) }
    };
    // Authorised: the rights check (offered lookup_data by function calling) and the report.
    let done = investigation_of(start("1001").await).await;
    assert!(done.finished, "{done:?}");
    assert_eq!(done.report.unwrap().recommendation(), pb::Recommendation::Accept);

    // Not authorised: the changer is asked; whatever the small model makes of the reply, the
    // investigation goes on to the manager or to a report.
    let waiting = investigation_of(start("1002").await).await;
    assert_eq!(waiting.status(), pb::InvestigationStatus::AwaitingUserResponse);
    let mut inv = investigation_of(
        respond(pb::RespondRequest {
            investigation_id: "INV-1002".into(),
            action_id: "INV-1002-changer".into(),
            role: pb::ResponderRole::Changer as i32,
            responder_id: "u003".into(),
            text: "I stood in for Frank Visser (u006), who was on vacation that week.".into(),
            decision: 0,
            idempotency_key: String::new(),
        })
        .await,
    )
    .await;
    if inv.status() == pb::InvestigationStatus::AwaitingManagerResponse {
        inv = investigation_of(
            respond(pb::RespondRequest {
                investigation_id: "INV-1002".into(),
                action_id: "INV-1002-manager".into(),
                role: pb::ResponderRole::Manager as i32,
                responder_id: "u001".into(),
                text: String::new(),
                decision: pb::ManagerDecision::Approve as i32,
                idempotency_key: String::new(),
            })
            .await,
        )
        .await;
    }
    assert!(inv.finished, "{inv:?}");
    assert!(!inv.report.unwrap().summary.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn research_runs_end_to_end_on_the_embedded_model() {
    use frontdesk_api::v1::{self as pb, ask_response::Payload, research_service_client::ResearchServiceClient};
    use futures::StreamExt;
    let Some(s) = start().await else { return };
    let channel =
        tonic::transport::Channel::from_shared(format!("http://{}", s.addr)).unwrap().connect().await.unwrap();
    let mut client = ResearchServiceClient::new(channel);
    // A small retry limit keeps the run short: the 270M model's critics may reject anything.
    let request = pb::AskRequest {
        question: "When did Apollo 11 land on the Moon?".into(),
        retry_limit: 2,
        corpus: String::new(),
        idempotency_key: String::new(),
    };
    let mut stream = client.ask(request).await.unwrap().into_inner();
    let mut research = None;
    while let Some(item) = stream.next().await {
        if let Some(Payload::Research(r)) = item.expect("the run succeeds").payload {
            research = Some(r);
        }
    }
    let research = research.expect("the stream ends with the research");
    // Every structured reply decoded under its grammar: the run reached the finalizer rather
    // than failing a component on invalid output.
    assert!(
        matches!(research.outcome(), pb::ResearchOutcome::Answered | pb::ResearchOutcome::RetryLimit),
        "{research:?}"
    );
    assert!(!research.final_answer.is_empty());
}
