//! `frontdesk-bench chaos-replicas`: two replicas of the REAL `frontdesk-server` binary
//! (different replica ids and ports) on ONE PostgreSQL database, two clients driving the SAME
//! W1 conversations, and one replica SIGKILLed for good mid-run.
//!
//! ```text
//! cargo build --release -p frontdesk-server -p frontdesk-bench
//! target/release/frontdesk-bench chaos-replicas --postgres-url URL [--turns 1600]
//!     [--conversations 8] [--model-latency-ms 20] [--kill-at 0.4] [--seed N] [--keep]
//! ```
//!
//! Client A prefers replica 1, client B replica 2 (each client has its own connections). Turn
//! `t` of conversation `k` is sent by client `(k + t) mod 2`, so both replicas serve every
//! conversation; with probability one half the other client sends the same turn with the same
//! idempotency key at the same moment to its own replica (a duplicate submission racing across
//! replicas), and both acknowledgements must name the same run and reply. Once `--kill-at` of the
//! turns are acknowledged, replica 2 is SIGKILLed and never restarted: callers move to replica 1
//! after a connection failure, retrying with the turn's key (honouring RetryInfo, which says how
//! long the dead replica's lease still runs), and replica 1 takes the dead replica's runs over
//! when its lease expires (`runs.lease_secs`, default 10; scans every `runs.takeover_scan_secs`,
//! default 2). The verification is `chaos-kill`'s (exactly once from the server's records, one
//! outbox submission per conversation, W1's outcome counts), plus: every call that was in flight
//! on the killed replica was acknowledged, by the survivor or by the killed replica itself if it
//! answered before the SIGKILL landed.

