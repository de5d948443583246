//! `frontdesk-bench chaos-kill`: W1 replayed over gRPC against the REAL `frontdesk-server`
//! binary while it is SIGKILLed at random and restarted (same port, same replica id), then every
//! acknowledged turn is checked against the server's own records. The pieces
//! `chaos-replicas` (`chaos_replicas.rs`) shares live here too: server processes, the retrying
//! caller, the exactly-once verification and the figures.
//!
//! ```text
//! cargo build --release -p frontdesk-server -p frontdesk-bench
//! target/release/frontdesk-bench chaos-kill [--turns 2000] [--kills 100] [--conversations 8]
//!     [--database sqlite|postgres] [--postgres-url URL] [--model-latency-ms 2]
//!     [--uptime-ms 50..1500] [--seed N] [--server-bin PATH] [--keep]
//! ```
//!
//! The model is W1's rules-following SCRIPTED model (a test double, not an LLM) served by this
//! process over HTTP as an OpenAI-compatible endpoint (`model_http.rs`); the server is configured
//! with `model.provider = "openai"` and that endpoint, so it outlives every kill. The intake
//! workflow runs with the bench's W1 fields and teams and the default outbox submitter.
//!
//! C callers each replay W1 conversations turn by turn (conversation `conv-NNNNNN` of the
//! workload), every StartConversation and SendMessage with an idempotency key, retrying on
//! UNAVAILABLE, ABORTED (after its RetryInfo), broken streams and connection errors until the
//! turn is acknowledged (its TurnResult arrives). Callers keep taking new conversations until the
//! killer has killed K times and at least N turns were acknowledged, then finish the ones they
//! hold. The verification reads every conversation back with GetConversation and the intake
//! outbox from the database: each acknowledged turn's user message and reply exactly once and in
//! order, one submission per conversation, and W1's outcome counts (`drive::Tally`). Exits
//! non-zero on any lost or duplicated turn, unacknowledged turn or outcome mismatch; the run's
//! directory (server logs, database) is then kept and its path printed.

use std::{
    collections::{BTreeMap, HashMap},
    fmt::Write as _,
    fs::OpenOptions,
    future::Future,
    io::{BufRead, BufReader, Write as _},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::{
        atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering},
        mpsc, Arc, Mutex,
    },
    time::{Duration, Instant},
};

use frontdesk_client::{code_name, v1, Client, ClientError, SendOptions, StartOptions};
use frontdesk_store::{Database, StoreOptions};
use tonic::{transport::Endpoint, Code};

use crate::{
    drive::{Observation, Tally},
    model_http::RulesEndpoint,
    rules::BENCH_INTAKE_TOML,
    stats,
    workload::{self, Conversation, SplitMix64},
};

/// Where the outbox submitter says submissions are (`{base}/{team}/{run id}`).
pub const SUBMIT_BASE: &str = "https://changes.example.invalid";
/// One attempt of a call gives up after this long (then it is retried like a broken one).
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(60);
/// A turn not acknowledged after this long is reported as unacknowledged.
const TURN_DEADLINE: Duration = Duration::from_secs(180);
/// Conversations generated; callers stop taking new ones when they run out.
const MAX_CONVERSATIONS: usize = 50_000;

// ---------------------------------------------------------------------------------------------
// options

#[derive(Debug, Clone)]
pub struct Opts {
    pub turns: usize,
    pub kills: usize,
    pub conversations: usize,
    pub postgres: bool,
    pub postgres_url: Option<String>,
    pub server_bin: Option<PathBuf>,
    pub model_latency_ms: u64,
    pub uptime_ms: (u64, u64),
    pub seed: u64,
    pub keep: bool,
}

impl Opts {
    pub fn parse(rest: impl Iterator<Item = String>, defaults: Opts) -> Result<Opts, String> {
        let mut o = defaults;
        let mut it = rest;
        while let Some(flag) = it.next() {
            let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
            let number = |v: String| v.parse::<u64>().map_err(|e| format!("{flag}: {e}"));
            match flag.as_str() {
                "--turns" => o.turns = number(value()?)? as usize,
                "--kills" => o.kills = number(value()?)? as usize,
                "--conversations" => o.conversations = (number(value()?)? as usize).max(1),
                "--database" => match value()?.as_str() {
                    "sqlite" => o.postgres = false,
                    "postgres" => o.postgres = true,
                    other => return Err(format!("--database {other}: sqlite or postgres")),
                },
                "--postgres-url" => o.postgres_url = Some(value()?).filter(|u| !u.is_empty()),
                "--server-bin" => o.server_bin = Some(PathBuf::from(value()?)),
                "--model-latency-ms" => o.model_latency_ms = number(value()?)?,
                "--uptime-ms" => {
                    let v = value()?;
                    let (lo, hi) = v.split_once("..").ok_or("--uptime-ms MIN..MAX")?;
                    let lo = number(lo.to_owned())?;
                    o.uptime_ms = (lo, number(hi.to_owned())?.max(lo + 1));
                }
                "--seed" => o.seed = number(value()?)?,
                "--keep" => o.keep = true,
                other => return Err(format!("unknown option {other}")),
            }
        }
        if o.postgres_url.is_none() {
            o.postgres_url = std::env::var("FRONTDESK_TEST_POSTGRES_URL").ok().filter(|u| !u.is_empty());
        }
        Ok(o)
    }

    pub fn default_seed() -> u64 {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64)
    }
}

// ---------------------------------------------------------------------------------------------
// the run's environment: directory, model endpoint, database, server processes

