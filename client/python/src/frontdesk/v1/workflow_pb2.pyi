import datetime

from frontdesk.v1 import common_pb2 as _common_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class WorkflowKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    WORKFLOW_KIND_UNSPECIFIED: _ClassVar[WorkflowKind]
    WORKFLOW_KIND_CONVERSATIONAL: _ClassVar[WorkflowKind]
    WORKFLOW_KIND_TASK: _ClassVar[WorkflowKind]
WORKFLOW_KIND_UNSPECIFIED: WorkflowKind
WORKFLOW_KIND_CONVERSATIONAL: WorkflowKind
WORKFLOW_KIND_TASK: WorkflowKind

class SubscribeRunRequest(_message.Message):
    __slots__ = ("run_id", "after_event_id")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    after_event_id: int
    def __init__(self, run_id: _Optional[str] = ..., after_event_id: _Optional[int] = ...) -> None: ...

class SubscribeRunResponse(_message.Message):
    __slots__ = ("event", "skipped")
    EVENT_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    event: _common_pb2.RunEvent
    skipped: int
    def __init__(self, event: _Optional[_Union[_common_pb2.RunEvent, _Mapping]] = ..., skipped: _Optional[int] = ...) -> None: ...

class Workflow(_message.Message):
    __slots__ = ("name", "description", "kind")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    kind: WorkflowKind
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., kind: _Optional[_Union[WorkflowKind, str]] = ...) -> None: ...

class ListWorkflowsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListWorkflowsResponse(_message.Message):
    __slots__ = ("workflows",)
    WORKFLOWS_FIELD_NUMBER: _ClassVar[int]
    workflows: _containers.RepeatedCompositeFieldContainer[Workflow]
    def __init__(self, workflows: _Optional[_Iterable[_Union[Workflow, _Mapping]]] = ...) -> None: ...

class DescribeWorkflowRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class GraphNode(_message.Message):
    __slots__ = ("name", "description", "fan_out", "effects")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    FAN_OUT_FIELD_NUMBER: _ClassVar[int]
    EFFECTS_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    fan_out: bool
    effects: bool
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., fan_out: _Optional[bool] = ..., effects: _Optional[bool] = ...) -> None: ...

class GraphEdge(_message.Message):
    __slots__ = ("source", "target", "conditional")
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    CONDITIONAL_FIELD_NUMBER: _ClassVar[int]
    source: str
    target: str
    conditional: bool
    def __init__(self, source: _Optional[str] = ..., target: _Optional[str] = ..., conditional: _Optional[bool] = ...) -> None: ...

class DescribeWorkflowResponse(_message.Message):
    __slots__ = ("workflow", "nodes", "edges", "mermaid", "failure_node")
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    EDGES_FIELD_NUMBER: _ClassVar[int]
    MERMAID_FIELD_NUMBER: _ClassVar[int]
    FAILURE_NODE_FIELD_NUMBER: _ClassVar[int]
    workflow: Workflow
    nodes: _containers.RepeatedCompositeFieldContainer[GraphNode]
    edges: _containers.RepeatedCompositeFieldContainer[GraphEdge]
    mermaid: str
    failure_node: str
    def __init__(self, workflow: _Optional[_Union[Workflow, _Mapping]] = ..., nodes: _Optional[_Iterable[_Union[GraphNode, _Mapping]]] = ..., edges: _Optional[_Iterable[_Union[GraphEdge, _Mapping]]] = ..., mermaid: _Optional[str] = ..., failure_node: _Optional[str] = ...) -> None: ...

class CancelRunRequest(_message.Message):
    __slots__ = ("run_id",)
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    def __init__(self, run_id: _Optional[str] = ...) -> None: ...

class CancelRunResponse(_message.Message):
    __slots__ = ("cancelled",)
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    cancelled: bool
    def __init__(self, cancelled: _Optional[bool] = ...) -> None: ...

class ListLlmCallsRequest(_message.Message):
    __slots__ = ("thread_id", "page_size", "page_token")
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    thread_id: str
    page_size: int
    page_token: str
    def __init__(self, thread_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class LlmCall(_message.Message):
    __slots__ = ("run_id", "node", "purpose", "model", "prompt_tokens", "completion_tokens", "cost_usd", "latency", "attempts", "error", "prompt_json", "response_json", "time")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    PURPOSE_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COST_USD_FIELD_NUMBER: _ClassVar[int]
    LATENCY_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    PROMPT_JSON_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_JSON_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    node: str
    purpose: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    latency: _duration_pb2.Duration
    attempts: int
    error: str
    prompt_json: str
    response_json: str
    time: _timestamp_pb2.Timestamp
    def __init__(self, run_id: _Optional[str] = ..., node: _Optional[str] = ..., purpose: _Optional[str] = ..., model: _Optional[str] = ..., prompt_tokens: _Optional[int] = ..., completion_tokens: _Optional[int] = ..., cost_usd: _Optional[float] = ..., latency: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., attempts: _Optional[int] = ..., error: _Optional[str] = ..., prompt_json: _Optional[str] = ..., response_json: _Optional[str] = ..., time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListLlmCallsResponse(_message.Message):
    __slots__ = ("calls", "total_usage", "total_calls", "next_page_token")
    CALLS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_USAGE_FIELD_NUMBER: _ClassVar[int]
    TOTAL_CALLS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    calls: _containers.RepeatedCompositeFieldContainer[LlmCall]
    total_usage: _common_pb2.Usage
    total_calls: int
    next_page_token: str
    def __init__(self, calls: _Optional[_Iterable[_Union[LlmCall, _Mapping]]] = ..., total_usage: _Optional[_Union[_common_pb2.Usage, _Mapping]] = ..., total_calls: _Optional[int] = ..., next_page_token: _Optional[str] = ...) -> None: ...
