import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ErrorReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ERROR_REASON_UNSPECIFIED: _ClassVar[ErrorReason]
    ERROR_REASON_THREAD_BUSY: _ClassVar[ErrorReason]
    ERROR_REASON_CHECKPOINT_CONFLICT: _ClassVar[ErrorReason]
    ERROR_REASON_NOT_FOUND: _ClassVar[ErrorReason]
    ERROR_REASON_INVALID_ARGUMENT: _ClassVar[ErrorReason]
    ERROR_REASON_LIMIT_EXCEEDED: _ClassVar[ErrorReason]
    ERROR_REASON_MODEL_UNAVAILABLE: _ClassVar[ErrorReason]
    ERROR_REASON_MODEL_OUTPUT_INVALID: _ClassVar[ErrorReason]
    ERROR_REASON_DEADLINE_EXCEEDED: _ClassVar[ErrorReason]
    ERROR_REASON_CANCELLED: _ClassVar[ErrorReason]
    ERROR_REASON_STEP_LIMIT: _ClassVar[ErrorReason]
    ERROR_REASON_STORE_UNAVAILABLE: _ClassVar[ErrorReason]
    ERROR_REASON_IDEMPOTENCY_MISMATCH: _ClassVar[ErrorReason]
    ERROR_REASON_DEPENDENCY_FAILED: _ClassVar[ErrorReason]
    ERROR_REASON_INTERNAL: _ClassVar[ErrorReason]
    ERROR_REASON_ALREADY_EXISTS: _ClassVar[ErrorReason]
    ERROR_REASON_NOTHING_TO_RESUME: _ClassVar[ErrorReason]
    ERROR_REASON_INTERRUPT_PENDING: _ClassVar[ErrorReason]
    ERROR_REASON_NOT_CONVERSATIONAL: _ClassVar[ErrorReason]
    ERROR_REASON_INTERRUPT_NOT_FOUND: _ClassVar[ErrorReason]
    ERROR_REASON_INTERRUPT_ANSWERED: _ClassVar[ErrorReason]
    ERROR_REASON_WRONG_RESPONDER: _ClassVar[ErrorReason]
    ERROR_REASON_CONVERSATION_ENDED: _ClassVar[ErrorReason]
    ERROR_REASON_UNAUTHENTICATED: _ClassVar[ErrorReason]
    ERROR_REASON_SCOPE_MISSING: _ClassVar[ErrorReason]
    ERROR_REASON_QUOTA_EXCEEDED: _ClassVar[ErrorReason]
    ERROR_REASON_SHUTTING_DOWN: _ClassVar[ErrorReason]
ERROR_REASON_UNSPECIFIED: ErrorReason
ERROR_REASON_THREAD_BUSY: ErrorReason
ERROR_REASON_CHECKPOINT_CONFLICT: ErrorReason
ERROR_REASON_NOT_FOUND: ErrorReason
ERROR_REASON_INVALID_ARGUMENT: ErrorReason
ERROR_REASON_LIMIT_EXCEEDED: ErrorReason
ERROR_REASON_MODEL_UNAVAILABLE: ErrorReason
ERROR_REASON_MODEL_OUTPUT_INVALID: ErrorReason
ERROR_REASON_DEADLINE_EXCEEDED: ErrorReason
ERROR_REASON_CANCELLED: ErrorReason
ERROR_REASON_STEP_LIMIT: ErrorReason
ERROR_REASON_STORE_UNAVAILABLE: ErrorReason
ERROR_REASON_IDEMPOTENCY_MISMATCH: ErrorReason
ERROR_REASON_DEPENDENCY_FAILED: ErrorReason
ERROR_REASON_INTERNAL: ErrorReason
ERROR_REASON_ALREADY_EXISTS: ErrorReason
ERROR_REASON_NOTHING_TO_RESUME: ErrorReason
ERROR_REASON_INTERRUPT_PENDING: ErrorReason
ERROR_REASON_NOT_CONVERSATIONAL: ErrorReason
ERROR_REASON_INTERRUPT_NOT_FOUND: ErrorReason
ERROR_REASON_INTERRUPT_ANSWERED: ErrorReason
ERROR_REASON_WRONG_RESPONDER: ErrorReason
ERROR_REASON_CONVERSATION_ENDED: ErrorReason
ERROR_REASON_UNAUTHENTICATED: ErrorReason
ERROR_REASON_SCOPE_MISSING: ErrorReason
ERROR_REASON_QUOTA_EXCEEDED: ErrorReason
ERROR_REASON_SHUTTING_DOWN: ErrorReason

