//! The intake agents. Each reads the state, makes the model calls docs/workflows/intake.md gives
//! it, and returns an update; none mutates state or talks to the transport.

use async_trait::async_trait;
use frontdesk_llm::{ChatMessage, ChatRequest, LlmError, OutputSchema};
use frontdesk_runtime::{Log, Node, NodeContext, NodeError, NodeOutput};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use tracing::{debug, info, warn};

use super::{
    config::{FieldConfig, IntakeConfig},
    missing_fields, prompts, submittable, IntakeDeps, IntakeState, IntakeUpdate, Mode, ReviewedRequest, Route,
    Submission,
};
use crate::{llm_node, Message, Role};

type Output = Result<NodeOutput<IntakeUpdate>, NodeError>;

/// How many recent messages the supervisor reads.
const SUPERVISOR_CONTEXT: usize = 5;
/// How many recent messages the chat agent answers from.
const CHAT_CONTEXT: usize = 12;
const DEBUG_CLEAR: &str = "clear context";

fn last_user_text(state: &IntakeState) -> &str {
    state.messages.items.iter().rev().find(|m| m.role == Role::User).map_or("", |m| m.text.as_str())
}

fn history(messages: &[Message]) -> Vec<ChatMessage> {
    messages
        .iter()
        .map(|m| match m.role {
            Role::User => ChatMessage::user(&m.text),
            Role::Assistant => ChatMessage::assistant(&m.text),
            Role::System => ChatMessage::system(&m.text),
        })
        .collect()
}

fn tail(messages: &[Message], n: usize) -> &[Message] {
    &messages[messages.len().saturating_sub(n)..]
}

fn say(node: &str, text: impl Into<String>) -> Option<Log<Message>> {
    Some(Log::append(vec![Message::assistant(node, text)]))
}

// ---------------------------------------------------------------------------------------------
// supervisor

#[derive(Debug, Deserialize, JsonSchema)]
enum SupervisorRoute {
    /// General conversation, off-topic questions.
    #[serde(rename = "chat_agent")]
    Chat,
    /// Raising a request or giving its details.
    #[serde(rename = "elicitation_agent")]
    Elicitation,
    /// Responding to a request under review.
    #[serde(rename = "review_agent")]
    Review,
}

/// The supervisor's structured decision.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SupervisorDecision {
    /// One short sentence on why.
    #[schemars(length(max = 160))]
    reasoning: String,
    route: SupervisorRoute,
}

/// The system prompt, the worked examples as earlier turns, then the real question (always
/// the last message).
fn supervisor_messages(question: String) -> Vec<ChatMessage> {
    let mut messages = vec![ChatMessage::system(prompts::SUPERVISOR)];
    for (mode, assistant, user, route) in prompts::SUPERVISOR_EXAMPLES {
        let recent = format!("assistant: {assistant}\nuser: {user}\n");
        messages.push(ChatMessage::user(prompts::supervisor_question(mode, &recent)));
        let answer =
            serde_json::json!({"reasoning": format!("{mode} mode; the user wrote \"{user}\"."), "route": route});
        messages.push(ChatMessage::assistant(answer.to_string()));
    }
    messages.push(ChatMessage::user(question));
    messages
}

pub struct Supervisor(pub IntakeDeps);

#[async_trait]
impl Node<IntakeState> for Supervisor {
    fn description(&self) -> &str {
        "Routes the turn to chat, elicitation or review from the last five messages and the mode"
    }

