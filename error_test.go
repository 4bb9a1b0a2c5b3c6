package idlegrid_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
)

func TestError_Error(t *testing.T) {
	tests := []struct {
		err  *idlegrid.Error
		want string
	}{
		{idlegrid.Invalid("job.gpus", "must be between 1 and %d", 16), "job.gpus: must be between 1 and 16"},
		{idlegrid.Errorf(idlegrid.ENOTFOUND, "job %s not found", "job_x"), "job job_x not found"},
		{&idlegrid.Error{Code: idlegrid.ECONFLICT}, ""},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}

func TestInvalid(t *testing.T) {
	err := idlegrid.Invalid("job.tier", "must be gold, silver or bronze, got %q", "platinum")
	if err.Code != idlegrid.EINVALID || err.Field != "job.tier" || err.Message != `must be gold, silver or bronze, got "platinum"` {
		t.Errorf("got %+v", err)
	}
}

func TestErrorCode(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, ""},
		{"domain error", idlegrid.Errorf(idlegrid.EPAYMENT, "balance too low"), idlegrid.EPAYMENT},
		{"wrapped domain error", fmt.Errorf("placing: %w", idlegrid.Errorf(idlegrid.ECONFLICT, "moved on")), idlegrid.ECONFLICT},
		{"joined", errors.Join(errors.New("x"), idlegrid.Invalid("a", "b")), idlegrid.EINVALID},
		{"plain error is internal", errors.New("disk on fire"), idlegrid.EINTERNAL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := idlegrid.ErrorCode(tt.err); got != tt.want {
				t.Errorf("ErrorCode = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestErrorMessage(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, ""},
		{"field and message", idlegrid.Invalid("job.image", "required"), "job.image: required"},
		{"wrapped keeps only the safe part", fmt.Errorf("db said no: %w", idlegrid.Errorf(idlegrid.ENOTFOUND, "no such job")), "no such job"},
		{"internal details never leak", errors.New("pq: password authentication failed for user root"), "internal error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := idlegrid.ErrorMessage(tt.err); got != tt.want {
				t.Errorf("ErrorMessage = %q, want %q", got, tt.want)
			}
		})
	}
}

// wantField checks that err is EINVALID naming field.
func wantField(tb testing.TB, err error, field string) {
	tb.Helper()
	var e *idlegrid.Error
	if !errors.As(err, &e) {
		tb.Fatalf("got %v (%T), want *idlegrid.Error on %s", err, err, field)
	}
	if e.Code != idlegrid.EINVALID || e.Field != field {
		tb.Fatalf("got code %q field %q (%v), want %q on %q", e.Code, e.Field, e, idlegrid.EINVALID, field)
	}
	if e.Message == "" {
		tb.Fatalf("error on %s has no message", field)
	}
	if len(e.More) > 0 {
		tb.Fatalf("got %d more problems besides %s: %v", len(e.More), field, e)
	}
}

// fieldsAtFault is the fields err names, in order, comma-separated; it
// fails the test when err is not an *idlegrid.Error.
func fieldsAtFault(tb testing.TB, err error) string {
	tb.Helper()
	var e *idlegrid.Error
	if !errors.As(err, &e) {
		tb.Fatalf("got %v (%T), want *idlegrid.Error", err, err)
	}
	var fields []string
	for _, p := range e.All() {
		fields = append(fields, p.Field)
	}
	return strings.Join(fields, ",")
}

// An error marked to be sent again says when in whole seconds, at least
// one; the error marked is left as it was, and others say nothing.
func TestRetryAfter(t *testing.T) {
	base := idlegrid.Errorf(idlegrid.ETOOMANY, "slow down")
	for _, c := range []struct {
		err  error
		want string
	}{
		{idlegrid.WithRetryAfter(base, 2500*time.Millisecond), "3"},
		{idlegrid.WithRetryAfter(base, time.Millisecond), "1"},
		{fmt.Errorf("wrapped: %w", idlegrid.WithRetryAfter(base, 2*time.Second)), "2"},
		{base, ""},
		{idlegrid.WithRetryAfter(errors.New("not ours"), time.Second), ""},
	} {
		if got := idlegrid.RetryAfterSeconds(c.err); got != c.want {
			t.Errorf("RetryAfterSeconds(%v) = %q, want %q", c.err, got, c.want)
		}
	}
	if base.RetryAfter != 0 {
		t.Errorf("WithRetryAfter changed the error it marked: %s", base.RetryAfter)
	}
}

// TestWrap: an error's cause is for the server's log: errors.Is finds it,
// but neither its text nor its message shows it, nor does a copy lose it.
func TestWrap(t *testing.T) {
	cause := errors.New("dial tcp 10.0.0.5:5432: connect: connection refused")
	err := idlegrid.Wrap(cause, idlegrid.EUNAVAILABLE, "the database is unavailable; try again shortly")
	if got, want := err.Error(), "the database is unavailable; try again shortly"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if got := idlegrid.ErrorMessage(err); strings.Contains(got, "refused") {
		t.Errorf("ErrorMessage = %q shows the cause", got)
	}
	if !errors.Is(err, cause) || !errors.Is(idlegrid.WithRetryAfter(err, time.Second), cause) {
		t.Error("the cause is lost")
	}
	if idlegrid.Errorf(idlegrid.EINTERNAL, "x").Unwrap() != nil {
		t.Error("Errorf has a cause")
	}
}

// TestOrList: allowed values as an error message lists them.
func TestOrList(t *testing.T) {
	for _, tc := range []struct {
		in   []idlegrid.Tier
		want string
	}{
		{nil, ""},
		{[]idlegrid.Tier{idlegrid.TierGold}, "gold"},
		{[]idlegrid.Tier{idlegrid.TierGold, idlegrid.TierSilver}, "gold or silver"},
		{[]idlegrid.Tier{idlegrid.TierGold, idlegrid.TierSilver, idlegrid.TierBronze}, "gold, silver or bronze"},
	} {
		if got := idlegrid.OrList(tc.in); got != tc.want {
			t.Errorf("OrList(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
