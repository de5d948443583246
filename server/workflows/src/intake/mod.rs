//! The intake workflow (docs/workflows/intake.md): a supervisor routes each chat turn to the chat
//! agent, the field-elicitation agent or the review agent; a completed request is matched to a
//! team, reviewed by the user and submitted.
//!
//! ```text
//! START → supervisor ─┬→ chat_agent → END
//!                     ├→ elicitation_agent ─┬→ team_matching → END
//!                     │        ↑            └→ END
//!                     ├→ review_agent ─┬────┘ (modify: the change is applied in the same turn)
//!                     │                └→ END
//!                     └→ END   ("clear context" debug command)
//! ```
//!
//! A request is submitted only from REVIEW, on a confirm of exactly the values the last review
//! message showed ([`submittable`]): any change goes back through elicitation, team matching and
//! a fresh review first.

pub mod config;
mod nodes;
pub mod prompts;
pub mod sharepoint;
pub mod submit;

use std::{collections::BTreeMap, sync::Arc};

use frontdesk_llm::LlmClient;
use frontdesk_runtime::{Durability, Graph, GraphBuilder, GraphError, Log, NodeOptions, Target};
use serde::{Deserialize, Serialize};

pub use config::{FieldConfig, IntakeConfig, TeamConfig};
pub use nodes::is_affirmative;
pub use submit::{Receipt, Submission, SubmitError, Submitter};

use crate::{
    conversation::{turn_output, ConversationSpec},
    Message,
};

pub const NAME: &str = "intake";

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Mode {
    #[default]
    Chat,
    Elicitation,
    TeamMatching,
    Review,
}

/// The supervisor's routing decision, kept in state as `next`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Route {
    #[default]
    ChatAgent,
    ElicitationAgent,
    ReviewAgent,
    /// The turn is already answered (debug command).
    End,
}

frontdesk_runtime::state! {
    /// The intake conversation's state (AgentState in docs/workflows/intake.md).
    pub struct IntakeState / IntakeUpdate {
        messages: Log<Message> => Append,
        mode: Mode => Replace,
        next: Route => Replace,
        collected_fields: BTreeMap<String, String> => Replace,
        fields_marked_unknown: Vec<String> => Replace,
        identified_team: Option<String> => Replace,
        identified_team_name: Option<String> => Replace,
        submission_url: Option<String> => Replace,
        submission_error: Option<String> => Replace,
        /// What the last review message showed; a confirm submits only if the request still
        /// equals it. Set by team matching, cleared when the user asks for a change.
        reviewed: Option<ReviewedRequest> => Replace,
        /// The user asked to change the reviewed request; the elicitation agent applies the
        /// change (from the same message) before the request is matched and reviewed again.
        revising: bool => Replace,
        /// Elicitation turns of the current request; the focus instruction starts with the second.
        elicitation_turns: u32 => Replace,
        /// User turns over the conversation's life; never reset.
        turns: u32 => Sum,
    }
}

impl IntakeUpdate {
    /// clearRequestContext: request fields go, messages stay, mode returns to CHAT.
    pub fn clear_request_context() -> Self {
        IntakeUpdate {
            mode: Some(Mode::Chat),
            collected_fields: Some(BTreeMap::new()),
            fields_marked_unknown: Some(Vec::new()),
            identified_team: Some(None),
            identified_team_name: Some(None),
            submission_error: Some(None),
            reviewed: Some(None),
            revising: Some(false),
            elicitation_turns: Some(0),
            ..Default::default()
        }
    }

    /// clearAll: everything, messages included.
    pub fn clear_all() -> Self {
        IntakeUpdate {
            messages: Some(Log::replace(Vec::new())),
            submission_url: Some(None),
            ..Self::clear_request_context()
        }
    }
}

/// The intake state as callers see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntakeView {
    pub mode: Mode,
    pub collected_fields: BTreeMap<String, String>,
    pub fields_marked_unknown: Vec<String>,
    pub missing_fields: Vec<String>,
    pub identified_team_id: Option<String>,
    pub identified_team_name: Option<String>,
    pub submission_url: Option<String>,
    pub submission_error: Option<String>,
}