    async fn run(&self, state: &IntakeState, ctx: &NodeContext) -> Output {
        let text = last_user_text(state);
        if self.0.debug_commands && text.trim().eq_ignore_ascii_case(DEBUG_CLEAR) {
            info!(thread_id = ctx.thread_id(), "debug command cleared the conversation");
            let mut update = IntakeUpdate::clear_all();
            update.messages = Some(Log::replace(vec![Message::assistant("supervisor", "Context has been cleared.")]));
            update.next = Some(Route::End);
            return Ok(NodeOutput::update(update));
        }

        // A bare "yes" to the review message is the commonest reply in REVIEW and the one a small
        // model misroutes most (to elicitation, which repeated the review); it needs no model.
        if state.mode == Mode::Review && state.identified_team.is_some() && is_affirmative(text) {
            debug!(
                thread_id = ctx.thread_id(),
                "affirmative reply to the review; routing to review without a model call"
            );
            return Ok(NodeOutput::update(IntakeUpdate {
                next: Some(Route::ReviewAgent),
                mode: Some(Mode::Review),
                ..Default::default()
            }));
        }

        let recent = prompts::transcript(tail(&state.messages.items, SUPERVISOR_CONTEXT));
        let request = ChatRequest {
            purpose: "supervisor.route".into(),
            messages: supervisor_messages(prompts::supervisor_question(prompts::mode_name(state.mode), &recent)),
            temperature: Some(0.0),
            max_tokens: Some(200),
            ..Default::default()
        };
        let decision: SupervisorDecision = llm_node::structured(ctx, &self.0.llm, request).await?;
        debug!(thread_id = ctx.thread_id(), route = ?decision.route, reasoning = %decision.reasoning, "supervisor decided");
        let under_review = state.mode == Mode::Review && state.identified_team.is_some();
        let (next, mode) = match decision.route {
            SupervisorRoute::Chat => (Route::ChatAgent, state.mode),
            // In REVIEW a change goes through the review agent, which classifies it as modify and
            // hands it to elicitation itself, dropping the team and the reviewed values: the
            // elicitation agent alone would leave them in place.
            SupervisorRoute::Elicitation if under_review => {
                debug!(thread_id = ctx.thread_id(), "supervisor chose elicitation in REVIEW; routing to review");
                (Route::ReviewAgent, Mode::Review)
            }
            SupervisorRoute::Elicitation => (Route::ElicitationAgent, Mode::Elicitation),
            SupervisorRoute::Review if under_review => (Route::ReviewAgent, Mode::Review),
            // Outside REVIEW there is nothing to confirm: a team matched earlier does not make a
            // request reviewed (after a modify, a confirm must not file the old values).
            SupervisorRoute::Review if state.mode == Mode::Elicitation => {
                warn!(
                    thread_id = ctx.thread_id(),
                    "supervisor chose review while a request is being elicited; routing to elicitation"
                );
                (Route::ElicitationAgent, Mode::Elicitation)
            }
            SupervisorRoute::Review => {
                warn!(thread_id = ctx.thread_id(), "supervisor chose review with nothing to review; routing to chat");
                (Route::ChatAgent, state.mode)
            }
        };
        Ok(NodeOutput::update(IntakeUpdate { next: Some(next), mode: Some(mode), ..Default::default() }))
    }
}

// ---------------------------------------------------------------------------------------------
// chat agent

pub struct ChatAgent(pub IntakeDeps);

#[async_trait]
impl Node<IntakeState> for ChatAgent {
    fn description(&self) -> &str {
        "Answers in the current mode's voice: general chat, or a reminder of the request in progress or under review"
    }

    async fn run(&self, state: &IntakeState, ctx: &NodeContext) -> Output {
        let (purpose, system) = match state.mode {
            Mode::Chat | Mode::TeamMatching => ("chat.chat", prompts::CHAT_CHAT),
            Mode::Elicitation => ("chat.elicitation", prompts::CHAT_ELICITATION),
            Mode::Review => ("chat.review", prompts::CHAT_REVIEW),
        };
        let mut messages = vec![ChatMessage::system(system)];
        messages.extend(history(tail(&state.messages.items, CHAT_CONTEXT)));
        let request = ChatRequest {
            purpose: purpose.into(),
            messages,
            temperature: Some(0.3),
            max_tokens: Some(400),
            ..Default::default()
        };
        let reply = llm_node::streamed_text(ctx, &self.0.llm, request).await?;
        Ok(NodeOutput::update(IntakeUpdate { messages: say("chat_agent", reply), ..Default::default() }))
    }
}

// ---------------------------------------------------------------------------------------------
// elicitation agent

/// The elicitation agent's structured call (FieldExtractionSchema in docs/workflows/intake.md).
///
/// The design's field-to-value map is asked for as a list of (field, value) pairs that holds only
/// the fields the message states: a small model copies a stated value next to its field name
/// far more reliably than it fills one slot per configured field, where it learns from the
/// examples to leave every slot null. The schema sent to the model is built from the
/// configuration ([`ElicitationAgent::new`]): `field` and `marked_unknown` only allow configured
/// names, so a model that decodes under the schema cannot invent field names.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct FieldExtraction {
    /// One short sentence on what the latest message states; written first, so the fields
    /// below follow from it.
    #[schemars(length(max = 160))]
    reasoning: String,
    /// The fields the user's latest message states, each with its value in the user's words.
    #[schemars(length(max = 12))]
    stated: Vec<StatedField>,
    /// Names of fields the user said they do not know.
    #[schemars(length(max = 12), inner(length(max = 40)))]
    marked_unknown: Vec<String>,
    /// True only if the user wants to stop the request.
    user_wants_to_abandon: bool,
    /// The assistant's reply, asking for the next missing details.
    #[schemars(length(max = 300))]
    followup_response: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct StatedField {
    /// The field's name.
    #[schemars(length(max = 40))]
    field: String,
    /// The value the user stated.
    #[schemars(length(min = 1, max = 200))]
    value: String,
}

