//! `frontdesk-bench w1`: workload W1 (specified in `bench/WORKLOADS.md`) replayed through the
//! REAL intake workflow (ConversationHost, Runner, intake nodes and prompts, real checkpointers,
//! the real gRPC server) with a rules-following SCRIPTED model in place of an LLM and an
//! in-memory counting submitter. It measures the engine, not a model.
//!
//! ```text
//! cargo run --release -p frontdesk-bench -- w1 [--conversations N] [--postgres-url URL]
//!     [--out FILE] [--json FILE] [--concurrency 100] [--rss-conversations 10000]
//!     [--phases count,latency,inproc,grpc,rss] [--stores memory,sqlite,postgres] [--metrics]
//! ```
//!
//! `--metrics` runs the latency and gRPC phases with the server's Prometheus metrics on (the runs'
//! events and the database's checkpoint writes observed).
//!
//! Exits non-zero when the generated workload does not hash to the published sha256 or when any
//! replay does not reproduce W1's outcome counts and per-turn modes.
//!
//! `frontdesk-bench w2 [--tickets 10000] [--timed 2000] [--postgres-url URL] [--redis-url URL]`
//! replays workload W2 (ticket triage) through the real triage workflow; see `w2.rs`.
//!
//! `frontdesk-bench research [--questions 20] [--latency-ms 300] [--steps 3]` runs scripted
//! questions through the real research workflow with sequential and with parallel research; see
//! `research.rs`.
//!
//! `frontdesk-bench service-call [--calls 20]` replays scripted phone calls through the real
//! service-call workflow and reports tokens per call (cl100k) against the design's
//! 21,000-30,000; see `service_call.rs`.
//!
//! `frontdesk-bench chaos-kill [--turns 2000] [--kills 100] [--conversations 8]
//! [--database sqlite|postgres]` replays W1 over gRPC against the real `frontdesk-server` binary
//! while SIGKILLing and restarting it at random, then checks every acknowledged turn exactly once
//! and W1's outcome counts; `frontdesk-bench chaos-replicas [--turns 1600] [--conversations 8]`
//! runs two replicas on one PostgreSQL database with two clients on the same conversations and
//! kills one replica for good mid-run. See `chaos.rs`, `chaos_replicas.rs` and `scripts/chaos.sh`.
//!
//! `frontdesk-bench scale [--conversations 10000] [--turns 8] [--model-latency-ms 500]
//! [--database sqlite|postgres]` holds that many streaming conversations at once on one real
//! `frontdesk-server` process against a scripted model that sleeps on every call, and prints the
//! latency the server adds per turn and its peak RSS; see `scale.rs`.
//!
//! `frontdesk-bench handoff [--rounds 20000]` measures one round trip to the SQLite driver's
//! thread on the CPUs the process may use (run it also under `taskset -c 0`); see `handoff.rs`.

mod chaos;
mod chaos_replicas;
mod drive;
mod handoff;
mod model_http;
mod research;
mod rules;
mod scale;
mod service_call;
mod stats;
mod w2;
mod w2_rules;
mod w2_workload;
mod workload;

// The server binary's allocator (server/service/src/main.rs), so the figures are the server's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::{
    fmt::Write as _,
    net::SocketAddr,
    path::{Path, PathBuf},
    process::ExitCode,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use frontdesk_api::v1::conversation_service_client::ConversationServiceClient;
use frontdesk_llm::ChatModel;
use frontdesk_runtime::{Checkpointer, MemoryCheckpointer, RunObserver};
use frontdesk_server::{
    app::{App, Overrides},
    config::Config,
    metrics::Metrics,
    workflows::{
        intake::{self, UseSubmitter},
        Parts,
    },
};
use frontdesk_store::{scratch::ScratchDatabase, sqlx, Database, StoreOptions, WriteBatchStats};
use frontdesk_workflows::{intake::IntakeView, ConversationWorkflow};
use tonic::transport::Channel;

use crate::{
    drive::{build_host, run_grpc, run_in_process, BoxError, CountingCheckpointer, Tally},
    rules::{logging_w1_model, scripted_w1_model, CountingSubmitter, BENCH_INTAKE_TOML},
    stats::Latency,
    workload::Conversation,
};

// LangGraph 1.2.22 figures from bench/WORKLOADS.md (section 7).
const LG_P50_MS: [f64; 3] = [4.1, 7.3, 13.0];
const LG_P99_MS: [f64; 3] = [9.0, 26.0, 42.8];
const LG_TPUT: [f64; 3] = [267.0, 56.0, 69.0];
const LG_SERIALIZED_KB: f64 = 82.0;
const LG_DISK_KB: [f64; 2] = [161.0, 105.0];
const LG_RSS_KB: f64 = 202.0;
const STORES: [&str; 3] = ["in-memory", "SQLite (file, WAL)", "PostgreSQL"];

/// Warm-up conversations before each timed latency run (ids `warm-*`, not timed).
const WARMUP: usize = 50;

#[derive(Debug, Clone)]
struct Args {
    command: String,
    conversations: usize,
    postgres_url: Option<String>,
    out: Option<PathBuf>,
    /// Machine-readable results (scripts/compare.sh reads them).
    json: Option<PathBuf>,
    concurrency: usize,
    rss_conversations: usize,
    store: String,
    /// Phases to run: count, latency, inproc, grpc, rss.
    phases: Vec<String>,
    /// Stores to measure: memory, sqlite, postgres (postgres needs --postgres-url).
    stores: Vec<String>,
    /// The latency and gRPC phases with Prometheus metrics on, as `metrics.listen` turns them on.
    metrics: bool,
}

impl Args {
    fn phase(&self, name: &str) -> bool {
        self.phases.iter().any(|p| p == name || p == "all")
    }
}

