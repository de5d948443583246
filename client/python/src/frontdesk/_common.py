"""Request building and stream helpers shared by the sync and asyncio clients."""

from __future__ import annotations

from typing import Dict, Optional, Sequence, Tuple, Union, cast

from frontdesk.v1 import common_pb2, conversation_pb2, triage_pb2, workflow_pb2

RunEvent = common_pb2.RunEvent
TurnResult = conversation_pb2.TurnResult
TicketResolution = triage_pb2.TicketResolution
TriageResult = triage_pb2.TriageResult
#: What a SendMessage stream yields: every RunEvent in order, then one TurnResult.
StreamItem = Union[common_pb2.RunEvent, conversation_pb2.TurnResult]
#: What a TriageTicket stream yields: the TicketResolution, every RunEvent in order, then one
#: TriageResult.
TriageItem = Union[triage_pb2.TicketResolution, common_pb2.RunEvent, triage_pb2.TriageResult]
Metadata = Sequence[Tuple[str, Union[str, bytes]]]

DEFAULT_TARGET = "127.0.0.1:50051"

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


def unpack(response: conversation_pb2.SendMessageResponse) -> Optional[StreamItem]:
    which = response.WhichOneof("payload")
    if which == "event":
        return response.event
    if which == "result":
        return response.result
    return None  # a payload kind newer than this client: skipped


__all__ = [
    "DEFAULT_TARGET",
    "Metadata",
    "RunEvent",
    "StreamItem",
    "TicketResolution",
    "TriageItem",
    "TriageResult",
    "TurnResult",
    "event_kind",
    "workflow_pb2",
]
