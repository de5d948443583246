//! Measures the embedded model: load time, resident memory, prompt and generation speed, and the
//! accuracy of a small labelled routing set (structured output, so every reply is schema-valid).
//!
//! ```sh
//! cargo run --release -p frontdesk-llm --features local --example local_bench -- "$(scripts/ensure-model.sh | tail -n1)"
//! ```
//!
//! Optional second and third arguments: context size (default 4096) and threads (default 2).
//!
//! `intake` replays the model calls of recorded intake conversations instead and prints the time
//! per call and per turn (a turn: the supervisor's call and the agent calls after it), the first
//! turn (nothing cached) apart from the later ones:
//!
//! ```sh
//! cargo run --release -p frontdesk-llm --features local --example local_bench -- intake \
//!     [--requests FILE] [--rounds N] [--model PATH] [--threads N] [--context N] [--sequences N]
//! ```
//!
//! FILE holds one call a line, as the server's call log writes them with `model.call_log =
//! "full"` and `model.call_log_file` set (only `purpose` and `prompt` are read): a structured
//! call's schema is read back from the instruction at the end of its system message and decoded
//! under, as the server does; the reply budget is 1500 tokens for a structured call and 400 for
//! free text (the elicitation and chat agents' budgets). The default is
//! `intake_conversation.jsonl` beside this file: the 16 model calls of an eight-turn intake
//! conversation (a change request given detail by detail, with one off-topic question), held
//! with the embedded model through the real server. Record it again after changing the intake
//! prompts. `--rounds` (default 2) replays the file that many times, so the second round's first
//! turn is a new conversation on warm prompt prefixes.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use frontdesk_llm::{
    schema_name, CallOptions, ChatMessage, ChatModel, ChatRequest, JsonSchemaFormat, LlmClient, LocalConfig,
    LocalModel, OutputSchema,
};
use serde::Deserialize;
use serde_json::Value;

#[derive(Debug, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Route {
    Billing,
    Technical,
    Sales,
    Other,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct RouteDecision {
    route: Route,
    #[schemars(length(max = 100))]
    reasoning: String,
}

const CASES: &[(&str, Route)] = &[
    ("I was charged twice for my subscription this month, please refund one payment.", Route::Billing),
    ("My invoice shows the wrong VAT number, can you reissue it?", Route::Billing),
    ("Why did my credit card get declined when renewing?", Route::Billing),
    ("The app crashes every time I open the settings page.", Route::Technical),
    ("I cannot log in, the password reset email never arrives.", Route::Technical),
    ("Your API returns error 500 on every request since this morning.", Route::Technical),
    ("We are 200 people and want a quote for the enterprise plan.", Route::Sales),
    ("Do you offer discounts for non-profits if we buy 50 licences?", Route::Sales),
    ("Can I book a demo of the premium tier for my team next week?", Route::Sales),
    ("Where is your office located? I want to send a thank-you card.", Route::Other),
];

fn rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmRSS:")).map(str::to_owned))
        .and_then(|l| l.split_whitespace().nth(1).and_then(|kb| kb.parse::<f64>().ok()))
        .map_or(0.0, |kb| kb / 1024.0)
}

/// The purpose that opens an intake turn.
const TURN_START: &str = "supervisor.route";

/// How a structured call's instruction begins; the schema follows on the next line, to the end of
/// the system message.
const SCHEMA_INSTRUCTION: &str = "Reply with only a JSON value matching this schema";

/// A call-log line (`purpose`, `prompt`) as the request the model received.
fn recorded_request(line: &str) -> ChatRequest {
    #[derive(Deserialize)]
    struct Recorded {
        purpose: String,
        prompt: Vec<ChatMessage>,
    }
    let Recorded { purpose, prompt } = serde_json::from_str(line).expect("a call-log line with the full prompt");
    let schema = prompt.first().and_then(|system| {
        let start = system.content.find(SCHEMA_INSTRUCTION)?;
        let schema = &system.content[start..].split_once('\n')?.1;
        let schema: Value = serde_json::from_str(schema).expect("the schema of the instruction");
        // The instruction leaves out what it states once for every object; this puts it back.
        Some(Arc::new(OutputSchema::new(schema).schema().clone()))
    });
    let mut request = ChatRequest::new(purpose, prompt);
    request.max_tokens = Some(if schema.is_some() { 1500 } else { 400 });
    request.response_format = schema.map(|schema| JsonSchemaFormat { name: schema_name(&request.purpose), schema });
    request
}