fn parse_args() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let command = it.next().ok_or("usage: frontdesk-bench w1 [--conversations N] [--postgres-url URL] [--out FILE]")?;
    let mut args = Args {
        command,
        conversations: 2000,
        postgres_url: None,
        out: None,
        json: None,
        concurrency: 100,
        rss_conversations: 10_000,
        store: "sqlite".into(),
        phases: vec!["all".into()],
        stores: vec!["memory".into(), "sqlite".into(), "postgres".into()],
        metrics: false,
    };
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        let number = |v: String| v.parse::<usize>().map_err(|e| format!("{flag}: {e}"));
        match flag.as_str() {
            "--conversations" => args.conversations = number(value()?)?,
            "--postgres-url" => args.postgres_url = Some(value()?).filter(|u| !u.is_empty()),
            "--out" => args.out = Some(PathBuf::from(value()?)),
            "--json" => args.json = Some(PathBuf::from(value()?)),
            "--concurrency" => args.concurrency = number(value()?)?.max(1),
            "--rss-conversations" => args.rss_conversations = number(value()?)?,
            "--store" => args.store = value()?,
            "--phases" => args.phases = value()?.split(',').map(str::to_owned).collect(),
            "--stores" => args.stores = value()?.split(',').map(str::to_owned).collect(),
            "--metrics" => args.metrics = true,
            other => return Err(format!("unknown option {other}")),
        }
    }
    Ok(args)
}

fn main() -> ExitCode {
    let subcommand = match std::env::args().nth(1).as_deref() {
        Some("w2") => Some(w2::run(std::env::args().skip(2))),
        Some("research") => Some(research::run(std::env::args().skip(2))),
        Some("service-call") => Some(service_call::run(std::env::args().skip(2))),
        Some("chaos-kill") => Some(chaos::run_kill(std::env::args().skip(2))),
        Some("chaos-replicas") => Some(chaos_replicas::run(std::env::args().skip(2))),
        Some("scale") => Some(scale::run(std::env::args().skip(2))),
        Some("handoff") => Some(handoff::run(std::env::args().skip(2))),
        _ => None,
    };
    if let Some(result) = subcommand {
        return match result {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("\nBENCH FAILED: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let args = match parse_args() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let result = match args.command.as_str() {
        "w1" => run_w1(&args),
        "rss-probe" => rss_probe(&args),
        other => Err(format!(
            "unknown command {other}; try `w1`, `w2`, `research`, `service-call`, `chaos-kill`, `chaos-replicas` or `scale`"
        )),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("\nBENCH FAILED: {e}");
            ExitCode::FAILURE
        }
    }
}

fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime")
}

fn multi_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime")
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

// ---------------------------------------------------------------------------------------------
// stores

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Store {
    Memory,
    Sqlite,
    Postgres,
}

impl Store {
    fn index(self) -> usize {
        self as usize
    }
}

/// A fresh, empty store for one phase.
struct Fresh {
    checkpointer: Arc<dyn Checkpointer>,
    db: Option<Database>,
    url: Option<String>,
    pg: Option<ScratchDatabase>,
    dir: Option<tempfile::TempDir>,
}

/// A fresh database on the PostgreSQL server at `admin_url`, dropped when it goes out of scope
/// (on an error or a panic too); [`drop_scratch_database`] drops it and reports a failure.
pub(crate) async fn scratch_database(admin_url: &str, label: &str) -> Result<ScratchDatabase, String> {
    ScratchDatabase::create(admin_url, label).await.map_err(|e| format!("create a PostgreSQL database: {e}"))
}

pub(crate) async fn drop_scratch_database(scratch: ScratchDatabase) {
    let name = scratch.name().to_owned();
    if let Err(e) = scratch.drop_database().await {
        eprintln!("warning: could not drop database {name}: {e}");
    }
}

async fn fresh_store(store: Store, tag: &str, pg_admin_url: Option<&str>) -> Result<Fresh, String> {
    match store {
        Store::Memory => {
            Ok(Fresh { checkpointer: Arc::new(MemoryCheckpointer::new(1)), db: None, url: None, pg: None, dir: None })
        }
        Store::Sqlite => {
            let dir = tempfile::Builder::new().prefix("frontdesk-bench-").tempdir().map_err(err)?;
            let url = format!("sqlite://{}", dir.path().join("w1.db").display());
            let db = Database::connect(&url, StoreOptions::default()).await.map_err(err)?;
            Ok(Fresh {
                checkpointer: Arc::new(db.checkpointer()),
                db: Some(db),
                url: Some(url),
                pg: None,
                dir: Some(dir),
            })
        }
        Store::Postgres => {
            let admin = pg_admin_url.ok_or("no --postgres-url")?;
            let scratch = scratch_database(admin, &format!("bench_{tag}")).await?;
            let url = scratch.url().to_owned();
            let db = Database::connect(&url, StoreOptions::default()).await.map_err(err)?;
            Ok(Fresh {
                checkpointer: Arc::new(db.checkpointer()),
                db: Some(db),
                url: Some(url),
                pg: Some(scratch),
                dir: None,
            })
        }
    }
}

impl Fresh {
    async fn dispose(self) {
        if let Some(db) = &self.db {
            db.close().await;
        }
        if let Some(pg) = self.pg {
            drop_scratch_database(pg).await;
        }
        drop(self.dir);
    }
}

// ---------------------------------------------------------------------------------------------
// phases

/// Untimed pass that counts checkpointer traffic, serialized state and model usage.
#[derive(Debug, Default, Clone)]
struct Counts {
    conversations: usize,
    puts_per_turn: f64,
    latest_per_turn: f64,
    thread_per_turn: f64,
    idem_per_turn: f64,
    bytes_per_put: f64,
    bytes_per_turn: f64,
    bytes_per_conversation: f64,
    final_state_bytes: f64,
    prompt_words_per_conversation: f64,
    prompt_chars_per_conversation: f64,
    llm_calls_per_conversation: f64,
    /// Average µs of put / latest / thread per store.
    op_micros: [Option<[f64; 3]>; 3],
}

