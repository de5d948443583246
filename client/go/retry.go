package frontdesk

import (
	"context"
	"errors"
	"io"
	"iter"
	"math/rand/v2"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	v1 "github.com/frontdesk/frontdesk/client/go/frontdeskv1"
)

// RetryPolicy says how a Client retries calls that carry an idempotency key, on UNAVAILABLE
// and ABORTED, and re-attaches their broken streams; WatchInvestigation watches again under it
// after UNAVAILABLE. Zero fields take the defaults
// (DefaultRetryPolicy); set Client.Retry to nil to turn retries and re-attaching off.
type RetryPolicy struct {
	// MaxAttempts is the most times one call is made, the first included (a stream also
	// re-attaches at most this many times; a watch is made at most this many times in a row
	// without an entry between). Default 5.
	MaxAttempts int
	// MaxWait is the most time one call spends waiting between attempts, all waits together
	// (for a watch, those since its last entry). Default 30s.
	MaxWait time.Duration
	// InitialBackoff and MaxBackoff make the wait when the server's error carries no RetryInfo
	// delay: InitialBackoff doubling with each attempt up to MaxBackoff, each wait a random
	// 50-100% of that (jitter). Defaults 250ms and 5s.
	InitialBackoff time.Duration
	MaxBackoff     time.Duration
	// NoReattach re-issues the call (after the wait for its error, as any retry) when its stream
	// breaks, instead of re-attaching to the run with WorkflowService/SubscribeRun first.
	NoReattach bool
}

// DefaultRetryPolicy is the policy Dial and New set: 5 attempts, 30s of waiting at most,
// backoff from 250ms to 5s, re-attaching with SubscribeRun.
func DefaultRetryPolicy() *RetryPolicy {
	return &RetryPolicy{MaxAttempts: 5, MaxWait: 30 * time.Second, InitialBackoff: 250 * time.Millisecond, MaxBackoff: 5 * time.Second}
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	d := DefaultRetryPolicy()
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = d.MaxAttempts
	}
	if p.MaxWait <= 0 {
		p.MaxWait = d.MaxWait
	}
	if p.InitialBackoff <= 0 {
		p.InitialBackoff = d.InitialBackoff
	}
	if p.MaxBackoff <= 0 {
		p.MaxBackoff = d.MaxBackoff
	}
	return p
}

// RetryableCode reports whether a call with an idempotency key is retried on code:
// UNAVAILABLE (the server, the model, the store or a dependency is unavailable; the connection
// broke) and ABORTED (THREAD_BUSY, CHECKPOINT_CONFLICT).
func RetryableCode(code codes.Code) bool {
	return code == codes.Unavailable || code == codes.Aborted
}

// budget is one call's attempts and waits so far, against its policy and its context.
type budget struct {
	policy     *RetryPolicy // nil: not retried
	calls      int
	reattaches int
	waited     time.Duration
}

func newBudget(p *RetryPolicy) budget {
	if p == nil {
		return budget{calls: 1}
	}
	q := p.withDefaults()
	return budget{policy: &q, calls: 1}
}

// delay is the wait before calling again after err; false when err is final.
func (b *budget) delay(ctx context.Context, err *Error) (time.Duration, bool) {
	p := b.policy
	if p == nil || !RetryableCode(err.Code) || b.calls >= p.MaxAttempts || ctx.Err() != nil {
		return 0, false
	}
	wait, ok := err.RetryInfo()
	if !ok {
		ceiling := p.InitialBackoff << min(b.calls-1, 30)
		if ceiling > p.MaxBackoff || ceiling <= 0 {
			ceiling = p.MaxBackoff
		}
		wait = time.Duration(float64(ceiling) * (0.5 + rand.Float64()/2))
	}
	if b.waited+wait > p.MaxWait {
		return 0, false
	}
	if deadline, ok := ctx.Deadline(); ok && time.Now().Add(wait).After(deadline) {
		return 0, false
	}
	return wait, true
}

func (b *budget) canReattach() bool {
	return b.policy != nil && !b.policy.NoReattach && b.reattaches < b.policy.MaxAttempts
}

// sleep waits d, or until ctx is done (then its error, as a *Error).
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return contextError(ctx)
	}
}

// retryUnary makes one unary call, retried per policy (nil: once) within ctx.
func retryUnary[T any](ctx context.Context, policy *RetryPolicy, call func(context.Context) (T, error)) (T, error) {
	b := newBudget(policy)
	for {
		res, err := call(ctx)
		if err == nil {
			return res, nil
		}
		fe, _ := AsError(wrapError(err))
		wait, ok := b.delay(ctx, fe)
		if !ok {
			var zero T
			return zero, fe
		}
		b.calls++
		b.waited += wait
		if err := sleep(ctx, wait); err != nil {
			var zero T
			return zero, fe
		}
	}
}

