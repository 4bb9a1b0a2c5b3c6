package openai_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/idlegrid/idlegrid/internal/openai"
)

func TestRequest_InputItems(t *testing.T) {
	for body, want := range map[string]string{
		`{"model":"m","input":"Hi \"there\""}`:                  `[{"role":"user","content":"Hi \"there\""}]`,
		`{"model":"m","input":[{"role":"user","content":"x"}]}`: `[{"role":"user","content":"x"}]`,
	} {
		got, err := mustParse(t, openai.Responses, []byte(body)).InputItems()
		if err != nil || string(got) != want {
			t.Errorf("InputItems of %s = %s, %v; want %s", body, got, err, want)
		}
	}
}

// TestRequest_Continue: the conversation so far goes before the request's
// own input, previous_response_id goes, the rest of the body stays, and
// the estimates are the whole conversation's.
func TestRequest_Continue(t *testing.T) {
	r := mustParse(t, openai.Responses, []byte(`{"model":"m","instructions":"Be brief.","previous_response_id":"resp_1","store":false,"input":"And then?","temperature":0.5}`))
	history := []json.RawMessage{
		json.RawMessage(`{"role":"user","content":"` + strings.Repeat("long story ", 100) + `"}`),
		json.RawMessage(`{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"output_text","text":"Once."}]}`),
	}
	own, err := r.InputItems()
	if err != nil {
		t.Fatal(err)
	}
	items, err := openai.ItemList(own)
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.Continue(history, items)
	if err != nil {
		t.Fatal(err)
	}
	body := c.Body()
	input := gjson.GetBytes(body, "input").Array()
	if len(input) != 3 || input[1].Get("id").Str != "msg_1" || input[2].Get("content").Str != "And then?" ||
		gjson.GetBytes(body, "previous_response_id").Exists() || gjson.GetBytes(body, "temperature").Float() != 0.5 ||
		gjson.GetBytes(body, "instructions").Str != "Be brief." {
		t.Errorf("continued body %s; want the history, then the input, no previous_response_id, the rest kept", body)
	}
	if c.PreviousResponseID != "resp_1" || c.Store || c.PromptTokens < r.PromptTokens+200 {
		t.Errorf("continued: previous %q, store %v, %d prompt tokens (alone %d); want resp_1, false, the history counted",
			c.PreviousResponseID, c.Store, c.PromptTokens, r.PromptTokens)
	}
}

func TestEcho(t *testing.T) {
	obj := []byte(`{"id":"resp_up","object":"response","store":false,"previous_response_id":null,"output":[]}`)
	got, err := openai.Echo(obj, openai.Echoed{ID: "resp_gw", Store: true, Previous: "resp_prev", Background: true})
	if err != nil || gjson.GetBytes(got, "id").Str != "resp_gw" || !gjson.GetBytes(got, "store").Bool() ||
		gjson.GetBytes(got, "previous_response_id").Str != "resp_prev" || gjson.GetBytes(got, "conversation").Type != gjson.Null ||
		!gjson.GetBytes(got, "background").Bool() || !json.Valid(got) {
		t.Errorf("Echo = %s, %v", got, err)
	}
	got, err = openai.Echo([]byte(`{"object":"response"}`), openai.Echoed{ID: "resp_gw", Conversation: "conv_1"})
	if err != nil || gjson.GetBytes(got, "previous_response_id").Type != gjson.Null || gjson.GetBytes(got, "store").Raw != "false" ||
		gjson.GetBytes(got, "conversation.id").Str != "conv_1" || gjson.GetBytes(got, "background").Exists() {
		t.Errorf("Echo without the fields = %s, %v; want them added, the conversation named", got, err)
	}
	if _, err := openai.Echo([]byte(`[1]`), openai.Echoed{ID: "resp_gw", Store: true}); err == nil {
		t.Error("Echo of a list: no error")
	}
}

// responseStream is a Responses API stream, as vLLM sends one.
const responseStream = "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_up\",\"status\":\"in_progress\",\"output\":[]}}\n\n" +
	"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"Hi\"}\n\n" +
	"event: response.completed\r\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_up\",\"store\":false,\"output\":[{\"type\":\"message\"}]}}\r\n\r\n"

// TestResponseEvents: however the stream is cut into pieces, the events
// that carry the response pass echoed, lines and line ends kept, and the
// last one is held back until taken, the response with it.
func TestResponseEvents(t *testing.T) {
	for cut := range len(responseStream) {
		f := &openai.ResponseEvents{Echoed: openai.Echoed{ID: "resp_gw", Previous: "resp_prev", Store: true}}
		var out strings.Builder
		var final, response []byte
		for _, piece := range []string{responseStream[:cut], responseStream[cut:]} {
			out.Write(f.Pass([]byte(piece)))
			if e, r := f.TakeFinal(); e != nil {
				final, response = e, r
				if !strings.Contains(out.String(), `"delta":"Hi"`) {
					t.Fatalf("cut at %d: the last event came before the delta", cut)
				}
			}
		}
		out.Write(f.Rest())
		if e, _ := f.TakeFinal(); e != nil {
			t.Fatalf("cut at %d: the last event taken twice", cut)
		}
		got := out.String()
		if strings.Count(got, `"id":"resp_gw"`) != 1 || strings.Contains(got, "resp_up") || !strings.HasPrefix(got, "event: response.created\ndata: {") ||
			!strings.HasSuffix(got, "\"delta\":\"Hi\"}\n\n") {
			t.Errorf("cut at %d: passed %q; want the created event echoed, the delta as it came, the last held back", cut, got)
		}
		if !strings.HasPrefix(string(final), "event: response.completed\r\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_gw\",\"store\":true,") ||
			!strings.HasSuffix(string(final), "\r\n\r\n") || gjson.GetBytes(response, "previous_response_id").Str != "resp_prev" {
			t.Errorf("cut at %d: last event %q, response %s; want it echoed, its line ends kept", cut, final, response)
		}
	}
}

