package frontdesk_test

// ListPendingActions paging against an in-process fake InvestigationService (no live
// frontdesk-server needed): the fake serves a fixed list of actions in pages and records each
// request it receives.

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	frontdesk "github.com/frontdesk/frontdesk/client/go"
	v1 "github.com/frontdesk/frontdesk/client/go/frontdeskv1"
)

// pendingFake pages over actions: a page holds PageSize actions (0 means 20) from the offset
// its token names ("after-<n>"); another token is INVALID_ARGUMENT, as the server answers.
type pendingFake struct {
	v1.UnimplementedInvestigationServiceServer

	actions   []*v1.PendingAction
	forgeNext bool // the next page token handed out is "forged" (refused when sent back)
	mu        sync.Mutex
	requests  []*v1.ListPendingActionsRequest
}

func (f *pendingFake) ListPendingActions(_ context.Context, req *v1.ListPendingActionsRequest) (*v1.ListPendingActionsResponse, error) {
	f.mu.Lock()
	f.requests = append(f.requests, req)
	f.mu.Unlock()
	start := 0
	if tok := req.GetPageToken(); tok != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(tok, "after-"))
		if !strings.HasPrefix(tok, "after-") || err != nil || n <= 0 || n > len(f.actions) {
			return nil, scriptedError(codes.InvalidArgument, "INVALID_ARGUMENT", 0)
		}
		start = n
	}
	size := int(req.GetPageSize())
	if size == 0 {
		size = 20
	}
	end := min(start+size, len(f.actions))
	res := &v1.ListPendingActionsResponse{Actions: f.actions[start:end]}
	if end < len(f.actions) {
		res.NextPageToken = fmt.Sprintf("after-%d", end)
		if f.forgeNext {
			res.NextPageToken = "forged"
		}
	}
	return res, nil
}

// sent is what the fake received: (recipient, status, page size, token) of each request.
type sent struct {
	recipient string
	status    v1.PendingActionStatus
	size      int32
	token     string
}

func (f *pendingFake) sent() []sent {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []sent
	for _, r := range f.requests {
		out = append(out, sent{r.GetRecipientId(), r.GetStatus(), r.GetPageSize(), r.GetPageToken()})
	}
	return out
}

