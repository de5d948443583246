//! `frontdesk.v1.InvestigationService`: validate, convert, call the investigation desk in the
//! caller's tenant, convert back.

use std::{pin::Pin, sync::Arc};

use frontdesk_api::v1::{self as pb, investigation_service_server::InvestigationService};
use frontdesk_workflows::investigation::{
    ActionStatus, AuditKey, Decision, InvestigationDesk, MutationRef, RespondRequest, ResponderRole, StartRequest,
};
use futures::{Stream, StreamExt};
use tonic::{Request, Response, Status};

use super::convert;
use crate::{
    auth,
    error::{invalid_argument, to_status},
    grpc::{optional, reject_nul, stream_run},
};

pub struct InvestigationApi {
    desk: Arc<InvestigationDesk>,
}

impl InvestigationApi {
    pub fn new(desk: Arc<InvestigationDesk>) -> Self {
        Self { desk }
    }
}

type ProgressStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

const MAX_PAGE: i32 = 100;

/// A listing's `page_size`: 0 is the default of 20, 1..=[`MAX_PAGE`] as given.
fn page_limit(page_size: i32) -> Result<usize, Status> {
    match page_size {
        0 => Ok(20),
        n if (1..=MAX_PAGE).contains(&n) => Ok(n as usize),
        _ => Err(invalid_argument("page_size", format!("must be 0 (the default, 20) to {MAX_PAGE}"))),
    }
}

#[tonic::async_trait]
impl InvestigationService for InvestigationApi {
    type StartInvestigationStream = ProgressStream<pb::StartInvestigationResponse>;
    type RespondStream = ProgressStream<pb::RespondResponse>;
    type WatchInvestigationStream = ProgressStream<pb::WatchInvestigationResponse>;

    async fn start_investigation(
        &self,
        request: Request<pb::StartInvestigationRequest>,
    ) -> Result<Response<Self::StartInvestigationStream>, Status> {
        let tenant = auth::tenant(&request);
        let pb::StartInvestigationRequest { mutation, idempotency_key } = request.into_inner();
        let mutation = match mutation {
            Some(pb::start_investigation_request::Mutation::MutationId(id)) => {
                reject_nul(&[("mutation_id", &id)])?;
                MutationRef::Id(id)
            }
            Some(pb::start_investigation_request::Mutation::InlineMutation(m)) => {
                MutationRef::Inline(convert::inline_mutation(m).map_err(to_status)?)
            }
            None => return Err(invalid_argument("mutation", "give a mutation_id or an inline_mutation")),
        };
        let handle = self
            .desk
            .start(&tenant, StartRequest { mutation, idempotency_key: optional(idempotency_key) })
            .await
            .map_err(to_status)?;
        let stream = stream_run(
            handle.progress,
            |p| pb::StartInvestigationResponse { progress: Some(convert::progress(p)) },
            handle.outcome,
            |view| pb::StartInvestigationResponse { progress: Some(convert::last(view)) },
        );
        Ok(Response::new(Box::pin(stream)))
    }

    async fn respond(&self, request: Request<pb::RespondRequest>) -> Result<Response<Self::RespondStream>, Status> {
        let tenant = auth::tenant(&request);
        let pb::RespondRequest { investigation_id, action_id, role, responder_id, text, decision, idempotency_key } =
            request.into_inner();
        // The text is the desk's to check, with its length.
        reject_nul(&[
            ("investigation_id", &investigation_id),
            ("action_id", &action_id),
            ("responder_id", &responder_id),
        ])?;
        let role = match pb::ResponderRole::try_from(role) {
            Ok(pb::ResponderRole::Changer) => ResponderRole::Changer,
            Ok(pb::ResponderRole::Manager) => ResponderRole::Manager,
            _ => return Err(invalid_argument("role", "must be CHANGER or MANAGER")),
        };
        let decision = match pb::ManagerDecision::try_from(decision) {
            Ok(pb::ManagerDecision::Unspecified) => None,
            Ok(pb::ManagerDecision::Approve) => Some(Decision::Approve),
            Ok(pb::ManagerDecision::Deny) => Some(Decision::Deny),
            Err(_) => return Err(invalid_argument("decision", format!("unknown value {decision}"))),
        };
        let request = RespondRequest {
            investigation_id,
            action_id,
            role,
            responder_id,
            text,
            decision,
            idempotency_key: optional(idempotency_key),
        };
        let handle = self.desk.respond(&tenant, request).await.map_err(to_status)?;
        let stream = stream_run(
            handle.progress,
            |p| pb::RespondResponse { progress: Some(convert::progress(p)) },
            handle.outcome,
            |view| pb::RespondResponse { progress: Some(convert::last(view)) },
        );
        Ok(Response::new(Box::pin(stream)))
    }

