//! Investigation ⇄ proto conversions. Each destructures its source completely, so a field added
//! on either side breaks the build until it is handled here.

use frontdesk_api::v1 as pb;
use frontdesk_workflows::{
    investigation::{
        AbsenceKind, AccessLevel, Action, ActionStatus, AdvisoryReport, Agent, AgentFailure, AgentMessage, AuditEntry,
        AuditRecord, ClaimValidation, Decision, HrMutation, InvestigationProgress, InvestigationView, ManagerVerdict,
        MessageStatus, PendingAction, Recommendation, Reply, ResponderRole, RightsCheck, Status, StatusChange,
    },
    WorkflowError,
};

use crate::convert::ms_timestamp;

fn ts(ms: i64) -> prost_types::Timestamp {
    ms_timestamp(u64::try_from(ms).unwrap_or(0))
}

pub fn status(s: Status) -> pb::InvestigationStatus {
    match s {
        Status::Pending => pb::InvestigationStatus::Pending,
        Status::InvestigationStarted => pb::InvestigationStatus::InvestigationStarted,
        Status::ClarificationRequested => pb::InvestigationStatus::ClarificationRequested,
        Status::AwaitingUserResponse => pb::InvestigationStatus::AwaitingUserResponse,
        Status::RejectedInvalidClaim => pb::InvestigationStatus::RejectedInvalidClaim,
        Status::ManagerVerificationRequested => pb::InvestigationStatus::ManagerVerificationRequested,
        Status::AwaitingManagerResponse => pb::InvestigationStatus::AwaitingManagerResponse,
        Status::Approved => pb::InvestigationStatus::Approved,
        Status::RejectedManagerDenied => pb::InvestigationStatus::RejectedManagerDenied,
        Status::ManualInterventionRequired => pb::InvestigationStatus::ManualInterventionRequired,
        Status::AdvisoryReportGenerated => pb::InvestigationStatus::AdvisoryReportGenerated,
    }
}

/// A status filter: `None` for UNSPECIFIED; `Err` for a value outside the enum.
pub fn status_filter(value: i32) -> Result<Option<Status>, ()> {
    Ok(Some(match pb::InvestigationStatus::try_from(value).map_err(drop)? {
        pb::InvestigationStatus::Unspecified => return Ok(None),
        pb::InvestigationStatus::Pending => Status::Pending,
        pb::InvestigationStatus::InvestigationStarted => Status::InvestigationStarted,
        pb::InvestigationStatus::ClarificationRequested => Status::ClarificationRequested,
        pb::InvestigationStatus::AwaitingUserResponse => Status::AwaitingUserResponse,
        pb::InvestigationStatus::RejectedInvalidClaim => Status::RejectedInvalidClaim,
        pb::InvestigationStatus::ManagerVerificationRequested => Status::ManagerVerificationRequested,
        pb::InvestigationStatus::AwaitingManagerResponse => Status::AwaitingManagerResponse,
        pb::InvestigationStatus::Approved => Status::Approved,
        pb::InvestigationStatus::RejectedManagerDenied => Status::RejectedManagerDenied,
        pb::InvestigationStatus::ManualInterventionRequired => Status::ManualInterventionRequired,
        pb::InvestigationStatus::AdvisoryReportGenerated => Status::AdvisoryReportGenerated,
    }))
}

fn agent(a: Agent) -> pb::Agent {
    match a {
        Agent::InvestigationAgent => pb::Agent::Investigation,
        Agent::RightsCheckAgent => pb::Agent::RightsCheck,
        Agent::RequestForInformationAgent => pb::Agent::RequestForInformation,
        Agent::AdvisoryAgent => pb::Agent::Advisory,
    }
}

