package frontdesk_test

// Retries, error details and re-attaching, against a tiny in-process fake gRPC server (no live
// frontdesk-server needed): the fake answers StartConversation, SendMessage and SubscribeRun as
// each test scripts it.

import (
	"context"
	"net"
	"reflect"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	frontdesk "github.com/frontdesk/frontdesk/client/go"
	v1 "github.com/frontdesk/frontdesk/client/go/frontdeskv1"
)

const (
	fakeRun  = "0b6a3d5e-2f7c-4b8e-9d1a-5c3e7f9a1b2d"
	fakeLast = 5
)

type fake struct {
	v1.UnimplementedConversationServiceServer
	v1.UnimplementedWorkflowServiceServer

	mu                sync.Mutex
	startFailures     int
	delay             time.Duration // 0: no RetryInfo
	breakAfter        int
	subscribeNotFound bool
	noResult          bool // SendMessage ends after its events, without the TurnResult
	runFails          bool // SubscribeRun's last event is a RunFailed (FAILED_PRECONDITION CONVERSATION_ENDED)
	// busyFor: SendMessage calls after the first answer ABORTED THREAD_BUSY (RetryInfo delay)
	// until busyFor has passed since the first (the run held by a replica that died).
	busyFor        time.Duration
	startCalls     []time.Time
	sendCalls      int
	sendTimes      []time.Time
	busyTimes      []time.Time
	subscribeCalls []uint64
}

func scriptedError(code codes.Code, reason string, delay time.Duration) error {
	st := status.New(code, "scripted failure")
	info := &errdetails.ErrorInfo{Reason: reason, Domain: "frontdesk.dev", Metadata: map[string]string{"kind": "conversation"}}
	var err error
	if delay > 0 {
		st, err = st.WithDetails(info, &errdetails.RetryInfo{RetryDelay: durationpb.New(delay)})
	} else {
		st, err = st.WithDetails(info)
	}
	if err != nil {
		panic(err)
	}
	return st.Err()
}

func fakeEvent(id int) *v1.RunEvent {
	ev := &v1.RunEvent{
		RunId: fakeRun, EventId: uint64(id), Node: "n",
		Time: &timestamppb.Timestamp{Seconds: 1_700_000_000, Nanos: int32(id)},
	}
	switch id {
	case 1:
		ev.Kind = &v1.RunEvent_RunStarted{RunStarted: &v1.RunStarted{ThreadId: "c1"}}
	case fakeLast:
		ev.Kind = &v1.RunEvent_RunFinished{RunFinished: &v1.RunFinished{}}
	default:
		ev.Kind = &v1.RunEvent_NodeStarted{NodeStarted: &v1.NodeStarted{Step: uint32(id)}}
	}
	return ev
}

func (f *fake) StartConversation(_ context.Context, _ *v1.StartConversationRequest) (*v1.StartConversationResponse, error) {
	f.mu.Lock()
	f.startCalls = append(f.startCalls, time.Now())
	n := len(f.startCalls)
	f.mu.Unlock()
	if n <= f.startFailures {
		return nil, scriptedError(codes.Aborted, "THREAD_BUSY", f.delay)
	}
	return &v1.StartConversationResponse{Conversation: &v1.Conversation{ConversationId: "c1"}}, nil
}

func (f *fake) SendMessage(_ *v1.SendMessageRequest, stream grpc.ServerStreamingServer[v1.SendMessageResponse]) error {
	f.mu.Lock()
	f.sendCalls++
	n := f.sendCalls
	now := time.Now()
	f.sendTimes = append(f.sendTimes, now)
	busy := n > 1 && now.Sub(f.sendTimes[0]) < f.busyFor
	if busy {
		f.busyTimes = append(f.busyTimes, now)
	}
	f.mu.Unlock()
	if busy {
		return scriptedError(codes.Aborted, "THREAD_BUSY", f.delay)
	}
	for i := 1; i <= fakeLast; i++ {
		if n == 1 && f.breakAfter > 0 && i > f.breakAfter {
			return scriptedError(codes.Unavailable, "STORE_UNAVAILABLE", 0)
		}
		if err := stream.Send(&v1.SendMessageResponse{Payload: &v1.SendMessageResponse_Event{Event: fakeEvent(i)}}); err != nil {
			return err
		}
	}
	if f.noResult {
		return nil
	}
	return stream.Send(&v1.SendMessageResponse{Payload: &v1.SendMessageResponse_Result{Result: &v1.TurnResult{RunId: fakeRun, Replayed: n > 1}}})
}

