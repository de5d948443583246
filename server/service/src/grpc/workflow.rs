//! `frontdesk.v1.WorkflowService`.

use std::sync::Arc;

use frontdesk_api::v1::{
    self as pb,
    workflow_service_server::{WorkflowService, WorkflowServiceServer},
};
use frontdesk_runtime::RunError;
use frontdesk_workflows::{Tenant, WorkflowError};
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

/// Whether the events `registry` keeps of run `run_id`, which has ended, end with the run's last
/// event (`RunFinished`, `RunFailed`, `RunInterrupted`). The newest event of a run is always
/// kept, so this reads what is kept and looks at the newest.
async fn ends_with_last_event(registry: &Registry, tenant: &Tenant, run_id: &str) -> Result<bool, WorkflowError> {
    let mut events = registry.subscribe_run(tenant, run_id, 0)?;
    let mut last = false;
    while let Some((event, _)) = events.next().await {
        last = event.is_terminal();
    }
    Ok(last)
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
        let registry = self.registry.clone();
        let (tx, stream) = responses();
        tokio::spawn(async move {
            let (mut ended, mut delivered) = (false, false);
            while let Some((event, skipped)) = subscription.next().await {
                ended |= event.is_terminal();
                delivered = true;
                let response = pb::SubscribeRunResponse { event: Some(convert::event(event)), skipped };
                if tx.send(Ok(Box::new(response))).await.is_err() {
                    debug!(run_id = %subscription.run_id(), "subscriber went away");
                    return;
                }
            }
            if ended {
                return;
            }
            // The server stopped the run before its last event: it resumes from its checkpoint
            // on the next start or another replica, where the subscriber follows it again.
            if registry.runs().is_stopping() {
                let _ = tx.send(Err(to_status(WorkflowError::ShuttingDown))).await;
                return;
            }
            // A subscriber that re-attaches having seen the run's last event already (its stream
            // broke before the status came) has nothing more to read, and the stream ends well.
            if !delivered && after_event_id > 0 {
                match ends_with_last_event(&registry, &tenant, &run_id).await {
                    Ok(true) => return,
                    Ok(false) => {}
                    Err(error) => {
                        let _ = tx.send(Err(to_status(error))).await;
                        return;
                    }
                }
            }
            // The run's events ended without its last one: the run was lost (a panic outside
            // its nodes). Ending with OK would tell the subscriber it saw the whole run. The
            // status is the one the run's own caller got for it (`RunError::Lost`, INTERNAL
            // without RetryInfo), so the two never disagree: a panic is a defect to look into,
            // not an outage that waiting mends.
            let lost = WorkflowError::run_on("run", run_id, RunError::Lost);
            let _ = tx.send(Err(to_status(lost))).await;
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

#[cfg(test)]
mod tests {
    use async_trait::async_trait;
    use frontdesk_runtime::{
        Checkpointer, GraphBuilder, MemoryCheckpointer, Node, NodeContext, NodeError, NodeOutput, RunInput, RunRequest,
        Runner, RunnerConfig, State, Target, ThreadMode,
    };
    use frontdesk_store::{Database, StoreOptions};
    use futures::StreamExt;
    use tonic::Code;

    use super::*;

    #[derive(Debug, Default, Clone, serde::Serialize, serde::Deserialize)]
    struct Nothing;

    impl State for Nothing {
        type Update = Option<()>;
        fn apply(&mut self, _: Option<()>) {}
    }

    struct Idle;

    #[async_trait]
    impl Node<Nothing> for Idle {
        async fn run(&self, _: &Nothing, _: &NodeContext) -> Result<NodeOutput<Option<()>>, NodeError> {
            Ok(NodeOutput::update(None))
        }
    }

    /// One run on a graph of one node, to its end; its run id, the API over its registry, and the
    /// id of its last event.
    async fn ran(lose: bool) -> (String, WorkflowApi, u64) {
        let mut graph = GraphBuilder::new("one").node("only", Idle).entry("only").edge("only", Target::End);
        if lose {
            // A panic outside the nodes: the run is lost, its events end without its last.
            graph = graph.output(|_: &Nothing| -> serde_json::Value { panic!("boom in the output") });
        }
        let store: Arc<dyn Checkpointer> = Arc::new(MemoryCheckpointer::default());
        let runner = Runner::new(graph.build().unwrap(), store.clone(), RunnerConfig::default());
        let mut request = RunRequest::new("t-1", RunInput::Update(None));
        request.mode = ThreadMode::New;
        let handle = runner.start(request).await.unwrap();
        let run_id = handle.run_id.clone();
        let (mut events, outcome, _cancel) = handle.into_parts();
        let mut last = 0;
        while let Some(event) = events.next().await {
            last = event.event_id;
        }
        let outcome = outcome.await.unwrap_or(Err(RunError::Lost));
        assert_eq!(lose, matches!(outcome, Err(RunError::Lost)), "{:?}", outcome.err());
        let registry = Registry::new(Vec::new(), store, runner.registry().clone());
        let options = StoreOptions { max_connections: 1, checkpoint_retention: 1 };
        let database = Database::connect("sqlite::memory:", options).await.unwrap();
        let api = WorkflowApi::new(Arc::new(registry), Arc::new(LlmCallLedger::new(database, None)));
        (run_id, api, last)
    }

    /// Subscribes to `run_id` after `after`: the ids of the events streamed, then the status the
    /// stream ended with.
    async fn subscribe(api: &WorkflowApi, run_id: &str, after: u64) -> (Vec<u64>, Code) {
        let request = Request::new(pb::SubscribeRunRequest { run_id: run_id.into(), after_event_id: after });
        let mut stream = api.subscribe_run(request).await.unwrap().into_inner();
        let mut ids = Vec::new();
        while let Some(item) = stream.next().await {
            match item {
                Ok(response) => ids.push(response.event.unwrap().event_id),
                Err(status) => return (ids, status.code()),
            }
        }
        (ids, Code::Ok)
    }

    #[tokio::test]
    async fn a_run_that_ended_with_its_last_event_ends_its_subscription_well() {
        let (run_id, api, last) = ran(false).await;
        let (ids, code) = subscribe(&api, &run_id, 0).await;
        assert_eq!((ids.last().copied(), code), (Some(last), Code::Ok));
        // Re-attached after the last event (the stream broke before its status): nothing more.
        assert_eq!(subscribe(&api, &run_id, last).await, (Vec::new(), Code::Ok));
        assert_eq!(subscribe(&api, &run_id, last + 5).await, (Vec::new(), Code::Ok));
    }

    /// A lost run's events end without its last one: the stream ends with an error, never OK,
    /// which would tell the subscriber it saw the whole run.
    #[tokio::test]
    async fn a_lost_run_ends_its_subscription_with_internal() {
        let (run_id, api, last) = ran(true).await;
        assert!(last > 0, "the run streamed events before it was lost");
        let (ids, code) = subscribe(&api, &run_id, 0).await;
        assert_eq!((ids.len() as u64, code), (last, Code::Internal));
        assert_eq!(subscribe(&api, &run_id, last - 1).await, (vec![last], Code::Internal));
        assert_eq!(subscribe(&api, &run_id, last).await, (Vec::new(), Code::Internal));
    }
}
