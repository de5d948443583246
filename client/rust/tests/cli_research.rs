//! `frontdesk ask` and `frontdesk research show|list`, and the client's research methods, against
//! a real server (in process, on 127.0.0.1:0, SQLite, the shipped sample corpus) with the
//! scripted demo model (tests/fixtures/demo-script.json): a plan of two research steps, every
//! critic approving, each researcher citing `crispr#0`.

mod common;

use common::Server;
use frontdesk_client::{v1, AskOptions, ResearchEvent};
use frontdesk_llm::ScriptedModel;
use futures::StreamExt;
use tonic::Code;

const QUESTION: &str = "Who invented CRISPR gene editing, and when was the transistor invented?";
const STEPS: [&str; 2] = ["Find who invented CRISPR gene editing", "Find when the transistor was invented"];

async fn demo_server() -> Server {
    let script = include_str!("../../../tests/fixtures/demo-script.json");
    Server::with_model(ScriptedModel::from_json_str(script).unwrap()).await
}

#[tokio::test(flavor = "multi_thread")]
async fn ask_streams_the_critic_loop_then_show_and_list_find_the_research() {
    let s = demo_server().await;

    let (ok, out, err) = s.cli(&["ask", QUESTION, "--retry-limit", "3", "--key", "cli-ask-1"]).await;
    assert!(ok, "{err}\n{out}");
    assert!(out.contains("  · [1] run started: workflow research thread RES-"), "node events stream: {out}");
    assert!(out.contains("planner ▸ started"), "{out}");
    assert!(
        out.contains(&format!(
            "\norchestrator -> planner (instruction): Develop a logical plan to answer: {QUESTION}\n"
        )),
        "{out}"
    );
    assert!(
        out.contains("\norchestrator -> researcher (instruction) [step 1]: Research: Find when the transistor"),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "\nplan (attempt 1):\n  research 0: {}\n  research 1: {}\n  expert 0: Combine the findings\n",
            STEPS[0], STEPS[1]
        )),
        "{out}"
    );
    for (i, step) in STEPS.iter().enumerate() {
        assert!(out.contains(&format!("\nresult [step {i}] {step} (attempt 1):\n")), "{out}");
    }
    assert_eq!(out.matches("\n  [crispr#0] CRISPR gene editing\n").count(), 2, "{out}");
    assert!(out.contains("\ncritic_planner: APPROVE (retry 0) Looks complete.\n"), "{out}");
    assert_eq!(out.matches("\ncritic_researcher: APPROVE (retry 0) Looks complete.\n").count(), 2, "{out}");
    assert!(out.contains("\ncritic_expert: APPROVE (retry 0) Looks complete.\n"), "{out}");
    assert!(out.contains("\nexpert answer (attempt 1):\n  Scripted demo:"), "{out}");
    assert!(out.contains("\noutcome:  answered (retries 0 of 3)\nfinal answer:\n  Scripted demo:"), "{out}");
    assert!(out.contains("\nreasoning trace:\n  Scripted demo:"), "{out}");
    // the order: the plan's decision before any result, the expert's answer after every result
    let at = |needle: &str| out.find(needle).unwrap_or_else(|| panic!("{needle} missing: {out}"));
    assert!(at("critic_planner: APPROVE") < at("result [step 0]"), "{out}");
    assert!(at("result [step 0]").max(at("result [step 1]")) < at("expert answer"), "{out}");
    assert!(at("expert answer") < at("critic_expert: APPROVE"), "{out}");
    assert!(at("critic_expert: APPROVE") < at("\nresearch: RES-"), "{out}");
    let id = out.lines().find_map(|l| l.strip_prefix("research: ")).expect("the research id is printed").to_owned();

    // the same key and question: the first outcome again
    let (ok, again, err) =
        s.cli(&["ask", QUESTION, "--retry-limit", "3", "--quiet-events", "--key", "cli-ask-1"]).await;
    assert!(ok, "{err}\n{again}");
    assert!(again.contains(&format!("research: {id}\n")), "{again}");
    assert!(!again.contains("  · ["), "--quiet-events prints no node events: {again}");

    let (ok, out, err) = s.cli(&["research", "show", &id]).await;
    assert!(ok, "{err}");
    assert!(out.starts_with(&format!("research: {id}\nquestion: {QUESTION}\ncorpus:   sample\n")), "{out}");
    assert!(out.contains("step:     finalizer\noutcome:  answered (retries 0 of 3)\n"), "{out}");
    assert!(out.contains(&format!("result [step 1] {} (attempt 1):\n", STEPS[1])), "{out}");
    assert!(out.contains("\nmessages ("), "{out}");
    assert!(out.contains("  critic_expert -> orchestrator (response): approve: Looks complete.\n"), "{out}");

    let (ok, out, err) = s.cli(&["ask", "--quiet-events", "What is CRISPR?"]).await;
    assert!(ok, "{err}\n{out}");
    let (ok, out, err) = s.cli(&["research", "list", "--page-size", "1"]).await;
    assert!(ok, "{err}");
    assert!(out.starts_with("ID                                    OUTCOME"), "{out}");
    assert!(out.contains("  answered         0/"), "{out}");
    let token = out.lines().find_map(|l| l.strip_prefix("more: --page-token ")).expect("a next page").to_owned();
    let (ok, rest, err) = s.cli(&["research", "list", "--page-size", "1", "--page-token", &token]).await;
    assert!(ok, "{err}");
    assert_ne!(out.lines().nth(1), rest.lines().nth(1), "{out}\n{rest}");
    let (ok, all, err) = s.cli(&["research", "list", "--all", "--page-size", "1"]).await;
    assert!(ok, "{err}");
    assert_eq!(all.lines().filter(|l| l.starts_with("RES-")).count(), 2, "{all}");
    assert!(all.contains(&id) && all.contains("What is CRISPR?") && !all.contains("more:"), "{all}");

    let (ok, _, err) = s.cli(&["ask", ""]).await;
    assert!(!ok && err.contains("INVALID_ARGUMENT") && err.contains("field question"), "{err}");
    let (ok, _, err) = s.cli(&["ask", QUESTION, "--corpus", "no-such-corpus"]).await;
    assert!(!ok && err.contains("INVALID_ARGUMENT"), "{err}");
    let (ok, _, err) = s.cli(&["research", "show", "RES-missing"]).await;
    assert!(!ok && err.contains("NOT_FOUND"), "{err}");
    s.server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_client_asks_streams_and_reads_research() {
    let s = demo_server().await;
    let client = s.client().await;

    let mut stream = client.ask(QUESTION, AskOptions::default()).await.unwrap();
    let mut kinds = Vec::new();
    let mut research = None;
    while let Some(item) = stream.next().await {
        let item = item.unwrap();
        assert!(research.is_none(), "nothing follows the research");
        kinds.push(match &item {
            ResearchEvent::Event(_) => "event",
            ResearchEvent::Message(_) => "message",
            ResearchEvent::Plan(_) => "plan",
            ResearchEvent::Result(_) => "result",
            ResearchEvent::CriticDecision(_) => "critic",
            ResearchEvent::ExpertAnswer(_) => "expert",
            ResearchEvent::Research(_) => "research",
        });
        if let ResearchEvent::Research(r) = item {
            research = Some(r);
        }
    }
    let research = research.expect("the stream ends with the research");
    assert_eq!(kinds.iter().filter(|k| **k == "result").count(), 2);
    assert_eq!(kinds.iter().filter(|k| **k == "critic").count(), 4);
    assert_eq!(research.outcome(), v1::ResearchOutcome::Answered);
    assert_eq!((research.retry_count, research.retry_limit, research.corpus.as_str()), (0, 5, "sample"));
    let steps: Vec<(u32, &str)> = research.results.iter().map(|r| (r.step_id, r.step.as_str())).collect();
    assert_eq!(steps, [(0, STEPS[0]), (1, STEPS[1])]);

    let run = client
        .ask_and_wait(
            QUESTION,
            AskOptions { retry_limit: Some(2), corpus: Some("sample".into()), ..Default::default() },
        )
        .await
        .unwrap();
    assert_eq!(run.research.outcome(), v1::ResearchOutcome::Answered);
    assert_eq!(run.research.retry_limit, 2);
    assert_eq!(run.plans.len(), 1);
    assert_eq!(run.results.len(), 2);
    let critics: Vec<&str> = run.critic_decisions.iter().map(|v| v.critic.as_str()).collect();
    assert_eq!(critics, ["critic_planner", "critic_researcher", "critic_researcher", "critic_expert"]);
    assert!(run.critic_decisions.iter().all(|v| v.decision() == v1::CriticDecision::Approve));
    assert_eq!(run.expert_answers.len(), 1);
    assert!(frontdesk_client::describe_event(&run.events[0]).starts_with("[1] run started: workflow research"));
    for result in &run.research.results {
        let c = &result.citations[0];
        assert_eq!((c.document_id.as_str(), c.passage), ("crispr", 0));
        assert!(!c.document_title.is_empty() && !c.text.is_empty(), "{c:?}");
    }
    assert_eq!(run.research.messages.len(), run.messages.len());

    let got = client.get_research(&run.research.research_id).await.unwrap();
    assert_eq!(got.final_answer, run.research.final_answer);
    assert_eq!(got.results, run.research.results);

    let page = client.list_research(1, None).await.unwrap();
    assert_eq!(page.research.len(), 1);
    assert!(!page.next_page_token.is_empty());
    let rest = client.list_research(10, Some(page.next_page_token)).await.unwrap();
    let mut ids: Vec<String> =
        page.research.iter().chain(rest.research.iter()).map(|r| r.research_id.clone()).collect();
    assert_eq!(ids.len(), 2);
    assert!(ids.contains(&research.research_id) && ids.contains(&run.research.research_id));
    let listed = ids.clone();
    ids.sort();
    assert_eq!(listed, ids, "ordered by research id");
    assert_eq!(client.list_research(101, None).await.unwrap_err().code(), Some(Code::InvalidArgument));

    let err = match client.ask("", AskOptions::default()).await {
        Ok(mut stream) => stream.next().await.expect("an error").unwrap_err(),
        Err(e) => e,
    };
    assert_eq!(err.code(), Some(Code::InvalidArgument));
    assert_eq!(err.reason(), Some("INVALID_ARGUMENT"));
    let err =
        client.ask_and_wait(QUESTION, AskOptions { retry_limit: Some(21), ..Default::default() }).await.unwrap_err();
    assert_eq!(err.code(), Some(Code::InvalidArgument));
    let err = client.get_research("RES-missing").await.unwrap_err();
    assert_eq!((err.code(), err.reason()), (Some(Code::NotFound), Some("NOT_FOUND")));
    s.server.shutdown().await.unwrap();
}
