//! Decision accuracy of the configured model on the real intake and triage prompts.
//!
//! Runs the scenario sets in `config/eval/` (38 intake routing and extraction cases, 20 triage
//! classification cases) through the real graphs, with the model the server would use (the
//! same configuration layers: `FRONTDESK__MODEL__...`, or the embedded model by default), and
//! prints accuracy per decision.
//!
//! ```text
//! cargo run --release -p frontdesk-server --example accuracy [-- --only intake|triage] [--case ID_PREFIX]
//! ```

use std::{
    collections::BTreeMap,
    path::Path,
    sync::{Arc, Mutex},
    time::Instant,
};

use async_trait::async_trait;
use frontdesk_llm::LlmClient;
use frontdesk_runtime::{EventKind, Log, MemoryCheckpointer, RunInput, RunRequest, Runner, RunnerConfig};
use frontdesk_server::{app::model_from_config, config::Config};
use frontdesk_workflows::{
    intake::{
        self, IntakeConfig, IntakeDeps, IntakeState, IntakeUpdate, Mode, Receipt, ReviewedRequest, Submission,
        SubmitError, Submitter,
    },
    triage::{
        self, customers::CustomerDirectory, kb::KnowledgeBase, ArchiveCursor, ArchiveError, ArchivedStatus,
        ArchivedTicket, KeyClaim, RecordedRequest, TicketArchive, TriageDeps, TriageDesk, TriageProgress,
        TriageRequest,
    },
    Message,
};
use serde::Deserialize;
use serde_json::Value;

#[derive(Deserialize)]
struct IntakeCase {
    id: String,
    mode: String,
    history: Vec<(String, String)>,
    message: String,
    expect: IntakeExpect,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct IntakeExpect {
    route: Option<String>,
    fields: BTreeMap<String, String>,
    unknown: Vec<String>,
    abandon: bool,
}

#[derive(Deserialize)]
struct TriageCase {
    id: String,
    customer_id: String,
    message: String,
    expect: TriageExpect,
}

#[derive(Deserialize)]
struct TriageExpect {
    ticket_type: Option<String>,
    escalate: bool,
    urgency: Option<String>,
}

#[derive(Default)]
struct Score {
    rows: BTreeMap<&'static str, (u32, u32)>,
    misses: Vec<String>,
}

impl Score {
    fn record(&mut self, decision: &'static str, ok: bool, case: &str, detail: impl FnOnce() -> String) {
        let row = self.rows.entry(decision).or_default();
        row.1 += 1;
        if ok {
            row.0 += 1;
        } else {
            self.misses.push(format!("{case} {decision}: {}", detail()));
        }
    }
}

struct NoSubmit;

#[async_trait]
impl Submitter for NoSubmit {
    async fn submit(&self, s: &Submission) -> Result<Receipt, SubmitError> {
        Ok(Receipt { id: s.id.clone(), url: format!("eval://{}", s.id) })
    }
}

#[derive(Default)]
struct MemoryArchive(Mutex<BTreeMap<String, ArchivedTicket>>);

#[async_trait]
impl TicketArchive for MemoryArchive {
    async fn save(&self, t: &ArchivedTicket) -> Result<(), ArchiveError> {
        self.0.lock().unwrap().insert(t.ticket_id.clone(), t.clone());
        Ok(())
    }
    async fn get(&self, id: &str) -> Result<Option<ArchivedTicket>, ArchiveError> {
        Ok(self.0.lock().unwrap().get(id).cloned())
    }
    async fn exists(&self, id: &str) -> Result<bool, ArchiveError> {
        Ok(self.0.lock().unwrap().contains_key(id))
    }
    async fn list(
        &self,
        _: &str,
        _: Option<ArchivedStatus>,
        _: Option<ArchiveCursor>,
        _: usize,
    ) -> Result<(Vec<ArchivedTicket>, Option<ArchiveCursor>), ArchiveError> {
        Ok((Vec::new(), None))
    }
    async fn record_request(&self, _: &str, _: &str, _: &str, _: &str) -> Result<(), ArchiveError> {
        Ok(())
    }
    async fn find_request(&self, _: &str, _: &str) -> Result<Option<RecordedRequest>, ArchiveError> {
        Ok(None)
    }
    // The evaluation sends no idempotency keys, so nothing is claimed.
    async fn claim_request(
        &self,
        _: &str,
        _: &str,
        _: &str,
        _: &str,
        _: i64,
        _: i64,
    ) -> Result<KeyClaim, ArchiveError> {
        unreachable!("the evaluation sends no idempotency keys")
    }
    async fn renew_claim(&self, _: &str, _: &str, _: &str, _: i64) -> Result<bool, ArchiveError> {
        unreachable!("the evaluation sends no idempotency keys")
    }
    async fn release_claim(&self, _: &str, _: &str, _: &str) -> Result<(), ArchiveError> {
        unreachable!("the evaluation sends no idempotency keys")
    }
}

/// An error and its sources, "outer: inner: ...".
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    text
}

