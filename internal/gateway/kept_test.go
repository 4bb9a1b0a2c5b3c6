package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/tidwall/gjson"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/gateway"
	"github.com/idlegrid/idlegrid/internal/metricstest"
)

// continuing asks the mock's model for a response to text that continues
// the response previous.
func continuing(text, previous string) responses.ResponseNewParams {
	p := responseParams(text)
	p.PreviousResponseID = oai.String(previous)
	return p
}

// sentInput is the input items the model server was last sent, by role
// (or type) and text.
func sentInput(t *testing.T, up *mock) []string {
	t.Helper()
	body := up.lastBody()
	if gjson.GetBytes(body, "previous_response_id").Exists() || gjson.GetBytes(body, "conversation").Exists() || gjson.GetBytes(body, "store").Raw != "false" {
		t.Errorf("the model server was sent %s; want no previous_response_id or conversation, store false", body)
	}
	var got []string
	for _, it := range gjson.GetBytes(body, "input").Array() {
		text := it.Get("content").Str
		if text == "" {
			text = it.Get("content.0.text").Str
		}
		got = append(got, it.Get("role").Str+": "+text)
	}
	return got
}

// itemText is the text of a listed input message's one part.
func itemText(it responses.ResponseItemUnion) string {
	m := it.AsMessage()
	if m.Type != "message" || len(m.Content) != 1 || m.Content[0].Type != "input_text" {
		return ""
	}
	return m.Content[0].Text
}

// TestGateway_responsesContinue: a response is kept for its renter, and a
// request that continues it (previous_response_id), whole or streamed,
// sends the model server the conversation whole: each response's input,
// then its output, then the new input. The response the renter gets names
// the gateway's ID, its previous response and store true, and can be read
// back, its input items listed, and deleted, after which the conversation
// cannot be continued. Another renter sees none of it.
func TestGateway_responsesContinue(t *testing.T) {
	f, up := mustSolo(t, nil)
	ctx := context.Background()
	sdk := f.sdk(f.RenterKey)

	first, err := sdk.Responses.New(ctx, responseParams("Hi"))
	if err != nil {
		t.Fatal(describe(err))
	}
	if !strings.HasPrefix(first.ID, "resp_") || first.ID == "resp_1" || !gjson.Get(first.RawJSON(), "store").Bool() {
		t.Errorf("first response %s: want the gateway's ID (not the provider's resp_1), store true", first.RawJSON())
	}

	stream := sdk.Responses.NewStreaming(ctx, continuing("And then?", first.ID))
	var second responses.Response
	var created string
	for stream.Next() {
		switch ev := stream.Current(); ev.Type {
		case "response.created":
			created = ev.Response.ID
		case "response.completed":
			second = ev.Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(describe(err))
	}
	want := []string{"user: Hi", "assistant: Hello from alpha.", "user: And then?"}
	if got := sentInput(t, up); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("continuing, the model server was sent %q; want %q", got, want)
	}
	if second.ID == "" || second.ID != created || second.ID == first.ID || second.PreviousResponseID != first.ID {
		t.Errorf("streamed response: created %q, completed %q continuing %q; want one new ID, continuing %s", created, second.ID, second.PreviousResponseID, first.ID)
	}

	third, err := sdk.Responses.New(ctx, continuing("Why?", second.ID))
	if err != nil {
		t.Fatal(describe(err))
	}
	if got := sentInput(t, up); len(got) != 5 || got[4] != "user: Why?" {
		t.Errorf("continuing the streamed response, the model server was sent %q; want both turns before the new input", got)
	}

	got, err := sdk.Responses.Get(ctx, second.ID, responses.ResponseGetParams{})
	if err != nil || got.ID != second.ID || got.OutputText() != "Hello from alpha." || got.PreviousResponseID != first.ID {
		t.Errorf("GET %s: %+v, %s; want it as answered", second.ID, got, describe(err))
	}
	items, err := sdk.Responses.InputItems.List(ctx, third.ID, responses.InputItemListParams{})
	if err != nil || len(items.Data) != 1 || items.Data[0].Role != "user" || items.Data[0].ID == "" || itemText(items.Data[0]) != "Why?" {
		t.Errorf("input items of the third: %+v, %s; want its own one user message, with an ID", items, describe(err))
	}

	other := f.sdk(f.mustRenter(t, "other"))
	if _, err := other.Responses.Get(ctx, second.ID, responses.ResponseGetParams{}); apiError(t, err).StatusCode != 404 {
		t.Errorf("another renter reading the response: %s; want 404", describe(err))
	}
	if _, err := other.Responses.New(ctx, continuing("Mine now", second.ID)); apiError(t, err).Param != "previous_response_id" {
		t.Errorf("another renter continuing the response: %s; want 400 naming previous_response_id", describe(err))
	}

	if err := sdk.Responses.Delete(ctx, first.ID); err != nil {
		t.Fatal(describe(err))
	}
	if _, err := sdk.Responses.Get(ctx, first.ID, responses.ResponseGetParams{}); apiError(t, err).StatusCode != 404 ||
		!strings.Contains(apiError(t, err).Message, "expired after 30 days") {
		t.Errorf("GET a deleted response: %s; want 404 saying why it may be gone", describe(err))
	}
	calls := up.Calls.Load()
	_, err = sdk.Responses.New(ctx, continuing("Still there?", third.ID))
	if e := apiError(t, err); e.StatusCode != 400 || e.Param != "previous_response_id" || !strings.Contains(e.Message, first.ID) || up.Calls.Load() != calls {
		t.Errorf("continuing a conversation whose first response was deleted: %d %s; want 400 naming it, no provider asked", e.StatusCode, e.Message)
	}
}

