//! Prompts of the intake agents. They name their decisions with descriptive labels and keep
//! free text short, which helps small local models and costs large ones nothing.

use std::fmt::Write as _;

use super::{
    config::{FieldConfig, IntakeConfig},
    IntakeState, Mode,
};
use crate::{Message, Role};

pub const SUPERVISOR: &str = "You are the supervisor of a change-request intake assistant. \
Decide which agent handles the user's latest message.\n\
- chat_agent: greetings, general questions, anything off-topic, and questions asked while a request is in progress or under review.\n\
- elicitation_agent: the user wants to raise, start or submit a change or demand request, or is providing details for the request in progress (in ELICITATION mode, answers to the assistant's questions go here).\n\
- review_agent: only in REVIEW mode, when the user responds to the review: confirming, asking to change a field, abandoning, or asking about the pending request.\n\
In CHAT mode default to chat_agent unless the user explicitly wants to raise a request.";

/// Worked examples for the supervisor, sent as earlier question-and-answer turns in the
/// exact format of the real question: (mode, previous assistant message, user message, agent).
/// Small base models copy the pattern of such turns far better than they follow rules.
pub const SUPERVISOR_EXAMPLES: &[(&str, &str, &str, &str)] = &[
    ("CHAT", "Hi! How can I help?", "good morning!", "chat_agent"),
    ("CHAT", "Hi! How can I help?", "I'd like to log a change for the firewall rules", "elicitation_agent"),
    ("ELICITATION", "Which system is affected?", "the payroll service", "elicitation_agent"),
    ("ELICITATION", "When should it happen?", "is the canteen open on Sundays?", "chat_agent"),
    ("REVIEW", "Here is your request. Submit it?", "all correct, send it", "review_agent"),
    ("REVIEW", "Here is your request. Submit it?", "please make the urgency medium", "review_agent"),
];

/// The supervisor's question about the newest user message.
pub fn supervisor_question(mode: &str, recent: &str) -> String {
    format!("Current mode: {mode}\nRecent messages:\n{recent}\nWhich agent handles the latest user message?")
}

pub const CHAT_CHAT: &str =
    "You are the Front Door assistant of the change team. Answer the user helpfully and briefly. \
If the user describes a problem that needs a change to a system, suggest raising a change request with you; \
do not suggest one for casual or unrelated questions.";

pub const CHAT_ELICITATION: &str = "You are the Front Door assistant. The user has a change request in progress but asked \
something else. Answer briefly, then gently remind them: \"You have a request in progress; let's continue when you're ready.\"";

pub const CHAT_REVIEW: &str = "You are the Front Door assistant. The user's change request is ready for review but they asked \
something else. Answer briefly, then gently remind them: \"You have a request ready for review: reply 'yes' to submit it or tell me what to change.\"";

pub const FOCUS: &str =
    "Focus on the user's latest message: extract only what it states. Earlier messages were already processed.";

/// The elicitation agent's question: where the request stands ([`request_status`]; the worked
/// examples leave it out), the conversation as a transcript, then what to do with it. Everything
/// that changes from turn to turn is here rather than in the system prompt, so the system prompt
/// and the worked examples are the same on every call and a model that caches a prompt's prefix
/// evaluates only this question again.
pub fn elicitation_question(status: &str, transcript: &str, focus: bool) -> String {
    let ask = if focus { FOCUS } else { "Extract the details the user's messages state." };
    if status.is_empty() {
        format!("Conversation:\n{transcript}\n{ask}")
    } else {
        format!("{status}\nConversation:\n{transcript}\n{ask}")
    }
}

