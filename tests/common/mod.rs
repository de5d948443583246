//! Shared harness of the end-to-end tests: a real server on 127.0.0.1:0 with a temporary
//! SQLite database and a scripted model (a test double whose replies each test queues),
//! driven through the Rust client.

#![allow(dead_code)]

pub mod postgres;
pub mod process;

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use async_trait::async_trait;
use frontdesk_api::v1;
use frontdesk_client::{Client, SendOptions, StartOptions};
use frontdesk_llm::{ScriptedModel, ScriptedReply};
use frontdesk_server::{
    app::{App, Overrides, RunningServer},
    config::{CallLogMode, Config},
    workflows::{
        intake::{self, UseSubmitter},
        triage::{self, ActiveStore},
        Parts,
    },
};
use frontdesk_store::scratch::ScratchDatabase;
use frontdesk_workflows::intake::{Receipt, Submission, SubmitError, Submitter};
use serde_json::json;

pub struct TestServer {
    pub client: Client,
    pub model: Arc<ScriptedModel>,
    pub submitter: Arc<RecordingSubmitter>,
    pub server: Option<RunningServer>,
    /// `database.url`, for commands run on the server's database (`frontdesk-server keys`).
    pub database_url: String,
    _store: TestStore,
}

/// Records submissions; fails the next `fail_next` of them.
#[derive(Default)]
pub struct RecordingSubmitter {
    pub submitted: Mutex<Vec<Submission>>,
    pub fail_next: Mutex<u32>,
}

#[async_trait]
impl Submitter for RecordingSubmitter {
    async fn submit(&self, submission: &Submission) -> Result<Receipt, SubmitError> {
        {
            let mut fail = self.fail_next.lock().unwrap();
            if *fail > 0 {
                *fail -= 1;
                return Err(SubmitError::Rejected { status: 503, message: "list is read-only".into() });
            }
        }
        self.submitted.lock().unwrap().push(submission.clone());
        Ok(Receipt { id: submission.id.clone(), url: format!("https://lists.example.test/{}", submission.id) })
    }
}

pub struct Options {
    pub debug_commands: bool,
    pub max_text_chars: usize,
    pub max_turns: u32,
    pub outbox: bool,
    /// `model.call_log` (off by default, as in production).
    pub call_log: CallLogMode,
    /// `model.call_log_file`.
    pub call_log_file: Option<std::path::PathBuf>,
    /// Any other setting, applied last.
    pub configure: fn(&mut Config),
}

impl Default for Options {
    fn default() -> Self {
        Self {
            debug_commands: false,
            max_text_chars: 8_000,
            max_turns: 500,
            outbox: false,
            call_log: CallLogMode::Off,
            call_log_file: None,
            configure: |_| {},
        }
    }
}

impl TestServer {
    pub async fn start() -> Self {
        Self::start_with(Options::default()).await
    }

    pub async fn start_with(options: Options) -> Self {
        Self::start_on(test_store().await, options, Arc::new(ScriptedModel::new("scripted-test"))).await
    }

    /// Shuts the server down and starts a new one on the same database, as a restart of the
    /// process does. The scripted model is kept, with the replies queued for the new server's
    /// recovery (it starts at once).
    pub async fn restart(mut self, options: Options) -> Self {
        if let Some(server) = self.server.take() {
            server.shutdown().await.unwrap();
        }
        Self::start_on(self._store, options, self.model).await
    }