/// A run's directory (server logs, SQLite database, configuration), its model endpoint and its
/// database.
pub struct Env {
    pub dir: tempfile::TempDir,
    pub model: RulesEndpoint,
    pub db_url: String,
    /// PostgreSQL: the database created for the run (dropped at the end, or when the run fails).
    pub pg: Option<frontdesk_store::scratch::ScratchDatabase>,
    intake: PathBuf,
    bin: PathBuf,
}

impl Env {
    pub async fn new(
        tag: &str,
        postgres_admin: Option<&str>,
        bin: Option<&Path>,
        latency_ms: u64,
    ) -> Result<Env, String> {
        let bin = server_bin(bin)?;
        let dir = tempfile::Builder::new().prefix(&format!("frontdesk-{tag}-")).tempdir().map_err(err)?;
        let intake = dir.path().join("w1-intake.toml");
        std::fs::write(&intake, BENCH_INTAKE_TOML).map_err(err)?;
        let model = RulesEndpoint::start().await?;
        model.set_latency(Duration::from_millis(latency_ms));
        let (db_url, pg) = match postgres_admin {
            None => (format!("sqlite://{}", dir.path().join("frontdesk.db").display()), None),
            Some(admin) => {
                let scratch = crate::scratch_database(admin, &format!("bench_{}", tag.replace('-', "_"))).await?;
                (scratch.url().to_owned(), Some(scratch))
            }
        };
        Ok(Env { dir, model, db_url, pg, intake, bin })
    }

    /// A server process (not started) as replica `replica_id` on `port`.
    pub fn server(&self, replica_id: &str, port: u16) -> Result<ServerProc, String> {
        let config = self.dir.path().join(format!("{replica_id}.toml"));
        let toml = format!(
            r#"# frontdesk-bench chaos: replica {replica_id}
shutdown_grace_secs = 2

[database]
url = "{db}"

[model]
provider = "openai"
base_url = "{base}"
model = "{model}"
api_key = "unused"
request_timeout_secs = 30
max_attempts = 4

[runs]
replica_id = "{replica_id}"

[log]
format = "text"
filter = "info"

[workflows.intake]
config = "{intake}"

[workflows.intake.submitter]
kind = "outbox"
base_url = "{SUBMIT_BASE}"
"#,
            db = self.db_url,
            base = self.model.base_url(),
            model = crate::model_http::MODEL_NAME,
            intake = self.intake.display(),
        );
        std::fs::write(&config, toml).map_err(err)?;
        Ok(ServerProc {
            replica_id: replica_id.to_owned(),
            port,
            bin: self.bin.clone(),
            config,
            log: self.dir.path().join(format!("{replica_id}.log")),
            child: None,
            starts: 0,
        })
    }

    /// Drops the run's PostgreSQL database and removes the directory, or keeps both (`keep`)
    /// and says where they are.
    pub async fn finish(self, keep: bool) {
        if keep {
            let dir = self.dir.keep();
            println!("  kept for inspection: {} (server logs *.log, configuration, database)", dir.display());
            if let Some(pg) = self.pg {
                println!("  kept PostgreSQL database {}", pg.keep());
            }
            return;
        }
        if let Some(pg) = self.pg {
            crate::drop_scratch_database(pg).await;
        }
    }

    /// Intake submissions per conversation, read from the outbox table.
    pub async fn submissions(&self, ids: &[String]) -> Result<HashMap<String, Vec<String>>, String> {
        let db = Database::connect(&self.db_url, StoreOptions::default()).await.map_err(err)?;
        let mut out = HashMap::new();
        for id in ids {
            let list = db.list_submissions(id).await.map_err(err)?;
            out.insert(id.clone(), list.into_iter().map(|s| s.url.unwrap_or_default()).collect());
        }
        db.close().await;
        Ok(out)
    }
}

/// `--server-bin`, else `frontdesk-server` next to this binary (target/release after
/// `cargo build --release -p frontdesk-server -p frontdesk-bench`).
pub fn server_bin(given: Option<&Path>) -> Result<PathBuf, String> {
    let path = match given {
        Some(p) => p.to_owned(),
        None => std::env::current_exe().map_err(err)?.with_file_name("frontdesk-server"),
    };
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!(
            "no server binary at {}: build it with `cargo build --release -p frontdesk-server` or pass --server-bin",
            path.display()
        ))
    }
}

/// A loopback port free now (the OS picks it; the listener is closed again).
pub fn free_port() -> Result<u16, String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(err)?;
    Ok(listener.local_addr().map_err(err)?.port())
}

/// One replica: the real server binary as a child process on a fixed port, its log appended
/// to `<replica>.log` across restarts.
pub struct ServerProc {
    pub replica_id: String,
    pub port: u16,
    bin: PathBuf,
    config: PathBuf,
    pub log: PathBuf,
    child: Option<Child>,
    pub starts: u32,
}

impl ServerProc {
    /// A server process (not started) run with a configuration file written by the caller.
    pub fn with_config(replica_id: &str, port: u16, bin: PathBuf, config: PathBuf, log: PathBuf) -> ServerProc {
        ServerProc { replica_id: replica_id.to_owned(), port, bin, config, log, child: None, starts: 0 }
    }

