//! The intake workflow's service side: its settings (`workflows.intake`), its submitter, its
//! wiring, and its state on the wire (`IntakeState`). `ConversationService` serves it.

pub mod outbox;

use std::{path::PathBuf, sync::Arc};

use frontdesk_api::v1 as pb;
use frontdesk_runtime::GraphError;
use frontdesk_workflows::{
    conversation::ConversationHost,
    intake::{
        self,
        sharepoint::{SharePointConfig, SharePointSubmitter},
        IntakeConfig, IntakeDeps, IntakeView, Mode, SubmitError, Submitter,
    },
    WorkflowError,
};
use serde::{Deserialize, Serialize};

use self::outbox::OutboxSubmitter;
use super::{BoxError, Conversational, HostedWorkflow, ProtoState, Wiring, WorkflowModule};

pub struct Workflow;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IntakeSettings {
    /// Fields and teams file; the shipped `config/intake.toml` when unset.
    pub config: Option<PathBuf>,
    /// Enables the "clear context" debug command.
    pub debug_commands: bool,
    pub submitter: SubmitterConfig,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum SubmitterConfig {
    /// Confirmed requests go to the local `intake_submissions` table.
    Outbox {
        /// Item URLs are `{base_url}/{team_id}/{submission_id}`.
        base_url: String,
    },
    /// Confirmed requests become SharePoint list items (Microsoft Graph). Never serialized
    /// back out, so its client secret cannot leak through a config dump.
    #[serde(skip_serializing)]
    Sharepoint(SharePointConfig),
}

impl Default for SubmitterConfig {
    fn default() -> Self {
        SubmitterConfig::Outbox { base_url: "frontdesk-outbox://intake".into() }
    }
}

/// A submitter to use instead of the configured one (tests, embedding): put it in
/// `Overrides::parts`.
#[derive(Clone)]
pub struct UseSubmitter(pub Arc<dyn Submitter>);

#[derive(Debug, thiserror::Error)]
pub enum IntakeStartError {
    #[error("cannot load the intake configuration")]
    Config(#[source] WorkflowError),
    #[error("cannot set up the submitter")]
    Submitter(#[source] SubmitError),
    #[error("invalid intake graph")]
    Graph(#[source] GraphError),
}

impl WorkflowModule for Workflow {
    const NAME: &'static str = intake::NAME;
    type Settings = IntakeSettings;

    async fn build(&self, settings: IntakeSettings, wiring: &Wiring<'_>) -> Result<Arc<dyn HostedWorkflow>, BoxError> {
        let IntakeSettings { config, debug_commands, submitter } = settings;
        let config = match &config {
            Some(path) => IntakeConfig::load(path).map_err(IntakeStartError::Config)?,
            None => IntakeConfig::shipped(),
        };
        let submitter: Arc<dyn Submitter> = match wiring.parts.get::<UseSubmitter>() {
            Some(UseSubmitter(submitter)) => submitter.clone(),
            None => match submitter {
                SubmitterConfig::Outbox { base_url } => {
                    Arc::new(OutboxSubmitter::new(wiring.database.clone(), base_url))
                }
                SubmitterConfig::Sharepoint(sharepoint) => {
                    Arc::new(SharePointSubmitter::new(sharepoint).map_err(IntakeStartError::Submitter)?)
                }
            },
        };
        let deps = IntakeDeps { llm: wiring.llm.clone(), config: Arc::new(config), submitter, debug_commands };
        let (spec, graph) = intake::build(deps).map_err(IntakeStartError::Graph)?;
        let host = ConversationHost::new(spec, wiring.runner(graph), wiring.conversation_limits.clone());
        Ok(Arc::new(Conversational::new(host)))
    }
}

fn mode(mode: Mode) -> pb::IntakeMode {
    match mode {
        Mode::Chat => pb::IntakeMode::Chat,
        Mode::Elicitation => pb::IntakeMode::Elicitation,
        Mode::TeamMatching => pb::IntakeMode::TeamMatching,
        Mode::Review => pb::IntakeMode::Review,
    }
}

impl ProtoState for IntakeView {
    fn into_proto(self) -> pb::conversation::State {
        let IntakeView {
            mode: m,
            collected_fields,
            fields_marked_unknown,
            missing_fields,
            identified_team_id,
            identified_team_name,
            submission_url,
            submission_error,
        } = self;
        pb::conversation::State::Intake(pb::IntakeState {
            mode: mode(m) as i32,
            collected_fields: collected_fields.into_iter().collect(),
            fields_marked_unknown,
            missing_fields,
            identified_team_id: identified_team_id.unwrap_or_default(),
            identified_team_name: identified_team_name.unwrap_or_default(),
            submission_url: submission_url.unwrap_or_default(),
            submission_error: submission_error.unwrap_or_default(),
        })
    }
}
