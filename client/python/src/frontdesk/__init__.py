"""Python client for Frontdesk, the gRPC service for LLM multi-agent workflows.

    from frontdesk import FrontdeskClient, RunEvent, event_kind

    with FrontdeskClient("127.0.0.1:50051") as client:
        conversation = client.start_conversation("intake").conversation
        for item in client.send_message(conversation.conversation_id, "Hello"):
            if isinstance(item, RunEvent):
                print(item.event_id, item.node, event_kind(item))
            else:
                print("reply:", item.reply.text)

Messages are the generated protobuf classes in ``frontdesk.v1``. A server that requires API
keys gets one with ``FrontdeskClient(target, api_key=key, tls=TlsConfig.from_files(ca=...))``.
"""

from frontdesk._aio import (
    AsyncAuditStream,
    AsyncFrontdeskClient,
    AsyncInvestigationStream,
    AsyncResearchStream,
    AsyncRunEventStream,
    AsyncTriageStream,
    AsyncTurnStream,
)
from frontdesk._client import (
    AuditStream,
    FrontdeskClient,
    InvestigationStream,
    ResearchStream,
    RunEventStream,
    TriageStream,
    TurnStream,
)
from frontdesk._auth import TlsConfig
from frontdesk._common import (
    CONVERSATION_ENDED,
    DEFAULT_TARGET,
    QUOTA_EXCEEDED,
    SCOPE_MISSING,
    UNAUTHENTICATED,
    AgentMessage,
    AuditEntry,
    Citation,
    Conversation,
    CriticVerdict,
    ExpertAnswer,
    HrMutation,
    IntakeState,
    Investigation,
    InvestigationItem,
    LlmCall,
    OrchestratorMessage,
    PendingAction,
    Plan,
    Research,
    ResearchItem,
    ResearchResult,
    RunEvent,
    ServiceCallState,
    StatusChange,
    StreamItem,
    TicketResolution,
    TriageItem,
    TriageResult,
    TurnResult,
    event_kind,
    intake_state,
    service_call_context,
    service_call_state,
)
from frontdesk._errors import FieldViolation, FrontdeskError
from frontdesk._retry import RETRYABLE_CODES, RetryPolicy

__version__ = "0.1.0"

__all__ = [
    "CONVERSATION_ENDED",
    "DEFAULT_TARGET",
    "QUOTA_EXCEEDED",
    "SCOPE_MISSING",
    "UNAUTHENTICATED",
    "AgentMessage",
    "AsyncAuditStream",
    "AsyncFrontdeskClient",
    "AsyncInvestigationStream",
    "AsyncResearchStream",
    "AsyncRunEventStream",
    "AsyncTriageStream",
    "AsyncTurnStream",
    "AuditEntry",
    "AuditStream",
    "Citation",
    "Conversation",
    "CriticVerdict",
    "ExpertAnswer",
    "FieldViolation",
    "FrontdeskClient",
    "FrontdeskError",
    "HrMutation",
    "IntakeState",
    "Investigation",
    "InvestigationItem",
    "InvestigationStream",
    "LlmCall",
    "OrchestratorMessage",
    "PendingAction",
    "Plan",
    "Research",
    "ResearchItem",
    "ResearchResult",
    "ResearchStream",
    "RETRYABLE_CODES",
    "RetryPolicy",
    "RunEventStream",
    "RunEvent",
    "ServiceCallState",
    "StatusChange",
    "StreamItem",
    "TicketResolution",
    "TlsConfig",
    "TriageItem",
    "TriageResult",
    "TriageStream",
    "TurnResult",
    "TurnStream",
    "event_kind",
    "intake_state",
    "service_call_context",
    "service_call_state",
]
