//! `frontdesk.v1.ConversationService`.

use std::{pin::Pin, sync::Arc};

use frontdesk_api::v1::{
    self as pb,
    conversation_service_server::{ConversationService, ConversationServiceServer},
    send_message_response::Payload,
    BusyPolicy,
};
use frontdesk_runtime::BusyPolicy as RunBusyPolicy;
use frontdesk_workflows::{idempotency::validate_key, TurnOptions, WorkflowError};
use futures::Stream;
use tonic::{server::NamedService, Request, Response, Status};

use super::{optional, page_size, run_events, stream_run};
use crate::{
    auth::{self, Access, ServiceAccess},
    calllog::LlmCallLedger,
    convert,
    error::{invalid_argument, to_status},
    registry::Registry,
};

/// The scopes of `ConversationService`'s methods (scope service `conversation`): erasing a
/// conversation is `admin`.
pub static ACCESS: ServiceAccess = ServiceAccess {
    service: <ConversationServiceServer<ConversationApi> as NamedService>::NAME,
    scope: "conversation",
    methods: &[
        ("StartConversation", Access::Write),
        ("SendMessage", Access::Write),
        ("GetConversation", Access::Read),
        ("ListConversations", Access::Read),
        ("ResetConversation", Access::Write),
        ("DeleteConversation", Access::Admin),
    ],
};

pub struct ConversationApi {
    registry: Arc<Registry>,
    /// Erased with the conversation.
    llm_calls: Arc<LlmCallLedger>,
}

impl ConversationApi {
    pub fn new(registry: Arc<Registry>, llm_calls: Arc<LlmCallLedger>) -> Self {
        Self { registry, llm_calls }
    }
}

type SendMessageStream = Pin<Box<dyn Stream<Item = Result<pb::SendMessageResponse, Status>> + Send>>;

#[tonic::async_trait]
impl ConversationService for ConversationApi {
    type SendMessageStream = SendMessageStream;

    async fn start_conversation(
        &self,
        request: Request<pb::StartConversationRequest>,
    ) -> Result<Response<pb::StartConversationResponse>, Status> {
        let tenant = auth::tenant(&request);
        let pb::StartConversationRequest { workflow, conversation_id, idempotency_key } = request.into_inner();
        if workflow.is_empty() {
            return Err(invalid_argument("workflow", "must name a workflow (see ListWorkflows)"));
        }
        let host = self.registry.conversation_workflow(&workflow).map_err(to_status)?;
        let (view, welcome) =
            host.start(&tenant, optional(conversation_id), optional(idempotency_key)).await.map_err(to_status)?;
        Ok(Response::new(pb::StartConversationResponse {
            conversation: Some(convert::conversation(view).0),
            welcome: Some(convert::message(welcome)),
        }))
    }

    async fn send_message(
        &self,
        request: Request<pb::SendMessageRequest>,
    ) -> Result<Response<Self::SendMessageStream>, Status> {
        let tenant = auth::tenant(&request);
        let pb::SendMessageRequest { conversation_id, text, idempotency_key, busy_policy } = request.into_inner();
        let busy = match BusyPolicy::try_from(busy_policy) {
            Ok(BusyPolicy::Unspecified | BusyPolicy::Reject) => RunBusyPolicy::Reject,
            Ok(BusyPolicy::Queue) => RunBusyPolicy::Queue,
            Err(_) => return Err(invalid_argument("busy_policy", format!("unknown value {busy_policy}"))),
        };
        let (host, head) = self.registry.route_turn(&tenant, &conversation_id).await.map_err(to_status)?;
        let options = TurnOptions { idempotency_key: optional(idempotency_key), busy, routed: Some(head) };
        let turn = host.send(&tenant, &conversation_id, &text, options).await.map_err(to_status)?;
        let stream = stream_run(
            run_events(turn.events),
            |event| pb::SendMessageResponse { payload: Some(Payload::Event(event)) },
            turn.outcome,
            |outcome| pb::SendMessageResponse { payload: Some(Payload::Result(convert::turn_result(outcome))) },
        );
        Ok(Response::new(Box::pin(stream)))
    }

    async fn get_conversation(
        &self,
        request: Request<pb::GetConversationRequest>,
    ) -> Result<Response<pb::GetConversationResponse>, Status> {
        let tenant = auth::tenant(&request);
        let pb::GetConversationRequest { conversation_id } = request.into_inner();
        let host = self.registry.owner_of(&tenant, &conversation_id).await.map_err(to_status)?;
        let view = host.get(&tenant, &conversation_id).await.map_err(to_status)?;
        let (conversation, messages) = convert::conversation(view);
        Ok(Response::new(pb::GetConversationResponse { conversation: Some(conversation), messages }))
    }

    async fn list_conversations(
        &self,
        request: Request<pb::ListConversationsRequest>,
    ) -> Result<Response<pb::ListConversationsResponse>, Status> {
        let tenant = auth::tenant(&request);
        let pb::ListConversationsRequest { workflow, page_size: size, page_token } = request.into_inner();
        let limit = page_size(size)?;
        let (views, next) = self
            .registry
            .list_conversations(&tenant, optional(workflow).as_deref(), optional(page_token), limit)
            .await
            .map_err(to_status)?;
        Ok(Response::new(pb::ListConversationsResponse {
            conversations: views.into_iter().map(|v| convert::conversation(v).0).collect(),
            next_page_token: next.unwrap_or_default(),
        }))
    }

    async fn reset_conversation(
        &self,
        request: Request<pb::ResetConversationRequest>,
    ) -> Result<Response<pb::ResetConversationResponse>, Status> {
        // Resetting is idempotent by nature: a repeated reset leaves the same cleared state, so
        // the key is not kept. It is still checked as every call checks one, so that a key a
        // client gets wrong is refused here as on the calls that keep it.
        let tenant = auth::tenant(&request);
        let pb::ResetConversationRequest { conversation_id, idempotency_key } = request.into_inner();
        validate_key(optional(idempotency_key).as_deref()).map_err(to_status)?;
        let host = self.registry.owner_of(&tenant, &conversation_id).await.map_err(to_status)?;
        let view = host.reset(&tenant, &conversation_id).await.map_err(to_status)?;
        Ok(Response::new(pb::ResetConversationResponse { conversation: Some(convert::conversation(view).0) }))
    }

    async fn delete_conversation(
        &self,
        request: Request<pb::DeleteConversationRequest>,
    ) -> Result<Response<pb::DeleteConversationResponse>, Status> {
        let tenant = auth::tenant(&request);
        let pb::DeleteConversationRequest { conversation_id } = request.into_inner();
        let host = match self.registry.owner_of(&tenant, &conversation_id).await {
            Ok(host) => host,
            // Gone already, perhaps by a call whose erasure of the model calls failed after the
            // conversation was deleted: its retry finishes that erasure, and is still told so.
            // The id may name another workflow's thread instead (an investigation, a ticket),
            // whose calls are not a conversation's to erase: those stay.
            Err(gone @ WorkflowError::NotFound { .. }) => {
                self.llm_calls
                    .forget_left_behind(&self.registry, &tenant, &conversation_id)
                    .await
                    .map_err(to_status)?;
                return Err(to_status(gone));
            }
            Err(error) => return Err(to_status(error)),
        };
        host.delete(&tenant, &conversation_id).await.map_err(to_status)?;
        // Erasure covers the conversation's model calls too (their prompts, with call_log = "full").
        self.llm_calls.forget(&tenant, &conversation_id).await.map_err(to_status)?;
        Ok(Response::new(pb::DeleteConversationResponse {}))
    }
}
