package gateway_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/conversations"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/tidwall/gjson"

	"github.com/idlegrid/idlegrid/client"
	"github.com/idlegrid/idlegrid/internal/gateway"
	"github.com/idlegrid/idlegrid/internal/metricstest"
)

// userItem is a user message, as a conversation's item.
func userItem(text string) responses.ResponseInputItemUnionParam {
	return responses.ResponseInputItemParamOfMessage(text, responses.EasyInputMessageRoleUser)
}

// inConversation is responseParams continuing conversation conv.
func inConversation(text, conv string) responses.ResponseNewParams {
	p := responseParams(text)
	p.Conversation = responses.ResponseNewParamsConversationUnion{OfString: oai.String(conv)}
	return p
}

// conversationText is the items of conversation conv, the first first,
// by role (or type) and text.
func conversationText(t *testing.T, sdk oai.Client, conv string) []string {
	t.Helper()
	page, err := sdk.Conversations.Items.List(context.Background(), conv, conversations.ItemListParams{Order: "asc", Limit: oai.Int(100)})
	if err != nil {
		t.Fatalf("listing the items of %s: %s", conv, describe(err))
	}
	var got []string
	for _, it := range page.Data {
		item := gjson.Parse(it.RawJSON())
		if item.Get("id").Str == "" || item.Get("type").Str == "" {
			t.Errorf("item %s: want an id and a type", it.RawJSON())
		}
		got = append(got, item.Get("role").Str+": "+item.Get("content.0.text").Str)
	}
	return got
}