fn counting_pass(convs: &[Conversation]) -> Result<Counts, String> {
    let n = convs.len().min(100);
    current_thread().block_on(async {
        let memory: Arc<dyn Checkpointer> = Arc::new(MemoryCheckpointer::new(1));
        let counting = Arc::new(CountingCheckpointer::new(memory.clone()));
        let model = logging_w1_model();
        let host = build_host(model.clone(), counting.clone(), Arc::new(CountingSubmitter::default()), None);
        let mut tally = Tally::default();
        let mut final_bytes = 0u64;
        for c in &convs[..n] {
            let obs = run_in_process(&*host, &c.thread_id, c, None).await.map_err(err)?;
            tally.add(c, &obs, true);
            let cp = memory.latest(&c.thread_id).await.map_err(err)?.ok_or("no checkpoint")?;
            final_bytes += cp.state.len() as u64;
        }
        tally.check(&convs[..n])?;
        let [puts, bytes, latest, thread, idem, _] = counting.snapshot();
        let turns = (n * 8) as f64;
        let prompt_chars: usize =
            model.requests().iter().flat_map(|r| r.messages.iter()).map(|m| m.content.chars().count()).sum();
        // Per turn: the puts of the turns themselves (the one `start` put per conversation excluded).
        let turn_puts = puts as f64 - n as f64;
        Ok(Counts {
            conversations: n,
            puts_per_turn: turn_puts / turns,
            latest_per_turn: latest as f64 / turns,
            thread_per_turn: thread as f64 / turns,
            idem_per_turn: idem as f64 / turns,
            bytes_per_put: bytes as f64 / puts as f64,
            bytes_per_turn: bytes as f64 / turns,
            bytes_per_conversation: bytes as f64 / n as f64,
            final_state_bytes: final_bytes as f64 / n as f64,
            prompt_words_per_conversation: tally.prompt_tokens as f64 / n as f64,
            prompt_chars_per_conversation: prompt_chars as f64 / n as f64,
            llm_calls_per_conversation: tally.llm_calls as f64 / n as f64,
            op_micros: Default::default(),
        })
    })
}

/// Average time of the store operations a turn makes (100 conversations, one thread, timed per
/// operation; separate from the timed rows).
fn op_timing_pass(store: Store, convs: &[Conversation], pg: Option<&str>) -> Result<[f64; 3], String> {
    let n = convs.len().min(100);
    current_thread().block_on(async {
        let fresh = fresh_store(store, "ops", pg).await?;
        let counting = Arc::new(CountingCheckpointer::new(fresh.checkpointer.clone()));
        let host = build_host(scripted_w1_model(), counting.clone(), Arc::new(CountingSubmitter::default()), None);
        for c in &convs[..n] {
            run_in_process(&*host, &c.thread_id, c, None).await.map_err(err)?;
        }
        drop(host);
        fresh.dispose().await;
        Ok(counting.op_micros())
    })
}

#[derive(Debug, Clone, Default)]
struct Disk {
    conversations: u64,
    bytes: u64,
    bytes_compacted: u64,
    /// The store's commit durability as the bench's connections see it, e.g. `synchronous=NORMAL`.
    durability: String,
    detail: String,
}