// TestGateway_responsesNotKept: a response asked not to be kept (store
// false) is answered with the gateway's ID and store false, and cannot be
// read back or continued; nor can one that expired.
func TestGateway_responsesNotKept(t *testing.T) {
	clock := &manualClock{now: time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)}
	f, _ := mustSolo(t, func(c *gateway.Config) { c.Clock, c.ResponseRetention = clock, time.Hour })
	ctx := context.Background()
	sdk := f.sdk(f.RenterKey)

	p := responseParams("Hi")
	p.Store = oai.Bool(false)
	unkept, err := sdk.Responses.New(ctx, p)
	if err != nil {
		t.Fatal(describe(err))
	}
	if !strings.HasPrefix(unkept.ID, "resp_") || unkept.ID == "resp_1" || gjson.Get(unkept.RawJSON(), "store").Raw != "false" {
		t.Errorf("response %s: want the gateway's ID, store false", unkept.RawJSON())
	}
	if _, err := sdk.Responses.Get(ctx, unkept.ID, responses.ResponseGetParams{}); apiError(t, err).StatusCode != 404 {
		t.Errorf("GET a response not kept: %s; want 404", describe(err))
	}
	if _, err := sdk.Responses.New(ctx, continuing("And then?", unkept.ID)); apiError(t, err).Param != "previous_response_id" {
		t.Errorf("continuing a response not kept: %s; want 400 naming previous_response_id", describe(err))
	}

	kept, err := sdk.Responses.New(ctx, responseParams("Hi"))
	if err != nil {
		t.Fatal(describe(err))
	}
	clock.advance(59 * time.Minute)
	if _, err := sdk.Responses.New(ctx, continuing("And then?", kept.ID)); err != nil {
		t.Errorf("continuing a response kept 59 minutes of 60: %s", describe(err))
	}
	clock.advance(2 * time.Minute)
	if _, err := sdk.Responses.Get(ctx, kept.ID, responses.ResponseGetParams{}); apiError(t, err).StatusCode != 404 {
		t.Errorf("GET a response past its retention: %s; want 404", describe(err))
	}
}

