//! `frontdesk-bench w2`: workload W2 (ticket triage, bench/WORKLOADS.md) replayed through the REAL
//! triage workflow — `triage::build` (translator → supervisor → specialist | escalate, real nodes
//! and prompts, the real knowledge base and customer directory loaded with W2's data), a `Runner`
//! on the checkpointer under test, and the real `TriageDesk` with its persistence (resolved and
//! escalated tickets archived as their run completes into a SQLite `SqlTicketArchive` in its own
//! file, one commit per ticket, then their thread deleted) — with a rules-following SCRIPTED model.
//!
//! ```text
//! cargo run --release -p frontdesk-bench -- w2 [--tickets 10000] [--timed 2000]
//!     [--postgres-url URL] [--redis-url URL] [--concurrency 100] [--durability by-effect|every-node]
//!     [--stores memory,sqlite,postgres,redis] [--phases latency,throughput] [--out FILE]
//!     [--json FILE]
//! ```
//!
//! Exits non-zero when the generated workload does not hash to the published sha256 or any replay
//! does not reproduce W2's outcomes.

use std::{fmt::Write as _, path::PathBuf, sync::Arc, time::Instant};

use frontdesk_llm::{ChatModel, LlmClient};
use frontdesk_runtime::{Checkpointer, Durability, Runner, RunnerConfig};
use frontdesk_server::workflows::triage::archive::SqlTicketArchive;
use frontdesk_store::{sqlx, Database, RedisCheckpointer, RedisOptions, StoreOptions};
use frontdesk_workflows::triage::{
    self,
    customers::{AccountStatus, Customer, CustomerDirectory, Plan},
    kb::{Article, Category, KnowledgeBase},
    RecommendedAction, TicketType, TriageDeps, TriageDesk, TriageRequest,
};

use crate::{
    current_thread, err, fresh_store, multi_thread, stats,
    w2_rules::{scripted_w2_model, W2Rules},
    w2_workload::{self, W2Ticket, W2},
    Fresh, Store,
};

// LangGraph 1.2.22 W2 figures from bench/WORKLOADS.md, section 7 (in-memory, SQLite, PostgreSQL).
const LG_P50_MS: [f64; 3] = [6.0, 9.8, 17.6];
const LG_P99_MS: [f64; 3] = [11.7, 18.7, 60.0];
const LG_TPUT: [f64; 3] = [181.0, 40.0, 52.0];
const LG_NO_CHECKPOINTER_MS: f64 = 2.8;
const TARGET: f64 = 20.0;
const WARMUP: usize = 50;

const ROUTES: [&str; 4] = ["billing", "technical", "general", "escalate"];
const ACTIONS: [&str; 3] = ["auto_respond", "route_specialist", "escalate_human"];
const PUBLISHED_ROUTES: [u64; 4] = [2476, 2419, 2546, 2559];
const PUBLISHED_ACTIONS: [u64; 3] = [4922, 2519, 2559];
const PUBLISHED_ACTIONS_2000: [u64; 3] = [1017, 487, 496];

#[derive(Debug, Clone)]
struct Args {
    tickets: usize,
    timed: usize,
    postgres_url: Option<String>,
    redis_url: Option<String>,
    concurrency: usize,
    out: Option<PathBuf>,
    /// Machine-readable results (scripts/compare.sh reads them).
    json: Option<PathBuf>,
    /// The triage workflow's own (by-effect) unless `--durability every-node`.
    durability: Durability,
    /// Checkpointers to measure: `memory`, `sqlite` (always both unless `--stores` narrows them),
    /// plus `postgres` / `redis` when their URL is given.
    stores: Vec<String>,
    /// `latency`, `throughput` or `all`.
    phases: Vec<String>,
}

impl Args {
    fn store(&self, name: &str) -> bool {
        self.stores.iter().any(|s| s == name || s == "all")
    }

    fn phase(&self, name: &str) -> bool {
        self.phases.iter().any(|p| p == name || p == "all")
    }
}