    /// The running process's id.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn spawn(&mut self) -> Result<mpsc::Receiver<()>, String> {
        self.starts += 1;
        let mut child = Command::new(&self.bin)
            .arg("--config")
            .arg(&self.config)
            .arg("--listen")
            .arg(format!("127.0.0.1:{}", self.port))
            .env_remove("RUST_LOG")
            .env_remove("FRONTDESK_CONFIG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("{}: {e}", self.bin.display()))?;
        let stderr = child.stderr.take().ok_or("no stderr")?;
        let mut file = OpenOptions::new().create(true).append(true).open(&self.log).map_err(err)?;
        let _ = writeln!(file, "=== start {} (pid {}) at {}", self.starts, child.id(), utc_now());
        let (tx, rx) = mpsc::channel();
        let start = self.starts;
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.contains("frontdesk-server listening") {
                    let _ = tx.send(());
                }
                let _ = writeln!(file, "[{start}] {line}");
            }
        });
        self.child = Some(child);
        Ok(rx)
    }

    /// Starts the process and waits until it logs that it listens; retries when it exits first
    /// (the port not yet free again). Returns how long that took.
    pub async fn start(&mut self) -> Result<Duration, String> {
        let began = Instant::now();
        for _ in 0..100 {
            let ready = self.spawn()?;
            loop {
                if ready.try_recv().is_ok() {
                    return Ok(began.elapsed());
                }
                let child = self.child.as_mut().ok_or("no child")?;
                if child.try_wait().map_err(err)?.is_some() {
                    self.child = None;
                    break;
                }
                if began.elapsed() > Duration::from_secs(120) {
                    self.kill();
                    return Err(format!(
                        "{} did not listen within 120 s (log {})",
                        self.replica_id,
                        self.log.display()
                    ));
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(format!("{} exited before listening 100 times (log {})", self.replica_id, self.log.display()))
    }

    /// SIGKILL (no shutdown hook, nothing flushed) and reap.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
            if let Ok(mut file) = OpenOptions::new().append(true).open(&self.log) {
                let _ = writeln!(file, "=== SIGKILL at {}", utc_now());
            }
        }
    }
}

impl Drop for ServerProc {
    fn drop(&mut self) {
        self.kill();
    }
}

// ---------------------------------------------------------------------------------------------
// callers

/// A client connection that connects on first use and after each failure. The SDK's own
/// retries are off: every attempt is made, timed and counted here, as the report needs.
fn lazy_client(url: &str) -> Client {
    let endpoint = Endpoint::from_shared(url.to_owned()).expect("a valid loopback URL");
    Client::from_channel(endpoint.connect_timeout(Duration::from_millis(500)).connect_lazy()).with_retry_policy(None)
}

/// Attempts in flight, by attempt id: (replica index, what), for `chaos-replicas` to see which
/// turns a killed replica was serving.
pub type InFlight = Arc<Mutex<HashMap<u64, (usize, String)>>>;

static ATTEMPT_IDS: AtomicU64 = AtomicU64::new(0);

/// A call that finally succeeded.
pub struct Attempted<T> {
    pub value: T,
    /// The replica (index into the caller's URLs) that answered.
    pub endpoint: usize,
    pub attempts: u32,
    pub wait: Duration,
}

enum Retry {
    No,
    /// After a connection-level failure: a new connection, the next replica, a backoff.
    Reconnect,
    Backoff,
}

/// A label for the error counts and whether (and how) to retry.
fn classify(e: &ClientError) -> (String, Retry, Option<Duration>) {
    match e {
        ClientError::Transport(_) => ("transport error".into(), Retry::Reconnect, None),
        ClientError::StreamEndedWithoutResult => ("stream ended without a result".into(), Retry::Reconnect, None),
        ClientError::InvalidApiKey => ("invalid api key".into(), Retry::No, None),
        ClientError::Status(api) => {
            let label = match &api.reason {
                Some(reason) => format!("{} {reason}", code_name(api.code)),
                None => code_name(api.code).to_owned(),
            };
            let retry = match api.code {
                Code::Aborted | Code::DeadlineExceeded | Code::ResourceExhausted => Retry::Backoff,
                Code::Unavailable | Code::Unknown | Code::Internal | Code::Cancelled => Retry::Reconnect,
                _ => Retry::No,
            };
            (label, retry, api.retry_after)
        }
    }
}

/// One client of the service: a connection per replica, the replica it currently uses (it moves
/// to the next one after a connection-level failure), and counts of the errors it retried.
pub struct Caller {
    pub name: String,
    urls: Vec<String>,
    clients: Vec<Client>,
    pub current: usize,
    pub errors: Errors,
    /// The longest RetryInfo delay the server asked for.
    pub longest_retry_info: Duration,
    inflight: Option<InFlight>,
}

impl Caller {
    pub fn new(name: &str, urls: Vec<String>, prefer: usize, inflight: Option<InFlight>) -> Caller {
        let clients = urls.iter().map(|u| lazy_client(u)).collect();
        Caller {
            name: name.to_owned(),
            current: prefer % urls.len(),
            urls,
            clients,
            errors: BTreeMap::new(),
            longest_retry_info: Duration::ZERO,
            inflight,
        }
    }

