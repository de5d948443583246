//! The LLM call log: rows round-trip, a thread's calls come newest first and only its own,
//! the limit holds, totals sum every call, recording an id twice keeps the first, and erasing
//! a thread's calls leaves the others; many calls recorded at once, over more than one
//! statement, are each recorded once.

use std::time::{Duration, UNIX_EPOCH};

use frontdesk_store::{Database, LlmCallRow, LlmCallTotals, MAX_LLM_CALLS_PER_INSERT};

fn call(thread_id: &str, n: u64, at_ms: u64) -> LlmCallRow {
    let (node, purpose) = match n % 2 {
        0 => ("supervisor", "supervisor.route"),
        _ => ("chat_agent", "chat.chat"),
    };
    LlmCallRow {
        id: format!("{thread_id}-call-{n:03}"),
        thread_id: thread_id.to_owned(),
        run_id: format!("run-{}", n / 2),
        node: node.into(),
        purpose: purpose.into(),
        model: "gpt-4o-mini".into(),
        prompt_tokens: 100 + n,
        completion_tokens: 10 + n,
        cost_usd: 0.000_25 * (n + 1) as f64,
        latency_ms: 1_500 + n,
        attempts: 1 + (n % 3) as u32,
        error: None,
        prompt_json: r#"[{"role":"system","chars":120},{"role":"user","chars":5}]"#.into(),
        response_json: r#"{"chars":42,"tool_calls":[]}"#.into(),
        at: UNIX_EPOCH + Duration::from_millis(at_ms),
    }
}

pub async fn run_all(db: &Database) {
    let thread = super::ns();
    let other = super::ns();
    assert!(db.llm_calls(&thread, 10).await.unwrap().is_empty());
    assert_eq!(db.llm_call_totals(&thread).await.unwrap(), LlmCallTotals::default());

    let mut calls: Vec<LlmCallRow> = (0..5).map(|n| call(&thread, n, 1_700_000_000_000 + n * 1_000)).collect();
    calls[3].error = Some("llm call failed after 4 attempts: rate limited by the provider".into());
    calls[3].response_json = "null".into();
    calls[3].prompt_tokens = 0;
    calls[3].completion_tokens = 0;
    // Recorded out of order: the listing orders by time, not by arrival.
    for i in [2, 0, 4, 1, 3] {
        db.record_llm_call(&calls[i]).await.unwrap();
    }
    db.record_llm_call(&call(&other, 9, 1_700_000_000_000)).await.unwrap();

    let listed = db.llm_calls(&thread, 10).await.unwrap();
    let expected: Vec<LlmCallRow> = calls.iter().rev().cloned().collect();
    assert_eq!(listed, expected, "every field round-trips; newest first; only this thread's calls");
    assert_eq!(listed[1].error.as_deref(), Some("llm call failed after 4 attempts: rate limited by the provider"));

    let newest = db.llm_calls(&thread, 2).await.unwrap();
    assert_eq!(newest.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(), [calls[4].id.as_str(), calls[3].id.as_str()]);
    assert_eq!(db.llm_calls(&thread, 0).await.unwrap().len(), 1, "the limit is at least 1");
    // The next page starts after the last call of this one.
    let older = db.llm_calls_before(&thread, (newest[1].at, &newest[1].id), 2).await.unwrap();
    assert_eq!(older.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(), [calls[2].id.as_str(), calls[1].id.as_str()]);
    let last = db.llm_calls_before(&thread, (older[1].at, &older[1].id), 2).await.unwrap();
    assert_eq!(last.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(), [calls[0].id.as_str()]);

    let totals = db.llm_call_totals(&thread).await.unwrap();
    assert_eq!(totals.calls, 5);
    assert_eq!(totals.prompt_tokens, calls.iter().map(|c| c.prompt_tokens).sum::<u64>());
    assert_eq!(totals.completion_tokens, calls.iter().map(|c| c.completion_tokens).sum::<u64>());
    let cost: f64 = calls.iter().map(|c| c.cost_usd).sum();
    assert!((totals.cost_usd - cost).abs() < 1e-12, "{} != {cost}", totals.cost_usd);

    // A writer that records a call twice (a retried write) keeps the first row.
    let mut again = calls[0].clone();
    again.prompt_tokens = 999_999;
    db.record_llm_call(&again).await.unwrap();
    assert_eq!(db.llm_call_totals(&thread).await.unwrap(), totals);

    // Equal times sort by id, descending.
    let tied = super::ns();
    for n in 0..3 {
        db.record_llm_call(&call(&tied, n, 1_700_000_000_000)).await.unwrap();
    }
    let ids: Vec<String> = db.llm_calls(&tied, 10).await.unwrap().into_iter().map(|c| c.id).collect();
    assert_eq!(ids, [2, 1, 0].map(|n| format!("{tied}-call-{n:03}")));

    // Many at once: more than one statement's worth, a duplicate of a recorded call among them
    // (kept as first recorded) and a duplicate within the batch itself (the first kept).
    let many = super::ns();
    let total = MAX_LLM_CALLS_PER_INSERT as u64 + 9;
    let mut batch: Vec<LlmCallRow> = (0..total).map(|n| call(&many, n, 1_700_000_100_000 + n)).collect();
    db.record_llm_calls(&batch[..1]).await.unwrap();
    let mut twice = batch[70].clone();
    twice.prompt_tokens = 777;
    batch.push(twice);
    batch[0].prompt_tokens = 555;
    db.record_llm_calls(&batch).await.unwrap();
    let stored = db.llm_calls(&many, 1_000).await.unwrap();
    assert_eq!(stored.len() as u64, total, "every call once");
    let by_id = |n: u64| stored.iter().find(|c| c.id == format!("{many}-call-{n:03}")).unwrap();
    assert_eq!(by_id(0).prompt_tokens, 100, "recorded before the batch: the first row stays");
    assert_eq!(by_id(70).prompt_tokens, 170, "twice in one batch: the first stays");
    assert_eq!(by_id(total - 1), &call(&many, total - 1, 1_700_000_100_000 + total - 1), "round-trips");
    db.record_llm_calls(&[]).await.unwrap();
    assert_eq!(db.delete_llm_calls(&many).await.unwrap(), total);

    assert_eq!(db.delete_llm_calls(&thread).await.unwrap(), 5);
    assert!(db.llm_calls(&thread, 10).await.unwrap().is_empty());
    assert_eq!(db.llm_call_totals(&thread).await.unwrap(), LlmCallTotals::default());
    assert_eq!(db.llm_calls(&other, 10).await.unwrap().len(), 1, "other threads keep theirs");
    assert_eq!(db.delete_llm_calls(&thread).await.unwrap(), 0);
}
