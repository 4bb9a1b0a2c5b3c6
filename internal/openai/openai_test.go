package openai_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/openai"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// parsed is what a golden file holds for one request: what the gateway
// read from it, and the body it would send upstream, or the error.
type parsed struct {
	Endpoint     openai.Endpoint   `json:"endpoint"`
	Model        string            `json:"model,omitempty"`
	Stream       bool              `json:"stream,omitempty"`
	IncludeUsage bool              `json:"include_usage,omitempty"`
	MaxTokens    int64             `json:"max_tokens,omitempty"`
	Choices      int64             `json:"choices,omitempty"` // when more than one
	PromptTokens int64             `json:"prompt_tokens,omitempty"`
	Sticky       bool              `json:"has_prefix_hash,omitempty"`
	Provider     *idlegrid.Routing `json:"provider,omitempty"`
	MaxPrice     []idlegrid.Micros `json:"max_price_micros,omitempty"` // -1: not set
	Previous     string            `json:"previous_response_id,omitempty"`
	Conversation string            `json:"conversation,omitempty"`
	References   int               `json:"references,omitempty"` // item_reference items
	Truncate     bool              `json:"truncate,omitempty"`   // truncation auto
	Kept         bool              `json:"kept,omitempty"`       // a response's store
	Background   bool              `json:"background,omitempty"`
	Upstream     json.RawMessage   `json:"upstream,omitempty"`
	Error        string            `json:"error,omitempty"`
	ErrorField   string            `json:"error_field,omitempty"`
}

func endpointOf(name string) openai.Endpoint {
	switch {
	case strings.HasPrefix(name, "completion_"):
		return openai.Completions
	case strings.HasPrefix(name, "embeddings_"):
		return openai.Embeddings
	case strings.HasPrefix(name, "responses_"):
		return openai.Responses
	}
	return openai.ChatCompletions
}

func TestParseRequest_golden(t *testing.T) {
	files, err := filepath.Glob("testdata/requests/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no request files: %v", err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		t.Run(name, func(t *testing.T) {
			body, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			got := mustSummarise(t, endpointOf(name), body)
			golden := strings.TrimSuffix(f, ".json") + ".golden"
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to write it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("ParseRequest(%s):\ngot  %s\nwant %s", name, got, want)
			}
			bad := strings.HasPrefix(name, "bad_") || strings.Contains(name, "_bad_") // responses_bad_…
			if bad == !bytes.Contains(got, []byte(`"error"`)) {
				t.Errorf("a bad_ file (or an endpoint's _bad_ one) must fail to parse and every other must parse; got %s", got)
			}
		})
	}
}

func mustSummarise(tb testing.TB, e openai.Endpoint, body []byte) []byte {
	tb.Helper()
	p := parsed{Endpoint: e}
	r, err := openai.ParseRequest(e, body)
	if err != nil {
		var ie *idlegrid.Error
		if !asError(err, &ie) || ie.Code != idlegrid.EINVALID {
			tb.Fatalf("ParseRequest error %v is not an EINVALID *idlegrid.Error", err)
		}
		p.Error, p.ErrorField = ie.Message, ie.Field
	} else {
		p.Model, p.Stream, p.IncludeUsage, p.MaxTokens = r.Model, r.Stream, r.IncludeUsage, r.MaxTokens
		p.PromptTokens, p.Sticky, p.Provider = r.PromptTokens, r.PrefixHash != 0, r.Provider
		p.Previous, p.Conversation, p.Kept, p.Background = r.PreviousResponseID, r.Conversation, r.Store, r.Background
		p.References, p.Truncate = r.References, r.Truncate
		if r.Choices > 1 {
			p.Choices = r.Choices
		}
		if r.Provider != nil && r.Provider.MaxPrice != nil {
			p.MaxPrice = []idlegrid.Micros{microsOrNone(r.Provider.MaxPrice.Prompt), microsOrNone(r.Provider.MaxPrice.Completion)}
		}
		up, err := r.Upstream()
		if err != nil {
			tb.Fatalf("Upstream: %v", err)
		}
		p.Upstream = up
	}
	out, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		tb.Fatal(err)
	}
	return append(out, '\n')
}

