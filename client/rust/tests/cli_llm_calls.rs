//! `Client::list_llm_calls` and `frontdesk llm-calls` against a real server (in process, on
//! 127.0.0.1:0) running intake turns on the scripted demo model, with the LLM call log in full,
//! redacted and off: the calls listed are the ones the turns made, as their `llm_call_finished`
//! events report them.

mod common;

use std::collections::HashSet;

use common::Server;
use frontdesk_client::{v1, Client, SendOptions};
use frontdesk_llm::ScriptedModel;
use frontdesk_server::config::CallLogMode;

async fn server(mode: CallLogMode) -> Server {
    let model = ScriptedModel::from_json_str(include_str!("../../../tests/fixtures/demo-script.json")).unwrap();
    Server::with_config(model, |config| config.model.call_log = mode).await
}

/// Runs one turn: its run id and the model calls its events report (`llm_call_finished`).
async fn turn(client: &Client, conversation: &str, text: &str) -> (String, Vec<v1::LlmCallFinished>) {
    let (events, _) = client.send_message_and_wait(conversation, text, SendOptions::default()).await.unwrap();
    let run = events.first().expect("the turn streamed events").run_id.clone();
    let calls = events
        .into_iter()
        .filter_map(|e| match e.kind {
            Some(v1::run_event::Kind::LlmCallFinished(c)) => Some(c),
            _ => None,
        })
        .collect();
    (run, calls)
}

async fn conversation(client: &Client) -> String {
    client.start_conversation("intake", Default::default()).await.unwrap().conversation.unwrap().conversation_id
}

/// Every call of the thread, page by page (`page_size` 1 makes a page of each): the pages and
/// the calls, the most recent first as the server lists them.
async fn every_page(
    client: &Client,
    thread: &str,
    page_size: i32,
) -> (Vec<v1::ListLlmCallsResponse>, Vec<v1::LlmCall>) {
    let (mut pages, mut calls, mut token) = (Vec::new(), Vec::new(), None);
    loop {
        let page = client.list_llm_calls(thread, page_size, token).await.unwrap();
        calls.extend(page.calls.clone());
        token = Some(page.next_page_token.clone()).filter(|t| !t.is_empty());
        pages.push(page);
        if token.is_none() {
            return (pages, calls);
        }
    }
}

