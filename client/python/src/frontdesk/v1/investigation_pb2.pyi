import datetime

from frontdesk.v1 import common_pb2 as _common_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class InvestigationStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    INVESTIGATION_STATUS_UNSPECIFIED: _ClassVar[InvestigationStatus]
    INVESTIGATION_STATUS_PENDING: _ClassVar[InvestigationStatus]
    INVESTIGATION_STATUS_INVESTIGATION_STARTED: _ClassVar[InvestigationStatus]
    INVESTIGATION_STATUS_CLARIFICATION_REQUESTED: _ClassVar[InvestigationStatus]
    INVESTIGATION_STATUS_AWAITING_USER_RESPONSE: _ClassVar[InvestigationStatus]
    INVESTIGATION_STATUS_REJECTED_INVALID_CLAIM: _ClassVar[InvestigationStatus]
    INVESTIGATION_STATUS_MANAGER_VERIFICATION_REQUESTED: _ClassVar[InvestigationStatus]
    INVESTIGATION_STATUS_AWAITING_MANAGER_RESPONSE: _ClassVar[InvestigationStatus]
    INVESTIGATION_STATUS_APPROVED: _ClassVar[InvestigationStatus]
    INVESTIGATION_STATUS_REJECTED_MANAGER_DENIED: _ClassVar[InvestigationStatus]
    INVESTIGATION_STATUS_MANUAL_INTERVENTION_REQUIRED: _ClassVar[InvestigationStatus]
    INVESTIGATION_STATUS_ADVISORY_REPORT_GENERATED: _ClassVar[InvestigationStatus]

