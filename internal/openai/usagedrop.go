package openai

import (
	"bytes"

	"github.com/tidwall/gjson"
)

// UsageDropper passes a stream of server-sent events on without its
// usage-only events (an empty choices array and a usage): the gateway asks
// every model server for one, to meter the stream, but OpenAI sends it
// only to a renter who asked (stream_options.include_usage), and a client
// that reads choices[0] of every event, as OpenAI's own examples do, fails
// on it. Events pass whole, as they end: the bytes of one not yet ended
// wait for its end. One longer than maxLine is not judged, and once it
// outgrows that its bytes pass as they come (and should its end straddle
// two pieces, the event after it passes unjudged too).
type UsageDropper struct {
	held    []byte // the event begun and not yet ended
	passing bool   // the event begun outgrew maxLine: its bytes pass as they come
}

// Pass returns what of p, the next bytes of the stream, goes on now: the
// events p ends, but the usage-only ones, and nothing of one it leaves
// unended: p itself when it is whole events none of which is dropped,
// else a new slice. Lines end in \n or \r\n, as every model server's do
// (a stream whose lines end in \r alone would wait here to its end).
func (d *UsageDropper) Pass(p []byte) []byte {
	if len(d.held) == 0 && !d.passing && endsEvents(p) {
		return p // whole events, none usage-only: the most common piece
	}
	var out []byte
	for len(p) > 0 {
		if d.passing {
			end := eventEnd(p, 0)
			if end < 0 {
				return append(out, p...)
			}
			out = append(out, p[:end]...)
			p, d.passing = p[end:], false
			continue
		}
		from := max(len(d.held)-2, 0) // an event's end may straddle the pieces
		d.held = append(d.held, p...)
		p = nil
		for {
			end := eventEnd(d.held, from)
			if end < 0 {
				break
			}
			if ev := d.held[:end]; len(ev) > maxLine || !usageOnly(ev) {
				out = append(out, ev...)
			}
			d.held = d.held[:copy(d.held, d.held[end:])]
			from = 0
		}
		if len(d.held) > maxLine {
			out = append(out, d.held...)
			d.held, d.passing = d.held[:0], true
		}
	}
	return out
}

// Rest returns the event the stream began and never ended, at its end.
func (d *UsageDropper) Rest() []byte {
	rest := d.held
	d.held = nil
	return rest
}

// endsEvents reports whether p is whole events, none of them usage-only.
func endsEvents(p []byte) bool {
	for len(p) > 0 {
		end := eventEnd(p, 0)
		if end < 0 || end <= maxLine && usageOnly(p[:end]) {
			return false
		}
		p = p[end:]
	}
	return true
}

// eventEnd returns the index just past the blank line that ends the first
// event in b, looking for its line ends from from on, or -1 when b holds
// no such line.
func eventEnd(b []byte, from int) int {
	for i := from; i < len(b); {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			return -1
		}
		k := i + j + 1 // the next line
		switch {
		case k < len(b) && b[k] == '\n':
			return k + 1
		case k+1 < len(b) && b[k] == '\r' && b[k+1] == '\n':
			return k + 2
		}
		i = k
	}
	return -1
}

var usageKey = []byte(`"usage"`)

// usageOnly reports whether ev, one event, is data with a usage object
// and an empty choices array. A key spelt with escapes is not seen, and
// its event passes.
func usageOnly(ev []byte) bool {
	if !bytes.Contains(ev, usageKey) { // most events, at a glance
		return false
	}
	payload, joined := []byte(nil), false
	for line := range bytes.Lines(ev) {
		p, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r\n"), dataPrefix)
		switch {
		case !ok:
		case payload == nil:
			payload = bytes.TrimSpace(p)
		default: // a payload on several lines, joined as SSE joins them
			if !joined {
				payload, joined = bytes.Clone(payload), true
			}
			payload = append(append(payload, '\n'), bytes.TrimSpace(p)...)
		}
	}
	if !gjson.GetBytes(payload, "usage").IsObject() { // most events: no usage, or null
		return false
	}
	choices := gjson.GetBytes(payload, "choices")
	empty := choices.IsArray()
	choices.ForEach(func(_, _ gjson.Result) bool { empty = false; return false })
	return empty && gjson.ValidBytes(payload)
}