fn percentile(values: &[Duration], p: f64) -> Duration {
    let mut sorted = values.to_vec();
    sorted.sort();
    match sorted.len() {
        0 => Duration::ZERO,
        n => sorted[((n - 1) as f64 * p).round() as usize],
    }
}

fn seconds(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

/// `local_bench intake`: see the module documentation.
async fn intake(args: &[String]) {
    let flag = |name: &str| args.iter().skip_while(|a| *a != name).nth(1).cloned();
    let requests_path = flag("--requests").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/intake_conversation.jsonl"),
        Into::into,
    );
    let rounds: usize = flag("--rounds").map_or(2, |n| n.parse().expect("--rounds"));
    let mut config = LocalConfig::new(flag("--model").map_or_else(LocalConfig::default_path, Into::into));
    if let Some(threads) = flag("--threads") {
        config.threads = threads.parse().expect("--threads");
    }
    if let Some(context) = flag("--context") {
        config.context = context.parse().expect("--context");
    }
    if let Some(sequences) = flag("--sequences") {
        config.cache_sequences = sequences.parse().expect("--sequences");
    }
    let text = std::fs::read_to_string(&requests_path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", requests_path.display()));
    let requests: Vec<ChatRequest> = text.lines().filter(|l| !l.trim().is_empty()).map(recorded_request).collect();
    let model = LocalModel::load(config).expect("load the model");
    let info = model.info();
    println!(
        "model: {} ({} threads, context {}, {} cached prompts), {} requests from {}, {rounds} rounds, RSS {:.0} MB",
        info.description,
        info.threads,
        info.context,
        info.cache_sequences,
        requests.len(),
        requests_path.display(),
        rss_mb()
    );
    println!("round turn purpose                prompt reused completion   time");
    // (purpose, time) of every call after the first turn; turn times, the first one apart.
    let mut calls: Vec<(String, Duration)> = Vec::new();
    let mut first_turn: Option<Duration> = None;
    let mut turns: Vec<Duration> = Vec::new();
    let mut current = Duration::ZERO;
    let mut turn = 0usize;
    let (mut prompt_tokens, mut reused_tokens) = (0u64, 0u64);
    let started = Instant::now();
    for round in 1..=rounds {
        for request in &requests {
            if turn == 0 || request.purpose == TURN_START {
                if turn > 0 {
                    match first_turn {
                        None => first_turn = Some(current),
                        Some(_) => turns.push(current),
                    }
                }
                turn += 1;
                current = Duration::ZERO;
            }
            let before = model.prompt_cache_stats();
            let t = Instant::now();
            let reply = model.chat(request).await.unwrap_or_else(|e| panic!("{}: {e}", request.purpose));
            let elapsed = t.elapsed();
            let reused = model.prompt_cache_stats().reused_tokens - before.reused_tokens;
            current += elapsed;
            prompt_tokens += reply.usage.prompt_tokens;
            reused_tokens += reused;
            if first_turn.is_some() {
                calls.push((request.purpose.clone(), elapsed));
            }
            println!(
                "{round:>5} {turn:>4} {:<22} {:>6} {reused:>6} {:>10} {:>6.2} s",
                request.purpose,
                reply.usage.prompt_tokens,
                reply.usage.completion_tokens,
                elapsed.as_secs_f64()
            );
        }
    }
    match first_turn {
        None => first_turn = Some(current),
        Some(_) => turns.push(current),
    }
    println!(
        "\nprompt tokens: {prompt_tokens}, {reused_tokens} of them ({:.0} %) reused from the KV cache; {:.1} s in all, \
         RSS {:.0} MB",
        100.0 * reused_tokens as f64 / prompt_tokens.max(1) as f64,
        started.elapsed().as_secs_f64(),
        rss_mb()
    );
    println!("first turn (nothing cached): {}", seconds(first_turn.unwrap_or_default()));
    println!(
        "later turns ({}): p50 {}, p90 {}, max {}",
        turns.len(),
        seconds(percentile(&turns, 0.5)),
        seconds(percentile(&turns, 0.9)),
        seconds(percentile(&turns, 1.0))
    );
    let mut purposes: Vec<&str> = calls.iter().map(|(p, _)| p.as_str()).collect();
    purposes.sort_unstable();
    purposes.dedup();
    for purpose in purposes {
        let times: Vec<Duration> = calls.iter().filter(|(p, _)| p == purpose).map(|(_, t)| *t).collect();
        println!(
            "  {purpose} ({} calls after the first turn): p50 {}, p90 {}",
            times.len(),
            seconds(percentile(&times, 0.5)),
            seconds(percentile(&times, 0.9))
        );
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let all: Vec<String> = std::env::args().skip(1).collect();
    if all.first().map(String::as_str) == Some("intake") {
        return intake(&all[1..]).await;
    }
    let mut args = std::env::args().skip(1);
    let path = args.next().map_or_else(LocalConfig::default_path, Into::into);
    let mut config = LocalConfig::new(path);
    if let Some(context) = args.next() {
        config.context = context.parse().expect("context size");
    }
    if let Some(threads) = args.next() {
        config.threads = threads.parse().expect("threads");
    }
    let started = Instant::now();
    let model = Arc::new(LocalModel::load(config).expect("load the model"));
    println!("load: {:.2} s, RSS after load: {:.0} MB", started.elapsed().as_secs_f64(), rss_mb());
    println!("model: {:?}", model.info());

    // Prompt speed: a long prompt, one generated token. Generation speed: free text, 128 tokens.
    let long = "Customers write to the front desk about invoices, outages and quotes. ".repeat(40);
    let mut request = ChatRequest::new("bench.prompt", vec![ChatMessage::user(long)]);
    request.max_tokens = Some(1);
    let t = Instant::now();
    let r = model.chat(&request).await.expect("prompt run");
    let secs = t.elapsed().as_secs_f64();
    println!(
        "prompt: {} tokens in {secs:.2} s = {:.0} tok/s",
        r.usage.prompt_tokens,
        r.usage.prompt_tokens as f64 / secs
    );

    let mut request = ChatRequest::new(
        "bench.generate",
        vec![ChatMessage::user("Continue the sequence: 1, 2, 3, 4, 5, 6, 7, 8, 9, 10,")],
    );
    request.max_tokens = Some(128);
    let t = Instant::now();
    let r = model.chat(&request).await.expect("generation run");
    let secs = t.elapsed().as_secs_f64();
    println!(
        "generate (free text): {} tokens in {secs:.2} s = {:.1} tok/s (incl. {} prompt tokens)",
        r.usage.completion_tokens,
        r.usage.completion_tokens as f64 / secs,
        r.usage.prompt_tokens
    );

    let client = LlmClient::new(model.clone() as Arc<dyn ChatModel>);
    let (mut correct, mut completion_tokens) = (0, 0);
    let t = Instant::now();
    for (message, expected) in CASES {
        let request = ChatRequest::new(
            "bench.route",
            vec![
                ChatMessage::system(
                    "Route the customer message to one team: billing (payments, invoices, refunds), technical \
                     (bugs, errors, login), sales (quotes, plans, demos) or other.",
                ),
                ChatMessage::user(*message),
            ],
        );
        let (decision, record) =
            client.structured::<RouteDecision>(request, &CallOptions::default()).await.expect("a valid decision");
        completion_tokens += record.usage.completion_tokens;
        let ok = decision.route == *expected;
        correct += usize::from(ok);
        println!("{} {:?} <- {message} ({})", if ok { "ok  " } else { "MISS" }, decision.route, decision.reasoning);
    }
    let secs = t.elapsed().as_secs_f64();
    println!(
        "routing accuracy: {correct}/{} ({:.0}%), structured: {completion_tokens} tokens in {secs:.1} s = {:.1} tok/s incl. prompts",
        CASES.len(),
        100.0 * correct as f64 / CASES.len() as f64,
        completion_tokens as f64 / secs
    );
    println!("RSS at the end: {:.0} MB", rss_mb());
}
