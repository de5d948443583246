//! `frontdesk-bench scale`: many concurrent streaming conversations on ONE real `frontdesk-server`
//! process against a slow model, measuring what the server adds to each turn beyond the model's
//! own time, and the server's peak resident memory.
//!
//! ```text
//! cargo build --release -p frontdesk-server -p frontdesk-bench
//! target/release/frontdesk-bench scale [--conversations 10000] [--turns 8] [--model-latency-ms 500]
//!     [--model-jitter-ms 0] [--database sqlite|postgres] [--postgres-url URL] [--connections 4] [--ramp-ms MS]
//!     [--think-ms 0] [--metrics] [--server-bin PATH] [--keep]
//! ```
//!
//! The server runs as its own process (release build, default configuration apart from the
//! database, the model and the log) with the SCRIPTED provider (a test double, not an LLM): a
//! script file whose standing `by_purpose` answers route every intake turn to the chat agent and
//! answer it, each call sleeping `--model-latency-ms` (the script's top-level `delay_ms`). So
//! every turn makes two model calls (`supervisor.route`, `chat.chat`), and its model time is
//! twice the latency. `--model-jitter-ms J` draws each call's latency uniformly from
//! latency ± J instead (the script's `delay_jitter_ms`), as a real model's varies: with one fixed
//! latency, the conversations that one group commit or one busy moment delays together stay in
//! step for the rest of the run and arrive together every turn, in bursts real traffic does not
//! have. The run prints how bursty the arrivals were (SendMessage calls per 10 ms).
//!
//! Each conversation is started (StartConversation, untimed), then sends the turns of a W1
//! conversation (`workload.rs`, turn texts repeating after the eighth) one after the other over
//! SendMessage, reading each stream to its TurnResult. First turns are spread evenly over
//! `--ramp-ms` (default: one turn's model time) so that arrivals are spread as they would be with
//! users who came at different times; after that a conversation's next turn follows its
//! previous one after `--think-ms`. With no think time every conversation always has a stream
//! open, so `--conversations` streams are in flight at once.
//!
//! All streams share `--connections` HTTP/2 connections. tonic's server advertises no
//! SETTINGS_MAX_CONCURRENT_STREAMS (it replaces hyper's default of 200 with no limit), and an
//! h2 client whose server sets no limit opens as many streams as it is asked for, so neither side
//! needs a setting raised; the peak of streams open at once is printed to show it.
//!
//! Per turn: the wall time the client saw (SendMessage sent to TurnResult received), and the
//! added latency, that time minus the turn's model time, counted two ways: against the nominal
//! model time (calls x latency; what the server adds, its own timer and scheduling delays
//! included) and against the model latency the server reports in the stream's LlmCallFinished
//! events (what the server adds outside the model calls). Before any figure is printed the run
//! is checked: every turn got a TurnResult with the chat reply, CHAT mode and the turn count it
//! should have, and made exactly the two calls; the bench exits non-zero otherwise. Peak RSS is
//! the server process's VmHWM (`/proc/<pid>/status`) at the end of the run.
//!
//! `--metrics` runs the server with its Prometheus metrics on (`metrics.listen`), as an operator
//! would, and reads them at the end: the runs they counted must be the turns the client saw, and
//! the run prints how long the turns' checkpoint writes kept them waiting.

