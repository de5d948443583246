//! The investigation's vocabulary: agents and the actions of their communication matrix, the
//! message envelope, the status machine, and the records an investigation produces.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The four agents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum Agent {
    InvestigationAgent,
    RightsCheckAgent,
    RequestForInformationAgent,
    AdvisoryAgent,
}

impl Agent {
    pub const ALL: [Agent; 4] =
        [Agent::InvestigationAgent, Agent::RightsCheckAgent, Agent::RequestForInformationAgent, Agent::AdvisoryAgent];

    /// The agent's name, as the envelope and the audit trail show it.
    pub fn as_str(self) -> &'static str {
        match self {
            Agent::InvestigationAgent => "InvestigationAgent",
            Agent::RightsCheckAgent => "RightsCheckAgent",
            Agent::RequestForInformationAgent => "RequestForInformationAgent",
            Agent::AdvisoryAgent => "AdvisoryAgent",
        }
    }

    /// The graph node that is this agent.
    pub fn node(self) -> &'static str {
        match self {
            Agent::InvestigationAgent => super::nodes::INVESTIGATION,
            Agent::RightsCheckAgent => super::nodes::RIGHTS_CHECK,
            Agent::RequestForInformationAgent => super::nodes::REQUEST_FOR_INFORMATION,
            Agent::AdvisoryAgent => super::nodes::ADVISORY,
        }
    }
}

/// The actions of the communication matrix. A message's sender and receiver follow from its
/// action ([`Action::route`]), so a message outside the matrix cannot be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    CheckRights,
    RequestClarification,
    RequestManagerValidation,
    GenerateAdvisoryReport,
    CheckRightsResult,
    ClarificationResponse,
    ManagerValidationResponse,
    AdvisoryReportResult,
}

impl Action {
    pub const ALL: [Action; 8] = [
        Action::CheckRights,
        Action::RequestClarification,
        Action::RequestManagerValidation,
        Action::GenerateAdvisoryReport,
        Action::CheckRightsResult,
        Action::ClarificationResponse,
        Action::ManagerValidationResponse,
        Action::AdvisoryReportResult,
    ];

    /// The matrix: (sender, receiver) of each action.
    pub fn route(self) -> (Agent, Agent) {
        use Agent::*;
        match self {
            Action::CheckRights => (InvestigationAgent, RightsCheckAgent),
            Action::RequestClarification => (InvestigationAgent, RequestForInformationAgent),
            Action::RequestManagerValidation => (InvestigationAgent, RequestForInformationAgent),
            Action::GenerateAdvisoryReport => (InvestigationAgent, AdvisoryAgent),
            Action::CheckRightsResult => (RightsCheckAgent, InvestigationAgent),
            Action::ClarificationResponse => (RequestForInformationAgent, InvestigationAgent),
            Action::ManagerValidationResponse => (RequestForInformationAgent, InvestigationAgent),
            Action::AdvisoryReportResult => (AdvisoryAgent, InvestigationAgent),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Action::CheckRights => "check_rights",
            Action::RequestClarification => "request_clarification",
            Action::RequestManagerValidation => "request_manager_validation",
            Action::GenerateAdvisoryReport => "generate_advisory_report",
            Action::CheckRightsResult => "check_rights_result",
            Action::ClarificationResponse => "clarification_response",
            Action::ManagerValidationResponse => "manager_validation_response",
            Action::AdvisoryReportResult => "advisory_report_result",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MessageStatus {
    /// A request, not yet answered.
    Pending,
    Success,
    Error,
}

/// Why an agent's work failed, carried by a message with [`MessageStatus::Error`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentFailure {
    /// The runtime's failure kind, e.g. `ModelUnavailable`.
    pub kind: String,
    pub message: String,
    pub attempts: u32,
}

/// The envelope of every message between agents.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentMessage {
    pub sender: Agent,
    pub receiver: Agent,
    pub action: Action,
    /// Investigation context and findings (a JSON object).
    pub context: serde_json::Value,
    /// Shared by a request and its result.
    pub correlation_id: String,
    /// Milliseconds since the Unix epoch.
    pub timestamp_ms: i64,
    pub status: MessageStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<AgentFailure>,
}

impl AgentMessage {
    /// A message of `action`, from and to the agents the matrix names.
    pub fn new(action: Action, correlation_id: String, context: serde_json::Value, status: MessageStatus) -> Self {
        let (sender, receiver) = action.route();
        Self { sender, receiver, action, context, correlation_id, timestamp_ms: now_ms(), status, error: None }
    }

