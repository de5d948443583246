//! The agents, each a node: they talk through [`AgentMessage`]s written to the state's audit
//! trail, and the graph's router delivers each message to its receiver.

use async_trait::async_trait;
use frontdesk_llm::{ChatMessage, ChatRequest, OutputSchema};
use frontdesk_runtime::{InterruptRequest, Node, NodeContext, NodeError, NodeErrorKind, NodeOutput, State};
use schemars::JsonSchema;
use serde::Deserialize;
use tracing::{debug, info, warn};

use super::{
    prompts,
    tools::{self, AuthorizationResult, CheckAuthorizationArgs, GenerateReportArgs, LookupDataArgs},
    types::*,
    InvestigationDeps, InvestigationState, InvestigationUpdate,
};
use crate::{
    llm_node,
    tool_loop::{self, ToolResult},
};

pub const INVESTIGATION: &str = "investigation_agent";
pub const RIGHTS_CHECK: &str = "rights_check_agent";
pub const REQUEST_FOR_INFORMATION: &str = "request_for_information_agent";
pub const ADVISORY: &str = "advisory_agent";
/// The investigation agent's escalation: where an agent that failed for good is routed.
pub const ESCALATE: &str = "escalate";

/// Interrupt reasons: who the investigation waits for.
pub const AWAITING_CHANGER: &str = "awaiting_changer";
pub const AWAITING_MANAGER: &str = "awaiting_manager";

/// Model calls that may choose tools get at most this many rounds of tool calls.
const TOOL_ROUNDS: usize = 2;

/// Token budgets of the structured replies. A small model can spend a token per character, so
/// each budget covers its reply's longest strings (`maxLength` in the schemas below) plus the
/// JSON around them: a reply cut short is invalid output, not a shorter answer.
const BUDGET_SHORT: u32 = 400;
const BUDGET_NOTICE: u32 = 600;
const BUDGET_REPORT: u32 = 1200;

type Output = Result<NodeOutput<InvestigationUpdate>, NodeError>;

fn internal(message: impl Into<String>) -> NodeError {
    NodeError::new(NodeErrorKind::Internal, message)
}

/// The newest agent message of the trail.
pub fn last_message(state: &InvestigationState) -> Option<&AgentMessage> {
    state.audit.iter().rev().find_map(|entry| match &entry.record {
        AuditRecord::Message(message) => Some(message),
        _ => None,
    })
}

/// The action that answers a request.
fn reply_to(request: Action) -> Option<Action> {
    match request {
        Action::CheckRights => Some(Action::CheckRightsResult),
        Action::RequestClarification => Some(Action::ClarificationResponse),
        Action::RequestManagerValidation => Some(Action::ManagerValidationResponse),
        Action::GenerateAdvisoryReport => Some(Action::AdvisoryReportResult),
        _ => None,
    }
}

/// What one node run writes: audit entries numbered after the state's, status changes checked
/// against the transition table, and the fields the node sets.
struct Journal<'a> {
    state: &'a InvestigationState,
    entries: Vec<AuditEntry>,
    status: Status,
    update: InvestigationUpdate,
}

impl<'a> Journal<'a> {
    fn new(state: &'a InvestigationState) -> Self {
        Self { state, entries: Vec::new(), status: state.status, update: InvestigationUpdate::default() }
    }

    fn push(&mut self, actor: &str, correlation_id: &str, record: AuditRecord) {
        let seq = u32::try_from(self.state.audit.len() + self.entries.len() + 1).unwrap_or(u32::MAX);
        self.entries.push(AuditEntry {
            investigation_id: self.state.investigation_id.clone(),
            seq,
            correlation_id: correlation_id.to_owned(),
            at_ms: now_ms(),
            actor: actor.to_owned(),
            record,
        });
    }

    fn send(&mut self, message: AgentMessage) {
        let correlation_id = message.correlation_id.clone();
        self.push(message.sender.as_str(), &correlation_id, AuditRecord::Message(message));
    }

    /// Sends a new request, under a fresh correlation id.
    fn request(&mut self, action: Action, context: serde_json::Value) {
        let exchanges = self.update.exchanges.unwrap_or(self.state.exchanges) + 1;
        self.update.exchanges = Some(exchanges);
        let correlation_id = format!("corr-{}-{exchanges}", self.state.investigation_id);
        self.send(AgentMessage::new(action, correlation_id, context, MessageStatus::Pending));
    }

    fn set_status(&mut self, agent: Agent, to: Status, correlation_id: &str) -> Result<(), NodeError> {
        let from = self.status;
        if !from.can_become(to) {
            return Err(internal(IllegalTransition { from, to }.to_string()));
        }
        self.status = to;
        let change = StatusChange { from: Some(from), to, at_ms: now_ms(), agent };
        self.push(agent.as_str(), correlation_id, AuditRecord::StatusChange(change));
        Ok(())
    }

