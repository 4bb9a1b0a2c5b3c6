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
// else a new slice. Lines end in \n, \r\n or \r, as server-sent events
// allow; an event whose blank line is a \r at the end of p waits for the
// next byte, which may make it \r\n.
func (d *UsageDropper) Pass(p []byte) []byte {
	if len(d.held) == 0 && !d.passing && endsEvents(p) {
		return p // whole events, none usage-only: the most common piece
	}
	var out []byte
	for len(p) > 0 {
		if d.passing {
			end := eventEnd(p, 0, false)
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
			end := eventEnd(d.held, from, false)
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

// Rest returns, at the stream's end, the event it began and never ended,
// or whose last \r waited for a \n, unless that one is usage-only.
func (d *UsageDropper) Rest() []byte {
	rest := d.held
	d.held = nil
	if len(rest) <= maxLine && eventEnd(rest, 0, true) == len(rest) && usageOnly(rest) {
		return nil
	}
	return rest
}

// endsEvents reports whether p is whole events, none of them usage-only.
func endsEvents(p []byte) bool {
	for len(p) > 0 {
		end := eventEnd(p, 0, false)
		if end < 0 || end <= maxLine && usageOnly(p[:end]) {
			return false
		}
		p = p[end:]
	}
	return true
}

// EventEnd returns the index just past the blank line that ends the first
// event of b, a stream's bytes, or -1 when none ends in b; lines end in
// \n, \r\n or \r, as server-sent events allow. A \r that ends b ends a
// line only when final (the stream has ended).
func EventEnd(b []byte, final bool) int { return eventEnd(b, 0, final) }

// eventEnd returns the index just past the blank line that ends the first
// event in b, looking for its line ends from from on, or -1 when b holds
// no such line. A \r that ends b ends a line only when final (the stream
// has ended): otherwise a \n may follow, making the two one line end.
func eventEnd(b []byte, from int, final bool) int {
	for i := from; i < len(b); {
		j := lineBreak(b[i:])
		if j < 0 {
			return -1
		}
		k := lineEnd(b, i+j, final) // past the line end
		if k < 0 {
			return -1
		}
		switch blank := lineEnd(b, k, final); {
		case blank == -1:
			return -1
		case blank > k: // a line end right after one: the blank line
			return blank
		}
		i = k
	}
	return -1
}

// lineBreak returns the index of the first \r or \n in b, or -1.
func lineBreak(b []byte) int {
	n := bytes.IndexByte(b, '\n')
	if n < 0 {
		return bytes.IndexByte(b, '\r')
	}
	if r := bytes.IndexByte(b[:n], '\r'); r >= 0 {
		return r
	}
	return n
}

// lineEnd returns the index past the line end (\n, \r\n or \r) at b[i],
// i itself when there is none there, or -1 when b ends in a \r at i that
// a \n might follow, unless final.
func lineEnd(b []byte, i int, final bool) int {
	switch {
	case i >= len(b):
		if final {
			return i
		}
		return -1
	case b[i] == '\n':
		return i + 1
	case b[i] != '\r':
		return i
	case i+1 < len(b):
		if b[i+1] == '\n' {
			return i + 2
		}
		return i + 1
	case final:
		return i + 1
	}
	return -1
}

var (
	usageKey      = []byte(`"usage"`)
	unicodeEscape = []byte(`\u`)
)

// usageOnly reports whether ev, one event, is data with a usage object
// and an empty choices array: a JSON object in which a key "usage" holds
// an object and every key "choices" (at least one) an empty array, keys
// read as a JSON decoder reads them, escapes and all.
func usageOnly(ev []byte) bool {
	if !bytes.Contains(ev, usageKey) && !bytes.Contains(ev, unicodeEscape) { // most events, at a glance
		return false
	}
	payload := eventData(ev)
	usage, choices, kept := false, false, false
	gjson.ParseBytes(payload).ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "usage":
			usage = usage || v.IsObject()
		case "choices":
			choices = true
			kept = kept || !v.IsArray() || !emptyArray(v)
		}
		return true
	})
	return usage && choices && !kept && gjson.ValidBytes(payload)
}

// emptyArray reports whether the array v has no elements.
func emptyArray(v gjson.Result) bool {
	empty := true
	v.ForEach(func(_, _ gjson.Result) bool { empty = false; return false })
	return empty
}

// eventData is the data of ev, one event: its data lines' payloads,
// joined by \n as server-sent events join them.
func eventData(ev []byte) []byte {
	payload, joined := []byte(nil), false
	for len(ev) > 0 {
		n := lineBreak(ev)
		if n < 0 {
			n = len(ev)
		}
		p, ok := bytes.CutPrefix(ev[:n], dataPrefix)
		ev = ev[lineEnd(ev, n, true):]
		switch {
		case !ok:
		case payload == nil:
			payload = bytes.TrimSpace(p)
		default: // a payload on several lines
			if !joined {
				payload, joined = bytes.Clone(payload), true
			}
			payload = append(append(payload, '\n'), bytes.TrimSpace(p)...)
		}
	}
	return payload
}
