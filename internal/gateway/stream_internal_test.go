package gateway

import "testing"

// TestEndsStream: the stream's end is its [DONE] event at the start of a
// line, whatever ends the line before, not the same words inside an
// event's text.
func TestEndsStream(t *testing.T) {
	for _, c := range []struct {
		read string
		want bool
	}{
		{"data: [DONE]\n\n", true},
		{`data: {"choices":[{"delta":{"content":"x"}}]}` + "\n\ndata: [DONE]\n\n", true},
		{`data: {"choices":[{"delta":{"content":"say data: [DONE]"}}]}` + "\n\n", false},
		{`data: {"choices":[{"delta":{"content":"data: [DONE] twice: data: [DONE]"}}]}` + "\n\ndata: [DONE]\n\n", true},
		{`data: {"choices":[{"delta":{"content":"x"}}]}` + "\n\n", false},
		{`data: {"choices":[{"delta":{"content":"x"}}]}` + "\r\rdata: [DONE]\r\r", true}, // lines may end in \r alone
		{`data: {"choices":[{"delta":{"content":"x"}}]}` + "\r\r", false},
		{"", false},
	} {
		if got := endsStream([]byte(c.read)); got != c.want {
			t.Errorf("endsStream(%q) = %v, want %v", c.read, got, c.want)
		}
	}
}