    /// Streams a tool call and its result, and writes it to the trail.
    // The call's parts are what the trail records; a struct for them would only be built here.
    #[allow(clippy::too_many_arguments)]
    async fn tool(
        &mut self,
        ctx: &NodeContext,
        started: std::time::Instant,
        actor: Agent,
        correlation_id: &str,
        name: &str,
        arguments: serde_json::Value,
        result: serde_json::Value,
    ) {
        tool_loop::announce(ctx, name, &arguments, &ToolResult::value(result.clone()), started.elapsed()).await;
        self.record_tool(actor, correlation_id, name, arguments, result);
    }

    /// Writes a tool call that was already streamed to the trail.
    fn record_tool(
        &mut self,
        actor: Agent,
        correlation_id: &str,
        name: &str,
        arguments: serde_json::Value,
        result: serde_json::Value,
    ) {
        self.push(actor.as_str(), correlation_id, AuditRecord::Tool { name: name.to_owned(), arguments, result });
    }

    fn finish(mut self) -> InvestigationUpdate {
        if self.status != self.state.status {
            self.update.status = Some(self.status);
        }
        if !self.entries.is_empty() {
            self.update.audit = Some(self.entries);
        }
        self.update
    }
}

/// Writes a node's records (audit entries, index row, pending actions, the mutation's status)
/// before its checkpoint: a crash in between re-runs the node, which overwrites them. The
/// records are keyed in the tenant of the node's thread (a recovered run's too); the mutation's
/// `change_investigation`, in the HR data every tenant shares, follows the default tenant's
/// investigation only, so tenants never overwrite each other's status there.
async fn persist(
    deps: &InvestigationDeps,
    ctx: &NodeContext,
    state: &InvestigationState,
    update: &InvestigationUpdate,
) -> Result<(), NodeError> {
    let store = &deps.tools.store;
    let failed =
        |e| NodeError::with_source(NodeErrorKind::DependencyFailed, "cannot write the investigation records", e);
    let tenant = super::thread_tenant(ctx.thread_id())
        .map_err(|e| NodeError::with_source(NodeErrorKind::Internal, "the thread id names no tenant", e))?;
    let mut after = state.clone();
    after.apply(update.clone());
    if let Some(entries) = &update.audit {
        let entries: Vec<AuditEntry> = entries
            .iter()
            .map(|entry| AuditEntry { investigation_id: tenant.key(&entry.investigation_id), ..entry.clone() })
            .collect();
        store.write_audit(&entries).await.map_err(failed)?;
    }
    if let Some(actions) = &update.actions {
        for action in actions.iter().filter(|a| !state.actions.contains(a)) {
            let keyed = PendingAction {
                action_id: tenant.key(&action.action_id),
                investigation_id: tenant.key(&action.investigation_id),
                ..action.clone()
            };
            store.save_action(&keyed).await.map_err(failed)?;
        }
    }
    let mut record = super::record_of(&after);
    record.investigation_id = tenant.key(&record.investigation_id);
    store.save_investigation(&record).await.map_err(failed)?;
    if after.status != state.status && tenant.is_default() {
        if let Some(mutation) = &after.mutation {
            store.set_change_investigation(&mutation.mutation_id, after.status).await.map_err(failed)?;
        }
    }
    Ok(())
}

fn mutation(state: &InvestigationState) -> Result<&HrMutation, NodeError> {
    state
        .mutation
        .as_ref()
        .ok_or_else(|| NodeError::new(NodeErrorKind::InvalidInput, "the investigation has no mutation"))
}

fn describe(mutation: &HrMutation) -> String {
    format!(
        "Mutation {}: user {} made a {} ({}) on user {} in {} needing {} access, at {}.",
        mutation.mutation_id,
        mutation.changer_id,
        mutation.change_type,
        mutation.description,
        mutation.target_user_id,
        mutation.system,
        mutation.access_level.as_str(),
        mutation.changed_at
    )
}

/// The tools a model may choose from: `lookup_data`.
struct Lookups<'a>(&'a InvestigationDeps);

#[async_trait]
impl tool_loop::Tools for Lookups<'_> {
    fn specs(&self) -> Vec<frontdesk_llm::ToolSpec> {
        vec![tools::lookup_data_spec()]
    }

    async fn call(&self, name: &str, arguments: &str) -> Result<ToolResult, NodeError> {
        if name != tools::LOOKUP_DATA {
            return Ok(ToolResult::error(format!("no tool named {name}")));
        }
        match tool_loop::arguments::<LookupDataArgs>(arguments) {
            Ok(args) => ToolResult::ok(self.0.tools.lookup_data(&args).await?),
            Err(error) => Ok(error),
        }
    }
}

/// A model call that may first look things up ([`tool_loop::answer`]); every lookup the model
/// chose is written to the trail.
async fn answer_with_lookups<T>(
    ctx: &NodeContext,
    deps: &InvestigationDeps,
    journal: &mut Journal<'_>,
    actor: Agent,
    correlation_id: &str,
    request: ChatRequest,
) -> Result<T, NodeError>
where
    T: serde::de::DeserializeOwned + JsonSchema + 'static,
{
    // Lookups made before a failure were made (and streamed): a caller that goes on after the
    // failure (the advisory agent's fallback report) keeps them in the trail too.
    let (answer, used) = match tool_loop::answer(ctx, &deps.llm, request, &Lookups(deps), TOOL_ROUNDS).await {
        Ok(done) => (Ok(done.0), done.1),
        Err(tool_loop::LoopFailed { error, used }) => (Err(error), used),
    };
    for use_ in used {
        journal.record_tool(actor, correlation_id, &use_.name, use_.arguments, use_.result);
    }
    answer
}

