package frontdesk_test

// ListLlmCalls paging against an in-process fake WorkflowService, for what a live turn's two
// calls cannot show (many pages, the requests as sent); TestListLlmCallsOfATurn checks the
// wrappers against the server of scripts/sdk-tests.sh, which records calls. The fake serves
// one thread's calls, the most recent first, in pages and records each request it receives.

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

const fakeThread = "conv-llm"

// llmCallsFake pages over the calls of fakeThread: a page holds PageSize calls (0 means 50)
// from the offset its token names ("<thread>/after-<n>"), or fewer when cutAt is set (as the
// server ends a page at about 3 MiB of prompts and replies). A token that does not decode, or
// names another thread, is INVALID_ARGUMENT; another thread is NOT_FOUND, as the server answers.
type llmCallsFake struct {
	v1.UnimplementedWorkflowServiceServer

	calls     []*v1.LlmCall // the most recent first
	cutAt     int           // when > 0, a page holds at most this many calls whatever its size
	forgeNext bool          // the next page token handed out is "forged" (refused when sent back)
	mu        sync.Mutex
	requests  []*v1.ListLlmCallsRequest
}

func (f *llmCallsFake) ListLlmCalls(_ context.Context, req *v1.ListLlmCallsRequest) (*v1.ListLlmCallsResponse, error) {
	f.mu.Lock()
	f.requests = append(f.requests, req)
	f.mu.Unlock()
	if req.GetThreadId() != fakeThread {
		return nil, scriptedError(codes.NotFound, "NOT_FOUND", 0)
	}
	start := 0
	if tok := req.GetPageToken(); tok != "" {
		rest, ok := strings.CutPrefix(tok, fakeThread+"/after-")
		n, err := strconv.Atoi(rest)
		if !ok || err != nil || n <= 0 || n > len(f.calls) {
			return nil, scriptedError(codes.InvalidArgument, "INVALID_ARGUMENT", 0)
		}
		start = n
	}
	size := int(req.GetPageSize())
	if size == 0 {
		size = 50
	}
	if f.cutAt > 0 {
		size = min(size, f.cutAt)
	}
	end := min(start+size, len(f.calls))
	res := &v1.ListLlmCallsResponse{Calls: f.calls[start:end], TotalCalls: uint64(len(f.calls)), TotalUsage: &v1.Usage{}}
	for _, c := range f.calls {
		res.TotalUsage.PromptTokens += c.GetPromptTokens()
		res.TotalUsage.CompletionTokens += c.GetCompletionTokens()
	}
	if end < len(f.calls) {
		res.NextPageToken = fmt.Sprintf("%s/after-%d", fakeThread, end)
		if f.forgeNext {
			res.NextPageToken = "forged"
		}
	}
	return res, nil
}

// sentPage is what the fake received: (thread, page size, token) of each request.
type sentPage struct {
	thread string
	size   int32
	token  string
}

func (f *llmCallsFake) sent() []sentPage {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []sentPage
	for _, r := range f.requests {
		out = append(out, sentPage{r.GetThreadId(), r.GetPageSize(), r.GetPageToken()})
	}
	return out
}