/// [`FieldExtraction`]'s schema with the configured field names in it.
fn extraction_schema(config: &IntakeConfig) -> OutputSchema {
    let mut schema = frontdesk_llm::schema_for::<FieldExtraction>();
    // The struct's doc comment is written for this code's readers; a provider that shows the
    // schema to its model would only spend tokens on it. The system prompt says what to do.
    if let Some(root) = schema.as_object_mut() {
        root.remove("description");
    }
    let names: Vec<&str> = config.fields.iter().map(|f| f.name.as_str()).collect();
    let properties = &mut schema["properties"];
    properties["stated"]["maxItems"] = names.len().into();
    properties["stated"]["items"] = json!({
        "type": "object",
        "properties": {
            "field": {"type": "string", "enum": names, "description": "The field's name."},
            "value": {"type": "string", "minLength": 1, "maxLength": 200, "description": "The value the user stated."},
        },
        "required": ["field", "value"],
        "additionalProperties": false,
    });
    properties["marked_unknown"]["maxItems"] = names.len().into();
    properties["marked_unknown"]["items"] = json!({"type": "string", "enum": names});
    OutputSchema::new(schema)
}

pub struct ElicitationAgent {
    deps: IntakeDeps,
    schema: OutputSchema,
    /// The system prompt, which depends on the configuration alone.
    system: String,
    /// Worked examples as (question, answer) turns, sent before the real question.
    examples: Vec<(String, String)>,
}

impl ElicitationAgent {
    pub fn new(deps: IntakeDeps) -> Self {
        let schema = extraction_schema(&deps.config);
        let examples = prompts::elicitation_examples(&deps.config)
            .into_iter()
            .map(|(question, answer)| {
                (question, serde_json::to_string_pretty(&answer).expect("a JSON value serializes"))
            })
            .collect();
        let system = prompts::elicitation(&deps.config);
        Self { deps, schema, system, examples }
    }
}

#[async_trait]
impl Node<IntakeState> for ElicitationAgent {
    fn description(&self) -> &str {
        "Extracts request fields from the conversation in one structured call, detects abandonment, checks completion"
    }

    async fn run(&self, state: &IntakeState, ctx: &NodeContext) -> Output {
        let config = &self.deps.config;
        let remaining = missing_fields(config, state);
        let mut messages = vec![ChatMessage::system(&self.system)];
        for (question, answer) in &self.examples {
            messages.push(ChatMessage::user(question));
            messages.push(ChatMessage::assistant(answer));
        }
        let transcript = prompts::transcript(&state.messages.items);
        let status = prompts::request_status(config, state, &remaining);
        messages.push(ChatMessage::user(prompts::elicitation_question(
            &status,
            &transcript,
            state.elicitation_turns > 0,
        )));
        let request = ChatRequest {
            purpose: "elicitation.extract".into(),
            messages,
            temperature: Some(0.0),
            // Room for the longest reply the schema allows (every field at 200 characters, the
            // reasoning and the follow-up): a reply cut off by the budget is not JSON.
            max_tokens: Some(1500),
            ..Default::default()
        };
        let outcome = self
            .deps
            .llm
            .structured_with::<FieldExtraction>(
                llm_node::attributed(ctx, request),
                &self.schema,
                &llm_node::call_options(ctx),
            )
            .await;
        let extraction = llm_node::reported(ctx, outcome).await?;
        debug!(thread_id = ctx.thread_id(), reasoning = %extraction.reasoning, "fields extracted");

        if extraction.user_wants_to_abandon {
            let mut update = IntakeUpdate::clear_request_context();
            let reply = non_empty(extraction.followup_response, "OK, I've dropped that request.");
            update.messages = say("elicitation_agent", reply);
            return Ok(NodeOutput::update(update));
        }

        let mut collected = state.collected_fields.clone();
        let mut unknown = state.fields_marked_unknown.clone();
        let user_words: Vec<String> =
            state.messages.items.iter().filter(|m| m.role == Role::User).flat_map(|m| words(&m.text)).collect();
        // Where a field the user does not know is named: their newest message, or the question
        // it answers (the elicitation agent's last message; a welcome or chat reply asks none).
        let newest = words(last_user_text(state));
        let asked: Vec<String> = match state.messages.items.iter().rev().find(|m| m.role == Role::Assistant) {
            Some(m) if m.node.as_deref() == Some("elicitation_agent") => words(&m.text),
            _ => Vec::new(),
        };
        let mut stated_now: Vec<String> = Vec::new();
        let mut marked_unknown = extraction.marked_unknown;
        for StatedField { field, value } in extraction.stated {
            let value = value.trim();
            if value.is_empty() {
                continue;
            }
            if says_unknown(value) {
                // "I don't know" is not the field's value but the user not knowing it: it is
                // marked unknown, under the same rule as the model's own marks.
                if !marked_unknown.contains(&field) {
                    marked_unknown.push(field);
                }
                continue;
            }
            let Some(configured) = config.field(&field) else {
                warn!(thread_id = ctx.thread_id(), field, "model extracted a field that is not configured");
                continue;
            };
            if !configured.infer && !grounded(value, &user_words) {
                warn!(
                    thread_id = ctx.thread_id(),
                    field, value, "model extracted a value the user never wrote; dropped"
                );
                continue;
            }
            unknown.retain(|f| *f != field);
            collected.insert(field.clone(), value.to_owned());
            stated_now.push(field);
        }
        for field in marked_unknown {
            // A reply that states a value and also marks the field unknown contradicts itself;
            // the stated value is the more specific answer.
            if stated_now.contains(&field) {
                continue;
            }
            let Some(configured) = config.field(&field) else {
                warn!(thread_id = ctx.thread_id(), field, "model marked unknown a field that is not configured");
                continue;
            };
            if !refers_to(&configured.name, &configured.label, &newest, &asked) {
                warn!(
                    thread_id = ctx.thread_id(),
                    field, "model marked unknown a field neither the user nor the last question mentions; ignored"
                );
                continue;
            }
            collected.remove(&field);
            if !unknown.contains(&field) {
                unknown.push(field);
            }
        }

        let changed = !stated_now.is_empty() || unknown != state.fields_marked_unknown;
        let mut after =
            IntakeState { collected_fields: collected, fields_marked_unknown: unknown, ..Default::default() };
        let missing: Vec<&FieldConfig> =
            missing_fields(config, &after).into_iter().filter_map(|f| config.field(f)).collect();
        // Inferred fields (the title) are never asked for, so nothing but this step fills one the
        // model left empty: without it the request waited in elicitation for good.
        if missing.iter().all(|f| f.infer) && !missing.is_empty() {
            for (field, value) in self.infer(&after, &missing, ctx).await? {
                after.collected_fields.insert(field, value);
            }
        }
        let missing: Vec<&FieldConfig> =
            missing_fields(config, &after).into_iter().filter_map(|f| config.field(f)).collect();
        let mut update = IntakeUpdate {
            collected_fields: Some(after.collected_fields),
            fields_marked_unknown: Some(after.fields_marked_unknown),
            elicitation_turns: Some(state.elicitation_turns + 1),
            revising: Some(false),
            ..Default::default()
        };
        if !missing.is_empty() {
            update.mode = Some(Mode::Elicitation);
            update.messages = say("elicitation_agent", ask_for_missing(extraction.followup_response, &missing));
        } else if state.revising && !changed {
            // "I want to change something" names no new value: ask for it rather than show the
            // same review again.
            update.mode = Some(Mode::Elicitation);
            update.messages =
                say("elicitation_agent", non_empty(extraction.followup_response, "What would you like to change?"));
        } else {
            // Complete: team matching runs in this same turn and writes the reply.
            update.mode = Some(Mode::TeamMatching);
        }
        Ok(NodeOutput::update(update))
    }
}

