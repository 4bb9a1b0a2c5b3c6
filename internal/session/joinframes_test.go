package session

import (
	"bytes"
	"encoding/binary"
	"net"
	"testing"
)

// writesConn records each write as one message, as a WebSocket would.
type writesConn struct {
	net.Conn
	writes [][]byte
}

func (c *writesConn) Write(p []byte) (int, error) {
	c.writes = append(c.writes, bytes.Clone(p))
	return len(p), nil
}

func yamuxHeader(typ byte, stream, length uint32) []byte {
	h := make([]byte, yamuxHeaderSize)
	h[1] = typ
	binary.BigEndian.PutUint32(h[4:8], stream)
	binary.BigEndian.PutUint32(h[8:12], length)
	return h
}

func TestJoinFrames_Write(t *testing.T) {
	data := yamuxHeader(yamuxTypeData, 3, 5)
	window := yamuxHeader(1, 3, 1024) // a window update: a header alone
	fin := yamuxHeader(yamuxTypeData, 3, 0)
	for _, tt := range []struct {
		name   string
		writes [][]byte
		want   [][]byte
	}{
		{"a data frame is one message", [][]byte{data, []byte("hello")}, [][]byte{append(bytes.Clone(data), "hello"...)}},
		{"a header alone passes at once", [][]byte{window, fin}, [][]byte{window, fin}},
		{"frames in a row", [][]byte{data, []byte("hello"), window, data, []byte("world")},
			[][]byte{append(bytes.Clone(data), "hello"...), window, append(bytes.Clone(data), "world"...)}},
		{"a body of another length passes as it came", [][]byte{data, []byte("hi")}, [][]byte{data, []byte("hi")}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := &writesConn{}
			j := &joinFrames{Conn: c}
			for _, w := range tt.writes {
				if n, err := j.Write(w); err != nil || n != len(w) {
					t.Fatalf("Write(%d bytes) = %d, %v", len(w), n, err)
				}
			}
			if len(c.writes) != len(tt.want) {
				t.Fatalf("got %d messages %q, want %d %q", len(c.writes), c.writes, len(tt.want), tt.want)
			}
			for i := range tt.want {
				if !bytes.Equal(c.writes[i], tt.want[i]) {
					t.Errorf("message %d = %q, want %q", i, c.writes[i], tt.want[i])
				}
			}
		})
	}
}
