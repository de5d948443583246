//! `frontdesk-bench research` (issue 20): scripted questions through the REAL research workflow —
//! `research::build` (orchestrator, planner, researcher and critic fan-outs, expert, finalizer;
//! real nodes, prompts, tool loop and the shipped `sample` corpus), a `Runner` on a fresh
//! checkpointer (a temporary SQLite file by default, the server's embedded store; `--store memory`
//! for the in-memory one) and the real `ResearchDesk` — with sequential versus parallel research
//! (`ResearchDeps.parallel`), everything else the same.
//!
//! The model is a SCRIPTED test double ([`SlowScript`]), not an LLM: it sleeps `--latency-ms` on
//! EVERY call (a tokio sleep, standing in for a model endpoint's latency) and answers by the
//! request's purpose: the planner plans `--steps` research steps derived from the question and
//! one expert step, every critic approves, a researcher cites the top search hit its prompt
//! lists (a real passage of the shipped corpus), the expert and the finalizer answer. Replies go
//! through `ScriptedModel::from_fn` inside `LlmClient`, as the server calls a model, so usage is
//! counted as the scripted model counts it: whitespace-separated words of the prompt (including
//! the JSON schema the structured calls add) and of the reply.
//!
//! ```text
//! cargo run --release -p frontdesk-bench -- research [--questions 20] [--latency-ms 300]
//!     [--steps 3] [--store sqlite|memory]
//! ```
//!
//! Each mode runs the questions one at a time (the latency of one question alone), then all at
//! once (the wall time of the batch). Exits non-zero, printing no figures, when any question does
//! not end `Answered` with exactly `--steps` approved, cited research results, the expected
//! model calls by purpose (each one attempt) and the expected research concurrency (parallel:
//! every step in one fan-out, all researcher calls of a question in flight at once; sequential:
//! one step per fan-out, never two researcher calls at once).

use std::{
    collections::{BTreeMap, HashMap},
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex, PoisonError,
    },
    time::{Duration, Instant},
};

use async_trait::async_trait;
use frontdesk_llm::{ChatModel, ChatRequest, ChatResponse, LlmClient, LlmError, Role, ScriptedModel};
use frontdesk_runtime::{EventKind, RetryPolicy, Runner, RunnerConfig, Usage};
use frontdesk_workflows::research::{
    self, nodes, AskRequest, Outcome, ResearchDeps, ResearchDesk, ResearchProgress, NOT_ANSWERED,
};
use serde_json::json;
// `StreamExt::next` for the desk's progress stream, through tonic's re-export (the bench
// depends on tonic already).
use tonic::codegen::tokio_stream::StreamExt as _;

use crate::{err, fresh_store, multi_thread, stats, Fresh, Store};

/// The scripted questions, one per line of the shipped corpus's topics; `--questions` above 20
/// repeats them with a numbered suffix.
const QUESTIONS: [&str; 20] = [
    "How many years passed between the invention of the transistor and the Apollo 11 landing?",
    "Who discovered penicillin, and when was it first mass-produced?",
    "When were the CRISPR repeats first noticed, and by whom?",
    "How large is the Great Barrier Reef compared with Italy?",
    "How was the metre first defined, and when?",
    "Which share of world coffee production is arabica?",
    "What does photosynthesis take in and release?",
    "When was Rust 1.0 released, and who started the language?",
    "Who was on the Apollo 11 crew, and what rocket launched them?",
    "Where does arabica coffee grow best, and how high?",
    "What threatens the corals of the Great Barrier Reef?",
    "How does penicillin kill bacteria?",
    "Why do leaves look green?",
    "What did the first working transistor use, and where was it built?",
    "How do bacteria use CRISPR as an immune memory?",
    "Which units does the International System of Units relate by powers of ten?",
    "Which company sponsored Rust, and from which year?",
    "How tall was the Saturn V rocket?",
    "How many individual reefs and islands make up the Great Barrier Reef?",
    "How many molecules of oxygen does photosynthesis release per molecule of glucose?",
];

/// What a research step looks up, by its index in the plan (the planner's schema allows five).
const ASPECTS: [&str; 5] =
    ["Key facts about", "Dates and people for", "Figures for", "Causes behind", "Consequences of"];
const MAX_STEPS: usize = ASPECTS.len();

#[derive(Debug, Clone)]
struct Args {
    questions: usize,
    latency: Duration,
    steps: usize,
    store: Store,
}