use std::{
    collections::BTreeMap,
    path::PathBuf,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

use frontdesk_api::v1::{
    self as pb, conversation_service_client::ConversationServiceClient, run_event::Kind, send_message_response::Payload,
};
use tokio::sync::Semaphore;
use tonic::transport::{Channel, Endpoint};

use crate::{
    chaos::{self, err, free_port, machine_line, multi_thread, ServerProc},
    stats,
    workload::{self, Conversation},
};

/// What the scripted chat agent answers every turn.
const REPLY: &str = "Thanks, noted. Tell me if you want to raise a change request.";
/// The model calls of one turn, in order.
const CALLS: [&str; 2] = ["supervisor.route", "chat.chat"];
/// StartConversation calls in flight at once while the conversations are created.
const START_CONCURRENCY: usize = 256;
/// A turn that takes longer than this is counted as failed.
const TURN_TIMEOUT: Duration = Duration::from_secs(300);
/// Targets (issue 23): p99 added latency per turn, and the server's peak RSS.
const TARGET_P99_ADDED_MS: f64 = 10.0;
const TARGET_RSS_BYTES: u64 = 1_000_000_000;

#[derive(Debug, Clone, PartialEq)]
struct Opts {
    conversations: usize,
    turns: usize,
    latency: Duration,
    jitter: Duration,
    postgres: bool,
    postgres_url: Option<String>,
    connections: usize,
    ramp: Option<Duration>,
    think: Duration,
    server_bin: Option<PathBuf>,
    keep: bool,
    metrics: bool,
}

impl Opts {
    fn parse(rest: impl Iterator<Item = String>) -> Result<Opts, String> {
        let mut o = Opts {
            conversations: 10_000,
            turns: 8,
            latency: Duration::from_millis(500),
            jitter: Duration::ZERO,
            postgres: false,
            postgres_url: None,
            connections: 4,
            ramp: None,
            think: Duration::ZERO,
            server_bin: None,
            keep: false,
            metrics: false,
        };
        let mut it = rest;
        while let Some(flag) = it.next() {
            let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
            let number = |v: String| v.parse::<u64>().map_err(|e| format!("{flag}: {e}"));
            match flag.as_str() {
                "--conversations" => o.conversations = (number(value()?)? as usize).max(1),
                "--turns" => o.turns = (number(value()?)? as usize).max(1),
                "--model-latency-ms" => o.latency = Duration::from_millis(number(value()?)?),
                "--model-jitter-ms" => o.jitter = Duration::from_millis(number(value()?)?),
                "--database" => match value()?.as_str() {
                    "sqlite" => o.postgres = false,
                    "postgres" => o.postgres = true,
                    other => return Err(format!("--database {other}: sqlite or postgres")),
                },
                "--postgres-url" => o.postgres_url = Some(value()?).filter(|u| !u.is_empty()),
                "--connections" => o.connections = (number(value()?)? as usize).max(1),
                "--ramp-ms" => o.ramp = Some(Duration::from_millis(number(value()?)?)),
                "--think-ms" => o.think = Duration::from_millis(number(value()?)?),
                "--server-bin" => o.server_bin = Some(PathBuf::from(value()?)),
                "--keep" => o.keep = true,
                "--metrics" => o.metrics = true,
                other => return Err(format!("unknown option {other}")),
            }
        }
        if o.jitter > o.latency {
            return Err("--model-jitter-ms cannot be more than --model-latency-ms".into());
        }
        if o.postgres && o.postgres_url.is_none() {
            o.postgres_url = std::env::var("FRONTDESK_TEST_POSTGRES_URL").ok().filter(|u| !u.is_empty());
            if o.postgres_url.is_none() {
                return Err("--database postgres needs --postgres-url or FRONTDESK_TEST_POSTGRES_URL".into());
            }
        }
        Ok(o)
    }

    /// One turn's model time: its calls, each taking the latency.
    fn model_time(&self) -> Duration {
        self.latency * CALLS.len() as u32
    }

    fn ramp(&self) -> Duration {
        self.ramp.unwrap_or_else(|| self.model_time())
    }
}

pub fn run(rest: impl Iterator<Item = String>) -> Result<(), String> {
    let o = Opts::parse(rest)?;
    multi_thread().block_on(scale_main(o))
}

// ---------------------------------------------------------------------------------------------
// the server

/// The script: every route is the chat agent, every chat answer the same, each after `latency`
/// give or take `jitter`.
fn script(latency: Duration, jitter: Duration) -> serde_json::Value {
    serde_json::json!({
        "model": "scripted-scale",
        "delay_ms": latency.as_millis() as u64,
        "delay_jitter_ms": jitter.as_millis() as u64,
        "by_purpose": {
            "supervisor.route": {"json": {"reasoning": "scale bench: always chat", "route": "chat_agent"}},
            "chat.chat": {"content": REPLY},
        },
    })
}

/// `metrics`: the port `GET /metrics` is served on, if any.
fn server_config(db_url: &str, script: &std::path::Path, metrics: Option<u16>) -> String {
    let metrics = metrics.map(|port| format!("\n[metrics]\nlisten = \"127.0.0.1:{port}\"\n")).unwrap_or_default();
    format!(
        r#"# frontdesk-bench scale
shutdown_grace_secs = 2

[database]
url = "{db_url}"

[model]
provider = "scripted"
script_file = "{script}"

[runs]
replica_id = "scale"

[log]
format = "text"
filter = "info"
{metrics}"#,
        script = script.display(),
    )
}

/// `GET /metrics` on the server's metrics listener: the OpenMetrics text.
async fn scrape(port: u16) -> Result<String, String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.map_err(err)?;
    let request = format!("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.map_err(err)?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await.map_err(err)?;
    let (head, body) = response.split_once("\r\n\r\n").ok_or("no HTTP response")?;
    match head.lines().next() {
        Some("HTTP/1.1 200 OK") => Ok(body.to_owned()),
        other => Err(format!("GET /metrics: {other:?}")),
    }
}

/// The value of the series `name` whose labels include every one of `labels` (`key="value"`).
fn series(text: &str, name: &str, labels: &[&str]) -> Option<f64> {
    text.lines().find_map(|line| {
        let (series, value) = line.split_once(' ')?;
        let (series_name, series_labels) = series.split_once('{').unwrap_or((series, ""));
        (series_name == name && labels.iter().all(|l| series_labels.contains(l))).then(|| value.parse().ok())?
    })
}

/// A histogram as the metrics text gives it.
#[derive(Debug, PartialEq)]
struct Histogram {
    count: f64,
    sum: f64,
    /// (upper bound, cumulative count), by bound.
    buckets: Vec<(f64, f64)>,
}

impl Histogram {
    /// The upper bound of the bucket that holds quantile `q`: the histogram says no more.
    fn bound(&self, q: f64) -> f64 {
        self.buckets.iter().find(|(_, cumulative)| *cumulative >= q * self.count).map_or(f64::INFINITY, |(le, _)| *le)
    }
}

/// The histogram `name` of the metrics text, its series with `labels`.
fn histogram(text: &str, name: &str, labels: &[&str]) -> Option<Histogram> {
    let count = series(text, &format!("{name}_count"), labels)?;
    let sum = series(text, &format!("{name}_sum"), labels)?;
    let bucket = format!("{name}_bucket");
    let mut buckets: Vec<(f64, f64)> = text
        .lines()
        .filter_map(|line| {
            let (series, value) = line.split_once(' ')?;
            let labels_text = series.strip_prefix(&bucket)?.strip_prefix('{')?;
            if !labels.iter().all(|l| labels_text.contains(l)) {
                return None;
            }
            let le = labels_text.split("le=\"").nth(1)?.split('"').next()?;
            let le = if le == "+Inf" { f64::INFINITY } else { le.parse().ok()? };
            Some((le, value.parse().ok()?))
        })
        .collect();
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    Some(Histogram { count, sum, buckets })
}

/// Checks the server's own count of runs against the turns the client saw, and prints how long
/// checkpoint writes kept the runs waiting.
fn report_metrics(text: &str, turns: u64) -> Result<(), String> {
    let intake = "workflow=\"intake\"";
    let completed = series(text, "frontdesk_runs_ended_total", &[intake, "outcome=\"completed\""]).unwrap_or(0.0);
    if completed != turns as f64 {
        return Err(format!("the server's metrics count {completed} completed intake runs, the client {turns} turns"));
    }
    let name = "frontdesk_checkpoint_write_duration_seconds";
    let committed =
        histogram(text, name, &["outcome=\"committed\""]).ok_or("no committed checkpoint writes in the metrics")?;
    let others = ["conflict", "failed"]
        .iter()
        .filter_map(|outcome| series(text, &format!("{name}_count"), &[&format!("outcome=\"{outcome}\"")]))
        .fold(0.0, |all, n| all + n);
    let ms = |seconds: f64| seconds * 1000.0;
    println!(
        "  server metrics: {completed} intake runs completed (as the client counted); {} checkpoint writes \
         committed ({:.2} a turn, conversation starts included), {others} not, a run waiting {:.3} ms on average for one, p50 <= {} ms, \
         p99 <= {} ms (the histogram's bucket bounds)",
        committed.count,
        committed.count / turns as f64,
        ms(committed.sum / committed.count.max(1.0)),
        ms(committed.bound(0.5)),
        ms(committed.bound(0.99)),
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// /proc

/// CPU time (user + system) in clock ticks from a `/proc/<pid>/stat` text.
fn parse_stat_ticks(stat: &str) -> Option<u64> {
    // The command name (field 2) may hold spaces and parentheses; the fields after it are plain.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15; `rest` starts at field 3.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

fn clock_ticks_per_sec() -> u64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100)
}

/// A process's resident memory now and at its peak, and its CPU time so far.
#[derive(Debug, Clone, Copy, Default)]
struct ProcSample {
    rss: u64,
    hwm: u64,
    cpu: Duration,
}

fn proc_sample(pid: &str, ticks_per_sec: u64) -> Result<ProcSample, String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).map_err(|e| format!("/proc/{pid}: {e}"))?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).map_err(|e| format!("/proc/{pid}: {e}"))?;
    let kb = |key| stats::parse_status_kb(&status, key).ok_or_else(|| format!("no {key} in /proc/{pid}/status"));
    let ticks = parse_stat_ticks(&stat).ok_or_else(|| format!("cannot read /proc/{pid}/stat"))?;
    Ok(ProcSample {
        rss: kb("VmRSS:")? * 1024,
        hwm: kb("VmHWM:")? * 1024,
        cpu: Duration::from_secs_f64(ticks as f64 / ticks_per_sec.max(1) as f64),
    })
}

