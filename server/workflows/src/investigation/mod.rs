//! The investigation workflow (docs/workflows/investigation.md): an HR mutation's changer is
//! checked for the access the change needs; without it, the changer is asked why and their
//! claim is validated against absence records, then their manager is asked to approve or deny;
//! an advisory report ends every investigation. Four agents talk through agent messages, which
//! the graph's router delivers; the investigation waits for people at addressed interrupts.
//!
//! ```text
//! START → investigation_agent ⇄ rights_check_agent
//!                             ⇄ request_for_information_agent   (interrupts: changer, manager)
//!                             ⇄ advisory_agent
//!         any agent that fails after 3 attempts → escalate → advisory_agent → investigation_agent → END
//! ```
//!
//! Tenancy (`crate::tenant`): an investigation's thread id is `tenant.key(investigation_id)`, so
//! each tenant investigates a mutation on its own. The state keeps the caller's ids, so what a
//! caller is shown needs no translation; the desk builds storage keys from the caller's tenant,
//! and the agents, which know only their thread, key the records they write with the thread's
//! tenant ([`thread_tenant`]).

pub mod data;
mod desk;
pub mod nodes;
pub mod prompts;
pub mod tools;
pub mod types;

use std::{sync::Arc, time::Duration};

use frontdesk_llm::LlmClient;
use frontdesk_runtime::{Durability, Graph, GraphBuilder, GraphError, NodeOptions, Resume, RetryPolicy, Target};
use serde::{Deserialize, Serialize};

use crate::{
    tenant::{InvalidTenant, SEPARATOR},
    Tenant,
};

pub use data::{ActionCursor, InvestigationRecord, InvestigationStore, ListCursor, StoreFailure, StoredMutation};
pub use desk::{
    investigation_id, AuditKey, InvestigationDesk, InvestigationHandle, InvestigationProgress, InvestigationView,
    MutationRef, RespondRequest, StartRequest,
};
pub use types::*;

pub const NAME: &str = "investigation";

pub const DESCRIPTION: &str = "Access-change investigations: rights check, the changer's clarification validated \
against absence records, the manager's decision, an advisory report; agent messages and an audit trail";

frontdesk_runtime::state! {
    /// One investigation's state: the thread id is the investigation id.
    pub struct InvestigationState / InvestigationUpdate {
        investigation_id: String => Replace,
        mutation: Option<HrMutation> => Replace,
        status: Status => Replace,
        /// Everything that happened, in order; the audit table is its projection.
        audit: Vec<AuditEntry> => Append,
        /// Request/result exchanges so far (the counter behind correlation ids).
        exchanges: u32 => Replace,
        rights: Option<RightsCheck> => Replace,
        claim: Option<ClaimValidation> => Replace,
        manager: Option<ManagerVerdict> => Replace,
        report: Option<AdvisoryReport> => Replace,
        /// Every notification sent, answered or not.
        actions: Vec<PendingAction> => Replace,
        /// The agent failure that escalated the investigation.
        failure: Option<AgentFailure> => Replace,
        /// The person's reply the failed agent had been resumed with and not recorded, until
        /// the escalation records it: its action cannot be answered again.
        unrecorded_reply: Option<Resume> => Replace,
        created_at_ms: i64 => Replace,
    }
}

impl InvestigationState {
    /// The status history, from the trail.
    pub fn status_history(&self) -> Vec<StatusChange> {
        self.audit
            .iter()
            .filter_map(|e| match &e.record {
                AuditRecord::StatusChange(change) => Some(change.clone()),
                _ => None,
            })
            .collect()
    }

    pub fn updated_at_ms(&self) -> i64 {
        self.audit.last().map_or(self.created_at_ms, |e| e.at_ms)
    }
}

/// The tenant whose investigation thread `thread_id` is: the thread id is
/// `tenant.key(investigation_id)`, and investigation ids have no `/`.
pub fn thread_tenant(thread_id: &str) -> Result<Tenant, InvalidTenant> {
    match thread_id.split_once(SEPARATOR) {
        Some((name, _)) => Tenant::new(name),
        None => Ok(Tenant::default()),
    }
}

/// The index row of an investigation's state, under the caller's id.
pub fn record_of(state: &InvestigationState) -> InvestigationRecord {
    InvestigationRecord {
        investigation_id: state.investigation_id.clone(),
        mutation_id: state.mutation.as_ref().map(|m| m.mutation_id.clone()).unwrap_or_default(),
        status: state.status,
        report: state.report.clone(),
        created_at_ms: state.created_at_ms,
        updated_at_ms: state.updated_at_ms(),
    }
}

