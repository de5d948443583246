//! The research workflow (docs/workflows/research.md) end to end through a real server and the
//! gRPC client, with a scripted model (a test double; each test queues its replies) and the
//! shipped sample corpus: approval on the first pass, a rejection and retry at each critic, the
//! retry limit, tool errors, a plan without research, parallel research, a failing component,
//! and a SIGKILL in the middle of research.

mod common;

use std::{
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::Duration,
};

use async_trait::async_trait;
use frontdesk_api::v1::{
    self as pb, ask_response::Payload, research_service_client::ResearchServiceClient, run_event::Kind,
    CriticDecision as D, ResearchOutcome as O,
};
use frontdesk_llm::{ChatModel, ChatRequest, ChatResponse, LlmError, ScriptedFailure, ScriptedModel, ScriptedReply};
use frontdesk_server::{
    app::{App, Overrides, RunningServer},
    config::Config,
    workflows::{research, Parts},
};
use futures::StreamExt;
use serde_json::json;
use tonic::{transport::Channel, Code};

const PLAN: &str = "planner.plan";
const CRITIC_PLAN: &str = "critic_planner.review";
const RESEARCH: &str = "researcher.research";
const CRITIC_RESEARCH: &str = "critic_researcher.review";
const EXPERT: &str = "expert.answer";
const CRITIC_EXPERT: &str = "critic_expert.review";
const FINAL: &str = "finalizer.finalize";

/// The scripted model, with a gauge of how many research calls run at once.
struct Gauge {
    inner: Arc<ScriptedModel>,
    in_flight: AtomicUsize,
    max: AtomicUsize,
}

#[async_trait]
impl ChatModel for Gauge {
    fn model_name(&self) -> &str {
        self.inner.model_name()
    }

    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        if request.purpose != RESEARCH {
            return self.inner.chat(request).await;
        }
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max.fetch_max(now, Ordering::SeqCst);
        let reply = self.inner.chat(request).await;
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        reply
    }
}

struct Server {
    server: Option<RunningServer>,
    client: ResearchServiceClient<Channel>,
    model: Arc<ScriptedModel>,
    gauge: Arc<Gauge>,
    _store: common::TestStore,
}

#[derive(Default, Debug)]
struct Asked {
    events: Vec<pb::RunEvent>,
    messages: Vec<pb::OrchestratorMessage>,
    plans: Vec<pb::Plan>,
    results: Vec<pb::ResearchResult>,
    verdicts: Vec<pb::CriticVerdict>,
    experts: Vec<pb::ExpertAnswer>,
    research: Option<pb::Research>,
}

impl Asked {
    fn research(&self) -> &pb::Research {
        self.research.as_ref().expect("the stream ends with the research")
    }

    fn tool_results(&self) -> Vec<(String, String, bool)> {
        self.events
            .iter()
            .filter_map(|e| match &e.kind {
                Some(Kind::ToolReturned(t)) => Some((t.name.clone(), t.result_json.clone(), t.is_error)),
                _ => None,
            })
            .collect()
    }
}

impl Server {
    async fn start() -> Self {
        Self::start_with(|_| {}).await
    }

    async fn start_with(configure: impl FnOnce(&mut Config)) -> Self {
        let store = common::test_store().await;
        let mut config = Config::default();
        config.database.url = store.url.clone();
        config.shutdown_grace_secs = 5;
        config.model.max_attempts = 1;
        let mut settings = config.workflows.settings::<research::Workflow>().unwrap();
        settings.retry_backoff_ms = 10;
        config.workflows.set::<research::Workflow>(&settings).unwrap();
        configure(&mut config);
        let model = Arc::new(ScriptedModel::new("scripted-test"));
        let gauge = Arc::new(Gauge { inner: model.clone(), in_flight: AtomicUsize::new(0), max: AtomicUsize::new(0) });
        let overrides = Overrides { model: Some(gauge.clone()), parts: Parts::default() };
        let app = App::build(config, overrides).await.expect("server builds");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let server = app.serve_on(listener).await.expect("server starts");
        let channel = Channel::from_shared(format!("http://{}", server.addr)).unwrap().connect().await.unwrap();
        Server { server: Some(server), client: ResearchServiceClient::new(channel), model, gauge, _store: store }
    }