func startPendingFake(t *testing.T, n int) (*pendingFake, *frontdesk.Client, context.Context) {
	t.Helper()
	f := &pendingFake{}
	for i := 1; i <= n; i++ {
		f.actions = append(f.actions, &v1.PendingAction{
			ActionId: fmt.Sprintf("INV-%d-changer", i), InvestigationId: fmt.Sprintf("INV-%d", i), RecipientId: "u003",
		})
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	v1.RegisterInvestigationServiceServer(srv, f)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	c, err := frontdesk.Dial(lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.Retry = nil
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return f, c, ctx
}

func actionIDs(actions []*v1.PendingAction) []string {
	var ids []string
	for _, a := range actions {
		ids = append(ids, a.GetActionId())
	}
	return ids
}

const answered = v1.PendingActionStatus_PENDING_ACTION_STATUS_ANSWERED

func TestListPendingActionsSendsThePageSizeAndToken(t *testing.T) {
	f, c, ctx := startPendingFake(t, 5)
	page, err := c.ListPendingActions(ctx, &v1.ListPendingActionsRequest{RecipientId: "u003", Status: answered, PageSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	if got := actionIDs(page.GetActions()); !slices.Equal(got, []string{"INV-1-changer", "INV-2-changer"}) || page.GetNextPageToken() != "after-2" {
		t.Fatalf("first page %v, next %q", got, page.GetNextPageToken())
	}
	last, err := c.ListPendingActions(ctx, &v1.ListPendingActionsRequest{
		RecipientId: "u003", Status: answered, PageSize: 3, PageToken: page.GetNextPageToken(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := actionIDs(last.GetActions()); !slices.Equal(got, []string{"INV-3-changer", "INV-4-changer", "INV-5-changer"}) || last.GetNextPageToken() != "" {
		t.Fatalf("last page %v, next %q", got, last.GetNextPageToken())
	}
	want := []sent{{"u003", answered, 2, ""}, {"u003", answered, 3, "after-2"}}
	if got := f.sent(); !slices.Equal(got, want) {
		t.Fatalf("sent %v, want %v", got, want)
	}

	// nil is an empty request: everyone's awaiting actions, the server's page size
	all, err := c.ListPendingActions(ctx, nil)
	if err != nil || len(all.GetActions()) != 5 || all.GetNextPageToken() != "" {
		t.Fatalf("nil request: %v, %v", all, err)
	}
	if got := f.sent()[2]; got != (sent{}) {
		t.Fatalf("nil request sent %v", got)
	}

	_, err = c.ListPendingActions(ctx, &v1.ListPendingActionsRequest{PageToken: "forged"})
	if fe, ok := frontdesk.AsError(err); !ok || fe.Code != codes.InvalidArgument {
		t.Fatalf("a forged token: %v", err)
	}
}

func TestAllPendingActionsFollowsNextPageToken(t *testing.T) {
	f, c, ctx := startPendingFake(t, 5)
	var got []*v1.PendingAction
	for a, err := range c.AllPendingActions(ctx, "u003", answered, 2) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, a)
	}
	if ids := actionIDs(got); !slices.Equal(ids, actionIDs(f.actions)) {
		t.Fatalf("yielded %v", ids)
	}
	want := []sent{{"u003", answered, 2, ""}, {"u003", answered, 2, "after-2"}, {"u003", answered, 2, "after-4"}}
	if s := f.sent(); !slices.Equal(s, want) {
		t.Fatalf("sent %v, want %v", s, want)
	}
}

func TestAllPendingActionsStopsWhenTheLoopDoes(t *testing.T) {
	f, c, ctx := startPendingFake(t, 5)
	n := 0
	for _, err := range c.AllPendingActions(ctx, "", v1.PendingActionStatus_PENDING_ACTION_STATUS_UNSPECIFIED, 2) {
		if err != nil {
			t.Fatal(err)
		}
		if n++; n == 3 {
			break
		}
	}
	want := []sent{{"", 0, 2, ""}, {"", 0, 2, "after-2"}}
	if s := f.sent(); !slices.Equal(s, want) {
		t.Fatalf("sent %v, want %v: no page is fetched after the loop stops", s, want)
	}
}

func TestAllPendingActionsYieldsAFailureLast(t *testing.T) {
	f, c, ctx := startPendingFake(t, 5)
	f.forgeNext = true // the first page's token is one the fake then refuses
	var ids []string
	var errs []error
	for a, err := range c.AllPendingActions(ctx, "u003", answered, 2) {
		if err != nil {
			if a != nil {
				t.Fatalf("an action with the error: %v", a)
			}
			errs = append(errs, err)
			continue
		}
		ids = append(ids, a.GetActionId())
	}
	if !slices.Equal(ids, []string{"INV-1-changer", "INV-2-changer"}) || len(errs) != 1 {
		t.Fatalf("yielded %v, errors %v", ids, errs)
	}
	if fe, ok := frontdesk.AsError(errs[0]); !ok || fe.Code != codes.InvalidArgument {
		t.Fatalf("want INVALID_ARGUMENT, got %v", errs[0])
	}
	if s := f.sent(); len(s) != 2 || s[1].token != "forged" {
		t.Fatalf("sent %v", s)
	}
}

func TestAllPendingActionsOfAnEmptyListIsOneCall(t *testing.T) {
	f, c, ctx := startPendingFake(t, 0)
	for a, err := range c.AllPendingActions(ctx, "u009", answered, 0) {
		t.Fatalf("yielded %v, %v", a, err)
	}
	if s := f.sent(); !slices.Equal(s, []sent{{"u009", answered, 0, ""}}) {
		t.Fatalf("sent %v", s)
	}
}