// policyFor is the client's policy for a call with idempotency key key: nil without one.
func (c *Client) policyFor(key string) *RetryPolicy {
	if key == "" {
		return nil
	}
	return c.Retry
}

// StreamStats counts what a streamed call took: its attempts, its re-attaches and the events
// the server no longer held when it re-attached.
type StreamStats struct {
	attempts   int
	reattaches int
	skipped    uint64
}

// Attempts is how many times the call was made (1 unless it was retried or its result
// fetched again after re-attaching).
func (s *StreamStats) Attempts() int { return s.attempts }

// Reattaches is how many times the stream re-attached to its run with SubscribeRun.
func (s *StreamStats) Reattaches() int { return s.reattaches }

// SkippedEvents counts the events the server no longer held when the stream re-attached
// (SubscribeRunResponse.skipped; 0 normally).
func (s *StreamStats) SkippedEvents() uint64 { return s.skipped }

// itemKind is what a response of a streamed call carries, as the re-attaching machinery sees
// it.
type itemKind int

const (
	itemOther      itemKind = iota // nothing known: handed on as is
	itemEvent                      // a RunEvent
	itemResult                     // the call's result, its last message
	itemResolution                 // a triage's TicketResolution (delivered once)
	itemDerived                    // produced by the event before it (a message, a plan, ...)
)

type eventKey struct {
	run string
	id  uint64
}

type stamp struct {
	seconds int64
	nanos   int32
}

// runSource receives the responses of one streamed call that runs a workflow: with a policy,
// it retries the call and re-attaches a broken stream (SubscribeRun from the last event
// delivered, then the call again with its idempotency key for the result, which the server
// replays), handing each event on once. Events are told apart by (run id, event id) and the
// event's time: event ids number one execution of a run, so an id seen again with another
// time belongs to a later execution (resumed after a crash, or by another replica).
type runSource[R any] struct {
	ctx       context.Context
	what      string
	open      func(context.Context) (grpc.ServerStreamingClient[R], error)
	classify  func(*R) (itemKind, *v1.RunEvent)
	wrapEvent func(*v1.RunEvent) *R
	workflows v1.WorkflowServiceClient
	stats     *StreamStats

	b           budget
	cancelCur   context.CancelFunc
	call        grpc.ServerStreamingClient[R]
	sub         grpc.ServerStreamingClient[v1.SubscribeRunResponse]
	subscribing bool
	seen        map[eventKey]stamp
	ended       map[string]*v1.RunEvent
	lastDup     bool
	resolved    bool
	haveResult  bool
	// cause is the failure that took the stream from the call to SubscribeRun (the call's error,
	// or its ending without its result): what a fallback to the call waits on, or raises.
	cause   *Error
	runID   string
	eventID uint64
	err     error
}

func newRunSource[R any](
	ctx context.Context, c *Client, what, key string,
	open func(context.Context) (grpc.ServerStreamingClient[R], error),
	classify func(*R) (itemKind, *v1.RunEvent),
	wrapEvent func(*v1.RunEvent) *R,
	stats *StreamStats,
) *runSource[R] {
	s := &runSource[R]{
		ctx: ctx, what: what, open: open, classify: classify, wrapEvent: wrapEvent,
		workflows: c.Workflows, stats: stats, b: newBudget(c.policyFor(key)),
		seen: map[eventKey]stamp{}, ended: map[string]*v1.RunEvent{},
	}
	s.sync()
	return s
}

func (s *runSource[R]) sync() {
	s.stats.attempts = s.b.calls
	s.stats.reattaches = s.b.reattaches
}

// fresh reports whether the caller has not seen ev yet, and records it.
func (s *runSource[R]) fresh(ev *v1.RunEvent) bool {
	key := eventKey{ev.GetRunId(), ev.GetEventId()}
	st := stamp{ev.GetTime().GetSeconds(), ev.GetTime().GetNanos()}
	prior, ok := s.seen[key]
	if ok && prior == st {
		s.lastDup = true
		return false
	}
	if ok {
		// A new execution of the run: its events count again from 1.
		for k := range s.seen {
			if k.run == key.run {
				delete(s.seen, k)
			}
		}
		delete(s.ended, key.run)
	}
	s.seen[key] = st
	s.lastDup = false
	s.runID, s.eventID = key.run, key.id
	switch ev.GetKind().(type) {
	case *v1.RunEvent_RunFinished, *v1.RunEvent_RunFailed, *v1.RunEvent_RunInterrupted:
		s.ended[key.run] = ev
	}
	return true
}

