// Command service_call holds a customer-service phone call on the service_call workflow: it
// starts the call, says the customer's lines one by one and prints, per turn, the agent's reply,
// the nodes that ran, the tool calls (arguments, result or error, latency) and the node the call
// is at; at the end the call's context and token counts and, once the call was hung up, that a
// further message is refused with FAILED_PRECONDITION, reason CONVERSATION_ENDED.
//
//	go run ./examples/service_call [-addr HOST:PORT] [-turns N]
//
// The address defaults to $FRONTDESK_ADDR, then 127.0.0.1:50051; $FRONTDESK_KEY, when set, is
// the API key. -turns N says at most the first N customer lines (default: all of them, until
// the call ends).
//
// A real model drives the whole call: the greeting, the customer's issue, their contact details,
// the customer record, the task, the booking and the hangup. The scripted demo model
// (--model-provider scripted --model-script tests/fixtures/demo-script.json) cannot: after every
// node with branching conditions, GREET_CUSTOMER included, the navigator must name one of that
// node's children, which no standing answer can do for every node, so already the first turn
// fails (INTERNAL, "node navigator failed"). Against it run -turns 0: the call is started and its
// initial state shown (scripts/sdk-tests.sh does so).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	frontdesk "github.com/frontdesk/frontdesk/client/go"
	v1 "github.com/frontdesk/frontdesk/client/go/frontdeskv1"
)

// customerLines is the customer's side of a short call (a drywall repair), one line per turn.
var customerLines = []string{
	"Hello, I need help with drywall repair",
	"There is a hole in my living room wall",
	"It happened yesterday when I moved a cupboard",
	"Thanks, that is good to hear",
	"Sure",
	"I'm John Doe, my number is 555-1234",
	"Yes please, book the technician",
	"Great, thank you",
	"No, that's all",
	"Bye",
}

// notFlowNodes are graph nodes of the workflow that are not nodes of the flow configuration.
var notFlowNodes = map[string]bool{"receive": true, "navigator": true}

