package openai_test

import (
	"testing"

	"github.com/idlegrid/idlegrid/internal/openai"
)

// A whole response: its usage as the Responses API names it, the text
// of its output items (a reasoning item's, a message's, a tool call's
// arguments) for the count, and every string of its output, but nothing
// else of the response (its instructions, echoed), towards the most it
// may be charged.
func TestMeterAnswer_response(t *testing.T) {
	body := []byte(`{"id":"resp_1","object":"response","status":"completed","instructions":"Be brief.","output":[` +
		`{"id":"rs_1","type":"reasoning","summary":[],"content":[{"type":"reasoning_text","text":"Think."}]},` +
		`{"id":"msg_1","type":"message","role":"assistant","status":"completed","content":[{"type":"output_text","text":"Hello there","annotations":[]}]},` +
		`{"type":"function_call","id":"fc_1","call_id":"call_1","name":"f","arguments":"{\"a\":1}","status":"completed"}],` +
		`"usage":{"input_tokens":9,"output_tokens":6,"total_tokens":15}}`)
	m := openai.MeterAnswer(openai.Responses, body)
	if in, out, up := m.Tokens(1); in != 9 || out != 6 || !up {
		t.Errorf("Tokens = %d, %d, %v; want 9, 6, true", in, out, up)
	}
	if want := len("Think.") + len("Hello there") + len(`{"a":1}`); m.CompletionBytes != want {
		t.Errorf("CompletionBytes = %d, want %d", m.CompletionBytes, want)
	}
	// The output's strings: rs_1 reasoning reasoning_text Think. msg_1
	// message assistant completed output_text "Hello there"
	// function_call fc_1 call_1 f {"a":1} completed.
	if want := 4 + 9 + 14 + 6 + 5 + 7 + 9 + 9 + 11 + 11 + 13 + 4 + 6 + 1 + 7 + 9; m.GeneratedBytes != want {
		t.Errorf("GeneratedBytes = %d, want %d", m.GeneratedBytes, want)
	}
	m = openai.MeterAnswer(openai.Responses, []byte(`{"output":[{"type":"message","content":[{"type":"output_text","text":"0123456789"}]}]}`))
	if in, out, up := m.Tokens(4); in != 4 || out != 3 || up {
		t.Errorf("without usage: Tokens = %d, %d, %v; want 4, 3 (10 bytes), false", in, out, up)
	}
}

// A streamed response: the text of its delta events, once, though the
// events after them repeat it whole, and the usage of its last event.
func TestStreamMeter_response(t *testing.T) {
	stream := "event: response.created\n" +
		`data: {"type":"response.created","response":{"id":"resp_1","status":"in_progress","output":[],"usage":null}}` + "\n\n" +
		"event: response.output_text.delta\n" +
		`data: {"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hello"}` + "\n\n" +
		"event: response.output_text.delta\n" +
		`data: {"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":" there"}` + "\n\n" +
		"event: response.output_audio.delta\n" +
		`data: {"type":"response.output_audio.delta","delta":"UklGRiQAAABXQVZF"}` + "\n\n" +
		"event: response.output_text.done\n" +
		`data: {"type":"response.output_text.done","item_id":"msg_1","text":"Hello there"}` + "\n\n" +
		"event: response.completed\n" +
		`data: {"type":"response.completed","response":{"id":"resp_1","status":"completed","output":[{"type":"message","content":[{"type":"output_text","text":"Hello there"}]}],` +
		`"usage":{"input_tokens":9,"output_tokens":2,"total_tokens":11}}}` + "\n\n"
	sm := openai.StreamMeter{Endpoint: openai.Responses}
	sm.Write([]byte(stream))
	sm.End()
	m := sm.Metered
	if m.Usage == nil || m.Usage.PromptTokens != 9 || m.Usage.CompletionTokens != 2 {
		t.Errorf("usage %+v, want 9 input and 2 output tokens", m.Usage)
	}
	if want := len("Hello there"); m.CompletionBytes != want || m.GeneratedBytes != want {
		t.Errorf("CompletionBytes %d, GeneratedBytes %d; want %d each: the deltas' text, counted once, no audio", m.CompletionBytes, m.GeneratedBytes, want)
	}
	if m.Chunks != 6 || !m.Done {
		t.Errorf("Chunks %d, Done %v; want 6 events, done at response.completed", m.Chunks, m.Done)
	}
}