func (s *runSource[R]) openRun() bool {
	_, ended := s.ended[s.runID]
	return s.runID != "" && !ended
}

// plan is what to do next: call again after wait, subscribe, or fail with err.
type plan struct {
	action string // "call", "subscribe", "raise"
	wait   time.Duration
	err    error
}

func (s *runSource[R]) again(wait time.Duration) plan {
	s.subscribing = false
	s.b.calls++
	s.b.waited += wait
	return plan{action: "call", wait: wait}
}

// reattach switches to SubscribeRun at once, because of cause.
func (s *runSource[R]) reattach(cause *Error) plan {
	s.subscribing = true
	s.b.reattaches++
	s.cause = cause
	return plan{action: "subscribe"}
}

// retry re-issues the call after the wait err asks for (its RetryInfo, else the backoff),
// counted against MaxAttempts, or raises err when it is final.
func (s *runSource[R]) retry(err *Error) plan {
	if wait, ok := s.b.delay(s.ctx, err); ok {
		return s.again(wait)
	}
	return plan{action: "raise", err: err}
}

// fallBack re-issues the call when SubscribeRun could not follow the run (subErr: NOT_FOUND,
// another replica has it or this one forgot it; UNAVAILABLE, it is down; nil: it ended before the
// run's last event, with no re-attach left); with its key the call attaches or replays. It waits
// what the failure that left the call asks for (its RetryInfo, else the backoff), or subErr's
// RetryInfo when that is longer, and counts against MaxAttempts; else it raises that failure.
func (s *runSource[R]) fallBack(subErr *Error) plan {
	asked := s.cause
	if !RetryableCode(asked.Code) {
		// the call's stream ended without its result: broken, like UNAVAILABLE
		asked = newError(codes.Unavailable, asked.Message, "")
	}
	if subErr != nil && RetryableCode(subErr.Code) {
		if d, ok := subErr.RetryInfo(); ok {
			if prior, ok := asked.RetryInfo(); !ok || d > prior {
				asked = subErr
			}
		}
	}
	if wait, ok := s.b.delay(s.ctx, asked); ok {
		return s.again(wait)
	}
	return plan{action: "raise", err: s.cause}
}

func (s *runSource[R]) failed(fe *Error) plan {
	if s.subscribing {
		return s.fallBack(fe)
	}
	if s.b.policy == nil || s.ctx.Err() != nil {
		return plan{action: "raise", err: fe}
	}
	if RetryableCode(fe.Code) && s.openRun() && s.b.canReattach() {
		return s.reattach(fe)
	}
	return s.retry(fe)
}

func (s *runSource[R]) endedWithout() plan {
	if s.subscribing {
		if s.openRun() {
			// ended before the run's last event: re-attach again, or fall back to the call
			if s.b.canReattach() {
				return s.reattach(s.cause)
			}
			return s.fallBack(nil)
		}
		if f := s.ended[s.runID].GetRunFailed(); f != nil {
			return s.retry(newError(codes.Code(f.GetCode()), f.GetMessage(), f.GetReason()))
		}
		// The run ended: the call with its key replays the recorded outcome, at once (nothing
		// failed), as one of the MaxAttempts calls.
		if s.b.calls >= s.b.policy.MaxAttempts {
			return plan{action: "raise", err: s.cause}
		}
		return s.again(0)
	}
	fe := newError(codes.Internal, s.what+" stream ended without its result", "")
	if s.b.policy == nil {
		return plan{action: "raise", err: fe}
	}
	if s.openRun() && s.b.canReattach() {
		return s.reattach(fe)
	}
	if wait, ok := s.b.delay(s.ctx, newError(codes.Unavailable, fe.Message, "")); ok {
		return s.again(wait)
	}
	return plan{action: "raise", err: fe}
}

// follow carries out p: opens the next source, or fails.
func (s *runSource[R]) follow(p plan) error {
	s.sync()
	if p.action == "raise" {
		return p.err
	}
	if err := sleep(s.ctx, p.wait); err != nil {
		return err
	}
	return s.start(p.action == "subscribe")
}

// start opens the call (or SubscribeRun) on a context of its own, closing the previous one.
func (s *runSource[R]) start(subscribe bool) error {
	if s.cancelCur != nil {
		s.cancelCur()
	}
	ctx, cancel := context.WithCancel(s.ctx)
	s.cancelCur = cancel
	s.call, s.sub = nil, nil
	var err error
	if subscribe {
		s.sub, err = s.workflows.SubscribeRun(ctx, &v1.SubscribeRunRequest{RunId: s.runID, AfterEventId: s.eventID})
	} else {
		s.call, err = s.open(ctx)
	}
	if err != nil {
		fe, _ := AsError(wrapError(err))
		return s.follow(s.failed(fe))
	}
	return nil
}