    /// Calls `f` until it succeeds, retrying what a client should retry; `what` names the call in
    /// errors and in the in-flight list.
    pub async fn call<T, F, Fut>(&mut self, what: &str, mut f: F) -> Result<Attempted<T>, String>
    where
        F: FnMut(Client) -> Fut,
        Fut: Future<Output = Result<T, ClientError>>,
    {
        let first = Instant::now();
        let mut attempts = 0u32;
        let mut backoff = Duration::from_millis(10);
        loop {
            attempts += 1;
            let endpoint = self.current;
            let id = ATTEMPT_IDS.fetch_add(1, Ordering::Relaxed);
            if let Some(inflight) = &self.inflight {
                inflight.lock().expect("in-flight list").insert(id, (endpoint, format!("{what} by {}", self.name)));
            }
            let outcome = tokio::time::timeout(ATTEMPT_TIMEOUT, f(self.clients[endpoint].clone())).await;
            if let Some(inflight) = &self.inflight {
                inflight.lock().expect("in-flight list").remove(&id);
            }
            let (label, retry, retry_info, shown) = match outcome {
                Ok(Ok(value)) => return Ok(Attempted { value, endpoint, attempts, wait: first.elapsed() }),
                Ok(Err(e)) => {
                    let (label, retry, info) = classify(&e);
                    (label, retry, info, e.to_string())
                }
                Err(_) => ("attempt timed out".to_owned(), Retry::Reconnect, None, "attempt timed out".to_owned()),
            };
            let entry = self.errors.entry(label).or_insert_with(|| (0, shown.clone()));
            entry.0 += 1;
            match retry {
                Retry::No => return Err(format!("{what}: {shown} (attempt {attempts}, via {})", self.urls[endpoint])),
                Retry::Reconnect => {
                    self.clients[endpoint] = lazy_client(&self.urls[endpoint]);
                    self.current = (endpoint + 1) % self.urls.len();
                }
                Retry::Backoff => {}
            }
            if first.elapsed() > TURN_DEADLINE {
                return Err(format!(
                    "{what}: not acknowledged after {:.1} s and {attempts} attempts; last error: {shown}",
                    first.elapsed().as_secs_f64()
                ));
            }
            let delay = match retry_info {
                Some(d) => {
                    self.longest_retry_info = self.longest_retry_info.max(d);
                    d
                }
                None => {
                    let d = backoff;
                    backoff = (backoff * 2).min(Duration::from_millis(250));
                    d
                }
            };
            tokio::time::sleep(delay).await;
        }
    }

    /// StartConversation for W1 conversation `id`, idempotently.
    pub async fn start(&mut self, id: &str) -> Result<Attempted<v1::StartConversationResponse>, String> {
        let opts = StartOptions { conversation_id: Some(id.to_owned()), idempotency_key: Some(format!("{id}-start")) };
        self.call(&format!("{id} start"), |client| {
            let opts = opts.clone();
            async move { client.start_conversation("intake", opts).await }
        })
        .await
    }

    /// SendMessage of turn `turn` (0-based) of conversation `id`, with the turn's key.
    pub async fn send(&mut self, id: &str, turn: usize, text: &str) -> Result<Attempted<TurnAck>, String> {
        let key = turn_key(id, turn);
        let what = format!("{id} turn {}", turn + 1);
        let got = self
            .call(&what, |client| {
                let (id, text) = (id.to_owned(), text.to_owned());
                let opts = SendOptions { idempotency_key: Some(key.clone()), queue_if_busy: false };
                async move { client.send_message_and_wait(&id, &text, opts).await }
            })
            .await?;
        let (events, result) = got.value;
        let resumed =
            events.iter().any(|e| matches!(&e.kind, Some(v1::run_event::Kind::RunStarted(started)) if started.resumed));
        let state = match result.conversation.as_ref().and_then(|c| c.state.as_ref()) {
            Some(v1::conversation::State::Intake(state)) => Some(state.clone()),
            _ => None,
        };
        let at = |e: &v1::RunEvent| e.time.as_ref().map(|t| t.seconds as f64 + f64::from(t.nanos) / 1e9);
        let span = match (events.first().and_then(at), events.last().and_then(at)) {
            (Some(first), Some(last)) if last >= first => Some(Duration::from_secs_f64(last - first)),
            _ => None,
        };
        let reply = result.reply.clone().unwrap_or_default();
        let ack = TurnAck {
            run_id: result.run_id.clone(),
            reply_id: reply.message_id,
            replayed: result.replayed,
            resumed,
            state,
            endpoint: got.endpoint,
            attempts: got.attempts,
            wait: got.wait,
            span,
        };
        Ok(Attempted { value: ack, endpoint: got.endpoint, attempts: got.attempts, wait: got.wait })
    }

    pub async fn get(&mut self, id: &str) -> Result<v1::GetConversationResponse, String> {
        let got = self
            .call(&format!("{id} get"), |client| {
                let id = id.to_owned();
                async move { client.get_conversation(&id).await }
            })
            .await?;
        Ok(got.value)
    }
}

pub fn turn_key(id: &str, turn: usize) -> String {
    format!("{id}-turn-{}", turn + 1)
}

/// What a caller got for one turn.
#[derive(Debug, Clone)]
pub struct TurnAck {
    pub run_id: String,
    pub reply_id: String,
    pub replayed: bool,
    /// The events included RunStarted with `resumed`: the run was continued after a crash or
    /// taken over from another replica.
    pub resumed: bool,
    pub state: Option<v1::IntakeState>,
    pub endpoint: usize,
    pub attempts: u32,
    pub wait: Duration,
    /// The run's own span on the server's clock: its first event to its last (none for a
    /// replay without events).
    pub span: Option<Duration>,
}

/// One conversation as the callers drove it.
#[derive(Debug, Clone)]
pub struct ConvRun {
    pub index: usize,
    pub started: bool,
    /// The acknowledgement of each turn (the first one a caller got).
    pub acks: Vec<Option<TurnAck>>,
    /// Another caller's acknowledgement of the same turn (chaos-replicas' observers), to compare.
    pub observed: Vec<Option<TurnAck>>,
    pub failure: Option<String>,
}

impl ConvRun {
    pub fn new(index: usize) -> ConvRun {
        ConvRun { index, started: false, acks: vec![None; 8], observed: vec![None; 8], failure: None }
    }
}