func (f *fake) SubscribeRun(req *v1.SubscribeRunRequest, stream grpc.ServerStreamingServer[v1.SubscribeRunResponse]) error {
	f.mu.Lock()
	f.subscribeCalls = append(f.subscribeCalls, req.GetAfterEventId())
	f.mu.Unlock()
	if f.subscribeNotFound {
		return scriptedError(codes.NotFound, "NOT_FOUND", 0)
	}
	for i := int(req.GetAfterEventId()) + 1; i <= fakeLast; i++ {
		ev := fakeEvent(i)
		if i == fakeLast && f.runFails {
			ev.Kind = &v1.RunEvent_RunFailed{RunFailed: &v1.RunFailed{
				Code: int32(codes.FailedPrecondition), Message: "the conversation has ended", Reason: "CONVERSATION_ENDED",
			}}
		}
		if err := stream.Send(&v1.SubscribeRunResponse{Event: ev}); err != nil {
			return err
		}
	}
	return nil
}

// startFake serves f on a loopback port and returns a client of it with the given policy.
func startFake(t *testing.T, f *fake, policy *frontdesk.RetryPolicy) (*frontdesk.Client, context.Context) {
	t.Helper()
	if f.delay == 0 {
		f.delay = 300 * time.Millisecond
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	v1.RegisterConversationServiceServer(srv, f)
	v1.RegisterWorkflowServiceServer(srv, f)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	c, err := frontdesk.Dial(lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.Retry = policy
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c, ctx
}

var fastPolicy = &frontdesk.RetryPolicy{InitialBackoff: 10 * time.Millisecond, MaxBackoff: 20 * time.Millisecond}

func TestRetryErrorDetailsParsed(t *testing.T) {
	f := &fake{startFailures: 10}
	c, ctx := startFake(t, f, nil)
	_, err := c.StartConversation(ctx, "intake", frontdesk.WithStartIdempotencyKey("k1"))
	fe, ok := frontdesk.AsError(err)
	if !ok {
		t.Fatalf("want *frontdesk.Error, got %v", err)
	}
	if fe.Code != codes.Aborted || fe.Reason != "THREAD_BUSY" || fe.Domain != "frontdesk.dev" ||
		fe.Metadata["kind"] != "conversation" {
		t.Fatalf("unexpected error fields: %+v", fe)
	}
	if d, ok := fe.RetryInfo(); !ok || d != 300*time.Millisecond || fe.RetryDelay != d {
		t.Fatalf("RetryInfo = %v, %v", d, ok)
	}
	if !fe.Retryable() {
		t.Fatal("ABORTED should be retryable")
	}
	if len(f.startCalls) != 1 {
		t.Fatalf("retries off: want 1 call, got %d", len(f.startCalls))
	}
}

func TestRetryWaitsServerDelay(t *testing.T) {
	f := &fake{startFailures: 2}
	c, ctx := startFake(t, f, fastPolicy)
	started := time.Now()
	res, err := c.StartConversation(ctx, "intake", frontdesk.WithStartIdempotencyKey("k1"))
	if err != nil {
		t.Fatal(err)
	}
	if res.GetConversation().GetConversationId() != "c1" || len(f.startCalls) != 3 {
		t.Fatalf("want success after 3 calls, got %d", len(f.startCalls))
	}
	for i := 1; i < len(f.startCalls); i++ {
		if gap := f.startCalls[i].Sub(f.startCalls[i-1]); gap < 280*time.Millisecond {
			t.Fatalf("gap %v is shorter than the RetryInfo delay (300ms)", gap)
		}
	}
	if time.Since(started) < 580*time.Millisecond {
		t.Fatal("the retries did not wait the server's delay")
	}
}

func TestRetryBackoffWithoutRetryInfo(t *testing.T) {
	f := &fake{startFailures: 2, delay: -1}
	c, ctx := startFake(t, f, fastPolicy)
	started := time.Now()
	if _, err := c.StartConversation(ctx, "intake", frontdesk.WithStartIdempotencyKey("k1")); err != nil {
		t.Fatal(err)
	}
	if time.Since(started) > 500*time.Millisecond || len(f.startCalls) != 3 {
		t.Fatalf("want 3 quick calls, got %d in %v", len(f.startCalls), time.Since(started))
	}
}

func TestRetryNotForCallsWithoutKey(t *testing.T) {
	f := &fake{startFailures: 1}
	c, ctx := startFake(t, f, fastPolicy)
	_, err := c.StartConversation(ctx, "intake")
	if status.Code(err) != codes.Aborted || len(f.startCalls) != 1 {
		t.Fatalf("want one ABORTED call, got %v after %d calls", err, len(f.startCalls))
	}
}

func TestRetrySwitchedOff(t *testing.T) {
	f := &fake{startFailures: 1}
	c, ctx := startFake(t, f, nil)
	if _, err := c.StartConversation(ctx, "intake", frontdesk.WithStartIdempotencyKey("k1")); err == nil {
		t.Fatal("want the error with retries off")
	}
	if len(f.startCalls) != 1 {
		t.Fatalf("want 1 call, got %d", len(f.startCalls))
	}
}

func TestRetryAttemptsBounded(t *testing.T) {
	f := &fake{startFailures: 10, delay: 10 * time.Millisecond}
	c, ctx := startFake(t, f, &frontdesk.RetryPolicy{MaxAttempts: 3})
	_, err := c.StartConversation(ctx, "intake", frontdesk.WithStartIdempotencyKey("k1"))
	if status.Code(err) != codes.Aborted || len(f.startCalls) != 3 {
		t.Fatalf("want ABORTED after 3 calls, got %v after %d", err, len(f.startCalls))
	}
}

func eventIDs(evs []*v1.RunEvent) []uint64 {
	out := []uint64{}
	for _, ev := range evs {
		out = append(out, ev.GetEventId())
	}
	return out
}

func collectTurn(t *testing.T, turn *frontdesk.Turn) ([]uint64, *v1.TurnResult, error) {
	t.Helper()
	var ids []uint64
	for ev := range turn.Events() {
		ids = append(ids, ev.GetEventId())
	}
	res, err := turn.Result()
	return ids, res, err
}

var allIDs = []uint64{1, 2, 3, 4, 5}

func TestReattachWithSubscribeRun(t *testing.T) {
	f := &fake{breakAfter: 3}
	c, ctx := startFake(t, f, fastPolicy)
	turn := c.SendMessage(ctx, "c1", "hi", frontdesk.WithIdempotencyKey("k1"))
	ids, res, err := collectTurn(t, turn)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ids, allIDs) || !reflect.DeepEqual(eventIDs(turn.Received), allIDs) {
		t.Fatalf("want each event once, got %v", ids)
	}
	// SubscribeRun yields no result: the call is re-issued with its key for the recorded one,
	// and the events it streams again are dropped.
	if res.GetRunId() != fakeRun || !reflect.DeepEqual(f.subscribeCalls, []uint64{3}) || f.sendCalls != 2 {
		t.Fatalf("subscribe calls %v, send calls %d", f.subscribeCalls, f.sendCalls)
	}
	if turn.Reattaches() != 1 || turn.Attempts() != 2 {
		t.Fatalf("reattaches %d, attempts %d", turn.Reattaches(), turn.Attempts())
	}
}

func TestReattachFallsBackToTheCall(t *testing.T) {
	f := &fake{breakAfter: 2, subscribeNotFound: true}
	c, ctx := startFake(t, f, fastPolicy)
	ids, _, err := collectTurn(t, c.SendMessage(ctx, "c1", "hi", frontdesk.WithIdempotencyKey("k1")))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ids, allIDs) || !reflect.DeepEqual(f.subscribeCalls, []uint64{2}) || f.sendCalls != 2 {
		t.Fatalf("ids %v, subscribe calls %v, send calls %d", ids, f.subscribeCalls, f.sendCalls)
	}
}

