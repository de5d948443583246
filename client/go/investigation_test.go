package frontdesk_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	frontdesk "github.com/frontdesk/frontdesk/client/go"
	v1 "github.com/frontdesk/frontdesk/client/go/frontdeskv1"
)

// The scripted demo model answers every investigation purpose with a standing reply
// (tests/fixtures/demo-script.json); the changer's claim it extracts is always "I covered for
// u006, on vacation", which holds for a change made on 2025-11-10. The server is shared with
// the other SDK suites and an investigation exists once per mutation, so every test
// investigates inline mutations with fresh ids.

func freshMutationID() string { return fmt.Sprintf("go-%012x", rand.Uint64()>>16) }

// unauthorised is mutation 1002's change with a fresh id: u003 is not authorised for Payroll
// at Admin.
func unauthorised() *v1.HrMutation {
	return &v1.HrMutation{
		MutationId:   freshMutationID(),
		ChangerId:    "u003",
		TargetUserId: "u007",
		System:       "Payroll",
		AccessLevel:  "Admin",
		ChangeType:   "salary_change",
		Description:  "Raised monthly salary by 4%",
		ChangedAt:    timestamppb.New(time.Date(2025, 11, 10, 14, 30, 0, 0, time.UTC)),
	}
}

// authorised is mutation 1001's change with a fresh id: u002's role allows HRPortal at Write.
func authorised() *v1.HrMutation {
	return &v1.HrMutation{
		MutationId:   freshMutationID(),
		ChangerId:    "u002",
		TargetUserId: "u003",
		System:       "HRPortal",
		AccessLevel:  "Write",
		ChangeType:   "address_change",
		Description:  "Updated home address",
		ChangedAt:    timestamppb.New(time.Date(2025, 11, 10, 9, 0, 0, 0, time.UTC)),
	}
}

func investigate(t *testing.T, c *frontdesk.Client, ctx context.Context, m *v1.HrMutation, opts ...frontdesk.InvestigationOption) *v1.Investigation {
	t.Helper()
	run, err := c.StartInlineInvestigation(ctx, m, opts...)
	if err != nil {
		t.Fatal(err)
	}
	inv, err := run.Result()
	if err != nil {
		t.Fatal(err)
	}
	return inv
}