fn action(a: Action) -> pb::AgentAction {
    match a {
        Action::CheckRights => pb::AgentAction::CheckRights,
        Action::RequestClarification => pb::AgentAction::RequestClarification,
        Action::RequestManagerValidation => pb::AgentAction::RequestManagerValidation,
        Action::GenerateAdvisoryReport => pb::AgentAction::GenerateAdvisoryReport,
        Action::CheckRightsResult => pb::AgentAction::CheckRightsResult,
        Action::ClarificationResponse => pb::AgentAction::ClarificationResponse,
        Action::ManagerValidationResponse => pb::AgentAction::ManagerValidationResponse,
        Action::AdvisoryReportResult => pb::AgentAction::AdvisoryReportResult,
    }
}

pub fn role(r: ResponderRole) -> pb::ResponderRole {
    match r {
        ResponderRole::Changer => pb::ResponderRole::Changer,
        ResponderRole::Manager => pb::ResponderRole::Manager,
    }
}

fn decision(d: Option<Decision>) -> pb::ManagerDecision {
    match d {
        None => pb::ManagerDecision::Unspecified,
        Some(Decision::Approve) => pb::ManagerDecision::Approve,
        Some(Decision::Deny) => pb::ManagerDecision::Deny,
    }
}

pub fn action_status(s: ActionStatus) -> pb::PendingActionStatus {
    match s {
        ActionStatus::Awaiting => pb::PendingActionStatus::Awaiting,
        ActionStatus::Answered => pb::PendingActionStatus::Answered,
    }
}

fn error(e: AgentFailure) -> pb::AgentError {
    let AgentFailure { kind, message, attempts } = e;
    pb::AgentError { reason: kind, message, attempts }
}

pub fn message(m: AgentMessage) -> pb::AgentMessage {
    let AgentMessage { sender, receiver, action: act, context, correlation_id, timestamp_ms, status, error: failure } =
        m;
    pb::AgentMessage {
        sender: agent(sender) as i32,
        receiver: agent(receiver) as i32,
        action: action(act) as i32,
        context_json: context.to_string(),
        correlation_id,
        timestamp: Some(ts(timestamp_ms)),
        status: match status {
            MessageStatus::Pending => pb::AgentMessageStatus::Pending,
            MessageStatus::Success => pb::AgentMessageStatus::Success,
            MessageStatus::Error => pb::AgentMessageStatus::Error,
        } as i32,
        error: failure.map(error),
    }
}

pub fn status_change(c: StatusChange) -> pb::StatusChange {
    let StatusChange { from, to, at_ms, agent: by } = c;
    pb::StatusChange {
        from: from.map_or(pb::InvestigationStatus::Unspecified, status) as i32,
        to: status(to) as i32,
        time: Some(ts(at_ms)),
        agent: agent(by) as i32,
    }
}

pub fn pending_action(a: PendingAction) -> pb::PendingAction {
    let PendingAction {
        action_id,
        investigation_id,
        mutation_id,
        recipient_id,
        recipient_role,
        subject,
        body,
        status: action_state,
        created_at_ms,
        answered_at_ms,
        reply,
    } = a;
    pb::PendingAction {
        action_id,
        investigation_id,
        mutation_id,
        recipient_id,
        recipient_role: role(recipient_role) as i32,
        subject,
        body,
        status: action_status(action_state) as i32,
        created_at: Some(ts(created_at_ms)),
        answered_at: answered_at_ms.map(ts),
        reply_json: reply.map(|r| serde_json::to_string(&r).unwrap_or_default()).unwrap_or_default(),
    }
}

pub fn mutation(m: HrMutation, investigation: Status) -> pb::HrMutation {
    let HrMutation {
        mutation_id,
        changer_id,
        target_user_id,
        system,
        access_level,
        change_type,
        description,
        changed_at,
    } = m;
    pb::HrMutation {
        mutation_id,
        changer_id,
        target_user_id,
        system,
        access_level: access_level.as_str().to_owned(),
        change_type,
        description,
        changed_at: time::parse(&changed_at),
        change_investigation: status(investigation) as i32,
    }
}