func microsOrNone(m *idlegrid.Micros) idlegrid.Micros {
	if m == nil {
		return -1
	}
	return *m
}

func asError(err error, target **idlegrid.Error) bool {
	e, ok := err.(*idlegrid.Error)
	*target = e
	return ok
}

func TestRequest_Upstream(t *testing.T) {
	t.Run("a plain request goes byte for byte", func(t *testing.T) {
		body := []byte(`{"model":"m",  "messages":[{"role":"user","content":"Hi"}], "x_future_field": {"a": 1}}`)
		r := mustParse(t, openai.ChatCompletions, body)
		got, _ := r.Upstream()
		if !bytes.Equal(got, body) {
			t.Errorf("Upstream() = %s, want the body unchanged", got)
		}
	})
	t.Run("a stream asks for usage and keeps its other options", func(t *testing.T) {
		r := mustParse(t, openai.ChatCompletions, []byte(`{"model":"m","stream":true,"stream_options":{"continuous_usage_stats":false},"messages":[{"role":"user","content":"Hi"}],"provider":{"sort":"price"}}`))
		got, _ := r.Upstream()
		var m map[string]json.RawMessage
		if err := json.Unmarshal(got, &m); err != nil {
			t.Fatal(err)
		}
		if _, ok := m["provider"]; ok {
			t.Errorf("the provider object went upstream: %s", got)
		}
		if want := `{"continuous_usage_stats":false,"include_usage":true}`; string(m["stream_options"]) != want {
			t.Errorf("stream_options = %s, want %s", m["stream_options"], want)
		}
	})
}

func mustParse(tb testing.TB, e openai.Endpoint, body []byte) *openai.Request {
	tb.Helper()
	r, err := openai.ParseRequest(e, body)
	if err != nil {
		tb.Fatalf("ParseRequest(%s): %v", body, err)
	}
	return r
}

func TestRequest_PrefixHash(t *testing.T) {
	long := strings.Repeat("You are a helpful assistant. ", 200)
	a := mustParse(t, openai.ChatCompletions, chat("m", long, "question one"))
	b := mustParse(t, openai.ChatCompletions, chat("m", long, "question two"))
	c := mustParse(t, openai.ChatCompletions, chat("m", "another system prompt", "question one"))
	d := mustParse(t, openai.ChatCompletions, chat("other-model", long, "question one"))
	if a.PrefixHash != b.PrefixHash {
		t.Errorf("prompts that share their first %d bytes hash apart", openai.MaxPrefixBytes)
	}
	if a.PrefixHash == c.PrefixHash || a.PrefixHash == d.PrefixHash {
		t.Errorf("different prompts or models share a prefix hash")
	}
}

func chat(model, system, user string) []byte {
	b, _ := json.Marshal(map[string]any{"model": model, "messages": []map[string]string{
		{"role": "system", "content": system}, {"role": "user", "content": user}}})
	return b
}

