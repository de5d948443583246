//! The bench's stand-ins for the outside world:
//!
//! * a **SCRIPTED model** (a test double, not an LLM): [`w1_reply`] answers every intake prompt by
//!   W1's node rules, reading only what a real model would read (the request's purpose and text);
//! * the bench [`IntakeConfig`]: W1's 9 fields (all required, none inferred) and 3 teams;
//! * an in-memory [`CountingSubmitter`]: submissions are counted, nothing is filed anywhere
//!   (the LangGraph workload submits nothing either).

use std::sync::{
    atomic::{AtomicU64, Ordering},
    Arc,
};

use async_trait::async_trait;
use frontdesk_llm::{ChatRequest, LlmError, ScriptedModel};
use frontdesk_workflows::intake::{IntakeConfig, Receipt, Submission, SubmitError, Submitter};
use serde_json::json;

use crate::workload::{system_team, tokens, FIELDS};

/// W1's fields and teams for the real intake workflow. Labels are what the prompts show.
pub const BENCH_INTAKE_TOML: &str = r#"
welcome = "Hi, I'm the change intake assistant (benchmark configuration)."

[[fields]]
name = "title"
label = "Title"
description = "A short title summarising the change"

[[fields]]
name = "description"
label = "Description"
description = "What needs to change and why"

[[fields]]
name = "justification"
label = "Justification"
description = "The business reason for the change"

[[fields]]
name = "affected_system"
label = "Affected system"
description = "The system that will change"

[[fields]]
name = "environment"
label = "Environment"
description = "production, staging or dr-site"

[[fields]]
name = "urgency"
label = "Urgency"
description = "low, medium or high"

[[fields]]
name = "requested_by"
label = "Requested by"
description = "Who asks for the change"

[[fields]]
name = "desired_date"
label = "Desired date"
description = "When the change should happen"

[[fields]]
name = "rollback_plan"
label = "Rollback plan"
description = "How to undo the change"

[[teams]]
id = "team-dba"
name = "Database Platform"
description = "Databases and the analytics warehouse: billing-db, orders-db, analytics-warehouse"

[[teams]]
id = "team-net"
name = "Network Engineering"
description = "Load balancers, VPN and DNS: edge-load-balancer, corp-vpn, dns-resolvers"

[[teams]]
id = "team-app"
name = "Application Platform"
description = "Application services: checkout-service, search-api, mobile-backend"
"#;

/// The label the team-matching prompt gives `affected_system` (see [`BENCH_INTAKE_TOML`]).
const AFFECTED_SYSTEM_LINE: &str = "- Affected system: ";

pub fn bench_intake_config() -> IntakeConfig {
    IntakeConfig::parse(BENCH_INTAKE_TOML, "bench/w1-intake.toml").expect("the bench intake config is valid")
}

const CHAT_HELLO: &str = "Hello! I am the change intake assistant. Tell me if you want to raise a change request.";
const CHAT_REVIEW: &str = "I can only help with change requests, sorry. Your request is still waiting for review: \
reply 'yes' to submit it or 'change <field>' to edit a field.";
const CHAT_ELICITATION: &str = "You have a request in progress; let's continue when you're ready.";

fn mode_of(prompt: &str) -> &str {
    prompt.lines().find_map(|l| l.strip_prefix("Current mode: ")).unwrap_or("CHAT")
}

/// The SCRIPTED model's answer to one request, following W1's node rules. Structured purposes
/// get JSON matching the node's output type; text purposes get W1's fixed sentences.
pub fn w1_reply(request: &ChatRequest) -> Result<String, LlmError> {
    let user_text = |i: usize| request.messages.get(i).map_or("", |m| m.content.as_str());
    let reply = match request.purpose.as_str() {
        "supervisor.route" => {
            // "Current mode: X\nRecent messages:\n{role}: {text}\n...\nWhich agent ..."; the
            // newest message is the user's turn.
            // The question is the last message (worked examples come before it).
            let prompt = request.messages.last().map_or("", |m| m.content.as_str());
            let mode = mode_of(prompt);
            let latest = prompt.lines().rev().find_map(|l| l.strip_prefix("user: ")).unwrap_or("");
            let t = tokens(latest);
            let has = |w: &str| t.iter().any(|x| x == w);
            let route = match mode {
                "REVIEW" if has("yes") || t.first().is_some_and(|x| x == "change") => "review_agent",
                "REVIEW" => "chat_agent",
                "ELICITATION" => "elicitation_agent",
                _ if has("submit") || has("request") => "elicitation_agent",
                _ => "chat_agent",
            };
            json!({"reasoning": format!("W1 rule: mode {mode}"), "route": route}).to_string()
        }
        "chat.chat" => CHAT_HELLO.to_owned(),
        "chat.review" => CHAT_REVIEW.to_owned(),
        "chat.elicitation" => CHAT_ELICITATION.to_owned(),
        "elicitation.extract" => {
            // The question is the last message (worked examples come before it): where the
            // request stands, then the conversation as "{role}: {text}" lines; the newest user
            // line is the turn.
            let question = request.messages.last().map_or("", |m| m.content.as_str());
            let remaining: Vec<&str> = question
                .lines()
                .find_map(|l| l.strip_prefix("Remaining fields: "))
                .map(|r| r.split(", ").map(str::trim).filter(|f| !f.is_empty()).collect())
                .unwrap_or_default();
            let latest = question.lines().rev().find_map(|l| l.strip_prefix("user: ")).unwrap_or("");
            let mut stated: Vec<serde_json::Value> = Vec::new();
            let mut unknown: Vec<String> = Vec::new();
            let mut mentioned: Vec<String> = Vec::new();
            for part in latest.split(';') {
                let Some((left, right)) = part.split_once(':') else { continue };
                let key = left.trim().to_lowercase();
                let value = right.trim();
                if !FIELDS.contains(&key.as_str()) {
                    continue;
                }
                if value.to_lowercase() == "unknown" {
                    if !unknown.contains(&key) {
                        unknown.push(key.clone());
                    }
                } else {
                    unknown.retain(|k| *k != key);
                    stated.retain(|s| s["field"] != key.as_str());
                    stated.push(json!({"field": key, "value": value}));
                }
                mentioned.push(key);
            }
            let missing: Vec<&str> = remaining.into_iter().filter(|f| !mentioned.iter().any(|m| m == f)).collect();
            let followup = if missing.is_empty() {
                String::new()
            } else {
                format!("Thanks. To file the change request I still need: {}.", missing.join(", "))
            };
            json!({
                "stated": stated,
                "marked_unknown": unknown,
                "reasoning": "W1 rule: key: value pairs split on ';'",
                "followup_response": followup,
                "user_wants_to_abandon": false,
            })
            .to_string()
        }
        "team_matching.match" => {
            let system = user_text(1).lines().find_map(|l| l.strip_prefix(AFFECTED_SYSTEM_LINE)).unwrap_or("").trim();
            json!({"reasoning": "W1 rule: SYSTEM_TEAM map", "team_id": system_team(system), "confidence": "high"})
                .to_string()
        }
        "review.classify" => {
            let prompt = user_text(1);
            let reply = prompt.rsplit_once("User's reply: ").map_or("", |(_, r)| r);
            let second = reply.split_whitespace().nth(1).map(str::to_lowercase);
            if tokens(reply).iter().any(|t| t == "yes") {
                json!({"action_type": "confirm", "reasoning": "W1 rule: yes", "response_to_user": "Submitting."})
            } else if let Some(field) = second.filter(|f| FIELDS.contains(&f.as_str())) {
                json!({
                    "action_type": "modify",
                    "reasoning": "W1 rule: change <field>",
                    "response_to_user": format!("OK, please provide a new value for {field}."),
                })
            } else {
                json!({
                    "action_type": "clarify",
                    "reasoning": "W1 rule: no field named",
                    "response_to_user": format!("Which field would you like to change? {}", FIELDS.join(", ")),
                })
            }
            .to_string()
        }
        other => return Err(LlmError::ScriptExhausted { purpose: other.to_owned() }),
    };
    Ok(reply)
}

