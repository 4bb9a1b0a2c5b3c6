package gateway

import (
	"context"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

// logStream is a stream of five events: lines ending in \n, \r\n or \r
// alone, one event without a sequence number (an error the gateway
// adds), numbered as the one before it.
const logStream = "event: a\ndata: {\"sequence_number\":0}\n\n" +
	"event: b\r\ndata: {\"sequence_number\":1,\"delta\":\"x\\n\\ny\"}\r\n\r\n" +
	"event: error\ndata: {\"message\":\"broke\"}\n\n" +
	"event: c\rdata: {\"sequence_number\":2}\r\r" +
	"event: d\ndata: {\"sequence_number\":3}\n\n"

// TestStreamLog_append: the log keeps whole events, however the stream
// is cut into writes, each with its number.
func TestStreamLog_append(t *testing.T) {
	for cut := range len(logStream) {
		l := newStreamLog(1 << 20)
		l.append([]byte(logStream[:cut]))
		l.append([]byte(logStream[cut:]))
		l.end(time.Now())
		events, done, _ := l.from(0)
		var seqs []int64
		var whole strings.Builder
		for _, ev := range events {
			seqs = append(seqs, ev.seq)
			whole.Write(ev.b)
		}
		if !slices.Equal(seqs, []int64{0, 1, 1, 2, 3}) || whole.String() != logStream || !done {
			t.Fatalf("cut at %d: events numbered %v, %q, done %v; want 0 1 1 2 3, the stream whole, done", cut, seqs, whole.String(), done)
		}
	}
}

// TestStreamLog_follow: a follower gets the events numbered after the one
// it names, then those that come, until the log ends; a log grown past
// its bound keeps nothing, is found no more, and lets its followers go.
func TestStreamLog_follow(t *testing.T) {
	var logs streamLogs
	defer logs.close()
	l := newStreamLog(1 << 20)
	logs.add("resp_a", l)
	l.append([]byte(logStream[:strings.Index(logStream, "event: c")]))
	l.append([]byte("event: e\ndata: {\"sequence_number\":4}")) // unended: the stream's last
	w := httptest.NewRecorder()
	followed := make(chan struct{})
	go func() {
		defer close(followed)
		l.follow(context.Background(), w, 0, time.Minute)
	}()
	now := time.Now()
	l.end(now)
	<-followed
	if got, want := w.Body.String(), logStream[strings.Index(logStream, "event: b"):strings.Index(logStream, "event: c")]+"event: e\ndata: {\"sequence_number\":4}"; got != want {
		t.Errorf("following after event 0: %q; want %q, the events from b on, the last as it was left", got, want)
	}
	if logs.find("resp_a", now.Add(streamRetention)) != l || logs.find("resp_a", now.Add(streamRetention+time.Second)) != nil {
		t.Error("an ended log is found for streamRetention, and no longer")
	}

	small := newStreamLog(60)
	logs.add("resp_b", small)
	small.append([]byte(logStream))
	if events, done, _ := small.from(0); events != nil || !done || logs.find("resp_b", now) != nil {
		t.Errorf("a log past its bound: %d events, done %v; want none kept, done, not found", len(events), done)
	}
}