    async fn get_investigation(
        &self,
        request: Request<pb::GetInvestigationRequest>,
    ) -> Result<Response<pb::GetInvestigationResponse>, Status> {
        let tenant = auth::tenant(&request);
        let pb::GetInvestigationRequest { investigation_id } = request.into_inner();
        if investigation_id.is_empty() {
            return Err(invalid_argument("investigation_id", "is required"));
        }
        reject_nul(&[("investigation_id", &investigation_id)])?;
        let view = self.desk.get(&tenant, &investigation_id).await.map_err(to_status)?;
        Ok(Response::new(pb::GetInvestigationResponse { investigation: Some(convert::investigation(view)) }))
    }

    async fn list_investigations(
        &self,
        request: Request<pb::ListInvestigationsRequest>,
    ) -> Result<Response<pb::ListInvestigationsResponse>, Status> {
        let tenant = auth::tenant(&request);
        let pb::ListInvestigationsRequest { status, page_size, page_token } = request.into_inner();
        let status = convert::status_filter(status)
            .map_err(|()| invalid_argument("status", format!("unknown value {status}")))?;
        let limit = page_limit(page_size)?;
        let (views, next) = self.desk.list(&tenant, status, Some(&page_token), limit).await.map_err(to_status)?;
        Ok(Response::new(pb::ListInvestigationsResponse {
            investigations: views.into_iter().map(convert::investigation).collect(),
            next_page_token: next.unwrap_or_default(),
        }))
    }

    async fn watch_investigation(
        &self,
        request: Request<pb::WatchInvestigationRequest>,
    ) -> Result<Response<Self::WatchInvestigationStream>, Status> {
        let tenant = auth::tenant(&request);
        let pb::WatchInvestigationRequest { investigation_id, after_seq } = request.into_inner();
        if investigation_id.is_empty() {
            return Err(invalid_argument("investigation_id", "is required"));
        }
        reject_nul(&[("investigation_id", &investigation_id)])?;
        let entries = self.desk.watch(&tenant, &investigation_id, after_seq).await.map_err(to_status)?;
        let stream = entries.map(|entry| {
            entry.map(|e| pb::WatchInvestigationResponse { entry: Some(convert::audit_entry(e)) }).map_err(to_status)
        });
        Ok(Response::new(Box::pin(stream)))
    }

    async fn get_audit_trail(
        &self,
        request: Request<pb::GetAuditTrailRequest>,
    ) -> Result<Response<pb::GetAuditTrailResponse>, Status> {
        let tenant = auth::tenant(&request);
        let pb::GetAuditTrailRequest { key } = request.into_inner();
        let key = match key {
            Some(pb::get_audit_trail_request::Key::InvestigationId(id)) => {
                reject_nul(&[("investigation_id", &id)])?;
                AuditKey::Investigation(id)
            }
            Some(pb::get_audit_trail_request::Key::CorrelationId(id)) => {
                reject_nul(&[("correlation_id", &id)])?;
                AuditKey::Correlation(id)
            }
            None => return Err(invalid_argument("key", "give an investigation_id or a correlation_id")),
        };
        let entries = self.desk.audit_trail(&tenant, key).await.map_err(to_status)?;
        Ok(Response::new(pb::GetAuditTrailResponse {
            entries: entries.into_iter().map(convert::audit_entry).collect(),
        }))
    }

    async fn list_pending_actions(
        &self,
        request: Request<pb::ListPendingActionsRequest>,
    ) -> Result<Response<pb::ListPendingActionsResponse>, Status> {
        let tenant = auth::tenant(&request);
        let pb::ListPendingActionsRequest { recipient_id, status, page_size, page_token } = request.into_inner();
        reject_nul(&[("recipient_id", &recipient_id)])?;
        let status = match pb::PendingActionStatus::try_from(status) {
            Ok(pb::PendingActionStatus::Unspecified | pb::PendingActionStatus::Awaiting) => ActionStatus::Awaiting,
            Ok(pb::PendingActionStatus::Answered) => ActionStatus::Answered,
            Err(_) => return Err(invalid_argument("status", format!("unknown value {status}"))),
        };
        let limit = page_limit(page_size)?;
        let recipient = optional(recipient_id);
        let (actions, next) = self
            .desk
            .pending_actions(&tenant, recipient.as_deref(), status, Some(&page_token), limit)
            .await
            .map_err(to_status)?;
        Ok(Response::new(pb::ListPendingActionsResponse {
            actions: actions.into_iter().map(convert::pending_action).collect(),
            next_page_token: next.unwrap_or_default(),
        }))
    }
}