fn same(a: &str, b: &str) -> bool {
    a.trim().eq_ignore_ascii_case(b.trim())
}

trait Case {
    fn id(&self) -> &str;
}

impl Case for IntakeCase {
    fn id(&self) -> &str {
        &self.id
    }
}

impl Case for TriageCase {
    fn id(&self) -> &str {
        &self.id
    }
}

/// The cases of a JSON Lines file whose id starts with `filter`, if given.
fn read_cases<T: for<'de> Deserialize<'de> + Case>(path: &Path, filter: Option<&str>) -> Vec<T> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str::<T>(l).unwrap_or_else(|e| panic!("bad case in {}: {e}: {l}", path.display())))
        .filter(|c| filter.is_none_or(|f| c.id().starts_with(f)))
        .collect()
}

async fn run_intake(llm: LlmClient, root: &Path, filter: Option<&str>, score: &mut Score) {
    let config = Arc::new(IntakeConfig::shipped());
    let deps = IntakeDeps { llm, config: config.clone(), submitter: Arc::new(NoSubmit), debug_commands: false };
    let (_, graph) = intake::build(deps).expect("intake graph");
    let runner = Runner::new(graph, Arc::new(MemoryCheckpointer::default()), RunnerConfig::default());
    for case in read_cases::<IntakeCase>(&root.join("config/eval/intake.jsonl"), filter) {
        let started = Instant::now();
        let mut state = IntakeState {
            mode: match case.mode.as_str() {
                "ELICITATION" => Mode::Elicitation,
                "REVIEW" => Mode::Review,
                _ => Mode::Chat,
            },
            ..Default::default()
        };
        let mut messages = vec![Message::assistant("welcome", config.welcome.clone())];
        for (role, text) in &case.history {
            messages.push(if role == "user" {
                Message::user(text.clone())
            } else {
                Message::assistant("eval", text.clone())
            });
        }
        state.messages = Log::append(messages);
        if state.mode == Mode::Review {
            state.identified_team = Some("ops-change".into());
            state.identified_team_name = Some("Ops Change".into());
            state.collected_fields = BTreeMap::from([("title".into(), "Patch billing-db".into())]);
            state.reviewed = ReviewedRequest::of(&state);
        }
        runner.create_thread(&case.id, &state).await.expect("thread");
        let update = IntakeUpdate {
            messages: Some(Log::append(vec![Message::user(case.message.clone())])),
            ..Default::default()
        };
        let mut handle = runner.start(RunRequest::new(case.id.clone(), RunInput::Update(update))).await.expect("run");
        let mut updates: BTreeMap<String, Value> = BTreeMap::new();
        // The run is stopped once the decision under test is made: the nodes after it (a chat
        // reply, team matching) cost the small model seconds and decide nothing measured here.
        let mut stopped = false;
        while let Some(event) = handle.events.recv().await {
            if let EventKind::NodeFinished { update_json, .. } = &event.kind {
                let node = event.node.as_deref().unwrap_or_default().to_owned();
                let update: Value = serde_json::from_str(update_json).unwrap_or(Value::Null);
                let decided = match node.as_str() {
                    "supervisor" => case.expect.route.is_some() || update["next"] != "elicitation_agent",
                    "elicitation_agent" => true,
                    _ => false,
                };
                updates.insert(node, update);
                if decided && !stopped {
                    stopped = true;
                    handle.cancel();
                }
            }
        }
        match handle.wait().await {
            Err(_) if stopped => {}
            Err(error) => score.misses.push(format!("{}: run failed: {}", case.id, chain(&error))),
            Ok(_) => {}
        }
        eprintln!("{} {:.1}s", case.id, started.elapsed().as_secs_f64());
        let route = updates.get("supervisor").and_then(|u| u["next"].as_str()).unwrap_or("(none)").to_owned();
        if let Some(expected) = &case.expect.route {
            score.record("intake: supervisor route", same(&route, expected), &case.id, || {
                format!("got {route}, want {expected}")
            });
            continue;
        }
        let elicitation = updates.get("elicitation_agent").cloned().unwrap_or(Value::Null);
        if case.expect.abandon {
            let abandoned = elicitation["mode"] == "CHAT";
            score.record("intake: abandon detected", abandoned, &case.id, || {
                format!("route {route}, update {elicitation}")
            });
        }
        for (field, want) in &case.expect.fields {
            let got = elicitation["collected_fields"][field].as_str().unwrap_or("(missing)").to_owned();
            score.record("intake: field extracted", same(&got, want), &case.id, || {
                format!("{field}: got {got:?}, want {want:?}; route {route}, update {elicitation}")
            });
        }
        // Precision: a value recorded for a field the message does not state is a wrong answer
        // the recall rows above cannot see.
        if let Some(collected) = elicitation["collected_fields"].as_object() {
            let unstated: Vec<String> = collected
                .iter()
                .filter(|(field, _)| !case.expect.fields.contains_key(*field))
                .map(|(field, value)| format!("{field}={value}"))
                .collect();
            score.record("intake: no unstated field recorded", unstated.is_empty(), &case.id, || {
                format!("recorded {}", unstated.join(", "))
            });
        }
        for field in &case.expect.unknown {
            let marked = elicitation["fields_marked_unknown"].as_array().is_some_and(|a| a.iter().any(|v| v == field));
            score.record("intake: unknown marked", marked, &case.id, || {
                format!("{field} not marked; update {elicitation}")
            });
        }
    }
}