fn parse_args(mut it: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut args = Args { questions: 20, latency: Duration::from_millis(300), steps: 3, store: Store::Sqlite };
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        let number = |v: String| v.parse::<usize>().map_err(|e| format!("{flag}: {e}"));
        match flag.as_str() {
            "--questions" => args.questions = number(value()?)?,
            "--latency-ms" => args.latency = Duration::from_millis(number(value()?)? as u64),
            "--steps" => args.steps = number(value()?)?,
            "--store" => {
                args.store = match value()?.as_str() {
                    "sqlite" => Store::Sqlite,
                    "memory" => Store::Memory,
                    other => return Err(format!("--store: {other:?} is not sqlite or memory")),
                }
            }
            other => return Err(format!("unknown option {other}")),
        }
    }
    if args.questions == 0 {
        return Err("--questions must be at least 1".into());
    }
    if !(1..=MAX_STEPS).contains(&args.steps) {
        return Err(format!("--steps must be 1 to {MAX_STEPS} (the planner's schema allows {MAX_STEPS})"));
    }
    Ok(args)
}

fn questions(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            let q = QUESTIONS[i % QUESTIONS.len()];
            if i < QUESTIONS.len() {
                q.to_owned()
            } else {
                format!("{q} ({})", i / QUESTIONS.len() + 1)
            }
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// the scripted model

const PLAN: &str = "planner.plan";
const CRITIC_PLAN: &str = "critic_planner.review";
const RESEARCH: &str = "researcher.research";
const CRITIC_RESEARCH: &str = "critic_researcher.review";
const EXPERT: &str = "expert.answer";
const CRITIC_EXPERT: &str = "critic_expert.review";
const FINAL: &str = "finalizer.finalize";

/// The model calls one question makes when every critic approves, by purpose.
fn expected_calls(steps: usize) -> BTreeMap<&'static str, u64> {
    let s = steps as u64;
    BTreeMap::from([
        (PLAN, 1),
        (CRITIC_PLAN, 1),
        (RESEARCH, s),
        (CRITIC_RESEARCH, s),
        (EXPERT, 1),
        (CRITIC_EXPERT, 1),
        (FINAL, 1),
    ])
}

/// Model calls that follow one another in one question: all of them when research is
/// sequential; with parallel research the researchers' calls overlap, and so do their critics'.
fn rounds(steps: usize, parallel: bool) -> usize {
    if parallel {
        7
    } else {
        5 + 2 * steps
    }
}

/// The question a request is about, from the lines the research prompts start it with.
fn question_of(request: &ChatRequest) -> Option<String> {
    request.messages.iter().filter(|m| m.role == Role::User).find_map(|m| {
        m.content.lines().find_map(|line| {
            line.strip_prefix("Question: ")
                .or_else(|| line.strip_prefix("Develop a logical plan to answer: "))
                .map(str::to_owned)
        })
    })
}

fn last_user(request: &ChatRequest) -> &str {
    request.messages.iter().rev().find(|m| m.role == Role::User).map_or("", |m| m.content.as_str())
}

/// The first search hit the researcher's prompt lists (`- [document#passage] title: ...`), or
/// the shipped corpus's `crispr` passage 0 when there is none.
fn top_hit(prompt: &str) -> (String, u32) {
    prompt
        .lines()
        .find_map(|line| {
            let rest = line.strip_prefix("- [")?;
            let (cited, _) = rest.split_once(']')?;
            let (document, passage) = cited.rsplit_once('#')?;
            Some((document.to_owned(), passage.parse().ok()?))
        })
        .unwrap_or_else(|| ("crispr".to_owned(), 0))
}

fn clip(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
}

/// The scripted replies, by purpose.
fn reply(request: &ChatRequest, steps: usize) -> Result<String, LlmError> {
    let question = question_of(request).unwrap_or_default();
    let value = match request.purpose.as_str() {
        PLAN => json!({
            "research_steps": ASPECTS[..steps].iter().map(|a| clip(&format!("{a}: {question}"), 160)).collect::<Vec<_>>(),
            "expert_steps": [clip(&format!("Combine the findings into one answer to: {question}"), 160)],
        }),
        CRITIC_PLAN | CRITIC_RESEARCH | CRITIC_EXPERT => {
            json!({"decision": "approve", "feedback": "Approved by the scripted critic."})
        }
        RESEARCH => {
            let prompt = last_user(request);
            let step = prompt.lines().find_map(|l| l.strip_prefix("Research step: ")).unwrap_or_default();
            let (document_id, passage) = top_hit(prompt);
            json!({
                "answer": clip(&format!("Scripted finding for \"{step}\", from {document_id} passage {passage}."), 500),
                "citations": [{"document_id": document_id, "passage": passage}],
            })
        }
        EXPERT => json!({
            "answer": clip(&format!("Scripted answer to: {question}"), 500),
            "reasoning": "The scripted expert combined the approved research findings.",
        }),
        FINAL => json!({
            "final_answer": clip(&format!("Scripted final answer to: {question}"), 600),
            "final_reasoning_trace": "Plan, research findings with citations, expert answer (scripted).",
        }),
        other => return Err(LlmError::ScriptExhausted { purpose: other.to_owned() }),
    };
    Ok(value.to_string())
}