impl ElicitationAgent {
    /// Fills inferred fields (`infer = true`, never asked for) from the collected details in a
    /// structured call of their own, once every asked field is settled. A field the model still
    /// leaves blank, or a reply that stays invalid, is left missing and then asked for.
    async fn infer(
        &self,
        state: &IntakeState,
        fields: &[&FieldConfig],
        ctx: &NodeContext,
    ) -> Result<Vec<(String, String)>, NodeError> {
        let properties: serde_json::Map<String, serde_json::Value> = fields
            .iter()
            .map(|f| {
                let schema = json!({"type": "string", "minLength": 1, "maxLength": 200, "description": f.description});
                (f.name.clone(), schema)
            })
            .collect();
        let schema = OutputSchema::new(json!({"type": "object", "properties": properties}));
        let request = ChatRequest {
            purpose: "elicitation.infer".into(),
            messages: vec![
                ChatMessage::system(prompts::infer(fields)),
                ChatMessage::user(format!(
                    "Request details:\n{}",
                    prompts::collected_summary(&self.deps.config, state)
                )),
            ],
            temperature: Some(0.0),
            max_tokens: Some(300),
            ..Default::default()
        };
        let result = self
            .deps
            .llm
            .structured_with::<std::collections::BTreeMap<String, String>>(
                llm_node::attributed(ctx, request),
                &schema,
                &llm_node::call_options(ctx),
            )
            .await;
        let values = match result {
            Ok((values, record)) => {
                llm_node::record_call(ctx, &record).await;
                values
            }
            Err(failure) => match llm_node::record_failure(ctx, failure).await {
                LlmError::InvalidOutput { error, .. } => {
                    warn!(thread_id = ctx.thread_id(), %error, "inferring fields failed; asking the user instead");
                    return Ok(Vec::new());
                }
                error => return Err(llm_node::node_error("elicitation.infer", error)),
            },
        };
        Ok(fields
            .iter()
            .filter_map(|f| {
                let value = values.get(&f.name).map(|v| v.trim()).filter(|v| !v.is_empty());
                if value.is_none() {
                    warn!(thread_id = ctx.thread_id(), field = %f.name, "model left an inferred field empty; asking the user");
                }
                value.map(|v| (f.name.clone(), v.to_owned()))
            })
            .collect())
    }
}