// ---------------------------------------------------------------------------------------------
// figures

/// Nearest-rank percentiles of a set of samples (ns), in ms.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Summary {
    n: usize,
    p50: f64,
    p95: f64,
    p99: f64,
    max: f64,
    mean: f64,
}

fn summary(samples: impl IntoIterator<Item = u64>) -> Summary {
    let mut sorted: Vec<u64> = samples.into_iter().collect();
    sorted.sort_unstable();
    let at = |p| stats::percentile(&sorted, p) / 1_000.0;
    Summary {
        n: sorted.len(),
        p50: at(50.0),
        p95: at(95.0),
        p99: at(99.0),
        max: sorted.last().copied().unwrap_or(0) as f64 / 1e6,
        mean: sorted.iter().sum::<u64>() as f64 / sorted.len().max(1) as f64 / 1e6,
    }
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "p50 {:.2} ms, p95 {:.2} ms, p99 {:.2} ms, max {:.2} ms, mean {:.2} ms",
            self.p50, self.p95, self.p99, self.max, self.mean
        )
    }
}

/// One turn as the client saw it (ns).
#[derive(Debug, Clone, Copy, Default)]
struct TurnSample {
    wall: u64,
    /// The model latency the server reported for the turn's calls (LlmCallFinished).
    reported: u64,
    calls: u32,
    /// SendMessage sent to the stream's first event (the run started).
    first_event: u64,
    /// SendMessage sent to the last LlmCallFinished event.
    last_call: u64,
    /// Messages the stream carried (events and the result).
    messages: u32,
    /// When SendMessage was sent, since the turns began.
    sent_at: u64,
}

/// How evenly the turns arrived: SendMessage calls per 10 ms window, over the windows from the
/// end of the ramp (when every conversation has begun) to the last call.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Bursts {
    windows: usize,
    mean: f64,
    p99: u64,
    max: u64,
    /// Share of the calls made in windows holding at least five times the mean.
    in_bursts: f64,
}

impl Bursts {
    const WINDOW_NS: u64 = 10_000_000;