// ---------------------------------------------------------------------------------------------

#[derive(Debug, Deserialize, JsonSchema)]
struct Brief {
    /// Two or three sentences for the other agents.
    #[schemars(length(max = 300))]
    summary: String,
}

/// The orchestrator: starts the investigation, reads each agent's result, moves the status on
/// and delegates the next step.
pub struct InvestigationAgent(pub InvestigationDeps);

#[async_trait]
impl Node<InvestigationState> for InvestigationAgent {
    fn description(&self) -> &str {
        "Orchestrates: gathers the mutation's context, delegates to the other agents by agent messages, \
         moves the status on with each result"
    }

    async fn run(&self, state: &InvestigationState, ctx: &NodeContext) -> Output {
        let deps = &self.0;
        let mutation = mutation(state)?;
        let me = Agent::InvestigationAgent;
        let mut journal = Journal::new(state);
        match last_message(state) {
            None => {
                let start = format!("corr-{}-0", state.investigation_id);
                journal.set_status(me, Status::InvestigationStarted, &start)?;
                let mut context = Vec::new();
                for args in [
                    LookupDataArgs { table: tools::Table::HrMutations, key: mutation.mutation_id.clone() },
                    LookupDataArgs { table: tools::Table::Users, key: mutation.changer_id.clone() },
                ] {
                    let started = std::time::Instant::now();
                    let rows = deps.tools.lookup_data(&args).await?;
                    let arguments = serde_json::to_value(&args).map_err(|e| internal(e.to_string()))?;
                    journal.tool(ctx, started, me, &start, tools::LOOKUP_DATA, arguments, rows.clone()).await;
                    context.push(rows);
                }
                let request = ChatRequest {
                    purpose: "investigation_agent.brief".into(),
                    messages: vec![
                        ChatMessage::system(prompts::INVESTIGATION_BRIEF),
                        ChatMessage::user(format!(
                            "{}\nRecords: {}",
                            describe(mutation),
                            serde_json::Value::Array(context)
                        )),
                    ],
                    temperature: Some(0.0),
                    max_tokens: Some(BUDGET_SHORT),
                    ..Default::default()
                };
                let brief: Brief = llm_node::structured(ctx, &deps.llm, request).await?;
                journal.request(
                    Action::CheckRights,
                    serde_json::json!({
                        "mutation_id": mutation.mutation_id,
                        "user_id": mutation.changer_id,
                        "system": mutation.system,
                        "access_level": mutation.access_level,
                        "on": mutation.day(),
                        "brief": brief.summary,
                    }),
                );
            }
            Some(message) if message.receiver == me => {
                let correlation_id = message.correlation_id.clone();
                match message.action {
                    Action::CheckRightsResult => {
                        let rights = state.rights.as_ref().ok_or_else(|| internal("no rights check result"))?;
                        if rights.authorized {
                            journal.set_status(me, Status::Approved, &correlation_id)?;
                            journal
                                .request(Action::GenerateAdvisoryReport, serde_json::json!({"outcome": "authorized"}));
                        } else {
                            journal.set_status(me, Status::ClarificationRequested, &correlation_id)?;
                            journal.request(
                                Action::RequestClarification,
                                serde_json::json!({"user_id": mutation.changer_id, "mutation_id": mutation.mutation_id,
                                    "rights_check": rights.message}),
                            );
                        }
                    }
                    Action::ClarificationResponse => {
                        let claim = state.claim.as_ref().ok_or_else(|| internal("no claim validation"))?;
                        if claim.valid {
                            journal.set_status(me, Status::ManagerVerificationRequested, &correlation_id)?;
                            journal.request(
                                Action::RequestManagerValidation,
                                serde_json::json!({"user_id": mutation.changer_id, "mutation_id": mutation.mutation_id,
                                    "claim": claim.explanation}),
                            );
                        } else {
                            journal.set_status(me, Status::RejectedInvalidClaim, &correlation_id)?;
                            journal.request(
                                Action::GenerateAdvisoryReport,
                                serde_json::json!({"outcome": "invalid_claim"}),
                            );
                        }
                    }
                    Action::ManagerValidationResponse => {
                        let verdict = state.manager.as_ref().ok_or_else(|| internal("no manager decision"))?;
                        let (status, outcome) = match verdict.decision {
                            Decision::Approve => (Status::Approved, "manager_approved"),
                            Decision::Deny => (Status::RejectedManagerDenied, "manager_denied"),
                        };
                        journal.set_status(me, status, &correlation_id)?;
                        journal.request(Action::GenerateAdvisoryReport, serde_json::json!({"outcome": outcome}));
                    }
                    Action::AdvisoryReportResult => {
                        journal.set_status(me, Status::AdvisoryReportGenerated, &correlation_id)?;
                    }
                    other => return Err(internal(format!("the investigation agent cannot handle {other:?}"))),
                }
            }
            Some(message) => {
                return Err(internal(format!("{:?} is addressed to {:?}", message.action, message.receiver)));
            }
        }
        let update = journal.finish();
        persist(deps, ctx, state, &update).await?;
        Ok(NodeOutput::update(update))
    }
}

