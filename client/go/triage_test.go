package frontdesk_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	frontdesk "github.com/frontdesk/frontdesk/client/go"
	v1 "github.com/frontdesk/frontdesk/client/go/frontdeskv1"
)

// The scripted demo model answers the triage purposes (translator.translate,
// supervisor.classify, specialist.billing, ticket_matcher.match): every ticket is an English
// billing question that the billing specialist auto-responds to, so it is resolved and
// archived at once.
const (
	customer      = "CUST-001"
	ticketMessage = "I was charged twice for my subscription this month."
)

func triage(t *testing.T, c *frontdesk.Client, ctx context.Context, customerID string, opts ...frontdesk.TriageOption) *v1.TriageResult {
	t.Helper()
	tr, err := c.TriageTicket(ctx, customerID, ticketMessage, opts...)
	if err != nil {
		t.Fatal(err)
	}
	res, err := tr.Result()
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestTriageTicketStreamsResolutionEventsThenResult(t *testing.T) {
	c, ctx := client(t)
	tr, err := c.TriageTicket(ctx, customer, ticketMessage, frontdesk.WithSubject("Double charge"))
	if err != nil {
		t.Fatal(err)
	}
	res := tr.Resolution()
	if !strings.HasPrefix(res.GetTicketId(), "TKT-") || res.GetMatchedExisting() {
		t.Fatalf("want a new ticket, got resolution %v", res)
	}
	var events []*v1.RunEvent
	for ev := range tr.Events() {
		events = append(events, ev)
	}
	result, err := tr.Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(events) == 0 || frontdesk.EventKind(events[0]) != "run_started" || frontdesk.EventKind(events[len(events)-1]) != "run_finished" {
		t.Fatalf("stream must start with run_started and end with run_finished: %v", events)
	}
	var started, tools []string
	for i, ev := range events {
		if ev.GetEventId() != uint64(i+1) || ev.GetRunId() != result.GetRunId() {
			t.Fatalf("event %d: id %d, run %s (result's run %s)", i, ev.GetEventId(), ev.GetRunId(), result.GetRunId())
		}
		switch frontdesk.EventKind(ev) {
		case "node_started":
			started = append(started, ev.GetNode())
		case "tool_called":
			tools = append(tools, ev.GetToolCalled().GetName())
		}
	}
	tIdx, sIdx, bIdx := slices.Index(started, "translator"), slices.Index(started, "supervisor"), slices.Index(started, "billing_specialist")
	if tIdx < 0 || sIdx < tIdx || bIdx < sIdx {
		t.Fatalf("want translator, supervisor, billing_specialist in order; nodes started: %v", started)
	}
	if !slices.Contains(tools, "customer_lookup") {
		t.Fatalf("customer_lookup not called; tools called: %v", tools)
	}
	if result.GetTicketId() != res.GetTicketId() || result.GetCustomerId() != customer ||
		result.GetTicketType() != v1.TicketType_TICKET_TYPE_BILLING ||
		result.GetRecommendedAction() != v1.RecommendedAction_RECOMMENDED_ACTION_AUTO_RESPOND ||
		result.GetStatus() != v1.TicketStatus_TICKET_STATUS_RESOLVED ||
		result.GetSuggestedResponse() == "" || result.GetLanguage() != "en" || result.GetReplayed() {
		t.Fatalf("unexpected result %v", result)
	}
	if len(tr.Received) != len(events) {
		t.Fatalf("Received has %d events, loop saw %d", len(tr.Received), len(events))
	}
}

func TestGetAndListTickets(t *testing.T) {
	c, ctx := client(t)
	result := triage(t, c, ctx, customer, frontdesk.WithSubject("Charged twice"))
	id := result.GetTicketId()

	got, err := c.GetTicket(ctx, customer, id)
	if err != nil {
		t.Fatal(err)
	}
	msgs := got.GetMessages()
	if got.GetTicket().GetTicketId() != id || got.GetTicket().GetSubject() != "Charged twice" ||
		got.GetTicket().GetStatus() != v1.TicketStatus_TICKET_STATUS_RESOLVED || len(msgs) != 2 ||
		msgs[0].GetRole() != v1.Role_ROLE_USER || msgs[0].GetText() != ticketMessage ||
		msgs[1].GetRole() != v1.Role_ROLE_ASSISTANT || msgs[1].GetText() != result.GetSuggestedResponse() ||
		got.GetResult().GetRecommendedAction() != v1.RecommendedAction_RECOMMENDED_ACTION_AUTO_RESPOND {
		t.Fatalf("unexpected ticket %v", got)
	}

	// other tests may add tickets meanwhile: look for this one
	listed := func(status v1.TicketStatus) []string {
		page, err := c.ListTickets(ctx, &v1.ListTicketsRequest{CustomerId: customer, Status: status, PageSize: 50})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, tk := range page.GetTickets() {
			ids = append(ids, tk.GetTicketId())
		}
		return ids
	}
	if ids := listed(v1.TicketStatus_TICKET_STATUS_UNSPECIFIED); !slices.Contains(ids, id) {
		t.Fatalf("%s not listed: %v", id, ids)
	}
	if ids := listed(v1.TicketStatus_TICKET_STATUS_RESOLVED); !slices.Contains(ids, id) {
		t.Fatalf("%s not listed as resolved: %v", id, ids)
	}
	if ids := listed(v1.TicketStatus_TICKET_STATUS_ESCALATED); slices.Contains(ids, id) {
		t.Fatalf("%s listed as escalated: %v", id, ids)
	}
	found := false
	for tk, err := range c.AllTickets(ctx, customer, v1.TicketStatus_TICKET_STATUS_UNSPECIFIED, 1) {
		if err != nil {
			t.Fatal(err)
		}
		if tk.GetTicketId() == id {
			found = true
			break
		}
	}
	if !found {
		t.Fatalf("%s not in AllTickets", id)
	}
	// resolved at once: nothing stays active
	active, err := c.ListActiveTickets(ctx, customer)
	if err != nil || len(active) != 0 {
		t.Fatalf("active tickets: %v %v", active, err)
	}
}

func TestListTicketsPages(t *testing.T) {
	c, ctx := client(t)
	const other = "CUST-002"
	for range 2 {
		triage(t, c, ctx, other)
	}
	page, err := c.ListTickets(ctx, &v1.ListTicketsRequest{CustomerId: other, PageSize: 1})
	if err != nil || len(page.GetTickets()) != 1 || page.GetNextPageToken() == "" {
		t.Fatalf("page of 1: %v %v", page, err)
	}
	page2, err := c.ListTickets(ctx, &v1.ListTicketsRequest{CustomerId: other, PageSize: 1, PageToken: page.GetNextPageToken()})
	if err != nil || len(page2.GetTickets()) != 1 || page2.GetTickets()[0].GetTicketId() == page.GetTickets()[0].GetTicketId() {
		t.Fatalf("second page of 1: %v %v", page2, err)
	}
}

func TestTriageIdempotentReplay(t *testing.T) {
	c, ctx := client(t)
	key := fmt.Sprintf("go-triage-%d", time.Now().UnixNano())
	first := triage(t, c, ctx, customer, frontdesk.WithTriageIdempotencyKey(key))
	tr, err := c.TriageTicket(ctx, customer, ticketMessage, frontdesk.WithTriageIdempotencyKey(key))
	if err != nil {
		t.Fatal(err)
	}
	again, err := tr.Result()
	if err != nil {
		t.Fatal(err)
	}
	if !again.GetReplayed() || again.GetTicketId() != first.GetTicketId() || tr.Resolution().GetTicketId() != first.GetTicketId() {
		t.Fatalf("expected a replay of %v, got %v (resolution %v)", first, again, tr.Resolution())
	}
}

func TestTriageUnknownCustomerIsNotFound(t *testing.T) {
	c, ctx := client(t)
	tr, err := c.TriageTicket(ctx, "CUST-999", ticketMessage)
	fe, ok := frontdesk.AsError(err)
	if tr != nil || !ok || fe.Code != codes.NotFound || fe.Reason != "NOT_FOUND" {
		t.Fatalf("want NOT_FOUND from TriageTicket, got %v (triage %v)", err, tr)
	}
}

func TestAnotherCustomersTicketIsNotFound(t *testing.T) {
	c, ctx := client(t)
	id := triage(t, c, ctx, customer).GetTicketId()
	_, err := c.GetTicket(ctx, "CUST-002", id)
	if fe, ok := frontdesk.AsError(err); !ok || fe.Code != codes.NotFound || fe.Reason != "NOT_FOUND" {
		t.Fatalf("want NOT_FOUND, got %v", err)
	}
}

func TestTriageEmptyMessageIsInvalidArgument(t *testing.T) {
	c, ctx := client(t)
	_, err := c.TriageTicket(ctx, customer, "")
	fe, ok := frontdesk.AsError(err)
	if !ok || fe.Code != codes.InvalidArgument || len(fe.FieldViolations) != 1 || fe.FieldViolations[0].Field != "message" {
		t.Fatalf("want INVALID_ARGUMENT on message, got %v", err)
	}
}

func TestTriageCancellation(t *testing.T) {
	c, ctx := client(t)
	callCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	// another customer: the run finishes server-side, customer's active tickets stay untouched
	tr, err := c.TriageTicket(callCtx, "CUST-003", ticketMessage)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	n := 0
	for range tr.Events() {
		n++
	}
	_, err = tr.Result()
	if fe, ok := frontdesk.AsError(err); !ok || fe.Code != codes.Canceled || n != 0 {
		t.Fatalf("want CANCELED and no events, got %v after %d events", err, n)
	}
}