/// Folds the WAL into the database file and empties it. The store's own background checkpoint
/// may still be running when the phase ends; a `TRUNCATE` checkpoint meeting it reports busy
/// and leaves the WAL as it was, so try again for a while rather than measure that WAL.
async fn truncate_wal(pool: &sqlx::SqlitePool) -> Result<(), String> {
    for _ in 0..100 {
        let (busy, _, _): (i64, i64, i64) =
            sqlx::query_as("PRAGMA wal_checkpoint(TRUNCATE)").fetch_one(pool).await.map_err(err)?;
        if busy == 0 {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Err("the WAL could not be truncated: a checkpoint stayed busy for 2 s".into())
}

async fn sqlite_disk(fresh: &Fresh) -> Result<Disk, String> {
    let db = fresh.db.as_ref().ok_or("no database")?;
    let pool = db.sqlite_pool().ok_or("not sqlite")?;
    let threads: i64 = sqlx::query_scalar("SELECT count(*) FROM threads").fetch_one(pool).await.map_err(err)?;
    let dir = fresh.dir.as_ref().ok_or("no dir")?.path();
    let size = |name: &str| std::fs::metadata(dir.join(name)).map_or(0, |m| m.len());
    // The WAL file keeps the largest size the WAL reached until a checkpoint truncates it.
    let wal_reached = size("w1.db-wal");
    truncate_wal(pool).await?;
    let (file, wal) = (size("w1.db"), size("w1.db-wal"));
    let free: i64 = sqlx::query_scalar("PRAGMA freelist_count").fetch_one(pool).await.map_err(err)?;
    let page: i64 = sqlx::query_scalar("PRAGMA page_size").fetch_one(pool).await.map_err(err)?;
    let synchronous: i64 = sqlx::query_scalar("PRAGMA synchronous").fetch_one(pool).await.map_err(err)?;
    sqlx::query("VACUUM").execute(pool).await.map_err(err)?;
    truncate_wal(pool).await?;
    let compacted = size("w1.db") + size("w1.db-wal");
    Ok(Disk {
        conversations: threads as u64,
        bytes: file + wal,
        bytes_compacted: compacted,
        durability: format!(
            "synchronous={}",
            ["OFF", "NORMAL", "FULL", "EXTRA"].get(synchronous as usize).copied().unwrap_or("?")
        ),
        detail: format!(
            "db {file} B + wal {wal} B, {free} free pages of {page} B; after VACUUM {compacted} B; \
             the WAL file had reached {wal_reached} B"
        ),
    })
}

async fn postgres_disk(fresh: &Fresh) -> Result<Disk, String> {
    let db = fresh.db.as_ref().ok_or("no database")?;
    let pool = db.postgres_pool().ok_or("not postgres")?;
    let threads: i64 = sqlx::query_scalar("SELECT count(*) FROM threads").fetch_one(pool).await.map_err(err)?;
    const SIZE: &str = "SELECT (pg_total_relation_size('threads') + pg_total_relation_size('checkpoints') \
                        + pg_total_relation_size('idempotency_keys'))::bigint";
    let bytes: i64 = sqlx::query_scalar(SIZE).fetch_one(pool).await.map_err(err)?;
    // Where the checkpoints' bytes are: the table's own pages, its TOAST table and its index.
    let (checkpoints, heap, indexes, state, stored): (i64, i64, i64, i64, i64) = sqlx::query_as(
        "SELECT pg_total_relation_size('checkpoints')::bigint, pg_relation_size('checkpoints')::bigint, \
         pg_indexes_size('checkpoints')::bigint, \
         (SELECT coalesce(avg(octet_length(state)), 0)::bigint FROM checkpoints), \
         (SELECT coalesce(avg(pg_column_size(state)), 0)::bigint FROM checkpoints)",
    )
    .fetch_one(pool)
    .await
    .map_err(err)?;
    let synchronous_commit: String =
        sqlx::query_scalar("SHOW synchronous_commit").fetch_one(pool).await.map_err(err)?;
    sqlx::query("VACUUM FULL threads, checkpoints, idempotency_keys").execute(pool).await.map_err(err)?;
    let compacted: i64 = sqlx::query_scalar(SIZE).fetch_one(pool).await.map_err(err)?;
    Ok(Disk {
        conversations: threads as u64,
        bytes: bytes as u64,
        bytes_compacted: compacted as u64,
        durability: format!("synchronous_commit={synchronous_commit}"),
        detail: format!(
            "threads+checkpoints+idempotency_keys incl. indexes and TOAST: {bytes} B (checkpoints {checkpoints} B: \
             heap {heap}, TOAST {}, index {indexes}; a state {state} B, {stored} B stored) as written; \
             {compacted} B after VACUUM FULL",
            checkpoints - heap - indexes
        ),
    })
}

/// Sequential per-turn latency on one thread (current-thread runtime), then the store's size.
/// With `metrics`, every run's events also go to the server's Prometheus metrics.
fn latency_phase(
    store: Store,
    convs: &[Conversation],
    pg: Option<&str>,
    metrics: bool,
) -> Result<(Latency, Option<Disk>), String> {
    current_thread().block_on(async {
        let fresh = fresh_store(store, "lat", pg).await?;
        let metrics = metrics.then(|| Arc::new(Metrics::new()));
        // As `App::build` wires them: the runs' events and the database's checkpoint writes.
        if let (Some(metrics), Some(db)) = (&metrics, &fresh.db) {
            db.set_write_observer(metrics.clone()).map_err(|_| "a fresh database has no write observer".to_owned())?;
        }
        let observer = metrics.map(|metrics| metrics as Arc<dyn RunObserver>);
        let host = build_host(
            scripted_w1_model(),
            fresh.checkpointer.clone(),
            Arc::new(CountingSubmitter::default()),
            observer,
        );
        for (i, c) in convs.iter().cycle().take(WARMUP).enumerate() {
            run_in_process(&*host, &format!("warm-{i:06}"), c, None).await.map_err(err)?;
        }
        let mut samples = Vec::with_capacity(convs.len() * 8);
        let mut tally = Tally::default();
        for c in convs {
            let obs = run_in_process(&*host, &c.thread_id, c, Some(&mut samples)).await.map_err(err)?;
            tally.add(c, &obs, true);
        }
        tally.check(convs).map_err(|e| format!("{} latency replay: {e}", STORES[store.index()]))?;
        println!("    outcomes ok: {}", tally.summary());
        let disk = match store {
            Store::Memory => None,
            Store::Sqlite => Some(sqlite_disk(&fresh).await?),
            Store::Postgres => Some(postgres_disk(&fresh).await?),
        };
        drop(host);
        fresh.dispose().await;
        Ok((stats::latency(&samples), disk))
    })
}

#[derive(Debug, Clone, Default)]
struct Throughput {
    turns_per_s: f64,
    secs: f64,
    /// How the run's checkpoint writes were grouped into transactions (SQL stores in process).
    batches: Option<WriteBatchStats>,
}

/// The conversations a throughput phase runs untimed first, as LangGraph's throughput phase
/// does, so that neither side's timed run includes its pools filling and threads starting.
fn throughput_warmup(convs: &[Conversation]) -> Arc<Vec<Conversation>> {
    Arc::new((0..WARMUP).map(|i| convs[i % convs.len()].on_thread(format!("warm-{i:06}"))).collect())
}

/// 2,000 conversations with `concurrency` in flight, driven in process on a multi-thread runtime.
fn in_process_throughput(
    store: Store,
    convs: &Arc<Vec<Conversation>>,
    concurrency: usize,
    pg: Option<&str>,
) -> Result<Throughput, String> {
    multi_thread().block_on(async {
        let fresh = fresh_store(store, "tpi", pg).await?;
        let host =
            build_host(scripted_w1_model(), fresh.checkpointer.clone(), Arc::new(CountingSubmitter::default()), None);
        let one = {
            let host = host.clone();
            move |c: Conversation| {
                let host = host.clone();
                async move { run_in_process(&*host, &c.thread_id, &c, None).await }
            }
        };
        let warm = throughput_warmup(convs);
        let (_, tally) = drive_concurrently(&warm, concurrency, one.clone()).await?;
        tally.check(&warm).map_err(|e| format!("{} in-process throughput warm-up: {e}", STORES[store.index()]))?;
        let (secs, tally) = drive_concurrently(convs, concurrency, one).await?;
        tally.check(convs).map_err(|e| format!("{} in-process throughput replay: {e}", STORES[store.index()]))?;
        drop(host);
        let batches = fresh.db.as_ref().map(Database::write_batches);
        fresh.dispose().await;
        Ok(Throughput { turns_per_s: (convs.len() * 8) as f64 / secs, secs, batches })
    })
}

/// Runs every conversation through `one`, `concurrency` at a time; returns wall seconds.
async fn drive_concurrently<F, Fut>(
    convs: &Arc<Vec<Conversation>>,
    concurrency: usize,
    one: F,
) -> Result<(f64, Tally), String>
where
    F: Fn(Conversation) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = Result<drive::Observation, BoxError>> + Send,
{
    let started = Instant::now();
    let observations = drive::in_flight(convs.clone(), concurrency, move |c: Conversation| {
        let one = one.clone();
        let thread = c.thread_id.clone();
        async move { one(c).await.map_err(|e| format!("{thread}: {e}")) }
    })
    .await?;
    let secs = started.elapsed().as_secs_f64();
    let mut tally = Tally::default();
    for (i, obs) in &observations {
        tally.add(&convs[*i], obs, true);
    }
    Ok((secs, tally))
}

/// The real server in process on 127.0.0.1:0 (SQL store from config), driven over gRPC.
fn grpc_throughput(
    store: Store,
    convs: &Arc<Vec<Conversation>>,
    concurrency: usize,
    pg: Option<&str>,
    metrics: bool,
) -> Result<Throughput, String> {
    multi_thread().block_on(async {
        let fresh = fresh_store(store, "tpg", pg).await?;
        // The server opens its own pool on the same (fresh, migrated) database.
        if let Some(db) = &fresh.db {
            db.close().await;
        }
        let dir = tempfile::Builder::new().prefix("frontdesk-bench-cfg-").tempdir().map_err(err)?;
        let intake_path = dir.path().join("w1-intake.toml");
        std::fs::write(&intake_path, BENCH_INTAKE_TOML).map_err(err)?;
        let mut config = Config::default();
        config.database.url = fresh.url.clone().ok_or("gRPC phase needs a SQL store")?;
        let mut intake = config.workflows.settings::<intake::Workflow>().map_err(err)?;
        intake.config = Some(intake_path);
        config.workflows.set::<intake::Workflow>(&intake).map_err(err)?;
        config.shutdown_grace_secs = 5;
        if metrics {
            config.metrics.listen = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
        }
        let model: Arc<dyn ChatModel> = scripted_w1_model();
        let app = App::build(
            config,
            Overrides {
                model: Some(model),
                parts: Parts::default().with(UseSubmitter(Arc::new(CountingSubmitter::default()))),
            },
        )
        .await
        .map_err(|e| format!("App::build: {e:?}"))?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(err)?;
        let server = app.serve_on(listener).await.map_err(|e| format!("serve_on: {e:?}"))?;
        let endpoint = format!("http://{}", server.addr);
        let mut channels = Vec::new();
        for _ in 0..CHANNELS {
            channels.push(Channel::from_shared(endpoint.clone()).map_err(err)?.connect().await.map_err(err)?);
        }
        let counter = Arc::new(AtomicUsize::new(0));
        let one = move |c: Conversation| {
            let channel = channels[counter.fetch_add(1, Ordering::Relaxed) % CHANNELS].clone();
            async move {
                let mut client = ConversationServiceClient::new(channel);
                run_grpc(&mut client, &c.thread_id, &c).await
            }
        };
        let warm = throughput_warmup(convs);
        let (_, tally) = drive_concurrently(&warm, concurrency, one.clone()).await?;
        tally.check(&warm).map_err(|e| format!("{} gRPC throughput warm-up: {e}", STORES[store.index()]))?;
        let (secs, tally) = drive_concurrently(convs, concurrency, one).await?;
        tally.check(convs).map_err(|e| format!("{} gRPC throughput replay: {e}", STORES[store.index()]))?;
        if let Err(e) = server.shutdown().await {
            eprintln!("warning: server shutdown: {e}");
        }
        fresh.dispose().await;
        Ok(Throughput { turns_per_s: (convs.len() * 8) as f64 / secs, secs, batches: None })
    })
}

/// HTTP/2 connections the 100 client tasks share.
const CHANNELS: usize = 4;

#[derive(Debug, Clone, Default)]
struct Rss {
    label: String,
    conversations: usize,
    before: u64,
    after: u64,
    secs: f64,
}

impl Rss {
    fn per_conversation(&self) -> f64 {
        self.after.saturating_sub(self.before) as f64 / self.conversations.max(1) as f64
    }
}

/// Runs `rss-probe` in a fresh process, so memory freed by earlier phases is not reused.
fn run_rss_probe(store: &str, n: usize) -> Result<Rss, String> {
    let exe = std::env::current_exe().map_err(err)?;
    let out = std::process::Command::new(exe)
        .args(["rss-probe", "--store", store, "--rss-conversations", &n.to_string()])
        .output()
        .map_err(err)?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!("rss-probe {store} failed: {stdout}{}", String::from_utf8_lossy(&out.stderr)));
    }
    let line = stdout.lines().find_map(|l| l.strip_prefix("RSS_PROBE ")).ok_or("rss-probe printed no result")?;
    let v: serde_json::Value = serde_json::from_str(line).map_err(err)?;
    let get = |k: &str| v[k].as_u64().unwrap_or(0);
    Ok(Rss {
        label: store.to_owned(),
        conversations: get("conversations") as usize,
        before: get("before"),
        after: get("after"),
        secs: v["secs"].as_f64().unwrap_or(0.0),
    })
}