/// The data rows of `frontdesk llm-calls` (between the header and the total).
fn rows(out: &str) -> Vec<&str> {
    out.lines().skip(1).filter(|l| !l.starts_with("total: ") && !l.starts_with("    ")).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn lists_the_calls_the_turns_made_page_by_page_and_on_the_cli() {
    let s = server(CallLogMode::Full).await;
    let client = s.client().await;
    let id = conversation(&client).await;
    let (first_run, first_calls) = turn(&client, &id, "hello").await;
    let (second_run, second_calls) = turn(&client, &id, "how are you?").await;
    assert!(!first_calls.is_empty() && !second_calls.is_empty(), "each turn called the model");
    let made = first_calls.len() + second_calls.len();

    // The client, a call a page: every call the turns reported, the most recent first.
    let (pages, calls) = every_page(&client, &id, 1).await;
    assert_eq!(calls.len(), made, "{calls:#?}");
    assert_eq!(pages.len(), made, "a page of one call each");
    for page in &pages {
        assert_eq!(page.calls.len(), 1);
        assert_eq!(page.total_calls, made as u64, "the total covers the thread, not the page");
    }
    let usage = pages[0].total_usage.unwrap();
    assert_eq!(usage.prompt_tokens, calls.iter().map(|c| c.prompt_tokens).sum::<u64>());
    assert_eq!(usage.completion_tokens, calls.iter().map(|c| c.completion_tokens).sum::<u64>());
    let times: Vec<_> = calls.iter().map(|c| c.time.unwrap()).map(|t| (t.seconds, t.nanos)).collect();
    assert!(times.windows(2).all(|w| w[0] >= w[1]), "the most recent first: {times:?}");
    // The second turn's calls come first, then the first turn's, each as its events reported.
    let runs: Vec<&str> = calls.iter().map(|c| c.run_id.as_str()).collect();
    let expected_runs: Vec<&str> = [(&second_run, second_calls.len()), (&first_run, first_calls.len())]
        .iter()
        .flat_map(|(r, n)| vec![r.as_str(); *n])
        .collect();
    assert_eq!(runs, expected_runs);
    let reported: HashSet<(&str, u64, u64)> = first_calls
        .iter()
        .chain(&second_calls)
        .map(|c| (c.purpose.as_str(), c.usage.unwrap().prompt_tokens, c.usage.unwrap().completion_tokens))
        .collect();
    for c in &calls {
        assert!(reported.contains(&(c.purpose.as_str(), c.prompt_tokens, c.completion_tokens)), "{c:?} not reported");
        assert!(c.error.is_empty() && !c.node.is_empty() && !c.model.is_empty(), "{c:?}");
    }
    // With call_log = "full" the prompts and replies are there.
    assert!(calls.iter().any(|c| c.prompt_json.contains("how are you?")), "{calls:#?}");
    assert!(calls.iter().any(|c| c.response_json.contains("Hello from the scripted demo model")));
    // One request with the server's page size holds them all.
    let whole = client.list_llm_calls(&id, 0, None).await.unwrap();
    assert_eq!(whole.calls, calls);
    assert!(whole.next_page_token.is_empty());

    // The CLI reads every page (here one call each) and prints them oldest first.
    let (ok, out, err) = s.cli(&["llm-calls", &id, "--page-size", "1"]).await;
    assert!(ok, "{err}");
    assert!(out.starts_with("TIME "), "{out}");
    let printed = rows(&out);
    assert_eq!(printed.len(), made, "{out}");
    let mut oldest_first = calls.clone();
    oldest_first.reverse();
    let last_group = |run: &str| run.rsplit('-').next().unwrap().to_string();
    for (row, call) in printed.iter().zip(&oldest_first) {
        for field in [&last_group(&call.run_id), &call.node, &call.purpose, &call.model] {
            assert!(row.contains(field), "{row} lacks {field}");
        }
        assert!(row.contains(&format!(" {}+{} ", call.prompt_tokens, call.completion_tokens)), "{row}");
        assert!(row.ends_with("  ok"), "{row}");
    }
    assert!(
        out.ends_with(&format!("total: {made} calls, {}+{} tokens\n", usage.prompt_tokens, usage.completion_tokens)),
        "{out}"
    );
    assert!(!out.contains("how are you?"), "no prompt without --prompts: {out}");

    // --prompts: the messages and the reply under each call.
    let (ok, out, err) = s.cli(&["llm-calls", &id, "--prompts"]).await;
    assert!(ok, "{err}");
    assert_eq!(rows(&out).len(), made, "{out}");
    assert!(out.contains("\n    user: how are you?\n"), "{out}");
    assert!(out.contains("\n    reply: Hello from the scripted demo model"), "{out}");
    assert!(!out.contains("(redacted)"), "{out}");

    // --run: the calls of one run alone, by its id or the part of it the RUN column shows.
    for run in [second_run.clone(), last_group(&second_run)] {
        let (ok, out, err) = s.cli(&["llm-calls", &id, "--run", &run]).await;
        assert!(ok, "{err}");
        let printed = rows(&out);
        assert_eq!(printed.len(), second_calls.len(), "{out}");
        assert!(printed.iter().all(|r| r.contains(&last_group(&second_run))), "{out}");
        assert!(out.ends_with(&format!(" (of the thread's {made})\n")), "{out}");
    }
    let (ok, out, _) = s.cli(&["llm-calls", &id, "--run", "no-such-run"]).await;
    assert!(ok && out == format!("no calls of run no-such-run among the {made} recorded calls of {id}\n"), "{out}");

    // A thread the server does not know.
    let (ok, _, err) = s.cli(&["llm-calls", "conv-missing"]).await;
    assert!(!ok && err.contains("NOT_FOUND"), "{err}");
    let missing = client.list_llm_calls("conv-missing", 0, None).await.unwrap_err();
    assert_eq!(missing.code(), Some(tonic::Code::NotFound));
    s.server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn prompts_are_shown_as_the_log_holds_them() {
    // Redacted: roles and sizes only, never the text.
    let s = server(CallLogMode::Redacted).await;
    let client = s.client().await;
    let id = conversation(&client).await;
    let (_, made) = turn(&client, &id, "hello there").await;
    let (ok, out, err) = s.cli(&["llm-calls", &id, "--prompts"]).await;
    assert!(ok, "{err}");
    assert_eq!(rows(&out).len(), made.len(), "{out}");
    assert_eq!(out.matches("\n    prompt (redacted): ").count(), made.len(), "{out}");
    assert_eq!(out.matches("\n    reply (redacted): ").count(), made.len(), "{out}");
    assert!(out.contains(&format!("user {} chars", "hello there".len())), "{out}");
    assert!(!out.contains("hello there") && !out.contains("Hello from"), "{out}");
    s.server.shutdown().await.unwrap();

    // Off: a known conversation lists no calls.
    let s = server(CallLogMode::Off).await;
    let client = s.client().await;
    let id = conversation(&client).await;
    let (_, made) = turn(&client, &id, "hello").await;
    assert!(!made.is_empty(), "the turn called the model");
    let page = client.list_llm_calls(&id, 0, None).await.unwrap();
    assert!(page.calls.is_empty() && page.total_calls == 0, "{page:?}");
    let (ok, out, err) = s.cli(&["llm-calls", &id]).await;
    assert!(ok, "{err}");
    assert!(out.starts_with(&format!("no recorded calls for {id} ")), "{out}");
    s.server.shutdown().await.unwrap();
}