// TestGateway_conversations: a renter makes a conversation with its first
// items; a response that names it sends the model server its items before
// the new input, and adds that input and its output to it, so the next
// sees both turns. Items are read, deleted (the next response no longer
// sees them), its metadata set, and the conversation deleted, after which
// no response can name it. Another renter sees none of it.
func TestGateway_conversations(t *testing.T) {
	f, up := mustSolo(t, nil)
	ctx := context.Background()
	sdk := f.sdk(f.RenterKey)

	conv, err := sdk.Conversations.New(ctx, conversations.ConversationNewParams{
		Items: []responses.ResponseInputItemUnionParam{userItem("Hi")}, Metadata: shared.Metadata{"topic": "tea"},
	})
	if err != nil {
		t.Fatal(describe(err))
	}
	if !strings.HasPrefix(conv.ID, "conv_") || gjson.Get(conv.RawJSON(), "metadata.topic").Str != "tea" || conv.CreatedAt == 0 {
		t.Errorf("conversation %s: want a conv_ ID, its metadata, when it was made", conv.RawJSON())
	}

	first, err := sdk.Responses.New(ctx, inConversation("And then?", conv.ID))
	if err != nil {
		t.Fatal(describe(err))
	}
	if got, want := sentInput(t, up), []string{"user: Hi", "user: And then?"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("in the conversation, the model server was sent %q; want %q", got, want)
	}
	if gjson.Get(first.RawJSON(), "conversation.id").Str != conv.ID || first.PreviousResponseID != "" {
		t.Errorf("response %s: want it to name its conversation", first.RawJSON())
	}
	want := []string{"user: Hi", "user: And then?", "assistant: Hello from alpha."}
	if got := conversationText(t, sdk, conv.ID); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("after the response, the conversation holds %q; want %q", got, want)
	}

	stream := sdk.Responses.NewStreaming(ctx, inConversation("Why?", conv.ID))
	for stream.Next() {
	}
	if err := stream.Err(); err != nil {
		t.Fatal(describe(err))
	}
	if got := sentInput(t, up); len(got) != 4 || got[2] != "assistant: Hello from alpha." || got[3] != "user: Why?" {
		t.Errorf("streamed in the conversation, the model server was sent %q; want its three items, then the new input", got)
	}
	if got := conversationText(t, sdk, conv.ID); len(got) != 5 {
		t.Errorf("after the streamed response, the conversation holds %q; want 5 items", got)
	}

	var paged []string
	pager := sdk.Conversations.Items.ListAutoPaging(ctx, conv.ID, conversations.ItemListParams{Limit: oai.Int(2)})
	for pager.Next() {
		paged = append(paged, pager.Current().ID)
	}
	all, err := sdk.Conversations.Items.List(ctx, conv.ID, conversations.ItemListParams{Order: "asc", Limit: oai.Int(100)})
	if err != nil {
		t.Fatal(describe(err))
	}
	var newestFirst []string
	for _, it := range slices.Backward(all.Data) {
		newestFirst = append(newestFirst, it.ID)
	}
	if err := pager.Err(); err != nil || len(newestFirst) != 5 || !slices.Equal(paged, newestFirst) {
		t.Errorf("paging two at a time, the newest first: %q, %s; want %q", paged, describe(err), newestFirst)
	}

	page, err := sdk.Conversations.Items.List(ctx, conv.ID, conversations.ItemListParams{Limit: oai.Int(1)})
	if err != nil || len(page.Data) != 1 || !page.HasMore || gjson.Get(page.Data[0].RawJSON(), "role").Str != "assistant" {
		t.Fatalf("the newest item: %s, %s; want the last answer, more after it", page.RawJSON(), describe(err))
	}
	last := page.Data[0].ID
	got, err := sdk.Conversations.Items.Get(ctx, conv.ID, last, conversations.ItemGetParams{})
	if err != nil || got.ID != last || got.Role != "assistant" {
		t.Errorf("GET item %s: %+v, %s", last, got, describe(err))
	}
	oldest, err := sdk.Conversations.Items.List(ctx, conv.ID, conversations.ItemListParams{Order: "asc", Limit: oai.Int(1)})
	if err != nil || len(oldest.Data) != 1 {
		t.Fatalf("the oldest item: %s, %s", oldest.RawJSON(), describe(err))
	}
	if c, err := sdk.Conversations.Items.Delete(ctx, conv.ID, oldest.Data[0].ID); err != nil || c.ID != conv.ID {
		t.Errorf("deleting the first item: %+v, %s; want the conversation", c, describe(err))
	}
	if _, err := sdk.Responses.New(ctx, inConversation("Again?", conv.ID)); err != nil {
		t.Fatal(describe(err))
	}
	if got := sentInput(t, up); len(got) != 5 || got[0] != "user: And then?" {
		t.Errorf("after its first item was deleted, the model server was sent %q; want the rest, then the new input", got)
	}

	updated, err := sdk.Conversations.Update(ctx, conv.ID, conversations.ConversationUpdateParams{Metadata: shared.Metadata{"topic": "coffee"}})
	if err != nil || gjson.Get(updated.RawJSON(), "metadata.topic").Str != "coffee" {
		t.Errorf("update: %+v, %s", updated, describe(err))
	}
	if read, err := sdk.Conversations.Get(ctx, conv.ID); err != nil || gjson.Get(read.RawJSON(), "metadata.topic").Str != "coffee" || read.CreatedAt != conv.CreatedAt {
		t.Errorf("read back: %+v, %s; want the new metadata", read, describe(err))
	}

	other := f.sdk(f.mustRenter(t, "other"))
	if _, err := other.Conversations.Get(ctx, conv.ID); apiError(t, err).StatusCode != 404 {
		t.Errorf("another renter reading the conversation: %s; want 404", describe(err))
	}
	if _, err := other.Conversations.Items.List(ctx, conv.ID, conversations.ItemListParams{}); apiError(t, err).StatusCode != 404 {
		t.Errorf("another renter listing its items: %s; want 404", describe(err))
	}
	if _, err := other.Conversations.Delete(ctx, conv.ID); apiError(t, err).StatusCode != 404 {
		t.Errorf("another renter deleting it: %s; want 404", describe(err))
	}
	if _, err := other.Responses.New(ctx, inConversation("Mine now", conv.ID)); apiError(t, err).Param != "conversation" {
		t.Errorf("another renter naming it in a response: %s; want 400 naming conversation", describe(err))
	}

	if gone, err := sdk.Conversations.Delete(ctx, conv.ID); err != nil || !gone.Deleted || gone.ID != conv.ID {
		t.Errorf("delete: %+v, %s", gone, describe(err))
	}
	if _, err := sdk.Conversations.Get(ctx, conv.ID); apiError(t, err).StatusCode != 404 {
		t.Errorf("reading a deleted conversation: %s; want 404", describe(err))
	}
	calls := up.Calls.Load()
	if _, err := sdk.Responses.New(ctx, inConversation("Still there?", conv.ID)); apiError(t, err).Param != "conversation" {
		t.Errorf("naming a deleted conversation: %s; want 400 naming conversation", describe(err))
	}
	if n := up.Calls.Load() - calls; n != 0 {
		t.Errorf("the model server got %d requests for a deleted conversation, want none", n)
	}
}

