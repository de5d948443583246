//! W2's stand-in for a model: a **SCRIPTED model** (a test double, not an LLM) answering every
//! triage prompt by W2's node rules (bench/WORKLOADS.md), reading only what a real model would read:
//! the request's purpose and prompt text (customer JSON, `Urgency:` line, subject, numbered
//! English messages, the knowledge-base articles listed).
//!
//! The specialist rule scores W2's `kb_search` (term-substring count over all 50 W2 articles)
//! itself, from the ticket text in the prompt: the product's knowledge base ranks with tantivy
//! BM25 within the category, which is a different ranking, so W2's decision (top score >= 2)
//! cannot be read off the articles the node lists. Which articles contain a term is computed
//! once per distinct term and kept, so the stand-in's own cost stays small next to the workflow
//! it stands in for (the result is exactly `kb_search`'s, checked by a test over all tickets).

use std::{
    collections::HashMap,
    sync::{Arc, RwLock},
};

use frontdesk_llm::{ChatRequest, LlmError, ScriptedModel};
use serde::Serialize;
use serde_json::json;

use crate::w2_workload::{classify, kb_terms, translate, W2Article, URGENCIES};

/// What the rules need to know of W2's articles (ids, titles, lower-cased text).
pub struct W2Rules {
    ids: Vec<String>,
    titles: Vec<String>,
    haystacks: Vec<String>,
    /// Per `kb_search` term, the articles whose text contains it (bit `i` = article `i`).
    term_articles: RwLock<HashMap<String, u64>>,
}

#[derive(Serialize)]
struct SupervisorReply<'a> {
    reasoning: String,
    urgency: &'a str,
    ticket_type: &'a str,
    requires_escalation: bool,
}

#[derive(Serialize)]
struct SpecialistReply<'a> {
    reasoning: String,
    recommended_action: &'a str,
    suggested_response: String,
    relevant_articles: Vec<&'a str>,
    extracted_info: ExtractedInfo<'a>,
}

#[derive(Serialize)]
struct ExtractedInfo<'a> {
    product_area: &'a str,
    issue_type: &'a str,
    sentiment: &'a str,
}

fn to_json(reply: &impl Serialize) -> String {
    serde_json::to_string(reply).expect("a reply of strings and booleans always serializes")
}

impl W2Rules {
    pub fn new(articles: &[W2Article]) -> Self {
        assert!(articles.len() <= 64, "W2 has 50 articles; the term masks hold 64");
        Self {
            ids: articles.iter().map(|a| a.article_id.clone()).collect(),
            titles: articles.iter().map(|a| a.title.clone()).collect(),
            haystacks: articles.iter().map(|a| format!("{} {}", a.title, a.body).to_lowercase()).collect(),
            term_articles: RwLock::default(),
        }
    }

    fn articles_containing(&self, term: &str) -> u64 {
        if let Some(&mask) = self.term_articles.read().unwrap_or_else(|e| e.into_inner()).get(term) {
            return mask;
        }
        let mask = self.haystacks.iter().enumerate().filter(|(_, h)| h.contains(term)).fold(0, |m, (i, _)| m | 1 << i);
        self.term_articles.write().unwrap_or_else(|e| e.into_inner()).insert(term.to_owned(), mask);
        mask
    }

    /// W2's top `kb_search` hit for `query`: (article index, score), ties to the lower index.
    fn top_article(&self, query: &str) -> Option<(usize, usize)> {
        let masks: Vec<u64> = kb_terms(query).iter().map(|t| self.articles_containing(t)).collect();
        // `max_by_key` keeps the last maximum; scanning from the end leaves the first one.
        (0..self.haystacks.len())
            .rev()
            .map(|i| (i, masks.iter().filter(|m| *m & (1 << i) != 0).count()))
            .max_by_key(|&(_, score)| score)
    }