fn parse_args(mut it: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut args = Args {
        tickets: 10_000,
        timed: 2000,
        postgres_url: None,
        redis_url: None,
        concurrency: 100,
        out: None,
        json: None,
        durability: Durability::ByEffect,
        stores: vec!["all".into()],
        phases: vec!["all".into()],
    };
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        let number = |v: String| v.parse::<usize>().map_err(|e| format!("{flag}: {e}"));
        match flag.as_str() {
            "--tickets" => args.tickets = number(value()?)?,
            "--timed" => args.timed = number(value()?)?,
            "--postgres-url" => args.postgres_url = Some(value()?).filter(|u| !u.is_empty()),
            "--redis-url" => args.redis_url = Some(value()?).filter(|u| !u.is_empty()),
            "--concurrency" => args.concurrency = number(value()?)?.max(1),
            "--out" => args.out = Some(PathBuf::from(value()?)),
            "--json" => args.json = Some(PathBuf::from(value()?)),
            "--stores" => args.stores = value()?.split(',').map(str::to_owned).collect(),
            "--phases" => args.phases = value()?.split(',').map(str::to_owned).collect(),
            "--durability" => {
                args.durability = match value()?.as_str() {
                    "by-effect" | "by_effect" | "exit" => Durability::ByEffect,
                    "every-node" => Durability::EveryNode,
                    other => return Err(format!("--durability: {other:?} is not by-effect or every-node")),
                }
            }
            other => return Err(format!("unknown option {other}")),
        }
    }
    args.timed = args.timed.min(args.tickets);
    if args.timed == 0 {
        return Err("--timed must be at least 1".into());
    }
    Ok(args)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum W2Store {
    Memory,
    Sqlite,
    Postgres,
    Redis,
}

impl W2Store {
    /// The name `--stores` takes.
    fn key(self) -> &'static str {
        match self {
            W2Store::Memory => "memory",
            W2Store::Sqlite => "sqlite",
            W2Store::Postgres => "postgres",
            W2Store::Redis => "redis",
        }
    }

    fn name(self) -> &'static str {
        match self {
            W2Store::Memory => "in-memory",
            W2Store::Sqlite => "SQLite (file, WAL)",
            W2Store::Postgres => "PostgreSQL",
            W2Store::Redis => "Redis",
        }
    }

    /// Index into the LangGraph figures (Redis has none).
    fn lg(self) -> Option<usize> {
        match self {
            W2Store::Memory => Some(0),
            W2Store::Sqlite => Some(1),
            W2Store::Postgres => Some(2),
            W2Store::Redis => None,
        }
    }
}

/// W2's data as the product loads it, and the rules for the scripted model.
struct Fixtures {
    customers: Arc<CustomerDirectory>,
    kb: Arc<KnowledgeBase>,
    rules: Arc<W2Rules>,
    durability: Durability,
}