/// Required fields neither collected nor marked unknown, in configured order.
pub fn missing_fields<'c>(config: &'c IntakeConfig, state: &IntakeState) -> Vec<&'c str> {
    config
        .fields
        .iter()
        .filter(|f| f.required)
        .filter(|f| !state.collected_fields.contains_key(&f.name) && !state.fields_marked_unknown.contains(&f.name))
        .map(|f| f.name.as_str())
        .collect()
}

/// The values a review message showed the user: the team and every field, known or not.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReviewedRequest {
    pub team_id: String,
    pub fields: BTreeMap<String, String>,
    pub unknown: Vec<String>,
}

impl ReviewedRequest {
    /// The request as it stands, if a team has been matched.
    pub fn of(state: &IntakeState) -> Option<Self> {
        Some(Self {
            team_id: state.identified_team.clone()?,
            fields: state.collected_fields.clone(),
            unknown: state.fields_marked_unknown.clone(),
        })
    }
}

/// Why a confirm cannot submit the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NotSubmittable {
    #[error("the request is not under review")]
    NotInReview,
    #[error("no team has been matched")]
    NoTeam,
    #[error("the request differs from what the user last reviewed")]
    NotReviewed,
}

/// Whether a confirm may submit the request: only in REVIEW, and only the values the user was
/// last shown. A model that routes or classifies wrongly (a confirm while a change is pending,
/// a review agent reached outside REVIEW) must not be able to file values nobody reviewed.
pub fn submittable(state: &IntakeState) -> Result<(), NotSubmittable> {
    if state.mode != Mode::Review {
        return Err(NotSubmittable::NotInReview);
    }
    let current = ReviewedRequest::of(state).ok_or(NotSubmittable::NoTeam)?;
    if state.reviewed.as_ref() != Some(&current) {
        return Err(NotSubmittable::NotReviewed);
    }
    Ok(())
}

/// What the intake nodes need from outside.
#[derive(Clone)]
pub struct IntakeDeps {
    pub llm: LlmClient,
    pub config: Arc<IntakeConfig>,
    pub submitter: Arc<dyn Submitter>,
    /// Enables the "clear context" debug command. Off unless configured.
    pub debug_commands: bool,
}

pub struct IntakeSpec {
    config: Arc<IntakeConfig>,
}

impl ConversationSpec for IntakeSpec {
    type State = IntakeState;
    type View = IntakeView;

    fn name(&self) -> &str {
        NAME
    }

    fn description(&self) -> &str {
        "Change and demand request intake: chat, field elicitation, team matching, review and submission"
    }

    fn initial_state(&self) -> IntakeState {
        IntakeState {
            messages: Log::append(vec![Message::assistant("welcome", self.config.welcome.clone())]),
            ..Default::default()
        }
    }

    fn user_turn(&self, message: Message) -> IntakeUpdate {
        IntakeUpdate { messages: Some(Log::append(vec![message])), turns: Some(1), ..Default::default() }
    }

    fn messages<'s>(&self, state: &'s IntakeState) -> &'s [Message] {
        &state.messages.items
    }

    fn turn_count(&self, state: &IntakeState) -> u32 {
        state.turns
    }

    fn view(&self, state: &IntakeState) -> IntakeView {
        IntakeView {
            mode: state.mode,
            collected_fields: state.collected_fields.clone(),
            fields_marked_unknown: state.fields_marked_unknown.clone(),
            missing_fields: missing_fields(&self.config, state).into_iter().map(str::to_owned).collect(),
            identified_team_id: state.identified_team.clone(),
            identified_team_name: state.identified_team_name.clone(),
            submission_url: state.submission_url.clone(),
            submission_error: state.submission_error.clone(),
        }
    }

    fn reset(&self, state: &IntakeState) -> IntakeState {
        let mut reset = state.clone();
        frontdesk_runtime::State::apply(&mut reset, IntakeUpdate::clear_all());
        reset
    }
}

