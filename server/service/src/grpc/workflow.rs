//! `frontdesk.v1.WorkflowService`.

use std::sync::Arc;

use frontdesk_api::v1::{
    self as pb,
    workflow_service_server::{WorkflowService, WorkflowServiceServer},
};
use frontdesk_workflows::WorkflowError;
use futures::Stream;
use tonic::{server::NamedService, Request, Response, Status};
use tracing::debug;

use frontdesk_store::LlmCallRow;

use crate::{
    auth::{self, Access, ServiceAccess},
    calllog::LlmCallLedger,
    convert,
    error::{invalid_argument, to_status},
    grpc::{page_size, responses},
    registry::Registry,
    workflows::HostedWorkflow,
};

/// The scopes of `WorkflowService`'s methods (scope service `workflow`).
pub static ACCESS: ServiceAccess = ServiceAccess {
    service: <WorkflowServiceServer<WorkflowApi> as NamedService>::NAME,
    scope: "workflow",
    methods: &[
        ("ListWorkflows", Access::Read),
        ("DescribeWorkflow", Access::Read),
        ("CancelRun", Access::Write),
        ("ListLlmCalls", Access::Read),
        ("SubscribeRun", Access::Read),
    ],
};

fn workflow(hosted: &dyn HostedWorkflow) -> pb::Workflow {
    pb::Workflow {
        name: hosted.name().to_owned(),
        description: hosted.description().to_owned(),
        kind: hosted.kind().to_proto() as i32,
    }
}

fn llm_call(row: LlmCallRow) -> pb::LlmCall {
    let LlmCallRow {
        id: _,
        thread_id: _,
        run_id,
        node,
        purpose,
        model,
        prompt_tokens,
        completion_tokens,
        cost_usd,
        latency_ms,
        attempts,
        error,
        prompt_json,
        response_json,
        at,
    } = row;
    pb::LlmCall {
        run_id,
        node,
        purpose,
        model,
        prompt_tokens,
        completion_tokens,
        cost_usd,
        latency: Some(convert::duration(std::time::Duration::from_millis(latency_ms))),
        attempts,
        error: error.unwrap_or_default(),
        prompt_json,
        response_json,
        time: Some(convert::timestamp(at)),
    }
}

pub struct WorkflowApi {
    registry: Arc<Registry>,
    llm_calls: Arc<LlmCallLedger>,
}

impl WorkflowApi {
    pub fn new(registry: Arc<Registry>, llm_calls: Arc<LlmCallLedger>) -> Self {
        Self { registry, llm_calls }
    }
}

#[tonic::async_trait]
impl WorkflowService for WorkflowApi {
    type SubscribeRunStream = std::pin::Pin<Box<dyn Stream<Item = Result<pb::SubscribeRunResponse, Status>> + Send>>;

    async fn subscribe_run(
        &self,
        request: Request<pb::SubscribeRunRequest>,
    ) -> Result<Response<Self::SubscribeRunStream>, Status> {
        let tenant = auth::tenant(&request);
        let pb::SubscribeRunRequest { run_id, after_event_id } = request.into_inner();
        let mut subscription = self.registry.subscribe_run(&tenant, &run_id, after_event_id).map_err(to_status)?;
        let runs = self.registry.runs().clone();
        let (tx, stream) = responses();
        tokio::spawn(async move {
            let mut ended = false;
            while let Some((event, skipped)) = subscription.next().await {
                ended |= event.is_terminal();
                let response = pb::SubscribeRunResponse { event: Some(convert::event(event)), skipped };
                if tx.send(Ok(Box::new(response))).await.is_err() {
                    debug!(run_id = %subscription.run_id(), "subscriber went away");
                    return;
                }
            }
            // The server stopped the run before its last event: it resumes from its checkpoint
            // on the next start or another replica, where the subscriber follows it again.
            if !ended && runs.is_stopping() {
                let _ = tx.send(Err(to_status(WorkflowError::ShuttingDown))).await;
            }
        });
        Ok(Response::new(Box::pin(stream)))
    }

    async fn list_workflows(
        &self,
        request: Request<pb::ListWorkflowsRequest>,
    ) -> Result<Response<pb::ListWorkflowsResponse>, Status> {
        let pb::ListWorkflowsRequest {} = request.into_inner();
        let workflows = self.registry.workflows().map(|w| workflow(&**w)).collect();
        Ok(Response::new(pb::ListWorkflowsResponse { workflows }))
    }

    async fn describe_workflow(
        &self,
        request: Request<pb::DescribeWorkflowRequest>,
    ) -> Result<Response<pb::DescribeWorkflowResponse>, Status> {
        let pb::DescribeWorkflowRequest { name } = request.into_inner();
        if name.is_empty() {
            return Err(invalid_argument("name", "must name a workflow"));
        }
        let hosted = self.registry.workflow(&name).map_err(to_status)?;
        Ok(Response::new(convert::graph(hosted.graph(), workflow(&**hosted))))
    }

    async fn cancel_run(
        &self,
        request: Request<pb::CancelRunRequest>,
    ) -> Result<Response<pb::CancelRunResponse>, Status> {
        let tenant = auth::tenant(&request);
        let pb::CancelRunRequest { run_id } = request.into_inner();
        self.registry.cancel_run(&tenant, &run_id).map_err(to_status)?;
        Ok(Response::new(pb::CancelRunResponse { cancelled: true }))
    }

    async fn list_llm_calls(
        &self,
        request: Request<pb::ListLlmCallsRequest>,
    ) -> Result<Response<pb::ListLlmCallsResponse>, Status> {
        let tenant = auth::tenant(&request);
        let pb::ListLlmCallsRequest { thread_id, page_size: requested, page_token } = request.into_inner();
        let limit = page_size(requested)?;
        let found = self
            .llm_calls
            .calls(&self.registry, &tenant, &thread_id, limit, Some(&page_token))
            .await
            .map_err(to_status)?;
        let totals = found.totals;
        Ok(Response::new(pb::ListLlmCallsResponse {
            calls: found.calls.into_iter().map(llm_call).collect(),
            total_usage: Some(pb::Usage {
                prompt_tokens: totals.prompt_tokens,
                completion_tokens: totals.completion_tokens,
                cost_usd: totals.cost_usd,
            }),
            total_calls: totals.calls,
            next_page_token: found.next_page_token.unwrap_or_default(),
        }))
    }
}
