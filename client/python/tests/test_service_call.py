"""The service_call workflow's state: the accessor and context helpers (offline), and a live call
as StartConversation and GetConversation report it. The scripted demo model cannot run a turn of
the shipped flow (its navigator needs a real model's choice among each node's children), so no
turn is sent here; examples/service_call.py runs a whole call against a real model."""

import json

from frontdesk import (
    CONVERSATION_ENDED,
    Conversation,
    FrontdeskClient,
    IntakeState,
    ServiceCallState,
    intake_state,
    service_call_context,
    service_call_state,
)

MANDATORY = {"customers_main_ask", "customer_phone_number"}


def test_accessors_pick_the_state_of_the_conversations_workflow() -> None:
    call = Conversation(
        workflow="service_call",
        service_call=ServiceCallState(
            current_node="Plan",
            context_json=json.dumps({"customer_id": "CUS-00001", "flags": {"plan_flag": 1}}),
            node_traversal_path=["GREET_CUSTOMER", "Plan"],
            call_ended=True,
            model_calls=3,
            prompt_tokens=120,
            completion_tokens=14,
        ),
    )
    state = service_call_state(call)
    assert state is not None and state.current_node == "Plan" and state.call_ended
    assert list(state.node_traversal_path) == ["GREET_CUSTOMER", "Plan"]
    assert service_call_context(state) == {"customer_id": "CUS-00001", "flags": {"plan_flag": 1}}
    assert intake_state(call) is None

    intake = Conversation(workflow="intake", intake=IntakeState(missing_fields=["budget"]))
    assert service_call_state(intake) is None
    got = intake_state(intake)
    assert got is not None and list(got.missing_fields) == ["budget"]

    assert service_call_state(Conversation()) is None
    assert service_call_context(ServiceCallState()) == {}
    assert CONVERSATION_ENDED == "CONVERSATION_ENDED"


def test_a_new_call_starts_at_the_greeting(client: FrontdeskClient) -> None:
    assert "service_call" in [w.name for w in client.list_workflows()]
    graph = {n.name for n in client.describe_workflow("service_call").nodes}
    assert {"receive", "navigator", "GREET_CUSTOMER", "Execute_Call_Hangup"} <= graph

    started = client.start_conversation("service_call")
    assert started.conversation.workflow == "service_call"
    assert started.welcome.text
    state = service_call_state(started.conversation)
    assert state is not None
    assert state.current_node == "GREET_CUSTOMER"
    assert not state.call_ended
    assert set(state.missing_mandatory_fields) == MANDATORY
    assert list(state.node_traversal_path) == []
    assert (state.model_calls, state.prompt_tokens, state.completion_tokens) == (0, 0, 0)
    context = service_call_context(state)
    assert context["agent_session_id"]
    assert context["call_ended"] is False

    got = service_call_state(client.get_conversation(started.conversation.conversation_id).conversation)
    assert got == state
    assert intake_state(started.conversation) is None
