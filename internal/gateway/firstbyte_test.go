package gateway

import (
	"testing"
	"time"

	"github.com/idlegrid/idlegrid/internal/openai"
)

// The first-byte timeout of a stream grows with its prompt, by
// FirstBytePerKTokens a thousand tokens, up to MaxFirstByteTimeout; a
// non-streamed answer waits AnswerTimeout whatever its prompt.
func TestFirstByteWait(t *testing.T) {
	g := &Gateway{}
	g.cfg.setDefaults()
	for _, tt := range []struct {
		stream bool
		tokens int64
		want   time.Duration
	}{
		{true, 0, 30 * time.Second},
		{true, 1000, 31 * time.Second},
		{true, 100_000, 130 * time.Second},
		{true, 550_000, 5 * time.Minute}, // a 2.2 MB prompt
		{true, 1 << 60, 5 * time.Minute},
		{false, 550_000, 5 * time.Minute},
		{false, 0, 5 * time.Minute},
	} {
		req := &openai.Request{Stream: tt.stream, PromptTokens: tt.tokens}
		if got := g.firstByteWait(req); got != tt.want {
			t.Errorf("stream %v, %d prompt tokens: wait %v, want %v", tt.stream, tt.tokens, got, tt.want)
		}
	}
}
