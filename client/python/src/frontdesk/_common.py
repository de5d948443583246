"""Request building and stream helpers shared by the sync and asyncio clients."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union, cast

from frontdesk.v1 import (
    common_pb2,
    conversation_pb2,
    investigation_pb2,
    research_pb2,
    triage_pb2,
    workflow_pb2,
)

RunEvent = common_pb2.RunEvent
TurnResult = conversation_pb2.TurnResult
Conversation = conversation_pb2.Conversation
IntakeState = conversation_pb2.IntakeState
ServiceCallState = conversation_pb2.ServiceCallState
TicketResolution = triage_pb2.TicketResolution
TriageResult = triage_pb2.TriageResult
#: What a SendMessage stream yields: every RunEvent in order, then one TurnResult.
StreamItem = Union[common_pb2.RunEvent, conversation_pb2.TurnResult]
#: What a TriageTicket stream yields: the TicketResolution, every RunEvent in order, then one
#: TriageResult.
TriageItem = Union[triage_pb2.TicketResolution, common_pb2.RunEvent, triage_pb2.TriageResult]
Investigation = investigation_pb2.Investigation
AgentMessage = investigation_pb2.AgentMessage
StatusChange = investigation_pb2.StatusChange
AuditEntry = investigation_pb2.AuditEntry
PendingAction = investigation_pb2.PendingAction
LlmCall = workflow_pb2.LlmCall
HrMutation = investigation_pb2.HrMutation
#: What a StartInvestigation or Respond stream yields: RunEvents, each AgentMessage and
#: StatusChange right after the node event that produced it, then one Investigation.
InvestigationItem = Union[
    common_pb2.RunEvent,
    investigation_pb2.AgentMessage,
    investigation_pb2.StatusChange,
    investigation_pb2.Investigation,
]
Research = research_pb2.Research
OrchestratorMessage = research_pb2.OrchestratorMessage
Plan = research_pb2.Plan
ResearchResult = research_pb2.ResearchResult
Citation = research_pb2.Citation
CriticVerdict = research_pb2.CriticVerdict
ExpertAnswer = research_pb2.ExpertAnswer
#: What an Ask stream yields: RunEvents, each OrchestratorMessage, Plan, ResearchResult,
#: CriticVerdict and ExpertAnswer right after the node event that produced it, then one
#: Research.
ResearchItem = Union[
    common_pb2.RunEvent,
    research_pb2.OrchestratorMessage,
    research_pb2.Plan,
    research_pb2.ResearchResult,
    research_pb2.CriticVerdict,
    research_pb2.ExpertAnswer,
    research_pb2.Research,
]
Metadata = Sequence[Tuple[str, Union[str, bytes]]]

DEFAULT_TARGET = "127.0.0.1:50051"

#: The FrontdeskError reason of a message sent to a conversation that has ended (a service call
#: that was hung up): FAILED_PRECONDITION.
CONVERSATION_ENDED = "CONVERSATION_ENDED"

#: The FrontdeskError reason of a call without an API key, or with one that is unknown,
#: malformed or revoked: UNAUTHENTICATED.
UNAUTHENTICATED = "UNAUTHENTICATED"

#: The FrontdeskError reason of a call whose API key lacks the scope the method needs:
#: PERMISSION_DENIED; ``error_metadata["scope"]`` names it, such as ``triage:write``.
SCOPE_MISSING = "SCOPE_MISSING"

#: The FrontdeskError reason of a call over one of the tenant's quotas: RESOURCE_EXHAUSTED, with
#: ``retry_delay`` saying when to try again; ``error_metadata["quota"]`` names the quota
#: (``requests_per_sec`` or ``max_concurrent_runs``). The client does not retry it.
QUOTA_EXCEEDED = "QUOTA_EXCEEDED"

_BUSY = {
    None: conversation_pb2.BUSY_POLICY_UNSPECIFIED,
    "reject": conversation_pb2.BUSY_POLICY_REJECT,
    "queue": conversation_pb2.BUSY_POLICY_QUEUE,
}


_TICKET_STATUS: Dict[Optional[str], triage_pb2.TicketStatus] = {
    None: triage_pb2.TICKET_STATUS_UNSPECIFIED,
    "active": triage_pb2.TICKET_STATUS_ACTIVE,
    "resolved": triage_pb2.TICKET_STATUS_RESOLVED,
    "escalated": triage_pb2.TICKET_STATUS_ESCALATED,
}


def event_kind(event: common_pb2.RunEvent) -> str:
    """The event's kind: "run_started", "node_started", "token_delta", ..., "run_finished"."""
    return event.WhichOneof("kind") or ""


