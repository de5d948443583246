// Package frontdesk is the Go client for Frontdesk, the gRPC service for LLM multi-agent
// workflows as durable graphs. The generated messages and gRPC stubs are in the frontdeskv1
// package beside it.
//
//	c, err := frontdesk.Dial("127.0.0.1:50051")
//	if err != nil { ... }
//	defer c.Close()
//	started, err := c.StartConversation(ctx, "intake")
//	turn := c.SendMessage(ctx, started.GetConversation().GetConversationId(), "Hello")
//	for ev := range turn.Events() {
//		fmt.Println(ev.GetEventId(), frontdesk.EventKind(ev), ev.GetNode())
//	}
//	result, err := turn.Result()
//
// A server that requires API keys gets one with Connect, over TLS with a private CA and a client
// certificate if need be:
//
//	c, err := frontdesk.Connect("frontdesk.example.com:50051", frontdesk.Options{
//		APIKey: os.Getenv("FRONTDESK_KEY"),
//		TLS:    &frontdesk.TLSConfig{CACertPEM: caPEM},
//	})
//
// It refuses calls without a valid key as UNAUTHENTICATED (ReasonUnauthenticated), calls whose
// key lacks the method's scope as PERMISSION_DENIED (ReasonScopeMissing), and calls over a
// tenant's quota as RESOURCE_EXHAUSTED (ReasonQuotaExceeded, with RetryInfo); none is retried.
//
// Calls with an idempotency key are retried on UNAVAILABLE and ABORTED, waiting the server's
// RetryInfo delay, and their broken streams re-attached (SubscribeRun, then the call again
// with its key for the recorded result), each event delivered once; Client.Retry sets the
// policy, nil turns it off.
//
// RunEvent.EventId numbers the events of one execution of a run on one replica, from 1: a run
// resumed after a crash, or taken over by another replica, starts again at 1 with
// RunStarted.Resumed set. It orders one stream's events and is the position SubscribeRun
// resumes from; it is not a key across executions.
package frontdesk

import (
	"context"
	"iter"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	v1 "github.com/frontdesk/frontdesk/client/go/frontdeskv1"
)

// Client calls ConversationService, TriageService, InvestigationService, ResearchService and
// WorkflowService. It is safe for concurrent use.
type Client struct {
	// Conversations, Triage, Investigations, Research and Workflows are the generated stubs,
	// for what the wrapper lacks.
	Conversations  v1.ConversationServiceClient
	Triage         v1.TriageServiceClient
	Investigations v1.InvestigationServiceClient
	Research       v1.ResearchServiceClient
	Workflows      v1.WorkflowServiceClient

	// Retry is how calls with an idempotency key are retried on UNAVAILABLE and ABORTED, and
	// their broken streams re-attached, and how WatchInvestigation watches again after
	// UNAVAILABLE (see RetryPolicy); Dial and New set DefaultRetryPolicy(). Set it to nil,
	// before making calls, to turn all that off; other calls without an idempotency key are
	// never retried.
	Retry *RetryPolicy

	conn  *grpc.ClientConn
	owned bool
}