/// A mutation given inline; its `change_investigation` is the server's to set and is ignored.
pub fn inline_mutation(m: pb::HrMutation) -> Result<HrMutation, WorkflowError> {
    let pb::HrMutation {
        mutation_id,
        changer_id,
        target_user_id,
        system,
        access_level,
        change_type,
        description,
        changed_at,
        change_investigation: _,
    } = m;
    // The ids are checked by the desk, against the characters an id may have.
    WorkflowError::reject_nul_in(&[
        ("inline_mutation.change_type", &change_type),
        ("inline_mutation.description", &description),
    ])?;
    let access_level = AccessLevel::parse(&access_level).ok_or(WorkflowError::InvalidArgument {
        field: "inline_mutation.access_level",
        reason: "must be Read, Write or Admin".into(),
    })?;
    let changed_at = changed_at
        .ok_or(WorkflowError::InvalidArgument { field: "inline_mutation.changed_at", reason: "is required".into() })?;
    Ok(HrMutation {
        mutation_id,
        changer_id,
        target_user_id,
        system,
        access_level,
        change_type,
        description,
        changed_at: time::format(&changed_at).ok_or(WorkflowError::InvalidArgument {
            field: "inline_mutation.changed_at",
            reason: "is out of range".into(),
        })?,
    })
}

fn rights(r: RightsCheck) -> pb::RightsCheck {
    let RightsCheck { authorized, evidence, message } = r;
    pb::RightsCheck { authorized, evidence_json: serde_json::to_string(&evidence).unwrap_or_default(), message }
}

fn claim(c: ClaimValidation) -> pb::ClaimValidation {
    let ClaimValidation { reply, valid, covered_user_id, absence, explanation } = c;
    pb::ClaimValidation {
        reply,
        valid,
        covered_user_id: covered_user_id.unwrap_or_default(),
        absence: match absence {
            AbsenceKind::SickLeave | AbsenceKind::Vacation | AbsenceKind::None => absence.as_str().to_owned(),
        },
        explanation,
    }
}

fn verdict(v: ManagerVerdict) -> pb::ManagerVerdict {
    let ManagerVerdict { manager_id, decision: d, comment } = v;
    pb::ManagerVerdict { manager_id, decision: decision(Some(d)) as i32, comment }
}

fn report(r: AdvisoryReport) -> pb::AdvisoryReport {
    let AdvisoryReport { report_id, summary, recommendation, details } = r;
    pb::AdvisoryReport {
        report_id,
        summary,
        recommendation: match recommendation {
            Recommendation::Accept => pb::Recommendation::Accept,
            Recommendation::RejectInvestigate => pb::Recommendation::RejectInvestigate,
            Recommendation::ManualIntervention => pb::Recommendation::ManualIntervention,
        } as i32,
        details,
    }
}

pub fn investigation(view: InvestigationView) -> pb::Investigation {
    let status_history = view.status_history();
    let updated_at_ms = view.updated_at_ms();
    let InvestigationView {
        investigation_id,
        mutation: hr_mutation,
        status: current,
        audit: _,
        exchanges: _,
        rights: rights_check,
        claim: claim_validation,
        manager,
        report: advisory,
        actions,
        failure: _,
        // Kept aside only between a failed agent and the escalation that records it in the trail.
        unrecorded_reply: _,
        created_at_ms,
    } = view;
    pb::Investigation {
        investigation_id,
        mutation: hr_mutation.map(|m| mutation(m, current)),
        status: status(current) as i32,
        status_history: status_history.into_iter().map(status_change).collect(),
        awaiting: actions.into_iter().filter(|a| a.status == ActionStatus::Awaiting).map(pending_action).collect(),
        rights_check: rights_check.map(rights),
        claim: claim_validation.map(claim),
        manager: manager.map(verdict),
        report: advisory.map(report),
        finished: current.is_final(),
        created_at: Some(ts(created_at_ms)),
        updated_at: Some(ts(updated_at_ms)),
    }
}