    fn of(sent_at: impl IntoIterator<Item = u64>, ramp: Duration) -> Bursts {
        let from = ramp.as_nanos() as u64;
        let mut counts: Vec<u64> = Vec::new();
        for at in sent_at.into_iter().filter(|at| *at >= from) {
            let window = ((at - from) / Self::WINDOW_NS) as usize;
            if counts.len() <= window {
                counts.resize(window + 1, 0);
            }
            counts[window] += 1;
        }
        let calls: u64 = counts.iter().sum();
        if calls == 0 {
            return Bursts::default();
        }
        let mean = calls as f64 / counts.len() as f64;
        let in_bursts = counts.iter().filter(|&&c| c as f64 >= 5.0 * mean).sum::<u64>() as f64 / calls as f64;
        let mut sorted = counts.clone();
        sorted.sort_unstable();
        let p99 = stats::nearest_rank(&sorted, 99.0);
        Bursts { windows: counts.len(), mean, p99, max: *sorted.last().unwrap_or(&0), in_bursts }
    }
}

impl std::fmt::Display for Bursts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "mean {:.1}, p99 {}, max {} over {} windows; {:.0}% of the calls in windows of 5x the mean or more",
            self.mean,
            self.p99,
            self.max,
            self.windows,
            self.in_bursts * 100.0
        )
    }
}

impl TurnSample {
    fn added_nominal(&self, latency: Duration) -> u64 {
        self.wall.saturating_sub(u64::from(self.calls) * latency.as_nanos() as u64)
    }

    fn added_reported(&self) -> u64 {
        self.wall.saturating_sub(self.reported)
    }
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / 1048576.0
}

fn met(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "NOT met"
    }
}

// ---------------------------------------------------------------------------------------------
// the client

/// Streams the client has asked for and not yet finished, and those the server has started
/// (first event seen), with their peaks.
#[derive(Default)]
struct Gauges {
    issued: AtomicUsize,
    issued_peak: AtomicUsize,
    open: AtomicUsize,
    open_peak: AtomicUsize,
}

impl Gauges {
    fn up(now: &AtomicUsize, peak: &AtomicUsize) {
        let n = now.fetch_add(1, Ordering::Relaxed) + 1;
        peak.fetch_max(n, Ordering::Relaxed);
    }
}

/// What the turns showed, merged over all conversations.
#[derive(Debug, Default)]
struct Outcome {
    samples: Vec<TurnSample>,
    purposes: BTreeMap<String, u64>,
    modes: BTreeMap<String, u64>,
    /// Turns without a correct TurnResult, by kind, with the first message of each.
    problems: BTreeMap<String, (u64, String)>,
}

impl Outcome {
    fn problem(&mut self, kind: &str, detail: String) {
        self.problems.entry(kind.to_owned()).or_insert_with(|| (0, detail)).0 += 1;
    }

    fn merge(&mut self, other: Outcome) {
        self.samples.extend(other.samples);
        for (k, n) in other.purposes {
            *self.purposes.entry(k).or_default() += n;
        }
        for (k, n) in other.modes {
            *self.modes.entry(k).or_default() += n;
        }
        for (k, (n, first)) in other.problems {
            self.problems.entry(k).or_insert_with(|| (0, first)).0 += n;
        }
    }

    /// Every turn got its result, in CHAT mode, after exactly the two calls.
    fn check(&self, turns: u64) -> Result<(), String> {
        let mut wrong = Vec::new();
        if self.samples.len() as u64 != turns {
            wrong.push(format!("{} turns completed, {turns} expected", self.samples.len()));
        }
        for call in CALLS {
            let n = self.purposes.get(call).copied().unwrap_or(0);
            if n != turns {
                wrong.push(format!("{n} {call} calls, {turns} expected"));
            }
        }
        let others: u64 = self.purposes.iter().filter(|(k, _)| !CALLS.contains(&k.as_str())).map(|(_, n)| n).sum();
        if others > 0 {
            wrong.push(format!("{others} calls of other purposes"));
        }
        let chat = self.modes.get("CHAT").copied().unwrap_or(0);
        if chat != turns {
            wrong.push(format!("CHAT after {chat} turns, {turns} expected (modes {:?})", self.modes));
        }
        for (kind, (n, first)) in &self.problems {
            wrong.push(format!("{kind} x{n} (first: {first})"));
        }
        if wrong.is_empty() {
            Ok(())
        } else {
            Err(wrong.join("; "))
        }
    }
}