// TestResponseEvents_background: a background response's stream drops
// the provider's response.created (the gateway's own began it), and its
// last response object says background true.
func TestResponseEvents_background(t *testing.T) {
	f := &openai.ResponseEvents{Echoed: openai.Echoed{ID: "resp_gw", Store: true, Background: true}}
	out := string(f.Pass([]byte(responseStream))) + string(f.Rest())
	final, response := f.TakeFinal()
	if strings.Contains(out, "response.created") || !strings.Contains(out, `"delta":"Hi"`) ||
		!strings.Contains(string(final), `"background":true`) || !gjson.GetBytes(response, "background").Bool() {
		t.Errorf("a background stream passed %q, then %q; want no response.created, the delta, the last response background", out, final)
	}
}

// TestResponseEvents_unended: a last event the stream never ends is held
// back all the same; one past MaxEvent passes unechoed, and so does the
// rest, with nothing to keep.
func TestResponseEvents_unended(t *testing.T) {
	f := &openai.ResponseEvents{Echoed: openai.Echoed{ID: "resp_gw", Store: true}}
	unended := strings.TrimSuffix(responseStream, "\r\n\r\n")
	out := string(f.Pass([]byte(unended))) + string(f.Rest())
	if final, r := f.TakeFinal(); final == nil || gjson.GetBytes(r, "id").Str != "resp_gw" || strings.Contains(out, "completed") {
		t.Errorf("unended last event: passed %q, held %q", out, final)
	}
	f = &openai.ResponseEvents{Echoed: openai.Echoed{ID: "resp_gw", Store: true}, MaxEvent: 40}
	out = string(f.Pass([]byte(responseStream))) + string(f.Rest())
	if final, _ := f.TakeFinal(); final != nil || out != responseStream {
		t.Errorf("events past MaxEvent: passed %q, held %q; want all as they came", out, final)
	}
}

// filterEvents passes stream through a ResponseEvents in pieces of size
// bytes, as the gateway does: what each piece passes, then the last event
// once it can be taken. It returns what went on, the response, and
// whether the last event was taken more than once.
func filterEvents(stream string, size, maxEvent int) (out, response string, twice bool) {
	f := &openai.ResponseEvents{Echoed: openai.Echoed{ID: "resp_gw", Previous: "resp_prev", Store: true}, MaxEvent: maxEvent}
	var b strings.Builder
	pass := func(p []byte) {
		b.Write(p)
		if e, r := f.TakeFinal(); e != nil {
			twice = twice || response != ""
			b.Write(e)
			response = string(r)
		}
	}
	for len(stream) > 0 {
		n := min(size, len(stream))
		pass(f.Pass([]byte(stream[:n])))
		stream = stream[n:]
	}
	pass(f.Rest())
	return b.String(), response, twice
}

// FuzzResponseEvents holds the filter to what it must do with any stream
// a provider sends: the same whatever the pieces, the last event taken at
// most once, a response echoed only as JSON, and a stream without a
// response object passed byte for byte.
func FuzzResponseEvents(f *testing.F) {
	f.Add(responseStream, uint8(7), uint16(0))
	f.Add(strings.ReplaceAll(responseStream, "\n", "\r"), uint8(1), uint16(60))
	f.Add("data: {\"type\":\"response.failed\",\"response\":{}}\n\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":1}}\n\n", uint8(3), uint16(0))
	f.Fuzz(func(t *testing.T, stream string, size uint8, maxEvent uint16) {
		wholeOut, wholeResp, _ := filterEvents(stream, len(stream)+1, int(maxEvent))
		out, resp, twice := filterEvents(stream, int(size)%16+1, int(maxEvent))
		if out != wholeOut || resp != wholeResp {
			t.Errorf("in pieces of %d: %q, response %q; in one: %q, response %q", int(size)%16+1, out, resp, wholeOut, wholeResp)
		}
		if twice {
			t.Error("the last event was taken twice")
		}
		if resp != "" && (!json.Valid([]byte(resp)) || gjson.Get(resp, "id").Str != "resp_gw") {
			t.Errorf("response %q: want JSON with the gateway's ID", resp)
		}
		if !strings.Contains(stream, "response") && out != stream {
			t.Errorf("a stream with no response object came out as %q", out)
		}
	})
}

// TestServerFailed: a response failed for its model server's error when
// it says so, names a code that is not the request's, or names none; not
// when the request was at fault, nor when it did not fail.
func TestServerFailed(t *testing.T) {
	for obj, want := range map[string]bool{
		`{"status":"failed","error":{"code":"server_error","message":"the engine died"}}`: true,
		`{"status":"failed","error":{"code":"vector_store_timeout","message":"slow"}}`:    true,
		`{"status":"failed","error":{"code":"rate_limit_exceeded","message":"busy"}}`:     true,
		`{"status":"failed","error":null}`:                                                true,
		`{"status":"failed"}`:                                                             true,
		`{"status":"failed","error":{"code":"invalid_prompt","message":"too long"}}`:      false,
		`{"status":"failed","error":{"code":"invalid_base64_image","message":"bad"}}`:     false,
		`{"status":"failed","error":{"code":"image_too_large","message":"big"}}`:          false,
		`{"status":"failed","error":{"code":"failed_to_download_image","message":"404"}}`: false,
		`{"status":"completed","error":null}`:                                             false,
		`{"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"}}`:     false,
	} {
		if got := openai.ServerFailed([]byte(obj)); got != want {
			t.Errorf("ServerFailed(%s) = %v, want %v", obj, got, want)
		}
	}
}
