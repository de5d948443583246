//! `frontdesk.v1.WorkflowService`.

use std::sync::Arc;

use frontdesk_api::v1::{self as pb, workflow_service_server::WorkflowService};
use tonic::{Request, Response, Status};

use crate::{
    convert,
    error::{invalid_argument, to_status},
    registry::Registry,
    workflows::HostedWorkflow,
};

fn workflow(hosted: &dyn HostedWorkflow) -> pb::Workflow {
    pb::Workflow {
        name: hosted.name().to_owned(),
        description: hosted.description().to_owned(),
        kind: hosted.kind().to_proto() as i32,
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
        let pb::CancelRunRequest { run_id } = request.into_inner();
        self.registry.cancel_run(&run_id).map_err(to_status)?;
        Ok(Response::new(pb::CancelRunResponse { cancelled: true }))
    }
}
