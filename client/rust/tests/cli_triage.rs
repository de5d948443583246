//! The `frontdesk triage`, `tickets` and `ticket show` commands against a real server (in
//! process, on 127.0.0.1:0) whose model is scripted per call purpose.

mod common;

use common::Server;
use serde_json::json;

/// The translator's language detection for an English ticket (no translation calls follow).
fn english() -> serde_json::Value {
    json!({"original_language": "en", "is_english": true})
}

fn decision(urgency: &str, ticket_type: &str) -> serde_json::Value {
    json!({"reasoning": "scripted", "urgency": urgency, "ticket_type": ticket_type, "requires_escalation": false})
}

fn specialist(action: &str, reply: &str, articles: &[&str]) -> serde_json::Value {
    json!({
        "reasoning": "scripted",
        "recommended_action": action,
        "suggested_response": reply,
        "relevant_articles": articles,
        "extracted_info": {"product_area": "billing", "issue_type": "double_charge", "sentiment": "frustrated"}
    })
}

/// The ticket id of `ticket: TKT-... (...)`, the first line of `frontdesk triage`.
fn ticket_id(out: &str) -> String {
    let first = out.lines().next().unwrap_or_default();
    let id = first.strip_prefix("ticket: ").and_then(|l| l.split_whitespace().next());
    id.unwrap_or_else(|| panic!("the first line names the ticket: {out}")).to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn triage_streams_the_ticket_then_tickets_and_ticket_show_find_it() {
    let s = Server::start().await;
    let text = "I was charged twice on my last invoice";
    s.script(&[
        ("translator.translate", english()),
        ("supervisor.classify", decision("high", "billing")),
        ("specialist.billing", specialist("auto_respond", "We will refund the duplicate charge.", &["kb_001"])),
    ]);

    let (ok, out, err) = s.cli(&["triage", "--customer", "CUST-001", "--subject", "Double charge", text]).await;
    assert!(ok, "triage failed: {err}\n{out}");
    let id = ticket_id(&out);
    assert!(id.starts_with("TKT-"), "{out}");
    assert!(out.starts_with(&format!("ticket: {id} (new)\n")), "{out}");
    for node in ["translator", "supervisor", "billing_specialist"] {
        assert!(out.contains(&format!("{node} ▸ started")), "node {node} streams: {out}");
    }
    assert!(out.contains("tool ▸ customer_lookup("), "the tool call is shown: {out}");
    assert!(out.contains("tool ✓ customer_lookup →"), "and its result: {out}");
    assert!(out.contains("action:   auto_respond"), "{out}");
    assert!(out.contains("urgency:  high"), "{out}");
    assert!(out.contains("type:     billing"), "{out}");
    assert!(out.contains("status:   resolved"), "{out}");
    assert!(out.contains("suggested response:\n  We will refund the duplicate charge."), "{out}");
    assert!(!out.contains("(English)"), "an English reply is not repeated: {out}");
    assert!(out.contains("relevant articles:\n  kb_001"), "{out}");
    // The result block comes after every event.
    assert!(out.find("billing_specialist ▸ started").unwrap() < out.find("action:").unwrap(), "{out}");

    let (ok, out, err) = s.cli(&["tickets", "--customer", "CUST-001"]).await;
    assert!(ok, "{err}");
    let row = out.lines().find(|l| l.starts_with(&id)).unwrap_or_else(|| panic!("the ticket is listed: {out}"));
    for column in ["resolved", "billing", "high", "auto_respond", "Double charge"] {
        assert!(row.contains(column), "{column} in {row}");
    }
    let (ok, out, _) = s.cli(&["tickets", "--customer", "CUST-001", "--status", "escalated"]).await;
    assert!(ok && out.contains("no tickets") && !out.contains(&id), "{out}");
    let (ok, out, _) = s.cli(&["tickets", "--customer", "CUST-001", "--active"]).await;
    assert!(ok && out.contains("no tickets"), "a resolved ticket is not active: {out}");

    let (ok, out, err) = s.cli(&["ticket", "show", "--customer", "CUST-001", &id]).await;
    assert!(ok, "{err}");
    assert!(out.contains(&format!("ticket:   {id}")), "{out}");
    assert!(out.contains("status:   resolved"), "{out}");
    assert!(out.contains("messages (2):"), "{out}");
    assert!(out.contains(&format!("customer: {text}")), "{out}");
    assert!(out.contains("support: We will refund the duplicate charge."), "{out}");

    // Tickets are only visible to their own customer.
    let (ok, _, err) = s.cli(&["ticket", "show", "--customer", "CUST-002", &id]).await;
    assert!(!ok && err.contains("NOT_FOUND"), "{err}");

    let calls = s.model.requests().len();
    let (ok, out, err) = s.cli(&["triage", "--customer", "CUST-999", "hello"]).await;
    assert!(!ok, "an unknown customer fails: {out}");
    assert!(err.contains("error: NOT_FOUND"), "{err}");
    assert_eq!(s.model.requests().len(), calls, "no model call for an unknown customer");

    let (ok, _, err) = s.cli(&["triage", "--customer", "CUST-001", "  "]).await;
    assert!(!ok && err.contains("INVALID_ARGUMENT"), "{err}");
    s.server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_follow_up_continues_an_active_ticket() {
    let s = Server::start().await;
    let first = "The API returns a timeout error on every export";
    s.script(&[
        ("translator.translate", english()),
        ("supervisor.classify", decision("medium", "technical")),
        ("specialist.technical", specialist("route_specialist", "An engineer will look into it.", &[])),
    ]);
    let (ok, out, err) = s.cli(&["triage", "--customer", "CUST-003", "--quiet-events", first]).await;
    assert!(ok, "{err}\n{out}");
    let id = ticket_id(&out);
    assert!(!out.contains("▸ started"), "--quiet-events hides node events: {out}");
    assert!(out.contains("action:   route_specialist") && out.contains("status:   active"), "{out}");

    let (ok, out, _) = s.cli(&["tickets", "--customer", "CUST-003", "--active"]).await;
    assert!(ok, "{out}");
    let row = out.lines().find(|l| l.starts_with(&id)).unwrap_or_else(|| panic!("the ticket is active: {out}"));
    assert!(row.contains("active") && row.contains("technical"), "{row}");

    let follow_up = "Still timing out after the update, any news?";
    s.script(&[
        (
            "ticket_matcher.match",
            json!({"reasoning": "same export timeout", "matched_ticket_id": id, "confidence": "high"}),
        ),
        ("translator.translate", english()),
        ("supervisor.classify", decision("medium", "technical")),
        ("specialist.technical", specialist("auto_respond", "Please update to version 2.1.", &[])),
    ]);
    let (ok, out, err) = s.cli(&["triage", "--customer", "CUST-003", follow_up]).await;
    assert!(ok, "{err}\n{out}");
    // The matching run streams first, then the resolution, then the ticket's run.
    let matching = out.find("run started: workflow triage_match").expect("the matching run is shown");
    let resolved = out.find(&format!("\nticket: {id} (continues existing, confidence high)\n")).expect("resolution");
    let ticket_run = out.find("run started: workflow triage thread").expect("the ticket's run is shown");
    assert!(matching < resolved && resolved < ticket_run, "{out}");
    assert!(out.contains("matcher: same export timeout"), "{out}");
    assert!(out.contains("status:   resolved"), "{out}");

    let (ok, out, _) = s.cli(&["ticket", "show", "--customer", "CUST-003", &id]).await;
    assert!(ok && out.contains("messages (3):"), "{out}");
    assert!(out.contains(follow_up), "{out}");
    s.server.shutdown().await.unwrap();
}