func TestStreamMeter_Write(t *testing.T) {
	stream := "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n" +
		"data: {\"choices\":[{\"delta\":{\"content\":\"Hello\"}}]}\n\n" +
		": keep-alive comment\n\n" +
		"data: {\"choices\":[{\"delta\":{\"content\":\" world\"}}]}\r\n\r\n" +
		"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":2,\"total_tokens\":14}}\n\n" +
		"data: [DONE]\n\n"
	// Lines may end in \r alone, as server-sent events allow.
	crs := strings.ReplaceAll(strings.ReplaceAll(stream, "\r\n", "\n"), "\n", "\r")
	for _, size := range []int{1, 3, 7, 64, len(stream), -1, -3, -len(crs)} {
		var m openai.StreamMeter
		stream := stream
		if size < 0 {
			size, stream = -size, crs
		}
		for s := stream; len(s) > 0; {
			n := min(size, len(s))
			m.Write([]byte(s[:n]))
			s = s[n:]
		}
		if !m.Done || m.Chunks != 4 || m.CompletionBytes != len("Hello world") || m.Bytes != len(stream) {
			t.Errorf("pieces of %d: done %v, chunks %d, bytes %d of %d; want true, 4, 11 of %d", size, m.Done, m.Chunks, m.CompletionBytes, m.Bytes, len(stream))
		}
		if want := len("assistant") + len("Hello world"); m.GeneratedBytes != want {
			t.Errorf("pieces of %d: GeneratedBytes = %d, want %d: the strings in the choices, not the events' envelopes", size, m.GeneratedBytes, want)
		}
		in, out, upstream := m.Tokens(99)
		if in != 12 || out != 2 || !upstream {
			t.Errorf("pieces of %d: Tokens = %d, %d, %v; want 12, 2, true", size, in, out, upstream)
		}
	}
	t.Run("without usage it estimates", func(t *testing.T) {
		var m openai.StreamMeter
		m.Write([]byte("data: {\"choices\":[{\"delta\":{\"content\":\"12345678\"}}]}\n\ndata: [DONE]\n\n"))
		in, out, upstream := m.Tokens(7)
		if in != 7 || out != 2 || upstream {
			t.Errorf("Tokens = %d, %d, %v; want 7, 2, false", in, out, upstream)
		}
	})
}

// GeneratedBytes counts every string in the choices, decoded (tool calls'
// arguments, reasoning, a refusal), but their logprobs, which repeat the
// text and add its runners-up; and all of an event it cannot read, or of a
// line too long to keep, whatever it held.
func TestStreamMeter_GeneratedBytes(t *testing.T) {
	stream := "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"model\":\"a-long-model-name\",\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"hm\"}}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"caf\\u00e9 \\\"x\\\"\"},\"logprobs\":{\"content\":[{\"token\":\"caf\",\"top_logprobs\":[{\"token\":\"cat\"}]}]}}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\":1}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n" +
		"data: [DONE]\n\n"
	var m openai.StreamMeter
	m.Write([]byte(stream))
	// hm, café "x" (é is two bytes), f, {"a":1}, tool_calls
	if want := 2 + len("café \"x\"") + 1 + len(`{"a":1}`) + len("tool_calls"); m.GeneratedBytes != want {
		t.Errorf("GeneratedBytes = %d, want %d", m.GeneratedBytes, want)
	}

	m = openai.StreamMeter{}
	bad := "data: {\"choices\":[{\"delta\":{\"content\":\"unclosed\n\n"
	m.Write([]byte(bad))
	if want := len(`{"choices":[{"delta":{"content":"unclosed`); m.GeneratedBytes != want {
		t.Errorf("an event it cannot read: GeneratedBytes = %d, want all of its %d bytes", m.GeneratedBytes, want)
	}

	m = openai.StreamMeter{}
	long := "data: {\"choices\":[{\"delta\":{\"content\":\"" + strings.Repeat("x", 1<<20) + "\"}}]}"
	for s := long; len(s) > 0; {
		n := min(100_000, len(s))
		m.Write([]byte(s[:n]))
		s = s[n:]
	}
	m.Write([]byte("\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"ok\"}}]}\n\n"))
	if want := len(long) + 2; m.GeneratedBytes != want || m.Chunks != 1 {
		t.Errorf("a line over 1 MiB: GeneratedBytes = %d, chunks %d; want all %d of its bytes and the next event's 2, 1 chunk read", m.GeneratedBytes, m.Chunks, want)
	}
	m = openai.StreamMeter{}
	m.Write([]byte(long + "\n\n"))
	if want := len(long); m.GeneratedBytes != want || m.Chunks != 0 {
		t.Errorf("a line over 1 MiB in one write: GeneratedBytes = %d, chunks %d; want all %d of its bytes, none read", m.GeneratedBytes, m.Chunks, want)
	}
}