/// Child process: RSS before and after creating N idle 8-turn conversations.
fn rss_probe(args: &Args) -> Result<(), String> {
    let n = args.rss_conversations;
    let convs = workload::conversations(n);
    let store = match args.store.as_str() {
        "memory" => Store::Memory,
        "sqlite" => Store::Sqlite,
        other => return Err(format!("rss-probe supports memory and sqlite, not {other}")),
    };
    let model: Arc<dyn ChatModel> = scripted_w1_model();
    multi_thread().block_on(async {
        let fresh = fresh_store(store, "rss", None).await?;
        let host: Arc<dyn ConversationWorkflow<View = IntakeView>> =
            build_host(model, fresh.checkpointer.clone(), Arc::new(CountingSubmitter::default()), None);
        let warm: Arc<Vec<Conversation>> = Arc::new(
            convs
                .iter()
                .take(200)
                .enumerate()
                .map(|(i, c)| Conversation { thread_id: format!("warm-{i:06}"), ..c.clone() })
                .collect(),
        );
        let one = {
            let host = host.clone();
            move |c: Conversation| {
                let host = host.clone();
                async move { run_in_process(&*host, &c.thread_id, &c, None).await }
            }
        };
        drive_concurrently(&warm, 8, one.clone()).await?;
        tokio::time::sleep(Duration::from_millis(200)).await;
        let before = stats::vm_rss();
        let convs = Arc::new(convs);
        let (secs, tally) = drive_concurrently(&convs, 8, one).await?;
        tally.check(&convs)?;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let after = stats::vm_rss();
        println!(
            "RSS_PROBE {}",
            serde_json::json!({"conversations": n, "before": before, "after": after, "secs": secs})
        );
        drop(host);
        fresh.dispose().await;
        Ok(())
    })
}