// The stream broke (its replica died) and SubscribeRun cannot find the run elsewhere; the call
// re-issued with its key is ABORTED THREAD_BUSY with RetryInfo until the run is taken over. Every
// re-issue waits at least that delay and counts against MaxAttempts.
func TestReattachFallbackWaitsTheRetryInfo(t *testing.T) {
	f := &fake{breakAfter: 2, subscribeNotFound: true, busyFor: 300 * time.Millisecond}
	policy := &frontdesk.RetryPolicy{MaxAttempts: 5, InitialBackoff: 10 * time.Millisecond, MaxBackoff: 20 * time.Millisecond}
	c, ctx := startFake(t, f, policy)
	started := time.Now()
	ids, res, err := collectTurn(t, c.SendMessage(ctx, "c1", "hi", frontdesk.WithIdempotencyKey("k1")))
	elapsed := time.Since(started)
	if err != nil {
		t.Fatalf("want the result, got %v after %d send calls, subscribe calls %v", err, f.sendCalls, f.subscribeCalls)
	}
	if res.GetRunId() != fakeRun || !reflect.DeepEqual(ids, allIDs) {
		t.Fatalf("result %v, ids %v", res, ids)
	}
	if elapsed < 300*time.Millisecond {
		t.Fatalf("done after %v: the RetryInfo delay (300ms) was not waited", elapsed)
	}
	if f.sendCalls > policy.MaxAttempts || len(f.busyTimes) == 0 {
		t.Fatalf("send calls %d (MaxAttempts %d), busy answers %d", f.sendCalls, policy.MaxAttempts, len(f.busyTimes))
	}
	for i, at := range f.sendTimes {
		for _, busy := range f.busyTimes {
			if at.After(busy) && at.Sub(busy) < 280*time.Millisecond {
				t.Fatalf("send call %d came %v after a THREAD_BUSY with RetryInfo 300ms", i+1, at.Sub(busy))
			}
		}
	}
}