    fn script(&self, replies: &[(&str, serde_json::Value)]) {
        for (purpose, reply) in replies {
            self.model.push_reply(ScriptedReply::json(reply).for_purpose(*purpose));
        }
    }

    async fn ask(&self, request: pb::AskRequest) -> Result<Asked, tonic::Status> {
        let mut stream = self.client.clone().ask(request).await?.into_inner();
        let mut out = Asked::default();
        while let Some(item) = stream.next().await {
            match item?.payload.expect("a payload") {
                Payload::Event(e) => out.events.push(e),
                Payload::Message(m) => out.messages.push(m),
                Payload::Plan(p) => out.plans.push(p),
                Payload::ResearchResult(r) => out.results.push(r),
                Payload::CriticDecision(v) => out.verdicts.push(v),
                Payload::ExpertAnswer(e) => out.experts.push(e),
                Payload::Research(r) => out.research = Some(r),
            }
        }
        Ok(out)
    }

    async fn stop(mut self) {
        if let Some(server) = self.server.take() {
            server.shutdown().await.unwrap();
        }
    }
}

fn question(text: &str) -> pb::AskRequest {
    pb::AskRequest { question: text.into(), retry_limit: 0, corpus: String::new(), idempotency_key: String::new() }
}

fn plan(research: &[&str]) -> (&'static str, serde_json::Value) {
    (PLAN, json!({"research_steps": research, "expert_steps": ["Combine the findings"]}))
}

fn approve(critic: &'static str) -> (&'static str, serde_json::Value) {
    (critic, json!({"decision": "approve", "feedback": "Good."}))
}

fn reject(critic: &'static str, feedback: &str) -> (&'static str, serde_json::Value) {
    (critic, json!({"decision": "reject", "feedback": feedback}))
}

fn found(answer: &str, document: &str) -> (&'static str, serde_json::Value) {
    (RESEARCH, json!({"answer": answer, "citations": [{"document_id": document, "passage": 0}]}))
}

fn expert(answer: &str) -> (&'static str, serde_json::Value) {
    (EXPERT, json!({"answer": answer, "reasoning": "From the findings."}))
}

fn finalize() -> (&'static str, serde_json::Value) {
    (FINAL, json!({"final_answer": "The final answer.", "final_reasoning_trace": "Planned, researched, answered."}))
}

fn requests(s: &Server, purpose: &str) -> Vec<ChatRequest> {
    s.model.requests().into_iter().filter(|r| r.purpose == purpose).collect()
}

fn decisions(asked: &Asked) -> Vec<(String, i32, u32)> {
    asked.verdicts.iter().map(|v| (v.critic.clone(), v.decision, v.retry_count)).collect()
}