    async fn start_on(store: TestStore, options: Options, model: Arc<ScriptedModel>) -> Self {
        let mut config = Config::default();
        let database_url = store.url.clone();
        config.database.url = database_url.clone();
        let mut intake = config.workflows.settings::<intake::Workflow>().unwrap();
        intake.debug_commands = options.debug_commands;
        config.workflows.set::<intake::Workflow>(&intake).unwrap();
        config.limits.max_text_chars = options.max_text_chars;
        config.limits.max_turns = options.max_turns;
        config.model.call_log = options.call_log;
        config.model.call_log_file = options.call_log_file;
        config.shutdown_grace_secs = 5;
        (options.configure)(&mut config);
        // With FRONTDESK_E2E_TRIAGE_STORE=redis, active tickets live in Redis (a prefix per server).
        if std::env::var("FRONTDESK_E2E_TRIAGE_STORE").as_deref() == Ok("redis") {
            let url = std::env::var("FRONTDESK_TEST_REDIS_URL")
                .expect("FRONTDESK_E2E_TRIAGE_STORE=redis needs FRONTDESK_TEST_REDIS_URL");
            let mut triage = config.workflows.settings::<triage::Workflow>().unwrap();
            triage.active_store = ActiveStore::Redis;
            triage.redis_url = Some(url);
            triage.redis_key_prefix = Some(store.redis_key_prefix.clone());
            config.workflows.set::<triage::Workflow>(&triage).unwrap();
        }
        let submitter = Arc::new(RecordingSubmitter::default());
        let parts =
            if options.outbox { Parts::default() } else { Parts::default().with(UseSubmitter(submitter.clone())) };
        let overrides = Overrides { model: Some(model.clone()), parts };
        let app = App::build(config, overrides).await.expect("server builds");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let server = app.serve_on(listener).await.expect("server starts");
        let client = Client::connect(format!("http://{}", server.addr)).await.expect("client connects");
        Self { client, model, submitter, server: Some(server), database_url, _store: store }
    }

    pub fn server(&self) -> &RunningServer {
        self.server.as_ref().unwrap()
    }

    pub async fn start_intake(&self) -> String {
        let started = self.client.start_conversation("intake", StartOptions::default()).await.unwrap();
        started.conversation.unwrap().conversation_id
    }

    /// Queues the model's replies for the next calls, each pinned to the purpose it answers.
    pub fn script(&self, replies: &[(&str, serde_json::Value)]) {
        for (purpose, reply) in replies {
            let reply = match reply {
                serde_json::Value::String(text) => ScriptedReply::text(text.clone()),
                other => ScriptedReply::json(other),
            };
            self.model.push_reply(reply.for_purpose(*purpose));
        }
    }

    pub async fn turn(&self, id: &str, text: &str) -> (Vec<v1::RunEvent>, v1::TurnResult) {
        self.client.send_message_and_wait(id, text, SendOptions::default()).await.expect("turn succeeds")
    }

    /// A turn's reply text and the intake state after it.
    pub async fn say(&self, id: &str, text: &str) -> (String, v1::IntakeState) {
        let (_, result) = self.turn(id, text).await;
        let reply = result.reply.map(|m| m.text).unwrap_or_default();
        (reply, intake_state(result.conversation.unwrap()))
    }

    pub async fn stop(mut self) {
        if let Some(server) = self.server.take() {
            server.shutdown().await.unwrap();
        }
    }
}

/// A test's database and its directory: SQLite in the directory, or, with
/// `FRONTDESK_E2E_DATABASE=postgres`, a scratch database on the server at
/// `FRONTDESK_TEST_POSTGRES_URL` (so the same suite runs on both stores), dropped with this.
pub struct TestStore {
    pub url: String,
    /// The prefix of the store's keys in Redis, for triage's active tickets there: one per
    /// store, so that a restarted server finds its predecessor's.
    pub redis_key_prefix: String,
    _dir: tempfile::TempDir,
    _scratch: Option<ScratchDatabase>,
}

fn redis_key_prefix() -> String {
    format!("fde2e-{}", uuid::Uuid::new_v4().simple())
}

pub async fn test_store() -> TestStore {
    let dir = tempfile::tempdir().unwrap();
    match std::env::var("FRONTDESK_E2E_DATABASE").as_deref() {
        Ok("postgres") => {
            let server = std::env::var("FRONTDESK_TEST_POSTGRES_URL")
                .expect("FRONTDESK_E2E_DATABASE=postgres needs FRONTDESK_TEST_POSTGRES_URL");
            let scratch = ScratchDatabase::create(&server, "e2e").await.expect("create a scratch database");
            TestStore {
                url: scratch.url().to_owned(),
                redis_key_prefix: redis_key_prefix(),
                _dir: dir,
                _scratch: Some(scratch),
            }
        }
        Ok(other) => panic!("FRONTDESK_E2E_DATABASE must be postgres or unset, not {other:?}"),
        Err(_) => {
            let url = format!("sqlite://{}/frontdesk.db", dir.path().display());
            TestStore { url, redis_key_prefix: redis_key_prefix(), _dir: dir, _scratch: None }
        }
    }
}

pub fn intake_state(conversation: v1::Conversation) -> v1::IntakeState {
    match conversation.state {
        Some(v1::conversation::State::Intake(state)) => state,
        other => panic!("expected intake state, got {other:?}"),
    }
}

