package frontdesk_test

// WatchInvestigation watching again after UNAVAILABLE, against an in-process fake
// InvestigationService whose watches end as each test scripts them.

import (
	"context"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	frontdesk "github.com/frontdesk/frontdesk/client/go"
	v1 "github.com/frontdesk/frontdesk/client/go/frontdeskv1"
)

const watchLast = 5 // the fake's trail: seqs 1..5, the last the advisory report's status change

type watchFake struct {
	v1.UnimplementedInvestigationServiceServer

	// cuts ends that many watches after cutAfter entries (counted from after_seq) with cut.
	cuts     int
	cutAfter int
	cut      error
	// stuckAt ends every watch with cut before it sends this seq (0: never), as a server that
	// keeps failing.
	stuckAt uint32
	// overlap makes every watch after the first start that many entries at or below its
	// after_seq, as a server whose trail read raced the cut might.
	overlap uint32

	mu     sync.Mutex
	asked  []uint32 // each call's after_seq
	called []time.Time
}

func (f *watchFake) WatchInvestigation(req *v1.WatchInvestigationRequest, stream grpc.ServerStreamingServer[v1.WatchInvestigationResponse]) error {
	f.mu.Lock()
	f.asked = append(f.asked, req.GetAfterSeq())
	f.called = append(f.called, time.Now())
	n := len(f.asked)
	f.mu.Unlock()
	from := req.GetAfterSeq() + 1
	if n > 1 {
		from -= min(f.overlap, req.GetAfterSeq())
	}
	sent := 0
	for seq := from; seq <= watchLast; seq++ {
		if (n <= f.cuts && sent == f.cutAfter) || (f.stuckAt != 0 && seq >= f.stuckAt) {
			return f.cut
		}
		entry := &v1.AuditEntry{Seq: seq, InvestigationId: "INV-1"}
		if seq == watchLast {
			entry.Entry = &v1.AuditEntry_StatusChange{StatusChange: &v1.StatusChange{
				To: v1.InvestigationStatus_INVESTIGATION_STATUS_ADVISORY_REPORT_GENERATED,
			}}
		}
		if err := stream.Send(&v1.WatchInvestigationResponse{Entry: entry}); err != nil {
			return err
		}
		sent++
	}
	return nil
}

func startWatchFake(t *testing.T, f *watchFake, policy *frontdesk.RetryPolicy) (*frontdesk.Client, context.Context) {
	t.Helper()
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
	c.Retry = policy
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c, ctx
}

func watchAll(c *frontdesk.Client, ctx context.Context, afterSeq uint32) ([]uint32, error) {
	seqs := []uint32{}
	for e, err := range c.WatchInvestigation(ctx, "INV-1", afterSeq) {
		if err != nil {
			return seqs, err
		}
		seqs = append(seqs, e.GetSeq())
	}
	return seqs, nil
}

var shuttingDown = scriptedError(codes.Unavailable, "SHUTTING_DOWN", 200*time.Millisecond)