/// The reply while required fields are missing: the model's follow-up if it asks for one of
/// them, else the follow-up plus a question naming them. The model may ask for nothing, or only
/// for a field it was told never to ask for; a field nobody asks for is waited on forever.
/// Fields the assistant infers are asked for only once nothing else is missing (then inference
/// has failed), so the user is not asked for a title while details are still coming.
fn ask_for_missing(followup: String, missing: &[&FieldConfig]) -> String {
    let asked: Vec<&FieldConfig> = match missing.iter().filter(|f| !f.infer).copied().collect::<Vec<_>>() {
        asked if asked.is_empty() => missing.to_vec(),
        asked => asked,
    };
    let followup = followup.trim();
    let followup_words = words(followup);
    if !followup.is_empty() && asked.iter().any(|f| refers_to(&f.name, &f.label, &followup_words, &[])) {
        return followup.to_owned();
    }
    let labels = asked.iter().map(|f| f.label.as_str()).collect::<Vec<_>>().join(", ");
    if followup.is_empty() {
        format!("Thanks. To file the request I still need: {labels}.")
    } else {
        format!("{followup} To file the request I still need: {labels}.")
    }
}

/// The lowercase alphanumeric words of `text`.
fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect()
}

/// Whether the user's words back a value: at least half of the value's words of three or more
/// characters occur among them, a word also matching its own abbreviation or inflection ("prod"
/// and "production"). Elicitation records only what the user explicitly stated; this drops values
/// a model took from the worked examples or made up, and keeps a large model's light
/// normalisation of what the user wrote.
fn grounded(value: &str, user_words: &[String]) -> bool {
    let value_words: Vec<String> = words(value).into_iter().filter(|w| w.chars().count() >= 3).collect();
    if value_words.is_empty() {
        // Too short to judge ("5", "hr"): the whole value must be one of the user's words.
        let value = value.to_lowercase();
        return user_words.contains(&value);
    }
    let backed = value_words.iter().filter(|v| user_words.iter().any(|u| same_word(u, v))).count();
    backed * 2 >= value_words.len()
}

/// Whether a stated value only says the value is not known ("I don't know", "unknown", "not sure
/// yet"): a short value, so that a real one that mentions doubt ("restore the snapshot, not sure
/// it is current") stays a value.
fn says_unknown(value: &str) -> bool {
    let words = words(value);
    if words.is_empty() || words.len() > 6 {
        return false;
    }
    // Padded with spaces so that a phrase matches whole words only.
    let padded = format!(" {} ", words.join(" "));
    matches!(padded.trim(), "unknown" | "unknown yet" | "not known" | "tbd")
        || [" don t know ", " do not know ", " dont know ", " not sure ", " no idea ", " unsure "]
            .iter()
            .any(|phrase| padded.contains(phrase))
}

/// `user` is `word`, or an abbreviation or inflection of it that one starts the other with
/// ("prod" and "production").
fn same_word(user: &str, word: &str) -> bool {
    user == word || (user.len() >= 3 && (word.starts_with(user) || user.starts_with(word)))
}

/// Whether the user's newest words or the question they answer (`asked`) name a field: any word
/// of three or more characters of its name or label, also abbreviated or inflected (a shared
/// start of five letters: "urgent" names "urgency"). A user says they do not know something in
/// answer to a question about it or by naming it; a field marked unknown without either is one
/// a model copied from the worked examples.
fn refers_to(name: &str, label: &str, user_words: &[String], asked: &[String]) -> bool {
    let shared_start = |a: &str, b: &str| a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count();
    let said = |w: &String| user_words.iter().chain(asked).any(|u| same_word(u, w) || shared_start(u, w) >= 5);
    words(name).iter().chain(&words(label)).filter(|w| w.chars().count() >= 3).any(said)
}

/// Words of a reply that only approves ("yes", "go ahead", "looks good, submit it"), as the
/// lowercase alphanumeric pieces [`words`] cuts ("that's" is "that" and "s").
const AFFIRMATIVE_WORDS: &str = "yes yeah yep yup y ok okay k sure confirm confirmed approve approved submit go \
ahead send file proceed agree agreed lgtm correct right perfect fine good great looks look all do please pls it that \
this s is now thanks thank you absolutely definitely of course let lets us everything";
/// The ones that carry the approval; the rest only pad it ("it", "please", "now").
const APPROVING_WORDS: &str = "yes yeah yep yup y ok okay k sure confirm confirmed approve approved submit go send \
file proceed agree agreed lgtm correct perfect fine good great absolutely definitely";

/// Whether `text` is a short reply that only approves. Deliberately narrow: any other word
/// ("no", "but", "change", a field value) or a question leaves the message to the model.
pub fn is_affirmative(text: &str) -> bool {
    let words = words(text);
    let among = |list: &str, w: &String| list.split_whitespace().any(|a| a == w);
    !text.contains('?')
        && (1..=8).contains(&words.len())
        && words.iter().all(|w| among(AFFIRMATIVE_WORDS, w))
        && words.iter().any(|w| among(APPROVING_WORDS, w))
}