// ---------------------------------------------------------------------------------------------
// the W1 run

#[derive(Default)]
struct Results {
    hash: String,
    counts: Counts,
    latency: [Option<Latency>; 3],
    disk: [Option<Disk>; 3],
    in_process: [Option<Throughput>; 3],
    grpc: [Option<Throughput>; 3],
    rss: Vec<Rss>,
    total_secs: f64,
}

fn run_w1(args: &Args) -> Result<(), String> {
    let started = Instant::now();
    let pg = args.postgres_url.as_deref();
    let n = args.conversations;
    println!("Frontdesk engine benchmark, workload W1 (intake conversation)");
    println!("  model: SCRIPTED test double (frontdesk_llm::ScriptedModel::from_fn) following W1's node rules; no LLM");
    println!("  submitter: in-memory counter defined in the bench (nothing is filed; LangGraph's W1 submits nothing)");
    println!(
        "  machine: {} x {}, {:.1} GiB, {}; this process on CPUs {}; build: {}",
        stats::machine_cpus(),
        stats::cpu_model(),
        stats::mem_total_gib(),
        stats::os_name(),
        stats::cpus_allowed(),
        if cfg!(debug_assertions) { "debug (numbers meaningless)" } else { "release" }
    );

    // Workload: native generator, verified against the published sha256.
    workload::prng_self_test()?;
    let all = workload::conversations(n.max(2000));
    let hash = workload::sha256_hex(&all[..2000]);
    if hash != workload::W1_SHA256_2000 {
        return Err(format!("w1_conversations.jsonl sha256 {hash} != published {}", workload::W1_SHA256_2000));
    }
    println!(
        "  workload: {n} conversations x 8 turns; w1_conversations.jsonl (2,000) sha256 {hash} matches bench/WORKLOADS.md"
    );
    let convs: Arc<Vec<Conversation>> = Arc::new(all[..n].to_vec());
    let mut r = Results { hash, ..Default::default() };

    let stores: Vec<Store> = [(Store::Memory, "memory"), (Store::Sqlite, "sqlite"), (Store::Postgres, "postgres")]
        .into_iter()
        .filter(|(s, name)| args.stores.iter().any(|x| x == name) && (*s != Store::Postgres || pg.is_some()))
        .map(|(s, _)| s)
        .collect();
    if args.phase("count") {
        println!("\n[1/5] counting pass (100 conversations, untimed rows)");
        r.counts = counting_pass(&convs)?;
        let c = &r.counts;
        println!(
            "    per turn: {:.2} checkpoint writes, {:.2} latest() or head() reads, {:.2} thread() reads; {:.0} B per write, \
             {:.0} B per turn; {:.0} B per conversation; final state {:.0} B",
            c.puts_per_turn,
            c.latest_per_turn,
            c.thread_per_turn,
            c.bytes_per_put,
            c.bytes_per_turn,
            c.bytes_per_conversation,
            c.final_state_bytes
        );
        for &store in &stores {
            let [put, latest, thread] = op_timing_pass(store, &convs, pg)?;
            println!(
                "    {:<20} store op averages: put {put:.1} us, latest {latest:.1} us, thread {thread:.1} us",
                STORES[store.index()]
            );
            r.counts.op_micros[store.index()] = Some([put, latest, thread]);
        }
    }

    if args.phase("latency") {
        println!("\n[2/5] per-turn latency, sequential on one thread ({n} conversations after {WARMUP} warm-up)");
        for &store in &stores {
            let (lat, disk) = latency_phase(store, &convs, pg, args.metrics)?;
            println!(
                "    {:<20} p50 {:>8.1} us  p99 {:>8.1} us  mean {:>8.1} us  max {:>8.1} us   per-turn p50 {:?}",
                STORES[store.index()],
                lat.p50_us,
                lat.p99_us,
                lat.mean_us,
                lat.max_us,
                lat.per_turn_p50_us.iter().map(|v| format!("{v:.0}")).collect::<Vec<_>>()
            );
            if let Some(d) = &disk {
                println!("    {:<20} disk: {}", "", d.detail);
            }
            r.latency[store.index()] = Some(lat);
            r.disk[store.index()] = disk;
        }
    }

    if args.phase("inproc") {
        println!(
            "\n[3/5] throughput in process, {} conversations in flight (multi-thread runtime), after {WARMUP} warm-up",
            args.concurrency
        );
        for &store in &stores {
            let t = in_process_throughput(store, &convs, args.concurrency, pg)?;
            println!("    {:<20} {:>8.0} turns/s ({:.1} s)", STORES[store.index()], t.turns_per_s, t.secs);
            r.in_process[store.index()] = Some(t);
        }
    }

    if args.phase("grpc") {
        println!(
            "\n[4/5] throughput over gRPC on loopback, {} conversations in flight, {CHANNELS} HTTP/2 connections, after {WARMUP} warm-up",
            args.concurrency
        );
        for &store in stores.iter().filter(|s| **s != Store::Memory) {
            let t = grpc_throughput(store, &convs, args.concurrency, pg, args.metrics)?;
            println!("    {:<20} {:>8.0} turns/s ({:.1} s)", STORES[store.index()], t.turns_per_s, t.secs);
            r.grpc[store.index()] = Some(t);
        }
    }

    if args.phase("rss") && args.rss_conversations > 0 {
        println!(
            "\n[5/5] resident memory per idle conversation ({} conversations, fresh process each)",
            args.rss_conversations
        );
        for store in ["sqlite", "memory"] {
            let rss = run_rss_probe(store, args.rss_conversations)?;
            println!(
                "    {:<26} before {:>6.1} MiB  after {:>6.1} MiB  => {:>8.0} B per conversation ({:.1} s)",
                rss.label,
                rss.before as f64 / 1048576.0,
                rss.after as f64 / 1048576.0,
                rss.per_conversation(),
                rss.secs
            );
            r.rss.push(rss);
        }
    }
    r.total_secs = started.elapsed().as_secs_f64();

    let report = markdown(args, &r);
    println!("\n{report}");
    if let Some(out) = &args.out {
        write_out(out, &report)?;
        println!("(written to {})", out.display());
    }
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(&json_report(args, &r)).map_err(err)?;
        write_out(path, &json)?;
    }
    println!("all replays reproduced W1's outcome counts and per-turn modes; total {:.0} s", r.total_secs);
    Ok(())
}

