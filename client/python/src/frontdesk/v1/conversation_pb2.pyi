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

class BusyPolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    BUSY_POLICY_UNSPECIFIED: _ClassVar[BusyPolicy]
    BUSY_POLICY_REJECT: _ClassVar[BusyPolicy]
    BUSY_POLICY_QUEUE: _ClassVar[BusyPolicy]

class Role(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ROLE_UNSPECIFIED: _ClassVar[Role]
    ROLE_USER: _ClassVar[Role]
    ROLE_ASSISTANT: _ClassVar[Role]
    ROLE_SYSTEM: _ClassVar[Role]

class IntakeMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    INTAKE_MODE_UNSPECIFIED: _ClassVar[IntakeMode]
    INTAKE_MODE_CHAT: _ClassVar[IntakeMode]
    INTAKE_MODE_ELICITATION: _ClassVar[IntakeMode]
    INTAKE_MODE_TEAM_MATCHING: _ClassVar[IntakeMode]
    INTAKE_MODE_REVIEW: _ClassVar[IntakeMode]
BUSY_POLICY_UNSPECIFIED: BusyPolicy
BUSY_POLICY_REJECT: BusyPolicy
BUSY_POLICY_QUEUE: BusyPolicy
ROLE_UNSPECIFIED: Role
ROLE_USER: Role
ROLE_ASSISTANT: Role
ROLE_SYSTEM: Role
INTAKE_MODE_UNSPECIFIED: IntakeMode
INTAKE_MODE_CHAT: IntakeMode
INTAKE_MODE_ELICITATION: IntakeMode
INTAKE_MODE_TEAM_MATCHING: IntakeMode
INTAKE_MODE_REVIEW: IntakeMode

class StartConversationRequest(_message.Message):
    __slots__ = ("workflow", "conversation_id", "idempotency_key")
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    workflow: str
    conversation_id: str
    idempotency_key: str
    def __init__(self, workflow: _Optional[str] = ..., conversation_id: _Optional[str] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class StartConversationResponse(_message.Message):
    __slots__ = ("conversation", "welcome")
    CONVERSATION_FIELD_NUMBER: _ClassVar[int]
    WELCOME_FIELD_NUMBER: _ClassVar[int]
    conversation: Conversation
    welcome: Message
    def __init__(self, conversation: _Optional[_Union[Conversation, _Mapping]] = ..., welcome: _Optional[_Union[Message, _Mapping]] = ...) -> None: ...

class SendMessageRequest(_message.Message):
    __slots__ = ("conversation_id", "text", "idempotency_key", "busy_policy")
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    BUSY_POLICY_FIELD_NUMBER: _ClassVar[int]
    conversation_id: str
    text: str
    idempotency_key: str
    busy_policy: BusyPolicy
    def __init__(self, conversation_id: _Optional[str] = ..., text: _Optional[str] = ..., idempotency_key: _Optional[str] = ..., busy_policy: _Optional[_Union[BusyPolicy, str]] = ...) -> None: ...

class SendMessageResponse(_message.Message):
    __slots__ = ("event", "result")
    EVENT_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    event: _common_pb2.RunEvent
    result: TurnResult
    def __init__(self, event: _Optional[_Union[_common_pb2.RunEvent, _Mapping]] = ..., result: _Optional[_Union[TurnResult, _Mapping]] = ...) -> None: ...

class TurnResult(_message.Message):
    __slots__ = ("run_id", "reply", "conversation", "replayed")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    REPLY_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_FIELD_NUMBER: _ClassVar[int]
    REPLAYED_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    reply: Message
    conversation: Conversation
    replayed: bool
    def __init__(self, run_id: _Optional[str] = ..., reply: _Optional[_Union[Message, _Mapping]] = ..., conversation: _Optional[_Union[Conversation, _Mapping]] = ..., replayed: _Optional[bool] = ...) -> None: ...

class GetConversationRequest(_message.Message):
    __slots__ = ("conversation_id",)
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    conversation_id: str
    def __init__(self, conversation_id: _Optional[str] = ...) -> None: ...

class GetConversationResponse(_message.Message):
    __slots__ = ("conversation", "messages")
    CONVERSATION_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    conversation: Conversation
    messages: _containers.RepeatedCompositeFieldContainer[Message]
    def __init__(self, conversation: _Optional[_Union[Conversation, _Mapping]] = ..., messages: _Optional[_Iterable[_Union[Message, _Mapping]]] = ...) -> None: ...

class ListConversationsRequest(_message.Message):
    __slots__ = ("workflow", "page_size", "page_token")
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    workflow: str
    page_size: int
    page_token: str
    def __init__(self, workflow: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListConversationsResponse(_message.Message):
    __slots__ = ("conversations", "next_page_token")
    CONVERSATIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    conversations: _containers.RepeatedCompositeFieldContainer[Conversation]
    next_page_token: str
    def __init__(self, conversations: _Optional[_Iterable[_Union[Conversation, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ResetConversationRequest(_message.Message):
    __slots__ = ("conversation_id", "idempotency_key")
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    conversation_id: str
    idempotency_key: str
    def __init__(self, conversation_id: _Optional[str] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class ResetConversationResponse(_message.Message):
    __slots__ = ("conversation",)
    CONVERSATION_FIELD_NUMBER: _ClassVar[int]
    conversation: Conversation
    def __init__(self, conversation: _Optional[_Union[Conversation, _Mapping]] = ...) -> None: ...

class DeleteConversationRequest(_message.Message):
    __slots__ = ("conversation_id",)
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    conversation_id: str
    def __init__(self, conversation_id: _Optional[str] = ...) -> None: ...

class DeleteConversationResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Conversation(_message.Message):
    __slots__ = ("conversation_id", "workflow", "create_time", "update_time", "turn_count", "version", "intake", "service_call")
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    TURN_COUNT_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    INTAKE_FIELD_NUMBER: _ClassVar[int]
    SERVICE_CALL_FIELD_NUMBER: _ClassVar[int]
    conversation_id: str
    workflow: str
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    turn_count: int
    version: int
    intake: IntakeState
    service_call: ServiceCallState
    def __init__(self, conversation_id: _Optional[str] = ..., workflow: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., turn_count: _Optional[int] = ..., version: _Optional[int] = ..., intake: _Optional[_Union[IntakeState, _Mapping]] = ..., service_call: _Optional[_Union[ServiceCallState, _Mapping]] = ...) -> None: ...

class Message(_message.Message):
    __slots__ = ("message_id", "role", "text", "create_time", "node")
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    message_id: str
    role: Role
    text: str
    create_time: _timestamp_pb2.Timestamp
    node: str
    def __init__(self, message_id: _Optional[str] = ..., role: _Optional[_Union[Role, str]] = ..., text: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., node: _Optional[str] = ...) -> None: ...

class IntakeState(_message.Message):
    __slots__ = ("mode", "collected_fields", "fields_marked_unknown", "missing_fields", "identified_team_id", "identified_team_name", "submission_url", "submission_error")
    class CollectedFieldsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    MODE_FIELD_NUMBER: _ClassVar[int]
    COLLECTED_FIELDS_FIELD_NUMBER: _ClassVar[int]
    FIELDS_MARKED_UNKNOWN_FIELD_NUMBER: _ClassVar[int]
    MISSING_FIELDS_FIELD_NUMBER: _ClassVar[int]
    IDENTIFIED_TEAM_ID_FIELD_NUMBER: _ClassVar[int]
    IDENTIFIED_TEAM_NAME_FIELD_NUMBER: _ClassVar[int]
    SUBMISSION_URL_FIELD_NUMBER: _ClassVar[int]
    SUBMISSION_ERROR_FIELD_NUMBER: _ClassVar[int]
    mode: IntakeMode
    collected_fields: _containers.ScalarMap[str, str]
    fields_marked_unknown: _containers.RepeatedScalarFieldContainer[str]
    missing_fields: _containers.RepeatedScalarFieldContainer[str]
    identified_team_id: str
    identified_team_name: str
    submission_url: str
    submission_error: str
    def __init__(self, mode: _Optional[_Union[IntakeMode, str]] = ..., collected_fields: _Optional[_Mapping[str, str]] = ..., fields_marked_unknown: _Optional[_Iterable[str]] = ..., missing_fields: _Optional[_Iterable[str]] = ..., identified_team_id: _Optional[str] = ..., identified_team_name: _Optional[str] = ..., submission_url: _Optional[str] = ..., submission_error: _Optional[str] = ...) -> None: ...

class ServiceCallState(_message.Message):
    __slots__ = ("current_node", "context_json", "node_traversal_path", "missing_mandatory_fields", "call_ended", "model_calls", "prompt_tokens", "completion_tokens")
    CURRENT_NODE_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_JSON_FIELD_NUMBER: _ClassVar[int]
    NODE_TRAVERSAL_PATH_FIELD_NUMBER: _ClassVar[int]
    MISSING_MANDATORY_FIELDS_FIELD_NUMBER: _ClassVar[int]
    CALL_ENDED_FIELD_NUMBER: _ClassVar[int]
    MODEL_CALLS_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    current_node: str
    context_json: str
    node_traversal_path: _containers.RepeatedScalarFieldContainer[str]
    missing_mandatory_fields: _containers.RepeatedScalarFieldContainer[str]
    call_ended: bool
    model_calls: int
    prompt_tokens: int
    completion_tokens: int
    def __init__(self, current_node: _Optional[str] = ..., context_json: _Optional[str] = ..., node_traversal_path: _Optional[_Iterable[str]] = ..., missing_mandatory_fields: _Optional[_Iterable[str]] = ..., call_ended: _Optional[bool] = ..., model_calls: _Optional[int] = ..., prompt_tokens: _Optional[int] = ..., completion_tokens: _Optional[int] = ...) -> None: ...