/// Worked examples for the elicitation agent as (question, answer) turns, built from the
/// configured fields' `example` values so they always use this configuration's field names:
/// an abandoned request, one field stated as "label: value" with another marked unknown, and two
/// fields stated in a sentence, last because it is the most common kind of turn. Fields without
/// an example, and inferred fields, are left out.
pub fn elicitation_examples(config: &IntakeConfig) -> Vec<(String, serde_json::Value)> {
    let asked: Vec<(&str, &str, &str)> = config
        .fields
        .iter()
        .filter(|f| !f.infer)
        .filter_map(|f| f.example.as_deref().map(|example| (f.name.as_str(), f.label.as_str(), example)))
        .collect();
    // Start a little into the list: the first fields are usually long free text, which makes
    // for long examples.
    let picked: Vec<_> = asked.iter().cycle().skip(2.min(asked.len())).take(asked.len()).copied().collect();
    let answer = |stated: &[(&str, &str)], unknown: &[&str], abandon: bool, reasoning: &str, followup: &str| {
        let stated: Vec<serde_json::Value> =
            stated.iter().map(|(field, value)| serde_json::json!({"field": field, "value": value})).collect();
        serde_json::json!({
            "reasoning": reasoning,
            "stated": stated,
            "marked_unknown": unknown,
            "user_wants_to_abandon": abandon,
            "followup_response": followup,
        })
    };
    let ask_next = |i: usize| match picked.get(i) {
        Some((_, label, _)) => format!("Thanks, noted. What is the {}?", label.to_lowercase()),
        None => "Thanks, noted.".to_owned(),
    };
    let opening = "assistant: Sure. Tell me about the change you need.\n";
    // The examples' questions carry no request status: with one (every field remaining) the
    // embedded model filed values under the fields the examples' answers name, whatever the
    // user's message said (the accuracy set's "no unstated field recorded" fell from 12 of 12
    // to 8 of 12).
    let example_question = |transcript: &str| elicitation_question("", transcript, false);
    // Most turns state details rather than abandon or mark a field unknown, and a small model
    // leans on the last example it saw.
    let mut examples = vec![(
        example_question(&format!("{opening}user: Stop, I don't want to file this any more.\n")),
        answer(&[], &[], true, "The user wants to stop.", "OK, I've dropped that request."),
    )];
    if let [_, _, (c, c_label, c_value), (d, d_label, _), ..] = picked[..] {
        let said = format!("{c_label}: {c_value}. {d_label}: I don't know yet.");
        examples.push((
            example_question(&format!("{opening}user: {said}\n")),
            answer(
                &[(c, c_value)],
                &[d],
                false,
                &format!(
                    "The user stated the {} and does not know the {}.",
                    c_label.to_lowercase(),
                    d_label.to_lowercase()
                ),
                &ask_next(4),
            ),
        ));
    }
    if let [(a, a_label, a_value), (b, b_label, b_value), ..] = picked[..] {
        let said =
            format!("The {} is {a_value} and the {} is {b_value}.", a_label.to_lowercase(), b_label.to_lowercase());
        examples.push((
            example_question(&format!("{opening}user: {said}\n")),
            answer(
                &[(a, a_value), (b, b_value)],
                &[],
                false,
                &format!("The user stated the {} and the {}.", a_label.to_lowercase(), b_label.to_lowercase()),
                &ask_next(2),
            ),
        ));
    }
    examples
}

pub const TEAM_MATCHING: &str =
    "You route change requests to the team that owns them. Pick the team whose description best \
matches the request. If none fits, answer with team_id null.";

pub const NO_MATCH: &str =
    "You are the Front Door assistant. No team could be matched to the user's request. Play back the \
details collected so far in a short list, explain that you could not tell which team owns it, and ask for more detail \
or a different angle (which system, which business area).";

pub const REVIEW: &str = "The user is reviewing a change request before it is submitted. Classify their reply:\n\
- confirm: they approve and want it submitted (yes, looks good, submit).\n\
- modify: they want to change or add a detail.\n\
- abandon: they want to cancel or drop the request.\n\
- clarify: they ask a question about the request or the process.\n\
Write response_to_user as the assistant's short reply (for modify ask what to change; for clarify answer the question).";

