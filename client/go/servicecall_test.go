package frontdesk_test

import (
	"reflect"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	frontdesk "github.com/frontdesk/frontdesk/client/go"
	v1 "github.com/frontdesk/frontdesk/client/go/frontdeskv1"
)

// The service_call workflow's state: the typed accessor and ServiceCallContext (offline), and a
// live call as StartConversation and GetConversation report it. The scripted demo model cannot
// run a turn of the shipped flow (its navigator needs a real model's choice among each node's
// children), so no turn is sent here; examples/service_call runs a whole call against a real
// model.

func TestServiceCallStateAccessors(t *testing.T) {
	call := &v1.Conversation{
		Workflow: "service_call",
		State: &v1.Conversation_ServiceCall{ServiceCall: &v1.ServiceCallState{
			CurrentNode:       "Plan",
			ContextJson:       `{"customer_id": "CUS-00001", "flags": {"plan_flag": 1}}`,
			NodeTraversalPath: []string{"GREET_CUSTOMER", "Plan"},
			CallEnded:         true,
		}},
	}
	state := call.GetServiceCall()
	if state.GetCurrentNode() != "Plan" || !state.GetCallEnded() || call.GetIntake() != nil {
		t.Fatalf("accessors: %v", call)
	}
	ctx, err := frontdesk.ServiceCallContext(state)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"customer_id": "CUS-00001", "flags": map[string]any{"plan_flag": float64(1)}}
	if !reflect.DeepEqual(ctx, want) {
		t.Fatalf("context %v, want %v", ctx, want)
	}
	intake := &v1.Conversation{State: &v1.Conversation_Intake{Intake: &v1.IntakeState{MissingFields: []string{"budget"}}}}
	if intake.GetServiceCall() != nil || intake.GetIntake() == nil {
		t.Fatalf("intake accessors: %v", intake)
	}
	for _, empty := range []*v1.ServiceCallState{nil, {}, {ContextJson: "null"}} {
		if got, err := frontdesk.ServiceCallContext(empty); err != nil || len(got) != 0 || got == nil {
			t.Fatalf("ServiceCallContext(%v) = %v, %v", empty, got, err)
		}
	}
	if _, err := frontdesk.ServiceCallContext(&v1.ServiceCallState{ContextJson: "[1]"}); err == nil {
		t.Fatal("a context that is not an object is an error")
	}
	if frontdesk.ReasonConversationEnded != v1.ErrorReason_ERROR_REASON_CONVERSATION_ENDED.String()[len("ERROR_REASON_"):] {
		t.Fatalf("ReasonConversationEnded = %q", frontdesk.ReasonConversationEnded)
	}
}

func TestServiceCallStartsAtTheGreeting(t *testing.T) {
	c, ctx := client(t)
	wfs, err := c.ListWorkflows(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(wfs, func(w *v1.Workflow) bool { return w.GetName() == "service_call" }) {
		t.Fatalf("service_call not in %v", wfs)
	}
	graph, err := c.DescribeWorkflow(ctx, "service_call")
	if err != nil {
		t.Fatal(err)
	}
	var nodes []string
	for _, n := range graph.GetNodes() {
		nodes = append(nodes, n.GetName())
	}
	for _, want := range []string{"receive", "navigator", "GREET_CUSTOMER", "Execute_Call_Hangup"} {
		if !slices.Contains(nodes, want) {
			t.Fatalf("%s not in %v", want, nodes)
		}
	}

	started, err := c.StartConversation(ctx, "service_call")
	if err != nil {
		t.Fatal(err)
	}
	if started.GetConversation().GetWorkflow() != "service_call" || started.GetWelcome().GetText() == "" {
		t.Fatalf("start: %v", started)
	}
	state := started.GetConversation().GetServiceCall()
	if state == nil || started.GetConversation().GetIntake() != nil {
		t.Fatalf("state: %v", started.GetConversation())
	}
	missing := slices.Sorted(slices.Values(state.GetMissingMandatoryFields()))
	if state.GetCurrentNode() != "GREET_CUSTOMER" || state.GetCallEnded() || len(state.GetNodeTraversalPath()) != 0 ||
		!slices.Equal(missing, []string{"customer_phone_number", "customers_main_ask"}) ||
		state.GetModelCalls() != 0 || state.GetPromptTokens() != 0 || state.GetCompletionTokens() != 0 {
		t.Fatalf("a new call: %v", state)
	}
	context, err := frontdesk.ServiceCallContext(state)
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := context["agent_session_id"].(string); id == "" || context["call_ended"] != false {
		t.Fatalf("context: %v", context)
	}
	got, err := c.GetConversation(ctx, started.GetConversation().GetConversationId())
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got.GetConversation().GetServiceCall(), state) {
		t.Fatalf("GetConversation: %v, want %v", got.GetConversation().GetServiceCall(), state)
	}
}