func TestWatchResumesFromTheLastSeqAfterShuttingDown(t *testing.T) {
	f := &watchFake{cuts: 1, cutAfter: 2, cut: shuttingDown}
	c, ctx := startWatchFake(t, f, fastPolicy)
	started := time.Now()
	seqs, err := watchAll(c, ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(seqs, []uint32{1, 2, 3, 4, 5}) || !slices.Equal(f.asked, []uint32{0, 2}) {
		t.Fatalf("got seqs %v from watches after %v; want 1..5 from watches after [0 2]", seqs, f.asked)
	}
	if gap := f.called[1].Sub(f.called[0]); gap < 190*time.Millisecond {
		t.Fatalf("watched again after %v, before the RetryInfo delay (200ms)", gap)
	}
	if took := time.Since(started); took > 2*time.Second {
		t.Fatalf("took %v", took)
	}
}

func TestWatchDeliversNoEntryTwiceWhenTheServerRepeatsOne(t *testing.T) {
	f := &watchFake{cuts: 1, cutAfter: 2, cut: scriptedError(codes.Unavailable, "SHUTTING_DOWN", 10*time.Millisecond), overlap: 2}
	c, ctx := startWatchFake(t, f, fastPolicy)
	seqs, err := watchAll(c, ctx, 0)
	if err != nil || !slices.Equal(seqs, []uint32{1, 2, 3, 4, 5}) {
		t.Fatalf("got %v, %v from watches after %v", seqs, err, f.asked)
	}
}

func TestWatchResumesFromAfterSeqWhenCutBeforeAnyEntry(t *testing.T) {
	f := &watchFake{cuts: 1, cutAfter: 0, cut: shuttingDown}
	c, ctx := startWatchFake(t, f, fastPolicy)
	seqs, err := watchAll(c, ctx, 3)
	if err != nil || !slices.Equal(seqs, []uint32{4, 5}) || !slices.Equal(f.asked, []uint32{3, 3}) {
		t.Fatalf("got %v, %v from watches after %v", seqs, err, f.asked)
	}
}

func TestWatchResumesAfterABrokenConnectionWithTheBackoff(t *testing.T) {
	// UNAVAILABLE without RetryInfo, as a broken connection reads: the policy's backoff.
	f := &watchFake{cuts: 2, cutAfter: 1, cut: status.Error(codes.Unavailable, "connection reset")}
	c, ctx := startWatchFake(t, f, fastPolicy)
	started := time.Now()
	seqs, err := watchAll(c, ctx, 0)
	if err != nil || !slices.Equal(seqs, []uint32{1, 2, 3, 4, 5}) || !slices.Equal(f.asked, []uint32{0, 1, 2}) {
		t.Fatalf("got %v, %v from watches after %v", seqs, err, f.asked)
	}
	if took := time.Since(started); took > 500*time.Millisecond {
		t.Fatalf("took %v with a 10-20ms backoff", took)
	}
}

// The same cut resumes under the policy and surfaces with it off.
func TestWatchWithRetriesOffSurfacesShuttingDown(t *testing.T) {
	for _, policy := range []*frontdesk.RetryPolicy{fastPolicy, nil} {
		f := &watchFake{cuts: 1, cutAfter: 2, cut: shuttingDown}
		c, ctx := startWatchFake(t, f, policy)
		seqs, err := watchAll(c, ctx, 0)
		if policy != nil {
			if err != nil || !slices.Equal(seqs, []uint32{1, 2, 3, 4, 5}) || len(f.asked) != 2 {
				t.Fatalf("with the policy: got %v, %v after %d watches; want 1..5 after 2", seqs, err, len(f.asked))
			}
			continue
		}
		fe, ok := frontdesk.AsError(err)
		if !ok || fe.Code != codes.Unavailable || fe.Reason != "SHUTTING_DOWN" ||
			!slices.Equal(seqs, []uint32{1, 2}) || len(f.asked) != 1 {
			t.Fatalf("retries off: got %v, %v after %d watches; want 1, 2 then UNAVAILABLE SHUTTING_DOWN after one", seqs, err, len(f.asked))
		}
	}
}

// Only UNAVAILABLE resumes: ABORTED, retried for keyed calls, is no reason to watch again.
func TestWatchSurfacesOtherErrors(t *testing.T) {
	for _, code := range []codes.Code{codes.Unavailable, codes.Internal, codes.Aborted, codes.NotFound} {
		f := &watchFake{cuts: 1, cutAfter: 2, cut: scriptedError(code, "SCRIPTED", 10*time.Millisecond)}
		c, ctx := startWatchFake(t, f, fastPolicy)
		seqs, err := watchAll(c, ctx, 0)
		if code == codes.Unavailable {
			if err != nil || !slices.Equal(seqs, []uint32{1, 2, 3, 4, 5}) || len(f.asked) != 2 {
				t.Fatalf("%v: got %v, %v after %d watches; want 1..5 after 2", code, seqs, err, len(f.asked))
			}
			continue
		}
		if status.Code(err) != code || !slices.Equal(seqs, []uint32{1, 2}) || len(f.asked) != 1 {
			t.Fatalf("%v: got %v, %v after %d watches; want 1, 2 then the error after one", code, seqs, err, len(f.asked))
		}
	}
}

// Each entry starts the budget afresh: a watch outlives many restarts, each well within it.
func TestWatchBudgetStartsAfreshAfterEachEntry(t *testing.T) {
	f := &watchFake{cuts: 4, cutAfter: 1, cut: scriptedError(codes.Unavailable, "SHUTTING_DOWN", 10*time.Millisecond)}
	c, ctx := startWatchFake(t, f, &frontdesk.RetryPolicy{MaxAttempts: 2})
	seqs, err := watchAll(c, ctx, 0)
	if err != nil || !slices.Equal(seqs, []uint32{1, 2, 3, 4, 5}) || !slices.Equal(f.asked, []uint32{0, 1, 2, 3, 4}) {
		t.Fatalf("got %v, %v from watches after %v; want 1..5 from watches after [0 1 2 3 4]", seqs, err, f.asked)
	}
}

func TestWatchWaitStartsAfreshAfterEachEntry(t *testing.T) {
	f := &watchFake{cuts: 4, cutAfter: 1, cut: scriptedError(codes.Unavailable, "SHUTTING_DOWN", 100*time.Millisecond)}
	c, ctx := startWatchFake(t, f, &frontdesk.RetryPolicy{MaxWait: 150 * time.Millisecond})
	seqs, err := watchAll(c, ctx, 0)
	if err != nil || !slices.Equal(seqs, []uint32{1, 2, 3, 4, 5}) || len(f.asked) != 5 {
		t.Fatalf("got %v, %v after %d watches; want 1..5 after 5 (each 100ms wait after an entry)", seqs, err, len(f.asked))
	}
}

// Failures in a row, with no entry between them, are bounded: counted from the last entry.
func TestWatchResumesWithinMaxAttempts(t *testing.T) {
	f := &watchFake{cuts: 2, cutAfter: 1, stuckAt: 4, cut: scriptedError(codes.Unavailable, "SHUTTING_DOWN", 10*time.Millisecond)}
	c, ctx := startWatchFake(t, f, &frontdesk.RetryPolicy{MaxAttempts: 3})
	seqs, err := watchAll(c, ctx, 0)
	if status.Code(err) != codes.Unavailable || !slices.Equal(seqs, []uint32{1, 2, 3}) || !slices.Equal(f.asked, []uint32{0, 1, 2, 3, 3}) {
		t.Fatalf("got %v, %v from watches after %v; want 1..3 then UNAVAILABLE from watches after [0 1 2 3 3]", seqs, err, f.asked)
	}
}

func TestWatchResumesWithinMaxWait(t *testing.T) {
	f := &watchFake{cuts: 1, cutAfter: 1, stuckAt: 3, cut: shuttingDown}
	c, ctx := startWatchFake(t, f, &frontdesk.RetryPolicy{MaxWait: 300 * time.Millisecond})
	seqs, err := watchAll(c, ctx, 0)
	if status.Code(err) != codes.Unavailable || !slices.Equal(seqs, []uint32{1, 2}) || !slices.Equal(f.asked, []uint32{0, 1, 2}) {
		t.Fatalf("got %v, %v from watches after %v; want 1, 2 then UNAVAILABLE from watches after [0 1 2] (one 200ms wait after each entry fits in 300ms, two in a row do not)", seqs, err, f.asked)
	}
}