/// Where the graph routes an agent that failed for good: the investigation agent answers the
/// failed request with an error message and escalates to manual intervention.
pub struct Escalate(pub InvestigationDeps);

#[async_trait]
impl Node<InvestigationState> for Escalate {
    fn description(&self) -> &str {
        "The investigation agent's escalation: an agent failed after its retries; manual intervention and a report"
    }

    async fn run(&self, state: &InvestigationState, ctx: &NodeContext) -> Output {
        let failure = state.failure.clone().ok_or_else(|| internal("escalation without a failure"))?;
        let mut journal = Journal::new(state);
        // A request-for-information agent that failed after a person replied leaves the reply
        // to this node: its action is answered and cannot be answered again.
        if let Some(resume) = &state.unrecorded_reply {
            let request = request_for_information(state);
            match (request, serde_json::from_value::<Reply>(resume.value.clone())) {
                (Some(request), Ok(reply)) => {
                    let correlation_id = request.correlation_id.clone();
                    answered(state, &mut journal, &resume.interrupt_id, &reply, &correlation_id);
                }
                // What made the agent fail (the failure in the trail says so) must not stop
                // the escalation too, or the investigation would be left with neither. The
                // action is answered all the same: its interrupt is, so nobody can reply again.
                (request, reply) => {
                    warn!(
                        investigation_id = %state.investigation_id,
                        action_id = %resume.interrupt_id,
                        open_request = request.is_some(),
                        reply_decodes = reply.is_ok(),
                        "a reply the failed agent was given cannot be recorded; escalating without it"
                    );
                    close_action(state, &mut journal, &resume.interrupt_id, None);
                }
            }
            journal.update.unrecorded_reply = Some(None);
        }
        escalate(&mut journal, failure)?;
        let update = journal.finish();
        persist(&self.0, ctx, state, &update).await?;
        Ok(NodeOutput::update(update))
    }
}

/// The request for information the state's newest message makes, if it is one: what a reply
/// answers.
fn request_for_information(state: &InvestigationState) -> Option<&AgentMessage> {
    last_message(state).filter(|m| matches!(m.action, Action::RequestClarification | Action::RequestManagerValidation))
}

/// Records a reply: the action is answered and the reply is in the trail.
fn answered(
    state: &InvestigationState,
    journal: &mut Journal<'_>,
    action_id: &str,
    reply: &Reply,
    correlation_id: &str,
) {
    let actor = format!("{}:{}", reply.role.as_str(), reply.responder_id);
    journal.push(&actor, correlation_id, AuditRecord::Reply { action_id: action_id.to_owned(), reply: reply.clone() });
    close_action(state, journal, action_id, Some(reply));
}

/// Marks the action answered, with its reply when there is one to keep.
fn close_action(state: &InvestigationState, journal: &mut Journal<'_>, action_id: &str, reply: Option<&Reply>) {
    let mut actions = state.actions.clone();
    for action in actions.iter_mut().filter(|a| a.action_id == action_id) {
        action.status = ActionStatus::Answered;
        action.answered_at_ms = Some(now_ms());
        action.reply = reply.cloned();
    }
    journal.update.actions = Some(actions);
}

/// The investigation agent's escalation of an agent that failed for good: the request it did
/// not answer gets its answer (an error), the failure is recorded, the status becomes
/// `ManualInterventionRequired` and the report is requested.
fn escalate(journal: &mut Journal<'_>, failure: AgentFailure) -> Result<(), NodeError> {
    let me = Agent::InvestigationAgent;
    let state = journal.state;
    let correlation_id = match last_message(state) {
        // The request the failed agent did not answer gets its answer: an error.
        Some(request) if request.status == MessageStatus::Pending => {
            let correlation_id = request.correlation_id.clone();
            if let Some(action) = reply_to(request.action) {
                let mut reply =
                    AgentMessage::new(action, correlation_id.clone(), serde_json::json!({}), MessageStatus::Error);
                reply.error = Some(failure.clone());
                journal.send(reply);
            }
            correlation_id
        }
        _ => format!("corr-{}-0", state.investigation_id),
    };
    journal.push(me.as_str(), &correlation_id, AuditRecord::Error(failure));
    if state.status == Status::Pending {
        // The orchestrator failed before it could mark the start.
        journal.set_status(me, Status::InvestigationStarted, &correlation_id)?;
    }
    // Already escalated when the advisory report failed after an escalation its run kept (the
    // run failed after it, and its retry goes on from there): the status stands.
    if state.status != Status::ManualInterventionRequired {
        journal.set_status(me, Status::ManualInterventionRequired, &correlation_id)?;
    }
    journal.request(Action::GenerateAdvisoryReport, serde_json::json!({"outcome": "manual_intervention"}));
    Ok(())
}