// Recv returns the next response for the caller: io.EOF after the result, else the error
// (a *Error) that ended the call.
func (s *runSource[R]) Recv() (*R, error) {
	var zero *R
	if s.err != nil {
		return zero, s.err
	}
	if s.call == nil && s.sub == nil {
		if err := s.start(false); err != nil {
			return zero, s.fail(err)
		}
	}
	for {
		if s.subscribing {
			res, err := s.sub.Recv()
			if err == nil {
				s.stats.skipped += res.GetSkipped()
				if ev := res.GetEvent(); ev != nil && s.fresh(ev) {
					return s.wrapEvent(ev), nil
				}
				continue
			}
			if err = s.next(err); err != nil {
				return zero, s.fail(err)
			}
			continue
		}
		res, err := s.call.Recv()
		if err != nil {
			if s.haveResult {
				return zero, s.fail(io.EOF) // broken after the result: nothing is missing
			}
			if err = s.next(err); err != nil {
				return zero, s.fail(err)
			}
			continue
		}
		kind, ev := s.classify(res)
		switch kind {
		case itemEvent:
			if !s.fresh(ev) {
				continue
			}
		case itemResult:
			s.haveResult = true
		case itemResolution:
			if s.resolved {
				continue
			}
			s.resolved = true
		case itemDerived:
			if s.lastDup {
				continue
			}
		}
		return res, nil
	}
}

// next handles the end (io.EOF) or failure of the current source: nil when another is open.
func (s *runSource[R]) next(err error) error {
	if errors.Is(err, io.EOF) {
		return s.follow(s.endedWithout())
	}
	fe, _ := AsError(wrapError(err))
	if s.ctx.Err() != nil {
		return fe
	}
	return s.follow(s.failed(fe))
}

func (s *runSource[R]) fail(err error) error {
	s.err = err
	s.sync()
	if s.cancelCur != nil {
		s.cancelCur()
	}
	return err
}

// Subscription is one SubscribeRun call: range over Events for the run's events after the id
// given, then its live ones; it ends after the run's last event (RunFinished, RunFailed or
// RunInterrupted). Err tells how it ended. Never retried.
type Subscription struct {
	ctx    context.Context
	stream grpc.ServerStreamingClient[v1.SubscribeRunResponse]
	cancel context.CancelFunc
	err    error
	// Skipped counts the events the server no longer held between the id asked for and the
	// next event (0 normally).
	Skipped uint64
	// Received holds every event received so far, in order.
	Received []*v1.RunEvent
}

// SubscribeRun re-attaches to a run by hand: its events numbered after afterEventID (0: from
// the first), then its live ones, ending after the run's last event. Only RunEvents, not the
// call's typed result: retry the original call with its idempotency key for that. A run the
// server does not know (ended too long ago, or running on another replica) ends with a
// NOT_FOUND *Error (from Err). Streams with an idempotency key re-attach on their own.
func (c *Client) SubscribeRun(ctx context.Context, runID string, afterEventID uint64) *Subscription {
	ctx, cancel := context.WithCancel(ctx)
	s := &Subscription{ctx: ctx, cancel: cancel}
	var err error
	s.stream, err = c.Workflows.SubscribeRun(ctx, &v1.SubscribeRunRequest{RunId: runID, AfterEventId: afterEventID})
	if err != nil {
		s.err = wrapError(err)
		cancel()
	}
	return s
}

// Events yields the run's events as they arrive; then Err tells how the stream ended. Once ctx
// is cancelled it yields nothing more, even events that had already arrived, and Err is
// CANCELLED.
func (s *Subscription) Events() iter.Seq[*v1.RunEvent] {
	return func(yield func(*v1.RunEvent) bool) {
		for s.stream != nil && s.err == nil {
			if err := contextError(s.ctx); err != nil {
				// grpc-go may still hand out a message it had buffered; as for a run's stream,
				// a cancelled call delivers nothing more.
				s.cancel()
				s.stream = nil
				s.err = err
				return
			}
			res, err := s.stream.Recv()
			if err != nil {
				s.cancel()
				s.stream = nil
				if !errors.Is(err, io.EOF) {
					s.err = wrapError(err)
				}
				return
			}
			s.Skipped += res.GetSkipped()
			if res.GetEvent() == nil {
				continue
			}
			s.Received = append(s.Received, res.GetEvent())
			if !yield(res.GetEvent()) {
				return
			}
		}
	}
}

// Err is the error that ended the stream (a *Error), nil when it ended after the run's last
// event.
func (s *Subscription) Err() error { return s.err }

// Cancel stops the call.
func (s *Subscription) Cancel() { s.cancel() }