class RunEvent(_message.Message):
    __slots__ = ("run_id", "event_id", "time", "node", "task", "run_started", "node_started", "node_finished", "token_delta", "llm_call_finished", "tool_called", "tool_returned", "run_interrupted", "run_finished", "run_failed", "node_retrying", "node_failed", "tasks_dispatched", "task_finished", "interrupt_raised")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    RUN_STARTED_FIELD_NUMBER: _ClassVar[int]
    NODE_STARTED_FIELD_NUMBER: _ClassVar[int]
    NODE_FINISHED_FIELD_NUMBER: _ClassVar[int]
    TOKEN_DELTA_FIELD_NUMBER: _ClassVar[int]
    LLM_CALL_FINISHED_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALLED_FIELD_NUMBER: _ClassVar[int]
    TOOL_RETURNED_FIELD_NUMBER: _ClassVar[int]
    RUN_INTERRUPTED_FIELD_NUMBER: _ClassVar[int]
    RUN_FINISHED_FIELD_NUMBER: _ClassVar[int]
    RUN_FAILED_FIELD_NUMBER: _ClassVar[int]
    NODE_RETRYING_FIELD_NUMBER: _ClassVar[int]
    NODE_FAILED_FIELD_NUMBER: _ClassVar[int]
    TASKS_DISPATCHED_FIELD_NUMBER: _ClassVar[int]
    TASK_FINISHED_FIELD_NUMBER: _ClassVar[int]
    INTERRUPT_RAISED_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    event_id: int
    time: _timestamp_pb2.Timestamp
    node: str
    task: int
    run_started: RunStarted
    node_started: NodeStarted
    node_finished: NodeFinished
    token_delta: TokenDelta
    llm_call_finished: LlmCallFinished
    tool_called: ToolCalled
    tool_returned: ToolReturned
    run_interrupted: RunInterrupted
    run_finished: RunFinished
    run_failed: RunFailed
    node_retrying: NodeRetrying
    node_failed: NodeFailed
    tasks_dispatched: TasksDispatched
    task_finished: TaskFinished
    interrupt_raised: InterruptRaised
    def __init__(self, run_id: _Optional[str] = ..., event_id: _Optional[int] = ..., time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., node: _Optional[str] = ..., task: _Optional[int] = ..., run_started: _Optional[_Union[RunStarted, _Mapping]] = ..., node_started: _Optional[_Union[NodeStarted, _Mapping]] = ..., node_finished: _Optional[_Union[NodeFinished, _Mapping]] = ..., token_delta: _Optional[_Union[TokenDelta, _Mapping]] = ..., llm_call_finished: _Optional[_Union[LlmCallFinished, _Mapping]] = ..., tool_called: _Optional[_Union[ToolCalled, _Mapping]] = ..., tool_returned: _Optional[_Union[ToolReturned, _Mapping]] = ..., run_interrupted: _Optional[_Union[RunInterrupted, _Mapping]] = ..., run_finished: _Optional[_Union[RunFinished, _Mapping]] = ..., run_failed: _Optional[_Union[RunFailed, _Mapping]] = ..., node_retrying: _Optional[_Union[NodeRetrying, _Mapping]] = ..., node_failed: _Optional[_Union[NodeFailed, _Mapping]] = ..., tasks_dispatched: _Optional[_Union[TasksDispatched, _Mapping]] = ..., task_finished: _Optional[_Union[TaskFinished, _Mapping]] = ..., interrupt_raised: _Optional[_Union[InterruptRaised, _Mapping]] = ...) -> None: ...

class RunStarted(_message.Message):
    __slots__ = ("thread_id", "workflow", "resumed")
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    RESUMED_FIELD_NUMBER: _ClassVar[int]
    thread_id: str
    workflow: str
    resumed: bool
    def __init__(self, thread_id: _Optional[str] = ..., workflow: _Optional[str] = ..., resumed: _Optional[bool] = ...) -> None: ...

class NodeStarted(_message.Message):
    __slots__ = ("step",)
    STEP_FIELD_NUMBER: _ClassVar[int]
    step: int
    def __init__(self, step: _Optional[int] = ...) -> None: ...

class NodeFinished(_message.Message):
    __slots__ = ("step", "update_json", "duration", "next_node")
    STEP_FIELD_NUMBER: _ClassVar[int]
    UPDATE_JSON_FIELD_NUMBER: _ClassVar[int]
    DURATION_FIELD_NUMBER: _ClassVar[int]
    NEXT_NODE_FIELD_NUMBER: _ClassVar[int]
    step: int
    update_json: str
    duration: _duration_pb2.Duration
    next_node: str
    def __init__(self, step: _Optional[int] = ..., update_json: _Optional[str] = ..., duration: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., next_node: _Optional[str] = ...) -> None: ...

class TokenDelta(_message.Message):
    __slots__ = ("text",)
    TEXT_FIELD_NUMBER: _ClassVar[int]
    text: str
    def __init__(self, text: _Optional[str] = ...) -> None: ...

class LlmCallFinished(_message.Message):
    __slots__ = ("model", "usage", "latency", "purpose", "attempts", "error")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    LATENCY_FIELD_NUMBER: _ClassVar[int]
    PURPOSE_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    model: str
    usage: Usage
    latency: _duration_pb2.Duration
    purpose: str
    attempts: int
    error: str
    def __init__(self, model: _Optional[str] = ..., usage: _Optional[_Union[Usage, _Mapping]] = ..., latency: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., purpose: _Optional[str] = ..., attempts: _Optional[int] = ..., error: _Optional[str] = ...) -> None: ...