// TestGateway_responsesContinueTooLong: a continuation whose
// conversation and input come to over the body a request may be is
// refused (413) before any provider is asked; one whose kept responses
// come to over four times that is refused without the conversation being
// read whole.
func TestGateway_responsesContinueTooLong(t *testing.T) {
	const maxBody = 4 << 10
	f, up := mustSolo(t, func(c *gateway.Config) { c.MaxBodyBytes = maxBody })
	ctx := context.Background()
	sdk := f.sdk(f.RenterKey)
	// keepTurns keeps n turns of the renter's, each of about 3 KiB, as a
	// conversation, and returns the last one's ID.
	keepTurns := func(name string, n int) string {
		prev, now := "", time.Now()
		for i := range n {
			id := "resp_" + name + strconv.Itoa(i)
			in, _ := json.Marshal([]map[string]string{{"role": "user", "content": strings.Repeat("a", 3<<10)}})
			r := &idlegrid.KeptResponse{ID: id, RenterID: f.RenterID, Model: testModel, PreviousID: prev, Input: in,
				Response:  []byte(`{"id":"` + id + `","object":"response","status":"completed","output":[]}`),
				CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
			if err := f.Store.KeepResponse(ctx, r); err != nil {
				t.Fatal(err)
			}
			prev = id
		}
		return prev
	}
	for _, tc := range []struct {
		turns int
		says  string
	}{
		{2, "come to"},         // about 6 KiB: over the body, read whole
		{6, "characters kept"}, // about 18 KiB: over four times it, read in part
	} {
		_, err := sdk.Responses.New(ctx, continuing("And then?", keepTurns(strconv.Itoa(tc.turns)+"_", tc.turns)))
		if e := apiError(t, err); e.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(e.Message, tc.says) {
			t.Errorf("continuing %d turns of 3 KiB with %d bytes a request: %s; want 413 saying %q", tc.turns, maxBody, describe(err), tc.says)
		}
	}
	if body := up.lastBody(); body != nil {
		t.Errorf("the model server was sent %.100s…; want nothing", body)
	}
}

// TestGateway_responsesTruncation: with truncation auto, a conversation
// too long to send whole, chained or kept, is sent its latest items that
// fit, the oldest left out, instead of a 413; the model server is sent
// truncation auto too, to fit its context window.
func TestGateway_responsesTruncation(t *testing.T) {
	const maxBody = 4 << 10
	f, up := mustSolo(t, func(c *gateway.Config) { c.MaxBodyBytes = maxBody })
	ctx := context.Background()
	sdk := f.sdk(f.RenterKey)
	turn := func(i int) json.RawMessage {
		b, _ := json.Marshal(map[string]string{"role": "user", "content": strconv.Itoa(i) + strings.Repeat("a", 3<<10)})
		return b
	}
	prev, now := "", time.Now()
	for i := range 6 { // about 18 KiB: over four times the body
		id := "resp_t" + strconv.Itoa(i)
		r := &idlegrid.KeptResponse{ID: id, RenterID: f.RenterID, Model: testModel, PreviousID: prev, Input: json.RawMessage("[" + string(turn(i)) + "]"),
			Response:  []byte(`{"id":"` + id + `","object":"response","status":"completed","output":[]}`),
			CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
		if err := f.Store.KeepResponse(ctx, r); err != nil {
			t.Fatal(err)
		}
		prev = id
	}
	conv := &idlegrid.Conversation{ID: "conv_t", RenterID: f.RenterID, CreatedAt: now}
	var items []*idlegrid.ConversationItem
	for i := range 8 { // about 25 KiB: so far over four times the body that it is read in part
		it, _ := json.Marshal(map[string]string{"id": "msg_t" + strconv.Itoa(i), "type": "message", "role": "user", "content": strconv.Itoa(i) + strings.Repeat("a", 3<<10)})
		items = append(items, &idlegrid.ConversationItem{ID: "msg_t" + strconv.Itoa(i), Item: it, CreatedAt: now})
	}
	if err := f.Store.CreateConversation(ctx, conv, items); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, latest string
		p            responses.ResponseNewParams
	}{
		{"previous_response_id", "user: 5a", continuing("And then?", prev)},
		{"conversation", "user: 7a", inConversation("And then?", conv.ID)},
	} {
		name, p := c.name, c.p
		if _, err := sdk.Responses.New(ctx, p); apiError(t, err).StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("%s, too long, without truncation: %s; want 413", name, describe(err))
		}
		if _, err := sdk.Responses.New(ctx, p, option.WithJSONSet("truncation", "auto")); err != nil {
			t.Fatalf("%s, too long, with truncation auto: %s", name, describe(err))
		}
		body := up.lastBody()
		var got []string
		for _, it := range gjson.GetBytes(body, "input").Array() {
			got = append(got, it.Get("role").Str+": "+it.Get("content").Str)
		}
		if len(got) != 2 || !strings.HasPrefix(got[0], c.latest) || got[1] != "user: And then?" {
			t.Errorf("%s with truncation auto: the model server was sent %.60q; want the latest turn, then the new input", name, got)
		}
		if len(body) > maxBody || gjson.GetBytes(body, "truncation").Str != "auto" {
			t.Errorf("%s with truncation auto: the model server was sent %d bytes, truncation %q; want at most %d, auto", name, len(body), gjson.GetBytes(body, "truncation").Str, maxBody)
		}
	}
	if _, err := sdk.Responses.New(ctx, responseParams("x"), option.WithJSONSet("truncation", "sometimes")); apiError(t, err).Param != "truncation" {
		t.Errorf("truncation sometimes: %s; want 400 naming truncation", describe(err))
	}
}