/// What a run reports: where the investigation stands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InvestigationOutput {
    pub investigation_id: String,
    pub status: Status,
    pub report: Option<AdvisoryReport>,
    /// The actions awaiting a reply.
    pub awaiting: Vec<String>,
}

fn output(state: &InvestigationState) -> InvestigationOutput {
    InvestigationOutput {
        investigation_id: state.investigation_id.clone(),
        status: state.status,
        report: state.report.clone(),
        awaiting: state
            .actions
            .iter()
            .filter(|a| a.status == ActionStatus::Awaiting)
            .map(|a| a.action_id.clone())
            .collect(),
    }
}

/// What the agents need from outside.
#[derive(Clone)]
pub struct InvestigationDeps {
    pub llm: LlmClient,
    pub tools: tools::Tools,
    /// Each agent's retry policy: three attempts on model and data-store failures.
    pub retry: RetryPolicy,
}

impl InvestigationDeps {
    pub fn new(llm: LlmClient, store: Arc<dyn InvestigationStore>) -> Self {
        Self {
            llm,
            tools: tools::Tools { store },
            retry: RetryPolicy::attempts(3).with_backoff(Duration::from_millis(500), Duration::from_secs(10)),
        }
    }
}

/// Delivers the newest agent message to its receiver; ends once the report is generated.
fn route(state: &InvestigationState) -> Target {
    if state.status.is_final() {
        return Target::End;
    }
    match nodes::last_message(state) {
        Some(message) => Target::node(message.receiver.node()),
        None => Target::End,
    }
}

pub fn build(deps: InvestigationDeps) -> Result<Graph<InvestigationState>, GraphError> {
    let agents = [nodes::INVESTIGATION, nodes::RIGHTS_CHECK, nodes::REQUEST_FOR_INFORMATION, nodes::ADVISORY];
    let targets = || agents.iter().map(|a| Target::node(*a)).chain([Target::End]).collect::<Vec<_>>();
    // Every agent writes audit records (and the request-for-information agent messages people).
    let options = || NodeOptions::default().retry(deps.retry.clone()).with_effects();
    let mut builder = GraphBuilder::new(NAME)
        .node_with(nodes::INVESTIGATION, nodes::InvestigationAgent(deps.clone()), options())
        .node_with(nodes::RIGHTS_CHECK, nodes::RightsCheckAgent(deps.clone()), options())
        .node_with(nodes::REQUEST_FOR_INFORMATION, nodes::RequestForInformationAgent(deps.clone()), options())
        .node_with(nodes::ADVISORY, nodes::AdvisoryAgent(deps.clone()), options())
        .node_with(nodes::ESCALATE, nodes::Escalate(deps.clone()), options())
        .entry(nodes::INVESTIGATION)
        .on_failure(nodes::ESCALATE, |failure| InvestigationUpdate {
            failure: Some(Some(AgentFailure {
                kind: format!("{:?}", failure.kind),
                message: failure.message.clone(),
                attempts: failure.attempts,
            })),
            unrecorded_reply: Some(failure.answer.clone()),
            ..Default::default()
        });
    for from in agents.iter().copied().chain([nodes::ESCALATE]) {
        builder = builder.conditional_edge(from, targets(), route);
    }
    builder
        .max_steps(16)
        // Every agent writes records as it acts and may wait days for a person: a checkpoint
        // after each node, so a crash re-runs only the node in flight.
        .durability(Durability::EveryNode)
        .output(output)
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_tenant_has_its_own_thread_for_a_mutation_and_nodes_find_the_tenant_in_it() {
        let id = investigation_id("1002");
        let tenants = [Tenant::new("acme").unwrap(), Tenant::new("globex").unwrap(), Tenant::default()];
        let threads: Vec<String> = tenants.iter().map(|t| t.key(&id)).collect();
        assert_eq!(threads, ["acme/INV-1002", "globex/INV-1002", "INV-1002"]);
        for (tenant, thread) in tenants.iter().zip(&threads) {
            assert_eq!(&thread_tenant(thread).unwrap(), tenant);
            assert_eq!(tenant.id(thread), Some(id.as_str()));
            for other in tenants.iter().filter(|other| *other != tenant) {
                assert_eq!(other.id(thread), None, "{other} must not own {thread}");
            }
        }
        assert!(thread_tenant("/acme/INV-1002").is_err(), "a key nobody owns names no tenant");
    }
}