func millis(d *durationpb.Duration) string {
	ms := float64(d.AsDuration()) / float64(time.Millisecond)
	if ms >= 1 {
		return fmt.Sprintf("%.0f ms", ms)
	}
	return fmt.Sprintf("%.2f ms", ms)
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// printTurn prints the nodes that ran and the tool calls of one turn, then the reply and the
// current node (result is nil when the turn failed).
func printTurn(events []*v1.RunEvent, result *v1.TurnResult) {
	var nodes []string
	for _, ev := range events {
		if ev.GetNodeStarted() != nil && !notFlowNodes[ev.GetNode()] {
			nodes = append(nodes, ev.GetNode())
		}
	}
	fmt.Printf("  nodes: %s\n", orNone(strings.Join(nodes, " -> ")))
	called := map[string]*v1.RunEvent{}
	var order []string
	for _, ev := range events {
		if c := ev.GetToolCalled(); c != nil {
			called[c.GetCallId()] = ev
			order = append(order, c.GetCallId())
		} else if t := ev.GetToolReturned(); t != nil {
			args := "?"
			if c, ok := called[t.GetCallId()]; ok {
				args = c.GetToolCalled().GetArgumentsJson()
				delete(called, t.GetCallId())
			}
			outcome := t.GetResultJson()
			if t.GetIsError() {
				outcome = "error " + outcome
			}
			fmt.Printf("  tool [%s] %s(%s) -> %s (%s)\n", ev.GetNode(), t.GetName(), args, outcome, millis(t.GetLatency()))
		}
	}
	for _, id := range order {
		if c, ok := called[id]; ok {
			fmt.Printf("  tool [%s] %s(%s) -> no result\n", c.GetNode(), c.GetToolCalled().GetName(), c.GetToolCalled().GetArgumentsJson())
		}
	}
	if result == nil {
		return
	}
	node, reply := result.GetReply().GetNode(), result.GetReply().GetText()
	if node == "" {
		node = "-"
	}
	if reply == "" {
		reply = "(no reply)"
	}
	fmt.Printf("agent (%s): %s\n", node, reply)
	if state := result.GetConversation().GetServiceCall(); state != nil {
		fmt.Printf("  current node: %s\n", orNone(state.GetCurrentNode()))
		if state.GetCallEnded() {
			fmt.Println("  the call has ended")
		}
	}
}

func printState(state *v1.ServiceCallState) error {
	fmt.Printf("current node: %s\n", orNone(state.GetCurrentNode()))
	fmt.Printf("node traversal path: %s\n", orNone(strings.Join(state.GetNodeTraversalPath(), " -> ")))
	missing := strings.Join(state.GetMissingMandatoryFields(), ", ")
	if missing == "" {
		missing = "none"
	}
	fmt.Printf("missing mandatory fields: %s\n", missing)
	context, err := frontdesk.ServiceCallContext(state)
	if err != nil {
		return err
	}
	pretty, err := json.MarshalIndent(context, "", "  ")
	if err != nil {
		return err
	}
	fmt.Printf("context: %s\n", pretty)
	fmt.Printf("model calls: %d, tokens: %d prompt + %d completion\n", state.GetModelCalls(), state.GetPromptTokens(), state.GetCompletionTokens())
	ended := "no"
	if state.GetCallEnded() {
		ended = "yes"
	}
	fmt.Printf("call ended: %s\n", ended)
	return nil
}

func fail(err error) {
	if fe, ok := frontdesk.AsError(err); ok {
		log.Fatalf("error: %s reason=%s %s", fe.Code, fe.Reason, fe.Message)
	}
	log.Fatal(err)
}

func main() {
	def := os.Getenv("FRONTDESK_ADDR")
	if def == "" {
		def = "127.0.0.1:50051"
	}
	addr := flag.String("addr", def, "frontdesk-server address")
	maxTurns := flag.Int("turns", len(customerLines), "customer lines to say")
	flag.Parse()
	if *maxTurns < 0 {
		log.Fatal("-turns needs a number of customer lines, 0 or more")
	}
	lines := customerLines[:min(*maxTurns, len(customerLines))]

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := frontdesk.Connect(*addr, frontdesk.Options{APIKey: os.Getenv("FRONTDESK_KEY")})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	started, err := c.StartConversation(ctx, "service_call")
	if err != nil {
		fail(err)
	}
	callID := started.GetConversation().GetConversationId()
	initial := started.GetConversation().GetServiceCall()
	if initial == nil {
		log.Fatalf("conversation %s has no service-call state", callID)
	}
	fmt.Printf("conversation %s\n", callID)
	fmt.Printf("agent (%s): %s\n", started.GetWelcome().GetNode(), started.GetWelcome().GetText())
	fmt.Printf("  current node: %s\n", initial.GetCurrentNode())

	turns := 0
	for _, text := range lines {
		fmt.Printf("customer: %s\n", text)
		turn := c.SendMessage(ctx, callID, text)
		result, err := turn.Result()
		printTurn(turn.Received, result)
		if err != nil {
			fail(err)
		}
		turns++
		if result.GetConversation().GetServiceCall().GetCallEnded() {
			break
		}
	}

	// The call as the server keeps it: its context and what the models used.
	got, err := c.GetConversation(ctx, callID)
	if err != nil {
		fail(err)
	}
	state := got.GetConversation().GetServiceCall()
	fmt.Printf("after %d turn(s):\n", turns)
	if err := printState(state); err != nil {
		log.Fatal(err)
	}
	if !state.GetCallEnded() {
		if turns < len(customerLines) {
			fmt.Printf("stopped after %d turn(s) (-turns); a real model drives the whole call\n", turns)
		}
		return
	}

	// After the hangup the call takes no more messages.
	_, err = c.SendMessage(ctx, callID, "Hello? Are you still there?").Result()
	if fe, ok := frontdesk.AsError(err); ok && fe.Reason == frontdesk.ReasonConversationEnded {
		fmt.Printf("a further message is refused: %s %s\n", fe.Code, fe.Reason)
		return
	}
	if err != nil {
		fail(err)
	}
	log.Fatal("error: a message after the hangup was accepted")
}