func startLlmCallsFake(t *testing.T, n int) (*llmCallsFake, *frontdesk.Client, context.Context) {
	t.Helper()
	f := &llmCallsFake{}
	// Numbered down so that call-1 is the oldest, as the server lists the most recent first.
	for i := n; i >= 1; i-- {
		f.calls = append(f.calls, &v1.LlmCall{
			RunId: fmt.Sprintf("run-%d", i), Node: "chat_agent", Purpose: fmt.Sprintf("call-%d", i), Model: "scripted",
			PromptTokens: uint64(10 * i), CompletionTokens: uint64(i),
		})
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	v1.RegisterWorkflowServiceServer(srv, f)
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

func purposes(calls []*v1.LlmCall) []string {
	var out []string
	for _, c := range calls {
		out = append(out, c.GetPurpose())
	}
	return out
}

func TestListLlmCallsSendsTheThreadPageSizeAndToken(t *testing.T) {
	f, c, ctx := startLlmCallsFake(t, 5)
	page, err := c.ListLlmCalls(ctx, &v1.ListLlmCallsRequest{ThreadId: fakeThread, PageSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	if got := purposes(page.GetCalls()); !slices.Equal(got, []string{"call-5", "call-4"}) || page.GetNextPageToken() != fakeThread+"/after-2" {
		t.Fatalf("first page %v, next %q", got, page.GetNextPageToken())
	}
	// The totals cover the whole thread, not the page.
	if page.GetTotalCalls() != 5 || page.GetTotalUsage().GetPromptTokens() != 150 || page.GetTotalUsage().GetCompletionTokens() != 15 {
		t.Fatalf("totals %d calls, %v", page.GetTotalCalls(), page.GetTotalUsage())
	}
	last, err := c.ListLlmCalls(ctx, &v1.ListLlmCallsRequest{ThreadId: fakeThread, PageSize: 3, PageToken: page.GetNextPageToken()})
	if err != nil {
		t.Fatal(err)
	}
	if got := purposes(last.GetCalls()); !slices.Equal(got, []string{"call-3", "call-2", "call-1"}) || last.GetNextPageToken() != "" {
		t.Fatalf("last page %v, next %q", got, last.GetNextPageToken())
	}
	want := []sentPage{{fakeThread, 2, ""}, {fakeThread, 3, fakeThread + "/after-2"}}
	if got := f.sent(); !slices.Equal(got, want) {
		t.Fatalf("sent %v, want %v", got, want)
	}

	_, err = c.ListLlmCalls(ctx, &v1.ListLlmCallsRequest{ThreadId: fakeThread, PageToken: "forged"})
	if fe, ok := frontdesk.AsError(err); !ok || fe.Code != codes.InvalidArgument {
		t.Fatalf("a forged token: %v", err)
	}
	// nil is an empty request, which names no thread the fake knows.
	_, err = c.ListLlmCalls(ctx, nil)
	if fe, ok := frontdesk.AsError(err); !ok || fe.Code != codes.NotFound {
		t.Fatalf("nil request: %v", err)
	}
	if got := f.sent()[3]; got != (sentPage{}) {
		t.Fatalf("nil request sent %v", got)
	}
}

func TestAllLlmCallsFollowsNextPageToken(t *testing.T) {
	f, c, ctx := startLlmCallsFake(t, 5)
	var got []*v1.LlmCall
	for call, err := range c.AllLlmCalls(ctx, fakeThread, 2) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, call)
	}
	if p := purposes(got); !slices.Equal(p, purposes(f.calls)) {
		t.Fatalf("yielded %v", p)
	}
	want := []sentPage{{fakeThread, 2, ""}, {fakeThread, 2, fakeThread + "/after-2"}, {fakeThread, 2, fakeThread + "/after-4"}}
	if s := f.sent(); !slices.Equal(s, want) {
		t.Fatalf("sent %v, want %v", s, want)
	}
}

// A page the server ends early (its size limit) is shorter than asked for and still has a
// token: the helper goes on by the token, not by a page's length.
func TestAllLlmCallsReadsOnPastAShortPage(t *testing.T) {
	f, c, ctx := startLlmCallsFake(t, 5)
	f.cutAt = 2
	var got []*v1.LlmCall
	for call, err := range c.AllLlmCalls(ctx, fakeThread, 0) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, call)
	}
	if p := purposes(got); !slices.Equal(p, purposes(f.calls)) {
		t.Fatalf("yielded %v", p)
	}
	if s := f.sent(); len(s) != 3 || s[0] != (sentPage{fakeThread, 0, ""}) {
		t.Fatalf("sent %v", s)
	}
}

func TestAllLlmCallsStopsWhenTheLoopDoes(t *testing.T) {
	f, c, ctx := startLlmCallsFake(t, 5)
	n := 0
	for _, err := range c.AllLlmCalls(ctx, fakeThread, 2) {
		if err != nil {
			t.Fatal(err)
		}
		if n++; n == 3 {
			break
		}
	}
	want := []sentPage{{fakeThread, 2, ""}, {fakeThread, 2, fakeThread + "/after-2"}}
	if s := f.sent(); !slices.Equal(s, want) {
		t.Fatalf("sent %v, want %v: no page is fetched after the loop stops", s, want)
	}
}

func TestAllLlmCallsYieldsAFailureLast(t *testing.T) {
	f, c, ctx := startLlmCallsFake(t, 5)
	f.forgeNext = true
	var got []string
	var errs []error
	for call, err := range c.AllLlmCalls(ctx, fakeThread, 2) {
		if err != nil {
			if call != nil {
				t.Fatalf("a call with the error: %v", call)
			}
			errs = append(errs, err)
			continue
		}
		got = append(got, call.GetPurpose())
	}
	if !slices.Equal(got, []string{"call-5", "call-4"}) || len(errs) != 1 {
		t.Fatalf("yielded %v, errors %v", got, errs)
	}
	if fe, ok := frontdesk.AsError(errs[0]); !ok || fe.Code != codes.InvalidArgument {
		t.Fatalf("want INVALID_ARGUMENT, got %v", errs[0])
	}
}

func TestAllLlmCallsOfAnUnknownThreadYieldsNotFound(t *testing.T) {
	f, c, ctx := startLlmCallsFake(t, 5)
	var errs []error
	for call, err := range c.AllLlmCalls(ctx, "conv-unknown", 0) {
		if call != nil {
			t.Fatalf("yielded %v", call)
		}
		errs = append(errs, err)
	}
	if len(errs) != 1 {
		t.Fatalf("errors %v", errs)
	}
	if fe, ok := frontdesk.AsError(errs[0]); !ok || fe.Code != codes.NotFound {
		t.Fatalf("want NOT_FOUND, got %v", errs[0])
	}
	if s := f.sent(); !slices.Equal(s, []sentPage{{"conv-unknown", 0, ""}}) {
		t.Fatalf("sent %v", s)
	}
}

func TestAllLlmCallsOfAThreadWithoutCallsIsOneCall(t *testing.T) {
	f, c, ctx := startLlmCallsFake(t, 0)
	for call, err := range c.AllLlmCalls(ctx, fakeThread, 0) {
		t.Fatalf("yielded %v, %v", call, err)
	}
	if s := f.sent(); !slices.Equal(s, []sentPage{{fakeThread, 0, ""}}) {
		t.Fatalf("sent %v", s)
	}
}