fn non_empty(text: String, fallback: &str) -> String {
    if text.trim().is_empty() {
        fallback.to_owned()
    } else {
        text
    }
}

// ---------------------------------------------------------------------------------------------
// team matching

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Confidence {
    High,
    Medium,
    Low,
}

/// The team-matching decision. The schema sent ([`team_schema`]) makes `team_id` an enum of the
/// configured ids (or null); [`TeamMatching`] checks the reply against it too.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct TeamMatch {
    /// One short sentence on why.
    #[schemars(length(max = 160))]
    reasoning: String,
    /// The matching team's id, or null when no team fits.
    #[schemars(length(max = 40))]
    team_id: Option<String>,
    confidence: Confidence,
}

/// [`TeamMatch`]'s schema with `team_id` restricted to the configured team ids or null.
fn team_schema(config: &IntakeConfig) -> OutputSchema {
    let mut schema = frontdesk_llm::schema_for::<TeamMatch>();
    let mut ids: Vec<serde_json::Value> = config.teams.iter().map(|t| t.id.as_str().into()).collect();
    ids.push(serde_json::Value::Null);
    schema["properties"]["team_id"] = json!({
        "type": ["string", "null"],
        "enum": ids,
        "description": "The matching team's id, or null when no team fits.",
    });
    OutputSchema::new(schema)
}

/// An id outside the configuration is invalid output, not "no match": treating it as no match
/// threw a confident answer away without a word in the log. Rejected, it gets the structured
/// call's repair attempt.
fn check_team(config: &IntakeConfig, matched: &TeamMatch) -> Result<(), String> {
    match matched.team_id.as_deref() {
        Some(id) if config.team(id).is_none() => {
            let known = config.teams.iter().map(|t| t.id.as_str()).collect::<Vec<_>>().join(", ");
            Err(format!("team_id {id:?} is not a configured team; use one of {known}, or null"))
        }
        _ => Ok(()),
    }
}

pub struct TeamMatching {
    deps: IntakeDeps,
    schema: OutputSchema,
}

impl TeamMatching {
    pub fn new(deps: IntakeDeps) -> Self {
        let schema = team_schema(&deps.config);
        Self { deps, schema }
    }
}

#[async_trait]
impl Node<IntakeState> for TeamMatching {
    fn description(&self) -> &str {
        "Matches the completed request to a team, then shows the deterministic review message (or asks for more detail)"
    }

    async fn run(&self, state: &IntakeState, ctx: &NodeContext) -> Output {
        let config = &self.deps.config;
        let summary = prompts::collected_summary(config, state);
        let request = ChatRequest {
            purpose: "team_matching.match".into(),
            messages: vec![
                ChatMessage::system(format!("{}\n{}", prompts::TEAM_MATCHING, prompts::team_catalogue(config))),
                ChatMessage::user(format!("Request:\n{summary}")),
            ],
            temperature: Some(0.0),
            max_tokens: Some(200),
            ..Default::default()
        };
        let outcome = self
            .deps
            .llm
            .structured_checked(
                llm_node::attributed(ctx, request),
                &self.schema,
                &llm_node::call_options(ctx),
                |m: &TeamMatch| check_team(config, m),
            )
            .await;
        let matched = llm_node::reported(ctx, outcome).await?;
        info!(
            thread_id = ctx.thread_id(),
            team = ?matched.team_id,
            confidence = ?matched.confidence,
            reasoning = %matched.reasoning,
            "team matched"
        );
        if let Some(team) = matched.team_id.as_deref().and_then(|id| config.team(id)) {
            let review = prompts::review_message(config, state, &team.name);
            let reviewed = ReviewedRequest {
                team_id: team.id.clone(),
                fields: state.collected_fields.clone(),
                unknown: state.fields_marked_unknown.clone(),
            };
            return Ok(NodeOutput::update(IntakeUpdate {
                identified_team: Some(Some(team.id.clone())),
                identified_team_name: Some(Some(team.name.clone())),
                reviewed: Some(Some(reviewed)),
                mode: Some(Mode::Review),
                messages: say("team_matching", review),
                ..Default::default()
            }));
        }
        let request = ChatRequest {
            purpose: "team_matching.no_match".into(),
            messages: vec![
                ChatMessage::system(prompts::NO_MATCH),
                ChatMessage::user(format!("Collected details:\n{summary}")),
            ],
            temperature: Some(0.3),
            max_tokens: Some(400),
            ..Default::default()
        };
        let reply = llm_node::streamed_text(ctx, &self.deps.llm, request).await?;
        Ok(NodeOutput::update(IntakeUpdate {
            mode: Some(Mode::Chat),
            messages: say("team_matching", reply),
            ..Default::default()
        }))
    }
}

// ---------------------------------------------------------------------------------------------
// review agent

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum ReviewAction {
    /// Approve and submit.
    Confirm,
    /// Change a detail.
    Modify,
    /// Drop the request.
    Abandon,
    /// Ask a question about it.
    Clarify,
}

