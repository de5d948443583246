import datetime

from frontdesk.v1 import common_pb2 as _common_pb2
from frontdesk.v1 import conversation_pb2 as _conversation_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class MatchConfidence(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MATCH_CONFIDENCE_UNSPECIFIED: _ClassVar[MatchConfidence]
    MATCH_CONFIDENCE_HIGH: _ClassVar[MatchConfidence]
    MATCH_CONFIDENCE_MEDIUM: _ClassVar[MatchConfidence]
    MATCH_CONFIDENCE_LOW: _ClassVar[MatchConfidence]

class Urgency(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    URGENCY_UNSPECIFIED: _ClassVar[Urgency]
    URGENCY_LOW: _ClassVar[Urgency]
    URGENCY_MEDIUM: _ClassVar[Urgency]
    URGENCY_HIGH: _ClassVar[Urgency]
    URGENCY_CRITICAL: _ClassVar[Urgency]

class TicketType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TICKET_TYPE_UNSPECIFIED: _ClassVar[TicketType]
    TICKET_TYPE_BILLING: _ClassVar[TicketType]
    TICKET_TYPE_TECHNICAL: _ClassVar[TicketType]
    TICKET_TYPE_GENERAL: _ClassVar[TicketType]

class RecommendedAction(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RECOMMENDED_ACTION_UNSPECIFIED: _ClassVar[RecommendedAction]
    RECOMMENDED_ACTION_AUTO_RESPOND: _ClassVar[RecommendedAction]
    RECOMMENDED_ACTION_ROUTE_SPECIALIST: _ClassVar[RecommendedAction]
    RECOMMENDED_ACTION_ESCALATE_HUMAN: _ClassVar[RecommendedAction]

class TicketStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TICKET_STATUS_UNSPECIFIED: _ClassVar[TicketStatus]
    TICKET_STATUS_ACTIVE: _ClassVar[TicketStatus]
    TICKET_STATUS_RESOLVED: _ClassVar[TicketStatus]
    TICKET_STATUS_ESCALATED: _ClassVar[TicketStatus]
MATCH_CONFIDENCE_UNSPECIFIED: MatchConfidence
MATCH_CONFIDENCE_HIGH: MatchConfidence
MATCH_CONFIDENCE_MEDIUM: MatchConfidence
MATCH_CONFIDENCE_LOW: MatchConfidence
URGENCY_UNSPECIFIED: Urgency
URGENCY_LOW: Urgency
URGENCY_MEDIUM: Urgency
URGENCY_HIGH: Urgency
URGENCY_CRITICAL: Urgency
TICKET_TYPE_UNSPECIFIED: TicketType
TICKET_TYPE_BILLING: TicketType
TICKET_TYPE_TECHNICAL: TicketType
TICKET_TYPE_GENERAL: TicketType
RECOMMENDED_ACTION_UNSPECIFIED: RecommendedAction
RECOMMENDED_ACTION_AUTO_RESPOND: RecommendedAction
RECOMMENDED_ACTION_ROUTE_SPECIALIST: RecommendedAction
RECOMMENDED_ACTION_ESCALATE_HUMAN: RecommendedAction
TICKET_STATUS_UNSPECIFIED: TicketStatus
TICKET_STATUS_ACTIVE: TicketStatus
TICKET_STATUS_RESOLVED: TicketStatus
TICKET_STATUS_ESCALATED: TicketStatus

class TriageTicketRequest(_message.Message):
    __slots__ = ("customer_id", "message", "subject", "language", "idempotency_key")
    CUSTOMER_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    LANGUAGE_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    customer_id: str
    message: str
    subject: str
    language: str
    idempotency_key: str
    def __init__(self, customer_id: _Optional[str] = ..., message: _Optional[str] = ..., subject: _Optional[str] = ..., language: _Optional[str] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class TriageTicketResponse(_message.Message):
    __slots__ = ("resolution", "event", "result")
    RESOLUTION_FIELD_NUMBER: _ClassVar[int]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    resolution: TicketResolution
    event: _common_pb2.RunEvent
    result: TriageResult
    def __init__(self, resolution: _Optional[_Union[TicketResolution, _Mapping]] = ..., event: _Optional[_Union[_common_pb2.RunEvent, _Mapping]] = ..., result: _Optional[_Union[TriageResult, _Mapping]] = ...) -> None: ...

class TicketResolution(_message.Message):
    __slots__ = ("ticket_id", "matched_existing", "confidence", "reasoning", "candidate_ticket_ids", "usage")
    TICKET_ID_FIELD_NUMBER: _ClassVar[int]
    MATCHED_EXISTING_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    REASONING_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_TICKET_IDS_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    ticket_id: str
    matched_existing: bool
    confidence: MatchConfidence
    reasoning: str
    candidate_ticket_ids: _containers.RepeatedScalarFieldContainer[str]
    usage: _common_pb2.Usage
    def __init__(self, ticket_id: _Optional[str] = ..., matched_existing: _Optional[bool] = ..., confidence: _Optional[_Union[MatchConfidence, str]] = ..., reasoning: _Optional[str] = ..., candidate_ticket_ids: _Optional[_Iterable[str]] = ..., usage: _Optional[_Union[_common_pb2.Usage, _Mapping]] = ...) -> None: ...

class ExtractedInfo(_message.Message):
    __slots__ = ("product_area", "issue_type", "sentiment", "language")
    PRODUCT_AREA_FIELD_NUMBER: _ClassVar[int]
    ISSUE_TYPE_FIELD_NUMBER: _ClassVar[int]
    SENTIMENT_FIELD_NUMBER: _ClassVar[int]
    LANGUAGE_FIELD_NUMBER: _ClassVar[int]
    product_area: str
    issue_type: str
    sentiment: str
    language: str
    def __init__(self, product_area: _Optional[str] = ..., issue_type: _Optional[str] = ..., sentiment: _Optional[str] = ..., language: _Optional[str] = ...) -> None: ...

class KbArticleHit(_message.Message):
    __slots__ = ("article_id", "title", "score")
    ARTICLE_ID_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    article_id: str
    title: str
    score: float
    def __init__(self, article_id: _Optional[str] = ..., title: _Optional[str] = ..., score: _Optional[float] = ...) -> None: ...

class TriageResult(_message.Message):
    __slots__ = ("ticket_id", "customer_id", "urgency", "ticket_type", "recommended_action", "requires_escalation", "suggested_response", "suggested_response_english", "relevant_articles", "reasoning", "extracted_info", "language", "status", "kb_results", "run_id", "replayed")
    TICKET_ID_FIELD_NUMBER: _ClassVar[int]
    CUSTOMER_ID_FIELD_NUMBER: _ClassVar[int]
    URGENCY_FIELD_NUMBER: _ClassVar[int]
    TICKET_TYPE_FIELD_NUMBER: _ClassVar[int]
    RECOMMENDED_ACTION_FIELD_NUMBER: _ClassVar[int]
    REQUIRES_ESCALATION_FIELD_NUMBER: _ClassVar[int]
    SUGGESTED_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    SUGGESTED_RESPONSE_ENGLISH_FIELD_NUMBER: _ClassVar[int]
    RELEVANT_ARTICLES_FIELD_NUMBER: _ClassVar[int]
    REASONING_FIELD_NUMBER: _ClassVar[int]
    EXTRACTED_INFO_FIELD_NUMBER: _ClassVar[int]
    LANGUAGE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    KB_RESULTS_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    REPLAYED_FIELD_NUMBER: _ClassVar[int]
    ticket_id: str
    customer_id: str
    urgency: Urgency
    ticket_type: TicketType
    recommended_action: RecommendedAction
    requires_escalation: bool
    suggested_response: str
    suggested_response_english: str
    relevant_articles: _containers.RepeatedScalarFieldContainer[str]
    reasoning: str
    extracted_info: ExtractedInfo
    language: str
    status: TicketStatus
    kb_results: _containers.RepeatedCompositeFieldContainer[KbArticleHit]
    run_id: str
    replayed: bool
    def __init__(self, ticket_id: _Optional[str] = ..., customer_id: _Optional[str] = ..., urgency: _Optional[_Union[Urgency, str]] = ..., ticket_type: _Optional[_Union[TicketType, str]] = ..., recommended_action: _Optional[_Union[RecommendedAction, str]] = ..., requires_escalation: _Optional[bool] = ..., suggested_response: _Optional[str] = ..., suggested_response_english: _Optional[str] = ..., relevant_articles: _Optional[_Iterable[str]] = ..., reasoning: _Optional[str] = ..., extracted_info: _Optional[_Union[ExtractedInfo, _Mapping]] = ..., language: _Optional[str] = ..., status: _Optional[_Union[TicketStatus, str]] = ..., kb_results: _Optional[_Iterable[_Union[KbArticleHit, _Mapping]]] = ..., run_id: _Optional[str] = ..., replayed: _Optional[bool] = ...) -> None: ...

class TicketMessage(_message.Message):
    __slots__ = ("role", "text", "english_text", "create_time")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    ENGLISH_TEXT_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    role: _conversation_pb2.Role
    text: str
    english_text: str
    create_time: _timestamp_pb2.Timestamp
    def __init__(self, role: _Optional[_Union[_conversation_pb2.Role, str]] = ..., text: _Optional[str] = ..., english_text: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class Ticket(_message.Message):
    __slots__ = ("ticket_id", "customer_id", "status", "subject", "urgency", "ticket_type", "recommended_action", "create_time", "update_time")
    TICKET_ID_FIELD_NUMBER: _ClassVar[int]
    CUSTOMER_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    URGENCY_FIELD_NUMBER: _ClassVar[int]
    TICKET_TYPE_FIELD_NUMBER: _ClassVar[int]
    RECOMMENDED_ACTION_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    ticket_id: str
    customer_id: str
    status: TicketStatus
    subject: str
    urgency: Urgency
    ticket_type: TicketType
    recommended_action: RecommendedAction
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    def __init__(self, ticket_id: _Optional[str] = ..., customer_id: _Optional[str] = ..., status: _Optional[_Union[TicketStatus, str]] = ..., subject: _Optional[str] = ..., urgency: _Optional[_Union[Urgency, str]] = ..., ticket_type: _Optional[_Union[TicketType, str]] = ..., recommended_action: _Optional[_Union[RecommendedAction, str]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class GetTicketRequest(_message.Message):
    __slots__ = ("customer_id", "ticket_id")
    CUSTOMER_ID_FIELD_NUMBER: _ClassVar[int]
    TICKET_ID_FIELD_NUMBER: _ClassVar[int]
    customer_id: str
    ticket_id: str
    def __init__(self, customer_id: _Optional[str] = ..., ticket_id: _Optional[str] = ...) -> None: ...

class GetTicketResponse(_message.Message):
    __slots__ = ("ticket", "messages", "result")
    TICKET_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    ticket: Ticket
    messages: _containers.RepeatedCompositeFieldContainer[TicketMessage]
    result: TriageResult
    def __init__(self, ticket: _Optional[_Union[Ticket, _Mapping]] = ..., messages: _Optional[_Iterable[_Union[TicketMessage, _Mapping]]] = ..., result: _Optional[_Union[TriageResult, _Mapping]] = ...) -> None: ...

class ListTicketsRequest(_message.Message):
    __slots__ = ("customer_id", "status", "page_size", "page_token")
    CUSTOMER_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    customer_id: str
    status: TicketStatus
    page_size: int
    page_token: str
    def __init__(self, customer_id: _Optional[str] = ..., status: _Optional[_Union[TicketStatus, str]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListTicketsResponse(_message.Message):
    __slots__ = ("tickets", "next_page_token")
    TICKETS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    tickets: _containers.RepeatedCompositeFieldContainer[Ticket]
    next_page_token: str
    def __init__(self, tickets: _Optional[_Iterable[_Union[Ticket, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListActiveTicketsRequest(_message.Message):
    __slots__ = ("customer_id",)
    CUSTOMER_ID_FIELD_NUMBER: _ClassVar[int]
    customer_id: str
    def __init__(self, customer_id: _Optional[str] = ...) -> None: ...

class ListActiveTicketsResponse(_message.Message):
    __slots__ = ("tickets",)
    TICKETS_FIELD_NUMBER: _ClassVar[int]
    tickets: _containers.RepeatedCompositeFieldContainer[Ticket]
    def __init__(self, tickets: _Optional[_Iterable[_Union[Ticket, _Mapping]]] = ...) -> None: ...