/// Per question, as the model saw it: calls, and researcher calls in flight (now, most).
#[derive(Debug, Default, Clone, Copy)]
struct Seen {
    calls: u64,
    research_now: u64,
    research_max: u64,
}

/// SCRIPTED test double: sleeps `latency` on every call, then answers by [`reply`] through
/// `ScriptedModel::from_fn` (which counts usage); keeps per-question call counts and the most
/// researcher calls of one question in flight at once.
struct SlowScript {
    inner: ScriptedModel,
    latency: Duration,
    calls: AtomicU64,
    seen: Mutex<HashMap<String, Seen>>,
}

impl SlowScript {
    fn new(latency: Duration, steps: usize) -> Self {
        let inner = ScriptedModel::from_fn("scripted-research", move |request: &ChatRequest| reply(request, steps))
            .without_request_log();
        Self { inner, latency, calls: AtomicU64::new(0), seen: Mutex::new(HashMap::new()) }
    }

    fn update(&self, question: &str, f: impl FnOnce(&mut Seen)) {
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        f(seen.entry(question.to_owned()).or_default());
    }

    fn seen(&self, question: &str) -> Seen {
        self.seen.lock().unwrap_or_else(PoisonError::into_inner).get(question).copied().unwrap_or_default()
    }
}

#[async_trait]
impl ChatModel for SlowScript {
    fn model_name(&self) -> &str {
        self.inner.model_name()
    }

    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let question = question_of(request).unwrap_or_default();
        let research = request.purpose == RESEARCH;
        self.update(&question, |s| {
            s.calls += 1;
            if research {
                s.research_now += 1;
                s.research_max = s.research_max.max(s.research_now);
            }
        });
        tokio::time::sleep(self.latency).await;
        let response = self.inner.chat(request).await;
        if research {
            self.update(&question, |s| s.research_now -= 1);
        }
        response
    }
}

// ---------------------------------------------------------------------------------------------
// one question

/// What one question did, from its event stream, its final state and the model.
#[derive(Debug, Clone, Default)]
struct Observed {
    secs: f64,
    usage: Usage,
}

