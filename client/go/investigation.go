package frontdesk

import (
	"context"
	"errors"
	"io"
	"iter"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	v1 "github.com/frontdesk/frontdesk/client/go/frontdeskv1"
)

// InvestigationOption configures StartInvestigation and StartInlineInvestigation.
type InvestigationOption func(*v1.StartInvestigationRequest)

// WithInvestigationIdempotencyKey makes a retried start with the same mutation return the
// first call's outcome.
func WithInvestigationIdempotencyKey(key string) InvestigationOption {
	return func(r *v1.StartInvestigationRequest) { r.IdempotencyKey = key }
}

// StartInvestigation starts the investigation of a mutation of the imported HR data, such as
// "1002". It returns once the run has begun, or with the error that failed the call before
// that (a *Error: NOT_FOUND for an unknown mutation, ALREADY_EXISTS when the mutation already
// has an investigation, ...). Then range over Investigating.Progress for the run's events,
// agent messages and status changes as they arrive, and call Investigating.Result for the
// investigation as the run left it: finished, or awaiting a reply (GetAwaiting). Cancelling
// ctx (or calling Investigating.Cancel) stops the call.
func (c *Client) StartInvestigation(ctx context.Context, mutationID string, opts ...InvestigationOption) (*Investigating, error) {
	req := &v1.StartInvestigationRequest{Mutation: &v1.StartInvestigationRequest_MutationId{MutationId: mutationID}}
	return c.startInvestigation(ctx, req, opts)
}

// StartInlineInvestigation is StartInvestigation for a mutation given inline, which is
// recorded with the HR data; an existing mutation id with other values is ALREADY_EXISTS.
func (c *Client) StartInlineInvestigation(ctx context.Context, mutation *v1.HrMutation, opts ...InvestigationOption) (*Investigating, error) {
	req := &v1.StartInvestigationRequest{Mutation: &v1.StartInvestigationRequest_InlineMutation{InlineMutation: mutation}}
	return c.startInvestigation(ctx, req, opts)
}

func (c *Client) startInvestigation(ctx context.Context, req *v1.StartInvestigationRequest, opts []InvestigationOption) (*Investigating, error) {
	for _, o := range opts {
		o(req)
	}
	return newInvestigatingCall(ctx, c, "StartInvestigation", req.GetIdempotencyKey(),
		func(ctx context.Context) (grpc.ServerStreamingClient[v1.StartInvestigationResponse], error) {
			return c.Investigations.StartInvestigation(ctx, req)
		},
		func(res *v1.StartInvestigationResponse) *v1.InvestigationProgress { return res.GetProgress() },
		func(p *v1.InvestigationProgress) *v1.StartInvestigationResponse {
			return &v1.StartInvestigationResponse{Progress: p}
		})
}

// ChangerReply is the changer's clarification for the action actionID (the changer's is
// "<investigation id>-changer"), for Respond.
func ChangerReply(investigationID, actionID, changerID, text string) *v1.RespondRequest {
	return &v1.RespondRequest{
		InvestigationId: investigationID,
		ActionId:        actionID,
		Role:            v1.ResponderRole_RESPONDER_ROLE_CHANGER,
		ResponderId:     changerID,
		Text:            text,
	}
}

// ManagerReply is the manager's decision, with an optional comment, for the action actionID
// (the manager's is "<investigation id>-manager"), for Respond.
func ManagerReply(investigationID, actionID, managerID string, decision v1.ManagerDecision, comment string) *v1.RespondRequest {
	return &v1.RespondRequest{
		InvestigationId: investigationID,
		ActionId:        actionID,
		Role:            v1.ResponderRole_RESPONDER_ROLE_MANAGER,
		ResponderId:     managerID,
		Text:            comment,
		Decision:        decision,
	}
}