func TestReattachFallbackCountsAgainstMaxAttempts(t *testing.T) {
	f := &fake{breakAfter: 2, subscribeNotFound: true, busyFor: time.Hour, delay: 20 * time.Millisecond}
	c, ctx := startFake(t, f, &frontdesk.RetryPolicy{MaxAttempts: 3, InitialBackoff: 10 * time.Millisecond})
	_, _, err := collectTurn(t, c.SendMessage(ctx, "c1", "hi", frontdesk.WithIdempotencyKey("k1")))
	if fe, ok := frontdesk.AsError(err); !ok || fe.Code != codes.Aborted || fe.Reason != "THREAD_BUSY" {
		t.Fatalf("want ABORTED THREAD_BUSY, got %v", err)
	}
	if f.sendCalls != 3 {
		t.Fatalf("want 3 send calls (MaxAttempts), got %d (subscribe calls %v)", f.sendCalls, f.subscribeCalls)
	}
}

func TestReattachedRunFailedKeepsReasonAndDomain(t *testing.T) {
	f := &fake{breakAfter: 2, runFails: true}
	c, ctx := startFake(t, f, fastPolicy)
	ids, _, err := collectTurn(t, c.SendMessage(ctx, "c1", "hi", frontdesk.WithIdempotencyKey("k1")))
	fe, ok := frontdesk.AsError(err)
	if !ok || fe.Code != codes.FailedPrecondition || fe.Message != "the conversation has ended" ||
		fe.Reason != "CONVERSATION_ENDED" || fe.Domain != "frontdesk.dev" {
		t.Fatalf("want FAILED_PRECONDITION CONVERSATION_ENDED (domain frontdesk.dev), got %#v", err)
	}
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("status.Code(err) = %v", status.Code(err))
	}
	if !reflect.DeepEqual(ids, allIDs) || !reflect.DeepEqual(f.subscribeCalls, []uint64{2}) || f.sendCalls != 1 {
		t.Fatalf("ids %v, subscribe calls %v, send calls %d", ids, f.subscribeCalls, f.sendCalls)
	}
}

func TestReattachOffReissuesTheCall(t *testing.T) {
	f := &fake{breakAfter: 2}
	c, ctx := startFake(t, f, &frontdesk.RetryPolicy{InitialBackoff: 10 * time.Millisecond, NoReattach: true})
	ids, _, err := collectTurn(t, c.SendMessage(ctx, "c1", "hi", frontdesk.WithIdempotencyKey("k1")))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ids, allIDs) || len(f.subscribeCalls) != 0 || f.sendCalls != 2 {
		t.Fatalf("ids %v, subscribe calls %v, send calls %d", ids, f.subscribeCalls, f.sendCalls)
	}
}

func TestBrokenStreamWithoutKeyFails(t *testing.T) {
	f := &fake{breakAfter: 2}
	c, ctx := startFake(t, f, fastPolicy)
	ids, _, err := collectTurn(t, c.SendMessage(ctx, "c1", "hi"))
	if status.Code(err) != codes.Unavailable || !reflect.DeepEqual(ids, []uint64{1, 2}) {
		t.Fatalf("want UNAVAILABLE after events 1 and 2, got %v after %v", err, ids)
	}
	if f.sendCalls != 1 || len(f.subscribeCalls) != 0 {
		t.Fatalf("send calls %d, subscribe calls %v", f.sendCalls, f.subscribeCalls)
	}
}