/// Asks one question, drains its stream, awaits the outcome and checks everything the workload
/// fixes (module docs).
async fn ask(
    desk: &ResearchDesk,
    model: &SlowScript,
    question: &str,
    args: &Args,
    parallel: bool,
) -> Result<Observed, String> {
    let started = Instant::now();
    let fail = |what: String| format!("{question:?} ({}): {what}", if parallel { "parallel" } else { "sequential" });
    let request = AskRequest { question: question.to_owned(), retry_limit: None, corpus: None, idempotency_key: None };
    let mut handle =
        desk.ask(&frontdesk_workflows::Tenant::default(), request).await.map_err(|e| fail(e.to_string()))?;
    let mut calls: BTreeMap<String, u64> = BTreeMap::new();
    let mut call_usage = Usage::default();
    let mut finished: Option<Usage> = None;
    let mut dispatched: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
    while let Some(progress) = handle.progress.next().await {
        let ResearchProgress::Event(event) = progress else { continue };
        match event.kind {
            EventKind::LlmCall(info) => {
                if info.attempts != 1 {
                    return Err(fail(format!("{} took {} attempts", info.purpose, info.attempts)));
                }
                *calls.entry(info.purpose).or_default() += 1;
                call_usage += info.usage;
            }
            EventKind::TasksDispatched { tasks, already_done, .. } => {
                if already_done != 0 {
                    return Err(fail(format!("a fan-out found {already_done} tasks already done")));
                }
                let node = match event.node.as_deref() {
                    Some(nodes::RESEARCHER) => nodes::RESEARCHER,
                    Some(nodes::CRITIC_RESEARCHER) => nodes::CRITIC_RESEARCHER,
                    other => return Err(fail(format!("unexpected fan-out {other:?}"))),
                };
                dispatched.entry(node).or_default().push(tasks);
            }
            EventKind::NodeRetrying { message, .. } | EventKind::NodeFailed { message, .. } => {
                return Err(fail(format!("a node failed: {message}")));
            }
            EventKind::RunFailed { message, .. } => return Err(fail(format!("run failed: {message}"))),
            EventKind::RunFinished { usage, .. } => finished = Some(usage),
            _ => {}
        }
    }
    let view = handle.outcome.await.map_err(|e| fail(e.to_string()))?;
    let secs = started.elapsed().as_secs_f64();
    let state = &view.state;

    if state.outcome != Outcome::Answered {
        return Err(fail(format!("outcome {:?}, not Answered", state.outcome)));
    }
    match state.final_answer.as_deref() {
        Some(answer) if !answer.is_empty() && answer != NOT_ANSWERED => {}
        other => return Err(fail(format!("final answer {other:?}"))),
    }
    if state.retry_count != 0 {
        return Err(fail(format!("retry count {}", state.retry_count)));
    }
    let results = &state.research.entries;
    if results.len() != args.steps {
        return Err(fail(format!("{} research results, expected {}", results.len(), args.steps)));
    }
    for (index, record) in results {
        let cited = record.result.as_ref().map_or(0, |r| r.citations.len());
        if !record.approved() || record.attempts != 1 || cited != 1 {
            return Err(fail(format!(
                "research step {index}: approved {}, attempts {}, {cited} citations (expected approved, 1, 1)",
                record.approved(),
                record.attempts
            )));
        }
    }
    let expected: BTreeMap<String, u64> =
        expected_calls(args.steps).into_iter().map(|(purpose, n)| (purpose.to_owned(), n)).collect();
    if calls != expected {
        return Err(fail(format!("model calls {calls:?}, expected {expected:?}")));
    }
    let per_question: u64 = expected.values().sum();
    let seen = model.seen(question);
    if seen.calls != per_question {
        return Err(fail(format!("the model saw {} calls, expected {per_question}", seen.calls)));
    }
    let steps = args.steps as u32;
    let (fan_out, in_flight) = if parallel { (vec![steps], steps as u64) } else { (vec![1; args.steps], 1) };
    for node in [nodes::RESEARCHER, nodes::CRITIC_RESEARCHER] {
        let got = dispatched.get(node).cloned().unwrap_or_default();
        if got != fan_out {
            return Err(fail(format!("{node} dispatched {got:?} tasks, expected {fan_out:?}")));
        }
    }
    if seen.research_max != in_flight {
        return Err(fail(format!(
            "at most {} researcher calls in flight at once, expected {in_flight}",
            seen.research_max
        )));
    }
    let usage = finished.ok_or_else(|| fail("no RunFinished event".into()))?;
    if (usage.prompt_tokens, usage.completion_tokens) != (call_usage.prompt_tokens, call_usage.completion_tokens) {
        return Err(fail(format!("RunFinished usage {usage:?} is not the sum of the calls' {call_usage:?}")));
    }
    Ok(Observed { secs, usage })
}

// ---------------------------------------------------------------------------------------------
// passes

struct Pass {
    desk: Arc<ResearchDesk>,
    model: Arc<SlowScript>,
    fresh: Fresh,
}

/// The research desk as the server wires it (`workflows/research` of frontdesk-server: the shipped
/// corpus, three attempts per component with 500 ms backoff) on a fresh store.
async fn open(args: &Args, parallel: bool, tag: &str) -> Result<Pass, String> {
    let fresh = fresh_store(args.store, &format!("research{tag}"), None).await?;
    let model = Arc::new(SlowScript::new(args.latency, args.steps));
    let llm = LlmClient::new(model.clone());
    let mut deps = ResearchDeps::new(llm, BTreeMap::new());
    deps.parallel = parallel;
    deps.retry = RetryPolicy::attempts(3).with_backoff(Duration::from_millis(500), Duration::from_secs(10));
    let corpora = deps.corpora.keys().cloned().collect();
    let graph = research::build(deps).map_err(err)?;
    let runner = Runner::new(graph, fresh.checkpointer.clone(), RunnerConfig::default());
    Ok(Pass { desk: Arc::new(ResearchDesk::new(runner, corpora)), model, fresh })
}