// Respond answers a pending action (see ChangerReply and ManagerReply) and streams the
// continuation as StartInvestigation does. The errors that fail it before the run begins are
// returned here: PERMISSION_DENIED with reason "WRONG_RESPONDER" for someone other than the
// action's recipient or the wrong role, FAILED_PRECONDITION with reason "INTERRUPT_ANSWERED"
// for an action already answered, NOT_FOUND for an unknown investigation or action.
func (c *Client) Respond(ctx context.Context, req *v1.RespondRequest) (*Investigating, error) {
	return newInvestigatingCall(ctx, c, "Respond", req.GetIdempotencyKey(),
		func(ctx context.Context) (grpc.ServerStreamingClient[v1.RespondResponse], error) {
			return c.Investigations.Respond(ctx, req)
		},
		func(res *v1.RespondResponse) *v1.InvestigationProgress { return res.GetProgress() },
		func(p *v1.InvestigationProgress) *v1.RespondResponse { return &v1.RespondResponse{Progress: p} })
}

// newInvestigatingCall runs a StartInvestigation or Respond call (responses of type R, each
// holding an InvestigationProgress) through the retrying, re-attaching runSource.
func newInvestigatingCall[R any](
	ctx context.Context, c *Client, method, key string,
	open func(context.Context) (grpc.ServerStreamingClient[R], error),
	progress func(*R) *v1.InvestigationProgress,
	wrap func(*v1.InvestigationProgress) *R,
) (*Investigating, error) {
	ctx, cancel := context.WithCancel(ctx)
	stats := &StreamStats{}
	src := newRunSource(ctx, c, method, key, open,
		func(res *R) (itemKind, *v1.RunEvent) {
			switch x := progress(res).GetPayload().(type) {
			case *v1.InvestigationProgress_Event:
				return itemEvent, x.Event
			case *v1.InvestigationProgress_Message, *v1.InvestigationProgress_StatusChange:
				return itemDerived, nil
			case *v1.InvestigationProgress_Investigation:
				return itemResult, nil
			}
			return itemOther, nil
		},
		func(ev *v1.RunEvent) *R {
			return wrap(&v1.InvestigationProgress{Payload: &v1.InvestigationProgress_Event{Event: ev}})
		},
		stats)
	r := &Investigating{StreamStats: stats}
	r.stream = callStream[v1.InvestigationProgress, v1.InvestigationProgress]{
		ctx: ctx, cancel: cancel,
		recv: func() (*v1.InvestigationProgress, error) {
			res, err := src.Recv()
			return progress(res), err
		},
		sort: func(p *v1.InvestigationProgress) (*v1.InvestigationProgress, bool) {
			switch x := p.GetPayload().(type) {
			case *v1.InvestigationProgress_Event:
				r.Received = append(r.Received, x.Event)
			case *v1.InvestigationProgress_Message:
				r.Messages = append(r.Messages, x.Message)
			case *v1.InvestigationProgress_StatusChange:
				r.StatusChanges = append(r.StatusChanges, x.StatusChange)
			case *v1.InvestigationProgress_Investigation:
				r.result = x.Investigation
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

// Investigating is one StartInvestigation or Respond call in progress. With an idempotency
// key the call is retried, and a broken stream re-attached, as for SendMessage; while
// re-attached only RunEvents arrive (the Investigation holds every message and status change).
type Investigating struct {
	*StreamStats
	stream callStream[v1.InvestigationProgress, v1.InvestigationProgress]
	result *v1.Investigation
	// Received holds every run event received so far, in order.
	Received []*v1.RunEvent
	// Messages holds every agent message received so far, in order.
	Messages []*v1.AgentMessage
	// StatusChanges holds every status change received so far, in order.
	StatusChanges []*v1.StatusChange
}

// Progress yields the run's progress as it arrives: each item holds a RunEvent (GetEvent), an
// AgentMessage (GetMessage) or a StatusChange (GetStatusChange), a message or status change
// right after the node event that produced it. It ends when the stream does; then Result
// tells how. Stopping the loop early leaves the rest for Result (or Cancel) to deal with.
func (r *Investigating) Progress() iter.Seq[*v1.InvestigationProgress] { return r.stream.items() }

// Result drains any progress not yet received and returns the investigation as the run left
// it, or the error that ended the stream (a *Error).
func (r *Investigating) Result() (*v1.Investigation, error) {
	if err := r.stream.drain(); err != nil {
		return nil, err
	}
	return r.result, nil
}

// Cancel stops the call.
func (r *Investigating) Cancel() { r.stream.cancel() }

// GetInvestigation returns the investigation ("INV-<mutation id>") as it stands; an unknown
// one is NOT_FOUND.
func (c *Client) GetInvestigation(ctx context.Context, investigationID string) (*v1.Investigation, error) {
	res, err := c.Investigations.GetInvestigation(ctx, &v1.GetInvestigationRequest{InvestigationId: investigationID})
	return res.GetInvestigation(), wrapError(err)
}

// ListInvestigations returns one page of investigations, most recently started first; Status
// filters (UNSPECIFIED: every status). NextPageToken is empty on the last page.
func (c *Client) ListInvestigations(ctx context.Context, req *v1.ListInvestigationsRequest) (*v1.ListInvestigationsResponse, error) {
	if req == nil {
		req = &v1.ListInvestigationsRequest{}
	}
	res, err := c.Investigations.ListInvestigations(ctx, req)
	return res, wrapError(err)
}

// AllInvestigations yields every investigation with status (UNSPECIFIED for all), most
// recently started first, fetching pages of pageSize (0 for the server's default) as needed.
func (c *Client) AllInvestigations(ctx context.Context, status v1.InvestigationStatus, pageSize int32) iter.Seq2[*v1.Investigation, error] {
	return func(yield func(*v1.Investigation, error) bool) {
		token := ""
		for {
			page, err := c.ListInvestigations(ctx, &v1.ListInvestigationsRequest{
				Status: status, PageSize: pageSize, PageToken: token,
			})
			if err != nil {
				yield(nil, err)
				return
			}
			for _, inv := range page.GetInvestigations() {
				if !yield(inv, nil) {
					return
				}
			}
			if token = page.GetNextPageToken(); token == "" {
				return
			}
		}
	}
}

// WatchInvestigation yields the investigation's audit entries with a seq above afterSeq (0 for
// the whole trail), then each new one as it is written, on whichever replica writes it; it
// ends once the advisory report is generated. A stream that fails with UNAVAILABLE (a server
// shutting down, reason SHUTTING_DOWN, or a broken connection) is watched again from the last
// seq yielded, after the error's RetryInfo delay or the backoff, within c.Retry's MaxAttempts
// and MaxWait (no idempotency key needed), counted afresh after each entry yielded: only
// failures in a row count. Each entry is yielded once. Any other failure, or UNAVAILABLE with
// c.Retry nil or its bounds used up, is yielded last, as (nil, *Error).
// Stopping the loop, or cancelling ctx, stops the call; once ctx is cancelled nothing more is
// yielded but CANCELLED, even entries that had already arrived.
func (c *Client) WatchInvestigation(ctx context.Context, investigationID string, afterSeq uint32) iter.Seq2[*v1.AuditEntry, error] {
	return func(yield func(*v1.AuditEntry, error) bool) {
		// A watch only reads the trail, and watching again after the last seq delivered can
		// neither repeat nor lose an entry, so it resumes without an idempotency key. A watch
		// lives as long as its investigation (days, waiting on a manager's reply), so a budget
		// over the whole watch would be used up by a few ordinary server restarts: only
		// failures in a row, with no entry between them, count against it.
		b := newBudget(c.Retry)
		last := afterSeq
		for {
			from := last
			stopped, err := c.watchOnce(ctx, investigationID, &last, yield)
			if err == nil || stopped {
				return
			}
			if last != from {
				b = newBudget(c.Retry)
			}
			fe, _ := AsError(err)
			if fe.Code != codes.Unavailable {
				yield(nil, fe)
				return
			}
			wait, ok := b.delay(ctx, fe)
			if !ok {
				yield(nil, fe)
				return
			}
			b.calls++
			b.waited += wait
			if err := sleep(ctx, wait); err != nil {
				yield(nil, err)
				return
			}
		}
	}
}

// watchOnce makes one WatchInvestigation call from *last, yielding its entries and advancing
// *last. It returns stopped when the caller stopped the loop (then nothing more may be
// yielded), else the error that ended the call (a *Error), nil when the watch ended normally.
func (c *Client) watchOnce(ctx context.Context, investigationID string, last *uint32, yield func(*v1.AuditEntry, error) bool) (stopped bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.Investigations.WatchInvestigation(ctx, &v1.WatchInvestigationRequest{
		InvestigationId: investigationID, AfterSeq: *last,
	})
	if err != nil {
		return false, wrapError(err)
	}
	for {
		if err := contextError(ctx); err != nil {
			return false, err
		}
		res, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		if err != nil {
			return false, wrapError(err)
		}
		e := res.GetEntry()
		// A server that sends an entry at or below the seq asked for must not make the caller
		// see it twice.
		if e == nil || e.GetSeq() <= *last {
			continue
		}
		*last = e.GetSeq()
		if !yield(e, nil) {
			return true, nil
		}
	}
}

// GetAuditTrail returns the audit trail of one investigation, oldest first.
func (c *Client) GetAuditTrail(ctx context.Context, investigationID string) ([]*v1.AuditEntry, error) {
	res, err := c.Investigations.GetAuditTrail(ctx, &v1.GetAuditTrailRequest{
		Key: &v1.GetAuditTrailRequest_InvestigationId{InvestigationId: investigationID},
	})
	return res.GetEntries(), wrapError(err)
}

// GetAuditTrailByCorrelation returns the audit entries of one message exchange: those sharing
// correlationID.
func (c *Client) GetAuditTrailByCorrelation(ctx context.Context, correlationID string) ([]*v1.AuditEntry, error) {
	res, err := c.Investigations.GetAuditTrail(ctx, &v1.GetAuditTrailRequest{
		Key: &v1.GetAuditTrailRequest_CorrelationId{CorrelationId: correlationID},
	})
	return res.GetEntries(), wrapError(err)
}

// ListPendingActions returns one page of notifications, oldest first: RecipientId filters (""
// for everyone's), Status AWAITING (or UNSPECIFIED) lists those awaiting a reply, ANSWERED those
// answered. PageSize is 1..100 (0 for the server's default, 20); PageToken is the
// NextPageToken of a previous response to the same request. NextPageToken is empty on the
// last page.
func (c *Client) ListPendingActions(ctx context.Context, req *v1.ListPendingActionsRequest) (*v1.ListPendingActionsResponse, error) {
	if req == nil {
		req = &v1.ListPendingActionsRequest{}
	}
	res, err := c.Investigations.ListPendingActions(ctx, req)
	return res, wrapError(err)
}

// AllPendingActions yields every notification of recipientID ("" for everyone's) with status
// (AWAITING or UNSPECIFIED: those awaiting a reply; ANSWERED: those answered), oldest first,
// fetching pages of pageSize (0 for the server's default) as needed.
func (c *Client) AllPendingActions(ctx context.Context, recipientID string, status v1.PendingActionStatus, pageSize int32) iter.Seq2[*v1.PendingAction, error] {
	return func(yield func(*v1.PendingAction, error) bool) {
		token := ""
		for {
			page, err := c.ListPendingActions(ctx, &v1.ListPendingActionsRequest{
				RecipientId: recipientID, Status: status, PageSize: pageSize, PageToken: token,
			})
			if err != nil {
				yield(nil, err)
				return
			}
			for _, action := range page.GetActions() {
				if !yield(action, nil) {
					return
				}
			}
			if token = page.GetNextPageToken(); token == "" {
				return
			}
		}
	}
}