pub fn audit_entry(e: AuditEntry) -> pb::AuditEntry {
    use pb::audit_entry::Entry;
    let AuditEntry { investigation_id, seq, correlation_id, at_ms, actor, record } = e;
    let entry = match record {
        AuditRecord::Message(m) => Entry::Message(message(m)),
        AuditRecord::StatusChange(c) => Entry::StatusChange(status_change(c)),
        AuditRecord::Tool { name, arguments, result } => Entry::Tool(pb::ToolInvocation {
            name,
            arguments_json: arguments.to_string(),
            result_json: result.to_string(),
        }),
        AuditRecord::Notification(a) => Entry::Notification(pending_action(a)),
        AuditRecord::Reply { action_id, reply } => {
            let Reply { role: r, responder_id, text, decision: d } = reply;
            Entry::Reply(pb::HumanReply {
                action_id,
                role: role(r) as i32,
                responder_id,
                text,
                decision: decision(d) as i32,
            })
        }
        AuditRecord::Error(f) => Entry::Error(error(f)),
    };
    pb::AuditEntry { investigation_id, seq, correlation_id, time: Some(ts(at_ms)), actor, entry: Some(entry) }
}

pub fn progress(p: InvestigationProgress) -> pb::InvestigationProgress {
    use pb::investigation_progress::Payload;
    let payload = match p {
        InvestigationProgress::Event(e) => Payload::Event(crate::convert::event(e)),
        InvestigationProgress::Message(m) => Payload::Message(message(m)),
        InvestigationProgress::Status(c) => Payload::StatusChange(status_change(c)),
    };
    pb::InvestigationProgress { payload: Some(payload) }
}

pub fn last(view: InvestigationView) -> pb::InvestigationProgress {
    pb::InvestigationProgress { payload: Some(pb::investigation_progress::Payload::Investigation(investigation(view))) }
}

/// RFC 3339 UTC (`YYYY-MM-DDTHH:MM:SSZ`), as the HR data keeps times, to and from protobuf.
pub mod time {
    /// Days since 1970-01-01 of a civil date (proleptic Gregorian).
    fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
        let y = if m <= 2 { y - 1 } else { y };
        let era = y.div_euclid(400);
        let yoe = y - era * 400;
        let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        era * 146_097 + doe - 719_468
    }

    fn civil_from_days(z: i64) -> (i64, i64, i64) {
        let z = z + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z - era * 146_097;
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let d = doy - (153 * mp + 2) / 5 + 1;
        let m = if mp < 10 { mp + 3 } else { mp - 9 };
        (yoe + era * 400 + i64::from(m <= 2), m, d)
    }

    pub fn parse(text: &str) -> Option<prost_types::Timestamp> {
        let b = text.as_bytes();
        if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[13] != b':' || b[16] != b':' {
            return None;
        }
        let num = |r: std::ops::Range<usize>| text.get(r)?.parse::<i64>().ok();
        let (y, mo, d, h, mi, s) = (num(0..4)?, num(5..7)?, num(8..10)?, num(11..13)?, num(14..16)?, num(17..19)?);
        if !text.ends_with('Z') || !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s > 60 {
            return None;
        }
        let seconds = days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + s;
        Some(prost_types::Timestamp { seconds, nanos: 0 })
    }

    pub fn format(t: &prost_types::Timestamp) -> Option<String> {
        let days = t.seconds.div_euclid(86_400);
        let rem = t.seconds.rem_euclid(86_400);
        let (y, m, d) = civil_from_days(days);
        if !(0..=9999).contains(&y) {
            return None;
        }
        Some(format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60))
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn round_trips() {
            for text in ["1970-01-01T00:00:00Z", "2025-11-10T14:30:00Z", "2024-02-29T23:59:59Z", "2000-03-01T00:00:00Z"]
            {
                let t = super::parse(text).unwrap();
                assert_eq!(super::format(&t).as_deref(), Some(text));
            }
            assert_eq!(super::parse("2025-11-10T14:30:00Z").unwrap().seconds, 1_762_785_000);
            assert!(super::parse("2025-13-10T14:30:00Z").is_none());
            assert!(super::parse("yesterday").is_none());
        }
    }
}
