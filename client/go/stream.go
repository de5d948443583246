package frontdesk

import (
	"context"
	"errors"
	"io"
	"iter"
)

// callStream is the receiving side that Turn, Triage, Investigating and Researching share: it
// receives a streamed call's responses (of type R) one at a time, hands out the items a caller
// ranges over (of type *T), and ends with the call's result or the error that ended the
// stream. The call types differ only in what a response carries, which sort tells. recv is a
// runSource's Recv, which returns io.EOF only after the call's result (a stream that ends
// without it fails there, with INTERNAL).
type callStream[R, T any] struct {
	ctx    context.Context
	cancel context.CancelFunc
	recv   func() (*R, error)
	// sort records what one response carries and returns the item it hands out (nil for
	// none) and whether it carried the call's result.
	sort func(*R) (item *T, result bool)

	pending  []*T
	finished bool // the result arrived
	err      error
	done     bool
}

// receive receives one response: the item it carries, or nil when it carried none, or when
// the stream has ended (done, with err set on failure).
func (s *callStream[R, T]) receive() *T {
	if s.done {
		return nil
	}
	if err := contextError(s.ctx); err != nil {
		// cancelled: deliver nothing more, even what had already arrived
		s.done = true
		s.err = err
		return nil
	}
	res, err := s.recv()
	if err != nil {
		s.done = true
		s.cancel()
		if !errors.Is(err, io.EOF) {
			s.err = wrapError(err)
		}
		return nil
	}
	item, result := s.sort(res)
	if result {
		s.finished = true
	}
	return item
}

// until receives, holding the items for next, until ready is true (then true) or the stream
// has ended (then false, with err set on failure).
func (s *callStream[R, T]) until(ready func() bool) bool {
	for !ready() {
		if item := s.receive(); item != nil {
			s.pending = append(s.pending, item)
		} else if s.done {
			return false
		}
	}
	return true
}

// first receives until the first item or the call's result has arrived, holding the item for
// next, so that a call the server refuses fails with its error before anything is handed out;
// it returns that error.
func (s *callStream[R, T]) first() error {
	s.until(func() bool { return len(s.pending) > 0 || s.finished })
	return s.err
}

// next returns the next item; nil when the stream has ended.
func (s *callStream[R, T]) next() *T {
	if len(s.pending) > 0 {
		item := s.pending[0]
		s.pending = s.pending[1:]
		return item
	}
	for !s.done {
		if item := s.receive(); item != nil {
			return item
		}
	}
	return nil
}

// items yields the items as they arrive, until the stream ends. Stopping the loop early
// leaves the rest for drain (or cancel) to deal with.
func (s *callStream[R, T]) items() iter.Seq[*T] {
	return func(yield func(*T) bool) {
		for item := s.next(); item != nil; item = s.next() {
			if !yield(item) {
				return
			}
		}
	}
}

// drain receives the items not yet received and returns the error that ended the stream (a
// *Error), nil when it ended with the call's result.
func (s *callStream[R, T]) drain() error {
	for s.next() != nil {
	}
	return s.err
}