class Usage(_message.Message):
    __slots__ = ("prompt_tokens", "completion_tokens", "cost_usd")
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COST_USD_FIELD_NUMBER: _ClassVar[int]
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    def __init__(self, prompt_tokens: _Optional[int] = ..., completion_tokens: _Optional[int] = ..., cost_usd: _Optional[float] = ...) -> None: ...

class ToolCalled(_message.Message):
    __slots__ = ("call_id", "name", "arguments_json")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_JSON_FIELD_NUMBER: _ClassVar[int]
    call_id: str
    name: str
    arguments_json: str
    def __init__(self, call_id: _Optional[str] = ..., name: _Optional[str] = ..., arguments_json: _Optional[str] = ...) -> None: ...

class ToolReturned(_message.Message):
    __slots__ = ("call_id", "name", "result_json", "is_error", "latency")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    RESULT_JSON_FIELD_NUMBER: _ClassVar[int]
    IS_ERROR_FIELD_NUMBER: _ClassVar[int]
    LATENCY_FIELD_NUMBER: _ClassVar[int]
    call_id: str
    name: str
    result_json: str
    is_error: bool
    latency: _duration_pb2.Duration
    def __init__(self, call_id: _Optional[str] = ..., name: _Optional[str] = ..., result_json: _Optional[str] = ..., is_error: _Optional[bool] = ..., latency: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class NodeRetrying(_message.Message):
    __slots__ = ("step", "attempt", "max_attempts", "reason", "message", "delay")
    STEP_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    DELAY_FIELD_NUMBER: _ClassVar[int]
    step: int
    attempt: int
    max_attempts: int
    reason: str
    message: str
    delay: _duration_pb2.Duration
    def __init__(self, step: _Optional[int] = ..., attempt: _Optional[int] = ..., max_attempts: _Optional[int] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ..., delay: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class NodeFailed(_message.Message):
    __slots__ = ("step", "reason", "message", "fallback_node")
    STEP_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    FALLBACK_NODE_FIELD_NUMBER: _ClassVar[int]
    step: int
    reason: str
    message: str
    fallback_node: str
    def __init__(self, step: _Optional[int] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ..., fallback_node: _Optional[str] = ...) -> None: ...

class TasksDispatched(_message.Message):
    __slots__ = ("step", "tasks", "already_done")
    STEP_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    ALREADY_DONE_FIELD_NUMBER: _ClassVar[int]
    step: int
    tasks: int
    already_done: int
    def __init__(self, step: _Optional[int] = ..., tasks: _Optional[int] = ..., already_done: _Optional[int] = ...) -> None: ...

class TaskFinished(_message.Message):
    __slots__ = ("step", "update_json", "duration")
    STEP_FIELD_NUMBER: _ClassVar[int]
    UPDATE_JSON_FIELD_NUMBER: _ClassVar[int]
    DURATION_FIELD_NUMBER: _ClassVar[int]
    step: int
    update_json: str
    duration: _duration_pb2.Duration
    def __init__(self, step: _Optional[int] = ..., update_json: _Optional[str] = ..., duration: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class InterruptRaised(_message.Message):
    __slots__ = ("interrupt_id", "reason", "payload_json")
    INTERRUPT_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_JSON_FIELD_NUMBER: _ClassVar[int]
    interrupt_id: str
    reason: str
    payload_json: str
    def __init__(self, interrupt_id: _Optional[str] = ..., reason: _Optional[str] = ..., payload_json: _Optional[str] = ...) -> None: ...

class RunInterrupted(_message.Message):
    __slots__ = ("reason", "payload_json", "pending_interrupt_ids", "usage")
    REASON_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_JSON_FIELD_NUMBER: _ClassVar[int]
    PENDING_INTERRUPT_IDS_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    reason: str
    payload_json: str
    pending_interrupt_ids: _containers.RepeatedScalarFieldContainer[str]
    usage: Usage
    def __init__(self, reason: _Optional[str] = ..., payload_json: _Optional[str] = ..., pending_interrupt_ids: _Optional[_Iterable[str]] = ..., usage: _Optional[_Union[Usage, _Mapping]] = ...) -> None: ...

class RunFinished(_message.Message):
    __slots__ = ("steps", "duration", "usage", "output_json")
    STEPS_FIELD_NUMBER: _ClassVar[int]
    DURATION_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_JSON_FIELD_NUMBER: _ClassVar[int]
    steps: int
    duration: _duration_pb2.Duration
    usage: Usage
    output_json: str
    def __init__(self, steps: _Optional[int] = ..., duration: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., usage: _Optional[_Union[Usage, _Mapping]] = ..., output_json: _Optional[str] = ...) -> None: ...

class RunFailed(_message.Message):
    __slots__ = ("code", "message", "reason", "usage")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    code: int
    message: str
    reason: str
    usage: Usage
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ..., reason: _Optional[str] = ..., usage: _Optional[_Union[Usage, _Mapping]] = ...) -> None: ...