// TestGateway_keptRoutes: the paths under /v1/responses/ a response has,
// in OpenAI's error format: a method a path does not take is 405 naming
// those it does, another path 404, cancelling a (complete) response 400,
// and each asks for the renter's key.
func TestGateway_keptRoutes(t *testing.T) {
	f, _ := mustSolo(t, nil)
	sdk := f.sdk(f.RenterKey)
	kept, err := sdk.Responses.New(context.Background(), responseParams("Hi"))
	if err != nil {
		t.Fatal(describe(err))
	}
	for _, tt := range []struct {
		method, path string
		key          bool
		status       int
		allow        string
	}{
		{"GET", "/v1/responses/" + kept.ID, false, 401, ""},
		{"GET", "/v1/responses/" + kept.ID + "/input_items?limit=0", true, 400, ""},
		{"GET", "/v1/responses/" + kept.ID + "?stream=true", true, 400, ""},
		{"POST", "/v1/responses/" + kept.ID, true, 405, "GET, DELETE"},
		{"DELETE", "/v1/responses/" + kept.ID + "/input_items", true, 405, "GET"},
		{"POST", "/v1/responses/" + kept.ID + "/cancel", true, 400, ""},
		{"POST", "/v1/responses/resp_none/cancel", true, 404, ""},
		{"GET", "/v1/responses/" + kept.ID + "/other", true, 404, ""},
	} {
		req, _ := http.NewRequest(tt.method, f.URL+tt.path, nil)
		if tt.key {
			req.Header.Set("Authorization", "Bearer "+f.RenterKey)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e struct{ Error struct{ Message string } }
		if resp.StatusCode != tt.status || resp.Header.Get("Allow") != tt.allow || json.Unmarshal(body, &e) != nil || e.Error.Message == "" {
			t.Errorf("%s %s: %d (Allow %q) %s; want %d (Allow %q) in OpenAI's error format", tt.method, tt.path,
				resp.StatusCode, resp.Header.Get("Allow"), body, tt.status, tt.allow)
		}
	}
}

// TestGateway_inputItemsPages: a response's input items, listed a page at
// a time either way, as OpenAI's SDK pages them.
func TestGateway_inputItemsPages(t *testing.T) {
	f, _ := mustSolo(t, nil)
	ctx := context.Background()
	sdk := f.sdk(f.RenterKey)
	var input responses.ResponseInputParam
	for _, text := range []string{"one", "two", "three", "four", "five"} {
		input = append(input, responses.ResponseInputItemParamOfMessage(text, responses.EasyInputMessageRoleUser))
	}
	p := responseParams("")
	p.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: input}
	kept, err := sdk.Responses.New(ctx, p)
	if err != nil {
		t.Fatal(describe(err))
	}
	for order, want := range map[responses.InputItemListParamsOrder]string{
		responses.InputItemListParamsOrderAsc:  "one two three four five",
		responses.InputItemListParamsOrderDesc: "five four three two one",
	} {
		var got []string
		pages := sdk.Responses.InputItems.ListAutoPaging(ctx, kept.ID, responses.InputItemListParams{Limit: oai.Int(2), Order: order})
		for pages.Next() {
			got = append(got, itemText(pages.Current()))
		}
		if err := pages.Err(); err != nil || strings.Join(got, " ") != want {
			t.Errorf("order %s, two a page: %q, %s; want %q", order, got, describe(err), want)
		}
	}
}

// unkeepingStore is a store that cannot keep responses.
type unkeepingStore struct{ idlegrid.Store }

func (unkeepingStore) KeepResponse(context.Context, *idlegrid.KeptResponse) error {
	return idlegrid.Errorf(idlegrid.EUNAVAILABLE, "the disk is full")
}

// TestGateway_responseKeepFails: a response the store cannot keep is
// answered all the same, whole and streamed, and counted; continuing it
// is then a 400.
func TestGateway_responseKeepFails(t *testing.T) {
	reg := prometheus.NewRegistry()
	f, _ := mustSolo(t, func(c *gateway.Config) { c.Store, c.Metrics = unkeepingStore{c.Store}, reg })
	ctx := context.Background()
	sdk := f.sdk(f.RenterKey)
	whole, err := sdk.Responses.New(ctx, responseParams("Hi"))
	if err != nil || whole.OutputText() != "Hello from alpha." {
		t.Fatalf("whole: %v, %s; want alpha's answer", whole, describe(err))
	}
	stream := sdk.Responses.NewStreaming(ctx, responseParams("Hi"))
	var completed bool
	for stream.Next() {
		completed = completed || stream.Current().Type == "response.completed"
	}
	if err := stream.Err(); err != nil || !completed {
		t.Fatalf("streamed: completed %v, %s; want the whole stream", completed, describe(err))
	}
	if n := metricstest.Value(t, reg, "idlegrid_inference_responses_not_kept_total", nil); n != 2 {
		t.Errorf("idlegrid_inference_responses_not_kept_total = %v, want 2", n)
	}
	if _, err := sdk.Responses.New(ctx, continuing("And then?", whole.ID)); apiError(t, err).Param != "previous_response_id" {
		t.Errorf("continuing a response not kept: %s; want 400 naming previous_response_id", describe(err))
	}
}
