package gateway_test

import (
	"context"
	"strings"
	"testing"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/conversations"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"
)

// reference is an item_reference to the item id.
func reference(id string) map[string]any { return map[string]any{"type": "item_reference", "id": id} }

// withInput sets a response request's input to items.
func withInput(items ...any) option.RequestOption { return option.WithJSONSet("input", items) }

// TestGateway_itemReferences: an item_reference in a response's input is
// sent to the model server as the item it names: an input item of a kept
// response (by the ID input_items lists), an item of any of the renter's
// conversations, or an item of the chain the request continues; the
// response keeps the item, not the reference, so that continuing it sends
// the item again. A reference to no item kept for the renter (another
// renter's among them) is a 400 naming it, before any provider is asked.
func TestGateway_itemReferences(t *testing.T) {
	f, up := mustSolo(t, nil)
	ctx := context.Background()
	sdk := f.sdk(f.RenterKey)

	first, err := sdk.Responses.New(ctx, responseParams("Hi"))
	if err != nil {
		t.Fatal(describe(err))
	}
	listed, err := sdk.Responses.InputItems.List(ctx, first.ID, responses.InputItemListParams{})
	if err != nil || len(listed.Data) != 1 {
		t.Fatalf("input items of %s: %+v, %s", first.ID, listed, describe(err))
	}
	hi := listed.Data[0].ID

	second, err := sdk.Responses.New(ctx, responseParams("x"), withInput(reference(hi), map[string]any{"role": "user", "content": "And you?"}))
	if err != nil {
		t.Fatal(describe(err))
	}
	if got := sentInput(t, up); strings.Join(got, "|") != "user: Hi|user: And you?" {
		t.Errorf("referring to a kept response's input item, the model server was sent %q", got)
	}
	if _, err := sdk.Responses.New(ctx, continuing("Go on.", second.ID)); err != nil {
		t.Fatal(describe(err))
	}
	if got := sentInput(t, up); len(got) != 4 || got[0] != "user: Hi" {
		t.Errorf("continuing a response that referred to an item, the model server was sent %q; want the item, not the reference", got)
	}

	conv, err := sdk.Conversations.New(ctx, conversations.ConversationNewParams{
		Items: []responses.ResponseInputItemUnionParam{userItem("Tea?")},
	}, option.WithJSONSet("items.0.id", "msg_tea"))
	if err != nil {
		t.Fatal(describe(err))
	}
	if _, err := sdk.Responses.New(ctx, responseParams("x"), withInput(reference("msg_tea"))); err != nil {
		t.Fatal(describe(err))
	}
	if got := sentInput(t, up); strings.Join(got, "|") != "user: Tea?" {
		t.Errorf("referring to a conversation's item, the model server was sent %q", got)
	}

	answer := gjson.Get(first.RawJSON(), "output.0.id").Str
	if _, err := sdk.Responses.New(ctx, continuing("x", first.ID), withInput(reference(answer))); err != nil {
		t.Fatal(describe(err))
	}
	if got := sentInput(t, up); len(got) != 3 || got[2] != got[1] || !strings.HasPrefix(got[2], "assistant: ") {
		t.Errorf("referring to an output item of the response continued, the model server was sent %q; want the chain, then that item again", got)
	}

	calls := up.Calls.Load()
	other := f.sdk(f.mustRenter(t, "other"))
	for _, c := range []struct {
		name  string
		sdk   oai.Client
		opts  []option.RequestOption
		param string
	}{
		{"no such item", sdk, []option.RequestOption{withInput(reference("msg_none"))}, "input[0].id"},
		{"an item ID shaped as the gateway's", sdk, []option.RequestOption{withInput(map[string]any{"role": "user", "content": "x"}, reference(hi[:len(hi)-4]+"0007"))}, "input[1].id"},
		{"another renter's input item", other, []option.RequestOption{withInput(reference(hi))}, "input[0].id"},
		{"another renter's conversation item", other, []option.RequestOption{withInput(reference("msg_tea"))}, "input[0].id"},
		{"an item of the conversation named", sdk, []option.RequestOption{withInput(reference("msg_tea")), option.WithJSONSet("conversation", conv.ID)}, "input[0].id"},
		{"a reference without an ID", sdk, []option.RequestOption{withInput(map[string]any{"type": "item_reference"})}, "input[0].id"},
	} {
		_, err := c.sdk.Responses.New(ctx, responseParams("x"), c.opts...)
		if e := apiError(t, err); e.StatusCode != 400 || e.Param != c.param {
			t.Errorf("%s: %d %s (param %q); want 400 naming %s", c.name, e.StatusCode, e.Message, e.Param, c.param)
		}
	}
	if n := up.Calls.Load() - calls; n != 0 {
		t.Errorf("the model server got %d requests for the refused references, want none", n)
	}
	_, err = sdk.Conversations.Items.New(ctx, conv.ID, conversations.ItemNewParams{}, option.WithJSONSet("items", []any{reference(hi)}))
	if e := apiError(t, err); e.StatusCode != 400 || e.Param != "items[0].type" {
		t.Errorf("a reference added to a conversation: %d %s (param %q); want 400 naming items[0].type", e.StatusCode, e.Message, e.Param)
	}
}
