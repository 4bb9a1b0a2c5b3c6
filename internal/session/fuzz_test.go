package session_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/idlegrid/idlegrid/internal/session"
)

// FuzzSession sends whatever an agent that the server authenticated could
// send on its session's WebSocket: the input, cut into binary messages at
// each 0xFF byte, as the frames of yamux and of the HTTP inside them. The
// server must neither crash nor hang: once the agent hangs up, its session
// leaves the registry, and another agent's session still answers.
//
//	go test -fuzz FuzzSession ./internal/session
func FuzzSession(f *testing.F) {
	open := yamuxFrame(1, 1, 1, 0) // a window update with SYN: stream 1 opens
	get := []byte("GET /x HTTP/1.1\r\nHost: peer\r\n\r\n")
	for _, seed := range [][]byte{
		nil,
		{0},
		[]byte("hello"),
		open,
		join(open, append(yamuxFrame(0, 0, 1, uint32(len(get))), get...)),                         // a request on stream 1
		join(open, yamuxFrame(0, 0, 1, 1<<31)),                                                    // a frame longer than any window
		join(open, append(yamuxFrame(0, 4, 1, uint32(len(get))), get...), yamuxFrame(1, 8, 1, 0)), // FIN, then RST
		yamuxFrame(2, 1, 0, 7),               // a ping
		yamuxFrame(3, 0, 0, 1),               // go away
		yamuxFrame(0, 0, 0, 3),               // data on stream 0
		{9, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0}, // a version yamux does not speak
		bytes.Repeat(open, 300),              // the same stream opened again and again
	} {
		f.Add(seed)
	}
	fx := mustServeFuzz(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		ws, _, err := websocket.Dial(ctx, fx.URL+session.Path, &websocket.DialOptions{
			HTTPClient: fx.Client, Subprotocols: []string{session.Subprotocol},
			HTTPHeader: http.Header{testNodeHeader: {"fuzz"}}, CompressionMode: websocket.CompressionDisabled,
		})
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		waitFor(t, "the fuzzed session in the registry", func() bool { _, ok := fx.Registry.Get("fuzz"); return ok })
		for _, msg := range bytes.Split(data, []byte{0xFF}) {
			if ws.Write(ctx, websocket.MessageBinary, msg) != nil {
				break // the server closed the session: what it must do with garbage
			}
		}
		ws.CloseNow()
		waitFor(t, "the fuzzed session to leave the registry", func() bool {
			_, ok := fx.Registry.Get("fuzz")
			return !ok
		})
		if code, body := mustGet(t, fx.good, "/after"); code != http.StatusOK || !strings.Contains(body, "hello good") {
			t.Fatalf("the other session after the fuzzed one: %d %q", code, body)
		}
	})
}

// fuzzFixture is the fixture with a well-behaved agent's session, good.
type fuzzFixture struct {
	*fixture
	good *session.Session
}

func mustServeFuzz(f *testing.F) *fuzzFixture {
	fx := mustServe(f)
	return &fuzzFixture{fixture: fx, good: fx.mustDial(f, "good", nil)}
}

// yamuxFrame is a yamux header: version 0, the type, flags, stream ID and
// length, big-endian.
func yamuxFrame(typ byte, flags uint16, stream, length uint32) []byte {
	h := make([]byte, 12)
	h[1] = typ
	binary.BigEndian.PutUint16(h[2:], flags)
	binary.BigEndian.PutUint32(h[4:], stream)
	binary.BigEndian.PutUint32(h[8:], length)
	return h
}

// join makes messages of frames: the fuzz input cuts at 0xFF.
func join(frames ...[]byte) []byte { return bytes.Join(frames, []byte{0xFF}) }