func respond(t *testing.T, c *frontdesk.Client, ctx context.Context, req *v1.RespondRequest) *v1.Investigation {
	t.Helper()
	run, err := c.Respond(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	inv, err := run.Result()
	if err != nil {
		t.Fatal(err)
	}
	return inv
}

func statuses(inv *v1.Investigation) []v1.InvestigationStatus {
	var out []v1.InvestigationStatus
	for _, c := range inv.GetStatusHistory() {
		out = append(out, c.GetTo())
	}
	return out
}

func wantError(t *testing.T, err error, code codes.Code, reason string) {
	t.Helper()
	fe, ok := frontdesk.AsError(err)
	if !ok || fe.Code != code || (reason != "" && fe.Reason != reason) {
		t.Fatalf("want %s (reason %q), got %v", code, reason, err)
	}
}

func TestAnAuthorisedChangeFinishesAtOnce(t *testing.T) {
	c, ctx := client(t)
	m := authorised()
	run, err := c.StartInlineInvestigation(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	var events []*v1.RunEvent
	n := 0
	for p := range run.Progress() {
		n++
		if ev := p.GetEvent(); ev != nil {
			events = append(events, ev)
		} else if p.GetMessage() == nil && p.GetStatusChange() == nil {
			t.Fatalf("unexpected progress %v", p)
		}
	}
	inv, err := run.Result()
	if err != nil {
		t.Fatal(err)
	}
	if n != len(run.Received)+len(run.Messages)+len(run.StatusChanges) || len(events) != len(run.Received) {
		t.Fatalf("%d progress items, %d events, %d messages, %d status changes", n, len(run.Received), len(run.Messages), len(run.StatusChanges))
	}
	if frontdesk.EventKind(events[0]) != "run_started" || frontdesk.EventKind(events[len(events)-1]) != "run_finished" {
		t.Fatalf("the run's events must start with run_started and end with run_finished: %v", events)
	}
	var actions []v1.AgentAction
	for _, msg := range run.Messages {
		actions = append(actions, msg.GetAction())
	}
	wantActions := []v1.AgentAction{
		v1.AgentAction_AGENT_ACTION_CHECK_RIGHTS,
		v1.AgentAction_AGENT_ACTION_CHECK_RIGHTS_RESULT,
		v1.AgentAction_AGENT_ACTION_GENERATE_ADVISORY_REPORT,
		v1.AgentAction_AGENT_ACTION_ADVISORY_REPORT_RESULT,
	}
	if !slices.Equal(actions, wantActions) {
		t.Fatalf("agent messages %v, want %v", actions, wantActions)
	}
	want := []v1.InvestigationStatus{
		v1.InvestigationStatus_INVESTIGATION_STATUS_INVESTIGATION_STARTED,
		v1.InvestigationStatus_INVESTIGATION_STATUS_APPROVED,
		v1.InvestigationStatus_INVESTIGATION_STATUS_ADVISORY_REPORT_GENERATED,
	}
	if inv.GetInvestigationId() != "INV-"+m.GetMutationId() || !inv.GetFinished() ||
		inv.GetStatus() != v1.InvestigationStatus_INVESTIGATION_STATUS_ADVISORY_REPORT_GENERATED ||
		!slices.Equal(statuses(inv), want) || len(run.StatusChanges) != len(want) ||
		!inv.GetRightsCheck().GetAuthorized() || len(inv.GetAwaiting()) != 0 ||
		inv.GetReport().GetRecommendation() != v1.Recommendation_RECOMMENDATION_ACCEPT || inv.GetReport().GetSummary() == "" ||
		!proto.Equal(inv.GetMutation().GetChangedAt(), m.GetChangedAt()) {
		t.Fatalf("unexpected investigation %v", inv)
	}
	got, err := c.GetInvestigation(ctx, inv.GetInvestigationId())
	if err != nil || got.GetReport().GetReportId() != inv.GetReport().GetReportId() {
		t.Fatalf("GetInvestigation: %v %v", got, err)
	}
	// one investigation per mutation
	_, err = c.StartInlineInvestigation(ctx, m)
	wantError(t, err, codes.AlreadyExists, "")
}

func TestTheChangerAndTheManagerAnswer(t *testing.T) {
	c, ctx := client(t)
	first := investigate(t, c, ctx, unauthorised())
	id := first.GetInvestigationId()
	if first.GetStatus() != v1.InvestigationStatus_INVESTIGATION_STATUS_AWAITING_USER_RESPONSE || first.GetFinished() ||
		first.GetRightsCheck().GetAuthorized() || len(first.GetAwaiting()) != 1 {
		t.Fatalf("want one action awaiting the changer: %v", first)
	}
	action := first.GetAwaiting()[0]
	if action.GetActionId() != id+"-changer" || action.GetRecipientId() != "u003" ||
		action.GetRecipientRole() != v1.ResponderRole_RESPONDER_ROLE_CHANGER ||
		action.GetStatus() != v1.PendingActionStatus_PENDING_ACTION_STATUS_AWAITING {
		t.Fatalf("unexpected action %v", action)
	}
	// other suites' investigations may wait for u003 too: look for this one
	pendingFor := func(recipient string, status v1.PendingActionStatus, actionID string) bool {
		t.Helper()
		found := false
		for a, err := range c.AllPendingActions(ctx, recipient, status, 100) {
			if err != nil {
				t.Fatal(err)
			}
			found = found || a.GetActionId() == actionID
		}
		return found
	}
	if !pendingFor("u003", v1.PendingActionStatus_PENDING_ACTION_STATUS_UNSPECIFIED, action.GetActionId()) ||
		!pendingFor("", v1.PendingActionStatus_PENDING_ACTION_STATUS_AWAITING, action.GetActionId()) {
		t.Fatal("the changer's action is not pending for u003")
	}
	waiting := false
	for inv, err := range c.AllInvestigations(ctx, v1.InvestigationStatus_INVESTIGATION_STATUS_AWAITING_USER_RESPONSE, 100) {
		if err != nil {
			t.Fatal(err)
		}
		waiting = waiting || inv.GetInvestigationId() == id
	}
	if !waiting {
		t.Fatalf("%s not listed as awaiting the user's response", id)
	}

	second := respond(t, c, ctx, frontdesk.ChangerReply(id, action.GetActionId(), "u003", "I stood in for Frank (u006), who was on vacation."))
	if second.GetStatus() != v1.InvestigationStatus_INVESTIGATION_STATUS_AWAITING_MANAGER_RESPONSE ||
		!second.GetClaim().GetValid() || second.GetClaim().GetCoveredUserId() != "u006" || len(second.GetAwaiting()) != 1 {
		t.Fatalf("want the manager asked after a valid claim: %v", second)
	}
	manager := second.GetAwaiting()[0]
	if manager.GetActionId() != id+"-manager" || manager.GetRecipientId() != "u001" ||
		manager.GetRecipientRole() != v1.ResponderRole_RESPONDER_ROLE_MANAGER {
		t.Fatalf("unexpected manager action %v", manager)
	}
	if pendingFor("u003", v1.PendingActionStatus_PENDING_ACTION_STATUS_AWAITING, action.GetActionId()) {
		t.Fatal("the changer's action still awaits a reply")
	}
	if !pendingFor("u003", v1.PendingActionStatus_PENDING_ACTION_STATUS_ANSWERED, action.GetActionId()) {
		t.Fatal("the changer's action is not listed as answered")
	}

	third := respond(t, c, ctx, frontdesk.ManagerReply(id, manager.GetActionId(), "u001", v1.ManagerDecision_MANAGER_DECISION_APPROVE, "Confirmed with the team."))
	want := []v1.InvestigationStatus{
		v1.InvestigationStatus_INVESTIGATION_STATUS_INVESTIGATION_STARTED,
		v1.InvestigationStatus_INVESTIGATION_STATUS_CLARIFICATION_REQUESTED,
		v1.InvestigationStatus_INVESTIGATION_STATUS_AWAITING_USER_RESPONSE,
		v1.InvestigationStatus_INVESTIGATION_STATUS_MANAGER_VERIFICATION_REQUESTED,
		v1.InvestigationStatus_INVESTIGATION_STATUS_AWAITING_MANAGER_RESPONSE,
		v1.InvestigationStatus_INVESTIGATION_STATUS_APPROVED,
		v1.InvestigationStatus_INVESTIGATION_STATUS_ADVISORY_REPORT_GENERATED,
	}
	if !third.GetFinished() || !slices.Equal(statuses(third), want) ||
		third.GetManager().GetDecision() != v1.ManagerDecision_MANAGER_DECISION_APPROVE ||
		third.GetReport().GetRecommendation() != v1.Recommendation_RECOMMENDATION_ACCEPT {
		t.Fatalf("unexpected final investigation %v", third)
	}
	_, err := c.Respond(ctx, frontdesk.ManagerReply(id, manager.GetActionId(), "u001", v1.ManagerDecision_MANAGER_DECISION_DENY, ""))
	wantError(t, err, codes.FailedPrecondition, "INTERRUPT_ANSWERED")

	trail, err := c.GetAuditTrail(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var changes []v1.InvestigationStatus
	var replies []string
	correlation := ""
	for i, e := range trail {
		if e.GetSeq() != uint32(i+1) || e.GetInvestigationId() != id {
			t.Fatalf("entry %d: %v", i, e)
		}
		if sc := e.GetStatusChange(); sc != nil {
			changes = append(changes, sc.GetTo())
		}
		if r := e.GetReply(); r != nil {
			replies = append(replies, r.GetResponderId())
			if correlation == "" {
				correlation = e.GetCorrelationId()
			}
		}
	}
	if !slices.Equal(changes, want) || !slices.Equal(replies, []string{"u003", "u001"}) {
		t.Fatalf("the trail's status changes %v and replies %v", changes, replies)
	}
	exchange, err := c.GetAuditTrailByCorrelation(ctx, correlation)
	if err != nil {
		t.Fatal(err)
	}
	var reply, notification bool
	for _, e := range exchange {
		reply = reply || e.GetReply() != nil
		notification = notification || e.GetNotification() != nil
	}
	if !reply || !notification {
		t.Fatalf("the exchange %s lacks the reply or the notification: %v", correlation, exchange)
	}

	// a watch of a finished investigation sends the trail and ends
	var seqs []uint32
	for e, err := range c.WatchInvestigation(ctx, id, 0) {
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, e.GetSeq())
	}
	if len(seqs) != len(trail) || seqs[len(seqs)-1] != uint32(len(trail)) {
		t.Fatalf("watched %v of a trail of %d", seqs, len(trail))
	}

	// once ctx is cancelled the watch yields CANCELLED and nothing that had arrived
	cancelled, cancel := context.WithCancel(ctx)
	defer cancel()
	seqs = nil
	var last error
	for e, err := range c.WatchInvestigation(cancelled, id, 0) {
		if err != nil {
			last = err
			continue
		}
		seqs = append(seqs, e.GetSeq())
		time.Sleep(100 * time.Millisecond)
		cancel()
	}
	if e, ok := frontdesk.AsError(last); !ok || e.Code != codes.Canceled || !slices.Equal(seqs, []uint32{1}) {
		t.Fatalf("after cancel: %v, %v", seqs, last)
	}
}

func TestAWatchFollowsTheInvestigationToItsReport(t *testing.T) {
	c, ctx := client(t)
	id := investigate(t, c, ctx, unauthorised()).GetInvestigationId()
	trail, err := c.GetAuditTrail(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	seen := uint32(len(trail))
	type result struct {
		entries []*v1.AuditEntry
		err     error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		for e, err := range c.WatchInvestigation(ctx, id, seen) {
			if err != nil {
				r.err = err
				break
			}
			r.entries = append(r.entries, e)
		}
		done <- r
	}()
	second := respond(t, c, ctx, frontdesk.ChangerReply(id, id+"-changer", "u003", "Covering for u006."))
	respond(t, c, ctx, frontdesk.ManagerReply(id, second.GetAwaiting()[0].GetActionId(), "u001", v1.ManagerDecision_MANAGER_DECISION_APPROVE, ""))
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	last := r.entries[len(r.entries)-1]
	if r.entries[0].GetSeq() != seen+1 ||
		last.GetStatusChange().GetTo() != v1.InvestigationStatus_INVESTIGATION_STATUS_ADVISORY_REPORT_GENERATED {
		t.Fatalf("watched from %d to %v", r.entries[0].GetSeq(), last)
	}
}

func TestAWrongResponderIsPermissionDenied(t *testing.T) {
	c, ctx := client(t)
	id := investigate(t, c, ctx, unauthorised()).GetInvestigationId()
	_, err := c.Respond(ctx, frontdesk.ChangerReply(id, id+"-changer", "u001", "it was me"))
	wantError(t, err, codes.PermissionDenied, "WRONG_RESPONDER")
	_, err = c.Respond(ctx, frontdesk.ManagerReply(id, id+"-changer", "u003", v1.ManagerDecision_MANAGER_DECISION_APPROVE, ""))
	wantError(t, err, codes.PermissionDenied, "WRONG_RESPONDER")
	inv, err := c.GetInvestigation(ctx, id)
	if err != nil || inv.GetStatus() != v1.InvestigationStatus_INVESTIGATION_STATUS_AWAITING_USER_RESPONSE {
		t.Fatalf("the action must still await its reply: %v %v", inv, err)
	}
}

func TestUnknownInvestigationsAndMutationsAreNotFound(t *testing.T) {
	c, ctx := client(t)
	unknown := "INV-" + freshMutationID() + "-unknown"
	_, err := c.GetInvestigation(ctx, unknown)
	wantError(t, err, codes.NotFound, "NOT_FOUND")
	_, err = c.Respond(ctx, frontdesk.ChangerReply(unknown, unknown+"-changer", "u003", "x"))
	wantError(t, err, codes.NotFound, "")
	_, err = c.StartInvestigation(ctx, freshMutationID()+"-no-such-mutation")
	wantError(t, err, codes.NotFound, "NOT_FOUND")
}

func TestInvalidInlineMutationIsInvalidArgument(t *testing.T) {
	c, ctx := client(t)
	m := authorised()
	m.AccessLevel = "Root"
	_, err := c.StartInlineInvestigation(ctx, m)
	fe, ok := frontdesk.AsError(err)
	if !ok || fe.Code != codes.InvalidArgument || len(fe.FieldViolations) != 1 || fe.FieldViolations[0].Field != "inline_mutation.access_level" {
		t.Fatalf("want INVALID_ARGUMENT on inline_mutation.access_level, got %v", err)
	}
}

func TestListInvestigationsPagesAndIdempotentStart(t *testing.T) {
	c, ctx := client(t)
	m := authorised()
	key := fmt.Sprintf("go-inv-%d", time.Now().UnixNano())
	first := investigate(t, c, ctx, m, frontdesk.WithInvestigationIdempotencyKey(key))
	run, err := c.StartInlineInvestigation(ctx, m, frontdesk.WithInvestigationIdempotencyKey(key))
	if err != nil {
		t.Fatal(err)
	}
	again, err := run.Result()
	if err != nil || again.GetInvestigationId() != first.GetInvestigationId() || again.GetStatus() != first.GetStatus() || len(run.Messages) != 0 {
		t.Fatalf("want a replay of %v, got %v (%d messages) %v", first, again, len(run.Messages), err)
	}
	investigate(t, c, ctx, authorised())

	page, err := c.ListInvestigations(ctx, &v1.ListInvestigationsRequest{PageSize: 1})
	if err != nil || len(page.GetInvestigations()) != 1 || page.GetNextPageToken() == "" {
		t.Fatalf("page of 1: %v %v", page, err)
	}
	page2, err := c.ListInvestigations(ctx, &v1.ListInvestigationsRequest{PageSize: 1, PageToken: page.GetNextPageToken()})
	if err != nil || len(page2.GetInvestigations()) != 1 ||
		page2.GetInvestigations()[0].GetInvestigationId() == page.GetInvestigations()[0].GetInvestigationId() {
		t.Fatalf("second page of 1: %v %v", page2, err)
	}
	found := false
	for inv, err := range c.AllInvestigations(ctx, v1.InvestigationStatus_INVESTIGATION_STATUS_ADVISORY_REPORT_GENERATED, 50) {
		if err != nil {
			t.Fatal(err)
		}
		if inv.GetInvestigationId() == first.GetInvestigationId() {
			found = true
			break
		}
	}
	if !found {
		t.Fatalf("%s not in AllInvestigations", first.GetInvestigationId())
	}
	_, err = c.ListInvestigations(ctx, &v1.ListInvestigationsRequest{PageSize: 101})
	wantError(t, err, codes.InvalidArgument, "")
}