#[tokio::test]
async fn approved_on_the_first_pass() {
    let s = Server::start().await;
    s.script(&[
        plan(&["Find who invented CRISPR gene editing", "Find when the transistor was invented"]),
        approve(CRITIC_PLAN),
        found("Doudna and Charpentier.", "crispr"),
        found("In 1947.", "transistor"),
        approve(CRITIC_RESEARCH),
        approve(CRITIC_RESEARCH),
        expert("Doudna and Charpentier; 1947."),
        approve(CRITIC_EXPERT),
        finalize(),
    ]);
    let asked = s.ask(question("Who invented CRISPR, and when was the transistor invented?")).await.unwrap();
    let r = asked.research();
    assert_eq!(r.outcome(), O::Answered);
    assert_eq!(r.final_answer, "The final answer.");
    assert_eq!(r.retry_count, 0);
    assert_eq!(r.retry_limit, 5);
    assert_eq!(r.corpus, "sample");
    let steps: Vec<(u32, &str)> = r.results.iter().map(|x| (x.step_id, x.step.as_str())).collect();
    assert_eq!(steps, [(0, "Find who invented CRISPR gene editing"), (1, "Find when the transistor was invented")]);
    for result in &r.results {
        let citation = &result.citations[0];
        assert_eq!(citation.passage, 0);
        assert!(!citation.text.is_empty() && !citation.document_title.is_empty(), "{citation:?}");
    }
    assert_eq!(asked.plans.len(), 1);
    assert_eq!(asked.results.len(), 2);
    assert_eq!(asked.experts.len(), 1);
    let critics: Vec<&str> = asked.verdicts.iter().map(|v| v.critic.as_str()).collect();
    assert_eq!(critics, ["critic_planner", "critic_researcher", "critic_researcher", "critic_expert"]);
    assert!(asked.verdicts.iter().all(|v| v.decision() == D::Approve));
    let first = &asked.messages[0];
    assert_eq!(
        (first.sender.as_str(), first.receiver.as_str(), first.r#type.as_str()),
        ("orchestrator", "planner", "instruction")
    );
    assert!(first.content.starts_with("Develop a logical plan to answer: Who invented CRISPR"));
    let researched: Vec<Option<u32>> =
        asked.messages.iter().filter(|m| m.receiver == "researcher").map(|m| m.step_id).collect();
    assert_eq!(researched, [Some(0), Some(1)]);
    assert_eq!(r.messages.len(), asked.messages.len(), "the research keeps every message it streamed");
    assert_eq!(s.model.remaining(), 0);
    s.stop().await;
}

#[tokio::test]
async fn each_critic_rejects_once_and_the_feedback_reaches_the_retry() {
    let s = Server::start().await;
    s.script(&[
        plan(&["Find when Apollo 11 landed"]),
        reject(CRITIC_PLAN, "Also research when the transistor was invented."),
        plan(&["Find when Apollo 11 landed", "Find when the transistor was invented"]),
        approve(CRITIC_PLAN),
        found("July 1969.", "apollo-11"),
        found("1947.", "transistor"),
        // One of the two results is rejected (whichever the critic reads first).
        reject(CRITIC_RESEARCH, "Cite the passage with the exact date."),
        approve(CRITIC_RESEARCH),
        found("20 July 1969.", "apollo-11"),
        approve(CRITIC_RESEARCH),
        expert("22 years."),
        reject(CRITIC_EXPERT, "Show the calculation."),
        expert("1969 - 1947 = 22 years."),
        approve(CRITIC_EXPERT),
        finalize(),
    ]);
    let asked = s.ask(question("How many years passed between the transistor and Apollo 11?")).await.unwrap();
    let r = asked.research();
    assert_eq!(r.outcome(), O::Answered);
    assert_eq!(r.retry_count, 3);
    assert_eq!(r.plan.as_ref().unwrap().attempt, 2);
    assert_eq!(r.plan.as_ref().unwrap().research_steps.len(), 2);
    assert_eq!(r.expert.as_ref().unwrap().attempt, 2);
    let attempts: Vec<u32> = r.results.iter().map(|x| x.attempt).collect();
    assert!(attempts == [2, 1] || attempts == [1, 2], "{attempts:?}");
    let rejects: Vec<(String, u32)> = asked
        .verdicts
        .iter()
        .filter(|v| v.decision() == D::Reject)
        .map(|v| (v.critic.clone(), v.retry_count))
        .collect();
    assert_eq!(
        rejects,
        [("critic_planner".to_owned(), 1), ("critic_researcher".to_owned(), 2), ("critic_expert".to_owned(), 3)]
    );
    // Each retry sees its critic's feedback.
    let said = |purpose: &str, n: usize, text: &str| {
        let request = &requests(&s, purpose)[n];
        assert!(
            request.messages.iter().any(|m| m.content.contains(text)),
            "{purpose} retry lacks {text:?}: {request:?}"
        );
    };
    said(PLAN, 1, "Also research when the transistor was invented.");
    said(RESEARCH, 2, "Cite the passage with the exact date.");
    said(EXPERT, 1, "Show the calculation.");
    assert!(asked
        .messages
        .iter()
        .any(|m| m.receiver == "planner" && m.content == "Also research when the transistor was invented."));
    assert_eq!(s.model.remaining(), 0);
    s.stop().await;
}

#[tokio::test]
async fn the_retry_limit_ends_in_the_finalizer() {
    let s = Server::start().await;
    s.script(&[plan(&["Find X"]), reject(CRITIC_PLAN, "No."), plan(&["Find Y"]), reject(CRITIC_PLAN, "Still no.")]);
    let asked = s.ask(pb::AskRequest { retry_limit: 2, ..question("An unanswerable question") }).await.unwrap();
    let r = asked.research();
    assert_eq!(r.outcome(), O::RetryLimit);
    assert_eq!(r.retry_count, 2);
    assert_eq!(r.final_answer, "The question could not be answered.");
    assert!(r.final_reasoning_trace.contains("retry limit of 2"), "{}", r.final_reasoning_trace);
    assert_eq!(decisions(&asked), [("critic_planner".to_owned(), 2, 1), ("critic_planner".to_owned(), 2, 2)]);
    assert!(requests(&s, FINAL).is_empty(), "no model call on the way out");
    assert_eq!(s.model.remaining(), 0);
    s.stop().await;
}

/// Research steps one at a time cost more steps than in parallel; the longest run the retry
/// limit allows (five research steps, 20 retries, the last rejection then an approval) must
/// still end in an answer, not in the step limit.
#[tokio::test]
async fn sequential_research_at_the_retry_limit_still_answers() {
    let s = Server::start_with(|config| {
        let mut settings = config.workflows.settings::<research::Workflow>().unwrap();
        settings.parallel_research = false;
        config.workflows.set::<research::Workflow>(&settings).unwrap();
    })
    .await;
    let steps = ["Find A", "Find B", "Find C", "Find D", "Find E"];
    let mut script = vec![plan(&steps), approve(CRITIC_PLAN)];
    // The first step's result is rejected 19 times; each retry researches it again.
    for _ in 0..19 {
        script.push(found("A.", "crispr"));
        script.push(reject(CRITIC_RESEARCH, "Not yet."));
    }
    for _ in steps {
        script.push(found("Found.", "crispr"));
        script.push(approve(CRITIC_RESEARCH));
    }
    script.extend([expert("All found."), approve(CRITIC_EXPERT), finalize()]);
    s.script(&script);
    let asked = s.ask(pb::AskRequest { retry_limit: 20, ..question("Find five things") }).await.unwrap();
    let r = asked.research();
    assert_eq!(r.outcome(), O::Answered, "{}", r.final_reasoning_trace);
    assert_eq!(r.retry_count, 19);
    assert_eq!(s.model.remaining(), 0);
    s.stop().await;
}

#[tokio::test]
async fn tool_errors_are_shown_to_the_model_and_the_expert_calculates() {
    let s = Server::start().await;
    s.script(&[plan(&["Find when Apollo 11 landed"]), approve(CRITIC_PLAN)]);
    let missing = json!({"document_id": "no-such-document", "passage": 0});
    s.model.push_reply(ScriptedReply::tool_call("read", missing).for_purpose(RESEARCH));
    s.model.push_reply(ScriptedReply::tool_call("search", json!({"query": "Apollo 11 landing"})).for_purpose(RESEARCH));
    s.script(&[found("20 July 1969.", "apollo-11"), approve(CRITIC_RESEARCH)]);
    s.model.push_reply(ScriptedReply::tool_call("calculate", json!({"expression": "1969 - 1947"})).for_purpose(EXPERT));
    s.script(&[expert("22 years."), approve(CRITIC_EXPERT), finalize()]);
    let asked = s.ask(question("How long after the transistor did Apollo 11 land?")).await.unwrap();
    assert_eq!(asked.research().outcome(), O::Answered);
    let tools = asked.tool_results();
    assert_eq!(
        tools.iter().map(|(name, _, error)| (name.as_str(), *error)).collect::<Vec<_>>(),
        [("read", true), ("search", false), ("calculate", false)]
    );
    assert!(tools[0].1.contains("no-such-document"), "{}", tools[0].1);
    assert!(tools[1].1.contains("apollo-11"), "the search finds the document: {}", tools[1].1);
    assert!(tools[2].1.contains("22"), "{}", tools[2].1);
    // The error went back to the model as the tool's result.
    let second = &requests(&s, RESEARCH)[1];
    assert!(second.messages.iter().any(|m| m.content.contains("no-such-document")));
    s.stop().await;
}

#[tokio::test]
async fn a_plan_without_research_goes_to_the_expert() {
    let s = Server::start().await;
    s.script(&[plan(&[]), approve(CRITIC_PLAN), expert("4."), approve(CRITIC_EXPERT), finalize()]);
    let asked = s.ask(question("What is 2 + 2?")).await.unwrap();
    let r = asked.research();
    assert_eq!(r.outcome(), O::Answered);
    assert!(r.results.is_empty());
    assert!(requests(&s, RESEARCH).is_empty());
    assert!(asked.messages.iter().any(|m| m.receiver == "expert" && m.content.starts_with("Perform steps:")));
    s.stop().await;
}

#[tokio::test]
async fn research_steps_run_concurrently_and_land_in_plan_order() {
    let s = Server::start().await;
    let steps = ["Find when Apollo 11 landed", "Find when the transistor was invented", "Find who invented CRISPR"];
    s.script(&[plan(&steps), approve(CRITIC_PLAN)]);
    for (answer, document) in [("1969.", "apollo-11"), ("1947.", "transistor"), ("Doudna and Charpentier.", "crispr")] {
        let (purpose, reply) = found(answer, document);
        s.model.push_reply(ScriptedReply::json(&reply).for_purpose(purpose).after(Duration::from_millis(300)));
    }
    s.script(&[approve(CRITIC_RESEARCH), approve(CRITIC_RESEARCH), approve(CRITIC_RESEARCH)]);
    s.script(&[expert("Answered."), approve(CRITIC_EXPERT), finalize()]);
    let asked = s.ask(question("Three facts")).await.unwrap();
    assert_eq!(s.gauge.max.load(Ordering::SeqCst), 3, "the three research calls overlapped");
    let r = asked.research();
    assert_eq!(r.results.iter().map(|x| x.step.as_str()).collect::<Vec<_>>(), steps);
    let dispatched = asked.events.iter().find_map(|e| match &e.kind {
        Some(Kind::TasksDispatched(t)) if e.node == "researcher" => Some(t.tasks),
        _ => None,
    });
    assert_eq!(dispatched, Some(3));
    let tasks: std::collections::BTreeSet<u32> = asked
        .events
        .iter()
        .filter(|e| e.node == "researcher" && matches!(e.kind, Some(Kind::TaskFinished(_))))
        .filter_map(|e| e.task)
        .collect();
    assert_eq!(tasks.into_iter().collect::<Vec<_>>(), [0, 1, 2]);
    s.stop().await;
}

#[tokio::test]
async fn a_failing_component_goes_to_the_finalizer_through_the_error_handler() {
    let s = Server::start().await;
    s.script(&[plan(&["Find when Apollo 11 landed"]), approve(CRITIC_PLAN)]);
    for _ in 0..3 {
        s.model.push_reply(ScriptedReply::failure(ScriptedFailure::Server { status: 503 }).for_purpose(RESEARCH));
    }
    let asked = s.ask(question("When did Apollo 11 land?")).await.unwrap();
    let r = asked.research();
    assert_eq!(r.outcome(), O::Failed);
    assert_eq!(r.error_component, "researcher");
    assert!(!r.error.is_empty());
    assert_eq!(r.final_answer, "The question could not be answered.");
    assert!(r.final_reasoning_trace.contains("researcher failed"), "{}", r.final_reasoning_trace);
    assert!(asked
        .events
        .iter()
        .any(|e| matches!(&e.kind, Some(Kind::NodeFailed(f)) if f.fallback_node == "error_handler")));
    assert_eq!(s.model.remaining(), 0);
    s.stop().await;
}

/// An endpoint that ignores the plan's schema is still held to its limits.
#[tokio::test]
async fn a_plan_over_its_limits_fails_the_planner() {
    let s = Server::start().await;
    s.script(&[plan(&["A", "B", "C", "D", "E", "F"])]);
    let r = s.ask(question("Six things?")).await.unwrap().research().clone();
    assert_eq!((r.outcome(), r.error_component.as_str()), (O::Failed, "planner"));
    assert!(r.error.contains("6 research steps"), "{}", r.error);
    assert_eq!(s.model.remaining(), 0);
    s.stop().await;
}

#[tokio::test]
async fn requests_are_validated_replayed_read_and_listed() {
    let s = Server::start().await;
    for bad in [
        question(""),
        pb::AskRequest { retry_limit: 21, ..question("q") },
        pb::AskRequest { corpus: "elsewhere".into(), ..question("q") },
        pb::AskRequest { idempotency_key: "k".repeat(129), ..question("q") },
        pb::AskRequest { idempotency_key: "k\0".into(), ..question("q") },
        question("what\0now"),
    ] {
        assert_eq!(s.ask(bad).await.unwrap_err().code(), Code::InvalidArgument);
    }
    s.script(&[plan(&[]), approve(CRITIC_PLAN), expert("4."), approve(CRITIC_EXPERT), finalize()]);
    let keyed = pb::AskRequest { idempotency_key: "q-1".into(), ..question("What is 2 + 2?") };
    let first = s.ask(keyed.clone()).await.unwrap();
    let again = s.ask(keyed.clone()).await.unwrap();
    assert_eq!(again.research().research_id, first.research().research_id);
    assert_eq!(again.research().final_answer, "The final answer.");
    let other = pb::AskRequest { question: "What is 3 + 3?".into(), ..keyed };
    assert_eq!(s.ask(other).await.unwrap_err().code(), Code::FailedPrecondition);
    s.script(&[plan(&[]), approve(CRITIC_PLAN), expert("6."), approve(CRITIC_EXPERT), finalize()]);
    s.ask(question("What is 3 + 3?")).await.unwrap();

    let id = first.research().research_id.clone();
    let got = s.client.clone().get_research(pb::GetResearchRequest { research_id: id.clone() }).await.unwrap();
    assert_eq!(got.into_inner().research.unwrap().question, "What is 2 + 2?");
    let missing = pb::GetResearchRequest { research_id: "RES-missing".into() };
    assert_eq!(s.client.clone().get_research(missing).await.unwrap_err().code(), Code::NotFound);
    let page =
        s.client.clone().list_research(pb::ListResearchRequest { page_size: 1, page_token: String::new() }).await;
    let page = page.unwrap().into_inner();
    assert_eq!(page.research.len(), 1);
    let rest = pb::ListResearchRequest { page_size: 1, page_token: page.next_page_token };
    let rest = s.client.clone().list_research(rest).await.unwrap().into_inner();
    assert_eq!(rest.research.len(), 1);
    assert_ne!(rest.research[0].research_id, page.research[0].research_id);
    s.stop().await;
}

/// SIGKILL while one of three research steps is still running: after the restart, the run
/// finishes and only that step is researched again (the new process's script has one research
/// reply; a re-run of all three would exhaust it and fail the run).
#[tokio::test]
async fn a_crash_mid_research_reruns_only_the_unfinished_steps() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("frontdesk.db");
    let reply = |purpose: &str, value: serde_json::Value| json!({"purpose": purpose, "json": value});
    let approve = |purpose: &str| reply(purpose, json!({"decision": "approve", "feedback": "Good."}));
    let research = |answer: &str, document: &str| {
        reply(RESEARCH, json!({"answer": answer, "citations": [{"document_id": document, "passage": 0}]}))
    };
    let mut slow = research("never delivered", "crispr");
    slow["delay_ms"] = json!(60_000);
    let first = json!({"model": "scripted-crash", "replies": [
        reply(PLAN, json!({"research_steps": ["Find when Apollo 11 landed", "Find when the transistor was invented",
            "Find who invented CRISPR"], "expert_steps": ["Combine"]})),
        approve(CRITIC_PLAN),
        research("1969.", "apollo-11"),
        research("1947.", "transistor"),
        slow,
    ]});
    let server = common::process::spawn_server(&db, &first, dir.path(), "a");
    let channel = Channel::from_shared(format!("http://{}", server.addr)).unwrap().connect().await.unwrap();
    let mut stream = ResearchServiceClient::new(channel).ask(question("Three facts")).await.unwrap().into_inner();
    let mut finished = 0;
    let mut research_id = String::new();
    while finished < 2 {
        match stream.next().await.unwrap().unwrap().payload.unwrap() {
            Payload::Event(e) if matches!(e.kind, Some(Kind::TaskFinished(_))) => finished += 1,
            Payload::Event(e) => {
                if let Some(Kind::RunStarted(started)) = e.kind {
                    research_id = started.thread_id;
                }
            }
            _ => {}
        }
    }
    server.kill();

    let second = json!({"model": "scripted-crash", "replies": [
        research("Doudna and Charpentier.", "crispr"),
        approve(CRITIC_RESEARCH), approve(CRITIC_RESEARCH), approve(CRITIC_RESEARCH),
        reply(EXPERT, json!({"answer": "Done.", "reasoning": "From the findings."})),
        approve(CRITIC_EXPERT),
        reply(FINAL, json!({"final_answer": "All three.", "final_reasoning_trace": "Recovered."})),
    ]});
    let server = common::process::spawn_server(&db, &second, dir.path(), "b");
    let channel = Channel::from_shared(format!("http://{}", server.addr)).unwrap().connect().await.unwrap();
    let mut client = ResearchServiceClient::new(channel);
    let mut research = None;
    for _ in 0..100 {
        let got = client.get_research(pb::GetResearchRequest { research_id: research_id.clone() }).await.unwrap();
        let got = got.into_inner().research.unwrap();
        if got.outcome() != O::Running {
            research = Some(got);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let research = research.expect("the recovered run finishes");
    assert_eq!(research.outcome(), O::Answered, "{research:?}");
    assert_eq!(research.final_answer, "All three.");
    // Which task got which scripted reply depends on which called the model first; each
    // reply was used once, and the one delivered after the restart went to the step in flight.
    let mut answers: Vec<&str> = research.results.iter().map(|r| r.answer.as_str()).collect();
    answers.sort_unstable();
    assert_eq!(answers, ["1947.", "1969.", "Doudna and Charpentier."]);
    let steps: Vec<&str> = research.results.iter().map(|r| r.step.as_str()).collect();
    assert_eq!(
        steps,
        ["Find when Apollo 11 landed", "Find when the transistor was invented", "Find who invented CRISPR"]
    );
    assert!(research.results.iter().all(|r| r.attempt == 1), "no step was researched twice");
}

#[tokio::test]
async fn a_configured_corpus_is_researched_by_name() {
    let docs = tempfile::tempdir().unwrap();
    std::fs::write(
        docs.path().join("leave-policy.md"),
        "# Leave policy\n\nEmployees get 25 days of paid leave a year.\n\nUnused days expire in March.\n",
    )
    .unwrap();
    let dir = docs.path().to_owned();
    let s = Server::start_with(move |config| {
        let mut settings = config.workflows.settings::<research::Workflow>().unwrap();
        settings.corpora.insert("handbook".into(), dir);
        config.workflows.set::<research::Workflow>(&settings).unwrap();
    })
    .await;
    s.script(&[
        plan(&["Find how many days of paid leave employees get"]),
        approve(CRITIC_PLAN),
        found("25 days a year.", "leave-policy"),
        approve(CRITIC_RESEARCH),
        expert("25 days."),
        approve(CRITIC_EXPERT),
        finalize(),
    ]);
    let asked = s.ask(pb::AskRequest { corpus: "handbook".into(), ..question("How much paid leave?") }).await.unwrap();
    let r = asked.research();
    assert_eq!(r.corpus, "handbook");
    let citation = &r.results[0].citations[0];
    assert_eq!((citation.document_id.as_str(), citation.document_title.as_str()), ("leave-policy", "Leave policy"));
    assert!(citation.text.contains("25 days"), "{citation:?}");
    // The researcher was shown the configured corpus's hits, not the sample's.
    let request = &requests(&s, RESEARCH)[0];
    assert!(request.messages.iter().any(|m| m.content.contains("[leave-policy#0]")), "{request:?}");
    s.stop().await;
}

#[tokio::test]
async fn a_corpus_that_cannot_be_loaded_stops_the_server_naming_the_setting() {
    let mut config = Config::default();
    let dir = tempfile::tempdir().unwrap();
    config.database.url = format!("sqlite://{}/frontdesk.db", dir.path().display());
    let mut settings = config.workflows.settings::<research::Workflow>().unwrap();
    settings.corpora.insert("handbook".into(), dir.path().join("missing"));
    config.workflows.set::<research::Workflow>(&settings).unwrap();
    let model: Arc<dyn ChatModel> = Arc::new(ScriptedModel::new("scripted-test"));
    let error = match App::build(config, Overrides { model: Some(model), parts: Parts::default() }).await {
        Ok(_) => panic!("a missing corpus directory must stop the server"),
        Err(error) => error,
    };
    let mut chain = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        chain.push_str(": ");
        chain.push_str(&cause.to_string());
        source = cause.source();
    }
    assert!(chain.contains("workflows.research.corpora.handbook"), "{chain}");
}

/// A keyed question whose run was cancelled (or failed) leaves no research behind, so asking it
/// again with the same key runs it (the key names the research: until such a run deleted the
/// thread it created, the retry was `ALREADY_EXISTS` for good).
#[tokio::test]
async fn a_keyed_question_whose_run_was_cancelled_can_be_asked_again_with_its_key() {
    let s = Server::start().await;
    let slow = ScriptedReply::json(&plan(&["Find when the transistor was invented"]).1).for_purpose(PLAN);
    s.model.push_reply(slow.after(Duration::from_secs(30)));
    let request =
        pb::AskRequest { idempotency_key: "asked-once".into(), ..question("When was the transistor invented?") };
    let mut stream = s.client.clone().ask(request.clone()).await.unwrap().into_inner();
    let run_id = loop {
        match stream.next().await.unwrap().unwrap().payload.unwrap() {
            Payload::Event(e) => break e.run_id,
            _ => continue,
        }
    };
    // Cancelled only once the planner's call has taken its (slow) reply, so the replies
    // scripted below are the retry's.
    while requests(&s, PLAN).is_empty() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let addr = s.server.as_ref().unwrap().addr;
    let channel = Channel::from_shared(format!("http://{addr}")).unwrap().connect().await.unwrap();
    let mut workflows = pb::workflow_service_client::WorkflowServiceClient::new(channel);
    assert!(workflows.cancel_run(pb::CancelRunRequest { run_id }).await.unwrap().into_inner().cancelled);
    let mut last = None;
    while let Some(item) = stream.next().await {
        last = Some(item);
    }
    let Some(Err(status)) = last else { panic!("the question ends with an error: {last:?}") };
    assert_eq!(status.code(), Code::Cancelled, "{status:?}");

    s.script(&[
        plan(&["Find when the transistor was invented"]),
        approve(CRITIC_PLAN),
        found("In 1947.", "transistor"),
        approve(CRITIC_RESEARCH),
        expert("1947."),
        approve(CRITIC_EXPERT),
        finalize(),
    ]);
    let asked = s.ask(request).await.expect("asked again with its key");
    assert_eq!(asked.research().outcome(), O::Answered);
    s.stop().await;
}
