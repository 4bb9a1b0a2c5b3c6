package openai_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/idlegrid/idlegrid/internal/openai"
)

// drop passes stream through a UsageDropper in pieces of size.
func drop(stream string, size int) string {
	var d openai.UsageDropper
	var out bytes.Buffer
	for s := stream; len(s) > 0; {
		n := min(size, len(s))
		out.Write(d.Pass([]byte(s[:n])))
		s = s[n:]
	}
	out.Write(d.Rest())
	return out.String()
}

// The usage event, and only it, is dropped, however the stream arrives:
// events pass byte for byte as they end, with \n or \r\n lines, data on
// several lines, comments and what is not JSON; an event never ended
// passes at the end.
func TestUsageDropper(t *testing.T) {
	keep := "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n" +
		": keep-alive\n\n" +
		"data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}],\"usage\":null}\r\n\r\n" +
		"data: {\"choices\":[{\"delta\":{}}],\"usage\":{\"prompt_tokens\":1}}\n\n" + // choices: not usage-only
		"event: note\ndata: not json, \"usage\":{}\n\n" +
		"data: {\"choices\":[],\n" + "data: \"usage\":{\"x\":1}}\n\n" // usage-only, on two lines
	usage := "data: {\"id\":\"c\",\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":2,\"total_tokens\":14}}\n\n"
	done := "data: [DONE]\n\n"
	stream := keep + usage + done + "data: {\"unended\":"
	want := strings.TrimSuffix(keep, "data: {\"choices\":[],\n"+"data: \"usage\":{\"x\":1}}\n\n") + done + "data: {\"unended\":"
	for _, size := range []int{1, 2, 3, 7, 64, len(stream)} {
		if got := drop(stream, size); got != want {
			t.Errorf("pieces of %d:\n%q\nwant\n%q", size, got, want)
		}
	}
	// Whole events, none usage-only, pass as the very slice given.
	var whole openai.UsageDropper
	p := []byte(done)
	if got := whole.Pass(p); len(got) != len(p) || &got[0] != &p[0] {
		t.Errorf("whole events came back copied or changed: %q", got)
	}
}

// Lines may end in \r alone, as server-sent events allow: the usage event
// is dropped all the same, in any pieces, even when the \r that ends it
// ends the stream.
func TestUsageDropper_carriageReturns(t *testing.T) {
	content := "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\r\r"
	usage := "data: {\"choices\":[],\"usage\":{\"total_tokens\":3}}\r\r"
	mixed := "data: {\"choices\":[{\"delta\":{\"content\":\"!\"}}]}\r\n\r"
	for _, c := range []struct{ stream, want string }{
		{content + usage + "data: [DONE]\r\r", content + "data: [DONE]\r\r"},
		{content + mixed + "\n" + usage, content + mixed + "\n"},
		{content + usage, content},
		{mixed + usage + "data: [DONE]\r", mixed + "data: [DONE]\r"},
	} {
		for _, size := range []int{1, 2, 3, 5, len(c.stream)} {
			if got := drop(c.stream, size); got != c.want {
				t.Errorf("%q in pieces of %d:\n%q\nwant\n%q", c.stream, size, got, c.want)
			}
		}
	}
}

// A usage event is told by its keys as a JSON decoder reads them: a key
// spelt with escapes is the same key; an event with any "choices" key that
// holds choices passes.
func TestUsageDropper_keys(t *testing.T) {
	for ev, dropped := range map[string]bool{
		`{"choices":[],"\u0075sage":{"total_tokens":3}}`:                   true,
		`{"\u0063hoices":[],"usage":{"total_tokens":3}}`:                   true,
		`{"choices":[],"choices":[{"delta":{"content":"x"}}],"usage":{}}`:  false,
		`{"choices":[{"delta":{"content":"x"}}],"choices":[],"usage":{}}`:  false,
		`{"choices":null,"usage":{}}`:                                      false,
		`{"usage":{}}`:                                                     false,
		`{"choices":[],"usage":null}`:                                      false,
		`{"choices":[],"usage":{}`:                                         false, // not JSON
		`{"choices":[ ],"usage":{"prompt_tokens":1},"id":"\u00e9t\u00e9"}`: true,
	} {
		stream := "data: " + ev + "\n\n"
		want := stream
		if dropped {
			want = ""
		}
		if got := drop(stream, len(stream)); got != want {
			t.Errorf("%s: passed %q, want %q", ev, got, want)
		}
	}
}

// An event that outgrows 1 MiB passes as it comes, unjudged, and the events
// after it are judged again.
func TestUsageDropper_longEvent(t *testing.T) {
	long := "data: {\"choices\":[],\"usage\":{},\"pad\":\"" + strings.Repeat("x", 1<<20) + "\"}\n\n"
	usage := "data: {\"choices\":[],\"usage\":{\"total_tokens\":3}}\n\n"
	if got, want := drop(long+usage+"data: [DONE]\n\n", 4096), long+"data: [DONE]\n\n"; got != want {
		t.Errorf("got %d bytes, want %d: the long event whole, the usage dropped", len(got), len(want))
	}
}

// However a stream arrives in pieces, what passes is the same.
func FuzzUsageDropper(f *testing.F) {
	f.Add("data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"choices\":[],\"usage\":{}}\r\n\r\ndata: [DONE]\n\n", uint8(3))
	f.Add("\n\r\n\n\ndata:{\"choices\":[],\"usage\":{}}\n\n", uint8(1))
	f.Add("x\n\r\ndata:{\"choices\":[],\"usage\":{}}\r\r\ndata:{\"choices\":[],\"\\u0075sage\":{}}\n\r", uint8(2))
	f.Fuzz(func(t *testing.T, stream string, size uint8) {
		whole := drop(stream, len(stream)+1)
		if got := drop(stream, int(size)%16+1); got != whole {
			t.Errorf("in pieces of %d:\n%q\nin one:\n%q", int(size)%16+1, got, whole)
		}
		if len(whole) > len(stream) {
			t.Errorf("%d bytes out of %d in", len(whole), len(stream))
		}
	})
}

// BenchmarkUsageDropper is the usage dropper's cost for one event that is
// not a usage event: passed as it came.
func BenchmarkUsageDropper(b *testing.B) {
	var d openai.UsageDropper
	for b.Loop() {
		d.Pass(benchEvent)
	}
}