/// One turn: SendMessage, its stream read to the TurnResult, checked.
async fn turn(
    client: &mut ConversationServiceClient<Channel>,
    id: &str,
    text: &str,
    expected_turns: u32,
    epoch: Instant,
    gauges: &Gauges,
    out: &mut Outcome,
) -> Result<TurnSample, String> {
    let started = Instant::now();
    let mut sample = TurnSample { sent_at: (started - epoch).as_nanos() as u64, ..Default::default() };
    let request =
        pb::SendMessageRequest { conversation_id: id.to_owned(), text: text.to_owned(), ..Default::default() };
    let mut stream = client.send_message(request).await.map_err(|s| format!("SendMessage: {s}"))?.into_inner();
    let mut result = None;
    let mut open = false;
    let read = async {
        while let Some(item) = stream.message().await.map_err(|s| format!("stream: {s}"))? {
            sample.messages += 1;
            if !open {
                open = true;
                sample.first_event = started.elapsed().as_nanos() as u64;
                Gauges::up(&gauges.open, &gauges.open_peak);
            }
            match item.payload {
                Some(Payload::Event(pb::RunEvent { kind: Some(Kind::LlmCallFinished(call)), .. })) => {
                    sample.calls += 1;
                    sample.last_call = started.elapsed().as_nanos() as u64;
                    let latency = call.latency.unwrap_or_default();
                    sample.reported += latency.seconds as u64 * 1_000_000_000 + latency.nanos as u64;
                    *out.purposes.entry(call.purpose).or_default() += 1;
                }
                Some(Payload::Result(r)) => result = Some(r),
                _ => {}
            }
        }
        Ok::<_, String>(())
    };
    let read = tokio::time::timeout(TURN_TIMEOUT, read).await;
    if open {
        gauges.open.fetch_sub(1, Ordering::Relaxed);
    }
    read.map_err(|_| format!("no result within {} s", TURN_TIMEOUT.as_secs()))??;
    sample.wall = started.elapsed().as_nanos() as u64;
    let result = result.ok_or("the stream ended without a TurnResult")?;
    let conversation = result.conversation.ok_or("a TurnResult without the conversation")?;
    let mode = match &conversation.state {
        Some(pb::conversation::State::Intake(state)) => {
            pb::IntakeMode::try_from(state.mode).map_or("?", |m| m.as_str_name()).trim_start_matches("INTAKE_MODE_")
        }
        _ => "no intake state",
    };
    *out.modes.entry(mode.to_owned()).or_default() += 1;
    let reply = result.reply.map(|m| m.text).unwrap_or_default();
    if reply != REPLY {
        out.problem("wrong reply", format!("{id}: {reply:?}"));
    }
    if conversation.turn_count != expected_turns {
        out.problem("wrong turn count", format!("{id}: {} after turn {expected_turns}", conversation.turn_count));
    }
    Ok(sample)
}

async fn conversation(
    mut client: ConversationServiceClient<Channel>,
    conv: Conversation,
    turns: usize,
    (epoch, delay): (Instant, Duration),
    think: Duration,
    gauges: Arc<Gauges>,
) -> Outcome {
    let mut out = Outcome::default();
    tokio::time::sleep(delay).await;
    for t in 0..turns {
        if t > 0 && !think.is_zero() {
            tokio::time::sleep(think).await;
        }
        Gauges::up(&gauges.issued, &gauges.issued_peak);
        let text = &conv.turns[t % 8];
        let result = turn(&mut client, &conv.thread_id, text, t as u32 + 1, epoch, &gauges, &mut out).await;
        gauges.issued.fetch_sub(1, Ordering::Relaxed);
        match result {
            Ok(sample) => out.samples.push(sample),
            Err(e) => {
                // The conversation stops at its first failed turn: later turns would be busy or
                // out of order.
                out.problem("failed turn", format!("{} turn {}: {e}", conv.thread_id, t + 1));
                break;
            }
        }
    }
    out
}

