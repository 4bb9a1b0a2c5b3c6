package openai

import (
	"bytes"

	"github.com/tidwall/gjson"
)

// ResponseEvents passes a Responses API stream on with each event that
// carries the response object (response.created, .in_progress, .queued,
// and the last: .completed, .incomplete or .failed) echoed as the gateway
// answers it (Echo), and holds the last one back (TakeFinal), so that the
// gateway keeps the response before the renter reads its end and may
// continue from it. Events pass whole, as they end: the bytes of one not
// yet ended wait for its end. One that outgrows MaxEvent passes as it
// comes, unechoed, and so does the rest of the stream: what cannot be
// read cannot be kept.
type ResponseEvents struct {
	// Echoed is what each response object is echoed with (Echo). When
	// it says Background, the provider's response.created is dropped
	// too: the gateway's own, with the response queued, began the stream.
	Echoed
	MaxEvent int // 0: 64 MiB

	held     []byte // the event begun and not yet ended
	passing  bool   // an event outgrew MaxEvent: the rest passes as it comes
	ended    bool   // the last event came
	final    []byte // the last event, echoed, and any after it, held back
	response []byte // its response object
}

// Pass returns what of p, the next bytes of the stream, goes on now.
func (f *ResponseEvents) Pass(p []byte) []byte {
	if f.passing {
		return f.then(nil, p)
	}
	var out []byte
	from := max(len(f.held)-2, 0) // an event's end may straddle the pieces
	f.held = append(f.held, p...)
	start := 0 // of the first event not passed
	for {
		end := eventEnd(f.held[start:], from, false)
		if end < 0 || end > f.maxEvent() { // one too long passes as it came, with the rest
			break
		}
		out = f.event(out, f.held[start:start+end])
		start, from = start+end, 0
	}
	f.held = f.held[:copy(f.held, f.held[start:])]
	if len(f.held) > f.maxEvent() {
		out = f.then(out, f.held)
		f.held, f.passing = nil, true
	}
	return out
}

// then appends b, the stream's next bytes, to out, or behind the last
// event while that is held back, so that the stream keeps its order.
func (f *ResponseEvents) then(out, b []byte) []byte {
	if f.final != nil {
		f.final = append(f.final, b...)
		return out
	}
	return append(out, b...)
}

// Rest returns, at the stream's end, the event it began and never ended,
// echoed when it is one to echo (held back when it is the last).
func (f *ResponseEvents) Rest() []byte {
	rest := f.held
	f.held = nil
	if len(rest) == 0 || f.passing {
		return f.then(nil, rest)
	}
	return f.event(nil, rest)
}

// TakeFinal returns, once, the stream's last event, echoed, with any
// events after it, and its response object; nil until the stream has
// sent it.
func (f *ResponseEvents) TakeFinal() (events, response []byte) {
	events, response = f.final, f.response
	f.final, f.response = nil, nil
	return events, response
}

func (f *ResponseEvents) maxEvent() int {
	if f.MaxEvent > 0 {
		return f.MaxEvent
	}
	return 64 << 20
}

// lifecycle are the events that carry the response object, each with
// whether it is a last one.
var lifecycle = map[string]bool{
	"response.created": false, "response.in_progress": false, "response.queued": false,
	"response.completed": true, "response.incomplete": true, "response.failed": true,
}

// event appends ev to out, echoed when it carries the response object;
// a last event is held back instead.
func (f *ResponseEvents) event(out, ev []byte) []byte {
	if f.final != nil {
		return f.then(out, ev)
	}
	payload := eventData(ev)
	last, ok := lifecycle[gjson.GetBytes(payload, "type").Str]
	obj := gjson.GetBytes(payload, "response")
	if f.ended || !ok || !obj.IsObject() {
		return append(out, ev...)
	}
	if f.Background && gjson.GetBytes(payload, "type").Str == "response.created" {
		return out // the gateway's own, the response queued, came first
	}
	echoed, err := Echo([]byte(obj.Raw), f.Echoed)
	if err == nil {
		payload, err = SetField(payload, "response", echoed)
	}
	if err != nil {
		return append(out, ev...)
	}
	ev = withData(ev, payload)
	if last {
		f.final, f.response, f.ended = ev, echoed, true
		return out
	}
	return append(out, ev...)
}

// withData returns ev, one event, with its data lines replaced by one
// carrying payload, where the first of them was; its other lines (event:,
// id:) and its line ends are kept.
func withData(ev, payload []byte) []byte {
	out := make([]byte, 0, len(ev)+len(payload))
	done := false
	for len(ev) > 0 {
		n := lineBreak(ev)
		if n < 0 {
			n = len(ev)
		}
		end := lineEnd(ev, n, true)
		line, brk := ev[:n], ev[n:end]
		ev = ev[end:]
		switch {
		case !bytes.HasPrefix(line, dataPrefix):
			out = append(append(out, line...), brk...)
		case !done:
			out = append(append(append(append(out, dataPrefix...), ' '), payload...), brk...)
			done = true
		}
	}
	return out
}