/// Replays conversation `c` with one caller.
pub async fn drive_one(caller: &mut Caller, c: &Conversation, acked: &AtomicUsize) -> ConvRun {
    let mut run = ConvRun::new(c.index);
    if let Err(e) = caller.start(&c.thread_id).await {
        run.failure = Some(e);
        return run;
    }
    run.started = true;
    for (turn, text) in c.turns.iter().enumerate() {
        match caller.send(&c.thread_id, turn, text).await {
            Ok(ack) => {
                run.acks[turn] = Some(ack.value);
                acked.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                run.failure = Some(e);
                break;
            }
        }
    }
    run
}

// ---------------------------------------------------------------------------------------------
// verification

/// What the server's records say about the acknowledged turns.
#[derive(Debug)]
pub struct Verdict {
    pub conversations: usize,
    pub acked: usize,
    pub unacked: usize,
    pub lost: usize,
    pub duplicated: usize,
    pub submissions: usize,
    pub duplicate_submissions: usize,
    /// Turns two callers acknowledged with different runs or replies.
    pub divergent: usize,
    pub problems: Vec<String>,
    pub outcome: Result<String, String>,
}

impl Verdict {
    pub fn ok(&self) -> bool {
        self.problems.is_empty() && self.outcome.is_ok()
    }

    fn problem(&mut self, p: String) {
        if self.problems.len() < 50 {
            self.problems.push(p);
        } else if self.problems.len() == 50 {
            self.problems.push("(more problems not listed)".into());
        }
    }
}

fn role(m: &v1::Message) -> v1::Role {
    v1::Role::try_from(m.role).unwrap_or(v1::Role::Unspecified)
}

/// GetConversation of every id through `url`, eight at a time, in the order of `ids`.
async fn fetch_all(url: &str, ids: &[String]) -> Vec<Result<v1::GetConversationResponse, String>> {
    let ids = Arc::new(ids.to_vec());
    let next = Arc::new(AtomicUsize::new(0));
    let mut workers = Vec::new();
    for w in 0..8 {
        let (ids, next, url) = (ids.clone(), next.clone(), url.to_owned());
        workers.push(tokio::spawn(async move {
            let mut caller = Caller::new(&format!("verifier-{w}"), vec![url], 0, None);
            let mut got = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(id) = ids.get(i) else { break };
                got.push((i, caller.get(id).await));
            }
            got
        }));
    }
    let mut all: Vec<Option<Result<v1::GetConversationResponse, String>>> = vec![None; ids.len()];
    for w in workers {
        match w.await {
            Ok(got) => got.into_iter().for_each(|(i, r)| all[i] = Some(r)),
            Err(e) => return vec![Err(format!("verifier task: {e}")); ids.len()],
        }
    }
    all.into_iter().map(|r| r.unwrap_or_else(|| Err("not fetched".into()))).collect()
}