// ---------------------------------------------------------------------------------------------

#[derive(Debug, Deserialize, JsonSchema)]
struct RightsExplanation {
    /// One or two sentences citing the grants found.
    #[schemars(length(max = 300))]
    message: String,
}

pub struct RightsCheckAgent(pub InvestigationDeps);

#[async_trait]
impl Node<InvestigationState> for RightsCheckAgent {
    fn description(&self) -> &str {
        "Checks that the changer held the access the change needs (check_authorization), gathers evidence \
         (lookup_data, by function calling) and explains the result"
    }

    async fn run(&self, state: &InvestigationState, ctx: &NodeContext) -> Output {
        let deps = &self.0;
        let me = Agent::RightsCheckAgent;
        let request = last_message(state)
            .filter(|m| m.action == Action::CheckRights)
            .ok_or_else(|| internal("no check_rights request"))?;
        let correlation_id = request.correlation_id.clone();
        let mutation = mutation(state)?;
        let mut journal = Journal::new(state);
        let args = CheckAuthorizationArgs {
            user_id: mutation.changer_id.clone(),
            system: mutation.system.clone(),
            access_level: mutation.access_level,
            on: mutation.day().to_owned(),
        };
        let started = std::time::Instant::now();
        let result: AuthorizationResult = deps.tools.check_authorization(&args).await?;
        journal.tool(ctx, started, me, &correlation_id, tools::CHECK_AUTHORIZATION, json(&args)?, json(&result)?).await;
        let request = ChatRequest {
            purpose: "rights_check_agent.explain".into(),
            messages: vec![
                ChatMessage::system(prompts::RIGHTS_CHECK),
                ChatMessage::user(format!("{}\nAuthorisation check: {}", describe(mutation), json(&result)?)),
            ],
            temperature: Some(0.0),
            max_tokens: Some(BUDGET_SHORT),
            ..Default::default()
        };
        let explanation: RightsExplanation =
            answer_with_lookups(ctx, deps, &mut journal, me, &correlation_id, request).await?;
        let rights =
            RightsCheck { authorized: result.authorized, evidence: result.grants, message: explanation.message };
        info!(investigation_id = %state.investigation_id, authorized = rights.authorized, "rights checked");
        journal.send(AgentMessage::new(
            Action::CheckRightsResult,
            correlation_id,
            serde_json::json!({"authorized": rights.authorized, "evidence": rights.evidence, "message": rights.message}),
            MessageStatus::Success,
        ));
        journal.update.rights = Some(Some(rights));
        let update = journal.finish();
        persist(deps, ctx, state, &update).await?;
        Ok(NodeOutput::update(update))
    }
}

// ---------------------------------------------------------------------------------------------

#[derive(Debug, Deserialize, JsonSchema)]
struct NotificationDraft {
    #[schemars(length(max = 100))]
    subject: String,
    #[schemars(length(max = 400))]
    body: String,
}

#[derive(Debug, Deserialize)]
struct ClaimExtraction {
    covered_user_id: Option<String>,
    absence: AbsenceKind,
    summary: String,
}

/// The claim's schema, with the known user ids as the only values `covered_user_id` may take.
fn claim_schema(user_ids: &[String]) -> OutputSchema {
    let mut ids: Vec<serde_json::Value> = user_ids.iter().map(|id| serde_json::Value::String(id.clone())).collect();
    ids.push(serde_json::Value::Null);
    OutputSchema::new(serde_json::json!({
        "type": "object",
        "properties": {
            "covered_user_id": {"enum": ids, "description": "The colleague the user stood in for, or null"},
            "absence": {"type": "string", "enum": ["sick_leave", "vacation", "none"]},
            "summary": {"type": "string", "maxLength": 160},
        },
        "required": ["covered_user_id", "absence", "summary"],
    }))
}

/// Asks the changer for a clarification and validates their claim against absence records;
/// asks the manager to approve or deny. Each question is a pending action and an interrupt.
pub struct RequestForInformationAgent(pub InvestigationDeps);

