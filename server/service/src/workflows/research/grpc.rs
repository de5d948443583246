//! `frontdesk.v1.ResearchService`: validate, convert, call the research desk, convert back.

use std::{pin::Pin, sync::Arc};

use frontdesk_api::v1::{self as pb, research_service_server::ResearchService};
use frontdesk_workflows::research::{AskRequest, ResearchDesk};
use futures::Stream;
use tonic::{Request, Response, Status};

use super::convert;
use crate::{
    auth,
    error::{invalid_argument, to_status},
    grpc::{optional, reject_nul, stream_run},
};

pub struct ResearchApi {
    desk: Arc<ResearchDesk>,
}

impl ResearchApi {
    pub fn new(desk: Arc<ResearchDesk>) -> Self {
        Self { desk }
    }
}

type AskStream = Pin<Box<dyn Stream<Item = Result<pb::AskResponse, Status>> + Send>>;

const MAX_PAGE: i32 = 100;

#[tonic::async_trait]
impl ResearchService for ResearchApi {
    type AskStream = AskStream;

    async fn ask(&self, request: Request<pb::AskRequest>) -> Result<Response<Self::AskStream>, Status> {
        let tenant = auth::tenant(&request);
        let pb::AskRequest { question, retry_limit, corpus, idempotency_key } = request.into_inner();
        let request = AskRequest {
            question,
            retry_limit: Some(retry_limit),
            corpus: optional(corpus),
            idempotency_key: optional(idempotency_key),
        };
        let handle = self.desk.ask(&tenant, request).await.map_err(to_status)?;
        let stream = stream_run(handle.progress, convert::progress, handle.outcome, convert::last);
        Ok(Response::new(Box::pin(stream)))
    }

    async fn get_research(
        &self,
        request: Request<pb::GetResearchRequest>,
    ) -> Result<Response<pb::GetResearchResponse>, Status> {
        let tenant = auth::tenant(&request);
        let pb::GetResearchRequest { research_id } = request.into_inner();
        reject_nul(&[("research_id", &research_id)])?;
        let view = self.desk.get(&tenant, &research_id).await.map_err(to_status)?;
        Ok(Response::new(pb::GetResearchResponse { research: Some(convert::research(view)) }))
    }

    async fn list_research(
        &self,
        request: Request<pb::ListResearchRequest>,
    ) -> Result<Response<pb::ListResearchResponse>, Status> {
        let tenant = auth::tenant(&request);
        let pb::ListResearchRequest { page_size, page_token } = request.into_inner();
        let limit = match page_size {
            0 => 20,
            n if (1..=MAX_PAGE).contains(&n) => n as usize,
            _ => return Err(invalid_argument("page_size", format!("must be 0 (the default, 20) to {MAX_PAGE}"))),
        };
        let (views, next) = self.desk.list(&tenant, Some(&page_token), limit).await.map_err(to_status)?;
        Ok(Response::new(pb::ListResearchResponse {
            research: views.into_iter().map(convert::research).collect(),
            next_page_token: next.unwrap_or_default(),
        }))
    }
}