def intake_state(conversation: conversation_pb2.Conversation) -> Optional[IntakeState]:
    """The conversation's state when it is an intake conversation (``Conversation.intake``),
    None otherwise."""
    if conversation.WhichOneof("state") == "intake":
        return conversation.intake
    return None


def service_call_state(conversation: conversation_pb2.Conversation) -> Optional[ServiceCallState]:
    """The conversation's state when it is a service call (``Conversation.service_call``: the
    current node, the context as JSON, the node traversal path, the mandatory fields still
    missing, whether the call has ended, model calls and tokens), None otherwise."""
    if conversation.WhichOneof("state") == "service_call":
        return conversation.service_call
    return None


def service_call_context(state: ServiceCallState) -> Dict[str, Any]:
    """A service call's context (``ServiceCallState.context_json``) as a dict; empty when the
    state carries none."""
    if not state.context_json:
        return {}
    value = json.loads(state.context_json)
    return value if isinstance(value, dict) else {}


def start_request(
    workflow: str, conversation_id: Optional[str], idempotency_key: Optional[str]
) -> conversation_pb2.StartConversationRequest:
    return conversation_pb2.StartConversationRequest(
        workflow=workflow,
        conversation_id=conversation_id or "",
        idempotency_key=idempotency_key or "",
    )


def send_request(
    conversation_id: str,
    text: str,
    idempotency_key: Optional[str],
    busy_policy: Optional[str],
) -> conversation_pb2.SendMessageRequest:
    if busy_policy not in _BUSY:
        raise ValueError(f"busy_policy must be 'reject', 'queue' or None, not {busy_policy!r}")
    return conversation_pb2.SendMessageRequest(
        conversation_id=conversation_id,
        text=text,
        idempotency_key=idempotency_key or "",
        busy_policy=_BUSY[busy_policy],
    )


def list_request(
    workflow: Optional[str], page_size: Optional[int], page_token: Optional[str]
) -> conversation_pb2.ListConversationsRequest:
    return conversation_pb2.ListConversationsRequest(
        workflow=workflow or "", page_size=page_size or 0, page_token=page_token or ""
    )


def triage_request(
    customer_id: str,
    message: str,
    subject: Optional[str],
    language: Optional[str],
    idempotency_key: Optional[str],
) -> triage_pb2.TriageTicketRequest:
    return triage_pb2.TriageTicketRequest(
        customer_id=customer_id,
        message=message,
        subject=subject or "",
        language=language or "",
        idempotency_key=idempotency_key or "",
    )


def ticket_status(status: Union[None, str, int]) -> triage_pb2.TicketStatus:
    """A TicketStatus from "active", "resolved", "escalated", None, or the enum itself (a
    value such as triage_pb2.TICKET_STATUS_RESOLVED, or its name)."""
    if isinstance(status, int):
        return cast(triage_pb2.TicketStatus, status)
    if status in _TICKET_STATUS:
        return _TICKET_STATUS[status]
    if status is not None and status in triage_pb2.TicketStatus.keys():
        return triage_pb2.TicketStatus.Value(status)
    raise ValueError(
        f"status must be 'active', 'resolved', 'escalated', a TicketStatus or None, not {status!r}"
    )


def list_tickets_request(
    customer_id: str,
    status: Union[None, str, int],
    page_size: Optional[int],
    page_token: Optional[str],
) -> triage_pb2.ListTicketsRequest:
    return triage_pb2.ListTicketsRequest(
        customer_id=customer_id,
        status=ticket_status(status),
        page_size=page_size or 0,
        page_token=page_token or "",
    )


def unpack_triage(response: triage_pb2.TriageTicketResponse) -> Optional[TriageItem]:
    which = response.WhichOneof("payload")
    if which == "resolution":
        return response.resolution
    if which == "event":
        return response.event
    if which == "result":
        return response.result
    return None  # a payload kind newer than this client: skipped


