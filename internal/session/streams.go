package session

import (
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/yamux"
)

// liveStreams are a session's open streams, both ends' (those the HTTP
// server accepted and those the transport dialed), so that a closing
// session can wake their readers at once.
//
// yamux closes a session in this order: it closes its shutdown channel,
// closes the connection, waits for its receive loop to end, and only then
// marks the streams closed. A stream's reader blocked meanwhile (every idle
// stream has one: the HTTP server waiting for the next request, the
// transport for the next answer) wakes on the shut-down channel, finds the
// stream still open and no data, and waits again, which returns at once:
// it spins. Closing the connection is the WebSocket's close handshake,
// which waits for the peer's answer, up to five seconds; with a few
// hundred idle streams spinning that long the process starves, the peer's
// answer with it when both ends share a process. So the connection's
// Close first expires every live stream's reads: each reader then returns
// a timeout, and its owner closes the stream.
type liveStreams struct {
	mu sync.Mutex
	m  map[*yamux.Stream]struct{}
}

// add tracks st until its Close.
func (l *liveStreams) add(st *yamux.Stream) net.Conn {
	l.mu.Lock()
	if l.m == nil {
		l.m = map[*yamux.Stream]struct{}{}
	}
	l.m[st] = struct{}{}
	l.mu.Unlock()
	return &liveStream{Stream: st, live: l}
}

func (l *liveStreams) remove(st *yamux.Stream) {
	l.mu.Lock()
	delete(l.m, st)
	l.mu.Unlock()
}

// expireReads makes every live stream's reads time out now.
func (l *liveStreams) expireReads() {
	past := time.Unix(1, 0)
	l.mu.Lock()
	defer l.mu.Unlock()
	for st := range l.m {
		_ = st.SetReadDeadline(past)
	}
}

// liveStream is a stream that leaves its liveStreams when closed.
type liveStream struct {
	*yamux.Stream
	live *liveStreams
}

func (c *liveStream) Close() error {
	c.live.remove(c.Stream)
	return c.Stream.Close()
}

// streamListener is the listener the session's HTTP server accepts the
// peer's streams from. A stream past the peer's limit is closed as it
// opens: the peer's request on it fails, and no goroutine waits on it.
type streamListener struct {
	*yamux.Session
	live *liveStreams
	peer *peerStreams
}

func (ln streamListener) Accept() (net.Conn, error) {
	for {
		st, err := ln.AcceptStream()
		if err != nil {
			return nil, err
		}
		if ln.peer.take() {
			return &peerStream{Conn: ln.live.add(st), peer: ln.peer}, nil
		}
		ln.peer.refuse(st)
	}
}

// peerStreams counts the streams the peer holds open, up to most (0: no
// bound).
type peerStreams struct {
	most    int
	open    atomic.Int64
	refused *atomic.Int64 // the registry's count, or the session's own
	log     *slog.Logger
	nodeID  string
	warned  atomic.Bool // the first refusal of the session is logged
}

// take counts a new stream, or reports that the peer holds most already.
func (p *peerStreams) take() bool {
	if n := p.open.Add(1); p.most > 0 && n > int64(p.most) {
		p.open.Add(-1)
		return false
	}
	return true
}

// refuse closes st, which the peer opened past its limit.
// It is counted before the close, which the peer may see at once.
func (p *peerStreams) refuse(st *yamux.Stream) {
	p.refused.Add(1)
	st.Close()
	if !p.warned.Swap(true) {
		p.log.Warn("session: the peer opened more streams than it may hold open; those past the limit are closed",
			"node", p.nodeID, "limit", p.most)
	}
}

// peerStream is a stream the peer opened, counted until its first Close.
type peerStream struct {
	net.Conn
	peer   *peerStreams
	closed atomic.Bool
}

func (c *peerStream) Close() error {
	if !c.closed.Swap(true) {
		c.peer.open.Add(-1)
	}
	return c.Conn.Close()
}
