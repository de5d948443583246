//! `frontdesk-bench handoff [--rounds 20000]`: what one call into the SQLite driver costs
//! before SQLite does any work, on the CPUs this process may use.
//!
//! ```text
//! target/release/frontdesk-bench handoff                 # the CPUs the shell gives it
//! taskset -c 0 target/release/frontdesk-bench handoff    # one CPU, as the per-turn rows run
//! ```
//!
//! sqlx runs each SQLite connection on a thread of its own: a statement is sent to that thread,
//! which wakes, runs it and wakes the caller with the result. Two figures, p50 over `--rounds`
//! round trips on a current-thread tokio runtime, one at a time:
//! - a bare hand-off: a tokio task sends a oneshot sender to an OS thread blocked on a channel,
//!   which answers it (no SQLite; the cost of the two wake-ups alone);
//! - `SELECT 1` on one sqlx SQLite connection (an in-memory database): the hand-off plus sqlx's
//!   and SQLite's least work for a statement.
//!
//! A W1 turn on SQLite makes three such calls (the thread's newest checkpoint, the accepting
//! commit, the final commit), so three times the difference between the two runs is what the
//! CPUs a per-turn figure is measured on add to it.

use std::time::Instant;

use frontdesk_store::sqlx::{self, Connection as _, SqliteConnection};

use crate::stats;

pub fn run(rest: impl Iterator<Item = String>) -> Result<(), String> {
    let mut rounds = 20_000usize;
    let mut it = rest;
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--rounds" => {
                let v = it.next().ok_or("--rounds needs a value")?;
                rounds = v.parse::<usize>().map_err(|e| format!("--rounds: {e}"))?.max(100);
            }
            other => return Err(format!("unknown option {other}")),
        }
    }
    println!("frontdesk-bench handoff: one call into the SQLite driver's thread and back");
    println!(
        "  machine: {} x {}; this process on CPUs {}; build: {}",
        stats::machine_cpus(),
        stats::cpu_model(),
        stats::cpus_allowed(),
        if cfg!(debug_assertions) { "debug (numbers meaningless)" } else { "release" }
    );
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    let (bare, select) = runtime.block_on(measure(rounds))?;
    println!("  p50 over {rounds} round trips, one at a time:");
    println!("    task -> thread -> task hand-off (no SQLite)   {bare:>7.1} us");
    println!("    sqlx SQLite `SELECT 1`, one connection         {select:>7.1} us");
    Ok(())
}

async fn measure(rounds: usize) -> Result<(f64, f64), String> {
    let (requests, inbox) = std::sync::mpsc::channel::<tokio::sync::oneshot::Sender<()>>();
    let answerer = std::thread::spawn(move || {
        while let Ok(reply) = inbox.recv() {
            let _ = reply.send(());
        }
    });
    let mut samples = Vec::with_capacity(rounds);
    for i in 0..rounds + rounds / 10 {
        let started = Instant::now();
        let (reply, answer) = tokio::sync::oneshot::channel();
        requests.send(reply).map_err(|_| "the answering thread stopped")?;
        answer.await.map_err(|_| "the answering thread dropped a request")?;
        // The first tenth warms up.
        if i >= rounds / 10 {
            samples.push(started.elapsed().as_nanos() as u64);
        }
    }
    drop(requests);
    answerer.join().map_err(|_| "the answering thread panicked")?;
    let bare = p50(samples);

    let mut conn = SqliteConnection::connect("sqlite::memory:").await.map_err(|e| e.to_string())?;
    let mut samples = Vec::with_capacity(rounds);
    for i in 0..rounds + rounds / 10 {
        let started = Instant::now();
        let one: i64 = sqlx::query_scalar("SELECT 1").fetch_one(&mut conn).await.map_err(|e| e.to_string())?;
        if one != 1 {
            return Err(format!("SELECT 1 returned {one}"));
        }
        if i >= rounds / 10 {
            samples.push(started.elapsed().as_nanos() as u64);
        }
    }
    conn.close().await.map_err(|e| e.to_string())?;
    Ok((bare, p50(samples)))
}

fn p50(mut samples: Vec<u64>) -> f64 {
    samples.sort_unstable();
    stats::percentile(&samples, 50.0)
}