impl RequestForInformationAgent {
    async fn notify(
        &self,
        ctx: &NodeContext,
        state: &InvestigationState,
        journal: &mut Journal<'_>,
        role: ResponderRole,
        recipient: &str,
        correlation_id: &str,
    ) -> Result<InterruptRequest, NodeError> {
        let deps = &self.0;
        let me = Agent::RequestForInformationAgent;
        let mutation = mutation(state)?;
        let (purpose, prompt, awaiting, reason) = match role {
            ResponderRole::Changer => (
                "request_for_information_agent.clarification_notice",
                prompts::CLARIFICATION_NOTICE,
                Status::AwaitingUserResponse,
                AWAITING_CHANGER,
            ),
            ResponderRole::Manager => (
                "request_for_information_agent.manager_notice",
                prompts::MANAGER_NOTICE,
                Status::AwaitingManagerResponse,
                AWAITING_MANAGER,
            ),
        };
        let mut facts = describe(mutation);
        if let Some(claim) = state.claim.as_ref().filter(|_| role == ResponderRole::Manager) {
            facts.push_str(&format!("\nThe user's reason, confirmed by the records: {}", claim.explanation));
        }
        let request = ChatRequest {
            purpose: purpose.into(),
            messages: vec![ChatMessage::system(prompt), ChatMessage::user(facts)],
            temperature: Some(0.0),
            max_tokens: Some(BUDGET_NOTICE),
            ..Default::default()
        };
        let draft: NotificationDraft = llm_node::structured(ctx, &deps.llm, request).await?;
        let action = PendingAction {
            action_id: format!("{}-{}", state.investigation_id, role.as_str()),
            investigation_id: state.investigation_id.clone(),
            mutation_id: mutation.mutation_id.clone(),
            recipient_id: recipient.to_owned(),
            recipient_role: role,
            subject: draft.subject,
            body: draft.body,
            status: ActionStatus::Awaiting,
            created_at_ms: now_ms(),
            answered_at_ms: None,
            reply: None,
        };
        // Notifications are mocked: sending one records it as a pending action.
        let args = serde_json::json!({"recipient_id": recipient, "subject": action.subject, "body": action.body});
        let started = std::time::Instant::now();
        let result = serde_json::json!({"notification_id": action.action_id, "delivery": "mocked"});
        journal.tool(ctx, started, me, correlation_id, tools::SEND_NOTIFICATION, args, result).await;
        journal.push(me.as_str(), correlation_id, AuditRecord::Notification(action.clone()));
        journal.set_status(me, awaiting, correlation_id)?;
        let mut actions = state.actions.clone();
        actions.retain(|a| a.action_id != action.action_id);
        actions.push(action.clone());
        journal.update.actions = Some(actions);
        InterruptRequest::new(action.action_id.clone(), reason, &action)
    }

    async fn validate_claim(
        &self,
        ctx: &NodeContext,
        state: &InvestigationState,
        journal: &mut Journal<'_>,
        reply: &Reply,
        correlation_id: &str,
    ) -> Result<ClaimValidation, NodeError> {
        let deps = &self.0;
        let me = Agent::RequestForInformationAgent;
        let mutation = mutation(state)?;
        let users = deps
            .tools
            .store
            .users()
            .await
            .map_err(|e| NodeError::with_source(NodeErrorKind::DependencyFailed, "cannot read the users", e))?;
        let ids: Vec<String> = users.iter().map(|u| u.user_id.clone()).collect();
        let directory: String =
            users.iter().map(|u| format!("- {}: {} ({})\n", u.user_id, u.name, u.department)).collect();
        let request = ChatRequest {
            purpose: "request_for_information_agent.extract_claim".into(),
            messages: vec![
                ChatMessage::system(prompts::EXTRACT_CLAIM),
                ChatMessage::user(format!(
                    "{}\nUsers:\n{directory}\nThe user's reply:\n{}",
                    describe(mutation),
                    reply.text
                )),
            ],
            temperature: Some(0.0),
            max_tokens: Some(BUDGET_SHORT),
            ..Default::default()
        };
        let outcome = deps
            .llm
            .structured_with::<ClaimExtraction>(
                llm_node::attributed(ctx, request),
                &claim_schema(&ids),
                &llm_node::call_options(ctx),
            )
            .await;
        let claim = llm_node::reported(ctx, outcome).await?;
        let day = mutation.day().to_owned();
        let covered = claim.covered_user_id.filter(|id| ids.contains(id));
        let (valid, explanation) = match (&covered, claim.absence) {
            (None, _) => (false, "the reply names no colleague the user stood in for".to_owned()),
            (Some(_), AbsenceKind::None) => (false, "the reply names no sick leave or vacation".to_owned()),
            (Some(covered), kind) => {
                let table =
                    if kind == AbsenceKind::SickLeave { tools::Table::SickLeave } else { tools::Table::Vacation };
                let args = LookupDataArgs { table, key: covered.clone() };
                let started = std::time::Instant::now();
                let rows = deps.tools.lookup_data(&args).await?;
                let arguments = serde_json::to_value(&args).map_err(|e| internal(e.to_string()))?;
                journal.tool(ctx, started, me, correlation_id, tools::LOOKUP_DATA, arguments, rows.clone()).await;
                let absences: Vec<super::data::Absence> =
                    serde_json::from_value(rows).map_err(|e| internal(e.to_string()))?;
                let absent = absences.iter().find(|a| a.covers(&day));
                let check = CheckAuthorizationArgs {
                    user_id: covered.clone(),
                    system: mutation.system.clone(),
                    access_level: mutation.access_level,
                    on: day.clone(),
                };
                let started = std::time::Instant::now();
                let rights = deps.tools.check_authorization(&check).await?;
                journal
                    .tool(ctx, started, me, correlation_id, tools::CHECK_AUTHORIZATION, json(&check)?, json(&rights)?)
                    .await;
                match absent {
                    None => (false, format!("no {} of {covered} covers {day}", kind.as_str())),
                    Some(_) if !rights.authorized => (
                        false,
                        format!(
                            "{covered} was absent on {day} but does not hold {} access to {} either",
                            mutation.access_level.as_str(),
                            mutation.system
                        ),
                    ),
                    Some(a) => (
                        true,
                        format!(
                            "{covered} was on {} from {} to {}, covering {day}, and holds {} access to {}",
                            kind.as_str(),
                            a.start_date,
                            a.end_date,
                            mutation.access_level.as_str(),
                            mutation.system
                        ),
                    ),
                }
            }
        };
        debug!(investigation_id = %state.investigation_id, valid, summary = %claim.summary, "claim validated");
        Ok(ClaimValidation {
            reply: reply.text.clone(),
            valid,
            covered_user_id: covered,
            absence: claim.absence,
            explanation,
        })
    }
}