#[derive(Debug, Clone, Default)]
struct Mode {
    /// Each question alone, one after another.
    alone: Vec<Observed>,
    /// All questions at once.
    batch: Vec<Observed>,
    batch_secs: f64,
}

fn percentile(samples: &[f64], p: f64) -> f64 {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted.get(rank.min(sorted.len()) - 1).copied().unwrap_or(0.0)
}

fn secs(observed: &[Observed]) -> Vec<f64> {
    observed.iter().map(|o| o.secs).collect()
}

fn run_mode(args: &Args, qs: &[String], parallel: bool) -> Result<Mode, String> {
    let name = if parallel { "parallel" } else { "sequential" };
    multi_thread().block_on(async {
        let mut mode = Mode::default();
        let pass = open(args, parallel, "alone").await?;
        for q in qs {
            mode.alone.push(ask(&pass.desk, &pass.model, q, args, parallel).await?);
        }
        let per_question: u64 = expected_calls(args.steps).values().sum();
        check_total(&pass.model, qs.len() as u64 * per_question, name)?;
        let lat = secs(&mode.alone);
        println!(
            "    {name:<10} one at a time: {} questions, per question p50 {:.3} s, min {:.3} s, max {:.3} s",
            qs.len(),
            percentile(&lat, 50.0),
            percentile(&lat, 0.0),
            percentile(&lat, 100.0)
        );
        pass.fresh.dispose().await;

        let pass = open(args, parallel, "batch").await?;
        let started = Instant::now();
        let tasks: Vec<_> = qs
            .iter()
            .map(|q| {
                let (desk, model, q, args) = (pass.desk.clone(), pass.model.clone(), q.clone(), args.clone());
                tokio::spawn(async move { ask(&desk, &model, &q, &args, parallel).await })
            })
            .collect();
        for task in tasks {
            mode.batch.push(task.await.map_err(err)??);
        }
        mode.batch_secs = started.elapsed().as_secs_f64();
        check_total(&pass.model, qs.len() as u64 * per_question, name)?;
        let lat = secs(&mode.batch);
        println!(
            "    {name:<10} all at once:   {} questions in {:.3} s; per question p50 {:.3} s, max {:.3} s",
            qs.len(),
            mode.batch_secs,
            percentile(&lat, 50.0),
            percentile(&lat, 100.0)
        );
        pass.fresh.dispose().await;
        Ok(mode)
    })
}

fn check_total(model: &SlowScript, expected: u64, name: &str) -> Result<(), String> {
    let calls = model.calls.load(Ordering::Relaxed);
    if calls != expected {
        return Err(format!("{name}: the model answered {calls} calls, expected {expected}"));
    }
    Ok(())
}

/// Prompt and completion tokens of one question (the same for every question of a mode when the
/// questions repeat; reported as the mean).
fn tokens(mode: &Mode) -> (f64, f64) {
    let all: Vec<&Observed> = mode.alone.iter().chain(&mode.batch).collect();
    let n = all.len().max(1) as f64;
    let prompt = all.iter().map(|o| o.usage.prompt_tokens).sum::<u64>() as f64 / n;
    let completion = all.iter().map(|o| o.usage.completion_tokens).sum::<u64>() as f64 / n;
    (prompt, completion)
}