async fn run_triage(llm: LlmClient, root: &Path, filter: Option<&str>, score: &mut Score) {
    let customers = Arc::new(CustomerDirectory::shipped());
    let deps = TriageDeps { llm: llm.clone(), customers: customers.clone(), kb: Arc::new(KnowledgeBase::shipped()) };
    let graph = triage::build(deps).expect("triage graph");
    let runner = Runner::new(graph, Arc::new(MemoryCheckpointer::default()), RunnerConfig::default());
    let desk = TriageDesk::new(runner, llm, customers, Arc::new(MemoryArchive::default()), 8_000)
        .expect("the triage graphs are valid");
    for case in read_cases::<TriageCase>(&root.join("config/eval/triage.jsonl"), filter) {
        let started = Instant::now();
        let request = TriageRequest {
            customer_id: case.customer_id.clone(),
            message: case.message.clone(),
            subject: None,
            language: None,
            idempotency_key: None,
        };
        let mut handle = desk.triage(&frontdesk_workflows::Tenant::default(), request).await.expect("triage starts");
        let mut decision = Value::Null;
        while let Some(progress) = handle.progress.next().await {
            let TriageProgress::Event(event) = progress else { continue };
            if let (EventKind::NodeFinished { update_json, .. }, Some("supervisor")) =
                (&event.kind, event.node.as_deref())
            {
                decision =
                    serde_json::from_str::<Value>(update_json).unwrap_or(Value::Null)["supervisor_decision"].clone();
            }
        }
        if let Err(error) = handle.outcome.await {
            score.misses.push(format!("{}: triage failed: {}", case.id, chain(&error)));
        }
        eprintln!("{} {:.1}s", case.id, started.elapsed().as_secs_f64());
        if let Some(want) = &case.expect.ticket_type {
            let got = decision["ticket_type"].as_str().unwrap_or("(none)").to_owned();
            score.record("triage: ticket type", same(&got, want), &case.id, || format!("got {got}, want {want}"));
        }
        let escalate = decision["requires_escalation"].as_bool().unwrap_or(false);
        score.record("triage: escalation", escalate == case.expect.escalate, &case.id, || {
            format!("got {escalate}, want {}", case.expect.escalate)
        });
        if let Some(want) = &case.expect.urgency {
            let got = decision["urgency"].as_str().unwrap_or("(none)").to_owned();
            score.record("triage: urgency", same(&got, want), &case.id, || format!("got {got}, want {want}"));
        }
    }
}

#[tokio::main]
async fn main() {
    // `RUST_LOG=frontdesk_llm=debug` shows every structured reply.
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let arg = |name: &str| std::env::args().skip_while(|a| a != name).nth(1);
    let only = arg("--only");
    let filter = arg("--case");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let config = Config::load(None, &Default::default()).expect("configuration");
    let model = model_from_config(&config).unwrap_or_else(|e| panic!("no model: {e}"));
    println!("model: {}", model.model_name());
    let llm = LlmClient::new(model);
    let mut score = Score::default();
    let started = Instant::now();
    if only.as_deref() != Some("triage") {
        run_intake(llm.clone(), &root, filter.as_deref(), &mut score).await;
    }
    if only.as_deref() != Some("intake") {
        run_triage(llm, &root, filter.as_deref(), &mut score).await;
    }
    println!("\n| decision | correct | cases | accuracy |\n|---|---:|---:|---:|");
    for (decision, (ok, total)) in &score.rows {
        println!("| {decision} | {ok} | {total} | {:.0}% |", f64::from(*ok) * 100.0 / f64::from(*total));
    }
    println!("\nelapsed: {:.1}s", started.elapsed().as_secs_f64());
    if !score.misses.is_empty() {
        println!("\nmisses:");
        for miss in &score.misses {
            println!("- {miss}");
        }
    }
}