#[async_trait]
impl Node<InvestigationState> for RequestForInformationAgent {
    fn description(&self) -> &str {
        "Asks the changer for a clarification (send_notification) and validates the claim against sick leave and \
         vacation (lookup_data); asks the manager to approve or deny. Waits for each reply"
    }

    async fn run(&self, state: &InvestigationState, ctx: &NodeContext) -> Output {
        let deps = &self.0;
        let request = request_for_information(state).ok_or_else(|| internal("no request for information"))?;
        let correlation_id = request.correlation_id.clone();
        let role = if request.action == Action::RequestClarification {
            ResponderRole::Changer
        } else {
            ResponderRole::Manager
        };
        let mutation = mutation(state)?;
        let mut journal = Journal::new(state);
        let Some(resume) = ctx.resume() else {
            let recipient = match role {
                ResponderRole::Changer => mutation.changer_id.clone(),
                ResponderRole::Manager => {
                    let changer = deps.tools.store.user(&mutation.changer_id).await.map_err(|e| {
                        NodeError::with_source(NodeErrorKind::DependencyFailed, "cannot read the changer", e)
                    })?;
                    changer.and_then(|u| u.manager_id).ok_or_else(|| {
                        NodeError::new(
                            NodeErrorKind::InvalidInput,
                            format!("user {} has no manager to ask", mutation.changer_id),
                        )
                    })?
                }
            };
            let interrupt = self.notify(ctx, state, &mut journal, role, &recipient, &correlation_id).await?;
            let update = journal.finish();
            persist(deps, ctx, state, &update).await?;
            return Ok(NodeOutput::interrupt(update, interrupt));
        };
        let reply: Reply = serde_json::from_value(resume.value.clone())
            .map_err(|e| NodeError::with_source(NodeErrorKind::InvalidInput, "the reply does not decode", e))?;
        // Should this node fail for good from here on, the runtime hands the reply to the
        // failure route, and the escalation records it.
        answered(state, &mut journal, &resume.interrupt_id, &reply, &correlation_id);
        match role {
            ResponderRole::Changer => {
                let claim = self.validate_claim(ctx, state, &mut journal, &reply, &correlation_id).await?;
                journal.send(AgentMessage::new(
                    Action::ClarificationResponse,
                    correlation_id,
                    serde_json::json!({"claim_valid": claim.valid, "covered_user_id": claim.covered_user_id,
                        "absence": claim.absence, "explanation": claim.explanation}),
                    MessageStatus::Success,
                ));
                journal.update.claim = Some(Some(claim));
            }
            ResponderRole::Manager => {
                let decision = reply.decision.ok_or_else(|| {
                    NodeError::new(NodeErrorKind::InvalidInput, "the manager's reply has no decision")
                })?;
                let verdict =
                    ManagerVerdict { manager_id: reply.responder_id.clone(), decision, comment: reply.text.clone() };
                journal.send(AgentMessage::new(
                    Action::ManagerValidationResponse,
                    correlation_id,
                    serde_json::json!({"approved": decision == Decision::Approve, "manager_id": verdict.manager_id,
                        "comment": verdict.comment}),
                    MessageStatus::Success,
                ));
                journal.update.manager = Some(Some(verdict));
            }
        }
        let update = journal.finish();
        persist(deps, ctx, state, &update).await?;
        Ok(NodeOutput::update(update))
    }
}

// ---------------------------------------------------------------------------------------------

#[derive(Debug, Deserialize, JsonSchema)]
struct ReportDraft {
    /// One to three sentences.
    #[schemars(length(max = 300))]
    summary: String,
    /// The change, the checks, the replies and the outcome.
    #[schemars(length(max = 800))]
    details: String,
}

pub struct AdvisoryAgent(pub InvestigationDeps);

impl AdvisoryAgent {
    /// The facts the report rests on, for the model and for a report written without it.
    fn findings(state: &InvestigationState, mutation: &HrMutation) -> String {
        let mut facts = describe(mutation);
        if let Some(rights) = &state.rights {
            facts.push_str(&format!("\nAuthorisation check: authorized={}. {}", rights.authorized, rights.message));
        }
        if let Some(claim) = &state.claim {
            facts.push_str(&format!(
                "\nUser's claim: \"{}\" - valid={}: {}",
                claim.reply, claim.valid, claim.explanation
            ));
        }
        if let Some(verdict) = &state.manager {
            facts.push_str(&format!("\nManager {}: {:?}. {}", verdict.manager_id, verdict.decision, verdict.comment));
        }
        if let Some(failure) = &state.failure {
            facts.push_str(&format!("\nAn agent failed after {} attempts: {}", failure.attempts, failure.message));
        }
        facts.push_str(&format!("\nOutcome: {}", state.status.as_str()));
        facts
    }
}