    /// Whether sender and receiver are the ones the matrix gives the action.
    pub fn follows_matrix(&self) -> bool {
        self.action.route() == (self.sender, self.receiver)
    }
}

/// The status machine of an investigation (and of its mutation's `change_investigation`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum Status {
    #[default]
    Pending,
    InvestigationStarted,
    ClarificationRequested,
    AwaitingUserResponse,
    RejectedInvalidClaim,
    ManagerVerificationRequested,
    AwaitingManagerResponse,
    Approved,
    RejectedManagerDenied,
    ManualInterventionRequired,
    AdvisoryReportGenerated,
}

/// The legal transitions, as docs/workflows/investigation.md draws them. The last group is the
/// escalation of an agent that failed for good: the documented error handling sends any failed
/// agent to manual intervention, so each in-progress status may go there (the diagram draws the
/// edge from the first of them only).
pub const TRANSITIONS: &[(Status, Status)] = &[
    (Status::Pending, Status::InvestigationStarted),
    (Status::InvestigationStarted, Status::Approved),
    (Status::InvestigationStarted, Status::ClarificationRequested),
    (Status::ClarificationRequested, Status::AwaitingUserResponse),
    (Status::AwaitingUserResponse, Status::RejectedInvalidClaim),
    (Status::AwaitingUserResponse, Status::ManagerVerificationRequested),
    (Status::ManagerVerificationRequested, Status::AwaitingManagerResponse),
    (Status::AwaitingManagerResponse, Status::Approved),
    (Status::AwaitingManagerResponse, Status::RejectedManagerDenied),
    (Status::Approved, Status::AdvisoryReportGenerated),
    (Status::RejectedInvalidClaim, Status::AdvisoryReportGenerated),
    (Status::RejectedManagerDenied, Status::AdvisoryReportGenerated),
    (Status::InvestigationStarted, Status::ManualInterventionRequired),
    (Status::ManualInterventionRequired, Status::AdvisoryReportGenerated),
    // Escalation of a failed agent from the other in-progress statuses.
    (Status::ClarificationRequested, Status::ManualInterventionRequired),
    (Status::AwaitingUserResponse, Status::ManualInterventionRequired),
    (Status::ManagerVerificationRequested, Status::ManualInterventionRequired),
    (Status::AwaitingManagerResponse, Status::ManualInterventionRequired),
    (Status::Approved, Status::ManualInterventionRequired),
    (Status::RejectedInvalidClaim, Status::ManualInterventionRequired),
    (Status::RejectedManagerDenied, Status::ManualInterventionRequired),
];

impl Status {
    pub const ALL: [Status; 11] = [
        Status::Pending,
        Status::InvestigationStarted,
        Status::ClarificationRequested,
        Status::AwaitingUserResponse,
        Status::RejectedInvalidClaim,
        Status::ManagerVerificationRequested,
        Status::AwaitingManagerResponse,
        Status::Approved,
        Status::RejectedManagerDenied,
        Status::ManualInterventionRequired,
        Status::AdvisoryReportGenerated,
    ];

    pub fn can_become(self, to: Status) -> bool {
        TRANSITIONS.contains(&(self, to))
    }

    /// The name kept in the database (`hr_mutations.change_investigation`, `investigations.status`).
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "Pending",
            Status::InvestigationStarted => "InvestigationStarted",
            Status::ClarificationRequested => "ClarificationRequested",
            Status::AwaitingUserResponse => "AwaitingUserResponse",
            Status::RejectedInvalidClaim => "RejectedInvalidClaim",
            Status::ManagerVerificationRequested => "ManagerVerificationRequested",
            Status::AwaitingManagerResponse => "AwaitingManagerResponse",
            Status::Approved => "Approved",
            Status::RejectedManagerDenied => "RejectedManagerDenied",
            Status::ManualInterventionRequired => "ManualInterventionRequired",
            Status::AdvisoryReportGenerated => "AdvisoryReportGenerated",
        }
    }

    pub fn parse(s: &str) -> Option<Status> {
        Status::ALL.into_iter().find(|status| status.as_str() == s)
    }

    pub fn is_final(self) -> bool {
        self == Status::AdvisoryReportGenerated
    }
}

/// A transition the table does not allow; a node that asks for one fails instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("illegal status transition {from:?} -> {to:?}")]
pub struct IllegalTransition {
    pub from: Status,
    pub to: Status,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusChange {
    /// `None` for the first status.
    pub from: Option<Status>,
    pub to: Status,
    pub at_ms: i64,
    pub agent: Agent,
}

/// An HR mutation: a change a user made in a system.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HrMutation {
    pub mutation_id: String,
    pub changer_id: String,
    pub target_user_id: String,
    pub system: String,
    pub access_level: AccessLevel,
    pub change_type: String,
    pub description: String,
    /// RFC 3339, UTC, e.g. `2025-11-10T09:00:00Z`.
    pub changed_at: String,
}

