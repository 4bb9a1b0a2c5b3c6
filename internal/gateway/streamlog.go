package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/tidwall/gjson"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/openai"
)

// A streamed background response's events are kept in a streamLog while
// its run goes on, and for streamRetention after it ends, on the server
// that runs it. The renter who started it follows the log from its first
// event; any request may resume it from an event on (GET
// /v1/responses/{id}?stream=true&starting_after=N). Followers read the
// log each in its own handler, so a renter who reads slowly, or not at
// all, never holds the run up.

// streamRetention is how long a streamed background response's events
// stay to be resumed after its run ends.
const streamRetention = 5 * time.Minute

// streamLog is one streamed background response's events, in order.
type streamLog struct {
	max int // bytes it keeps at most: past them it lets its followers go

	mu      sync.Mutex
	events  []loggedEvent
	size    int
	part    []byte        // an event begun and not yet ended
	over    bool          // it grew past max and keeps nothing more
	ended   bool          // the run ended: no event comes after
	endedAt time.Time     // when, by the gateway's clock (for streamRetention)
	changed chan struct{} // closed, and replaced, at each change
}

// loggedEvent is one event, whole, with its sequence number (that of the
// event before, for one without).
type loggedEvent struct {
	seq int64
	b   []byte
}

func newStreamLog(max int) *streamLog {
	return &streamLog{max: max, changed: make(chan struct{})}
}

// append adds the events of p, the next bytes of the stream; an event
// that p leaves unended waits for the rest.
func (l *streamLog) append(p []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.over || l.ended {
		return
	}
	l.part = append(l.part, p...)
	l.take(false)
	if l.size+len(l.part) > l.max {
		l.over, l.events, l.part = true, nil, nil
	}
	l.wake()
}

// take moves the whole events at the start of l.part into l.events; when
// final, the stream has ended, and what is left of it is its last event.
func (l *streamLog) take(final bool) {
	for len(l.part) > 0 {
		end := openai.EventEnd(l.part, final)
		if end < 0 && !final {
			return
		} else if end < 0 {
			end = len(l.part)
		}
		ev := bytes.Clone(l.part[:end])
		l.part = l.part[end:]
		l.events = append(l.events, loggedEvent{seq: l.seqOf(ev), b: ev})
		l.size += len(ev)
	}
}

// seqOf is ev's sequence number, or the last event's when it has none.
func (l *streamLog) seqOf(ev []byte) int64 {
	if n := gjson.GetBytes(dataOf(ev), "sequence_number"); n.Exists() {
		return n.Int()
	}
	if len(l.events) == 0 {
		return 0
	}
	return l.events[len(l.events)-1].seq
}

// dataOf is the value of ev's first data line.
func dataOf(ev []byte) []byte {
	for len(ev) > 0 {
		line := ev
		if i := bytes.IndexAny(ev, "\r\n"); i >= 0 {
			line, ev = ev[:i], ev[i+1:]
		} else {
			ev = nil
		}
		if data, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			return data
		}
	}
	return nil
}

// end marks the run ended, now, what is left of the stream its last
// event; followers write what is left and stop.
func (l *streamLog) end(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.over {
		l.take(true)
	}
	l.ended, l.endedAt = true, now
	l.wake()
}

// wake tells the followers of a change, with l.mu held.
func (l *streamLog) wake() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// answered reports whether any event came after the first (the gateway's
// own, the response queued).
func (l *streamLog) answered() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.events) > 1 || l.over
}

// from returns the events from index i on, and whether the log ended
// (or grew too long) after them, or else a channel closed at its next
// change.
func (l *streamLog) from(i int) (events []loggedEvent, done bool, changed <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.over {
		return nil, true, nil
	}
	if i < len(l.events) {
		events = l.events[i:]
	}
	return events, l.ended, l.changed
}

// follow writes to w the events numbered above after, as they come,
// until the log ends, the renter goes (ctx), or a write of theirs does
// not go within stall.
func (l *streamLog) follow(ctx context.Context, w http.ResponseWriter, after int64, stall time.Duration) {
	rc := http.NewResponseController(w)
	defer rc.SetWriteDeadline(time.Time{}) // the connection's next request starts without it
	for i := 0; ; {
		events, done, changed := l.from(i)
		i += len(events)
		wrote := false
		for _, ev := range events {
			if ev.seq <= after {
				continue
			}
			rc.SetWriteDeadline(time.Now().Add(stall))
			if _, err := w.Write(ev.b); err != nil {
				return
			}
			wrote = true
		}
		if wrote && rc.Flush() != nil {
			return
		}
		if done {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

// streamLogs are the logs of the streamed background responses of this
// server, by response ID: those running, and those that ended within
// streamRetention, each forgotten by a timer of its own then.
type streamLogs struct {
	mu     sync.Mutex
	logs   map[string]*streamLog
	timers map[string]*time.Timer
	closed bool
}

// add keeps log as response id's, until it ends and then
// streamRetention; none once closed.
func (s *streamLogs) add(id string, log *streamLog) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	if s.logs == nil {
		s.logs, s.timers = map[string]*streamLog{}, map[string]*time.Timer{}
	}
	s.logs[id] = log
}

// ended forgets response id's log streamRetention from now.
func (s *streamLogs) ended(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.logs[id] == nil {
		return
	}
	s.timers[id] = time.AfterFunc(streamRetention, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.logs, id)
		delete(s.timers, id)
	})
}