class Agent(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    AGENT_UNSPECIFIED: _ClassVar[Agent]
    AGENT_INVESTIGATION: _ClassVar[Agent]
    AGENT_RIGHTS_CHECK: _ClassVar[Agent]
    AGENT_REQUEST_FOR_INFORMATION: _ClassVar[Agent]
    AGENT_ADVISORY: _ClassVar[Agent]

class AgentAction(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    AGENT_ACTION_UNSPECIFIED: _ClassVar[AgentAction]
    AGENT_ACTION_CHECK_RIGHTS: _ClassVar[AgentAction]
    AGENT_ACTION_REQUEST_CLARIFICATION: _ClassVar[AgentAction]
    AGENT_ACTION_REQUEST_MANAGER_VALIDATION: _ClassVar[AgentAction]
    AGENT_ACTION_GENERATE_ADVISORY_REPORT: _ClassVar[AgentAction]
    AGENT_ACTION_CHECK_RIGHTS_RESULT: _ClassVar[AgentAction]
    AGENT_ACTION_CLARIFICATION_RESPONSE: _ClassVar[AgentAction]
    AGENT_ACTION_MANAGER_VALIDATION_RESPONSE: _ClassVar[AgentAction]
    AGENT_ACTION_ADVISORY_REPORT_RESULT: _ClassVar[AgentAction]

class AgentMessageStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    AGENT_MESSAGE_STATUS_UNSPECIFIED: _ClassVar[AgentMessageStatus]
    AGENT_MESSAGE_STATUS_PENDING: _ClassVar[AgentMessageStatus]
    AGENT_MESSAGE_STATUS_SUCCESS: _ClassVar[AgentMessageStatus]
    AGENT_MESSAGE_STATUS_ERROR: _ClassVar[AgentMessageStatus]

class ResponderRole(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RESPONDER_ROLE_UNSPECIFIED: _ClassVar[ResponderRole]
    RESPONDER_ROLE_CHANGER: _ClassVar[ResponderRole]
    RESPONDER_ROLE_MANAGER: _ClassVar[ResponderRole]

class ManagerDecision(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MANAGER_DECISION_UNSPECIFIED: _ClassVar[ManagerDecision]
    MANAGER_DECISION_APPROVE: _ClassVar[ManagerDecision]
    MANAGER_DECISION_DENY: _ClassVar[ManagerDecision]

class Recommendation(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RECOMMENDATION_UNSPECIFIED: _ClassVar[Recommendation]
    RECOMMENDATION_ACCEPT: _ClassVar[Recommendation]
    RECOMMENDATION_REJECT_INVESTIGATE: _ClassVar[Recommendation]
    RECOMMENDATION_MANUAL_INTERVENTION: _ClassVar[Recommendation]

class PendingActionStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PENDING_ACTION_STATUS_UNSPECIFIED: _ClassVar[PendingActionStatus]
    PENDING_ACTION_STATUS_AWAITING: _ClassVar[PendingActionStatus]
    PENDING_ACTION_STATUS_ANSWERED: _ClassVar[PendingActionStatus]
INVESTIGATION_STATUS_UNSPECIFIED: InvestigationStatus
INVESTIGATION_STATUS_PENDING: InvestigationStatus
INVESTIGATION_STATUS_INVESTIGATION_STARTED: InvestigationStatus
INVESTIGATION_STATUS_CLARIFICATION_REQUESTED: InvestigationStatus
INVESTIGATION_STATUS_AWAITING_USER_RESPONSE: InvestigationStatus
INVESTIGATION_STATUS_REJECTED_INVALID_CLAIM: InvestigationStatus
INVESTIGATION_STATUS_MANAGER_VERIFICATION_REQUESTED: InvestigationStatus
INVESTIGATION_STATUS_AWAITING_MANAGER_RESPONSE: InvestigationStatus
INVESTIGATION_STATUS_APPROVED: InvestigationStatus
INVESTIGATION_STATUS_REJECTED_MANAGER_DENIED: InvestigationStatus
INVESTIGATION_STATUS_MANUAL_INTERVENTION_REQUIRED: InvestigationStatus
INVESTIGATION_STATUS_ADVISORY_REPORT_GENERATED: InvestigationStatus
AGENT_UNSPECIFIED: Agent
AGENT_INVESTIGATION: Agent
AGENT_RIGHTS_CHECK: Agent
AGENT_REQUEST_FOR_INFORMATION: Agent
AGENT_ADVISORY: Agent
AGENT_ACTION_UNSPECIFIED: AgentAction
AGENT_ACTION_CHECK_RIGHTS: AgentAction
AGENT_ACTION_REQUEST_CLARIFICATION: AgentAction
AGENT_ACTION_REQUEST_MANAGER_VALIDATION: AgentAction
AGENT_ACTION_GENERATE_ADVISORY_REPORT: AgentAction
AGENT_ACTION_CHECK_RIGHTS_RESULT: AgentAction
AGENT_ACTION_CLARIFICATION_RESPONSE: AgentAction
AGENT_ACTION_MANAGER_VALIDATION_RESPONSE: AgentAction
AGENT_ACTION_ADVISORY_REPORT_RESULT: AgentAction
AGENT_MESSAGE_STATUS_UNSPECIFIED: AgentMessageStatus
AGENT_MESSAGE_STATUS_PENDING: AgentMessageStatus
AGENT_MESSAGE_STATUS_SUCCESS: AgentMessageStatus
AGENT_MESSAGE_STATUS_ERROR: AgentMessageStatus
RESPONDER_ROLE_UNSPECIFIED: ResponderRole
RESPONDER_ROLE_CHANGER: ResponderRole
RESPONDER_ROLE_MANAGER: ResponderRole
MANAGER_DECISION_UNSPECIFIED: ManagerDecision
MANAGER_DECISION_APPROVE: ManagerDecision
MANAGER_DECISION_DENY: ManagerDecision
RECOMMENDATION_UNSPECIFIED: Recommendation
RECOMMENDATION_ACCEPT: Recommendation
RECOMMENDATION_REJECT_INVESTIGATE: Recommendation
RECOMMENDATION_MANUAL_INTERVENTION: Recommendation
PENDING_ACTION_STATUS_UNSPECIFIED: PendingActionStatus
PENDING_ACTION_STATUS_AWAITING: PendingActionStatus
PENDING_ACTION_STATUS_ANSWERED: PendingActionStatus

class HrMutation(_message.Message):
    __slots__ = ("mutation_id", "changer_id", "target_user_id", "system", "access_level", "change_type", "description", "changed_at", "change_investigation")
    MUTATION_ID_FIELD_NUMBER: _ClassVar[int]
    CHANGER_ID_FIELD_NUMBER: _ClassVar[int]
    TARGET_USER_ID_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_FIELD_NUMBER: _ClassVar[int]
    ACCESS_LEVEL_FIELD_NUMBER: _ClassVar[int]
    CHANGE_TYPE_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    CHANGED_AT_FIELD_NUMBER: _ClassVar[int]
    CHANGE_INVESTIGATION_FIELD_NUMBER: _ClassVar[int]
    mutation_id: str
    changer_id: str
    target_user_id: str
    system: str
    access_level: str
    change_type: str
    description: str
    changed_at: _timestamp_pb2.Timestamp
    change_investigation: InvestigationStatus
    def __init__(self, mutation_id: _Optional[str] = ..., changer_id: _Optional[str] = ..., target_user_id: _Optional[str] = ..., system: _Optional[str] = ..., access_level: _Optional[str] = ..., change_type: _Optional[str] = ..., description: _Optional[str] = ..., changed_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., change_investigation: _Optional[_Union[InvestigationStatus, str]] = ...) -> None: ...

class AgentMessage(_message.Message):
    __slots__ = ("sender", "receiver", "action", "context_json", "correlation_id", "timestamp", "status", "error")
    SENDER_FIELD_NUMBER: _ClassVar[int]
    RECEIVER_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_JSON_FIELD_NUMBER: _ClassVar[int]
    CORRELATION_ID_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    sender: Agent
    receiver: Agent
    action: AgentAction
    context_json: str
    correlation_id: str
    timestamp: _timestamp_pb2.Timestamp
    status: AgentMessageStatus
    error: AgentError
    def __init__(self, sender: _Optional[_Union[Agent, str]] = ..., receiver: _Optional[_Union[Agent, str]] = ..., action: _Optional[_Union[AgentAction, str]] = ..., context_json: _Optional[str] = ..., correlation_id: _Optional[str] = ..., timestamp: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., status: _Optional[_Union[AgentMessageStatus, str]] = ..., error: _Optional[_Union[AgentError, _Mapping]] = ...) -> None: ...

class AgentError(_message.Message):
    __slots__ = ("reason", "message", "attempts")
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    reason: str
    message: str
    attempts: int
    def __init__(self, reason: _Optional[str] = ..., message: _Optional[str] = ..., attempts: _Optional[int] = ...) -> None: ...

class StatusChange(_message.Message):
    __slots__ = ("to", "time", "agent")
    FROM_FIELD_NUMBER: _ClassVar[int]
    TO_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    to: InvestigationStatus
    time: _timestamp_pb2.Timestamp
    agent: Agent
    def __init__(self, to: _Optional[_Union[InvestigationStatus, str]] = ..., time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., agent: _Optional[_Union[Agent, str]] = ..., **kwargs) -> None: ...

class PendingAction(_message.Message):
    __slots__ = ("action_id", "investigation_id", "mutation_id", "recipient_id", "recipient_role", "subject", "body", "status", "created_at", "answered_at", "reply_json")
    ACTION_ID_FIELD_NUMBER: _ClassVar[int]
    INVESTIGATION_ID_FIELD_NUMBER: _ClassVar[int]
    MUTATION_ID_FIELD_NUMBER: _ClassVar[int]
    RECIPIENT_ID_FIELD_NUMBER: _ClassVar[int]
    RECIPIENT_ROLE_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    ANSWERED_AT_FIELD_NUMBER: _ClassVar[int]
    REPLY_JSON_FIELD_NUMBER: _ClassVar[int]
    action_id: str
    investigation_id: str
    mutation_id: str
    recipient_id: str
    recipient_role: ResponderRole
    subject: str
    body: str
    status: PendingActionStatus
    created_at: _timestamp_pb2.Timestamp
    answered_at: _timestamp_pb2.Timestamp
    reply_json: str
    def __init__(self, action_id: _Optional[str] = ..., investigation_id: _Optional[str] = ..., mutation_id: _Optional[str] = ..., recipient_id: _Optional[str] = ..., recipient_role: _Optional[_Union[ResponderRole, str]] = ..., subject: _Optional[str] = ..., body: _Optional[str] = ..., status: _Optional[_Union[PendingActionStatus, str]] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., answered_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., reply_json: _Optional[str] = ...) -> None: ...

class RightsCheck(_message.Message):
    __slots__ = ("authorized", "evidence_json", "message")
    AUTHORIZED_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_JSON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    authorized: bool
    evidence_json: str
    message: str
    def __init__(self, authorized: _Optional[bool] = ..., evidence_json: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class ClaimValidation(_message.Message):
    __slots__ = ("reply", "valid", "covered_user_id", "absence", "explanation")
    REPLY_FIELD_NUMBER: _ClassVar[int]
    VALID_FIELD_NUMBER: _ClassVar[int]
    COVERED_USER_ID_FIELD_NUMBER: _ClassVar[int]
    ABSENCE_FIELD_NUMBER: _ClassVar[int]
    EXPLANATION_FIELD_NUMBER: _ClassVar[int]
    reply: str
    valid: bool
    covered_user_id: str
    absence: str
    explanation: str
    def __init__(self, reply: _Optional[str] = ..., valid: _Optional[bool] = ..., covered_user_id: _Optional[str] = ..., absence: _Optional[str] = ..., explanation: _Optional[str] = ...) -> None: ...

class ManagerVerdict(_message.Message):
    __slots__ = ("manager_id", "decision", "comment")
    MANAGER_ID_FIELD_NUMBER: _ClassVar[int]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    COMMENT_FIELD_NUMBER: _ClassVar[int]
    manager_id: str
    decision: ManagerDecision
    comment: str
    def __init__(self, manager_id: _Optional[str] = ..., decision: _Optional[_Union[ManagerDecision, str]] = ..., comment: _Optional[str] = ...) -> None: ...

class AdvisoryReport(_message.Message):
    __slots__ = ("report_id", "summary", "recommendation", "details")
    REPORT_ID_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    RECOMMENDATION_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    report_id: str
    summary: str
    recommendation: Recommendation
    details: str
    def __init__(self, report_id: _Optional[str] = ..., summary: _Optional[str] = ..., recommendation: _Optional[_Union[Recommendation, str]] = ..., details: _Optional[str] = ...) -> None: ...

class Investigation(_message.Message):
    __slots__ = ("investigation_id", "mutation", "status", "status_history", "awaiting", "rights_check", "claim", "manager", "report", "finished", "created_at", "updated_at")
    INVESTIGATION_ID_FIELD_NUMBER: _ClassVar[int]
    MUTATION_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    STATUS_HISTORY_FIELD_NUMBER: _ClassVar[int]
    AWAITING_FIELD_NUMBER: _ClassVar[int]
    RIGHTS_CHECK_FIELD_NUMBER: _ClassVar[int]
    CLAIM_FIELD_NUMBER: _ClassVar[int]
    MANAGER_FIELD_NUMBER: _ClassVar[int]
    REPORT_FIELD_NUMBER: _ClassVar[int]
    FINISHED_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    investigation_id: str
    mutation: HrMutation
    status: InvestigationStatus
    status_history: _containers.RepeatedCompositeFieldContainer[StatusChange]
    awaiting: _containers.RepeatedCompositeFieldContainer[PendingAction]
    rights_check: RightsCheck
    claim: ClaimValidation
    manager: ManagerVerdict
    report: AdvisoryReport
    finished: bool
    created_at: _timestamp_pb2.Timestamp
    updated_at: _timestamp_pb2.Timestamp
    def __init__(self, investigation_id: _Optional[str] = ..., mutation: _Optional[_Union[HrMutation, _Mapping]] = ..., status: _Optional[_Union[InvestigationStatus, str]] = ..., status_history: _Optional[_Iterable[_Union[StatusChange, _Mapping]]] = ..., awaiting: _Optional[_Iterable[_Union[PendingAction, _Mapping]]] = ..., rights_check: _Optional[_Union[RightsCheck, _Mapping]] = ..., claim: _Optional[_Union[ClaimValidation, _Mapping]] = ..., manager: _Optional[_Union[ManagerVerdict, _Mapping]] = ..., report: _Optional[_Union[AdvisoryReport, _Mapping]] = ..., finished: _Optional[bool] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class AuditEntry(_message.Message):
    __slots__ = ("investigation_id", "seq", "correlation_id", "time", "actor", "message", "status_change", "tool", "notification", "reply", "error")
    INVESTIGATION_ID_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    CORRELATION_ID_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    STATUS_CHANGE_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    NOTIFICATION_FIELD_NUMBER: _ClassVar[int]
    REPLY_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    investigation_id: str
    seq: int
    correlation_id: str
    time: _timestamp_pb2.Timestamp
    actor: str
    message: AgentMessage
    status_change: StatusChange
    tool: ToolInvocation
    notification: PendingAction
    reply: HumanReply
    error: AgentError
    def __init__(self, investigation_id: _Optional[str] = ..., seq: _Optional[int] = ..., correlation_id: _Optional[str] = ..., time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., actor: _Optional[str] = ..., message: _Optional[_Union[AgentMessage, _Mapping]] = ..., status_change: _Optional[_Union[StatusChange, _Mapping]] = ..., tool: _Optional[_Union[ToolInvocation, _Mapping]] = ..., notification: _Optional[_Union[PendingAction, _Mapping]] = ..., reply: _Optional[_Union[HumanReply, _Mapping]] = ..., error: _Optional[_Union[AgentError, _Mapping]] = ...) -> None: ...

class ToolInvocation(_message.Message):
    __slots__ = ("name", "arguments_json", "result_json")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_JSON_FIELD_NUMBER: _ClassVar[int]
    RESULT_JSON_FIELD_NUMBER: _ClassVar[int]
    name: str
    arguments_json: str
    result_json: str
    def __init__(self, name: _Optional[str] = ..., arguments_json: _Optional[str] = ..., result_json: _Optional[str] = ...) -> None: ...

class HumanReply(_message.Message):
    __slots__ = ("action_id", "role", "responder_id", "text", "decision")
    ACTION_ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    RESPONDER_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    action_id: str
    role: ResponderRole
    responder_id: str
    text: str
    decision: ManagerDecision
    def __init__(self, action_id: _Optional[str] = ..., role: _Optional[_Union[ResponderRole, str]] = ..., responder_id: _Optional[str] = ..., text: _Optional[str] = ..., decision: _Optional[_Union[ManagerDecision, str]] = ...) -> None: ...

class InvestigationProgress(_message.Message):
    __slots__ = ("event", "message", "status_change", "investigation")
    EVENT_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    STATUS_CHANGE_FIELD_NUMBER: _ClassVar[int]
    INVESTIGATION_FIELD_NUMBER: _ClassVar[int]
    event: _common_pb2.RunEvent
    message: AgentMessage
    status_change: StatusChange
    investigation: Investigation
    def __init__(self, event: _Optional[_Union[_common_pb2.RunEvent, _Mapping]] = ..., message: _Optional[_Union[AgentMessage, _Mapping]] = ..., status_change: _Optional[_Union[StatusChange, _Mapping]] = ..., investigation: _Optional[_Union[Investigation, _Mapping]] = ...) -> None: ...

class StartInvestigationRequest(_message.Message):
    __slots__ = ("mutation_id", "inline_mutation", "idempotency_key")
    MUTATION_ID_FIELD_NUMBER: _ClassVar[int]
    INLINE_MUTATION_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    mutation_id: str
    inline_mutation: HrMutation
    idempotency_key: str
    def __init__(self, mutation_id: _Optional[str] = ..., inline_mutation: _Optional[_Union[HrMutation, _Mapping]] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class StartInvestigationResponse(_message.Message):
    __slots__ = ("progress",)
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    progress: InvestigationProgress
    def __init__(self, progress: _Optional[_Union[InvestigationProgress, _Mapping]] = ...) -> None: ...

class RespondRequest(_message.Message):
    __slots__ = ("investigation_id", "action_id", "role", "responder_id", "text", "decision", "idempotency_key")
    INVESTIGATION_ID_FIELD_NUMBER: _ClassVar[int]
    ACTION_ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    RESPONDER_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    investigation_id: str
    action_id: str
    role: ResponderRole
    responder_id: str
    text: str
    decision: ManagerDecision
    idempotency_key: str
    def __init__(self, investigation_id: _Optional[str] = ..., action_id: _Optional[str] = ..., role: _Optional[_Union[ResponderRole, str]] = ..., responder_id: _Optional[str] = ..., text: _Optional[str] = ..., decision: _Optional[_Union[ManagerDecision, str]] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class RespondResponse(_message.Message):
    __slots__ = ("progress",)
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    progress: InvestigationProgress
    def __init__(self, progress: _Optional[_Union[InvestigationProgress, _Mapping]] = ...) -> None: ...

class GetInvestigationRequest(_message.Message):
    __slots__ = ("investigation_id",)
    INVESTIGATION_ID_FIELD_NUMBER: _ClassVar[int]
    investigation_id: str
    def __init__(self, investigation_id: _Optional[str] = ...) -> None: ...

class GetInvestigationResponse(_message.Message):
    __slots__ = ("investigation",)
    INVESTIGATION_FIELD_NUMBER: _ClassVar[int]
    investigation: Investigation
    def __init__(self, investigation: _Optional[_Union[Investigation, _Mapping]] = ...) -> None: ...

class ListInvestigationsRequest(_message.Message):
    __slots__ = ("status", "page_size", "page_token")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    status: InvestigationStatus
    page_size: int
    page_token: str
    def __init__(self, status: _Optional[_Union[InvestigationStatus, str]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListInvestigationsResponse(_message.Message):
    __slots__ = ("investigations", "next_page_token")
    INVESTIGATIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    investigations: _containers.RepeatedCompositeFieldContainer[Investigation]
    next_page_token: str
    def __init__(self, investigations: _Optional[_Iterable[_Union[Investigation, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class WatchInvestigationRequest(_message.Message):
    __slots__ = ("investigation_id", "after_seq")
    INVESTIGATION_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQ_FIELD_NUMBER: _ClassVar[int]
    investigation_id: str
    after_seq: int
    def __init__(self, investigation_id: _Optional[str] = ..., after_seq: _Optional[int] = ...) -> None: ...

class WatchInvestigationResponse(_message.Message):
    __slots__ = ("entry",)
    ENTRY_FIELD_NUMBER: _ClassVar[int]
    entry: AuditEntry
    def __init__(self, entry: _Optional[_Union[AuditEntry, _Mapping]] = ...) -> None: ...

class GetAuditTrailRequest(_message.Message):
    __slots__ = ("investigation_id", "correlation_id")
    INVESTIGATION_ID_FIELD_NUMBER: _ClassVar[int]
    CORRELATION_ID_FIELD_NUMBER: _ClassVar[int]
    investigation_id: str
    correlation_id: str
    def __init__(self, investigation_id: _Optional[str] = ..., correlation_id: _Optional[str] = ...) -> None: ...

class GetAuditTrailResponse(_message.Message):
    __slots__ = ("entries",)
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[AuditEntry]
    def __init__(self, entries: _Optional[_Iterable[_Union[AuditEntry, _Mapping]]] = ...) -> None: ...

class ListPendingActionsRequest(_message.Message):
    __slots__ = ("recipient_id", "status", "page_size", "page_token")
    RECIPIENT_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    recipient_id: str
    status: PendingActionStatus
    page_size: int
    page_token: str
    def __init__(self, recipient_id: _Optional[str] = ..., status: _Optional[_Union[PendingActionStatus, str]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListPendingActionsResponse(_message.Message):
    __slots__ = ("actions", "next_page_token")
    ACTIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    actions: _containers.RepeatedCompositeFieldContainer[PendingAction]
    next_page_token: str
    def __init__(self, actions: _Optional[_Iterable[_Union[PendingAction, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...
