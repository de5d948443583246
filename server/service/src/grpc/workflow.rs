//! `frontdesk.v1.WorkflowService`.

use std::sync::Arc;

use frontdesk_api::v1::{self as pb, workflow_service_server::WorkflowService};
use tonic::{Request, Response, Status};

use crate::{
    convert,
    error::{invalid_argument, to_status},
    registry::{Registry, WorkflowInfo, WorkflowKind},
};

fn workflow(info: &WorkflowInfo) -> pb::Workflow {
    pb::Workflow {
        name: info.name.clone(),
        description: info.description.clone(),
        kind: match info.kind {
            WorkflowKind::Conversational => pb::WorkflowKind::Conversational,
            WorkflowKind::Task => pb::WorkflowKind::Task,
        } as i32,
    }
}

pub struct WorkflowApi {
    registry: Arc<Registry>,
}

impl WorkflowApi {
    pub fn new(registry: Arc<Registry>) -> Self {
        Self { registry }
    }
}

#[tonic::async_trait]
impl WorkflowService for WorkflowApi {
    async fn list_workflows(
        &self,
        request: Request<pb::ListWorkflowsRequest>,
    ) -> Result<Response<pb::ListWorkflowsResponse>, Status> {
        let pb::ListWorkflowsRequest {} = request.into_inner();
        let workflows = self.registry.workflows().into_iter().map(|w| workflow(&w)).collect();
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
        let info = self.registry.workflow(&name).map_err(to_status)?;
        let summary = workflow(&info);
        Ok(Response::new(convert::graph(info.graph, summary)))
    }

    async fn cancel_run(
        &self,
        request: Request<pb::CancelRunRequest>,
    ) -> Result<Response<pb::CancelRunResponse>, Status> {
        let pb::CancelRunRequest { run_id } = request.into_inner();
        if run_id.is_empty() {
            return Err(invalid_argument("run_id", "must not be empty"));
        }
        Ok(Response::new(pb::CancelRunResponse { cancelled: self.registry.runs().cancel(&run_id) }))
    }
}