async fn start_all(channels: &[Channel], convs: &[Conversation]) -> Result<(), String> {
    let permits = Arc::new(Semaphore::new(START_CONCURRENCY));
    let mut tasks = Vec::with_capacity(convs.len());
    for (i, c) in convs.iter().enumerate() {
        let mut client = ConversationServiceClient::new(channels[i % channels.len()].clone());
        let permits = permits.clone();
        let id = c.thread_id.clone();
        tasks.push(tokio::spawn(async move {
            let _permit = permits.acquire_owned().await.map_err(err)?;
            let request = pb::StartConversationRequest {
                workflow: "intake".into(),
                conversation_id: id.clone(),
                idempotency_key: String::new(),
            };
            client.start_conversation(request).await.map(drop).map_err(|s| format!("{id} start: {s}"))
        }));
    }
    for t in tasks {
        t.await.map_err(err)??;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// the run

async fn scale_main(o: Opts) -> Result<(), String> {
    let began = Instant::now();
    let bin = chaos::server_bin(o.server_bin.as_deref())?;
    let dir = tempfile::Builder::new().prefix("frontdesk-scale-").tempdir().map_err(err)?;
    let script_path = dir.path().join("script.json");
    std::fs::write(&script_path, script(o.latency, o.jitter).to_string()).map_err(err)?;
    let (db_url, pg) = match (&o.postgres, &o.postgres_url) {
        (true, Some(admin)) => {
            let scratch = crate::scratch_database(admin, "bench_scale").await?;
            (scratch.url().to_owned(), Some(scratch))
        }
        _ => (format!("sqlite://{}", dir.path().join("frontdesk.db").display()), None),
    };
    let config = dir.path().join("scale.toml");
    let metrics = if o.metrics { Some(free_port()?) } else { None };
    std::fs::write(&config, server_config(&db_url, &script_path, metrics)).map_err(err)?;
    let mut server = ServerProc::with_config("scale", free_port()?, bin.clone(), config, dir.path().join("server.log"));

    let result = measure(&o, &mut server, metrics).await;
    server.kill();
    if let Some(pg) = pg {
        if o.keep {
            println!("  kept PostgreSQL database {}", pg.keep());
        } else {
            crate::drop_scratch_database(pg).await;
        }
    }
    if o.keep || result.is_err() {
        let kept = dir.keep();
        println!("  kept for inspection: {} (server.log, scale.toml, script.json, database)", kept.display());
    }
    result?;
    println!("  total {:.0} s", began.elapsed().as_secs_f64());
    Ok(())
}

async fn measure(o: &Opts, server: &mut ServerProc, metrics: Option<u16>) -> Result<(), String> {
    let n = o.conversations;
    let database = if o.postgres { "PostgreSQL" } else { "SQLite (file, WAL)" };
    println!("frontdesk-bench scale: {n} concurrent streaming conversations on one frontdesk-server process");
    println!("  machine: {}", machine_line());
    let sleeps = match o.jitter.as_millis() {
        0 => format!("{} ms", o.latency.as_millis()),
        j => format!("{} ms +- {j} ms (uniform)", o.latency.as_millis()),
    };
    println!(
        "  model: SCRIPTED test double (not an LLM), every call sleeps {sleeps}; 2 calls per turn ({}), so {} ms \
         of model time per turn on average",
        CALLS.join(", "),
        o.model_time().as_millis()
    );
    println!(
        "  workload: {n} intake conversations x {} turns (W1 turn texts), first turns spread over {} ms, \
         think time {} ms; {database}; {} HTTP/2 connections",
        o.turns,
        o.ramp().as_millis(),
        o.think.as_millis(),
        o.connections
    );

    let ready = server.start().await?;
    let pid = server.pid().ok_or("the server is not running")?.to_string();
    let ticks = clock_ticks_per_sec();
    let at_start = proc_sample(&pid, ticks)?;
    println!(
        "\n  server pid {pid} ({}) listening after {:.0} ms; RSS {:.1} MiB",
        server.url(),
        ready.as_secs_f64() * 1000.0,
        mib(at_start.rss)
    );

    let mut channels = Vec::with_capacity(o.connections);
    for _ in 0..o.connections {
        let endpoint = Endpoint::from_shared(server.url()).map_err(err)?.tcp_nodelay(true);
        channels.push(endpoint.connect().await.map_err(err)?);
    }

    let convs: Vec<Conversation> = workload::conversations(n)
        .into_iter()
        .map(|mut c| {
            c.thread_id = format!("scale-{:06}", c.index);
            c
        })
        .collect();
    let t = Instant::now();
    start_all(&channels, &convs).await?;
    let started = proc_sample(&pid, ticks)?;
    println!(
        "  [1/2] {n} conversations started in {:.1} s; server RSS {:.1} MiB",
        t.elapsed().as_secs_f64(),
        mib(started.rss)
    );

    let gauges = Arc::new(Gauges::default());
    let samples = Arc::new(Mutex::new(Vec::new()));
    let sampler = {
        let (gauges, samples) = (gauges.clone(), samples.clone());
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(100)).await;
                let now = (gauges.issued.load(Ordering::Relaxed), gauges.open.load(Ordering::Relaxed));
                samples.lock().expect("samples").push(now);
            }
        })
    };
    let self_before = proc_sample("self", ticks)?;
    let t = Instant::now();
    let ramp = o.ramp();
    let mut tasks = Vec::with_capacity(n);
    for (i, c) in convs.into_iter().enumerate() {
        let client = ConversationServiceClient::new(channels[i % channels.len()].clone());
        let delay = ramp.mul_f64(i as f64 / n as f64);
        tasks.push(tokio::spawn(conversation(client, c, o.turns, (t, delay), o.think, gauges.clone())));
    }
    let mut outcome = Outcome::default();
    for task in tasks {
        outcome.merge(task.await.map_err(err)?);
    }
    let secs = t.elapsed().as_secs_f64();
    sampler.abort();
    let end = proc_sample(&pid, ticks)?;
    let self_end = proc_sample("self", ticks)?;

    let turns = (n * o.turns) as u64;
    println!(
        "  [2/2] {} turns in {secs:.1} s ({:.0} turns/s)",
        outcome.samples.len(),
        outcome.samples.len() as f64 / secs
    );
    let purposes: Vec<String> = outcome.purposes.iter().map(|(k, v)| format!("{k} {v}")).collect();
    let modes: Vec<String> = outcome.modes.iter().map(|(k, v)| format!("{k} {v}")).collect();
    println!("  model calls by purpose: {}; mode after the turn: {}", purposes.join(", "), modes.join(", "));
    let errors: u64 = outcome.problems.values().map(|(n, _)| n).sum();
    println!("  errors: {errors}");
    outcome.check(turns).map_err(|e| format!("the run is not right, no figures: {e}"))?;
    println!(
        "  checked: every turn got its TurnResult (chat reply, CHAT mode, turn count) after exactly 2 model calls"
    );
    if let Some(port) = metrics {
        report_metrics(&scrape(port).await?, turns)?;
    }

    // The gauges as sampled every 100 ms while any turn was under way (ramp and drain included).
    let busy: Vec<(usize, usize)> =
        samples.lock().expect("samples").iter().copied().filter(|(issued, _)| *issued > 0).collect();
    let mean = |f: fn(&(usize, usize)) -> usize| busy.iter().map(f).sum::<usize>() as f64 / busy.len().max(1) as f64;
    println!(
        "  streams in flight: peak {} asked for, peak {} open on the server (first event seen); \
         mean over the run {:.0} / {:.0}",
        gauges.issued_peak.load(Ordering::Relaxed),
        gauges.open_peak.load(Ordering::Relaxed),
        mean(|s| s.0),
        mean(|s| s.1)
    );

    let s = &outcome.samples;
    let wall = summary(s.iter().map(|x| x.wall));
    let nominal = summary(s.iter().map(|x| x.added_nominal(o.latency)));
    let reported = summary(s.iter().map(|x| x.added_reported()));
    let first = summary(s.iter().map(|x| x.first_event));
    let last = summary(s.iter().map(|x| x.wall.saturating_sub(x.last_call)));
    let bursts = Bursts::of(s.iter().map(|x| x.sent_at), ramp);
    let model_reported = summary(s.iter().map(|x| x.reported));
    println!("\n  per turn ({} turns):", wall.n);
    println!("    wall time seen by the client:               {wall}");
    println!("    model time reported by the server:          {model_reported}");
    if o.jitter.is_zero() {
        println!("    added beyond the nominal model time:        {nominal}");
    }
    println!("    added beyond the reported model time:       {reported}");
    println!("    SendMessage to the stream's first event:    {first}");
    println!("    last model call's event to the TurnResult:  {last}");
    println!(
        "    (a stream carries {:.1} messages: events and the result)",
        s.iter().map(|x| f64::from(x.messages)).sum::<f64>() / s.len().max(1) as f64
    );
    println!("  arrivals after the ramp, SendMessage calls per 10 ms: {bursts}");
    let cpu = end.cpu.saturating_sub(started.cpu).as_secs_f64();
    let client_cpu = self_end.cpu.saturating_sub(self_before.cpu).as_secs_f64();
    println!(
        "  CPU during the turns: server {cpu:.1} s ({:.0} us per turn, {:.0}% of one core), bench client {client_cpu:.1} s",
        cpu * 1e6 / turns as f64,
        cpu * 100.0 / secs
    );
    println!(
        "  server RSS: {:.1} MiB at start, {:.1} MiB with {n} conversations started, {:.1} MiB at the end; \
         peak (VmHWM) {:.1} MiB",
        mib(at_start.rss),
        mib(started.rss),
        mib(end.rss),
        mib(end.hwm)
    );
    println!("\n  targets:");
    if o.jitter.is_zero() {
        println!(
            "    p99 added latency per turn <= {TARGET_P99_ADDED_MS} ms: {:.2} ms against the nominal model time ({}), \
             {:.2} ms against the reported ({})",
            nominal.p99,
            met(nominal.p99 <= TARGET_P99_ADDED_MS),
            reported.p99,
            met(reported.p99 <= TARGET_P99_ADDED_MS)
        );
    } else {
        // A jittered call has no nominal time of its own: only the reported one counts.
        println!(
            "    p99 added latency per turn <= {TARGET_P99_ADDED_MS} ms: {:.2} ms against the reported model time ({})",
            reported.p99,
            met(reported.p99 <= TARGET_P99_ADDED_MS)
        );
    }
    println!("    server peak RSS <= 1 GB: {:.0} MB ({})", end.hwm as f64 / 1e6, met(end.hwm <= TARGET_RSS_BYTES));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> impl Iterator<Item = String> + '_ {
        s.split_whitespace().map(str::to_owned)
    }

    /// The metrics text as the server writes it (a histogram's `le` after its own labels).
    #[test]
    fn metrics_text_is_read() {
        let text = "# TYPE frontdesk_runs_ended counter\n\
            frontdesk_runs_ended_total{workflow=\"intake\",outcome=\"completed\"} 16\n\
            frontdesk_runs_ended_total{workflow=\"intake\",outcome=\"failed\"} 1\n\
            frontdesk_checkpoint_write_duration_seconds_sum{outcome=\"committed\"} 0.0048\n\
            frontdesk_checkpoint_write_duration_seconds_count{outcome=\"committed\"} 32\n\
            frontdesk_checkpoint_write_duration_seconds_bucket{le=\"0.00005\",outcome=\"committed\"} 0\n\
            frontdesk_checkpoint_write_duration_seconds_bucket{outcome=\"committed\",le=\"0.0002\"} 31\n\
            frontdesk_checkpoint_write_duration_seconds_bucket{outcome=\"committed\",le=\"0.0001\"} 16\n\
            frontdesk_checkpoint_write_duration_seconds_bucket{outcome=\"committed\",le=\"+Inf\"} 32\n\
            frontdesk_checkpoint_write_duration_seconds_count{outcome=\"conflict\"} 2\n\
            # EOF\n";
        let completed = series(text, "frontdesk_runs_ended_total", &["workflow=\"intake\"", "outcome=\"completed\""]);
        assert_eq!(completed, Some(16.0));
        assert_eq!(series(text, "frontdesk_runs_ended_total", &["outcome=\"cancelled\""]), None);
        let name = "frontdesk_checkpoint_write_duration_seconds";
        let committed = histogram(text, name, &["outcome=\"committed\""]).unwrap();
        let buckets = vec![(0.00005, 0.0), (0.0001, 16.0), (0.0002, 31.0), (f64::INFINITY, 32.0)];
        assert_eq!(committed, Histogram { count: 32.0, sum: 0.0048, buckets });
        assert_eq!(committed.bound(0.5), 0.0001);
        assert_eq!(committed.bound(0.99), f64::INFINITY, "the 32nd write is past the last bound");
        assert!(histogram(text, name, &["outcome=\"failed\""]).is_none());
        assert!(report_metrics(text, 16).is_ok());
        assert!(report_metrics(text, 17).unwrap_err().contains("16 completed intake runs"));
    }

    #[test]
    fn options_parse() {
        let o = Opts::parse(args("")).unwrap();
        assert_eq!((o.conversations, o.turns, o.latency, o.connections), (10_000, 8, Duration::from_millis(500), 4));
        assert_eq!(o.ramp(), Duration::from_millis(1000), "one turn's model time");
        let o =
            Opts::parse(args("--conversations 500 --turns 3 --model-latency-ms 20 --ramp-ms 7 --think-ms 5")).unwrap();
        assert_eq!((o.conversations, o.turns, o.latency), (500, 3, Duration::from_millis(20)));
        assert_eq!((o.ramp(), o.think), (Duration::from_millis(7), Duration::from_millis(5)));
        assert_eq!(Opts::parse(args("--model-jitter-ms 100")).unwrap().jitter, Duration::from_millis(100));
        assert!(Opts::parse(args("--model-latency-ms 50 --model-jitter-ms 51")).is_err());
        assert!(!o.metrics && Opts::parse(args("--metrics")).unwrap().metrics);
        assert!(Opts::parse(args("--database mysql")).is_err());
        assert!(Opts::parse(args("--turns")).is_err());
        assert!(Opts::parse(args("--bogus 1")).is_err());
    }

    #[test]
    fn summaries_are_nearest_rank_in_ms() {
        // 1..=1000 ms.
        let s = summary((1..=1000u64).rev().map(|ms| ms * 1_000_000));
        assert_eq!((s.n, s.p50, s.p95, s.p99, s.max), (1000, 500.0, 950.0, 990.0, 1000.0));
        assert!((s.mean - 500.5).abs() < 1e-9);
        assert_eq!(summary([]), Summary::default());
        assert_eq!(summary([3_000_000]).p99, 3.0);
    }

    #[test]
    fn bursts_count_calls_per_window_after_the_ramp() {
        let ms = |m: u64| m * 1_000_000;
        // Before the 100 ms ramp ends: not counted. Then 1 call in each of 9 windows, 11 in one.
        let mut sent = vec![ms(5), ms(50)];
        sent.extend((0..9).map(|w| ms(100 + 10 * w)));
        sent.extend((0..11).map(|i| ms(195) + i));
        let b = Bursts::of(sent, Duration::from_millis(100));
        assert_eq!((b.windows, b.max, b.p99), (10, 11, 11));
        assert!((b.mean - 2.0).abs() < 1e-9);
        assert!((b.in_bursts - 0.55).abs() < 1e-9, "11 of 20 calls in the one window of 5x the mean");
        assert_eq!(Bursts::of([ms(1)], Duration::from_millis(100)), Bursts::default());
    }

    #[test]
    fn added_latency_is_what_remains_beyond_the_model() {
        let t = TurnSample { wall: 1_004_000_000, reported: 1_001_000_000, calls: 2, ..Default::default() };
        assert_eq!(t.added_nominal(Duration::from_millis(500)), 4_000_000);
        assert_eq!(t.added_reported(), 3_000_000);
        let early = TurnSample { wall: 900_000_000, reported: 950_000_000, calls: 2, ..Default::default() };
        assert_eq!((early.added_nominal(Duration::from_millis(500)), early.added_reported()), (0, 0));
    }

    #[test]
    fn proc_status_and_stat_parse() {
        let status = "Name:\tfrontdesk-serve\nVmPeak:\t 1234567 kB\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\n";
        assert_eq!(stats::parse_status_kb(status, "VmHWM:"), Some(204_800));
        assert_eq!(stats::parse_status_kb(status, "VmRSS:"), Some(102_400));
        assert_eq!(stats::parse_status_kb(status, "VmSwap:"), None);
        // The command name may contain spaces and parentheses.
        let stat = "4242 (frontdesk (x) y) S 1 4242 4242 0 -1 4194560 100 0 0 0 1234 567 0 0 20 0 6 0";
        assert_eq!(parse_stat_ticks(stat), Some(1234 + 567));
        assert_eq!(parse_stat_ticks("4242 (short) S 1"), None);
    }

    #[test]
    fn outcome_check_wants_every_turn_right() {
        let good = |turns: u64| Outcome {
            samples: vec![TurnSample::default(); turns as usize],
            purposes: CALLS.iter().map(|c| ((*c).to_owned(), turns)).collect(),
            modes: [("CHAT".to_owned(), turns)].into(),
            problems: BTreeMap::new(),
        };
        assert!(good(6).check(6).is_ok());
        assert!(good(5).check(6).is_err(), "a turn missing");
        let mut extra = good(6);
        extra.purposes.insert("elicitation.extract".into(), 1);
        assert!(extra.check(6).is_err(), "a call of another purpose");
        let mut failed = good(6);
        failed.problem("failed turn", "scale-000001 turn 2: stream: cancelled".into());
        let e = failed.check(6).unwrap_err();
        assert!(e.contains("failed turn x1"), "{e}");
    }

    #[tokio::test]
    async fn the_script_routes_to_chat_and_answers_after_the_latency() {
        use frontdesk_llm::{ChatModel, ChatRequest};
        let model =
            frontdesk_llm::ScriptedModel::from_json_str(&script(Duration::from_millis(20), Duration::ZERO).to_string())
                .unwrap();
        let ask = |purpose: &str| ChatRequest { purpose: purpose.into(), ..Default::default() };
        let started = Instant::now();
        let route = model.chat(&ask(CALLS[0])).await.unwrap();
        assert!(started.elapsed() >= Duration::from_millis(20));
        assert_eq!(serde_json::from_str::<serde_json::Value>(&route.content).unwrap()["route"], "chat_agent");
        assert_eq!(model.chat(&ask(CALLS[1])).await.unwrap().content, REPLY);
        assert!(model.chat(&ask("elicitation.extract")).await.is_err(), "only the chat path is scripted");
    }
}