/// The intake graph and its conversation spec.
pub fn build(deps: IntakeDeps) -> Result<(Arc<IntakeSpec>, Graph<IntakeState>), GraphError> {
    let spec = Arc::new(IntakeSpec { config: deps.config.clone() });
    let output_spec = spec.clone();
    let graph = GraphBuilder::new(NAME)
        .node("supervisor", nodes::Supervisor(deps.clone()))
        .node("chat_agent", nodes::ChatAgent(deps.clone()))
        .node("elicitation_agent", nodes::ElicitationAgent::new(deps.clone()))
        .node("team_matching", nodes::TeamMatching::new(deps.clone()))
        // Confirming submits the request to another system: the one node with effects.
        .node_with("review_agent", nodes::ReviewAgent(deps), NodeOptions::default().with_effects())
        .entry("supervisor")
        .conditional_edge(
            "supervisor",
            [Target::node("chat_agent"), Target::node("elicitation_agent"), Target::node("review_agent"), Target::End],
            |s: &IntakeState| match s.next {
                Route::ChatAgent => Target::node("chat_agent"),
                Route::ElicitationAgent => Target::node("elicitation_agent"),
                Route::ReviewAgent => Target::node("review_agent"),
                Route::End => Target::End,
            },
        )
        .edge("chat_agent", Target::End)
        .conditional_edge("elicitation_agent", [Target::node("team_matching"), Target::End], |s: &IntakeState| {
            if s.mode == Mode::TeamMatching {
                Target::node("team_matching")
            } else {
                Target::End
            }
        })
        .edge("team_matching", Target::End)
        .conditional_edge("review_agent", [Target::node("elicitation_agent"), Target::End], |s: &IntakeState| {
            if s.revising {
                Target::node("elicitation_agent")
            } else {
                Target::End
            }
        })
        .max_steps(10)
        // The other nodes only call the model: a crash re-runs them rather than every node
        // paying a commit.
        .durability(Durability::ByEffect)
        .output(move |s: &IntakeState| turn_output(&*output_spec, s))
        .build()?;
    Ok((spec, graph))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::TurnOutput;

    /// Recorded outputs are replayed by idempotent retries, across releases.
    #[test]
    fn a_turn_output_recorded_when_views_were_an_enum_still_decodes() {
        let recorded = serde_json::json!({
            "reply": null,
            "turn_count": 2,
            "state": {
                "workflow": "intake",
                "mode": "REVIEW",
                "collected_fields": {"title": "New laptop"},
                "fields_marked_unknown": [],
                "missing_fields": [],
                "identified_team_id": "it",
                "identified_team_name": null,
                "submission_url": null,
                "submission_error": null
            }
        });
        let output: TurnOutput<IntakeView> = serde_json::from_value(recorded.clone()).unwrap();
        assert_eq!(output.state.view.mode, Mode::Review);
        assert_eq!(output.state.view.identified_team_id.as_deref(), Some("it"));
        assert_eq!(serde_json::to_value(&output).unwrap(), recorded);
    }

    fn in_review() -> IntakeState {
        let mut state = IntakeState {
            mode: Mode::Review,
            identified_team: Some("ops-change".into()),
            identified_team_name: Some("Ops Change".into()),
            collected_fields: BTreeMap::from([("title".into(), "Patch billing-db".into())]),
            ..Default::default()
        };
        state.reviewed = ReviewedRequest::of(&state);
        state
    }

    #[test]
    fn only_the_reviewed_values_in_review_can_be_submitted() {
        assert_eq!(submittable(&in_review()), Ok(()));

        let mut changed = in_review();
        changed.collected_fields.insert("title".into(), "Patch billing-db v2".into());
        assert_eq!(submittable(&changed), Err(NotSubmittable::NotReviewed), "a value changed after the review");

        let mut rematched = in_review();
        rematched.identified_team = Some("io-change".into());
        assert_eq!(submittable(&rematched), Err(NotSubmittable::NotReviewed), "another team");

        let mut unknown = in_review();
        unknown.fields_marked_unknown.push("rollback_plan".into());
        assert_eq!(submittable(&unknown), Err(NotSubmittable::NotReviewed), "a field became unknown");

        let mut eliciting = in_review();
        eliciting.mode = Mode::Elicitation;
        assert_eq!(submittable(&eliciting), Err(NotSubmittable::NotInReview), "a change is pending");

        let mut never_shown = in_review();
        never_shown.reviewed = None;
        assert_eq!(submittable(&never_shown), Err(NotSubmittable::NotReviewed));

        let mut no_team = in_review();
        no_team.identified_team = None;
        assert_eq!(submittable(&no_team), Err(NotSubmittable::NoTeam));
    }
}
