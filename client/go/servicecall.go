package frontdesk

import (
	"encoding/json"

	v1 "github.com/frontdesk/frontdesk/client/go/frontdeskv1"
)

// ReasonConversationEnded is the Error.Reason of a message sent to a conversation that has
// ended (a service call that was hung up): codes.FailedPrecondition.
const ReasonConversationEnded = "CONVERSATION_ENDED"

// ServiceCallContext decodes a service call's context (ServiceCallState.ContextJson, a JSON
// object) into a map; empty when the state is nil or carries none. A conversation's
// service-call state is Conversation.GetServiceCall() (nil for other workflows), as its intake
// state is GetIntake().
func ServiceCallContext(state *v1.ServiceCallState) (map[string]any, error) {
	out := map[string]any{}
	if state.GetContextJson() == "" {
		return out, nil
	}
	if err := json.Unmarshal([]byte(state.GetContextJson()), &out); err != nil {
		return nil, err
	}
	if out == nil { // "null"
		out = map[string]any{}
	}
	return out, nil
}