// TestGateway_conversationsRefused: what a conversation cannot take is a
// 400 (or 409 for an item already in it) naming the field, before
// anything is kept or any provider asked.
func TestGateway_conversationsRefused(t *testing.T) {
	f, up := mustSolo(t, nil)
	ctx := context.Background()
	sdk := f.sdk(f.RenterKey)
	conv, err := sdk.Conversations.New(ctx, conversations.ConversationNewParams{
		Items: []responses.ResponseInputItemUnionParam{userItem("Hi")},
	}, option.WithJSONSet("items.0.id", "msg_mine"))
	if err != nil {
		t.Fatal(describe(err))
	}
	many := shared.Metadata{}
	for i := range 17 {
		many[fmt.Sprint("k", i)] = "v"
	}
	items21 := make([]responses.ResponseInputItemUnionParam, 21)
	for i := range items21 {
		items21[i] = userItem("x")
	}
	for _, c := range []struct {
		name   string
		call   func() error
		status int
		param  string
	}{
		{"too much metadata", func() error {
			_, err := sdk.Conversations.New(ctx, conversations.ConversationNewParams{Metadata: many})
			return err
		}, 400, "metadata"},
		{"a metadata value too long", func() error {
			_, err := sdk.Conversations.Update(ctx, conv.ID, conversations.ConversationUpdateParams{Metadata: shared.Metadata{"k": strings.Repeat("v", 513)}})
			return err
		}, 400, "metadata.k"},
		{"no metadata to update", func() error {
			_, err := sdk.Conversations.Update(ctx, conv.ID, conversations.ConversationUpdateParams{}, option.WithJSONDel("metadata"))
			return err
		}, 400, "metadata"},
		{"21 items", func() error {
			_, err := sdk.Conversations.New(ctx, conversations.ConversationNewParams{Items: items21})
			return err
		}, 400, "items"},
		{"an item with no type", func() error {
			_, err := sdk.Conversations.Items.New(ctx, conv.ID, conversations.ItemNewParams{Items: []responses.ResponseInputItemUnionParam{userItem("x")}},
				option.WithJSONSet("items", []any{map[string]any{"content": "x"}}))
			return err
		}, 400, "items[0].type"},
		{"no items to add", func() error {
			_, err := sdk.Conversations.Items.New(ctx, conv.ID, conversations.ItemNewParams{}, option.WithJSONSet("items", []any{}))
			return err
		}, 400, "items"},
		{"an unknown field", func() error {
			_, err := sdk.Conversations.New(ctx, conversations.ConversationNewParams{}, option.WithJSONSet("title", "x"))
			return err
		}, 400, "title"},
		{"an item already in it", func() error {
			_, err := sdk.Conversations.Items.New(ctx, conv.ID, conversations.ItemNewParams{Items: []responses.ResponseInputItemUnionParam{userItem("x")}},
				option.WithJSONSet("items.0.id", "msg_mine"))
			return err
		}, 409, "items[0].id"},
		{"a response's input already in it", func() error {
			_, err := sdk.Responses.New(ctx, inConversation("x", conv.ID), option.WithJSONSet("input", []any{map[string]any{"id": "msg_mine", "role": "user", "content": "x"}}))
			return err
		}, 400, "input[0].id"},
		{"a conversation with previous_response_id", func() error {
			_, err := sdk.Responses.New(ctx, inConversation("x", conv.ID), option.WithJSONSet("previous_response_id", "resp_1"))
			return err
		}, 400, "conversation"},
		{"a conversation object without its id", func() error {
			_, err := sdk.Responses.New(ctx, responseParams("x"), option.WithJSONSet("conversation", map[string]any{}))
			return err
		}, 400, "conversation.id"},
		{"an unknown page start", func() error {
			_, err := sdk.Conversations.Items.List(ctx, conv.ID, conversations.ItemListParams{After: oai.String("msg_none")})
			return err
		}, 400, "after"},
		{"an unknown item", func() error {
			_, err := sdk.Conversations.Items.Get(ctx, conv.ID, "msg_none", conversations.ItemGetParams{})
			return err
		}, 404, ""},
	} {
		e := apiError(t, c.call())
		if e.StatusCode != c.status || e.Param != c.param {
			t.Errorf("%s: %d %s (param %q); want %d naming %q", c.name, e.StatusCode, e.Message, e.Param, c.status, c.param)
		}
	}
	if got := conversationText(t, sdk, conv.ID); len(got) != 1 {
		t.Errorf("the conversation holds %q after the refusals; want its one item", got)
	}
	if n := up.Calls.Load(); n != 0 {
		t.Errorf("the model server got %d requests, want none", n)
	}
	for _, c := range []struct{ method, path, allow string }{
		{http.MethodPut, "/v1/conversations/" + conv.ID, "GET, POST, DELETE"},
		{http.MethodDelete, "/v1/conversations/" + conv.ID + "/items", "GET, POST"},
		{http.MethodPost, "/v1/conversations/" + conv.ID + "/items/msg_mine", "GET, DELETE"},
		{http.MethodGet, "/v1/conversations", "POST"},
	} {
		req, _ := http.NewRequest(c.method, f.URL+c.path, nil)
		req.Header.Set("Authorization", "Bearer "+f.RenterKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != c.allow {
			t.Errorf("%s %s: %d (Allow %q), want 405 (Allow %q)", c.method, c.path, resp.StatusCode, resp.Header.Get("Allow"), c.allow)
		}
	}
}

// TestGateway_conversationsBackground: a background response in a
// conversation adds its items once its run has kept its answer; one that
// fails adds none; one with store false adds them, though it is not kept.
func TestGateway_conversationsBackground(t *testing.T) {
	f, up := mustSolo(t, nil)
	ctx := context.Background()
	sdk := f.sdk(f.RenterKey)
	conv, err := sdk.Conversations.New(ctx, conversations.ConversationNewParams{})
	if err != nil {
		t.Fatal(describe(err))
	}
	p := inConversation("Hi", conv.ID)
	p.Background = oai.Bool(true)
	queued, err := sdk.Responses.New(ctx, p)
	if err != nil {
		t.Fatal(describe(err))
	}
	if gjson.Get(queued.RawJSON(), "conversation.id").Str != conv.ID {
		t.Errorf("queued response %s: want it to name its conversation", queued.RawJSON())
	}
	done := pollUntil(t, sdk, queued.ID, "queued", "in_progress")
	if done.Status != "completed" {
		t.Fatalf("background response: %s", done.RawJSON())
	}
	if got := conversationText(t, sdk, conv.ID); strings.Join(got, "|") != "user: Hi|assistant: Hello from alpha." {
		t.Errorf("after the background response, the conversation holds %q", got)
	}

	up.set(faultFailed)
	if failed, err := sdk.Responses.New(ctx, inConversation("Fail", conv.ID)); err != nil || failed.Status != "failed" {
		t.Fatalf("the failing response: %+v, %s; want it failed", failed, describe(err))
	}
	if got := conversationText(t, sdk, conv.ID); len(got) != 2 {
		t.Errorf("after a failed response, the conversation holds %q; want it unchanged", got)
	}

	up.set(faultNone)
	unkept, err := sdk.Responses.New(ctx, inConversation("Quietly", conv.ID), option.WithJSONSet("store", false))
	if err != nil {
		t.Fatal(describe(err))
	}
	if got := conversationText(t, sdk, conv.ID); len(got) != 4 || got[2] != "user: Quietly" {
		t.Errorf("after a response with store false, the conversation holds %q; want its items added all the same", got)
	}
	if _, err := sdk.Responses.Get(ctx, unkept.ID, responses.ResponseGetParams{}); apiError(t, err).StatusCode != 404 {
		t.Errorf("reading the response with store false: %s; want 404", describe(err))
	}
}

// heldInConversation makes a conversation and runs in it a background
// response saying text, which the model server holds until up.free(): it
// returns them once the model server has the response.
func heldInConversation(t *testing.T, sdk oai.Client, up *mock, text string) (*conversations.Conversation, *responses.Response) {
	t.Helper()
	ctx := context.Background()
	conv, err := sdk.Conversations.New(ctx, conversations.ConversationNewParams{})
	if err != nil {
		t.Fatal(describe(err))
	}
	up.set(faultHold)
	calls := up.Calls.Load()
	p := inConversation(text, conv.ID)
	p.Background = oai.Bool(true)
	queued, err := sdk.Responses.New(ctx, p)
	if err != nil {
		t.Fatal(describe(err))
	}
	eventually(t, "the response to reach the model server", func() string {
		if up.Calls.Load() == calls {
			return "not yet"
		}
		return ""
	})
	return conv, queued
}

// TestGateway_conversationDeletedWhileAnswering: a conversation deleted
// while a response in it runs is not brought back by that response, whose
// answer is the renter's all the same, and is no failure to keep.
func TestGateway_conversationDeletedWhileAnswering(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	f, up := mustSolo(t, func(c *gateway.Config) { c.Metrics = reg })
	ctx := context.Background()
	sdk := f.sdk(f.RenterKey)
	conv, queued := heldInConversation(t, sdk, up, "Hi")
	if _, err := sdk.Conversations.Delete(ctx, conv.ID); err != nil {
		t.Fatal(describe(err))
	}
	up.free()
	if done := pollUntil(t, sdk, queued.ID, responses.ResponseStatusInProgress); done.Status != responses.ResponseStatusCompleted {
		t.Fatalf("the response: %s; want it completed", done.RawJSON())
	}
	if _, err := sdk.Conversations.Get(ctx, conv.ID); apiError(t, err).StatusCode != 404 {
		t.Errorf("the deleted conversation after the response: %s; want 404", describe(err))
	}
	if got := metricstest.Value(t, reg, "idlegrid_inference_responses_not_kept_total", nil); got != 0 {
		t.Errorf("responses not kept = %v, want 0: a deleted conversation is no failure to keep", got)
	}
}

// TestGateway_conversationLocked: a conversation runs one response at a
// time, as OpenAI's do. While a response runs in it, another response
// request naming it waits a moment, then is refused 400
// conversation_locked (param conversation, Retry-After), naming the one
// running; adding or deleting its items is refused at once (each refusal
// counted in idlegrid_inference_conversation_refusals_total); another
// renter naming its ID is told there is none, not that it is locked. A
// request that waits while the running response ends runs next, and sees
// that response's items.
func TestGateway_conversationLocked(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	f, up := mustSolo(t, func(c *gateway.Config) { c.Metrics = reg })
	ctx := context.Background()
	sdk := f.sdk(f.RenterKey)
	conv, first := heldInConversation(t, sdk, up, "First")

	_, err := sdk.Responses.New(ctx, inConversation("Second", conv.ID))
	if e := apiError(t, err); e.StatusCode != 400 || e.Code != "conversation_locked" || e.Param != "conversation" ||
		e.Response.Header.Get("Retry-After") == "" || !strings.Contains(e.Message, first.ID) {
		t.Errorf("a second response while the first runs: %d %s param %q (%s), Retry-After %q; want 400 conversation_locked naming the conversation and the first response, with Retry-After",
			e.StatusCode, e.Code, e.Param, e.Message, e.Response.Header.Get("Retry-After"))
	}
	_, err = sdk.Conversations.Items.New(ctx, conv.ID, conversations.ItemNewParams{Items: []responses.ResponseInputItemUnionParam{userItem("Aside")}})
	if e := apiError(t, err); e.StatusCode != 400 || e.Code != "conversation_locked" {
		t.Errorf("adding items while a response runs: %d %s (%s); want 400 conversation_locked", e.StatusCode, e.Code, e.Message)
	}
	_, err = sdk.Conversations.Items.Delete(ctx, conv.ID, "msg_any")
	if e := apiError(t, err); e.StatusCode != 400 || e.Code != "conversation_locked" {
		t.Errorf("deleting an item while a response runs: %d %s (%s); want 400 conversation_locked", e.StatusCode, e.Code, e.Message)
	}
	if got := metricstest.Value(t, reg, "idlegrid_inference_conversation_refusals_total", map[string]string{"reason": "locked"}); got != 3 {
		t.Errorf("conversation refusals for a lock = %v, want 3", got)
	}
	other := f.sdk(f.mustRenter(t, "other"))
	_, err = other.Responses.New(ctx, inConversation("Mine?", conv.ID))
	if e := apiError(t, err); e.Code == "conversation_locked" || !strings.Contains(e.Message, "no conversation") {
		t.Errorf("another renter naming the conversation: %s; want it told there is no such conversation", describe(err))
	}

	second := make(chan error, 1)
	go func() {
		_, err := sdk.Responses.New(ctx, inConversation("Second", conv.ID))
		second <- err
	}()
	time.Sleep(100 * time.Millisecond) // the second waits for the first to end
	up.free()
	if done := pollUntil(t, sdk, first.ID, responses.ResponseStatusQueued, responses.ResponseStatusInProgress); done.Status != responses.ResponseStatusCompleted {
		t.Fatalf("the first response: %s; want it completed", done.RawJSON())
	}
	if err := <-second; err != nil {
		t.Fatalf("the second response, sent while the first ran: %s; want it run once the first ended", describe(err))
	}
	want := []string{"user: First", "assistant: Hello from alpha.", "user: Second", "assistant: Hello from alpha."}
	if got := conversationText(t, sdk, conv.ID); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("the conversation holds %q; want %q: the second ran after the first", got, want)
	}
}

