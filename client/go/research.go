package frontdesk

import (
	"context"
	"iter"

	"google.golang.org/grpc"

	v1 "github.com/frontdesk/frontdesk/client/go/frontdeskv1"
)

// AskOption configures Ask.
type AskOption func(*v1.AskRequest)

// WithRetryLimit sets the critics' rejections allowed before the question is given up (0 for
// the server's default, 5; at most 20).
func WithRetryLimit(n uint32) AskOption {
	return func(r *v1.AskRequest) { r.RetryLimit = n }
}

// WithCorpus names the document corpus to research ("" for the default, "sample").
func WithCorpus(name string) AskOption {
	return func(r *v1.AskRequest) { r.Corpus = name }
}

// WithAskIdempotencyKey makes a retried Ask with the same key and request return the first
// call's outcome.
func WithAskIdempotencyKey(key string) AskOption {
	return func(r *v1.AskRequest) { r.IdempotencyKey = key }
}

// Ask asks a research question. It returns once the run has begun, or with the error that
// failed the call before that (a *Error: INVALID_ARGUMENT for an empty question, a retry limit
// over 20 or an unknown corpus, ...). Then range over Researching.Progress for the run's
// events, the orchestrator's messages, each plan, research result, critic decision and expert
// answer as they arrive, and call Researching.Result for the research: its outcome, final
// answer and reasoning trace. Cancelling ctx (or calling Researching.Cancel) stops the call.
func (c *Client) Ask(ctx context.Context, question string, opts ...AskOption) (*Researching, error) {
	req := &v1.AskRequest{Question: question}
	for _, o := range opts {
		o(req)
	}
	ctx, cancel := context.WithCancel(ctx)
	r := &Researching{}
	src := newRunSource(ctx, c, "Ask", req.GetIdempotencyKey(),
		func(ctx context.Context) (grpc.ServerStreamingClient[v1.AskResponse], error) {
			return c.Research.Ask(ctx, req)
		},
		func(res *v1.AskResponse) (itemKind, *v1.RunEvent) {
			switch x := res.GetPayload().(type) {
			case *v1.AskResponse_Event:
				return itemEvent, x.Event
			case *v1.AskResponse_Research:
				return itemResult, nil
			case nil:
				return itemOther, nil
			}
			return itemDerived, nil
		},
		func(ev *v1.RunEvent) *v1.AskResponse {
			return &v1.AskResponse{Payload: &v1.AskResponse_Event{Event: ev}}
		},
		&r.StreamStats)
	r.stream = callStream[v1.AskResponse, v1.AskResponse]{
		ctx: ctx, cancel: cancel, recv: src.Recv,
		sort: func(p *v1.AskResponse) (*v1.AskResponse, bool) {
			switch x := p.GetPayload().(type) {
			case *v1.AskResponse_Event:
				r.Received = append(r.Received, x.Event)
			case *v1.AskResponse_Message:
				r.Messages = append(r.Messages, x.Message)
			case *v1.AskResponse_Plan:
				r.Plans = append(r.Plans, x.Plan)
			case *v1.AskResponse_ResearchResult:
				r.Results = append(r.Results, x.ResearchResult)
			case *v1.AskResponse_CriticDecision:
				r.CriticDecisions = append(r.CriticDecisions, x.CriticDecision)
			case *v1.AskResponse_ExpertAnswer:
				r.ExpertAnswers = append(r.ExpertAnswers, x.ExpertAnswer)
			case *v1.AskResponse_Research:
				r.result = x.Research
				return nil, true
			default:
				return nil, false // a payload kind newer than this client: skipped
			}
			return p, false
		},
	}
	if err := r.stream.first(); err != nil {
		return nil, err
	}
	return r, nil
}

// Researching is one Ask call in progress. With an idempotency key the call is retried, and a
// broken stream re-attached, as for SendMessage; while re-attached only RunEvents arrive (the
// Research holds the plans, the results and the messages).
type Researching struct {
	StreamStats
	stream callStream[v1.AskResponse, v1.AskResponse]
	result *v1.Research
	// Received holds every run event received so far, in order.
	Received []*v1.RunEvent
	// Messages holds every orchestrator message received so far, in order.
	Messages []*v1.OrchestratorMessage
	// Plans holds every plan received so far (a rejected plan is followed by a new one).
	Plans []*v1.Plan
	// Results holds every research result received so far, as they finished (the research's
	// Results are in plan order).
	Results []*v1.ResearchResult
	// CriticDecisions holds every critic decision received so far, in order.
	CriticDecisions []*v1.CriticVerdict
	// ExpertAnswers holds every expert answer received so far, in order.
	ExpertAnswers []*v1.ExpertAnswer
}

// Progress yields the run's progress as it arrives: each item holds a RunEvent (GetEvent), an
// OrchestratorMessage (GetMessage), a Plan (GetPlan), a ResearchResult (GetResearchResult), a
// CriticVerdict (GetCriticDecision) or an ExpertAnswer (GetExpertAnswer), each right after the
// node event that produced it; never the Research, which Result returns. It ends when the
// stream does; then Result tells how. Stopping the loop early leaves the rest for Result (or
// Cancel) to deal with.
func (r *Researching) Progress() iter.Seq[*v1.AskResponse] { return r.stream.items() }

// Result drains any progress not yet received and returns the research with its outcome,
// final answer and reasoning trace, or the error that ended the stream (a *Error).
func (r *Researching) Result() (*v1.Research, error) {
	if err := r.stream.drain(); err != nil {
		return nil, err
	}
	return r.result, nil
}

// Cancel stops the call.
func (r *Researching) Cancel() { r.stream.cancel() }

// GetResearch returns the research ("RES-...") as it stands; an unknown one is NOT_FOUND.
func (c *Client) GetResearch(ctx context.Context, researchID string) (*v1.Research, error) {
	res, err := c.Research.GetResearch(ctx, &v1.GetResearchRequest{ResearchId: researchID})
	return res.GetResearch(), wrapError(err)
}

// ListResearch returns one page of research, ordered by research id; NextPageToken is empty on
// the last page.
func (c *Client) ListResearch(ctx context.Context, req *v1.ListResearchRequest) (*v1.ListResearchResponse, error) {
	if req == nil {
		req = &v1.ListResearchRequest{}
	}
	res, err := c.Research.ListResearch(ctx, req)
	return res, wrapError(err)
}

// AllResearch yields every research, ordered by research id, fetching pages of pageSize (0 for
// the server's default) as needed. A failure is yielded last, as (nil, *Error).
func (c *Client) AllResearch(ctx context.Context, pageSize int32) iter.Seq2[*v1.Research, error] {
	return func(yield func(*v1.Research, error) bool) {
		token := ""
		for {
			page, err := c.ListResearch(ctx, &v1.ListResearchRequest{PageSize: pageSize, PageToken: token})
			if err != nil {
				yield(nil, err)
				return
			}
			for _, r := range page.GetResearch() {
				if !yield(r, nil) {
					return
				}
			}
			if token = page.GetNextPageToken(); token == "" {
				return
			}
		}
	}
}