_ROLE: Dict[str, investigation_pb2.ResponderRole] = {
    "changer": investigation_pb2.RESPONDER_ROLE_CHANGER,
    "manager": investigation_pb2.RESPONDER_ROLE_MANAGER,
}

_DECISION: Dict[Optional[str], investigation_pb2.ManagerDecision] = {
    None: investigation_pb2.MANAGER_DECISION_UNSPECIFIED,
    "approve": investigation_pb2.MANAGER_DECISION_APPROVE,
    "deny": investigation_pb2.MANAGER_DECISION_DENY,
}

_ACTION_STATUS: Dict[Optional[str], investigation_pb2.PendingActionStatus] = {
    None: investigation_pb2.PENDING_ACTION_STATUS_UNSPECIFIED,
    "awaiting": investigation_pb2.PENDING_ACTION_STATUS_AWAITING,
    "answered": investigation_pb2.PENDING_ACTION_STATUS_ANSWERED,
}


def _enum(value: Union[None, str, int], names: Dict, enum: Any, prefix: str, what: str) -> int:
    """An enum value from an int, a short lower-case name ("changer"), the full value name
    ("RESPONDER_ROLE_CHANGER") or None where the table allows it."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if value in names:
        return cast(int, names[value])
    if isinstance(value, str):
        full = value.upper()
        if not full.startswith(prefix):
            full = prefix + full
        if full in enum.keys() and not full.endswith("_UNSPECIFIED"):
            return cast(int, enum.Value(full))
    allowed = ", ".join(repr(k) for k in names) or f"a name of {enum.DESCRIPTOR.name}"
    raise ValueError(f"{what} must be {allowed} or the enum value, not {value!r}")


def responder_role(role: Union[str, int]) -> investigation_pb2.ResponderRole:
    """A ResponderRole from "changer", "manager" or the enum value."""
    return cast(
        investigation_pb2.ResponderRole,
        _enum(role, _ROLE, investigation_pb2.ResponderRole, "RESPONDER_ROLE_", "role"),
    )


def manager_decision(decision: Union[None, str, int]) -> investigation_pb2.ManagerDecision:
    """A ManagerDecision from "approve", "deny", None (none given) or the enum value."""
    return cast(
        investigation_pb2.ManagerDecision,
        _enum(
            decision,
            _DECISION,
            investigation_pb2.ManagerDecision,
            "MANAGER_DECISION_",
            "decision",
        ),
    )


def investigation_status(status: Union[None, str, int]) -> investigation_pb2.InvestigationStatus:
    """An InvestigationStatus from None (every status), a name such as
    "awaiting_user_response" or "INVESTIGATION_STATUS_AWAITING_USER_RESPONSE", or the enum."""
    if status is None:
        return investigation_pb2.INVESTIGATION_STATUS_UNSPECIFIED
    return cast(
        investigation_pb2.InvestigationStatus,
        _enum(status, {}, investigation_pb2.InvestigationStatus, "INVESTIGATION_STATUS_", "status"),
    )


def pending_action_status(status: Union[None, str, int]) -> investigation_pb2.PendingActionStatus:
    """A PendingActionStatus from "awaiting", "answered", None (awaiting) or the enum value."""
    return cast(
        investigation_pb2.PendingActionStatus,
        _enum(
            status,
            _ACTION_STATUS,
            investigation_pb2.PendingActionStatus,
            "PENDING_ACTION_STATUS_",
            "status",
        ),
    )


def start_investigation_request(
    mutation: Union[str, investigation_pb2.HrMutation], idempotency_key: Optional[str]
) -> investigation_pb2.StartInvestigationRequest:
    key = idempotency_key or ""
    if isinstance(mutation, str):
        return investigation_pb2.StartInvestigationRequest(
            mutation_id=mutation, idempotency_key=key
        )
    if isinstance(mutation, investigation_pb2.HrMutation):
        return investigation_pb2.StartInvestigationRequest(
            inline_mutation=mutation, idempotency_key=key
        )
    raise TypeError(
        f"mutation must be a mutation id (str) or an HrMutation, not {type(mutation).__name__}"
    )


def respond_request(
    investigation_id: str,
    action_id: str,
    role: Union[str, int],
    responder_id: str,
    text: Optional[str],
    decision: Union[None, str, int],
    idempotency_key: Optional[str],
) -> investigation_pb2.RespondRequest:
    return investigation_pb2.RespondRequest(
        investigation_id=investigation_id,
        action_id=action_id,
        role=responder_role(role),
        responder_id=responder_id,
        text=text or "",
        decision=manager_decision(decision),
        idempotency_key=idempotency_key or "",
    )


def list_investigations_request(
    status: Union[None, str, int], page_size: Optional[int], page_token: Optional[str]
) -> investigation_pb2.ListInvestigationsRequest:
    return investigation_pb2.ListInvestigationsRequest(
        status=investigation_status(status),
        page_size=page_size or 0,
        page_token=page_token or "",
    )


def list_pending_actions_request(
    recipient_id: Optional[str],
    status: Union[None, str, int],
    page_size: Optional[int],
    page_token: Optional[str],
) -> investigation_pb2.ListPendingActionsRequest:
    return investigation_pb2.ListPendingActionsRequest(
        recipient_id=recipient_id or "",
        status=pending_action_status(status),
        page_size=page_size or 0,
        page_token=page_token or "",
    )


def list_llm_calls_request(
    thread_id: str, page_size: Optional[int], page_token: Optional[str]
) -> workflow_pb2.ListLlmCallsRequest:
    return workflow_pb2.ListLlmCallsRequest(
        thread_id=thread_id, page_size=page_size or 0, page_token=page_token or ""
    )


def audit_trail_request(
    investigation_id: Optional[str], correlation_id: Optional[str]
) -> investigation_pb2.GetAuditTrailRequest:
    if bool(investigation_id) == bool(correlation_id):
        raise ValueError("give exactly one of investigation_id and correlation_id")
    if investigation_id:
        return investigation_pb2.GetAuditTrailRequest(investigation_id=investigation_id)
    return investigation_pb2.GetAuditTrailRequest(correlation_id=correlation_id or "")


def unpack_investigation(
    response: Union[
        investigation_pb2.StartInvestigationResponse, investigation_pb2.RespondResponse
    ],
) -> Optional[InvestigationItem]:
    progress = response.progress
    which = progress.WhichOneof("payload")
    if which == "event":
        return progress.event
    if which == "message":
        return progress.message
    if which == "status_change":
        return progress.status_change
    if which == "investigation":
        return progress.investigation
    return None  # a payload kind newer than this client (or none): skipped


def ask_request(
    question: str,
    retry_limit: Optional[int],
    corpus: Optional[str],
    idempotency_key: Optional[str],
) -> research_pb2.AskRequest:
    return research_pb2.AskRequest(
        question=question,
        retry_limit=retry_limit or 0,
        corpus=corpus or "",
        idempotency_key=idempotency_key or "",
    )


def list_research_request(
    page_size: Optional[int], page_token: Optional[str]
) -> research_pb2.ListResearchRequest:
    return research_pb2.ListResearchRequest(
        page_size=page_size or 0, page_token=page_token or ""
    )


_ASK_PAYLOADS = (
    "event",
    "message",
    "plan",
    "research_result",
    "critic_decision",
    "expert_answer",
    "research",
)


def unpack_research(response: research_pb2.AskResponse) -> Optional[ResearchItem]:
    which = response.WhichOneof("payload")
    if which in _ASK_PAYLOADS:
        return cast(ResearchItem, getattr(response, which))
    return None  # a payload kind newer than this client (or none): skipped


# What each workflow call's stream delivered so far, sorted by kind, with what the stream
# machinery (``_stream.RunStreamCore``) needs to know of the call: its name in errors, its
# result's type and how a response unpacks. Shared by the sync and asyncio streams.


class TurnProgress:
    """What a SendMessage stream delivered so far."""

    _what = "SendMessage"
    _result_type = conversation_pb2.TurnResult

    def __init__(self) -> None:
        self.events: List[common_pb2.RunEvent] = []

    def _unpack(self, response: conversation_pb2.SendMessageResponse) -> Optional[StreamItem]:
        return unpack(response)

    def _record(self, item: StreamItem) -> None:
        if isinstance(item, common_pb2.RunEvent):
            self.events.append(item)


class TriageProgress:
    """What a TriageTicket stream delivered so far."""

    _what = "TriageTicket"
    _result_type = triage_pb2.TriageResult

    def __init__(self) -> None:
        self.resolution: Optional[triage_pb2.TicketResolution] = None
        self.events: List[common_pb2.RunEvent] = []

    def _unpack(self, response: triage_pb2.TriageTicketResponse) -> Optional[TriageItem]:
        return unpack_triage(response)

    def _record(self, item: TriageItem) -> None:
        if isinstance(item, triage_pb2.TicketResolution):
            self.resolution = item
        elif isinstance(item, common_pb2.RunEvent):
            self.events.append(item)


class InvestigationProgress:
    """What a StartInvestigation or Respond stream delivered so far."""

    _what = "investigation"
    _result_type = investigation_pb2.Investigation

    def __init__(self) -> None:
        self.events: List[common_pb2.RunEvent] = []
        self.messages: List[investigation_pb2.AgentMessage] = []
        self.status_changes: List[investigation_pb2.StatusChange] = []

    def _unpack(
        self,
        response: Union[
            investigation_pb2.StartInvestigationResponse, investigation_pb2.RespondResponse
        ],
    ) -> Optional[InvestigationItem]:
        return unpack_investigation(response)

    def _record(self, item: InvestigationItem) -> None:
        if isinstance(item, investigation_pb2.AgentMessage):
            self.messages.append(item)
        elif isinstance(item, investigation_pb2.StatusChange):
            self.status_changes.append(item)
        elif isinstance(item, common_pb2.RunEvent):
            self.events.append(item)


class ResearchProgress:
    """What an Ask stream delivered so far."""

    _what = "Ask"
    _result_type = research_pb2.Research

    def __init__(self) -> None:
        self.events: List[common_pb2.RunEvent] = []
        self.messages: List[research_pb2.OrchestratorMessage] = []
        self.plans: List[research_pb2.Plan] = []
        self.results: List[research_pb2.ResearchResult] = []
        self.critic_decisions: List[research_pb2.CriticVerdict] = []
        self.expert_answers: List[research_pb2.ExpertAnswer] = []

    def _unpack(self, response: research_pb2.AskResponse) -> Optional[ResearchItem]:
        return unpack_research(response)

    def _record(self, item: ResearchItem) -> None:
        if isinstance(item, research_pb2.OrchestratorMessage):
            self.messages.append(item)
        elif isinstance(item, research_pb2.Plan):
            self.plans.append(item)
        elif isinstance(item, research_pb2.ResearchResult):
            self.results.append(item)
        elif isinstance(item, research_pb2.CriticVerdict):
            self.critic_decisions.append(item)
        elif isinstance(item, research_pb2.ExpertAnswer):
            self.expert_answers.append(item)
        elif isinstance(item, common_pb2.RunEvent):
            self.events.append(item)


def unpack(response: conversation_pb2.SendMessageResponse) -> Optional[StreamItem]:
    which = response.WhichOneof("payload")
    if which == "event":
        return response.event
    if which == "result":
        return response.result
    return None  # a payload kind newer than this client: skipped


__all__ = [
    "CONVERSATION_ENDED",
    "DEFAULT_TARGET",
    "QUOTA_EXCEEDED",
    "SCOPE_MISSING",
    "UNAUTHENTICATED",
    "AgentMessage",
    "AuditEntry",
    "Citation",
    "Conversation",
    "CriticVerdict",
    "ExpertAnswer",
    "HrMutation",
    "Investigation",
    "IntakeState",
    "InvestigationItem",
    "LlmCall",
    "Metadata",
    "OrchestratorMessage",
    "PendingAction",
    "Plan",
    "Research",
    "ResearchItem",
    "ResearchResult",
    "ServiceCallState",
    "StatusChange",
    "RunEvent",
    "StreamItem",
    "TicketResolution",
    "TriageItem",
    "TriageResult",
    "TurnResult",
    "event_kind",
    "intake_state",
    "service_call_context",
    "service_call_state",
    "workflow_pb2",
]
