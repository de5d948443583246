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

class ResearchStep(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RESEARCH_STEP_UNSPECIFIED: _ClassVar[ResearchStep]
    RESEARCH_STEP_INPUT: _ClassVar[ResearchStep]
    RESEARCH_STEP_PLANNER: _ClassVar[ResearchStep]
    RESEARCH_STEP_CRITIC_PLANNER: _ClassVar[ResearchStep]
    RESEARCH_STEP_RESEARCHER: _ClassVar[ResearchStep]
    RESEARCH_STEP_CRITIC_RESEARCHER: _ClassVar[ResearchStep]
    RESEARCH_STEP_EXPERT: _ClassVar[ResearchStep]
    RESEARCH_STEP_CRITIC_EXPERT: _ClassVar[ResearchStep]
    RESEARCH_STEP_FINALIZER: _ClassVar[ResearchStep]
    RESEARCH_STEP_ERROR: _ClassVar[ResearchStep]

class CriticDecision(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CRITIC_DECISION_UNSPECIFIED: _ClassVar[CriticDecision]
    CRITIC_DECISION_APPROVE: _ClassVar[CriticDecision]
    CRITIC_DECISION_REJECT: _ClassVar[CriticDecision]

class ResearchOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RESEARCH_OUTCOME_UNSPECIFIED: _ClassVar[ResearchOutcome]
    RESEARCH_OUTCOME_RUNNING: _ClassVar[ResearchOutcome]
    RESEARCH_OUTCOME_ANSWERED: _ClassVar[ResearchOutcome]
    RESEARCH_OUTCOME_RETRY_LIMIT: _ClassVar[ResearchOutcome]
    RESEARCH_OUTCOME_FAILED: _ClassVar[ResearchOutcome]
RESEARCH_STEP_UNSPECIFIED: ResearchStep
RESEARCH_STEP_INPUT: ResearchStep
RESEARCH_STEP_PLANNER: ResearchStep
RESEARCH_STEP_CRITIC_PLANNER: ResearchStep
RESEARCH_STEP_RESEARCHER: ResearchStep
RESEARCH_STEP_CRITIC_RESEARCHER: ResearchStep
RESEARCH_STEP_EXPERT: ResearchStep
RESEARCH_STEP_CRITIC_EXPERT: ResearchStep
RESEARCH_STEP_FINALIZER: ResearchStep
RESEARCH_STEP_ERROR: ResearchStep
CRITIC_DECISION_UNSPECIFIED: CriticDecision
CRITIC_DECISION_APPROVE: CriticDecision
CRITIC_DECISION_REJECT: CriticDecision
RESEARCH_OUTCOME_UNSPECIFIED: ResearchOutcome
RESEARCH_OUTCOME_RUNNING: ResearchOutcome
RESEARCH_OUTCOME_ANSWERED: ResearchOutcome
RESEARCH_OUTCOME_RETRY_LIMIT: ResearchOutcome
RESEARCH_OUTCOME_FAILED: ResearchOutcome

class OrchestratorMessage(_message.Message):
    __slots__ = ("sender", "receiver", "type", "content", "step_id")
    SENDER_FIELD_NUMBER: _ClassVar[int]
    RECEIVER_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    sender: str
    receiver: str
    type: str
    content: str
    step_id: int
    def __init__(self, sender: _Optional[str] = ..., receiver: _Optional[str] = ..., type: _Optional[str] = ..., content: _Optional[str] = ..., step_id: _Optional[int] = ...) -> None: ...

class Plan(_message.Message):
    __slots__ = ("research_steps", "expert_steps", "attempt")
    RESEARCH_STEPS_FIELD_NUMBER: _ClassVar[int]
    EXPERT_STEPS_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    research_steps: _containers.RepeatedScalarFieldContainer[str]
    expert_steps: _containers.RepeatedScalarFieldContainer[str]
    attempt: int
    def __init__(self, research_steps: _Optional[_Iterable[str]] = ..., expert_steps: _Optional[_Iterable[str]] = ..., attempt: _Optional[int] = ...) -> None: ...

class Citation(_message.Message):
    __slots__ = ("document_id", "document_title", "passage", "text")
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_TITLE_FIELD_NUMBER: _ClassVar[int]
    PASSAGE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    document_id: str
    document_title: str
    passage: int
    text: str
    def __init__(self, document_id: _Optional[str] = ..., document_title: _Optional[str] = ..., passage: _Optional[int] = ..., text: _Optional[str] = ...) -> None: ...

class ResearchResult(_message.Message):
    __slots__ = ("step_id", "step", "answer", "citations", "attempt")
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    CITATIONS_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    step_id: int
    step: str
    answer: str
    citations: _containers.RepeatedCompositeFieldContainer[Citation]
    attempt: int
    def __init__(self, step_id: _Optional[int] = ..., step: _Optional[str] = ..., answer: _Optional[str] = ..., citations: _Optional[_Iterable[_Union[Citation, _Mapping]]] = ..., attempt: _Optional[int] = ...) -> None: ...

class CriticVerdict(_message.Message):
    __slots__ = ("critic", "decision", "feedback", "step_id", "retry_count")
    CRITIC_FIELD_NUMBER: _ClassVar[int]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    FEEDBACK_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    RETRY_COUNT_FIELD_NUMBER: _ClassVar[int]
    critic: str
    decision: CriticDecision
    feedback: str
    step_id: int
    retry_count: int
    def __init__(self, critic: _Optional[str] = ..., decision: _Optional[_Union[CriticDecision, str]] = ..., feedback: _Optional[str] = ..., step_id: _Optional[int] = ..., retry_count: _Optional[int] = ...) -> None: ...

class ExpertAnswer(_message.Message):
    __slots__ = ("answer", "reasoning", "attempt")
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    REASONING_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    answer: str
    reasoning: str
    attempt: int
    def __init__(self, answer: _Optional[str] = ..., reasoning: _Optional[str] = ..., attempt: _Optional[int] = ...) -> None: ...

class Research(_message.Message):
    __slots__ = ("research_id", "question", "corpus", "outcome", "current_step", "retry_count", "retry_limit", "plan", "results", "expert", "final_answer", "final_reasoning_trace", "error", "error_component", "messages", "created_at", "updated_at")
    RESEARCH_ID_FIELD_NUMBER: _ClassVar[int]
    QUESTION_FIELD_NUMBER: _ClassVar[int]
    CORPUS_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    CURRENT_STEP_FIELD_NUMBER: _ClassVar[int]
    RETRY_COUNT_FIELD_NUMBER: _ClassVar[int]
    RETRY_LIMIT_FIELD_NUMBER: _ClassVar[int]
    PLAN_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    EXPERT_FIELD_NUMBER: _ClassVar[int]
    FINAL_ANSWER_FIELD_NUMBER: _ClassVar[int]
    FINAL_REASONING_TRACE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_COMPONENT_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    research_id: str
    question: str
    corpus: str
    outcome: ResearchOutcome
    current_step: ResearchStep
    retry_count: int
    retry_limit: int
    plan: Plan
    results: _containers.RepeatedCompositeFieldContainer[ResearchResult]
    expert: ExpertAnswer
    final_answer: str
    final_reasoning_trace: str
    error: str
    error_component: str
    messages: _containers.RepeatedCompositeFieldContainer[OrchestratorMessage]
    created_at: _timestamp_pb2.Timestamp
    updated_at: _timestamp_pb2.Timestamp
    def __init__(self, research_id: _Optional[str] = ..., question: _Optional[str] = ..., corpus: _Optional[str] = ..., outcome: _Optional[_Union[ResearchOutcome, str]] = ..., current_step: _Optional[_Union[ResearchStep, str]] = ..., retry_count: _Optional[int] = ..., retry_limit: _Optional[int] = ..., plan: _Optional[_Union[Plan, _Mapping]] = ..., results: _Optional[_Iterable[_Union[ResearchResult, _Mapping]]] = ..., expert: _Optional[_Union[ExpertAnswer, _Mapping]] = ..., final_answer: _Optional[str] = ..., final_reasoning_trace: _Optional[str] = ..., error: _Optional[str] = ..., error_component: _Optional[str] = ..., messages: _Optional[_Iterable[_Union[OrchestratorMessage, _Mapping]]] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class AskRequest(_message.Message):
    __slots__ = ("question", "retry_limit", "corpus", "idempotency_key")
    QUESTION_FIELD_NUMBER: _ClassVar[int]
    RETRY_LIMIT_FIELD_NUMBER: _ClassVar[int]
    CORPUS_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    question: str
    retry_limit: int
    corpus: str
    idempotency_key: str
    def __init__(self, question: _Optional[str] = ..., retry_limit: _Optional[int] = ..., corpus: _Optional[str] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class AskResponse(_message.Message):
    __slots__ = ("event", "message", "plan", "research_result", "critic_decision", "expert_answer", "research")
    EVENT_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    PLAN_FIELD_NUMBER: _ClassVar[int]
    RESEARCH_RESULT_FIELD_NUMBER: _ClassVar[int]
    CRITIC_DECISION_FIELD_NUMBER: _ClassVar[int]
    EXPERT_ANSWER_FIELD_NUMBER: _ClassVar[int]
    RESEARCH_FIELD_NUMBER: _ClassVar[int]
    event: _common_pb2.RunEvent
    message: OrchestratorMessage
    plan: Plan
    research_result: ResearchResult
    critic_decision: CriticVerdict
    expert_answer: ExpertAnswer
    research: Research
    def __init__(self, event: _Optional[_Union[_common_pb2.RunEvent, _Mapping]] = ..., message: _Optional[_Union[OrchestratorMessage, _Mapping]] = ..., plan: _Optional[_Union[Plan, _Mapping]] = ..., research_result: _Optional[_Union[ResearchResult, _Mapping]] = ..., critic_decision: _Optional[_Union[CriticVerdict, _Mapping]] = ..., expert_answer: _Optional[_Union[ExpertAnswer, _Mapping]] = ..., research: _Optional[_Union[Research, _Mapping]] = ...) -> None: ...

class GetResearchRequest(_message.Message):
    __slots__ = ("research_id",)
    RESEARCH_ID_FIELD_NUMBER: _ClassVar[int]
    research_id: str
    def __init__(self, research_id: _Optional[str] = ...) -> None: ...

class GetResearchResponse(_message.Message):
    __slots__ = ("research",)
    RESEARCH_FIELD_NUMBER: _ClassVar[int]
    research: Research
    def __init__(self, research: _Optional[_Union[Research, _Mapping]] = ...) -> None: ...

class ListResearchRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListResearchResponse(_message.Message):
    __slots__ = ("research", "next_page_token")
    RESEARCH_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    research: _containers.RepeatedCompositeFieldContainer[Research]
    next_page_token: str
    def __init__(self, research: _Optional[_Iterable[_Union[Research, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...