/// The figures of the report, keyed by store (`memory`, `sqlite`, `postgres`).
fn json_report(args: &Args, r: &Results) -> serde_json::Value {
    use serde_json::{json, Map, Value};
    const KEYS: [&str; 3] = ["memory", "sqlite", "postgres"];
    let by_store = |f: &dyn Fn(usize) -> Option<Value>| -> Value {
        Value::Object((0..3).filter_map(|i| Some((KEYS[i].to_owned(), f(i)?))).collect::<Map<_, _>>())
    };
    let tput = |t: &Option<Throughput>| t.as_ref().map(|t| json!({"turns_per_s": t.turns_per_s, "secs": t.secs}));
    json!({
        "workload": "w1",
        "engine": "frontdesk",
        "conversations": args.conversations,
        "in_flight": args.concurrency,
        "release": !cfg!(debug_assertions),
        "cpus_allowed": stats::cpus_allowed(),
        "latency": by_store(&|i| r.latency[i].as_ref().map(|l| json!({
            "turns": l.n, "p50_us": l.p50_us, "p99_us": l.p99_us, "mean_us": l.mean_us, "max_us": l.max_us,
        }))),
        "disk": by_store(&|i| r.disk[i].as_ref().map(|d| json!({
            "conversations": d.conversations,
            "bytes": d.bytes,
            "bytes_compacted": d.bytes_compacted,
            "per_conversation_bytes": d.bytes as f64 / d.conversations.max(1) as f64,
            "durability": d.durability,
        }))),
        "grpc": by_store(&|i| tput(&r.grpc[i])),
        "in_process": by_store(&|i| tput(&r.in_process[i])),
        "total_secs": r.total_secs,
    })
}

fn write_out(path: &Path, report: &str) -> Result<(), String> {
    std::fs::write(path, report).map_err(|e| format!("{}: {e}", path.display()))
}

fn ms(us: f64) -> String {
    if us >= 100.0 {
        format!("{:.2} ms", us / 1000.0)
    } else {
        format!("{:.3} ms", us / 1000.0)
    }
}

fn kb(bytes: f64) -> String {
    format!("{:.1} KB", bytes / 1000.0)
}

fn met(ok: bool) -> &'static str {
    if ok {
        "**met**"
    } else {
        "**not met**"
    }
}