fn fixtures(w2: &W2, durability: Durability) -> Result<Fixtures, String> {
    let customers = w2
        .customers
        .iter()
        .map(|c| {
            Ok(Customer {
                customer_id: c.customer_id.clone(),
                name: c.name.clone(),
                plan: match c.tier {
                    "free" => Plan::Free,
                    "pro" => Plan::Pro,
                    "enterprise" => Plan::Enterprise,
                    other => return Err(format!("tier {other}")),
                },
                tenure_months: 0,
                seats: 0,
                region: c.region.to_owned(),
                account_status: match c.account_status {
                    "active" => AccountStatus::Active,
                    "past_due" => AccountStatus::PastDue,
                    "suspended" => AccountStatus::Suspended,
                    other => return Err(format!("account_status {other}")),
                },
                email: String::new(),
                preferred_language: String::new(),
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    let articles = w2
        .articles
        .iter()
        .map(|a| Article {
            article_id: a.article_id.clone(),
            category: match a.category {
                "billing" => Category::Billing,
                "technical" => Category::Technical,
                _ => Category::General,
            },
            title: a.title.clone(),
            body: a.body.clone(),
        })
        .collect();
    Ok(Fixtures {
        customers: Arc::new(CustomerDirectory::from_customers(customers)),
        kb: Arc::new(KnowledgeBase::from_articles(articles).map_err(err)?),
        rules: Arc::new(W2Rules::new(&w2.articles)),
        durability,
    })
}

/// The checkpointer under test, the archive database and what must be cleaned up afterwards.
struct Stores {
    fresh: Option<Fresh>,
    checkpointer: Arc<dyn Checkpointer>,
    archive_db: Database,
    _archive_dir: tempfile::TempDir,
}

async fn open_stores(store: W2Store, tag: &str, args: &Args) -> Result<Stores, String> {
    let pg = args.postgres_url.as_deref();
    let (fresh, checkpointer) = match store {
        W2Store::Memory | W2Store::Sqlite | W2Store::Postgres => {
            let kind = match store {
                W2Store::Memory => Store::Memory,
                W2Store::Sqlite => Store::Sqlite,
                _ => Store::Postgres,
            };
            let fresh = fresh_store(kind, &format!("w2{tag}"), pg).await?;
            let checkpointer = fresh.checkpointer.clone();
            (Some(fresh), checkpointer)
        }
        W2Store::Redis => {
            let url = args.redis_url.as_deref().ok_or("no --redis-url")?;
            let options = RedisOptions { key_prefix: format!("fdbench-w2-{tag}-{}", std::process::id()), retention: 1 };
            let redis = RedisCheckpointer::connect(url, options).await.map_err(err)?;
            (None, Arc::new(redis) as Arc<dyn Checkpointer>)
        }
    };
    let dir = tempfile::Builder::new().prefix("frontdesk-bench-w2-archive-").tempdir().map_err(err)?;
    let url = format!("sqlite://{}", dir.path().join("w2_archive.db").display());
    let archive_db = Database::connect(&url, StoreOptions::default()).await.map_err(err)?;
    Ok(Stores { fresh, checkpointer, archive_db, _archive_dir: dir })
}

impl Stores {
    async fn archived(&self) -> Result<i64, String> {
        let pool = self.archive_db.sqlite_pool().ok_or("archive not on SQLite")?;
        sqlx::query_scalar("SELECT count(*) FROM tickets").fetch_one(pool).await.map_err(err)
    }

    /// Deletes the kept (route_specialist) threads where nothing else removes them (Redis), then
    /// closes and drops everything.
    async fn dispose(self, kept: &[String]) -> Result<(), String> {
        if self.fresh.is_none() {
            for thread in kept {
                self.checkpointer.delete_thread(thread).await.map_err(err)?;
            }
        }
        self.archive_db.close().await;
        if let Some(fresh) = self.fresh {
            fresh.dispose().await;
        }
        Ok(())
    }
}

/// The real `TriageDesk` as `App::build` wires it (no run registry, no call log).
fn build_desk(fx: &Fixtures, model: Arc<dyn ChatModel>, stores: &Stores) -> Result<TriageDesk, String> {
    let llm = LlmClient::new(model);
    let deps = TriageDeps { llm: llm.clone(), customers: fx.customers.clone(), kb: fx.kb.clone() };
    let graph = triage::build(deps).map_err(err)?.with_durability(fx.durability);
    let runner = Runner::new(graph, stores.checkpointer.clone(), RunnerConfig::default());
    let archive = Arc::new(SqlTicketArchive::new(stores.archive_db.clone()));
    TriageDesk::new(runner, llm, fx.customers.clone(), archive, 20_000).map_err(err)
}

fn model(fx: &Fixtures) -> Arc<dyn ChatModel> {
    scripted_w2_model(fx.rules.clone())
}

/// W2's (route, action) of one ticket, as indexes into `ROUTES` and `ACTIONS`.
type Outcome = (u8, u8);

/// One ticket through `triage_as_new_ticket`: start, drain the events, await the outcome (which
/// includes archiving and deleting a completed ticket).
async fn run_ticket(desk: &TriageDesk, t: &W2Ticket) -> Result<Outcome, String> {
    let request = TriageRequest {
        customer_id: t.customer_id.clone(),
        message: t.body.clone(),
        subject: Some(t.subject.clone()),
        language: None,
        idempotency_key: None,
    };
    let mut handle = desk
        .triage_as_new_ticket(&frontdesk_workflows::Tenant::default(), request, &t.ticket_id)
        .await
        .map_err(|e| format!("{}: {e}", t.ticket_id))?;
    while handle.progress.next().await.is_some() {}
    let outcome = handle.outcome.await.map_err(|e| format!("{}: {e}", t.ticket_id))?;
    let result = outcome.output.result.ok_or_else(|| format!("{}: no triage result", t.ticket_id))?;
    // The route is the supervisor's decision: escalate, or the ticket type.
    let route = if outcome.output.requires_escalation {
        3
    } else {
        match result.ticket_type {
            TicketType::Billing => 0,
            TicketType::Technical => 1,
            TicketType::General => 2,
        }
    };
    let action = match result.recommended_action {
        RecommendedAction::AutoRespond => 0,
        RecommendedAction::RouteSpecialist => 1,
        RecommendedAction::EscalateHuman => 2,
    };
    Ok((route, action))
}

#[derive(Debug, Default, Clone)]
struct Tally {
    routes: [u64; 4],
    actions: [u64; 3],
}

impl Tally {
    fn of(outcomes: &[Outcome]) -> Self {
        let mut t = Tally::default();
        for &(r, a) in outcomes {
            t.routes[r as usize] += 1;
            t.actions[a as usize] += 1;
        }
        t
    }

    fn summary(&self) -> String {
        let r: Vec<String> = ROUTES.iter().zip(self.routes).map(|(n, c)| format!("{n} {c}")).collect();
        let a: Vec<String> = ACTIONS.iter().zip(self.actions).map(|(n, c)| format!("{n} {c}")).collect();
        format!("routes {}; actions {}", r.join(" / "), a.join(" / "))
    }
}

/// Every ticket must have the outcome of the reference pass.
fn check_same(what: &str, tickets: &[W2Ticket], got: &[Outcome], expected: &[Outcome]) -> Result<(), String> {
    for (t, g) in tickets.iter().zip(got) {
        let e = expected[t.index];
        if *g != e {
            return Err(format!(
                "{what}: {} gave route {} action {}, the reference pass {} / {}",
                t.ticket_id, ROUTES[g.0 as usize], ACTIONS[g.1 as usize], ROUTES[e.0 as usize], ACTIONS[e.1 as usize]
            ));
        }
    }
    if got.len() != tickets.len() {
        return Err(format!("{what}: {} outcomes for {} tickets", got.len(), tickets.len()));
    }
    Ok(())
}

/// Untimed reference pass over all tickets (in-memory checkpointer, SQLite archive): checks W2's
/// published counts and returns every ticket's outcome.
fn reference_pass(fx: &Fixtures, w2: &W2, args: &Args) -> Result<(Vec<Outcome>, f64), String> {
    current_thread().block_on(async {
        let stores = open_stores(W2Store::Memory, "ref", args).await?;
        let desk = build_desk(fx, model(fx), &stores)?;
        let started = Instant::now();
        let mut outcomes = Vec::with_capacity(w2.tickets.len());
        for t in &w2.tickets {
            outcomes.push(run_ticket(&desk, t).await?);
        }
        let secs = started.elapsed().as_secs_f64();
        let all = Tally::of(&outcomes);
        println!("    {} tickets: {}", w2.tickets.len(), all.summary());
        let first = Tally::of(&outcomes[..w2.tickets.len().min(2000)]);
        if w2.tickets.len() >= 2000 {
            println!("    first 2,000: {}", first.summary());
            if first.actions != PUBLISHED_ACTIONS_2000 {
                return Err(format!(
                    "first 2,000 tickets: actions {:?} != published {PUBLISHED_ACTIONS_2000:?}",
                    first.actions
                ));
            }
        }
        if w2.tickets.len() == 10_000 && (all.routes != PUBLISHED_ROUTES || all.actions != PUBLISHED_ACTIONS) {
            return Err(format!(
                "10,000 tickets: routes {:?} actions {:?} != published {PUBLISHED_ROUTES:?} {PUBLISHED_ACTIONS:?}",
                all.routes, all.actions
            ));
        }
        check_persistence(&stores, &outcomes, "reference pass").await?;
        stores.dispose(&[]).await?;
        Ok((outcomes, secs))
    })
}

/// Completed tickets are archived and their threads gone; route_specialist threads are kept.
async fn check_persistence(stores: &Stores, outcomes: &[Outcome], what: &str) -> Result<(), String> {
    let completed = outcomes.iter().filter(|o| o.1 != 1).count() as i64;
    let archived = stores.archived().await?;
    if archived != completed {
        return Err(format!("{what}: {archived} tickets archived, {completed} expected"));
    }
    Ok(())
}

fn kept_threads(tickets: &[W2Ticket], expected: &[Outcome]) -> Vec<String> {
    tickets.iter().filter(|t| expected[t.index].1 == 1).map(|t| t.thread_id.clone()).collect()
}

#[derive(Debug, Clone, Default)]
struct Latency {
    lat: stats::Latency,
}

/// Sequential per-ticket latency on one thread: `WARMUP` tickets after the timed ones first.
fn latency_phase(fx: &Fixtures, w2: &W2, expected: &[Outcome], store: W2Store, args: &Args) -> Result<Latency, String> {
    current_thread().block_on(async {
        let stores = open_stores(store, "lat", args).await?;
        let desk = build_desk(fx, model(fx), &stores)?;
        let timed = &w2.tickets[..args.timed];
        let warm = &w2.tickets[args.timed..w2.tickets.len().min(args.timed + WARMUP)];
        let mut outcomes = Vec::with_capacity(warm.len() + timed.len());
        for t in warm {
            outcomes.push(run_ticket(&desk, t).await?);
        }
        let mut samples = Vec::with_capacity(timed.len());
        for t in timed {
            let started = Instant::now();
            outcomes.push(run_ticket(&desk, t).await?);
            samples.push(started.elapsed().as_nanos() as u64);
        }
        let all: Vec<W2Ticket> = warm.iter().chain(timed).cloned().collect();
        check_same(&format!("{} latency", store.name()), &all, &outcomes, expected)?;
        check_persistence(&stores, &outcomes, store.name()).await?;
        let tally = Tally::of(&outcomes[warm.len()..]);
        if args.timed == 2000 && tally.actions != PUBLISHED_ACTIONS_2000 {
            return Err(format!("{}: actions {:?} on the timed tickets", store.name(), tally.actions));
        }
        drop(desk);
        stores.dispose(&kept_threads(&all, expected)).await?;
        let mut lat = stats::latency(&samples);
        lat.per_turn_p50_us.clear();
        Ok(Latency { lat })
    })
}

#[derive(Debug, Clone, Default)]
struct Throughput {
    per_s: f64,
    secs: f64,
}

/// The timed tickets with `concurrency` in flight, in process, on a multi-thread runtime, after
/// `WARMUP` tickets past the timed ones, untimed, as LangGraph's throughput phase runs them.
fn throughput_phase(
    fx: &Fixtures,
    w2: &W2,
    expected: &[Outcome],
    store: W2Store,
    args: &Args,
) -> Result<Throughput, String> {
    multi_thread().block_on(async {
        let stores = open_stores(store, "tp", args).await?;
        let desk = Arc::new(build_desk(fx, model(fx), &stores)?);
        let warm = &w2.tickets[args.timed..w2.tickets.len().min(args.timed + WARMUP)];
        let timed = &w2.tickets[..args.timed];
        let mut outcomes = drive_tickets(&desk, warm, args.concurrency).await?;
        let started = Instant::now();
        outcomes.extend(drive_tickets(&desk, timed, args.concurrency).await?);
        let secs = started.elapsed().as_secs_f64();
        let all: Vec<W2Ticket> = warm.iter().chain(timed).cloned().collect();
        check_same(&format!("{} throughput", store.name()), &all, &outcomes, expected)?;
        check_persistence(&stores, &outcomes, store.name()).await?;
        drop(desk);
        stores.dispose(&kept_threads(&all, expected)).await?;
        Ok(Throughput { per_s: timed.len() as f64 / secs, secs })
    })
}

/// Runs `tickets` through `desk`, `concurrency` at a time; returns their outcomes in order.
async fn drive_tickets(
    desk: &Arc<TriageDesk>,
    tickets: &[W2Ticket],
    concurrency: usize,
) -> Result<Vec<Outcome>, String> {
    let desk = desk.clone();
    let done = crate::drive::in_flight(Arc::new(tickets.to_vec()), concurrency, move |t: W2Ticket| {
        let desk = desk.clone();
        async move { run_ticket(&desk, &t).await }
    })
    .await?;
    let mut outcomes = vec![(0, 0); tickets.len()];
    for (i, o) in done {
        outcomes[i] = o;
    }
    Ok(outcomes)
}

#[derive(Default)]
struct Results {
    hashes: [String; 3],
    reference: Option<(Tally, f64)>,
    latency: Vec<(W2Store, Latency)>,
    throughput: Vec<(W2Store, Throughput)>,
    total_secs: f64,
}

pub fn run(rest: impl Iterator<Item = String>) -> Result<(), String> {
    let args = parse_args(rest)?;
    let started = Instant::now();
    println!("frontdesk-bench w2: W2 ticket triage through the REAL triage workflow + TriageDesk persistence");
    println!("  model: SCRIPTED test double (ScriptedModel::from_fn) following W2's node rules; not an LLM");
    println!(
        "  machine: {} x {}, {:.1} GiB, {}; this process on CPUs {}; build: {}",
        stats::machine_cpus(),
        stats::cpu_model(),
        stats::mem_total_gib(),
        stats::os_name(),
        stats::cpus_allowed(),
        if cfg!(debug_assertions) { "debug (numbers meaningless)" } else { "release" }
    );
    crate::workload::prng_self_test()?;
    let (w2, hashes) = w2_workload::verified(args.tickets)?;
    println!("  workload: w2_customers / w2_articles / w2_tickets (10,000) sha256 match bench/WORKLOADS.md");
    let fx = fixtures(&w2, args.durability)?;
    let mut r = Results { hashes, ..Default::default() };

    println!("\n[1/3] reference pass: {} tickets, in-memory, untimed rows; checks W2's counts", w2.tickets.len());
    let (expected, secs) = reference_pass(&fx, &w2, &args)?;
    r.reference = Some((Tally::of(&expected), secs));

    let stores: Vec<W2Store> = [
        (W2Store::Memory, "memory", true),
        (W2Store::Sqlite, "sqlite", true),
        (W2Store::Postgres, "postgres", args.postgres_url.is_some()),
        (W2Store::Redis, "redis", args.redis_url.is_some()),
    ]
    .into_iter()
    .filter(|&(_, name, available)| available && args.store(name))
    .map(|(store, _, _)| store)
    .collect();
    if args.phase("latency") {
        println!("\n[2/3] per-ticket latency, one thread ({} tickets after {WARMUP} warm-up)", args.timed);
        for &store in &stores {
            let l = latency_phase(&fx, &w2, &expected, store, &args)?;
            println!(
                "    {:<20} p50 {:>8.1} us  p99 {:>8.1} us  mean {:>8.1} us  max {:>8.1} us",
                store.name(),
                l.lat.p50_us,
                l.lat.p99_us,
                l.lat.mean_us,
                l.lat.max_us
            );
            r.latency.push((store, l));
        }
    }

    if args.phase("throughput") {
        println!(
            "\n[3/3] throughput in process, {} tickets in flight ({} tickets, 2 workers), after {WARMUP} warm-up",
            args.concurrency, args.timed
        );
        for &store in &stores {
            let t = throughput_phase(&fx, &w2, &expected, store, &args)?;
            println!("    {:<20} {:>8.0} tickets/s ({:.2} s)", store.name(), t.per_s, t.secs);
            r.throughput.push((store, t));
        }
    }
    r.total_secs = started.elapsed().as_secs_f64();

    let report = markdown(&args, &r);
    println!("\n{report}");
    if let Some(out) = &args.out {
        std::fs::write(out, &report).map_err(|e| format!("{}: {e}", out.display()))?;
        println!("(written to {})", out.display());
    }
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(&json_report(&args, &r)).map_err(err)?;
        std::fs::write(path, json).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    println!("all replays reproduced W2's outcomes; total {:.0} s", r.total_secs);
    Ok(())
}

/// The figures of the report, keyed by store (`memory`, `sqlite`, `postgres`, `redis`).
fn json_report(args: &Args, r: &Results) -> serde_json::Value {
    use serde_json::{json, Map, Value};
    let latency: Map<String, Value> = r
        .latency
        .iter()
        .map(|(store, l)| {
            let l = &l.lat;
            let v = json!({"tickets": l.n, "p50_us": l.p50_us, "p99_us": l.p99_us, "mean_us": l.mean_us, "max_us": l.max_us});
            (store.key().to_owned(), v)
        })
        .collect();
    let throughput: Map<String, Value> = r
        .throughput
        .iter()
        .map(|(store, t)| (store.key().to_owned(), json!({"tickets_per_s": t.per_s, "secs": t.secs})))
        .collect();
    json!({
        "workload": "w2",
        "engine": "frontdesk",
        "tickets": args.tickets,
        "timed": args.timed,
        "in_flight": args.concurrency,
        // The two `--durability` accepts.
        "durability": if args.durability == Durability::EveryNode { "every-node" } else { "by-effect" },
        "release": !cfg!(debug_assertions),
        "cpus_allowed": stats::cpus_allowed(),
        "latency": latency,
        "throughput": throughput,
        "total_secs": r.total_secs,
    })
}

fn ms(us: f64) -> String {
    format!("{:.3} ms", us / 1000.0)
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
    let mut cmd =
        format!("cargo run --release -p frontdesk-bench -- w2 --tickets {} --timed {}", args.tickets, args.timed);
    if args.postgres_url.is_some() {
        cmd.push_str(" --postgres-url \"$(scripts/ensure-postgres.sh | tail -n1)\"");
    }
    if args.redis_url.is_some() {
        cmd.push_str(" --redis-url \"$(scripts/ensure-redis.sh | tail -n1)\"");
    }
    let _ = writeln!(s, "### W2 results ({})\n", stats::now_utc());
    let _ = writeln!(s, "- Command: `{cmd}`");
    let _ = writeln!(
        s,
        "- Machine: {} x {} (process on CPUs {}), {:.1} GiB RAM, {}; {}; build profile {}",
        stats::machine_cpus(),
        stats::cpu_model(),
        stats::cpus_allowed(),
        stats::mem_total_gib(),
        stats::os_name(),
        stats::rustc_version(),
        if cfg!(debug_assertions) { "dev (NOT representative)" } else { "release" }
    );
    let _ = writeln!(
        s,
        "- Workload: {} tickets generated natively (SplitMix64, seed 0x5EED0002); sha256 of w2_customers `{}`, \
         w2_articles `{}`, w2_tickets (10,000) `{}` = bench/WORKLOADS.md.",
        args.tickets, r.hashes[0], r.hashes[1], r.hashes[2]
    );
    if let Some((tally, secs)) = &r.reference {
        let _ = writeln!(
            s,
            "- Outcomes (reference pass over all {} tickets, {:.1} s): {}; the first 2,000 give actions {} / {} / {}. \
             Every timed replay reproduced each ticket's route and action (the bench exits non-zero otherwise).",
            args.tickets,
            secs,
            tally.summary(),
            PUBLISHED_ACTIONS_2000[0],
            PUBLISHED_ACTIONS_2000[1],
            PUBLISHED_ACTIONS_2000[2]
        );
    }
    let _ = writeln!(
        s,
        "- Durability: {}",
        match args.durability {
            Durability::ByEffect => "by-effect, the triage workflow's default (per ticket: the accepting checkpoint; then a resolved or escalated ticket is archived by the run's handoff and its thread erased, a route_specialist ticket gets its final checkpoint)",
            Durability::EveryNode => "every-node (per ticket: the accepting checkpoint and one per node, as LangGraph's measured configuration writes)",
            Durability::Ephemeral => "ephemeral (nothing written; not a configuration the triage workflow accepts)",
        }
    );
    let _ = writeln!(
        s,
        "- Model: SCRIPTED test double (`ScriptedModel::from_fn`, without its request log) answering by W2's node \
         rules from the prompt text. Whole run: {:.0} s.\n",
        r.total_secs
    );
    let _ = writeln!(s, "{}\n", stats::REFERENCE_COLUMN);
    let _ = writeln!(
        s,
        "| W2 | Frontdesk | LangGraph 1.2.22 (reference) | Frontdesk advantage | Target >= {TARGET:.0}x | |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---|---|");
    for (store, l) in &r.latency {
        let row = format!(
            "| per ticket p50 (p99) incl. persist + delete, {}, one thread | {} ({}) |",
            store.name(),
            ms(l.lat.p50_us),
            ms(l.lat.p99_us)
        );
        match store.lg() {
            Some(i) => {
                let ratio = LG_P50_MS[i] * 1000.0 / l.lat.p50_us;
                let _ = writeln!(
                    s,
                    "{row} {} ms ({}) | {ratio:.0}x | >= {TARGET:.0}x faster | {} |",
                    LG_P50_MS[i],
                    LG_P99_MS[i],
                    met(ratio >= TARGET)
                );
            }
            None => {
                let _ = writeln!(s, "{row} (no Redis figure) | | | |");
            }
        }
    }
    for (store, t) in &r.throughput {
        let row = format!(
            "| throughput, {} in flight, {}, in process | {:.0} tickets/s |",
            args.concurrency,
            store.name(),
            t.per_s
        );
        match store.lg() {
            Some(i) => {
                let ratio = t.per_s / LG_TPUT[i];
                let _ = writeln!(
                    s,
                    "{row} {:.0} tickets/s | {ratio:.0}x | >= {TARGET:.0}x | {} |",
                    LG_TPUT[i],
                    met(ratio >= TARGET)
                );
            }
            None => {
                let _ = writeln!(s, "{row} (no Redis figure) | | | |");
            }
        }
    }
    let _ = writeln!(s, "\nDetails:\n");
    for (store, l) in &r.latency {
        let _ = writeln!(
            s,
            "- Latency, {}: {} tickets, p50 {:.1} us, p99 {:.1} us, mean {:.1} us, max {:.1} us.",
            store.name(),
            l.lat.n,
            l.lat.p50_us,
            l.lat.p99_us,
            l.lat.mean_us,
            l.lat.max_us
        );
    }
    if let Some((_, l)) = r.latency.iter().find(|(store, _)| *store == W2Store::Memory) {
        let _ = writeln!(
            s,
            "- In-memory p50 against LangGraph with no checkpointer at all ({LG_NO_CHECKPOINTER_MS} ms): {:.0}x.",
            LG_NO_CHECKPOINTER_MS * 1000.0 / l.lat.p50_us
        );
    }
    for (store, t) in &r.throughput {
        let _ = writeln!(
            s,
            "- Throughput in process ({} tasks, multi-thread runtime, 2 workers), {}: {:.0} tickets/s ({:.2} s for {} tickets, after {WARMUP} untimed).",
            args.concurrency,
            store.name(),
            t.per_s,
            t.secs,
            args.timed
        );
    }
    s
}
