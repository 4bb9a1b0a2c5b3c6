package idlegrid

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Error codes. Exactly one table, in internal/httpapi, maps them to HTTP
// statuses; nothing else should.
const (
	EINVALID      = "invalid"      // the caller sent something malformed
	ENOTFOUND     = "not_found"    // no such object, or the caller may not see it
	EUNAUTHORIZED = "unauthorized" // no or bad credentials
	EFORBIDDEN    = "forbidden"    // authenticated but not allowed
	ECONFLICT     = "conflict"     // the object is not in a state that allows this
	EPAYMENT      = "payment"      // not enough balance
	ETOOLARGE     = "too_large"    // the request body is over the limit
	EUNAVAILABLE  = "unavailable"  // try again later
	ETOOMANY      = "too_many"     // over a rate or concurrency limit; slow down
	EINTERNAL     = "internal"     // a bug or an infrastructure failure
)

// Error is the one error type of idlegrid. Message is safe to show to the
// caller; internal errors never carry details outward.
type Error struct {
	Code    string
	Field   string // the input field at fault, e.g. "job.gpus", when known
	Message string
	// More are the other problems found in the same input, each naming
	// its own field, so that a caller can mend them all at once (see
	// Problems).
	More []*Error
	// RetryAfter, when set, is how long the caller should wait before
	// sending the request again (a rate limit, a busy market); the API
	// says it in Retry-After.
	RetryAfter time.Duration
	// cause is the failure underneath, e.g. the driver's "connection
	// refused", for the server's log only: Error and Message never show
	// it, so nothing of it reaches a caller. Set by Wrap, read by Unwrap.
	cause error
}

// Wrap returns an *Error with the given code and caller-safe message that
// keeps cause for the server's log (Unwrap), e.g. an adapter's translation
// of a driver error: Wrap(err, EUNAVAILABLE, "database unavailable").
func Wrap(cause error, code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), cause: cause}
}

// Unwrap is the cause Wrap kept, or nil: what the server logs beside the
// caller-safe message, and what errors.Is and errors.As look into.
func (e *Error) Unwrap() error { return e.cause }

// Error is the problem's text, "field: message", followed by the others'
// joined with "; ".
func (e *Error) Error() string {
	s := e.one()
	for _, m := range e.More {
		s += "; " + m.one()
	}
	return s
}

func (e *Error) one() string {
	if e.Field != "" {
		return e.Field + ": " + e.Message
	}
	return e.Message
}

// All lists e and the problems in More, each alone.
func (e *Error) All() []*Error {
	first := *e
	first.More = nil
	return append([]*Error{&first}, e.More...)
}

// Problems returns nil for no problems, or the first carrying the others
// in More: a check that finds several reports them all in one error.
func Problems(ps []*Error) error {
	if len(ps) == 0 {
		return nil
	}
	first := *ps[0]
	first.More = ps[1:]
	return &first
}

// Errorf returns an *Error with the given code.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// OrList names values as an error message lists those allowed: "a, b
// or c".
func OrList[T ~string](values []T) string {
	names := make([]string, len(values))
	for i, v := range values {
		names[i] = string(v)
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// Invalid returns an EINVALID error naming the field and the reason,
// e.g. Invalid("job.gpus", "must be between 1 and 16").
func Invalid(field, format string, args ...any) *Error {
	return &Error{Code: EINVALID, Field: field, Message: fmt.Sprintf(format, args...)}
}

// WithRetryAfter returns err, an *Error, marked as worth sending again
// after d (a copy: err is left as it was); any other error unchanged.
func WithRetryAfter(err error, d time.Duration) error {
	var e *Error
	if !errors.As(err, &e) {
		return err
	}
	c := *e
	c.RetryAfter = d
	return &c
}

// RetryAfterSeconds is err's RetryAfter in whole seconds, at least one, as
// an HTTP Retry-After header says it; "" when err says none.
func RetryAfterSeconds(err error) string {
	var e *Error
	if !errors.As(err, &e) || e.RetryAfter <= 0 {
		return ""
	}
	return strconv.Itoa(int(math.Ceil(max(e.RetryAfter, time.Second).Seconds())))
}

// ErrorCode returns the code of err, EINTERNAL for errors that are not *Error,
// and "" for nil.
func ErrorCode(err error) string {
	var e *Error
	if err == nil {
		return ""
	} else if errors.As(err, &e) {
		return e.Code
	}
	return EINTERNAL
}

// FieldPlacementAttempt is the Field of the ECONFLICT a store answers a
// placement whose job moved on (Store.PlaceJob).
const FieldPlacementAttempt = "placement.attempt"

// JobMovedOn reports whether err is a store's refusal of a placement
// because its job moved on: cancelled, say, while the placement was
// decided. Nothing else the placement read was wrong.
func JobMovedOn(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == ECONFLICT && e.Field == FieldPlacementAttempt
}

// ErrorMessage returns the caller-safe message of err. Errors that are not
// *Error are internal and get a generic message.
func ErrorMessage(err error) string {
	var e *Error
	if err == nil {
		return ""
	} else if errors.As(err, &e) {
		return e.Error()
	}
	return "internal error"
}

// Faults collects what is wrong with one input, each fault with its field,
// to be reported together (Err). A field is named once: a later fault on a
// field already at fault is dropped.
type Faults []*Error

// Add records that field is invalid, and why.
func (f *Faults) Add(field, format string, args ...any) {
	f.add(Invalid(field, format, args...))
}

// Check records that field is invalid, and why, unless ok.
func (f *Faults) Check(ok bool, field, format string, args ...any) {
	if !ok {
		f.Add(field, format, args...)
	}
}

// Also records the faults err reports, when it is not nil: a part of the
// input checked on its own (a schedule, an ask).
func (f *Faults) Also(err error) {
	var e *Error
	switch {
	case err == nil:
	case errors.As(err, &e):
		for _, p := range e.All() {
			f.add(p)
		}
	default:
		f.add(Invalid("", "%v", err))
	}
}

func (f *Faults) add(e *Error) {
	for _, x := range *f {
		if x.Field == e.Field && e.Field != "" {
			return
		}
	}
	*f = append(*f, e)
}

// Err is nil for no faults, or the first carrying the others (Problems).
func (f Faults) Err() error { return Problems(f) }