/// The review agent's classification of the user's reply.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ReviewDecision {
    action_type: ReviewAction,
    /// One short sentence on why.
    #[schemars(length(max = 160))]
    reasoning: String,
    /// The assistant's short reply to the user.
    #[schemars(length(max = 300))]
    response_to_user: String,
}

pub struct ReviewAgent(pub IntakeDeps);

#[async_trait]
impl Node<IntakeState> for ReviewAgent {
    fn description(&self) -> &str {
        "Classifies the reply to the review (confirm, modify, abandon, clarify); confirm submits the request"
    }

    async fn run(&self, state: &IntakeState, ctx: &NodeContext) -> Output {
        let config = &self.0.config;
        let team_name = state.identified_team_name.clone().unwrap_or_default();
        let request = ChatRequest {
            purpose: "review.classify".into(),
            messages: vec![
                ChatMessage::system(prompts::REVIEW),
                ChatMessage::user(format!(
                    "Request under review:\n{}Assigned team: {team_name}\n\nUser's reply: {}",
                    prompts::collected_summary(config, state),
                    last_user_text(state)
                )),
            ],
            temperature: Some(0.0),
            max_tokens: Some(300),
            ..Default::default()
        };
        let decision: ReviewDecision = llm_node::structured(ctx, &self.0.llm, request).await?;
        info!(
            thread_id = ctx.thread_id(),
            action = ?decision.action_type,
            reasoning = %decision.reasoning,
            "review classified"
        );
        let update = match decision.action_type {
            ReviewAction::Confirm => self.submit(state, ctx).await,
            // No reply here: the elicitation agent runs next in this turn on the same message,
            // applies the change (or asks what it is), and a changed request is matched and
            // reviewed again. The team and the reviewed values go, so nothing can be submitted
            // before that new review.
            ReviewAction::Modify => IntakeUpdate {
                mode: Some(Mode::Elicitation),
                revising: Some(true),
                identified_team: Some(None),
                identified_team_name: Some(None),
                reviewed: Some(None),
                submission_error: Some(None),
                ..Default::default()
            },
            ReviewAction::Abandon => IntakeUpdate {
                messages: say("review_agent", non_empty(decision.response_to_user, "OK, I've dropped that request.")),
                ..IntakeUpdate::clear_request_context()
            },
            ReviewAction::Clarify => IntakeUpdate {
                mode: Some(Mode::Review),
                messages: say("review_agent", decision.response_to_user),
                ..Default::default()
            },
        };
        Ok(NodeOutput::update(update))
    }
}