// Dial creates a client for target (host:port). Without options the connection is
// plaintext; with options they must include transport credentials
// (grpc.WithTransportCredentials: insecure.NewCredentials() for plaintext, credentials.NewTLS
// for TLS); WithAPIKey adds a key. Connect does all that from Options. The connection is made
// lazily, on the first call.
func Dial(target string, opts ...grpc.DialOption) (*Client, error) {
	if len(opts) == 0 {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	conn, err := grpc.NewClient(target, opts...)
	if err != nil {
		return nil, err
	}
	c := New(conn)
	c.owned = true
	return c, nil
}

// New wraps an existing connection; Close then leaves it open.
func New(conn *grpc.ClientConn) *Client {
	return &Client{
		Conversations:  v1.NewConversationServiceClient(conn),
		Triage:         v1.NewTriageServiceClient(conn),
		Investigations: v1.NewInvestigationServiceClient(conn),
		Research:       v1.NewResearchServiceClient(conn),
		Workflows:      v1.NewWorkflowServiceClient(conn),
		Retry:          DefaultRetryPolicy(),
		conn:           conn,
	}
}

// Close closes the connection if Dial made it.
func (c *Client) Close() error {
	if c.owned {
		return c.conn.Close()
	}
	return nil
}

// StartOption configures StartConversation.
type StartOption func(*v1.StartConversationRequest)

// WithConversationID sets a caller-chosen conversation id.
func WithConversationID(id string) StartOption {
	return func(r *v1.StartConversationRequest) { r.ConversationId = id }
}

// WithStartIdempotencyKey makes a retried StartConversation return the first outcome.
func WithStartIdempotencyKey(key string) StartOption {
	return func(r *v1.StartConversationRequest) { r.IdempotencyKey = key }
}

// StartConversation creates a conversation on workflow ("intake"); the response has the
// conversation and its welcome message.
func (c *Client) StartConversation(ctx context.Context, workflow string, opts ...StartOption) (*v1.StartConversationResponse, error) {
	req := &v1.StartConversationRequest{Workflow: workflow}
	for _, o := range opts {
		o(req)
	}
	return retryUnary(ctx, c.policyFor(req.GetIdempotencyKey()), func(ctx context.Context) (*v1.StartConversationResponse, error) {
		return c.Conversations.StartConversation(ctx, req)
	})
}

// SendOption configures SendMessage.
type SendOption func(*v1.SendMessageRequest)

// WithIdempotencyKey makes a retried SendMessage replay the first call's result.
func WithIdempotencyKey(key string) SendOption {
	return func(r *v1.SendMessageRequest) { r.IdempotencyKey = key }
}

// WithBusyPolicy says what to do when another turn runs on the conversation.
func WithBusyPolicy(p v1.BusyPolicy) SendOption {
	return func(r *v1.SendMessageRequest) { r.BusyPolicy = p }
}

// SendMessage sends one user turn. Range over Turn.Events for the run's events as they
// arrive, then call Turn.Result. Cancelling ctx (or calling Turn.Cancel) stops the call;
// the run itself was committed when RunStarted arrived and finishes on the server. With an
// idempotency key the call is retried, and a broken stream re-attached, per Client.Retry;
// each event is delivered once (Turn.Attempts and Turn.Reattaches count what it took).
func (c *Client) SendMessage(ctx context.Context, conversationID, text string, opts ...SendOption) *Turn {
	req := &v1.SendMessageRequest{ConversationId: conversationID, Text: text}
	for _, o := range opts {
		o(req)
	}
	ctx, cancel := context.WithCancel(ctx)
	t := &Turn{}
	src := newRunSource(ctx, c, "SendMessage", req.GetIdempotencyKey(),
		func(ctx context.Context) (grpc.ServerStreamingClient[v1.SendMessageResponse], error) {
			return c.Conversations.SendMessage(ctx, req)
		},
		func(res *v1.SendMessageResponse) (itemKind, *v1.RunEvent) {
			switch p := res.GetPayload().(type) {
			case *v1.SendMessageResponse_Event:
				return itemEvent, p.Event
			case *v1.SendMessageResponse_Result:
				return itemResult, nil
			}
			return itemOther, nil
		},
		func(ev *v1.RunEvent) *v1.SendMessageResponse {
			return &v1.SendMessageResponse{Payload: &v1.SendMessageResponse_Event{Event: ev}}
		},
		&t.StreamStats)
	t.stream = callStream[v1.SendMessageResponse, v1.RunEvent]{
		ctx: ctx, cancel: cancel, recv: src.Recv,
		sort: func(res *v1.SendMessageResponse) (*v1.RunEvent, bool) {
			switch p := res.GetPayload().(type) {
			case *v1.SendMessageResponse_Event:
				t.Received = append(t.Received, p.Event)
				return p.Event, false
			case *v1.SendMessageResponse_Result:
				t.result = p.Result
				return nil, true
			}
			return nil, false
		},
	}
	return t
}

// Turn is one SendMessage call in progress.
type Turn struct {
	StreamStats
	stream callStream[v1.SendMessageResponse, v1.RunEvent]
	result *v1.TurnResult
	// Received holds every event received so far, in order.
	Received []*v1.RunEvent
}

// Events yields the run's events as they arrive. It ends when the stream does; then Result
// tells how. Stopping the loop early leaves the rest for Result (or Cancel) to deal with.
func (t *Turn) Events() iter.Seq[*v1.RunEvent] { return t.stream.items() }

// Result drains any events not yet received and returns the turn's result, or the error
// that ended the stream (a *Error).
func (t *Turn) Result() (*v1.TurnResult, error) {
	if err := t.stream.drain(); err != nil {
		return nil, err
	}
	return t.result, nil
}

// Cancel stops the call.
func (t *Turn) Cancel() { t.stream.cancel() }

// EventKind names an event's kind: "run_started", "node_started", "token_delta", ...,
// "run_finished".
func EventKind(ev *v1.RunEvent) string {
	switch ev.GetKind().(type) {
	case *v1.RunEvent_RunStarted:
		return "run_started"
	case *v1.RunEvent_NodeStarted:
		return "node_started"
	case *v1.RunEvent_NodeFinished:
		return "node_finished"
	case *v1.RunEvent_TokenDelta:
		return "token_delta"
	case *v1.RunEvent_LlmCallFinished:
		return "llm_call_finished"
	case *v1.RunEvent_ToolCalled:
		return "tool_called"
	case *v1.RunEvent_ToolReturned:
		return "tool_returned"
	case *v1.RunEvent_NodeRetrying:
		return "node_retrying"
	case *v1.RunEvent_NodeFailed:
		return "node_failed"
	case *v1.RunEvent_TasksDispatched:
		return "tasks_dispatched"
	case *v1.RunEvent_TaskFinished:
		return "task_finished"
	case *v1.RunEvent_InterruptRaised:
		return "interrupt_raised"
	case *v1.RunEvent_RunInterrupted:
		return "run_interrupted"
	case *v1.RunEvent_RunFinished:
		return "run_finished"
	case *v1.RunEvent_RunFailed:
		return "run_failed"
	default:
		return "unknown"
	}
}

// GetConversation returns a conversation and its whole message history, oldest first.
func (c *Client) GetConversation(ctx context.Context, conversationID string) (*v1.GetConversationResponse, error) {
	res, err := c.Conversations.GetConversation(ctx, &v1.GetConversationRequest{ConversationId: conversationID})
	return res, wrapError(err)
}

// ListConversations returns one page, in the server's order; NextPageToken is empty on the
// last.
func (c *Client) ListConversations(ctx context.Context, req *v1.ListConversationsRequest) (*v1.ListConversationsResponse, error) {
	if req == nil {
		req = &v1.ListConversationsRequest{}
	}
	res, err := c.Conversations.ListConversations(ctx, req)
	return res, wrapError(err)
}

// AllConversations yields every conversation of workflow ("" for all), in the server's order,
// fetching pages of pageSize (0 for the server's default) as needed.
func (c *Client) AllConversations(ctx context.Context, workflow string, pageSize int32) iter.Seq2[*v1.Conversation, error] {
	return func(yield func(*v1.Conversation, error) bool) {
		token := ""
		for {
			page, err := c.ListConversations(ctx, &v1.ListConversationsRequest{
				Workflow: workflow, PageSize: pageSize, PageToken: token,
			})
			if err != nil {
				yield(nil, err)
				return
			}
			for _, conv := range page.GetConversations() {
				if !yield(conv, nil) {
					return
				}
			}
			if token = page.GetNextPageToken(); token == "" {
				return
			}
		}
	}
}

// ResetConversation clears a conversation's messages and request fields.
func (c *Client) ResetConversation(ctx context.Context, conversationID string) (*v1.Conversation, error) {
	return c.ResetConversationWithKey(ctx, conversationID, "")
}

// ResetConversationWithKey is ResetConversation with an idempotency key: a retry with the same
// key returns the first call's outcome, and the call is retried per Client.Retry.
func (c *Client) ResetConversationWithKey(ctx context.Context, conversationID, idempotencyKey string) (*v1.Conversation, error) {
	req := &v1.ResetConversationRequest{ConversationId: conversationID, IdempotencyKey: idempotencyKey}
	res, err := retryUnary(ctx, c.policyFor(idempotencyKey), func(ctx context.Context) (*v1.ResetConversationResponse, error) {
		return c.Conversations.ResetConversation(ctx, req)
	})
	return res.GetConversation(), err
}

// DeleteConversation erases a conversation with every checkpoint and message.
func (c *Client) DeleteConversation(ctx context.Context, conversationID string) error {
	_, err := c.Conversations.DeleteConversation(ctx, &v1.DeleteConversationRequest{ConversationId: conversationID})
	return wrapError(err)
}

// ListWorkflows lists the workflows the server hosts.
func (c *Client) ListWorkflows(ctx context.Context) ([]*v1.Workflow, error) {
	res, err := c.Workflows.ListWorkflows(ctx, &v1.ListWorkflowsRequest{})
	return res.GetWorkflows(), wrapError(err)
}

// DescribeWorkflow returns a workflow's graph: nodes, edges and a mermaid rendering.
func (c *Client) DescribeWorkflow(ctx context.Context, name string) (*v1.DescribeWorkflowResponse, error) {
	res, err := c.Workflows.DescribeWorkflow(ctx, &v1.DescribeWorkflowRequest{Name: name})
	return res, wrapError(err)
}

// CancelRun stops a running run (true). A run that is not running, unknown or already ended, is
// a NOT_FOUND *Error; an id that is not a run id (a UUID) is INVALID_ARGUMENT.
func (c *Client) CancelRun(ctx context.Context, runID string) (bool, error) {
	res, err := c.Workflows.CancelRun(ctx, &v1.CancelRunRequest{RunId: runID})
	return res.GetCancelled(), wrapError(err)
}

// ListLlmCalls returns one page of the model calls a thread made (a conversation id, a ticket
// thread "customer_id:ticket_id", an investigation id or a research id), the most recent first,
// as the server's LLM call log recorded them (model.call_log "redacted" or "full"; with it off
// a known thread lists none). PageSize is at most 500 (0 for the server's default, 50); a page
// also ends early once its prompts and replies reach about 3 MiB. PageToken is the
// NextPageToken of a previous response for the same thread, which reads on to older calls;
// NextPageToken is empty on the last page. TotalCalls and TotalUsage cover every recorded call
// of the thread, not only the page's. A thread the server does not know is NOT_FOUND.
func (c *Client) ListLlmCalls(ctx context.Context, req *v1.ListLlmCallsRequest) (*v1.ListLlmCallsResponse, error) {
	if req == nil {
		req = &v1.ListLlmCallsRequest{}
	}
	res, err := c.Workflows.ListLlmCalls(ctx, req)
	return res, wrapError(err)
}

// AllLlmCalls yields every recorded model call of threadID, the most recent first, fetching
// pages of pageSize (0 for the server's default) as needed.
func (c *Client) AllLlmCalls(ctx context.Context, threadID string, pageSize int32) iter.Seq2[*v1.LlmCall, error] {
	return func(yield func(*v1.LlmCall, error) bool) {
		token := ""
		for {
			page, err := c.ListLlmCalls(ctx, &v1.ListLlmCallsRequest{
				ThreadId: threadID, PageSize: pageSize, PageToken: token,
			})
			if err != nil {
				yield(nil, err)
				return
			}
			for _, call := range page.GetCalls() {
				if !yield(call, nil) {
					return
				}
			}
			if token = page.GetNextPageToken(); token == "" {
				return
			}
		}
	}
}
