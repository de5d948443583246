//! Measures the embedded model: load time, resident memory, prompt and generation speed, and the
//! accuracy of a small labelled routing set (structured output, so every reply is schema-valid).
//!
//! ```sh
//! cargo run --release -p frontdesk-llm --features local --example local_bench -- "$(scripts/ensure-model.sh | tail -n1)"
//! ```
//!
//! Optional second and third arguments: context size (default 4096) and threads (default 2).

use std::sync::Arc;
use std::time::Instant;

use frontdesk_llm::{CallOptions, ChatMessage, ChatModel, ChatRequest, LlmClient, LocalConfig, LocalModel};
use serde::Deserialize;

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

#[tokio::main(flavor = "current_thread")]
async fn main() {
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