impl HrMutation {
    /// The day of the change, `YYYY-MM-DD`.
    pub fn day(&self) -> &str {
        self.changed_at.get(..10).unwrap_or(&self.changed_at)
    }
}

/// Access levels, ordered: a grant of a level covers the levels below it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema)]
pub enum AccessLevel {
    Read,
    Write,
    Admin,
}

impl AccessLevel {
    pub fn as_str(self) -> &'static str {
        match self {
            AccessLevel::Read => "Read",
            AccessLevel::Write => "Write",
            AccessLevel::Admin => "Admin",
        }
    }

    pub fn parse(s: &str) -> Option<AccessLevel> {
        match s {
            "Read" => Some(AccessLevel::Read),
            "Write" => Some(AccessLevel::Write),
            "Admin" => Some(AccessLevel::Admin),
            _ => None,
        }
    }
}

/// What the rights-check agent found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RightsCheck {
    pub authorized: bool,
    /// The grants that bear on the change (role and direct).
    pub evidence: Vec<super::tools::Grant>,
    /// The agent's explanation.
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AbsenceKind {
    SickLeave,
    Vacation,
    /// The reply names no absence.
    None,
}

impl AbsenceKind {
    pub fn as_str(self) -> &'static str {
        match self {
            AbsenceKind::SickLeave => "sick_leave",
            AbsenceKind::Vacation => "vacation",
            AbsenceKind::None => "none",
        }
    }
}

/// The changer's claim, as the request-for-information agent validated it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClaimValidation {
    pub reply: String,
    pub valid: bool,
    pub covered_user_id: Option<String>,
    pub absence: AbsenceKind,
    pub explanation: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Approve,
    Deny,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManagerVerdict {
    pub manager_id: String,
    pub decision: Decision,
    pub comment: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Recommendation {
    Accept,
    RejectInvestigate,
    ManualIntervention,
}

impl Recommendation {
    /// The recommendation an outcome calls for: the facts decide it, the model explains it.
    pub fn for_outcome(status: Status) -> Recommendation {
        match status {
            Status::Approved => Recommendation::Accept,
            Status::RejectedInvalidClaim | Status::RejectedManagerDenied => Recommendation::RejectInvestigate,
            _ => Recommendation::ManualIntervention,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AdvisoryReport {
    pub report_id: String,
    pub summary: String,
    pub recommendation: Recommendation,
    pub details: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResponderRole {
    Changer,
    Manager,
}

impl ResponderRole {
    pub fn as_str(self) -> &'static str {
        match self {
            ResponderRole::Changer => "changer",
            ResponderRole::Manager => "manager",
        }
    }

    pub fn parse(s: &str) -> Option<ResponderRole> {
        match s {
            "changer" => Some(ResponderRole::Changer),
            "manager" => Some(ResponderRole::Manager),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActionStatus {
    Awaiting,
    Answered,
}

impl ActionStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ActionStatus::Awaiting => "awaiting",
            ActionStatus::Answered => "answered",
        }
    }

    pub fn parse(s: &str) -> Option<ActionStatus> {
        match s {
            "awaiting" => Some(ActionStatus::Awaiting),
            "answered" => Some(ActionStatus::Answered),
            _ => None,
        }
    }
}

/// A (mocked) notification awaiting a person's reply; its id is the id of the interrupt the
/// investigation waits on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingAction {
    pub action_id: String,
    pub investigation_id: String,
    pub mutation_id: String,
    pub recipient_id: String,
    pub recipient_role: ResponderRole,
    pub subject: String,
    pub body: String,
    pub status: ActionStatus,
    pub created_at_ms: i64,
    pub answered_at_ms: Option<i64>,
    pub reply: Option<Reply>,
}

/// A person's reply to a pending action: the resume value of its interrupt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reply {
    pub role: ResponderRole,
    pub responder_id: String,
    /// The changer's clarification, or the manager's comment.
    pub text: String,
    /// The manager's decision; `None` for the changer.
    pub decision: Option<Decision>,
}

/// One entry of the audit trail.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditEntry {
    pub investigation_id: String,
    /// Position in the investigation's trail, from 1.
    pub seq: u32,
    pub correlation_id: String,
    pub at_ms: i64,
    /// Who acted: an agent's name, or `changer:<id>` / `manager:<id>` for a reply.
    pub actor: String,
    pub record: AuditRecord,
}

/// Tagged by `type`: `kind` is a field of [`AgentFailure`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AuditRecord {
    Message(AgentMessage),
    StatusChange(StatusChange),
    Tool { name: String, arguments: serde_json::Value, result: serde_json::Value },
    Notification(PendingAction),
    Reply { action_id: String, reply: Reply },
    Error(AgentFailure),
}

