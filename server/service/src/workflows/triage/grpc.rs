//! `frontdesk.v1.TriageService`: validate, convert, call the triage desk in the caller's
//! tenant, convert back.

use std::{pin::Pin, sync::Arc};

use frontdesk_api::v1::{self as pb, triage_service_server::TriageService, triage_ticket_response::Payload};
use frontdesk_workflows::triage::{ArchivedStatus, TriageDesk, TriageProgress, TriageRequest};
use futures::Stream;
use tonic::{Request, Response, Status};

use super::convert;
use crate::{
    auth,
    error::{invalid_argument, to_status},
    grpc::{optional, page_size, stream_run},
};

pub struct TriageApi {
    desk: Arc<TriageDesk>,
}

impl TriageApi {
    pub fn new(desk: Arc<TriageDesk>) -> Self {
        Self { desk }
    }
}

type TriageStream = Pin<Box<dyn Stream<Item = Result<pb::TriageTicketResponse, Status>> + Send>>;

fn respond(payload: Payload) -> pb::TriageTicketResponse {
    pb::TriageTicketResponse { payload: Some(payload) }
}

#[tonic::async_trait]
impl TriageService for TriageApi {
    type TriageTicketStream = TriageStream;

    async fn triage_ticket(
        &self,
        request: Request<pb::TriageTicketRequest>,
    ) -> Result<Response<Self::TriageTicketStream>, Status> {
        let tenant = auth::tenant(&request);
        let pb::TriageTicketRequest { customer_id, message, subject, language, idempotency_key } = request.into_inner();
        let request = TriageRequest {
            customer_id,
            message,
            subject: optional(subject),
            language: optional(language),
            idempotency_key: optional(idempotency_key),
        };
        let handle = self.desk.triage(&tenant, request).await.map_err(to_status)?;
        let stream = stream_run(
            handle.progress.into_stream(),
            |progress| match progress {
                TriageProgress::Event(event) => respond(Payload::Event(crate::convert::event(event))),
                TriageProgress::Resolved(resolution) => respond(Payload::Resolution(convert::resolution(resolution))),
            },
            handle.outcome,
            |outcome| respond(Payload::Result(convert::triage_result(outcome))),
        );
        Ok(Response::new(Box::pin(stream)))
    }

    async fn get_ticket(
        &self,
        request: Request<pb::GetTicketRequest>,
    ) -> Result<Response<pb::GetTicketResponse>, Status> {
        let tenant = auth::tenant(&request);
        let pb::GetTicketRequest { customer_id, ticket_id } = request.into_inner();
        let view = self.desk.get_ticket(&tenant, &customer_id, &ticket_id).await.map_err(to_status)?;
        Ok(Response::new(convert::ticket_view(view)))
    }

    async fn list_tickets(
        &self,
        request: Request<pb::ListTicketsRequest>,
    ) -> Result<Response<pb::ListTicketsResponse>, Status> {
        let tenant = auth::tenant(&request);
        let pb::ListTicketsRequest { customer_id, status, page_size: size, page_token } = request.into_inner();
        let limit = page_size(size)?;
        let status = match pb::TicketStatus::try_from(status) {
            Ok(pb::TicketStatus::Unspecified) => None,
            Ok(pb::TicketStatus::Resolved) => Some(ArchivedStatus::Resolved),
            Ok(pb::TicketStatus::Escalated) => Some(ArchivedStatus::Escalated),
            Ok(pb::TicketStatus::Active) => {
                // Active tickets come in one page, so no token of this listing exists.
                if !page_token.is_empty() {
                    return Err(invalid_argument("page_token", "active tickets are not paged; pass no page_token"));
                }
                let active = self.desk.list_active(&tenant, &customer_id).await.map_err(to_status)?;
                return Ok(Response::new(pb::ListTicketsResponse {
                    tickets: active.into_iter().map(convert::ticket).collect(),
                    next_page_token: String::new(),
                }));
            }
            Err(_) => return Err(invalid_argument("status", format!("unknown value {status}"))),
        };
        let (tickets, next) = self
            .desk
            .list_archived(&tenant, &customer_id, status, Some(&page_token), limit)
            .await
            .map_err(to_status)?;
        Ok(Response::new(pb::ListTicketsResponse {
            tickets: tickets.into_iter().map(convert::ticket).collect(),
            next_page_token: next.unwrap_or_default(),
        }))
    }

    async fn list_active_tickets(
        &self,
        request: Request<pb::ListActiveTicketsRequest>,
    ) -> Result<Response<pb::ListActiveTicketsResponse>, Status> {
        let tenant = auth::tenant(&request);
        let pb::ListActiveTicketsRequest { customer_id } = request.into_inner();
        let active = self.desk.list_active(&tenant, &customer_id).await.map_err(to_status)?;
        Ok(Response::new(pb::ListActiveTicketsResponse { tickets: active.into_iter().map(convert::ticket).collect() }))
    }
}