fn markdown(args: &Args, r: &Results) -> String {
    let mut s = String::new();
    let cmd = {
        let mut c = format!("cargo run --release -p frontdesk-bench -- w1 --conversations {}", args.conversations);
        if args.postgres_url.is_some() {
            c.push_str(" --postgres-url \"$(scripts/ensure-postgres.sh | tail -n1)\"");
        }
        if let Some(out) = &args.out {
            let _ = write!(c, " --out {}", out.display());
        }
        c
    };
    let _ = writeln!(s, "### W1 results ({})\n", stats::now_utc());
    let _ = writeln!(s, "- Command: `{cmd}`");
    let _ = writeln!(
        s,
        "- Machine: {} x {} (process on CPUs {}), {:.1} GiB RAM, {}; {}; build profile {} (`[profile.release]`, debug = line-tables-only)",
        stats::machine_cpus(),
        stats::cpu_model(),
        stats::cpus_allowed(),
        stats::mem_total_gib(),
        stats::os_name(),
        stats::rustc_version(),
        if cfg!(debug_assertions) { "dev (NOT representative)" } else { "release" }
    );
    let outcome = if args.conversations == 2000 {
        "team-dba 690 / team-net 692 / team-app 618, rollback_plan unknown in 491".to_owned()
    } else {
        format!("the outcome counts the generator implies for {} conversations", args.conversations)
    };
    let _ = writeln!(
        s,
        "- Workload: {} conversations x 8 turns generated natively (SplitMix64, seed 0x5EED0001); \
         `w1_conversations.jsonl` (2,000) sha256 `{}` = bench/WORKLOADS.md. Every replay reproduced {outcome} and the \
         modes CHAT, ELICITATION x3, REVIEW x2, CHAT x2 after turns 1-8 (the bench exits non-zero otherwise).",
        args.conversations, r.hash
    );
    let _ = writeln!(
        s,
        "- Model: SCRIPTED test double (`ScriptedModel::from_fn`) answering by W1's node rules from the prompt text; \
         submitter: in-memory counter. Whole run: {:.0} s.\n",
        r.total_secs
    );

    let _ = writeln!(s, "{}\n", stats::REFERENCE_COLUMN);
    let _ = writeln!(s, "| W1 | Frontdesk | LangGraph 1.2.22 (reference) | Frontdesk advantage | Target | |");
    let _ = writeln!(s, "|---|---:|---:|---:|---|---|");
    for i in 0..3 {
        if let Some(l) = &r.latency[i] {
            let ratio = LG_P50_MS[i] * 1000.0 / l.p50_us;
            let _ = writeln!(
                s,
                "| per turn p50 (p99), {}, one thread | {} ({}) | {} ms ({}) | {:.0}x | >= 30x faster | {} |",
                STORES[i],
                ms(l.p50_us),
                ms(l.p99_us),
                LG_P50_MS[i],
                LG_P99_MS[i],
                ratio,
                met(ratio >= 30.0)
            );
        }
    }
    for i in 0..3 {
        let (t, how) = match (&r.grpc[i], &r.in_process[i]) {
            (Some(t), _) => (t, "over gRPC (loopback)"),
            (None, Some(t)) => (t, "in process (no gRPC)"),
            _ => continue,
        };
        let ratio = t.turns_per_s / LG_TPUT[i];
        let _ = writeln!(
            s,
            "| throughput, {} in flight, {}, {} | {:.0} turns/s | {:.0} turns/s | {:.0}x | >= 50x | {} |",
            args.concurrency,
            STORES[i],
            how,
            t.turns_per_s,
            LG_TPUT[i],
            ratio,
            met(ratio >= 50.0)
        );
    }
    for i in 1..3 {
        if let Some(d) = &r.disk[i] {
            let per = d.bytes as f64 / d.conversations.max(1) as f64;
            let _ = writeln!(
                s,
                "| on disk per 8-turn conversation, {} | {} ({} compacted) | {:.0} KB | {:.0}x | <= 8 KB | {} |",
                STORES[i],
                kb(per),
                kb(d.bytes_compacted as f64 / d.conversations.max(1) as f64),
                LG_DISK_KB[i - 1],
                LG_DISK_KB[i - 1] * 1000.0 / per,
                met(per <= 8000.0)
            );
        }
    }
    for rss in &r.rss {
        let per = rss.per_conversation();
        let target = rss.label == "sqlite";
        let _ = writeln!(
            s,
            "| resident per idle conversation, {} | {:.0} B | {:.0} KB (in-memory saver) | {:.0}x | {} | {} |",
            rss.label,
            per,
            LG_RSS_KB,
            LG_RSS_KB * 1000.0 / per.max(1.0),
            if target { "<= 4 KB" } else { "(for information)" },
            if target { met(per <= 4096.0) } else { "" }
        );
    }
    let c = &r.counts;
    if c.conversations > 0 {
        let _ = writeln!(
            s,
            "| checkpoint state serialized per 8-turn conversation (all writes) | {} | {:.0} KB | {:.1}x | | |",
            kb(c.bytes_per_conversation),
            LG_SERIALIZED_KB,
            LG_SERIALIZED_KB * 1000.0 / c.bytes_per_conversation
        );
    }

    let _ = writeln!(s, "\nDetails:\n");
    for (name, l) in STORES.iter().zip(&r.latency) {
        if let Some(l) = l {
            let per_turn: Vec<String> = l.per_turn_p50_us.iter().map(|v| format!("{v:.0}")).collect();
            let _ = writeln!(
                s,
                "- Latency, {}: {} turns, p50 {:.1} us, p99 {:.1} us, mean {:.1} us, max {:.1} us; p50 by turn 1-8 (us): {}.",
                name,
                l.n,
                l.p50_us,
                l.p99_us,
                l.mean_us,
                l.max_us,
                per_turn.join(" / ")
            );
        }
    }
    for (name, t) in STORES.iter().zip(&r.in_process) {
        if let Some(t) = t {
            let _ = writeln!(
                s,
                "- Throughput in process (ConversationHost, {} tasks, no gRPC), {}: {:.0} turns/s ({:.1} s for {} turns, after {WARMUP} conversations untimed).",
                args.concurrency,
                name,
                t.turns_per_s,
                t.secs,
                args.conversations * 8
            );
            if let Some(b) = &t.batches {
                let _ = writeln!(
                    s,
                    "  Group commit: {} checkpoint writes in {} transactions ({:.1} per transaction, at most {}).",
                    b.writes,
                    b.batches,
                    b.writes as f64 / b.batches.max(1) as f64,
                    b.largest
                );
            }
        }
    }
    for (name, t) in STORES.iter().zip(&r.grpc) {
        if let Some(t) = t {
            let _ = writeln!(
                s,
                "- Throughput over gRPC, {}: {:.0} turns/s ({:.1} s; includes the {} StartConversation calls; after {WARMUP} conversations untimed).",
                name, t.turns_per_s, t.secs, args.conversations
            );
        }
    }
    for (name, d) in STORES.iter().zip(&r.disk) {
        if let Some(d) = d {
            let _ = writeln!(s, "- Disk, {} ({} conversations incl. warm-up): {}.", name, d.conversations, d.detail);
        }
    }
    for rss in &r.rss {
        let _ = writeln!(
            s,
            "- RSS, {}: {:.1} MiB before, {:.1} MiB after {} idle conversations => {:.0} B each.",
            rss.label,
            rss.before as f64 / 1048576.0,
            rss.after as f64 / 1048576.0,
            rss.conversations,
            rss.per_conversation()
        );
    }
    if c.conversations > 0 {
        let _ = writeln!(
            s,
            "- Per turn (counting pass, {} conversations): {:.2} checkpoint writes, {:.2} `latest` or `head` reads, {:.2} \
             `thread` reads, {:.2} idempotency look-ups; {:.0} B of serialized state per write, {:.0} B per turn; \
             final state {:.0} B.",
            c.conversations,
            c.puts_per_turn,
            c.latest_per_turn,
            c.thread_per_turn,
            c.idem_per_turn,
            c.bytes_per_put,
            c.bytes_per_turn,
            c.final_state_bytes
        );
        for (i, ops) in c.op_micros.iter().enumerate() {
            if let Some([put, latest, thread]) = ops {
                let _ = writeln!(
                    s,
                    "- Store operations, {} (average, one thread): put {put:.1} us, latest {latest:.1} us, \
                     thread {thread:.1} us.",
                    STORES[i]
                );
            }
        }
        let _ = writeln!(
            s,
            "- Model traffic per conversation: {:.1} calls, {:.0} prompt words (the scripted model's token count: \
             whitespace-separated words), {:.0} prompt characters.",
            c.llm_calls_per_conversation, c.prompt_words_per_conversation, c.prompt_chars_per_conversation
        );
    }
    s
}
