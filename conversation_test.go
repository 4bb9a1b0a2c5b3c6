package idlegrid_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
)

// TestConversation_Validate: a conversation and its items are refused
// naming the field that is wrong, and a valid one is not.
func TestConversation_Validate(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	valid := func() *idlegrid.Conversation {
		return &idlegrid.Conversation{ID: "conv_1", RenterID: "acct_r", Metadata: map[string]string{"topic": "tea"}, CreatedAt: now}
	}
	many := map[string]string{}
	for i := range idlegrid.MaxMetadataPairs + 1 {
		many[fmt.Sprint("k", i)] = "v"
	}
	for _, tt := range []struct {
		name  string
		edit  func(*idlegrid.Conversation)
		field string
	}{
		{"valid", func(*idlegrid.Conversation) {}, ""},
		{"no ID", func(c *idlegrid.Conversation) { c.ID = "" }, "conversation.id"},
		{"no renter", func(c *idlegrid.Conversation) { c.RenterID = "" }, "conversation.renter_id"},
		{"no time", func(c *idlegrid.Conversation) { c.CreatedAt = time.Time{} }, "conversation.created_at"},
		{"17 pairs", func(c *idlegrid.Conversation) { c.Metadata = many }, "metadata"},
		{"an empty key", func(c *idlegrid.Conversation) { c.Metadata = map[string]string{"": "v"} }, "metadata"},
		{"a long key", func(c *idlegrid.Conversation) { c.Metadata = map[string]string{strings.Repeat("k", 65): "v"} }, "metadata." + strings.Repeat("k", 65)},
		{"a long value", func(c *idlegrid.Conversation) { c.Metadata = map[string]string{"k": strings.Repeat("é", 513)} }, "metadata.k"},
		{"512 characters", func(c *idlegrid.Conversation) { c.Metadata = map[string]string{"k": strings.Repeat("é", 512)} }, ""},
	} {
		c := valid()
		tt.edit(c)
		if got := fieldOf(c.Validate()); got != tt.field {
			t.Errorf("%s: Validate names %q, want %q", tt.name, got, tt.field)
		}
	}
	for _, tt := range []struct {
		name  string
		item  idlegrid.ConversationItem
		field string
	}{
		{"valid", idlegrid.ConversationItem{ID: "msg_1", Item: json.RawMessage(`{"id":"msg_1"}`), CreatedAt: now}, ""},
		{"no ID", idlegrid.ConversationItem{Item: json.RawMessage(`{}`), CreatedAt: now}, "items[0].id"},
		{"a long ID", idlegrid.ConversationItem{ID: strings.Repeat("x", 257), Item: json.RawMessage(`{}`), CreatedAt: now}, "items[0].id"},
		{"a list", idlegrid.ConversationItem{ID: "msg_1", Item: json.RawMessage(`[]`), CreatedAt: now}, "items[0]"},
		{"no JSON", idlegrid.ConversationItem{ID: "msg_1", Item: json.RawMessage(`{`), CreatedAt: now}, "items[0]"},
		{"no time", idlegrid.ConversationItem{ID: "msg_1", Item: json.RawMessage(`{}`)}, "items[0].created_at"},
	} {
		if got := fieldOf(tt.item.Validate("items[0]")); got != tt.field {
			t.Errorf("item %s: Validate names %q, want %q", tt.name, got, tt.field)
		}
	}
}

// fieldOf is the field err names: "" for none, or for no error.
func fieldOf(err error) string {
	var e *idlegrid.Error
	if errors.As(err, &e) {
		return e.Field
	}
	return ""
}