// The meter reads events, not lines: an event's data lines join, as
// server-sent events join them; the stream's last event counts at its end
// though no blank line follows it; other fields and comments, however
// long, are not text.
func TestStreamMeter_events(t *testing.T) {
	split := "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}],\r\n" +
		"data: \"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1,\"total_tokens\":4}}\r\n" +
		"id: 7\r\n: " + strings.Repeat("c", 1<<20+10) + "\r\n\r\n" +
		"data: [DONE]\n"
	for _, size := range []int{1, 2, 5, 4096, len(split)} {
		var m openai.StreamMeter
		for s := split; len(s) > 0; {
			n := min(size, len(s))
			m.Write([]byte(s[:n]))
			s = s[n:]
		}
		if m.Done {
			t.Errorf("pieces of %d: done before the stream's end read its last event", size)
		}
		m.End()
		if m.Usage == nil || m.Usage.CompletionTokens != 1 || m.Chunks != 1 || m.CompletionBytes != 2 || m.GeneratedBytes != 2 || !m.Done {
			t.Errorf("pieces of %d: usage %+v, %+v; want the event on two data lines read whole (1 completion token, 2 bytes of text), then done", size, m.Usage, m.Metered)
		}
	}
}

func TestMeterAnswer(t *testing.T) {
	body := []byte(`{"choices":[{"message":{"role":"assistant","content":"Hi there"}}],"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}}`)
	m := openai.MeterAnswer(openai.ChatCompletions, body)
	if in, out, up := m.Tokens(1); in != 5 || out != 3 || !up {
		t.Errorf("Tokens = %d, %d, %v; want 5, 3, true", in, out, up)
	}
	if m.Bytes != len(body) {
		t.Errorf("Bytes = %d, want the answer's %d", m.Bytes, len(body))
	}
	if want := len("assistant") + len("Hi there"); m.GeneratedBytes != want {
		t.Errorf("GeneratedBytes = %d, want %d", m.GeneratedBytes, want)
	}
	m = openai.MeterAnswer(openai.ChatCompletions, []byte(`{"choices":[{"text":"0123456789"}]}`))
	if in, out, up := m.Tokens(4); in != 4 || out != 3 || up {
		t.Errorf("without usage: Tokens = %d, %d, %v; want 4, 3, false", in, out, up)
	}
}

// A prompt is at most a token a byte sent plus its template's; a
// completion at most max_tokens for each of n, and a token a byte of the
// text generated plus those that decode to none.
func TestRequest_MostTokens(t *testing.T) {
	body := chat("m", "You are terse.", "Hi")
	r := mustParse(t, openai.ChatCompletions, body)
	if got, want := r.MostPromptTokens(len(body)), int64(len(body)+256+2*16); got != want {
		t.Errorf("MostPromptTokens = %d, want %d: the bytes, the template's 256 and 16 a message", got, want)
	}
	if got := r.MostCompletionTokens(100); got != 116 {
		t.Errorf("without max_tokens: MostCompletionTokens(100) = %d, want 116", got)
	}
	r = mustParse(t, openai.Completions, []byte(`{"model":"m","prompt":"x","max_tokens":5,"n":3}`))
	if got := r.MostPromptTokens(10); got != 266 {
		t.Errorf("a completion's MostPromptTokens(10) = %d, want 266", got)
	}
	if got := r.MostCompletionTokens(1000); got != 15 {
		t.Errorf("max_tokens 5, n 3: MostCompletionTokens(1000) = %d, want 15", got)
	}
	// An image given by URL is a few bytes of the request and thousands of
	// tokens upstream: each may take 16,384.
	body = []byte(`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"What is this?"},` +
		`{"type":"image_url","image_url":{"url":"https://example.com/a.jpg"}},{"type":"input_audio","input_audio":{"data":"UklGRg==","format":"wav"}}]}]}`)
	r = mustParse(t, openai.ChatCompletions, body)
	if got, want := r.MostPromptTokens(len(body)), int64(len(body)+256+16+2*16384); got != want {
		t.Errorf("with an image and an audio part: MostPromptTokens = %d, want %d", got, want)
	}
	if got, want := r.PromptTokens, int64(4+4+2*openai.MediaTokens); got != want {
		t.Errorf("with an image and an audio part: PromptTokens = %d, want %d (13 bytes of text, a message, two media parts)", got, want)
	}
	if got, want := r.ReservePromptTokens(), int64(4+4+2*16384); got != want {
		t.Errorf("with an image and an audio part: ReservePromptTokens = %d, want %d: each part at the most it may take", got, want)
	}
}