func TestBrokenStreamRetriesOffFails(t *testing.T) {
	f := &fake{breakAfter: 2}
	c, ctx := startFake(t, f, nil)
	if _, _, err := collectTurn(t, c.SendMessage(ctx, "c1", "hi", frontdesk.WithIdempotencyKey("k1"))); err == nil {
		t.Fatal("want the error with retries off")
	}
	if f.sendCalls != 1 || len(f.subscribeCalls) != 0 {
		t.Fatalf("send calls %d, subscribe calls %v", f.sendCalls, f.subscribeCalls)
	}
}

func TestStreamEndingWithoutResultFails(t *testing.T) {
	f := &fake{noResult: true}
	c, ctx := startFake(t, f, nil)
	ids, res, err := collectTurn(t, c.SendMessage(ctx, "c1", "hi"))
	fe, ok := frontdesk.AsError(err)
	if !ok || fe.Code != codes.Internal || fe.Message != "SendMessage stream ended without its result" || res != nil {
		t.Fatalf("want INTERNAL for the missing result, got %v (result %v)", err, res)
	}
	// an error the client made itself has a status too
	if st, ok := status.FromError(err); !ok || status.Code(err) != codes.Internal || st.Message() != fe.Message {
		t.Fatalf("status.Code(err) = %v, status.FromError = %v, %v", status.Code(err), st, ok)
	}
	if !reflect.DeepEqual(ids, allIDs) {
		t.Fatalf("want every event before the error, got %v", ids)
	}
}

// triageFake answers TriageTicket with events and a result but no TicketResolution.
type triageFake struct {
	v1.UnimplementedTriageServiceServer
}

func (triageFake) TriageTicket(_ *v1.TriageTicketRequest, stream grpc.ServerStreamingServer[v1.TriageTicketResponse]) error {
	for i := 1; i <= fakeLast; i++ {
		if err := stream.Send(&v1.TriageTicketResponse{Payload: &v1.TriageTicketResponse_Event{Event: fakeEvent(i)}}); err != nil {
			return err
		}
	}
	return stream.Send(&v1.TriageTicketResponse{Payload: &v1.TriageTicketResponse_Result{Result: &v1.TriageResult{}}})
}

func TestTriageWithoutResolutionFailsWithAStatus(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	v1.RegisterTriageServiceServer(srv, triageFake{})
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	c, err := frontdesk.Dial(lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.Retry = nil
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = c.TriageTicket(ctx, "cust-1", "hello")
	fe, ok := frontdesk.AsError(err)
	if !ok || fe.Code != codes.Internal || fe.Message != "TriageTicket stream ended without a TicketResolution" {
		t.Fatalf("want INTERNAL for the missing resolution, got %v", err)
	}
	if status.Code(err) != codes.Internal {
		t.Fatalf("status.Code(err) = %v", status.Code(err))
	}
}

func TestSubscribeRun(t *testing.T) {
	f := &fake{}
	c, ctx := startFake(t, f, frontdesk.DefaultRetryPolicy())
	sub := c.SubscribeRun(ctx, fakeRun, 2)
	var ids []uint64
	for ev := range sub.Events() {
		ids = append(ids, ev.GetEventId())
	}
	if sub.Err() != nil || !reflect.DeepEqual(ids, []uint64{3, 4, 5}) {
		t.Fatalf("got %v, %v", ids, sub.Err())
	}
}

func TestSubscribeRunYieldsNothingAfterItsContextIsCancelled(t *testing.T) {
	f := &fake{}
	c, ctx := startFake(t, f, frontdesk.DefaultRetryPolicy())
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sub := c.SubscribeRun(ctx, fakeRun, 0)
	var ids []uint64
	for ev := range sub.Events() {
		ids = append(ids, ev.GetEventId())
		// the fake sends all five at once: give them time to arrive before cancelling
		time.Sleep(100 * time.Millisecond)
		cancel()
	}
	if e, ok := frontdesk.AsError(sub.Err()); !ok || e.Code != codes.Canceled || !reflect.DeepEqual(ids, []uint64{1}) {
		t.Fatalf("got %v, %v", ids, sub.Err())
	}
}
