package session

import (
	"encoding/binary"
	"net"
)

// yamux's frame header (github.com/hashicorp/yamux, const.go): version,
// type, flags, stream ID, length; a data frame's body of length bytes
// follows it.
const (
	yamuxHeaderSize = 12
	yamuxVersion    = 0
	yamuxTypeData   = 0
)

// joinFrames is a session's connection as yamux sees it. yamux's send loop
// writes each frame's header and its body in two calls, and on a WebSocket
// each call becomes a message of its own: a frame and a write syscall
// each. joinFrames holds a data frame's header until its body comes and
// writes the two as one message, which halves the messages and syscalls
// of every request and every streamed chunk. Nothing waits: the body is
// the very next write, and a header with no body passes at once.
//
// Only yamux's send loop writes, one call at a time, so joinFrames needs
// no lock; the bytes on the wire are the same, only the WebSocket's
// message boundaries move, which the NetConn reader at the other end does
// not see.
type joinFrames struct {
	net.Conn
	header [yamuxHeaderSize]byte
	want   int // the body length the held header announces; 0: none held
	buf    []byte
	// beforeClose runs as Close begins, before the WebSocket's close
	// handshake (liveStreams.expireReads); nil: nothing.
	beforeClose func()
}

// Close closes the connection, after beforeClose.
func (j *joinFrames) Close() error {
	if j.beforeClose != nil {
		j.beforeClose()
	}
	return j.Conn.Close()
}

func (j *joinFrames) Write(p []byte) (int, error) {
	if j.want == 0 {
		if n := dataLength(p); n > 0 {
			copy(j.header[:], p)
			j.want = n
			return len(p), nil
		}
		return j.Conn.Write(p)
	}
	want := j.want
	j.want = 0
	if len(p) != want { // not the body announced: write both as they came
		if _, err := j.Conn.Write(j.header[:]); err != nil {
			return 0, err
		}
		return j.Conn.Write(p)
	}
	j.buf = append(append(j.buf[:0], j.header[:]...), p...)
	n, err := j.Conn.Write(j.buf)
	n = max(n-yamuxHeaderSize, 0)
	if cap(j.buf) > 64<<10 {
		j.buf = nil // a large body does not pin its buffer
	}
	return n, err
}

// dataLength is the body length of a data frame's header, or 0 when p is
// not one header of a data frame with a body.
func dataLength(p []byte) int {
	if len(p) != yamuxHeaderSize || p[0] != yamuxVersion || p[1] != yamuxTypeData {
		return 0
	}
	return int(binary.BigEndian.Uint32(p[8:12]))
}