impl ReviewAgent {
    async fn submit(&self, state: &IntakeState, ctx: &NodeContext) -> IntakeUpdate {
        let config = &self.0.config;
        let (Some(team_id), Some(team_name)) = (&state.identified_team, &state.identified_team_name) else {
            return IntakeUpdate {
                mode: Some(Mode::Chat),
                messages: say("review_agent", "There is no request to submit yet."),
                ..Default::default()
            };
        };
        if let Err(reason) = submittable(state) {
            // The user confirmed something other than what stands now: show it and ask again.
            warn!(thread_id = ctx.thread_id(), %reason, "confirm refused; showing the request for review again");
            let review = prompts::review_message(config, state, team_name);
            return IntakeUpdate {
                mode: Some(Mode::Review),
                reviewed: Some(ReviewedRequest::of(state)),
                messages: say(
                    "review_agent",
                    format!("Before I submit anything, please check the request as it now stands.\n{review}"),
                ),
                ..Default::default()
            };
        }
        let submission = Submission {
            // The run id is stable when a crash-interrupted run is resumed, so a resubmission
            // carries the same id and the submitter can de-duplicate it.
            id: ctx.run_id().to_owned(),
            thread_id: ctx.thread_id().to_owned(),
            team_id: team_id.clone(),
            team_name: team_name.clone(),
            fields: state.collected_fields.clone(),
            unknown: state.fields_marked_unknown.clone(),
            labels: config.fields.iter().map(|f| (f.name.clone(), f.label.clone())).collect::<Vec<_>>(),
        };
        match self.0.submitter.submit(&submission).await {
            Ok(receipt) => {
                info!(thread_id = ctx.thread_id(), team_id, url = %receipt.url, "request submitted");
                IntakeUpdate {
                    submission_url: Some(Some(receipt.url.clone())),
                    messages: say(
                        "review_agent",
                        format!(
                            "Your request has been submitted to {team_name}. You can follow it here: {}",
                            receipt.url
                        ),
                    ),
                    ..IntakeUpdate::clear_request_context()
                }
            }
            Err(error) => {
                warn!(thread_id = ctx.thread_id(), team_id, %error, "submission failed");
                IntakeUpdate {
                    mode: Some(Mode::Review),
                    submission_error: Some(Some(error.to_string())),
                    messages: say(
                        "review_agent",
                        format!(
                            "Sorry, I couldn't submit your request ({error}). Your details are kept: reply 'yes' to try again."
                        ),
                    ),
                    ..Default::default()
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{ask_for_missing, extraction_schema, grounded, is_affirmative, refers_to, says_unknown, words};

    #[test]
    fn a_value_that_only_says_it_is_not_known_is_no_value() {
        for unknown in
            ["I don't know", "I don't know yet", "unknown", "Not sure.", "no idea", "I do not know it", "TBD"]
        {
            assert!(says_unknown(unknown), "{unknown}");
        }
        for value in
            ["restore the snapshot, not sure it is current and tested", "known issue", "2026-12-05", "dana.lee"]
        {
            assert!(!says_unknown(value), "{value}");
        }
    }
    use crate::intake::{prompts, IntakeConfig, IntakeState};

    #[test]
    fn the_extraction_schema_names_configured_fields_and_carries_no_doc_comment() {
        let config = IntakeConfig::shipped();
        let schema = extraction_schema(&config);
        let schema = schema.schema();
        assert!(schema.get("description").is_none(), "{schema}");
        let names: Vec<&str> = config.fields.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(schema["properties"]["stated"]["items"]["properties"]["field"]["enum"], serde_json::json!(names));
        assert_eq!(schema["properties"]["stated"]["maxItems"], serde_json::json!(names.len()));
    }

    #[test]
    fn the_elicitation_system_prompt_is_the_same_whatever_the_state() {
        let config = IntakeConfig::shipped();
        let system = prompts::elicitation(&config);
        assert!(!system.contains("Remaining fields"), "{system}");
        let mut state = IntakeState::default();
        let fresh = prompts::request_status(&config, &state, &crate::intake::missing_fields(&config, &state));
        state.collected_fields.insert("environment".into(), "staging".into());
        state.revising = true;
        let later = prompts::request_status(&config, &state, &crate::intake::missing_fields(&config, &state));
        assert!(fresh.starts_with("Remaining fields: ") && fresh.contains("Completion: 0%"), "{fresh}");
        assert!(later.contains("- Environment: staging") && later.contains("changing a request"), "{later}");
        assert!(!later.contains("environment,"), "a collected field is not remaining: {later}");
    }

    #[test]
    fn short_approvals_are_affirmative_and_anything_more_is_not() {
        for yes in [
            "yes",
            "Yes!",
            "go ahead",
            "approve",
            "yes please submit it",
            "looks good, go ahead",
            "OK",
            "that's fine",
            "LGTM",
        ] {
            assert!(is_affirmative(yes), "{yes}");
        }
        for other in [
            "no",
            "yes but change the date",
            "not yet",
            "don't submit it",
            "is it fine?",
            "thanks",
            "change the title to Patch billing-db v2",
            "",
            "yes yes yes yes yes yes yes yes yes",
        ] {
            assert!(!is_affirmative(other), "{other}");
        }
    }

    #[test]
    fn a_missing_field_is_always_asked_for() {
        let config = IntakeConfig::shipped();
        let field = |name: &str| config.field(name).unwrap();
        let title = field("title");
        let urgency = field("urgency");
        assert_eq!(ask_for_missing("How urgent is it?".into(), &[title, urgency]), "How urgent is it?");
        assert_eq!(
            ask_for_missing("Thanks!".into(), &[title, urgency]),
            "Thanks! To file the request I still need: Urgency.",
            "an inferred field is not asked for while others are missing"
        );
        assert_eq!(
            ask_for_missing("Thanks, that's everything.".into(), &[title]),
            "Thanks, that's everything. To file the request I still need: Title.",
            "inference failed: the title is asked for"
        );
        assert_eq!(ask_for_missing(" ".into(), &[urgency]), "Thanks. To file the request I still need: Urgency.");
    }

    #[test]
    fn a_value_must_come_from_the_users_words() {
        let user = words("The affected system is billing-db in prod; rollback: restore from last snapshot");
        assert!(grounded("billing-db", &user));
        assert!(grounded("production", &user), "abbreviation");
        assert!(grounded("restore from the last snapshot", &user));
        assert!(!grounded("staging", &user), "a value the user never wrote");
        assert!(!grounded("payroll-api", &user));
        assert!(grounded("in", &user), "a short value is one of the words");
        assert!(!grounded("5", &user));
    }

    #[test]
    fn an_unknown_field_must_be_named_or_asked_about() {
        let asked = words("Thanks, noted. What is the rollback plan?");
        assert!(refers_to("rollback_plan", "Rollback plan", &words("no idea"), &asked), "answers the question");
        assert!(refers_to("desired_date", "Desired date", &words("not sure about the date yet"), &[]), "named");
        assert!(refers_to("urgency", "Urgency", &words("urgent? I don't know"), &[]), "inflection");
        assert!(
            !refers_to("requested_by", "Requested by", &words("the environment is production"), &asked),
            "copied from an example"
        );
    }
}
