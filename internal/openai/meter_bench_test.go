package openai_test

import (
	"testing"

	"github.com/idlegrid/idlegrid/internal/openai"
)

// benchEvent is one event of a streamed chat completion, as vLLM sends it.
var benchEvent = []byte("data: {\"id\":\"chatcmpl-123\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"llama-3.1-8b-instruct\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" hello\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n")

// BenchmarkStreamMeter is the meter's cost for one event of a stream: its
// usage, its text and the text for the cap, in one reading with gjson.
//
//	go test ./internal/openai -run '^$' -bench 'StreamMeter|UsageDropper' -benchmem
func BenchmarkStreamMeter(b *testing.B) {
	var m openai.StreamMeter
	for b.Loop() {
		m.Write(benchEvent)
	}
}
