package idlegrid

import (
	"errors"
	"fmt"
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
}

func (e *Error) Error() string {
	if e.Field != "" {
		return e.Field + ": " + e.Message
	}
	return e.Message
}

// Errorf returns an *Error with the given code.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Invalid returns an EINVALID error naming the field and the reason,
// e.g. Invalid("job.gpus", "must be between 1 and 16").
func Invalid(field, format string, args ...any) *Error {
	return &Error{Code: EINVALID, Field: field, Message: fmt.Sprintf(format, args...)}
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