/// Reads every driven conversation back from the server at `url` and the outbox from the
/// database, and checks the acknowledged turns exactly once and W1's outcome counts.
pub async fn verify(url: &str, env: &Env, convs: &[Conversation], runs: &[ConvRun]) -> Verdict {
    let mut v = Verdict {
        conversations: runs.len(),
        acked: 0,
        unacked: 0,
        lost: 0,
        duplicated: 0,
        submissions: 0,
        duplicate_submissions: 0,
        divergent: 0,
        problems: Vec::new(),
        outcome: Ok(String::new()),
    };
    let ids: Vec<String> = runs.iter().map(|r| convs[r.index].thread_id.clone()).collect();
    let submissions = match env.submissions(&ids).await {
        Ok(s) => s,
        Err(e) => {
            v.problem(format!("cannot read the intake outbox: {e}"));
            HashMap::new()
        }
    };
    let mut fetched = fetch_all(url, &ids).await.into_iter();
    let mut tally = Tally::default();
    for run in runs {
        let got = fetched.next().unwrap_or_else(|| Err("not fetched".into()));
        let c = &convs[run.index];
        let id = &c.thread_id;
        let acked = run.acks.iter().filter(|a| a.is_some()).count();
        v.acked += acked;
        v.unacked += 8 - acked;
        if let Some(f) = &run.failure {
            v.problem(format!("{id}: {f}"));
        }
        if !run.started {
            continue;
        }
        let got = match got {
            Ok(got) => got,
            Err(e) => {
                v.lost += acked;
                v.problem(format!("{id}: GetConversation failed: {e}"));
                continue;
            }
        };
        let messages = &got.messages;
        // Message ids are unique.
        let mut seen: HashMap<&str, usize> = HashMap::new();
        for m in messages {
            *seen.entry(m.message_id.as_str()).or_default() += 1;
        }
        // The user messages: exactly the acknowledged turns, in order, each once.
        let users: Vec<(usize, &v1::Message)> =
            messages.iter().enumerate().filter(|(_, m)| role(m) == v1::Role::User).collect();
        for (turn, ack) in run.acks.iter().enumerate() {
            let Some(ack) = ack else { continue };
            let text = &c.turns[turn];
            let n = users.iter().filter(|(_, m)| &m.text == text).count();
            let replies = seen.get(ack.reply_id.as_str()).copied().unwrap_or(0);
            if n == 0 || replies == 0 || ack.reply_id.is_empty() {
                v.lost += 1;
                v.problem(format!(
                    "{id} turn {}: LOST (user message {n} times, reply {} {replies} times; run {})",
                    turn + 1,
                    ack.reply_id,
                    ack.run_id
                ));
            } else if n > 1 || replies > 1 {
                v.duplicated += 1;
                v.problem(format!(
                    "{id} turn {}: DUPLICATED (user message {n} times, reply {} {replies} times; run {})",
                    turn + 1,
                    ack.reply_id,
                    ack.run_id
                ));
            }
            if let Some(other) = &run.observed[turn] {
                if other.run_id != ack.run_id || other.reply_id != ack.reply_id {
                    v.divergent += 1;
                    v.problem(format!(
                        "{id} turn {}: two callers acknowledged different runs: {} / {} (replies {} / {})",
                        turn + 1,
                        ack.run_id,
                        other.run_id,
                        ack.reply_id,
                        other.reply_id
                    ));
                }
            }
        }
        let user_texts: Vec<&str> = users.iter().map(|(_, m)| m.text.as_str()).collect();
        let expected: Vec<&str> = c.turns[..acked].iter().map(String::as_str).collect();
        if user_texts != expected {
            v.problem(format!("{id}: user messages {user_texts:?}, expected the {acked} acknowledged turns in order"));
        }
        // Each turn's assistant messages: exactly its reply, right after its user message.
        for (k, (pos, _)) in users.iter().enumerate() {
            let end = users.get(k + 1).map_or(messages.len(), |(p, _)| *p);
            let replies: Vec<&v1::Message> =
                messages[pos + 1..end].iter().filter(|m| role(m) == v1::Role::Assistant).collect();
            let ack = run.acks.get(k).and_then(Option::as_ref);
            let right = replies.len() == 1 && ack.is_none_or(|a| replies[0].message_id == a.reply_id);
            if !right {
                v.problem(format!(
                    "{id} turn {}: assistant messages after the user message: {:?}, acknowledged reply {:?}",
                    k + 1,
                    replies.iter().map(|m| m.message_id.as_str()).collect::<Vec<_>>(),
                    ack.map(|a| a.reply_id.as_str())
                ));
            }
        }
        let turn_count = got.conversation.as_ref().map_or(0, |c| c.turn_count as usize);
        if turn_count != acked {
            v.problem(format!("{id}: turn_count {turn_count}, {acked} turns acknowledged"));
        }
        // The outbox: one submission per conversation, the one turn 7's run made.
        let subs = submissions.get(id).cloned().unwrap_or_default();
        v.submissions += subs.len();
        v.duplicate_submissions += subs.len().saturating_sub(1);
        if acked == 8 {
            let turn7 = run.acks[6].as_ref().map(|a| a.run_id.as_str()).unwrap_or_default();
            let want = format!("{SUBMIT_BASE}/{}/{turn7}", c.team);
            if subs != [want.clone()] {
                v.problem(format!("{id}: submissions {subs:?}, expected exactly [{want}]"));
            }
        }
        // W1's outcome, from the acknowledged results.
        let mut obs = Observation::default();
        for (turn, ack) in run.acks.iter().enumerate() {
            let Some(ack) = ack else { continue };
            obs.replies += usize::from(!ack.reply_id.is_empty());
            match &ack.state {
                Some(state) => obs.record_grpc_turn(turn, state),
                None => obs.modes.push("?".into()),
            }
        }
        tally.add(c, &obs, false);
    }
    let driven: Vec<Conversation> = runs.iter().map(|r| convs[r.index].clone()).collect();
    v.outcome = tally.check(&driven).map(|()| tally.summary());
    if v.unacked > 0 {
        v.problem(format!("{} turns never acknowledged", v.unacked));
    }
    v
}

// ---------------------------------------------------------------------------------------------
// figures

/// Nearest-rank percentile, in seconds.
pub fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank.min(sorted.len()) - 1].as_secs_f64()
}

/// Waits of every acknowledgement: (wait, conversation id, turn, attempts).
pub fn waits(convs: &[Conversation], runs: &[ConvRun]) -> Vec<(Duration, String, usize, u32)> {
    let mut all = Vec::new();
    for run in runs {
        for (turn, ack) in run.acks.iter().chain(run.observed.iter()).enumerate() {
            if let Some(a) = ack {
                all.push((a.wait, convs[run.index].thread_id.clone(), turn % 8 + 1, a.attempts));
            }
        }
    }
    all.sort_by_key(|w| w.0);
    all
}

/// p50 and p99 of the runs' own spans (first to last event on the server's clock), for
/// comparison with the callers' waits.
pub fn span_line(runs: &[ConvRun]) -> String {
    let mut spans: Vec<Duration> = runs.iter().flat_map(|r| r.acks.iter().flatten()).filter_map(|a| a.span).collect();
    spans.sort();
    format!(
        "the runs' own span (first to last event, server clock): p50 {:.1} ms, p99 {:.1} ms over {} runs",
        percentile(&spans, 50.0) * 1000.0,
        percentile(&spans, 99.0) * 1000.0,
        spans.len()
    )
}

pub fn wait_line(waits: &[(Duration, String, usize, u32)]) -> String {
    let sorted: Vec<Duration> = waits.iter().map(|w| w.0).collect();
    let longest = waits.last().map_or(String::new(), |(d, id, turn, attempts)| {
        format!("{:.2} s ({id} turn {turn}, {attempts} attempts)", d.as_secs_f64())
    });
    format!(
        "longest wait for a caller {longest}; p50 {:.1} ms, p99 {:.1} ms, p99.9 {:.1} ms over {} acknowledgements",
        percentile(&sorted, 50.0) * 1000.0,
        percentile(&sorted, 99.0) * 1000.0,
        percentile(&sorted, 99.9) * 1000.0,
        sorted.len()
    )
}

/// Errors a caller retried, by code and reason: how many, and the first one's message.
pub type Errors = BTreeMap<String, (u64, String)>;

pub fn merge_errors(into: &mut Errors, from: &Errors) {
    for (k, (n, first)) in from {
        into.entry(k.clone()).or_insert_with(|| (0, first.clone())).0 += n;
    }
}