pub fn run(rest: impl Iterator<Item = String>) -> Result<(), String> {
    let args = parse_args(rest)?;
    let started = Instant::now();
    let qs = questions(args.questions);
    let store = match args.store {
        Store::Memory => "in-memory checkpointer",
        _ => "SQLite checkpointer (temporary file, WAL)",
    };
    println!("frontdesk-bench research: scripted questions through the REAL research workflow + ResearchDesk");
    println!(
        "  model: SCRIPTED test double (sleeps {} ms per call, answers by purpose; every critic approves); not an LLM",
        args.latency.as_millis()
    );
    println!(
        "  workload: {} questions, {} research steps each, shipped `sample` corpus; store: {store}",
        qs.len(),
        args.steps
    );
    println!(
        "  machine: {} x {}, {:.1} GiB, {}; build: {}",
        stats::nproc(),
        stats::cpu_model(),
        stats::mem_total_gib(),
        stats::os_name(),
        if cfg!(debug_assertions) { "debug (numbers meaningless)" } else { "release" }
    );

    println!("\n[1/2] sequential research (ResearchDeps.parallel = false)");
    let sequential = run_mode(&args, &qs, false)?;
    println!("\n[2/2] parallel research (ResearchDeps.parallel = true)");
    let parallel = run_mode(&args, &qs, true)?;
    println!(
        "\nverified: every question Answered with {} approved, cited research results; {} model calls per question \
         by purpose, one attempt each; researcher fan-outs {} (parallel) and {} x 1 (sequential)",
        args.steps,
        expected_calls(args.steps).values().sum::<u64>(),
        args.steps,
        args.steps
    );

    let latency_s = args.latency.as_secs_f64();
    let per_question: u64 = expected_calls(args.steps).values().sum();
    println!(
        "\n| research | questions | model calls / question | model rounds x {} ms | one question alone, p50 (max) | batch of {} at once, wall | tokens / question (prompt + completion) |",
        args.latency.as_millis(),
        qs.len()
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for (name, mode, par) in [("sequential", &sequential, false), ("parallel", &parallel, true)] {
        let alone = secs(&mode.alone);
        let (prompt, completion) = tokens(mode);
        let r = rounds(args.steps, par);
        println!(
            "| {name} | {} | {per_question} | {r} = {:.1} s | {:.2} s ({:.2} s) | {:.2} s | {:.0} ({:.0} + {:.0}) |",
            qs.len(),
            r as f64 * latency_s,
            percentile(&alone, 50.0),
            percentile(&alone, 100.0),
            mode.batch_secs,
            prompt + completion,
            prompt,
            completion
        );
    }
    let alone_speedup = percentile(&secs(&sequential.alone), 50.0) / percentile(&secs(&parallel.alone), 50.0);
    let batch_speedup = sequential.batch_secs / parallel.batch_secs;
    println!(
        "| speed-up, parallel vs sequential | | | {:.2}x (model rounds) | {:.2}x | {:.2}x | |",
        rounds(args.steps, false) as f64 / rounds(args.steps, true) as f64,
        alone_speedup,
        batch_speedup
    );
    println!("\ntotal {:.0} s", started.elapsed().as_secs_f64());
    Ok(())
}

#[cfg(test)]
mod tests {
    use frontdesk_llm::ChatMessage;

    use super::*;

    #[test]
    fn the_top_hit_is_cited_and_crispr_is_the_fallback() {
        let prompt = "Question: q\nResearch step: s\nSearch results for the step:\n- [transistor#2] The history: x\n- [rust#0] R: y\n";
        assert_eq!(top_hit(prompt), ("transistor".to_owned(), 2));
        assert_eq!(top_hit("Question: q\n"), ("crispr".to_owned(), 0));
    }

    #[test]
    fn questions_are_found_in_every_prompt_shape() {
        let plan = ChatRequest::new(PLAN, vec![ChatMessage::user("Develop a logical plan to answer: Why?")]);
        assert_eq!(question_of(&plan).as_deref(), Some("Why?"));
        let critic = ChatRequest::new(CRITIC_PLAN, vec![ChatMessage::user("Question: Why?\n\nResearch steps:")]);
        assert_eq!(question_of(&critic).as_deref(), Some("Why?"));
    }

    /// The checks pass for the mode the desk runs and refuse the other mode's expectations.
    #[test]
    fn the_checks_refuse_a_run_that_does_not_match_its_mode() {
        // Long enough for the researcher calls of a question to overlap (each task searches the corpus first).
        let args = Args { questions: 1, latency: Duration::from_millis(100), steps: 3, store: Store::Memory };
        multi_thread().block_on(async {
            for parallel in [true, false] {
                let pass = open(&args, parallel, "test").await.unwrap();
                let observed = ask(&pass.desk, &pass.model, QUESTIONS[0], &args, parallel).await.unwrap();
                assert!(observed.usage.prompt_tokens > 0 && observed.usage.completion_tokens > 0);
                let wrong = ask(&pass.desk, &pass.model, QUESTIONS[1], &args, !parallel).await.unwrap_err();
                assert!(wrong.contains("dispatched"), "{wrong}");
                let more = Args { steps: 4, ..args.clone() };
                let wrong = ask(&pass.desk, &pass.model, QUESTIONS[2], &more, parallel).await.unwrap_err();
                assert!(wrong.contains("3 research results, expected 4"), "{wrong}");
            }
        });
    }

    #[test]
    fn eleven_calls_and_seven_rounds_for_three_steps() {
        assert_eq!(expected_calls(3).values().sum::<u64>(), 11);
        assert_eq!(rounds(3, false), 11);
        assert_eq!(rounds(3, true), 7);
        assert_eq!(questions(21)[20], format!("{} (2)", QUESTIONS[0]));
    }
}
