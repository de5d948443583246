//! Replays W1 conversations: in process through the real `ConversationHost` (runner, intake
//! nodes, prompts), or over gRPC against the real server; and checks W1's outcomes.

use std::{
    collections::BTreeMap,
    sync::{
        atomic::{AtomicU64, AtomicUsize, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use async_trait::async_trait;
use frontdesk_api::v1::{
    self as pb, conversation_service_client::ConversationServiceClient, send_message_response::Payload,
};
use frontdesk_llm::{ChatModel, LlmClient};
use frontdesk_runtime::{
    Checkpoint, CheckpointError, Checkpointer, EventKind, IdempotentRun, RunObserver, RunRegistry, Runner,
    RunnerConfig, ThreadHead, ThreadPage, ThreadQuery, ThreadSummary, UnfinishedRun,
};
use frontdesk_workflows::{
    conversation::{ConversationHost, ConversationLimits},
    intake::{self, prompts::mode_name, IntakeDeps, IntakeView, Submitter},
    ConversationWorkflow, Tenant, TurnOptions,
};
use tonic::transport::Channel;

use crate::{
    rules::bench_intake_config,
    workload::{Conversation, EXPECTED_MODES, TEAMS},
};

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Runs `one` on every item, `concurrency` at a time: each of `concurrency` tokio tasks takes the
/// next item as it finishes one. Returns each result with its item's index, in finishing order;
/// the first error ends the run.
pub async fn in_flight<T, R, F, Fut>(items: Arc<Vec<T>>, concurrency: usize, one: F) -> Result<Vec<(usize, R)>, String>
where
    T: Clone + Send + Sync + 'static,
    R: Send + 'static,
    F: Fn(T) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = Result<R, String>> + Send,
{
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::with_capacity(concurrency);
    for _ in 0..concurrency {
        let (items, next, one) = (items.clone(), next.clone(), one.clone());
        tasks.push(tokio::spawn(async move {
            let mut done = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(item) = items.get(i) else { break };
                done.push((i, one(item.clone()).await?));
            }
            Ok::<_, String>(done)
        }));
    }
    let mut results = Vec::with_capacity(items.len());
    for task in tasks {
        results.extend(task.await.map_err(|e| e.to_string())??);
    }
    Ok(results)
}

/// The real intake workflow on `checkpointer`, wired as `App::build` wires it (no call log,
/// and no metrics unless an `observer` is given, as `metrics.listen` gives the server one).
pub fn build_host(
    model: Arc<dyn ChatModel>,
    checkpointer: Arc<dyn Checkpointer>,
    submitter: Arc<dyn Submitter>,
    observer: Option<Arc<dyn RunObserver>>,
) -> Arc<dyn ConversationWorkflow<View = IntakeView>> {
    let deps = IntakeDeps {
        llm: LlmClient::new(model),
        config: Arc::new(bench_intake_config()),
        submitter,
        debug_commands: false,
    };
    let (spec, graph) = intake::build(deps).expect("the intake graph builds");
    let mut runner = Runner::new(graph, checkpointer, RunnerConfig::default());
    if let Some(observer) = observer {
        runner = runner.with_registry(Arc::new(RunRegistry::default().with_observer(observer)));
    }
    Arc::new(ConversationHost::new(spec, runner, ConversationLimits::default()))
}

/// What one replayed conversation showed.
#[derive(Debug, Default, Clone)]
pub struct Observation {
    pub modes: Vec<String>,
    pub team_after_5: Option<String>,
    pub unknown_after_5: Vec<String>,
    pub url_after_7: Option<String>,
    pub replies: usize,
    pub prompt_tokens: u64,
    pub llm_calls: u64,
}

impl Observation {
    /// Records the intake state after turn `turn` (0-based) of a conversation replayed over gRPC:
    /// its mode, and what W1 checks after the fifth and the seventh turn.
    pub fn record_grpc_turn(&mut self, turn: usize, state: &pb::IntakeState) {
        let mode = pb::IntakeMode::try_from(state.mode).map_or("?", |m| m.as_str_name());
        self.modes.push(mode.trim_start_matches("INTAKE_MODE_").to_owned());
        let non_empty = |s: &String| (!s.is_empty()).then(|| s.clone());
        match turn {
            4 => {
                self.team_after_5 = non_empty(&state.identified_team_id);
                self.unknown_after_5 = state.fields_marked_unknown.clone();
            }
            6 => self.url_after_7 = non_empty(&state.submission_url),
            _ => {}
        }
    }
}

/// Replays one conversation in process; per-turn latencies (ns) go to `latencies` if given.
/// A turn's time is `host.send` plus draining its events plus awaiting its outcome.
pub async fn run_in_process(
    host: &dyn ConversationWorkflow<View = IntakeView>,
    id: &str,
    conv: &Conversation,
    mut latencies: Option<&mut Vec<u64>>,
) -> Result<Observation, BoxError> {
    host.start(&Tenant::default(), Some(id.to_owned()), None).await?;
    let mut obs = Observation::default();
    for (turn, text) in conv.turns.iter().enumerate() {
        let started = Instant::now();
        let mut handle = host.send(&Tenant::default(), id, text, TurnOptions::default()).await?;
        while let Some(event) = handle.events.recv().await {
            if let EventKind::LlmCall(info) = &event.kind {
                obs.prompt_tokens += info.usage.prompt_tokens;
                obs.llm_calls += 1;
            }
        }
        let outcome = handle.outcome.await?;
        if let Some(l) = latencies.as_deref_mut() {
            l.push(started.elapsed().as_nanos() as u64);
        }
        let view = &outcome.conversation.state;
        obs.modes.push(mode_name(view.mode).to_owned());
        obs.replies += usize::from(outcome.reply.is_some());
        match turn {
            4 => {
                obs.team_after_5 = view.identified_team_id.clone();
                obs.unknown_after_5 = view.fields_marked_unknown.clone();
            }
            6 => obs.url_after_7 = view.submission_url.clone(),
            _ => {}
        }
    }
    Ok(obs)
}

/// Replays one conversation over gRPC (StartConversation, then 8 streamed SendMessage calls).
pub async fn run_grpc(
    client: &mut ConversationServiceClient<Channel>,
    id: &str,
    conv: &Conversation,
) -> Result<Observation, BoxError> {
    client
        .start_conversation(pb::StartConversationRequest {
            workflow: intake::NAME.to_owned(),
            conversation_id: id.to_owned(),
            idempotency_key: String::new(),
        })
        .await?;
    let mut obs = Observation::default();
    for (turn, text) in conv.turns.iter().enumerate() {
        let mut stream = client
            .send_message(pb::SendMessageRequest {
                conversation_id: id.to_owned(),
                text: text.clone(),
                idempotency_key: String::new(),
                busy_policy: 0,
            })
            .await?
            .into_inner();
        let mut result = None;
        while let Some(item) = stream.message().await? {
            if let Some(Payload::Result(r)) = item.payload {
                result = Some(r);
            }
        }
        let result = result.ok_or("SendMessage stream ended without a result")?;
        obs.replies += usize::from(result.reply.is_some());
        let state = match result.conversation.and_then(|c| c.state) {
            Some(pb::conversation::State::Intake(state)) => state,
            // None, or another workflow's state (the conversation is not W1's intake).
            _ => return Err("turn result without intake state".into()),
        };
        obs.record_grpc_turn(turn, &state);
    }
    Ok(obs)
}

/// W1 outcome counts over a set of replayed conversations.
#[derive(Debug, Default, Clone)]
pub struct Tally {
    pub conversations: u64,
    pub teams: BTreeMap<String, u64>,
    pub rollback_unknown: u64,
    pub modes_ok: u64,
    pub expectations_ok: u64,
    pub first_problem: Option<String>,
    pub prompt_tokens: u64,
    pub llm_calls: u64,
}

impl Tally {
    pub fn add(&mut self, conv: &Conversation, obs: &Observation, check_url: bool) {
        self.conversations += 1;
        self.prompt_tokens += obs.prompt_tokens;
        self.llm_calls += obs.llm_calls;
        if let Some(team) = &obs.team_after_5 {
            *self.teams.entry(team.clone()).or_default() += 1;
        }
        let unknown = obs.unknown_after_5 == ["rollback_plan"];
        self.rollback_unknown += u64::from(unknown);
        if obs.modes == EXPECTED_MODES {
            self.modes_ok += 1;
        } else if self.first_problem.is_none() {
            self.first_problem = Some(format!("{}: modes {:?}", conv.thread_id, obs.modes));
        }
        let expected_unknown: &[&str] = if conv.rollback_unknown { &["rollback_plan"] } else { &[] };
        let url_ok = !check_url || obs.url_after_7.as_deref() == Some(conv.submission_url.as_str());
        let ok = obs.team_after_5.as_deref() == Some(conv.team)
            && obs.unknown_after_5 == expected_unknown
            && url_ok
            && obs.replies == 8;
        if ok {
            self.expectations_ok += 1;
        } else if self.first_problem.is_none() {
            self.first_problem = Some(format!(
                "{}: team {:?} unknown {:?} url {:?} replies {}",
                conv.thread_id, obs.team_after_5, obs.unknown_after_5, obs.url_after_7, obs.replies
            ));
        }
    }

    /// Compares with the counts the generated conversations imply (and, for the full 2,000, with
    /// the counts published in bench/WORKLOADS.md).
    pub fn check(&self, convs: &[Conversation]) -> Result<(), String> {
        let mut expected: BTreeMap<String, u64> = BTreeMap::new();
        for c in convs {
            *expected.entry(c.team.to_owned()).or_default() += 1;
        }
        let expected_unknown = convs.iter().filter(|c| c.rollback_unknown).count() as u64;
        if convs.len() == 2000 {
            let published: BTreeMap<String, u64> =
                [("team-dba", 690), ("team-net", 692), ("team-app", 618)].map(|(t, n)| (t.to_owned(), n)).into();
            if expected != published || expected_unknown != 491 {
                return Err(format!(
                    "generator disagrees with bench/WORKLOADS.md: {expected:?}, unknown {expected_unknown}"
                ));
            }
        }
        let n = convs.len() as u64;
        let mut problems = Vec::new();
        if self.conversations != n {
            problems.push(format!("{} conversations replayed, {n} expected", self.conversations));
        }
        if self.teams != expected {
            problems.push(format!("teams {:?}, expected {expected:?}", self.teams));
        }
        if self.rollback_unknown != expected_unknown {
            problems.push(format!("rollback_plan unknown in {}, expected {expected_unknown}", self.rollback_unknown));
        }
        if self.modes_ok != n {
            problems.push(format!("per-turn modes right in {} of {n}", self.modes_ok));
        }
        if self.expectations_ok != n {
            problems.push(format!("per-conversation expectations met in {} of {n}", self.expectations_ok));
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(format!("{} (first: {})", problems.join("; "), self.first_problem.as_deref().unwrap_or("-")))
        }
    }

    pub fn summary(&self) -> String {
        let teams: Vec<String> =
            TEAMS.iter().map(|(id, _)| format!("{id} {}", self.teams.get(*id).copied().unwrap_or(0))).collect();
        format!(
            "{}; rollback_plan unknown {}; modes ok {}/{}",
            teams.join(", "),
            self.rollback_unknown,
            self.modes_ok,
            self.conversations
        )
    }
}

/// Counts checkpointer traffic, serialized state bytes and time per store operation (used only by
/// the counting pass, never by the timed rows).
pub struct CountingCheckpointer {
    pub inner: Arc<dyn Checkpointer>,
    pub puts: AtomicU64,
    pub put_state_bytes: AtomicU64,
    pub latest: AtomicU64,
    pub thread: AtomicU64,
    pub find_idempotent: AtomicU64,
    pub other: AtomicU64,
    /// Wall time spent in `put`, `latest` and `thread` (ns).
    pub put_ns: AtomicU64,
    pub latest_ns: AtomicU64,
    pub thread_ns: AtomicU64,
}

impl CountingCheckpointer {
    pub fn new(inner: Arc<dyn Checkpointer>) -> Self {
        Self {
            inner,
            puts: AtomicU64::new(0),
            put_state_bytes: AtomicU64::new(0),
            latest: AtomicU64::new(0),
            thread: AtomicU64::new(0),
            find_idempotent: AtomicU64::new(0),
            other: AtomicU64::new(0),
            put_ns: AtomicU64::new(0),
            latest_ns: AtomicU64::new(0),
            thread_ns: AtomicU64::new(0),
        }
    }

    /// Average microseconds of `put`, `latest` and `thread`.
    pub fn op_micros(&self) -> [f64; 3] {
        let avg = |ns: &AtomicU64, n: &AtomicU64| {
            ns.load(Ordering::Relaxed) as f64 / 1_000.0 / n.load(Ordering::Relaxed).max(1) as f64
        };
        [avg(&self.put_ns, &self.puts), avg(&self.latest_ns, &self.latest), avg(&self.thread_ns, &self.thread)]
    }

    pub fn snapshot(&self) -> [u64; 6] {
        [&self.puts, &self.put_state_bytes, &self.latest, &self.thread, &self.find_idempotent, &self.other]
            .map(|c| c.load(Ordering::Relaxed))
    }
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// Runs a store operation, counting it in `count` and adding its time to `ns`.
async fn timed<T>(count: &AtomicU64, ns: &AtomicU64, op: impl std::future::Future<Output = T>) -> T {
    bump(count);
    let started = Instant::now();
    let result = op.await;
    ns.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
    result
}

#[async_trait]
impl Checkpointer for CountingCheckpointer {
    async fn latest(&self, thread_id: &str) -> Result<Option<Checkpoint>, CheckpointError> {
        timed(&self.latest, &self.latest_ns, self.inner.latest(thread_id)).await
    }

    async fn put(&self, checkpoint: &Checkpoint) -> Result<(), CheckpointError> {
        self.put_state_bytes.fetch_add(checkpoint.state.len() as u64, Ordering::Relaxed);
        timed(&self.puts, &self.put_ns, self.inner.put(checkpoint)).await
    }

    async fn history(&self, thread_id: &str, limit: usize) -> Result<Vec<Checkpoint>, CheckpointError> {
        bump(&self.other);
        self.inner.history(thread_id, limit).await
    }

    async fn find_idempotent(&self, thread_id: &str, key: &str) -> Result<Option<IdempotentRun>, CheckpointError> {
        bump(&self.find_idempotent);
        self.inner.find_idempotent(thread_id, key).await
    }

    /// Counted and timed as a `latest` read: it is the one read of the newest checkpoint, with
    /// the thread's creation time joined in.
    async fn head(&self, thread_id: &str) -> Result<Option<ThreadHead>, CheckpointError> {
        timed(&self.latest, &self.latest_ns, self.inner.head(thread_id)).await
    }

    async fn thread(&self, thread_id: &str) -> Result<Option<ThreadSummary>, CheckpointError> {
        timed(&self.thread, &self.thread_ns, self.inner.thread(thread_id)).await
    }

    async fn list_threads(&self, query: &ThreadQuery) -> Result<ThreadPage, CheckpointError> {
        bump(&self.other);
        self.inner.list_threads(query).await
    }

    async fn unfinished_threads(&self) -> Result<Vec<String>, CheckpointError> {
        bump(&self.other);
        self.inner.unfinished_threads().await
    }

    async fn unfinished_runs(&self) -> Result<Vec<UnfinishedRun>, CheckpointError> {
        bump(&self.other);
        self.inner.unfinished_runs().await
    }

    async fn delete_thread(&self, thread_id: &str) -> Result<bool, CheckpointError> {
        bump(&self.other);
        self.inner.delete_thread(thread_id).await
    }

    async fn renew_lease(&self, replica: &str, ttl: Duration) -> Result<(), CheckpointError> {
        bump(&self.other);
        self.inner.renew_lease(replica, ttl).await
    }

    async fn lease_remaining(&self, replica: &str) -> Result<Option<Duration>, CheckpointError> {
        bump(&self.other);
        self.inner.lease_remaining(replica).await
    }

    async fn release_lease(&self, replica: &str) -> Result<(), CheckpointError> {
        bump(&self.other);
        self.inner.release_lease(replica).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::conversations;

    #[test]
    fn check_fails_on_wrong_counts() {
        let convs = conversations(20);
        let right = |c: &Conversation| Observation {
            modes: EXPECTED_MODES.iter().map(|m| (*m).to_owned()).collect(),
            team_after_5: Some(c.team.to_owned()),
            unknown_after_5: if c.rollback_unknown { vec!["rollback_plan".to_owned()] } else { vec![] },
            url_after_7: Some(c.submission_url.clone()),
            replies: 8,
            ..Default::default()
        };
        let mut ok = Tally::default();
        convs.iter().for_each(|c| ok.add(c, &right(c), true));
        assert!(ok.check(&convs).is_ok());

        let mut wrong = Tally::default();
        for (i, c) in convs.iter().enumerate() {
            let mut obs = right(c);
            if i == 3 {
                obs.team_after_5 =
                    Some("team-app".to_owned()).filter(|_| c.team != "team-app").or(Some("team-net".into()));
            }
            wrong.add(c, &obs, true);
        }
        assert!(wrong.check(&convs).is_err());
    }
}