pub fn errors_line(errors: &Errors) -> String {
    if errors.is_empty() {
        return "none".into();
    }
    errors.iter().map(|(k, (n, _))| format!("{k} x{n}")).collect::<Vec<_>>().join(", ")
}

/// One line per kind of retried error with the first such message.
pub fn print_error_examples(errors: &Errors) {
    for (k, (_, first)) in errors {
        let first: String = first.chars().take(220).collect();
        println!("    e.g. {k}: {first}");
    }
}

pub fn print_verdict(v: &Verdict) {
    println!(
        "  verified from the server's records: {} conversations, {} turns acknowledged, {} lost, {} duplicated, \
         {} never acknowledged; outbox {} submissions ({} duplicate)",
        v.conversations, v.acked, v.lost, v.duplicated, v.unacked, v.submissions, v.duplicate_submissions
    );
    match &v.outcome {
        Ok(summary) => println!("  W1 outcome counts: match ({summary})"),
        Err(e) => println!("  W1 outcome counts: MISMATCH: {e}"),
    }
    for p in &v.problems {
        println!("  PROBLEM: {p}");
    }
}

pub fn machine_line() -> String {
    format!(
        "{} x {}, {:.1} GiB, {}; build: {}",
        stats::nproc(),
        stats::cpu_model(),
        stats::mem_total_gib(),
        stats::os_name(),
        if cfg!(debug_assertions) { "debug" } else { "release" }
    )
}

/// The time as the server's log lines show it (RFC 3339, UTC, microseconds), so the markers
/// this bench writes into a replica's log sort with its lines.
pub fn utc_now() -> String {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let secs = now.as_secs();
    let (days, rest) = (secs / 86_400, secs % 86_400);
    // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:06}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60,
        now.subsec_micros()
    )
}

pub fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

pub fn multi_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime")
}

/// The workload, verified against the published hash.
pub fn w1() -> Result<Vec<Conversation>, String> {
    workload::prng_self_test()?;
    let all = workload::conversations(MAX_CONVERSATIONS);
    let hash = workload::sha256_hex(&all[..2000]);
    if hash != workload::W1_SHA256_2000 {
        return Err(format!("w1_conversations.jsonl sha256 {hash} != published {}", workload::W1_SHA256_2000));
    }
    Ok(all)
}

// ---------------------------------------------------------------------------------------------
// chaos-kill

struct KillStats {
    kills: usize,
    restarts: Vec<Duration>,
    in_flight_at_kill: usize,
}

pub fn run_kill(rest: impl Iterator<Item = String>) -> Result<(), String> {
    let defaults = Opts {
        turns: 2000,
        kills: 100,
        conversations: 8,
        postgres: false,
        postgres_url: None,
        server_bin: None,
        model_latency_ms: 2,
        uptime_ms: (50, 1500),
        seed: Opts::default_seed(),
        keep: false,
    };
    let o = Opts::parse(rest, defaults)?;
    multi_thread().block_on(kill_main(o))
}

