package infersim

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
)

// TraceHeader is the header of the Azure LLM inference trace files
// (AzureLLMInferenceTrace_code.csv and _conv.csv).
const TraceHeader = "TIMESTAMP,ContextTokens,GeneratedTokens"

// traceTimeLayout reads the trace's timestamps, e.g.
// "2023-11-16 18:17:03.9799600": seven fractional digits, no zone (read
// as UTC).
const traceTimeLayout = "2006-01-02 15:04:05.999999999"

// maxTraceTokens bounds a row's token counts: far above any model's
// context, low enough that a prompt of that many words stays small.
const maxTraceTokens = 1_000_000

// Request is one row of the trace: a renter's inference request.
type Request struct {
	Service         string        `json:"service"`          // the file it came from: "code" or "conv"
	Line            int           `json:"line"`             // its line in that file
	At              time.Time     `json:"at"`               // the TIMESTAMP
	Offset          time.Duration `json:"offset"`           // At less the first At of the replay, before any speedup
	ContextTokens   int           `json:"context_tokens"`   // prompt tokens
	GeneratedTokens int           `json:"generated_tokens"` // completion tokens
}

// ParseTrace reads one trace file of service (a short name such as "code"
// or "conv"). A row that cannot be read is an *idlegrid.Error naming the
// service, the line and the field.
func ParseTrace(r io.Reader, service string) ([]Request, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1 // checked here, to name the line
	cr.ReuseRecord = true
	head, err := cr.Read()
	if err != nil {
		return nil, traceError(service, 1, "header", "want %q, got %v", TraceHeader, readProblem(err))
	}
	if got := strings.TrimPrefix(strings.Join(head, ","), "\ufeff"); got != TraceHeader {
		return nil, traceError(service, 1, "header", "want %q, got %q", TraceHeader, got)
	}
	var out []Request
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			return nil, traceError(service, pe.Line, "row", "%v", pe.Err)
		} else if err != nil {
			return nil, traceError(service, 0, "row", "%v", err)
		}
		line, _ := cr.FieldPos(0)
		req, err := parseRow(rec, service, line)
		if err != nil {
			return nil, err
		}
		out = append(out, req)
	}
}

func parseRow(rec []string, service string, line int) (Request, error) {
	if len(rec) != 3 {
		return Request{}, traceError(service, line, "row", "want 3 fields (%s), got %d", TraceHeader, len(rec))
	}
	at, err := time.Parse(traceTimeLayout, strings.TrimSpace(rec[0]))
	if err != nil {
		return Request{}, traceError(service, line, "TIMESTAMP", "want a time such as 2023-11-16 18:17:03.9799600, got %q", rec[0])
	}
	req := Request{Service: service, Line: line, At: at}
	if req.ContextTokens, err = parseTokens(rec[1]); err != nil {
		return Request{}, traceError(service, line, "ContextTokens", "%v", err)
	}
	if req.GeneratedTokens, err = parseTokens(rec[2]); err != nil {
		return Request{}, traceError(service, line, "GeneratedTokens", "%v", err)
	}
	return req, nil
}

func parseTokens(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 0 || n > maxTraceTokens {
		return 0, fmt.Errorf("want a whole number of tokens between 0 and %d, got %q", maxTraceTokens, s)
	}
	return n, nil
}

func traceError(service string, line int, field, format string, args ...any) error {
	return idlegrid.Invalid(fmt.Sprintf("trace.%s:%d.%s", service, line, field), format, args...)
}

func readProblem(err error) string {
	if errors.Is(err, io.EOF) {
		return "an empty file"
	}
	return err.Error()
}

// Slice picks the part of a trace to replay.
type Slice struct {
	// Start skips this much of the trace, from its first request.
	Start time.Duration
	// Duration, when set, keeps the requests that arrive within it after
	// Start.
	Duration time.Duration
	// Requests, when set, keeps at most this many, the earliest first.
	Requests int
}

// Merge interleaves traces by arrival (rows at the same instant keep the
// order of traces, then of lines), cuts s out of them, and sets each
// request's Offset from the first request kept. Every trace is cut over
// the same span of time, measured from the earliest request of any.
func Merge(s Slice, traces ...[]Request) []Request {
	var all []Request
	for _, t := range traces {
		all = append(all, t...)
	}
	slices.SortStableFunc(all, func(a, b Request) int { return a.At.Compare(b.At) })
	if len(all) == 0 {
		return nil
	}
	from := all[0].At.Add(s.Start)
	var out []Request
	for _, r := range all {
		if r.At.Before(from) {
			continue
		}
		if s.Duration > 0 && !r.At.Before(from.Add(s.Duration)) {
			break
		}
		if s.Requests > 0 && len(out) == s.Requests {
			break
		}
		out = append(out, r)
	}
	for i := range out {
		out[i].Offset = out[i].At.Sub(out[0].At)
	}
	return out
}