// TestGateway_conversationQuota: a renter's conversations hold at most
// ConversationItems items and ConversationChars characters, all together:
// a conversation made with items, items added, or a response whose input
// would take them over is refused 403 conversation_quota_exceeded, the
// response before it runs, saying what to delete (each counted);
// deleting makes room. GET /v1/inference/conversations says what they
// hold, and the bounds.
func TestGateway_conversationQuota(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	f, up := mustSolo(t, func(c *gateway.Config) { c.ConversationItems, c.ConversationChars, c.Metrics = 5, 4000, reg })
	ctx := context.Background()
	sdk := f.sdk(f.RenterKey)
	items := func(texts ...string) []responses.ResponseInputItemUnionParam {
		var its []responses.ResponseInputItemUnionParam
		for _, s := range texts {
			its = append(its, userItem(s))
		}
		return its
	}
	wantQuota := func(what string, err error, held string) {
		t.Helper()
		e := apiError(t, err)
		if e.StatusCode != 403 || e.Code != "conversation_quota_exceeded" || !strings.Contains(e.Message, held) || !strings.Contains(e.Message, "DELETE /v1/conversations") {
			t.Errorf("%s: %d %s (%s); want 403 conversation_quota_exceeded saying they hold %s and what to delete", what, e.StatusCode, e.Code, e.Message, held)
		}
	}
	conv, err := sdk.Conversations.New(ctx, conversations.ConversationNewParams{Items: items("a", "b", "c")})
	if err != nil {
		t.Fatal(describe(err))
	}
	added, err := sdk.Conversations.Items.New(ctx, conv.ID, conversations.ItemNewParams{Items: items("d", "e")})
	if err != nil {
		t.Fatal(describe(err))
	}
	u, err := client.New(f.URL, f.RenterKey).ConversationUsage(ctx)
	if err != nil || u.Items != 5 || u.Chars == 0 || u.MaxItems == nil || *u.MaxItems != 5 || u.MaxChars == nil || *u.MaxChars != 4000 {
		t.Errorf("GET /v1/inference/conversations: %+v, %v; want 5 items, their characters, and the bounds 5 and 4000", u, err)
	}
	_, err = sdk.Conversations.Items.New(ctx, conv.ID, conversations.ItemNewParams{Items: items("f")})
	wantQuota("a sixth item", err, "5 items")
	_, err = sdk.Conversations.New(ctx, conversations.ConversationNewParams{Items: items("g")})
	wantQuota("another conversation with an item", err, "5 items")
	calls := up.Calls.Load()
	_, err = sdk.Responses.New(ctx, inConversation("And?", conv.ID))
	wantQuota("a response in the full conversation", err, "5 items")
	if up.Calls.Load() != calls {
		t.Errorf("the refused response reached the model server")
	}
	if _, err := sdk.Conversations.New(ctx, conversations.ConversationNewParams{}); err != nil {
		t.Errorf("an empty conversation: %s; want it made, holding nothing", describe(err))
	}

	if _, err := sdk.Conversations.Items.Delete(ctx, conv.ID, gjson.Get(added.RawJSON(), "data.0.id").Str); err != nil {
		t.Fatal(describe(err))
	}
	_, err = sdk.Conversations.Items.New(ctx, conv.ID, conversations.ItemNewParams{Items: items(strings.Repeat("long ", 800))})
	wantQuota("an item of 4,000 characters and more", err, "characters")
	if _, err := sdk.Conversations.Items.New(ctx, conv.ID, conversations.ItemNewParams{Items: items("f")}); err != nil {
		t.Errorf("an item once one was deleted: %s; want it added", describe(err))
	}
	if got := metricstest.Value(t, reg, "idlegrid_inference_conversation_refusals_total", map[string]string{"reason": "quota"}); got != 4 {
		t.Errorf("conversation refusals for the bound = %v, want 4", got)
	}
	if _, err := sdk.Conversations.Delete(ctx, conv.ID); err != nil {
		t.Fatal(describe(err))
	}
	fresh, err := sdk.Conversations.New(ctx, conversations.ConversationNewParams{})
	if err != nil {
		t.Fatal(describe(err))
	}
	if _, err := sdk.Responses.New(ctx, inConversation("Hi", fresh.ID)); err != nil {
		t.Errorf("a response once the full conversation was deleted: %s", describe(err))
	}
}
