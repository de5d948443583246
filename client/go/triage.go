package frontdesk

import (
	"context"
	"iter"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	v1 "github.com/frontdesk/frontdesk/client/go/frontdeskv1"
)

// TriageOption configures TriageTicket.
type TriageOption func(*v1.TriageTicketRequest)

// WithSubject sets the ticket's subject line.
func WithSubject(subject string) TriageOption {
	return func(r *v1.TriageTicketRequest) { r.Subject = subject }
}

// WithLanguage gives an ISO 639-1 hint for the message's language (detected without one).
func WithLanguage(language string) TriageOption {
	return func(r *v1.TriageTicketRequest) { r.Language = language }
}

// WithTriageIdempotencyKey makes a retried TriageTicket replay the first call's result.
func WithTriageIdempotencyKey(key string) TriageOption {
	return func(r *v1.TriageTicketRequest) { r.IdempotencyKey = key }
}

// TriageTicket triages one customer message. It returns once the server has said which
// ticket the message belongs to (Triage.Resolution), or with the error that failed the call
// before that (a *Error: NOT_FOUND for an unknown customer, INVALID_ARGUMENT, ...). Then range
// over Triage.Events for the run's events as they arrive, and call Triage.Result. Cancelling
// ctx (or calling Triage.Cancel) stops the call. Retries and re-attaching as for SendMessage
// (the resolution is delivered once).
func (c *Client) TriageTicket(ctx context.Context, customerID, message string, opts ...TriageOption) (*Triage, error) {
	req := &v1.TriageTicketRequest{CustomerId: customerID, Message: message}
	for _, o := range opts {
		o(req)
	}
	ctx, cancel := context.WithCancel(ctx)
	t := &Triage{}
	src := newRunSource(ctx, c, "TriageTicket", req.GetIdempotencyKey(),
		func(ctx context.Context) (grpc.ServerStreamingClient[v1.TriageTicketResponse], error) {
			return c.Triage.TriageTicket(ctx, req)
		},
		func(res *v1.TriageTicketResponse) (itemKind, *v1.RunEvent) {
			switch p := res.GetPayload().(type) {
			case *v1.TriageTicketResponse_Resolution:
				return itemResolution, nil
			case *v1.TriageTicketResponse_Event:
				return itemEvent, p.Event
			case *v1.TriageTicketResponse_Result:
				return itemResult, nil
			}
			return itemOther, nil
		},
		func(ev *v1.RunEvent) *v1.TriageTicketResponse {
			return &v1.TriageTicketResponse{Payload: &v1.TriageTicketResponse_Event{Event: ev}}
		},
		&t.StreamStats)
	t.stream = callStream[v1.TriageTicketResponse, v1.RunEvent]{
		ctx: ctx, cancel: cancel, recv: src.Recv,
		sort: func(res *v1.TriageTicketResponse) (*v1.RunEvent, bool) {
			switch p := res.GetPayload().(type) {
			case *v1.TriageTicketResponse_Resolution:
				if t.resolution == nil {
					t.resolution = p.Resolution
				}
			case *v1.TriageTicketResponse_Event:
				t.Received = append(t.Received, p.Event)
				return p.Event, false
			case *v1.TriageTicketResponse_Result:
				t.result = p.Result
				return nil, true
			}
			return nil, false
		},
	}
	// Receive up to the resolution, holding the ticket-matching run's events that come before it
	// (when the customer has active tickets) for Events.
	if !t.stream.until(func() bool { return t.resolution != nil }) {
		if t.stream.err == nil {
			t.stream.err = newError(codes.Internal, "TriageTicket stream ended without a TicketResolution", "")
		}
		t.stream.cancel()
		return nil, t.stream.err
	}
	return t, nil
}

// Triage is one TriageTicket call in progress.
type Triage struct {
	StreamStats
	stream     callStream[v1.TriageTicketResponse, v1.RunEvent]
	resolution *v1.TicketResolution
	result     *v1.TriageResult
	// Received holds every event received so far, in order.
	Received []*v1.RunEvent
}

// Resolution says which ticket the message belongs to: a new one, or an active ticket it
// continues (MatchedExisting).
func (t *Triage) Resolution() *v1.TicketResolution { return t.resolution }

// Events yields the run's events as they arrive. It ends when the stream does; then Result
// tells how. Stopping the loop early leaves the rest for Result (or Cancel) to deal with.
func (t *Triage) Events() iter.Seq[*v1.RunEvent] { return t.stream.items() }

// Result drains any events not yet received and returns the triage result, or the error
// that ended the stream (a *Error).
func (t *Triage) Result() (*v1.TriageResult, error) {
	if err := t.stream.drain(); err != nil {
		return nil, err
	}
	return t.result, nil
}

// Cancel stops the call.
func (t *Triage) Cancel() { t.stream.cancel() }

// GetTicket returns one of the customer's tickets, active or archived, with its messages and
// latest triage result. Another customer's ticket is NOT_FOUND.
func (c *Client) GetTicket(ctx context.Context, customerID, ticketID string) (*v1.GetTicketResponse, error) {
	res, err := c.Triage.GetTicket(ctx, &v1.GetTicketRequest{CustomerId: customerID, TicketId: ticketID})
	return res, wrapError(err)
}

// ListTickets returns one page of a customer's archived tickets, most recently completed
// first; Status TICKET_STATUS_RESOLVED or TICKET_STATUS_ESCALATED filters (ACTIVE lists the
// active tickets, unpaged). NextPageToken is empty on the last page.
func (c *Client) ListTickets(ctx context.Context, req *v1.ListTicketsRequest) (*v1.ListTicketsResponse, error) {
	if req == nil {
		req = &v1.ListTicketsRequest{}
	}
	res, err := c.Triage.ListTickets(ctx, req)
	return res, wrapError(err)
}

// AllTickets yields every archived ticket of the customer with status (UNSPECIFIED for
// both resolved and escalated), fetching pages of pageSize (0 for the server's default) as
// needed.
func (c *Client) AllTickets(ctx context.Context, customerID string, status v1.TicketStatus, pageSize int32) iter.Seq2[*v1.Ticket, error] {
	return func(yield func(*v1.Ticket, error) bool) {
		token := ""
		for {
			page, err := c.ListTickets(ctx, &v1.ListTicketsRequest{
				CustomerId: customerID, Status: status, PageSize: pageSize, PageToken: token,
			})
			if err != nil {
				yield(nil, err)
				return
			}
			for _, ticket := range page.GetTickets() {
				if !yield(ticket, nil) {
					return
				}
			}
			if token = page.GetNextPageToken(); token == "" {
				return
			}
		}
	}
}

// ListActiveTickets returns the customer's active tickets (awaiting a specialist or a
// follow-up).
func (c *Client) ListActiveTickets(ctx context.Context, customerID string) ([]*v1.Ticket, error) {
	res, err := c.Triage.ListActiveTickets(ctx, &v1.ListActiveTicketsRequest{CustomerId: customerID})
	return res.GetTickets(), wrapError(err)
}