// find returns response id's log, unless there is none, or it ended over
// streamRetention ago by now, or grew too long to keep.
func (s *streamLogs) find(id string, now time.Time) *streamLog {
	s.mu.Lock()
	l := s.logs[id]
	s.mu.Unlock()
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.over || (l.ended && now.Sub(l.endedAt) > streamRetention) {
		return nil
	}
	return l
}

// held is how many logs there are, and the bytes of their events.
func (s *streamLogs) held() (logs, size int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.logs {
		l.mu.Lock()
		size += l.size + len(l.part)
		l.mu.Unlock()
	}
	return len(s.logs), size
}

// close stops the timers and forgets every log.
func (s *streamLogs) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.timers {
		t.Stop()
	}
	s.logs, s.timers, s.closed = nil, nil, true
}

// endStream ends log, a streamed background response's (nil: not
// streamed), once its run has ended. A run none of whose answer came (no
// provider had room, the model server refused it, it was cancelled while
// it waited) ends it with one event saying how it ended.
func (x *exchange) endStream(log *streamLog) {
	if log == nil {
		return
	}
	if !log.answered() {
		if obj := x.endedAs(); obj != nil {
			log.append(responseEvent("response."+gjson.GetBytes(obj, "status").Str, 1, obj))
		}
	}
	log.end(x.g.cfg.Clock.Now())
	x.g.streams.ended(x.kept.id)
}

// endedAs is x's background response as its run ended: as the run stored
// it last, or, for a run that lost it, as the store has it now; nil when
// that is not known to be done.
func (x *exchange) endedAs() json.RawMessage {
	k := x.kept
	k.mu.Lock()
	obj, lost := k.stored, k.lost
	k.mu.Unlock()
	if lost {
		ctx, cancel := context.WithTimeout(context.Background(), keepTimeout)
		defer cancel()
		kr, err := x.g.cfg.Store.FindResponse(ctx, x.caller.AccountID, k.id, x.g.cfg.Clock.Now())
		if err != nil {
			return nil
		}
		obj = kr.Response
	}
	if unfinished(obj) {
		return nil
	}
	return obj
}

// openStream answers a stream of events, its header sent at once: the
// renter's client returns its stream before any event comes.
func openStream(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	http.NewResponseController(w).Flush()
}

// responseEvent is one event of a Responses API stream carrying the
// response object obj.
func responseEvent(event string, seq int, obj []byte) []byte {
	data, _ := openai.SetField([]byte(`{"type":"","sequence_number":0}`), "type", []byte(strconv.Quote(event)))
	data, _ = openai.SetField(data, "sequence_number", strconv.AppendInt(nil, int64(seq), 10))
	data, _ = openai.SetField(data, "response", obj)
	return fmt.Appendf(nil, "event: %s\ndata: %s\n\n", event, data)
}

// resume answers GET /v1/responses/{id}?stream=true: the events of the
// caller's streamed background response numbered above starting_after
// (all of them without it), then the rest as they come, from this
// server's log of them.
func (g *Gateway) resume(w http.ResponseWriter, r *http.Request, c *apiKey, q url.Values) error {
	after := int64(-1)
	if s := q.Get("starting_after"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return idlegrid.Invalid("starting_after", "must be a whole number: the sequence_number of the last event you read")
		}
		after = n
	}
	kr, err := g.findResponse(r.Context(), c, r.PathValue("id"))
	if err != nil {
		return err
	}
	log := g.streams.find(kr.ID, g.cfg.Clock.Now())
	if log == nil {
		return idlegrid.Invalid("stream", "the events of response %s are not held here: only a background response created with stream true has them, on the server that runs it, until %s after it ends; GET it without stream", kr.ID, streamRetention)
	}
	openStream(w)
	log.follow(r.Context(), w, after, g.cfg.StallTimeout)
	return nil
}