#[async_trait]
impl Node<InvestigationState> for AdvisoryAgent {
    fn description(&self) -> &str {
        "Writes the advisory report (generate_report): summary, recommendation accept / reject-investigate / \
         manual intervention, details; may gather evidence (lookup_data, by function calling)"
    }

    async fn run(&self, state: &InvestigationState, ctx: &NodeContext) -> Output {
        let deps = &self.0;
        let me = Agent::AdvisoryAgent;
        let request = last_message(state)
            .filter(|m| m.action == Action::GenerateAdvisoryReport)
            .ok_or_else(|| internal("no generate_advisory_report request"))?;
        let correlation_id = request.correlation_id.clone();
        let mutation = mutation(state)?;
        let recommendation = Recommendation::for_outcome(state.status);
        let findings = Self::findings(state, mutation);
        let mut journal = Journal::new(state);
        let request = ChatRequest {
            purpose: "advisory_agent.report".into(),
            messages: vec![
                ChatMessage::system(prompts::ADVISORY),
                ChatMessage::user(format!("{findings}\nRecommendation: {recommendation:?}")),
            ],
            temperature: Some(0.0),
            max_tokens: Some(BUDGET_REPORT),
            ..Default::default()
        };
        let draft =
            match answer_with_lookups::<ReportDraft>(ctx, deps, &mut journal, me, &correlation_id, request).await {
                Ok(draft) => draft,
                // Escalation must end in a report even when the model is what failed: this one is
                // written from the findings alone, and says so; the failure is in the trail.
                Err(error) if state.status == Status::ManualInterventionRequired => {
                    let failure = AgentFailure {
                        kind: format!("{:?}", error.kind),
                        message: error.message.clone(),
                        attempts: ctx.attempt(),
                    };
                    journal.push(me.as_str(), &correlation_id, AuditRecord::Error(failure));
                    ReportDraft {
                        summary: format!(
                            "Mutation {} needs manual review: the investigation could not complete (the report was \
                         written without the model, which also failed).",
                            mutation.mutation_id
                        ),
                        details: findings.clone(),
                    }
                }
                Err(error) => return Err(error),
            };
        let args = GenerateReportArgs {
            mutation_id: mutation.mutation_id.clone(),
            recommendation,
            summary: draft.summary,
            details: draft.details,
        };
        let started = std::time::Instant::now();
        let report = deps.tools.generate_report(&args);
        journal.tool(ctx, started, me, &correlation_id, tools::GENERATE_REPORT, json(&args)?, json(&report)?).await;
        journal.send(AgentMessage::new(
            Action::AdvisoryReportResult,
            correlation_id,
            serde_json::json!({"report_id": report.report_id, "recommendation": report.recommendation, "summary": report.summary}),
            MessageStatus::Success,
        ));
        journal.update.report = Some(Some(report));
        let update = journal.finish();
        persist(deps, ctx, state, &update).await?;
        Ok(NodeOutput::update(update))
    }
}

/// JSON of the tools' typed arguments and results, for events and the trail. One that does not
/// encode is a bug, an `Internal` failure of the node rather than a `null` in the audit trail.
fn json<T: serde::Serialize>(value: &T) -> Result<serde_json::Value, NodeError> {
    serde_json::to_value(value)
        .map_err(|e| NodeError::with_source(NodeErrorKind::Internal, "cannot encode a tool call for the trail", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure() -> AgentFailure {
        AgentFailure { kind: "DependencyFailed".into(), message: "the store refused".into(), attempts: 3 }
    }

    #[test]
    fn an_escalation_moves_an_investigation_in_progress_to_manual_intervention() {
        let state = InvestigationState {
            investigation_id: "INV-1".into(),
            status: Status::AwaitingUserResponse,
            ..Default::default()
        };
        let mut journal = Journal::new(&state);
        escalate(&mut journal, failure()).unwrap();
        assert_eq!(journal.status, Status::ManualInterventionRequired);
    }

    #[test]
    fn an_escalation_of_an_escalated_investigation_keeps_its_status() {
        let state = InvestigationState {
            investigation_id: "INV-1".into(),
            status: Status::ManualInterventionRequired,
            ..Default::default()
        };
        let mut journal = Journal::new(&state);
        escalate(&mut journal, failure()).expect("not an illegal transition to the same status");
        assert_eq!(journal.status, Status::ManualInterventionRequired);
        let changes = journal.entries.iter().filter(|e| matches!(e.record, AuditRecord::StatusChange(_))).count();
        assert_eq!(changes, 0, "no status change recorded");
        let errors = journal.entries.iter().filter(|e| matches!(e.record, AuditRecord::Error(_))).count();
        assert_eq!(errors, 1, "the failure is on the trail");
    }
}