async fn kill_main(o: Opts) -> Result<(), String> {
    let began = Instant::now();
    let db = if o.postgres { "PostgreSQL" } else { "SQLite" };
    println!(
        "frontdesk-bench chaos-kill: W1 over gRPC against the real frontdesk-server, SIGKILLed {} times at random \
         and restarted",
        o.kills
    );
    println!("  machine: {}", machine_line());
    println!(
        "  {} concurrent callers, at least {} turns, {db} database, server up {}..{} ms between kills, model \
         latency {} ms per call, seed {}",
        o.conversations, o.turns, o.uptime_ms.0, o.uptime_ms.1, o.model_latency_ms, o.seed
    );
    let convs = Arc::new(w1()?);
    let pg = if o.postgres {
        Some(o.postgres_url.clone().ok_or("--database postgres needs --postgres-url or FRONTDESK_TEST_POSTGRES_URL")?)
    } else {
        None
    };
    let env = Env::new("chaos-kill", pg.as_deref(), o.server_bin.as_deref(), o.model_latency_ms).await?;
    let mut server = env.server("chaos-kill-replica", free_port()?)?;
    let first_start = server.start().await?;
    let url = server.url();
    println!(
        "  server {} (replica id {}) listening after {:.2} s; log {}",
        url,
        server.replica_id,
        first_start.as_secs_f64(),
        server.log.display()
    );

    let acked = Arc::new(AtomicUsize::new(0));
    let killer_done = Arc::new(AtomicBool::new(false));
    let next = Arc::new(AtomicUsize::new(0));
    let inflight: InFlight = Arc::new(Mutex::new(HashMap::new()));

    let killer = {
        let (acked, done, inflight) = (acked.clone(), killer_done.clone(), inflight.clone());
        let (kills, uptime, seed) = (o.kills, o.uptime_ms, o.seed);
        tokio::spawn(async move {
            let mut rng = SplitMix64::new(seed);
            let mut stats = KillStats { kills: 0, restarts: Vec::new(), in_flight_at_kill: 0 };
            let mut failure = None;
            for k in 0..kills {
                let up = uptime.0 + rng.below((uptime.1 - uptime.0) as usize) as u64;
                tokio::time::sleep(Duration::from_millis(up)).await;
                stats.in_flight_at_kill += inflight.lock().expect("in-flight list").len();
                server.kill();
                stats.kills += 1;
                match server.start().await {
                    Ok(d) => stats.restarts.push(d),
                    Err(e) => {
                        failure = Some(e);
                        break;
                    }
                }
                if (k + 1) % 10 == 0 {
                    println!(
                        "    {:>4} kills, {:>7} turns acknowledged, {:>6.1} s",
                        k + 1,
                        acked.load(Ordering::Relaxed),
                        began.elapsed().as_secs_f64()
                    );
                }
            }
            done.store(true, Ordering::Relaxed);
            (server, stats, failure)
        })
    };

    let mut callers = Vec::new();
    for i in 0..o.conversations {
        let (convs, acked, done, next, inflight, url) =
            (convs.clone(), acked.clone(), killer_done.clone(), next.clone(), inflight.clone(), url.clone());
        let turns = o.turns;
        callers.push(tokio::spawn(async move {
            let mut caller = Caller::new(&format!("caller-{i}"), vec![url], 0, Some(inflight));
            let mut runs = Vec::new();
            loop {
                if done.load(Ordering::Relaxed) && acked.load(Ordering::Relaxed) >= turns {
                    break;
                }
                let index = next.fetch_add(1, Ordering::Relaxed);
                if index >= convs.len() {
                    break;
                }
                runs.push(drive_one(&mut caller, &convs[index], &acked).await);
            }
            (runs, caller.errors, caller.longest_retry_info)
        }));
    }
    let mut runs = Vec::new();
    let mut errors = BTreeMap::new();
    let mut longest_retry_info = Duration::ZERO;
    for c in callers {
        let (r, e, l) = c.await.map_err(err)?;
        runs.extend(r);
        merge_errors(&mut errors, &e);
        longest_retry_info = longest_retry_info.max(l);
    }
    runs.sort_by_key(|r| r.index);
    let (mut server, kill_stats, kill_failure) = killer.await.map_err(err)?;
    let drive_secs = began.elapsed().as_secs_f64();
    if let Some(f) = &kill_failure {
        println!("  KILLER FAILED: {f}");
    }

    let verdict = verify(&server.url(), &env, &convs, &runs).await;
    server.kill();

    let waits = waits(&convs, &runs);
    let mut restarts = kill_stats.restarts.clone();
    restarts.sort();
    let retried = runs.iter().flat_map(|r| r.acks.iter().flatten()).filter(|a| a.attempts > 1).count();
    let replayed = runs.iter().flat_map(|r| r.acks.iter().flatten()).filter(|a| a.replayed).count();
    let resumed = runs.iter().flat_map(|r| r.acks.iter().flatten()).filter(|a| a.resumed).count();
    println!("\nchaos-kill figures");
    println!(
        "  kills {} (SIGKILL, restarted on the same port and replica id; {} calls in flight at the kills); restart to \
         listening p50 {:.2} s, max {:.2} s",
        kill_stats.kills,
        kill_stats.in_flight_at_kill,
        percentile(&restarts, 50.0),
        percentile(&restarts, 100.0)
    );
    println!(
        "  turns acknowledged {} in {} conversations ({:.0} s of driving); {} needed more than one attempt, {} were \
         replays of a finished run, {} came from a run resumed after a crash",
        verdict.acked,
        runs.len(),
        drive_secs,
        retried,
        replayed,
        resumed
    );
    println!("  lost {}, duplicated {}", verdict.lost, verdict.duplicated);
    println!("  {}", wait_line(&waits));
    println!("  {}", span_line(&runs));
    println!("  errors retried: {}; longest RetryInfo {:.2} s", errors_line(&errors), longest_retry_info.as_secs_f64());
    print_error_examples(&errors);
    let (unanswered, first) = env.model.unanswered();
    println!(
        "  model endpoint: {} calls answered, {unanswered} unanswered{}",
        env.model.answered(),
        first.map_or(String::new(), |f| format!(" (first: {f})"))
    );
    print_verdict(&verdict);
    let ok = verdict.ok() && kill_failure.is_none() && kill_stats.kills == o.kills && unanswered == 0;
    println!("  total {:.0} s", began.elapsed().as_secs_f64());
    env.finish(!ok || o.keep).await;
    if ok {
        println!("chaos-kill: PASSED");
        Ok(())
    } else {
        let mut why = String::new();
        let _ = write!(
            why,
            "{} lost, {} duplicated, {} problems",
            verdict.lost,
            verdict.duplicated,
            verdict.problems.len()
        );
        if let Some(f) = kill_failure {
            let _ = write!(why, "; killer: {f}");
        }
        Err(format!("chaos-kill: {why}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_now_is_rfc3339_with_microseconds() {
        let now = utc_now();
        assert_eq!(now.len(), "2026-11-24T14:57:15.375503Z".len(), "{now}");
        assert!(now.starts_with("20") && now.ends_with('Z') && &now[10..11] == "T", "{now}");
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let sorted: Vec<Duration> = (1..=100).map(Duration::from_secs).collect();
        assert_eq!(percentile(&sorted, 50.0), 50.0);
        assert_eq!(percentile(&sorted, 99.0), 99.0);
        assert_eq!(percentile(&[], 99.0), 0.0);
    }

    #[test]
    fn options_parse() {
        let defaults = Opts {
            turns: 1,
            kills: 1,
            conversations: 1,
            postgres: false,
            postgres_url: Some("postgres://x".into()),
            server_bin: None,
            model_latency_ms: 0,
            uptime_ms: (1, 2),
            seed: 7,
            keep: false,
        };
        let args = ["--turns", "300", "--kills", "8", "--database", "postgres", "--uptime-ms", "100..800"];
        let o = Opts::parse(args.iter().map(|s| (*s).to_owned()), defaults.clone()).unwrap();
        assert_eq!((o.turns, o.kills, o.postgres, o.uptime_ms), (300, 8, true, (100, 800)));
        assert!(Opts::parse(["--bogus".to_owned()].into_iter(), defaults).is_err());
    }
}