func FuzzParseRequest(f *testing.F) {
	files, _ := filepath.Glob("testdata/requests/*.json")
	for _, file := range files {
		b, _ := os.ReadFile(file)
		f.Add(b)
	}
	f.Add([]byte(`{"model":"m","prompt":[1,"a",[2]]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, e := range []openai.Endpoint{openai.ChatCompletions, openai.Completions, openai.Embeddings} {
			r, err := openai.ParseRequest(e, body)
			if err != nil {
				if idlegrid.ErrorCode(err) != idlegrid.EINVALID {
					t.Fatalf("ParseRequest(%s): error %v is not EINVALID", e, err)
				}
				continue
			}
			if r.Model == "" || r.PromptTokens < 0 || r.MaxTokens < 0 {
				t.Fatalf("ParseRequest(%s) accepted %q with model %q, prompt tokens %d", e, body, r.Model, r.PromptTokens)
			}
			up, err := r.Upstream()
			if err != nil {
				t.Fatalf("Upstream of an accepted request: %v", err)
			}
			again, err := openai.ParseRequest(e, up)
			if err != nil {
				t.Fatalf("the upstream body of an accepted request does not parse: %v\n%s", err, up)
			}
			if again.Model != r.Model || again.Stream != r.Stream || again.Provider != nil || again.PromptTokens != r.PromptTokens {
				t.Fatalf("the upstream body changed the request: %+v vs %+v", again, r)
			}
			if r.Stream && !again.IncludeUsage {
				t.Fatalf("a streamed request does not ask upstream for usage: %s", up)
			}
		}
	})
}

// However a stream arrives in pieces, its metering is the same, and the
// text it counts for the cap (GeneratedBytes) holds all the text it counts
// for an estimate (CompletionBytes).
func FuzzStreamMeter(f *testing.F) {
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"Hi\"}}]}\n\ndata: [DONE]\n\n"), uint16(3))
	f.Add([]byte("data: {\"choices\":[{\"text\":\"a\"}],\"CHOICES\":[{\"text\":\"bcd\"}]}\n\n"), uint16(1))
	f.Add([]byte("data: {\"choices\":[{\"message\":{\"content\":[{\"type\":\"text\",\"text\":\"x\"}]},\"logprobs\":{\"content\":[{\"token\":\"x\"}]}}]}\r\n\r\n"), uint16(7))
	f.Add([]byte("data: {\"choices\":[{\"text\":\"a\"}]}\r\rdata: {\"usage\":{\"completion_tokens\":1}}\r"), uint16(2))
	f.Add([]byte("data: {\"choices\":[{\"text\":\"a\"}],\r\ndata: \"usage\":{\"completion_tokens\":1}}\r\n: note\r\n\r\ndata:[DONE]\n"), uint16(5))
	f.Add([]byte("event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"Hi\",\"DELTA\":\"x\"}\n\n"+
		"data: {\"type\":\"response.completed\",\"response\":{\"output\":[],\"usage\":{\"output_tokens\":1}}}\n\n"), uint16(4))
	f.Add([]byte("data: {\"output\":[{\"content\":[{\"text\":\"a\"}],\"arguments\":\"{}\"}],\"usage\":{\"input_tokens\":2}}\n\n"), uint16(9))
	f.Fuzz(func(t *testing.T, stream []byte, size uint16) {
		for _, e := range []openai.Endpoint{openai.ChatCompletions, openai.Responses} {
			checkStreamMeter(t, e, stream, size)
		}
	})
}

// checkStreamMeter checks what a StreamMeter for endpoint e reads of
// stream: the same in one write as in pieces of size, the same as the
// events read apart, and text it may charge for no less than it counts.
func checkStreamMeter(t *testing.T, e openai.Endpoint, stream []byte, size uint16) {
	t.Helper()
	whole, pieces := openai.StreamMeter{Endpoint: e}, openai.StreamMeter{Endpoint: e}
	whole.Write(stream)
	whole.End()
	step := int(size)%64 + 1
	for s := stream; len(s) > 0; {
		n := min(step, len(s))
		pieces.Write(s[:n])
		s = s[n:]
	}
	pieces.End()
	if whole.Metered.Usage != nil && pieces.Metered.Usage != nil && *whole.Metered.Usage == *pieces.Metered.Usage {
		whole.Metered.Usage = pieces.Metered.Usage
	}
	if whole.Metered != pieces.Metered {
		t.Errorf("%s: in one write %+v, in pieces of %d %+v", e, whole.Metered, step, pieces.Metered)
	}
	if want := sseMetered(e, stream); !sameMetered(whole.Metered, want) {
		t.Errorf("%s: metered %+v, usage %+v; server-sent events read as the standard reads them give %+v, usage %+v", e, whole.Metered, whole.Usage, want, want.Usage)
	}
	if whole.GeneratedBytes < whole.CompletionBytes {
		t.Errorf("%s: GeneratedBytes %d < CompletionBytes %d", e, whole.GeneratedBytes, whole.CompletionBytes)
	}
	if whole.GeneratedBytes > 3*len(stream) { // a bad byte of UTF-8 counts as U+FFFD's three
		t.Errorf("%s: GeneratedBytes %d > three times the stream's %d bytes", e, whole.GeneratedBytes, len(stream))
	}
}

// sseMetered meters stream independently of StreamMeter: its events as
// the server-sent events standard reads them (lines end in \r\n, \n or
// \r; an event's data lines join with \n; a blank line ends it; a last
// event without one counts too, an unended line not), each read as a
// whole answer.
func sseMetered(e openai.Endpoint, stream []byte) openai.Metered {
	var m openai.Metered
	var data [][]byte
	dispatch := func() {
		if data == nil {
			return
		}
		payload := bytes.Join(data, []byte("\n"))
		data = nil
		if string(payload) == "[DONE]" {
			m.Done = true
			return
		}
		a := openai.MeterAnswer(e, payload)
		m.Chunks++
		m.Done = m.Done || a.Done // a response's last event
		m.CompletionBytes += a.CompletionBytes
		m.GeneratedBytes += a.GeneratedBytes
		if a.Usage != nil {
			m.Usage = a.Usage
		}
	}
	for {
		i := bytes.IndexAny(stream, "\r\n")
		if i < 0 {
			break
		}
		line, next := stream[:i], i+1
		if stream[i] == '\r' && next < len(stream) && stream[next] == '\n' {
			next++
		}
		stream = stream[next:]
		if len(line) == 0 {
			dispatch()
		} else if p, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			data = append(data, bytes.TrimSpace(p))
		}
	}
	dispatch()
	return m
}

// sameMetered compares what a's and b's readings of a stream say, but
// its bytes.
func sameMetered(a, b openai.Metered) bool {
	if (a.Usage == nil) != (b.Usage == nil) || a.Usage != nil && *a.Usage != *b.Usage {
		return false
	}
	return a.CompletionBytes == b.CompletionBytes && a.GeneratedBytes == b.GeneratedBytes && a.Chunks == b.Chunks && a.Done == b.Done
}