    /// The SCRIPTED model's answer to one triage request.
    pub fn reply(&self, request: &ChatRequest) -> Result<String, LlmError> {
        let system = request.messages.first().map_or("", |m| m.content.as_str());
        // The question is the last message (the supervisor's worked examples come before it).
        let user = request.messages.last().map_or("", |m| m.content.as_str());
        let purpose = request.purpose.as_str();
        let reply = match purpose {
            "translator.translate" => {
                // "Customer messages:\n1. {text}\n..."; W2's language is the `[xx] ` prefix.
                let messages = numbered_lines(user.strip_prefix("Customer messages:\n").unwrap_or(user));
                let language = messages.last().map_or("en", |m| translate(m).0);
                json!({"original_language": language, "is_english": language == "en"}).to_string()
            }
            "translator.translate_message" => translate(user).1.to_owned(),
            "translator.translate_back" => {
                let language = system.lines().find_map(|l| l.strip_prefix("Customer's language: ")).unwrap_or("en");
                format!("[{language}] {user}")
            }
            "supervisor.classify" => {
                let ticket = Ticket::parse(user)?;
                let (ticket_type, level) = classify(&ticket.text(), ticket.plan == "enterprise");
                let escalate = level == 3 || ticket.status == "suspended";
                to_json(&SupervisorReply {
                    reasoning: format!("W2 rules: {ticket_type}, urgency level {level}, account {}", ticket.status),
                    urgency: URGENCIES[level],
                    ticket_type,
                    requires_escalation: escalate,
                })
            }
            _ if purpose.starts_with("specialist.") => {
                let category = &purpose["specialist.".len()..];
                let ticket = Ticket::parse(user)?;
                let urgency = user.lines().find_map(|l| l.strip_prefix("Urgency: ")).unwrap_or("unknown");
                let (top, score) = self.top_article(&ticket.text()).ok_or_else(|| invalid(purpose, "no articles"))?;
                let (id, title) = (&self.ids[top], &self.titles[top]);
                let auto = score >= 2 && matches!(urgency, "low" | "medium") && ticket.status == "active";
                let (action, text) = if auto {
                    ("auto_respond", format!("Send KB article {id} '{title}' to {}", ticket.name))
                } else {
                    (
                        "route_specialist",
                        format!("Assign to {category} specialist queue (urgency {urgency}); suggested reading {id}"),
                    )
                };
                // Cite W2's top article only if the node listed it (the node drops unknown ids).
                let listed = user.lines().any(|l| l.strip_prefix("- ").is_some_and(|r| r.starts_with(id.as_str())));
                let relevant: Vec<&str> = if listed { vec![id.as_str()] } else { Vec::new() };
                to_json(&SpecialistReply {
                    reasoning: format!(
                        "W2 rules: top {id} score {score}, urgency {urgency}, account {}",
                        ticket.status
                    ),
                    recommended_action: action,
                    suggested_response: text,
                    relevant_articles: relevant,
                    extracted_info: ExtractedInfo { product_area: category, issue_type: action, sentiment: urgency },
                })
            }
            other => return Err(LlmError::ScriptExhausted { purpose: other.to_owned() }),
        };
        Ok(reply)
    }
}

fn invalid(purpose: &str, what: &str) -> LlmError {
    LlmError::ScriptExhausted { purpose: format!("{purpose} ({what})") }
}

/// `"1. a\n2. b\n"` → `["a", "b"]` (stops at the first line that is not numbered).
fn numbered_lines(text: &str) -> Vec<&str> {
    text.lines()
        .map_while(|l| l.split_once(". ").filter(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())))
        .map(|(_, m)| m)
        .collect()
}

/// What the supervisor and specialist prompts show of a ticket.
struct Ticket<'a> {
    name: String,
    plan: String,
    status: String,
    subject: &'a str,
    english: Vec<&'a str>,
}

impl<'a> Ticket<'a> {
    fn parse(prompt: &'a str) -> Result<Self, LlmError> {
        let customer = prompt.lines().find_map(|l| l.strip_prefix("Customer: ")).unwrap_or("{}");
        let customer: serde_json::Value =
            serde_json::from_str(customer).map_err(|_| invalid("prompt", "customer JSON"))?;
        let field = |k: &str| customer[k].as_str().unwrap_or_default().to_owned();
        let subject = prompt.lines().find_map(|l| l.strip_prefix("Subject: ")).unwrap_or("");
        let english = prompt.split_once("Ticket (English):\n").map_or_else(Vec::new, |(_, rest)| numbered_lines(rest));
        Ok(Self { name: field("name"), plan: field("plan"), status: field("account_status"), subject, english })
    }

    /// `subject + " " + english_body`.
    fn text(&self) -> String {
        format!("{} {}", self.subject, self.english.join(" "))
    }
}

/// The rules-following SCRIPTED model (`ScriptedModel::from_fn`), used for every row. Without
/// its request log: a copy of each of a run's ~30,000 prompts is test-assertion bookkeeping, not
/// work the workflow does.
pub fn scripted_w2_model(rules: Arc<W2Rules>) -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::from_fn("scripted-w2-rules", move |r| rules.reply(r)).without_request_log())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::w2_workload::{self, kb_search};

    #[test]
    fn top_article_is_kb_searchs_first_hit_for_every_ticket() {
        let (w2, _) = w2_workload::verified(10_000).unwrap();
        let rules = W2Rules::new(&w2.articles);
        for t in &w2.tickets {
            let text = format!("{} {}", t.subject, translate(&t.body).1);
            assert_eq!(
                rules.top_article(&text),
                kb_search(&rules.haystacks, &text).first().copied(),
                "{}",
                t.ticket_id
            );
        }
        assert_eq!(rules.top_article("to be or not"), kb_search(&rules.haystacks, "to be or not").first().copied());
    }
}
