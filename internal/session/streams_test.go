package session

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/yamux"
)

// slowClose is a connection whose Close waits until release, as a
// WebSocket's close handshake waits for the peer's answer.
type slowClose struct {
	net.Conn
	release chan struct{}
}

func (c *slowClose) Close() error {
	<-c.release
	return c.Conn.Close()
}

// TestLiveStreams_expireReads closes a session whose connection is slow to
// close and wants a reader blocked on one of its streams back at once,
// not spinning until the connection has closed.
func TestLiveStreams_expireReads(t *testing.T) {
	near, far := net.Pipe()
	conn := &slowClose{Conn: near, release: make(chan struct{})}
	live := &liveStreams{}
	cfg := yamux.DefaultConfig()
	cfg.EnableKeepAlive = false
	cfg.LogOutput = io.Discard
	server, err := yamux.Server(&joinFrames{Conn: conn, beforeClose: live.expireReads}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	client, err := yamux.Client(far, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	out, err := client.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := out.Write([]byte("x")); err != nil { // the peer learns of the stream with its first frame
		t.Fatal(err)
	}
	ln := streamListener{server, live}
	in, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	read := make(chan error, 1)
	go func() {
		buf := make([]byte, 8)
		for { // the "x", then a wait for more
			if _, err := in.Read(buf); err != nil {
				read <- err
				return
			}
		}
	}()
	closed := make(chan struct{})
	go func() { server.Close(); close(closed) }() // blocks in the connection's Close until released
	defer func() { close(conn.release); <-closed }()
	select {
	case err := <-read:
		t.Logf("the reader returned %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("a reader of a closing session's stream did not return while the connection was closing")
	}
}