use std::{
    collections::{BTreeMap, HashMap},
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

use crate::{
    chaos::{
        err, errors_line, free_port, machine_line, merge_errors, multi_thread, percentile, print_error_examples,
        print_verdict, span_line, verify, w1, wait_line, waits, Caller, ConvRun, Env, InFlight, Opts,
    },
    workload::{Conversation, SplitMix64},
};

/// The 15 s a caller whose replica died may wait with default lease settings (issue 21).
const TARGET_WAIT: Duration = Duration::from_secs(15);

pub fn run(rest: impl Iterator<Item = String>) -> Result<(), String> {
    // --kill-at is this command's own option; the rest are chaos-kill's.
    let mut kill_at = 0.4f64;
    let mut others = Vec::new();
    let mut rest = rest;
    while let Some(arg) = rest.next() {
        if arg == "--kill-at" {
            let v = rest.next().ok_or("--kill-at needs a value")?;
            kill_at = v.parse::<f64>().map_err(|e| format!("--kill-at: {e}"))?.clamp(0.0, 1.0);
        } else {
            others.push(arg);
        }
    }
    let defaults = Opts {
        turns: 1600,
        kills: 1,
        conversations: 8,
        postgres: true,
        postgres_url: None,
        server_bin: None,
        model_latency_ms: 20,
        uptime_ms: (0, 1),
        seed: Opts::default_seed(),
        keep: false,
    };
    let o = Opts::parse(others.into_iter(), defaults)?;
    multi_thread().block_on(replicas_main(o, kill_at))
}

/// One call in flight on the killed replica: (conversation id, turn 1-based, caller name).
fn parse_label(label: &str) -> Option<(String, usize, String)> {
    // "{id} turn {n} by {caller}"
    let (id, rest) = label.split_once(" turn ")?;
    let (turn, caller) = rest.split_once(" by ")?;
    Some((id.to_owned(), turn.parse().ok()?, caller.to_owned()))
}

async fn replicas_main(o: Opts, kill_at: f64) -> Result<(), String> {
    let began = Instant::now();
    let admin = o
        .postgres_url
        .clone()
        .ok_or("chaos-replicas needs PostgreSQL: --postgres-url URL or FRONTDESK_TEST_POSTGRES_URL")?;
    let n_convs = o.turns.div_ceil(8).max(1);
    println!(
        "frontdesk-bench chaos-replicas: two frontdesk-server replicas on one PostgreSQL database, two clients on \
         the same W1 conversations, one replica SIGKILLed for good"
    );
    println!("  machine: {}", machine_line());
    println!(
        "  {n_convs} conversations ({} turns), {} in flight, kill after {:.0} % of the turns, model latency {} ms \
         per call, default lease settings (lease 10 s, takeover scan 2 s), seed {}",
        n_convs * 8,
        o.conversations,
        kill_at * 100.0,
        o.model_latency_ms,
        o.seed
    );
    let convs = Arc::new(w1()?[..n_convs].to_vec());
    let env = Env::new("chaos-replicas", Some(&admin), o.server_bin.as_deref(), o.model_latency_ms).await?;
    let mut r1 = env.server("chaos-r1", free_port()?)?;
    let mut r2 = env.server("chaos-r2", free_port()?)?;
    // One after the other: the first runs the migrations on the fresh database.
    r1.start().await?;
    r2.start().await?;
    let urls = vec![r1.url(), r2.url()];
    println!(
        "  replica chaos-r1 {} (log {}), replica chaos-r2 {} (log {})",
        urls[0],
        r1.log.display(),
        urls[1],
        r2.log.display()
    );

    let acked = Arc::new(AtomicUsize::new(0));
    let next = Arc::new(AtomicUsize::new(0));
    let inflight: InFlight = Arc::new(Mutex::new(HashMap::new()));
    let kill_after = ((n_convs * 8) as f64 * kill_at) as usize;

    let killer = {
        let (acked, inflight) = (acked.clone(), inflight.clone());
        tokio::spawn(async move {
            while acked.load(Ordering::Relaxed) < kill_after {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            let on_r2: Vec<String> = inflight
                .lock()
                .expect("in-flight list")
                .values()
                .filter(|(endpoint, _)| *endpoint == 1)
                .map(|(_, label)| label.clone())
                .collect();
            let at = Instant::now();
            r2.kill();
            println!(
                "    SIGKILL chaos-r2 (for good) at {:.1} s, {} turns acknowledged, {} calls in flight on it",
                began.elapsed().as_secs_f64(),
                acked.load(Ordering::Relaxed),
                on_r2.len()
            );
            (r2, at, on_r2)
        })
    };

    let mut tasks = Vec::new();
    for slot in 0..o.conversations {
        let (convs, acked, next, inflight, urls) =
            (convs.clone(), acked.clone(), next.clone(), inflight.clone(), urls.clone());
        let seed = o.seed ^ (slot as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        tasks.push(tokio::spawn(async move {
            let mut rng = SplitMix64::new(seed);
            let mut callers =
                [Caller::new("A", urls.clone(), 0, Some(inflight.clone())), Caller::new("B", urls, 1, Some(inflight))];
            let mut runs = Vec::new();
            loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                if index >= convs.len() {
                    break;
                }
                let observe: Vec<bool> = (0..8).map(|_| rng.below(2) == 0).collect();
                runs.push(drive_shared(&mut callers, &convs[index], &observe, &acked).await);
            }
            let [a, b] = callers;
            let mut errors = a.errors.clone();
            merge_errors(&mut errors, &b.errors);
            (runs, errors, a.longest_retry_info.max(b.longest_retry_info))
        }));
    }
    let mut runs = Vec::new();
    let mut errors = BTreeMap::new();
    let mut longest_retry_info = Duration::ZERO;
    for t in tasks {
        let (r, e, l) = t.await.map_err(err)?;
        runs.extend(r);
        merge_errors(&mut errors, &e);
        longest_retry_info = longest_retry_info.max(l);
    }
    runs.sort_by_key(|r| r.index);
    let drive_secs = began.elapsed().as_secs_f64();
    let killed = if killer.is_finished() || acked.load(Ordering::Relaxed) >= kill_after {
        Some(killer.await.map_err(err)?)
    } else {
        killer.abort();
        None
    };

    let mut verdict = verify(&urls[0], &env, &convs, &runs).await;

    // Every call in flight on the killed replica: acknowledged, by the survivor, or by the killed
    // replica itself when it answered between the snapshot of the in-flight list and the SIGKILL
    // (a dead process sends nothing, so such an answer was committed and sent before it died; the
    // server's records below check it like any other turn).
    let mut orphans = Vec::new();
    let mut answered_before_kill = 0usize;
    if let Some((_, _, on_r2)) = &killed {
        let by_id: HashMap<&str, &ConvRun> = runs.iter().map(|r| (convs[r.index].thread_id.as_str(), r)).collect();
        for label in on_r2 {
            let Some((id, turn, caller)) = parse_label(label) else {
                // A StartConversation in flight ("{id} start by X"): verified with its conversation.
                continue;
            };
            let run = by_id.get(id.as_str());
            let owner = (run.map_or(0, |r| r.index) + turn - 1) % 2;
            let caller_index = usize::from(caller == "B");
            let ack = run.and_then(|r| {
                if caller_index == owner {
                    r.acks[turn - 1].clone()
                } else {
                    r.observed[turn - 1].clone()
                }
            });
            match ack {
                Some(a) if a.endpoint == 0 => orphans.push((label.clone(), a)),
                Some(_) => answered_before_kill += 1,
                None => verdict_problem(
                    &mut verdict,
                    format!("{label}: in flight on the killed replica, never acknowledged"),
                ),
            }
        }
    }
    r1.kill();

    let all_waits = waits(&convs, &runs);
    let acks: Vec<&crate::chaos::TurnAck> =
        runs.iter().flat_map(|r| r.acks.iter().chain(r.observed.iter()).flatten()).collect();
    let by_replica = |e: usize| acks.iter().filter(|a| a.endpoint == e).count();
    let observed = runs.iter().flat_map(|r| r.observed.iter().flatten()).count();
    let orphan_longest = orphans.iter().map(|(_, a)| a.wait).max().unwrap_or_default();
    let orphan_resumed = orphans.iter().filter(|(_, a)| a.resumed).count();
    let orphan_replayed = orphans.iter().filter(|(_, a)| a.replayed).count();
    println!("\nchaos-replicas figures");
    println!(
        "  kills {} (chaos-r2, SIGKILL, not restarted); turns acknowledged {} in {} conversations ({:.0} s of driving)",
        usize::from(killed.is_some()),
        verdict.acked,
        runs.len(),
        drive_secs
    );
    println!(
        "  acknowledgements by chaos-r1 {}, by chaos-r2 {}; {} turns also sent by the other client at the same time \
         with the same key ({} acknowledged differently)",
        by_replica(0),
        by_replica(1),
        observed,
        verdict.divergent
    );
    println!("  lost {}, duplicated {}", verdict.lost, verdict.duplicated);
    println!("  {}", wait_line(&all_waits));
    println!("  {}", span_line(&runs));
    if let Some((_, at, on_r2)) = &killed {
        let mut sorted: Vec<Duration> = orphans.iter().map(|(_, a)| a.wait).collect();
        sorted.sort();
        println!(
            "  calls in flight on chaos-r2 when it died: {}; answered by chaos-r2 before the SIGKILL landed: {}; \
             completed via chaos-r1: {} (events showed the run resumed: {}; result marked replayed: {}); their longest \
             wait {:.2} s (p50 {:.2} s) - target <= {} s: {}",
            on_r2.len(),
            answered_before_kill,
            orphans.len(),
            orphan_resumed,
            orphan_replayed,
            orphan_longest.as_secs_f64(),
            percentile(&sorted, 50.0),
            TARGET_WAIT.as_secs(),
            if orphan_longest <= TARGET_WAIT { "met" } else { "NOT MET" }
        );
        println!("  driving went on {:.1} s after the kill", (drive_secs - (*at - began).as_secs_f64()).max(0.0));
    } else {
        verdict_problem(&mut verdict, "the run ended before the kill point".into());
    }
    println!("  errors retried: {}; longest RetryInfo {:.2} s", errors_line(&errors), longest_retry_info.as_secs_f64());
    print_error_examples(&errors);
    let (unanswered, first) = env.model.unanswered();
    println!(
        "  model endpoint: {} calls answered, {unanswered} unanswered{}",
        env.model.answered(),
        first.map_or(String::new(), |f| format!(" (first: {f})"))
    );
    print_verdict(&verdict);
    let ok = verdict.ok() && unanswered == 0 && orphan_longest <= TARGET_WAIT;
    println!("  total {:.0} s", began.elapsed().as_secs_f64());
    drop(killed);
    env.finish(!ok || o.keep).await;
    if ok {
        println!("chaos-replicas: PASSED");
        Ok(())
    } else {
        Err(format!(
            "chaos-replicas: {} lost, {} duplicated, {} problems, longest wait of a caller whose replica died {:.2} s",
            verdict.lost,
            verdict.duplicated,
            verdict.problems.len(),
            orphan_longest.as_secs_f64()
        ))
    }
}

fn verdict_problem(v: &mut crate::chaos::Verdict, p: String) {
    v.problems.push(p);
}

/// Conversation `c` driven by both clients: turn `t` by client `(index + t) mod 2`, and with
/// `observe[t]` also by the other client at the same moment with the same key.
async fn drive_shared(callers: &mut [Caller; 2], c: &Conversation, observe: &[bool], acked: &AtomicUsize) -> ConvRun {
    let mut run = ConvRun::new(c.index);
    let first = c.index % 2;
    if let Err(e) = callers[first].start(&c.thread_id).await {
        run.failure = Some(e);
        return run;
    }
    run.started = true;
    for (turn, text) in c.turns.iter().enumerate() {
        let owner = (c.index + turn) % 2;
        let [a, b] = callers;
        let (mine, other) = if owner == 0 { (a, b) } else { (b, a) };
        let (got, seen) = if observe[turn] {
            let (got, seen) = tokio::join!(mine.send(&c.thread_id, turn, text), other.send(&c.thread_id, turn, text));
            (got, Some(seen))
        } else {
            (mine.send(&c.thread_id, turn, text).await, None)
        };
        match seen {
            Some(Ok(ack)) => run.observed[turn] = Some(ack.value),
            Some(Err(e)) => run.failure = Some(format!("(other client) {e}")),
            None => {}
        }
        match got {
            Ok(ack) => {
                run.acks[turn] = Some(ack.value);
                acked.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                run.failure = Some(e);
                break;
            }
        }
        if run.failure.is_some() {
            break;
        }
    }
    run
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_flight_labels_parse() {
        assert_eq!(parse_label("conv-000012 turn 4 by B"), Some(("conv-000012".into(), 4, "B".into())));
        assert_eq!(parse_label("conv-000012 start by A"), None);
    }
}