/// The rules-following SCRIPTED model (`ScriptedModel::from_fn`), used for every timed row. It
/// keeps no copy of the requests, as a served scripted model keeps none: the timed rows never read
/// them, and the copies (two prompts of several KB a turn, behind one mutex) are the test double's
/// cost, not the engine's.
pub fn scripted_w1_model() -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::from_fn("scripted-w1-rules", w1_reply).without_request_log())
}

/// [`scripted_w1_model`] keeping every request, for the untimed pass that counts prompt sizes.
pub fn logging_w1_model() -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::from_fn("scripted-w1-rules", w1_reply))
}

/// Counts confirmed requests in memory; files nothing.
#[derive(Default)]
pub struct CountingSubmitter {
    pub submitted: AtomicU64,
}

#[async_trait]
impl Submitter for CountingSubmitter {
    async fn submit(&self, submission: &Submission) -> Result<Receipt, SubmitError> {
        self.submitted.fetch_add(1, Ordering::Relaxed);
        Ok(Receipt {
            id: submission.id.clone(),
            url: format!("https://changes.example.invalid/{}/{}", submission.team_id, submission.thread_id),
        })
    }
}

#[cfg(test)]
mod tests {
    use frontdesk_llm::ChatMessage;

    use super::*;

    fn req(purpose: &str, messages: Vec<ChatMessage>) -> ChatRequest {
        ChatRequest::new(purpose, messages)
    }

    #[test]
    fn supervisor_rules() {
        let route = |mode: &str, text: &str| {
            let prompt = format!("Current mode: {mode}\nRecent messages:\nassistant: hi\nuser: {text}\nWhich agent handles the latest user message?");
            let r =
                w1_reply(&req("supervisor.route", vec![ChatMessage::system("s"), ChatMessage::user(prompt)])).unwrap();
            serde_json::from_str::<serde_json::Value>(&r).unwrap()["route"].as_str().unwrap().to_owned()
        };
        assert_eq!(route("CHAT", "hello"), "chat_agent");
        assert_eq!(route("CHAT", "I want to raise a change request"), "elicitation_agent");
        assert_eq!(route("ELICITATION", "hello"), "elicitation_agent");
        assert_eq!(route("REVIEW", "who won the football match last night?"), "chat_agent");
        assert_eq!(route("REVIEW", "yes please submit"), "review_agent");
        assert_eq!(route("REVIEW", "change urgency"), "review_agent");
    }

    #[test]
    fn extraction_rules() {
        let r = w1_reply(&req(
            "elicitation.extract",
            vec![
                ChatMessage::system("intro"),
                ChatMessage::user(
                    "Remaining fields: requested_by, desired_date, rollback_plan\nCompletion: 66%\n\
                     Conversation:\nassistant: Who is requesting it?\n\
                     user: requested_by: bob.okafor; desired_date: 2025-01-02; rollback_plan: unknown\n\nFocus on it.",
                ),
            ],
        ))
        .unwrap();
        let v: serde_json::Value = serde_json::from_str(&r).unwrap();
        assert_eq!(
            v["stated"],
            json!([{"field": "requested_by", "value": "bob.okafor"}, {"field": "desired_date", "value": "2025-01-02"}])
        );
        assert_eq!(v["marked_unknown"], json!(["rollback_plan"]));
        assert_eq!(v["followup_response"], "");
    }
}