/// "{role}: {text}" lines, as the supervisor reads recent context.
pub fn transcript(messages: &[Message]) -> String {
    let mut out = String::new();
    for m in messages {
        let role = match m.role {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::System => "system",
        };
        let _ = writeln!(out, "{role}: {}", m.text);
    }
    out
}

pub fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Chat => "CHAT",
        Mode::Elicitation => "ELICITATION",
        Mode::TeamMatching => "TEAM_MATCHING",
        Mode::Review => "REVIEW",
    }
}

/// Collected fields as "- Label: value" lines, in configured order.
pub fn collected_summary(config: &IntakeConfig, state: &IntakeState) -> String {
    let mut out = String::new();
    for field in &config.fields {
        if let Some(value) = state.collected_fields.get(&field.name) {
            let _ = writeln!(out, "- {}: {value}", field.label);
        } else if state.fields_marked_unknown.contains(&field.name) {
            let _ = writeln!(out, "- {}: Unknown", field.label);
        }
    }
    out
}

/// The elicitation agent's system prompt: instructions and the configured fields, the same on
/// every call of one configuration.
pub fn elicitation(config: &IntakeConfig) -> String {
    let mut out = String::from(
        "You collect the details of a change request from the user. Only record what the user explicitly stated \
(95% confidence); never infer or interpret vague statements. If the user says they do not know a field, list it in \
marked_unknown. Write followup_response as a short, friendly reply that asks for the next missing details. Set \
user_wants_to_abandon to true only if the user wants to stop (\"cancel\", \"never mind\", \"forget it\").\n",
    );
    for field in config.fields.iter().filter(|f| f.infer) {
        let _ = writeln!(
            out,
            "Do not ask for {}: infer it yourself once you know enough about the request and include it in stated.",
            field.name
        );
    }
    let _ = writeln!(out, "\nFields (name: meaning):");
    for field in &config.fields {
        let _ = writeln!(out, "- {}: {}", field.name, field.description);
    }
    out
}

/// Where the request stands, as the elicitation question opens. The "Remaining fields:" line
/// lists field names, comma-separated, in configured order.
pub fn request_status(config: &IntakeConfig, state: &IntakeState, remaining: &[&str]) -> String {
    let total = config.fields.iter().filter(|f| f.required).count().max(1);
    let done = total.saturating_sub(remaining.len());
    let mut out = String::new();
    let _ = writeln!(out, "Remaining fields: {}", remaining.join(", "));
    let _ = writeln!(out, "Completion: {}%", done * 100 / total);
    let collected = collected_summary(config, state);
    if !collected.is_empty() {
        let _ = write!(out, "Collected so far:\n{collected}");
    }
    if state.revising {
        out.push_str(
            "The user is changing a request they have already reviewed: record the new value of every field their \
latest message changes.\n",
        );
    }
    out
}

/// The system prompt of the call that fills inferred fields from the collected details.
pub fn infer(fields: &[&FieldConfig]) -> String {
    let mut out = String::from(
        "You complete a change request. From the request details the user gave, write the following fields, \
each as a short value in plain words:\n",
    );
    for field in fields {
        let _ = writeln!(out, "- {}: {}", field.name, field.description);
    }
    out
}

pub fn team_catalogue(config: &IntakeConfig) -> String {
    let mut out = String::from("Teams (team_id: description):\n");
    for team in &config.teams {
        let _ = writeln!(out, "- {}: {} ({})", team.id, team.description, team.name);
    }
    out
}

/// The deterministic review message: no model involved, user-friendly labels.
pub fn review_message(config: &IntakeConfig, state: &IntakeState, team_name: &str) -> String {
    let mut out = String::from("Please review your request:\n");
    for field in &config.fields {
        let value = match state.collected_fields.get(&field.name) {
            Some(value) => value.as_str(),
            None => "Unknown",
        };
        let _ = writeln!(out, "- {}: {value}", field.label);
    }
    let _ = write!(
        out,
        "Assigned team: {team_name}.\nAre you happy with this? Reply 'yes' to submit it, tell me what to change, or say 'cancel' to drop it."
    );
    out
}