pub fn mode(state: &v1::IntakeState) -> v1::IntakeMode {
    v1::IntakeMode::try_from(state.mode).unwrap()
}

pub fn route(route: &str) -> serde_json::Value {
    json!({"reasoning": "scripted", "route": route})
}

pub fn extraction(updates: &[(&str, Option<&str>)], unknown: &[&str], followup: &str) -> serde_json::Value {
    json!({
        "stated": updates
            .iter()
            .filter_map(|(f, v)| v.map(|v| json!({"field": f, "value": v})))
            .collect::<Vec<_>>(),
        "marked_unknown": unknown,
        "reasoning": "scripted",
        "followup_response": followup,
        "user_wants_to_abandon": false,
    })
}

pub fn abandon(reply: &str) -> serde_json::Value {
    json!({"stated": [], "marked_unknown": [], "reasoning": "scripted", "followup_response": reply, "user_wants_to_abandon": true})
}

pub fn team(id: Option<&str>) -> serde_json::Value {
    json!({"reasoning": "scripted", "team_id": id, "confidence": "high"})
}

pub fn review(action: &str, reply: &str) -> serde_json::Value {
    json!({"action_type": action, "reasoning": "scripted", "response_to_user": reply})
}

/// Every field of the shipped config except `title`, which the model infers.
pub const ALL_BUT_TITLE: &[(&str, Option<&str>)] = &[
    ("description", Some("Patch the billing database to fix a memory leak")),
    ("justification", Some("security patch required by policy")),
    ("affected_system", Some("billing-db")),
    ("environment", Some("production")),
    ("urgency", Some("high")),
    ("requested_by", Some("alice.nguyen")),
    ("desired_date", Some("2026-12-01")),
];

/// A user message that states `fields` as "name: value" pairs: the elicitation agent only
/// records values the user wrote.
pub fn stating(fields: &[(&str, Option<&str>)]) -> String {
    fields.iter().filter_map(|(f, v)| v.map(|v| format!("{f}: {v}"))).collect::<Vec<_>>().join("; ")
}

/// Drives a conversation to REVIEW with the Ops Change team (three turns).
pub async fn to_review(s: &TestServer, id: &str) -> v1::IntakeState {
    s.script(&[
        ("supervisor.route", route("elicitation_agent")),
        ("elicitation.extract", extraction(&[], &[], "Sure. What should change, and why?")),
    ]);
    s.say(id, "I want to raise a change request").await;
    let mut fields = ALL_BUT_TITLE.to_vec();
    fields.push(("title", Some("Patch billing-db")));
    s.script(&[
        ("supervisor.route", route("elicitation_agent")),
        ("elicitation.extract", extraction(&fields, &["rollback_plan"], "")),
        ("team_matching.match", team(Some("ops-change"))),
    ]);
    let (_, state) = s.say(id, &format!("{}; rollback plan unknown", stating(ALL_BUT_TITLE))).await;
    assert_eq!(mode(&state), v1::IntakeMode::Review);
    state
}

pub async fn wait_for<F: Fn() -> bool>(what: &str, f: F) {
    for _ in 0..200 {
        if f() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("timed out waiting for {what}");
}

/// `GET path` on a plain HTTP listener: the status line and the body.
pub async fn http_get(addr: std::net::SocketAddr, path: &str) -> (String, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_owned(), body.to_owned())
}

/// The value of one series of the metrics text, by its name and labels as written.
pub fn series(text: &str, name_and_labels: &str) -> f64 {
    let line = text.lines().find(|l| l.split_once(' ').is_some_and(|(series, _)| series == name_and_labels));
    let line = line.unwrap_or_else(|| panic!("no {name_and_labels} in:\n{text}"));
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

/// A valid mutation for `StartInvestigation`'s inline form, under `mutation_id` (pick one the
/// HR data does not have).
pub fn inline_mutation(mutation_id: &str) -> v1::HrMutation {
    v1::HrMutation {
        mutation_id: mutation_id.into(),
        changer_id: "u005".into(),
        target_user_id: "u004".into(),
        system: "FinanceApp".into(),
        access_level: "Admin".into(),
        change_type: "budget_change".into(),
        description: "Raised the team budget".into(),
        changed_at: Some(prost_types::Timestamp { seconds: 1_762_785_000, nanos: 0 }),
        change_investigation: 0,
    }
}