impl AuditRecord {
    /// The `kind` column of the audit table.
    pub fn kind(&self) -> &'static str {
        match self {
            AuditRecord::Message(_) => "message",
            AuditRecord::StatusChange(_) => "status_change",
            AuditRecord::Tool { .. } => "tool",
            AuditRecord::Notification(_) => "notification",
            AuditRecord::Reply { .. } => "reply",
            AuditRecord::Error(_) => "error",
        }
    }
}

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_action_has_one_route_and_the_matrix_is_the_documented_one() {
        use Agent::*;
        let matrix: Vec<(Agent, Agent, &str)> =
            Action::ALL.iter().map(|a| (a.route().0, a.route().1, a.as_str())).collect();
        assert_eq!(
            matrix,
            vec![
                (InvestigationAgent, RightsCheckAgent, "check_rights"),
                (InvestigationAgent, RequestForInformationAgent, "request_clarification"),
                (InvestigationAgent, RequestForInformationAgent, "request_manager_validation"),
                (InvestigationAgent, AdvisoryAgent, "generate_advisory_report"),
                (RightsCheckAgent, InvestigationAgent, "check_rights_result"),
                (RequestForInformationAgent, InvestigationAgent, "clarification_response"),
                (RequestForInformationAgent, InvestigationAgent, "manager_validation_response"),
                (AdvisoryAgent, InvestigationAgent, "advisory_report_result"),
            ]
        );
        for action in Action::ALL {
            let message = AgentMessage::new(action, "c".into(), serde_json::json!({}), MessageStatus::Pending);
            assert!(message.follows_matrix());
            let json = serde_json::to_value(&message).unwrap();
            assert_eq!(json["action"], action.as_str());
        }
        // An action outside the matrix does not deserialize.
        let bad = serde_json::json!({"sender": "InvestigationAgent", "receiver": "AdvisoryAgent",
            "action": "delete_everything", "context": {}, "correlation_id": "c", "timestamp_ms": 0, "status": "pending"});
        assert!(serde_json::from_value::<AgentMessage>(bad).is_err());
    }

    #[test]
    fn transitions_reach_every_status_and_refuse_the_rest() {
        let legal = TRANSITIONS.len();
        let mut refused = 0;
        for from in Status::ALL {
            for to in Status::ALL {
                if !from.can_become(to) {
                    refused += 1;
                }
            }
        }
        assert_eq!(legal + refused, Status::ALL.len() * Status::ALL.len());
        // Nothing leaves the final status, nothing returns to Pending.
        assert!(Status::ALL.iter().all(|to| !Status::AdvisoryReportGenerated.can_become(*to)));
        assert!(Status::ALL.iter().all(|from| !from.can_become(Status::Pending)));
        assert!(!Status::Pending.can_become(Status::Approved));
        assert!(!Status::AwaitingUserResponse.can_become(Status::Approved));
        for status in Status::ALL {
            assert_eq!(Status::parse(status.as_str()), Some(status));
        }
    }

    #[test]
    fn every_audit_record_round_trips() {
        let failure = AgentFailure { kind: "ModelUnavailable".into(), message: "down".into(), attempts: 3 };
        let reply = Reply {
            role: ResponderRole::Manager,
            responder_id: "u001".into(),
            text: "ok".into(),
            decision: Some(Decision::Deny),
        };
        let action = PendingAction {
            action_id: "INV-1-changer".into(),
            investigation_id: "INV-1".into(),
            mutation_id: "1".into(),
            recipient_id: "u003".into(),
            recipient_role: ResponderRole::Changer,
            subject: "s".into(),
            body: "b".into(),
            status: ActionStatus::Answered,
            created_at_ms: 1,
            answered_at_ms: Some(2),
            reply: Some(reply.clone()),
        };
        let records = [
            AuditRecord::Message(AgentMessage::new(
                Action::CheckRights,
                "c".into(),
                serde_json::json!({"a": 1}),
                MessageStatus::Pending,
            )),
            AuditRecord::StatusChange(StatusChange {
                from: None,
                to: Status::Pending,
                at_ms: 3,
                agent: Agent::InvestigationAgent,
            }),
            AuditRecord::Tool {
                name: "lookup_data".into(),
                arguments: serde_json::json!({}),
                result: serde_json::json!([]),
            },
            AuditRecord::Notification(action),
            AuditRecord::Reply { action_id: "INV-1-manager".into(), reply },
            AuditRecord::Error(failure),
        ];
        for record in records {
            let json = serde_json::to_string(&record).unwrap();
            assert_eq!(serde_json::from_str::<AuditRecord>(&json).unwrap(), record, "{json}");
        }
    }
}
