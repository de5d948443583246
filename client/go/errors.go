package frontdesk

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// errorDomain is the google.rpc.ErrorInfo domain of Frontdesk's errors.
const errorDomain = "frontdesk.dev"

// FieldViolation is one google.rpc.BadRequest field violation: which request field, and why.
type FieldViolation struct {
	Field       string
	Description string
}

// Error is a failed Frontdesk call: the gRPC status with its google.rpc details (sent in the
// grpc-status-details-bin trailer) decoded. Every method of Client returns errors of this
// type for failed calls; use errors.As, or AsError.
type Error struct {
	// Code is the gRPC status code.
	Code codes.Code
	// Message is the status message.
	Message string
	// Reason is the stable google.rpc.ErrorInfo reason, such as "NOT_FOUND",
	// "INVALID_ARGUMENT", "THREAD_BUSY", "WRONG_RESPONDER", "CONVERSATION_ENDED" (a message to a
	// service call that was hung up; ReasonConversationEnded) or the API key refusals
	// ReasonUnauthenticated, ReasonScopeMissing and ReasonQuotaExceeded: a
	// frontdeskv1.ErrorReason name without its ERROR_REASON_ prefix; empty when the server sent
	// none.
	Reason string
	// Domain is the ErrorInfo domain ("frontdesk.dev").
	Domain string
	// Metadata is the ErrorInfo metadata, such as the "scope" a key lacks or the "quota" a
	// tenant is over.
	Metadata map[string]string
	// FieldViolations are the google.rpc.BadRequest violations of an INVALID_ARGUMENT.
	FieldViolations []FieldViolation
	// RetryDelay is the google.rpc.RetryInfo delay: how long to wait before retrying, sent where
	// retrying helps (such as ABORTED THREAD_BUSY, with the time left on another replica's
	// lease, UNAVAILABLE MODEL_UNAVAILABLE, or RESOURCE_EXHAUSTED QUOTA_EXCEEDED); 0 when the
	// server sent none (see RetryInfo).
	RetryDelay time.Duration

	hasRetryDelay bool
	status        *status.Status
}

// RetryInfo returns the server's RetryInfo delay, and whether the error carried one.
func (e *Error) RetryInfo() (time.Duration, bool) { return e.RetryDelay, e.hasRetryDelay }

// Retryable reports whether a call with an idempotency key is retried on this error: its code
// is UNAVAILABLE or ABORTED (RetryableCode).
func (e *Error) Retryable() bool { return RetryableCode(e.Code) }

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "frontdesk: %s: %s", e.Code, e.Message)
	if e.Reason != "" {
		fmt.Fprintf(&b, " (reason %s)", e.Reason)
	}
	if e.hasRetryDelay {
		fmt.Fprintf(&b, " (retry after %s)", e.RetryDelay)
	}
	for _, v := range e.FieldViolations {
		fmt.Fprintf(&b, "; %s: %s", v.Field, v.Description)
	}
	return b.String()
}

// GRPCStatus lets status.FromError and status.Code see the error's status: the server's, or
// for an error the client reports itself, one with its code, message and ErrorInfo.
func (e *Error) GRPCStatus() *status.Status { return e.status }

// newError is an error the client reports itself (a stream that ended without its result, a run
// that failed as its RunFailed event says): a *Error with a status of its own, so GRPCStatus,
// status.Code and status.FromError see its code, and with a google.rpc.ErrorInfo of reason
// (domain frontdesk.dev) when reason is not empty, as the server would send it. An error never
// has code OK: that (a RunFailed without a code) becomes Unknown.
func newError(code codes.Code, message, reason string) *Error {
	if code == codes.OK {
		code = codes.Unknown
	}
	st := status.New(code, message)
	if reason != "" {
		if withInfo, err := st.WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: errorDomain}); err == nil {
			st = withInfo
		}
	}
	fe := wrapError(st.Err()).(*Error)
	if reason != "" {
		fe.Reason, fe.Domain = reason, errorDomain
	}
	return fe
}

// AsError reports whether err is (or wraps) a *Error, and returns it.
func AsError(err error) (*Error, bool) {
	var fe *Error
	ok := errors.As(err, &fe)
	return fe, ok
}

// contextError is the *Error (CANCELLED or DEADLINE_EXCEEDED) of a call whose ctx is done, or
// nil while it is not.
func contextError(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return wrapError(status.FromContextError(err).Err())
	}
	return nil
}

// wrapError turns a gRPC error into *Error; nil stays nil.
func wrapError(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := AsError(err); ok {
		return err
	}
	st, ok := status.FromError(err)
	if !ok {
		st = status.FromContextError(err)
	}
	fe := &Error{Code: st.Code(), Message: st.Message(), status: st}
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			fe.Reason = d.GetReason()
			fe.Domain = d.GetDomain()
			fe.Metadata = d.GetMetadata()
		case *errdetails.RetryInfo:
			fe.RetryDelay = max(0, d.GetRetryDelay().AsDuration())
			fe.hasRetryDelay = true
		case *errdetails.BadRequest:
			for _, v := range d.GetFieldViolations() {
				fe.FieldViolations = append(fe.FieldViolations, FieldViolation{
					Field: v.GetField(), Description: v.GetDescription(),
				})
			}
		}
	}
	return fe
}
