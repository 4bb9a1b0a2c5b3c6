package idlegrid

import (
	"context"
	"encoding/json"
	"time"
	"unicode/utf8"
)

// Conversation is a conversation of OpenAI's Conversations API
// (/v1/conversations), as the gateway keeps it for its renter: a list of
// items (messages, tool calls and their output, reasoning items) that a
// response request names (its conversation field) to have the model see
// them before its own input, and to which the gateway then adds that
// input and the response's output. Unlike a kept response it does not
// expire: it is kept until its renter deletes it.
type Conversation struct {
	// ID is the gateway's, "conv_…" (NewID).
	ID       string `json:"id"`
	RenterID string `json:"renter_id"`
	// Metadata is the renter's own labels: at most MaxMetadataPairs, keys
	// of at most 64 characters, values of at most 512, as OpenAI's.
	Metadata  map[string]string `json:"metadata"`
	CreatedAt time.Time         `json:"created_at"`
}

// ConversationItem is one item of a conversation, as listed.
type ConversationItem struct {
	// ID is the item's own, its Item's "id": one the renter gave it, the
	// model server's for a response's output, else the gateway's. Unique
	// in its conversation.
	ID             string `json:"id"`
	ConversationID string `json:"conversation_id"`
	// Seq is its place in the conversation, from 1, in the order items
	// were added; the store sets it (AddConversationItems).
	Seq int64 `json:"seq"`
	// Item is the item as listed: a JSON object with its id and type.
	Item json.RawMessage `json:"item"`
	// ResponseID is the response whose input or output it was; "" for an
	// item added by itself.
	ResponseID string    `json:"response_id,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
}

// Chars is the item's length in characters, as a conversation's history
// and a renter's bound count it.
func (it *ConversationItem) Chars() int64 { return int64(utf8.RuneCount(it.Item)) }

// Bounds of a conversation's metadata, as OpenAI's.
const (
	MaxMetadataPairs    = 16
	maxMetadataKeyLen   = 64
	maxMetadataValueLen = 512
)

// Validate checks a conversation before it is stored.
func (c *Conversation) Validate() error {
	switch {
	case c.ID == "":
		return Invalid("conversation.id", "required")
	case c.RenterID == "":
		return Invalid("conversation.renter_id", "required")
	case c.CreatedAt.IsZero():
		return Invalid("conversation.created_at", "required")
	}
	return ValidateMetadata("metadata", c.Metadata)
}

// ValidateMetadata checks a conversation's metadata, field naming it in
// the error.
func ValidateMetadata(field string, m map[string]string) error {
	if len(m) > MaxMetadataPairs {
		return Invalid(field, "at most %d pairs, got %d", MaxMetadataPairs, len(m))
	}
	for k, v := range m {
		switch {
		case k == "":
			return Invalid(field, "a key must not be empty")
		case utf8.RuneCountInString(k) > maxMetadataKeyLen:
			return Invalid(field+"."+k, "a key is at most %d characters", maxMetadataKeyLen)
		case utf8.RuneCountInString(v) > maxMetadataValueLen:
			return Invalid(field+"."+k, "a value is at most %d characters", maxMetadataValueLen)
		}
	}
	return nil
}

// Validate checks an item before it is added to a conversation; field
// names it in the error ("items[2]").
func (it *ConversationItem) Validate(field string) error {
	switch {
	case it.ID == "":
		return Invalid(field+".id", "required")
	case len(it.ID) > 256:
		return Invalid(field+".id", "at most 256 characters")
	case len(it.Item) == 0 || it.Item[0] != '{' || !json.Valid(it.Item):
		return Invalid(field, "must be a JSON object")
	case it.CreatedAt.IsZero():
		return Invalid(field+".created_at", "required")
	}
	return nil
}

// ConversationItemFilter selects a page of a conversation's items.
type ConversationItemFilter struct {
	// After is the ID of the item the page starts after, in its order;
	// "" from the first.
	After string
	// Limit is the most items returned: 1 to MaxConversationPage.
	Limit int
	// Desc lists the last added first.
	Desc bool
}

// MaxConversationPage is the most items one page of a conversation holds.
const MaxConversationPage = 1000

// ConversationUsage is what a renter's conversations hold, all together:
// their items, and the items' length in characters.
type ConversationUsage struct {
	Items int64
	Chars int64
}

// ConversationStore keeps the gateway's conversations. internal/sqlstore
// implements it beside Store. Each method reads or writes only the
// renter's own: another renter's conversation is ENOTFOUND.
type ConversationStore interface {
	// CreateConversation stores c with its first items (none or more),
	// in order, setting their Seq: EINVALID naming the field, ECONFLICT
	// when c's ID is taken or two items share an ID (naming items[i].id).
	CreateConversation(ctx context.Context, c *Conversation, items []*ConversationItem) error
	// FindConversation returns the renter's conversation id; ENOTFOUND
	// when the renter has none such.
	FindConversation(ctx context.Context, renterID, id string) (*Conversation, error)
	// UpdateConversation sets the metadata of the renter's conversation
	// id and returns it: ENOTFOUND, or EINVALID naming metadata.
	UpdateConversation(ctx context.Context, renterID, id string, metadata map[string]string) (*Conversation, error)
	// DeleteConversation deletes the renter's conversation id and its
	// items; ENOTFOUND when the renter has none such.
	DeleteConversation(ctx context.Context, renterID, id string) error
	// AddConversationItems adds items to the end of the renter's
	// conversation id, in order, setting their Seq and ConversationID,
	// all or none: ENOTFOUND when the renter has no such conversation,
	// ECONFLICT naming items[i].id when an item's ID is already in it or
	// twice among items, EINVALID naming the field.
	AddConversationItems(ctx context.Context, renterID, id string, items []*ConversationItem) error
	// ConversationItems returns the page of the renter's conversation id
	// that f selects, in f's order: ENOTFOUND when the renter has no such
	// conversation, EINVALID naming after when f.After is not one of its
	// items, or naming limit.
	ConversationItems(ctx context.Context, renterID, id string, f ConversationItemFilter) ([]*ConversationItem, error)
	// ConversationHistory returns the items of the renter's conversation
	// id, the first first, for a response that continues it, and whether
	// they are all of them: at most limit, the latest limit when there
	// are more, and none before the one that brings their Item's
	// characters, counted from the last, over maxChars, so that a
	// conversation too long to send is not read whole to be refused (or
	// cut). The one that crosses maxChars is returned, so all of them may
	// come to more: the caller bounds what it sends. ENOTFOUND when the
	// renter has no such conversation; EINVALID naming limit or max_chars
	// when either is under 1 (or limit over the store's most).
	ConversationHistory(ctx context.Context, renterID, id string, limit int, maxChars int64) (items []*ConversationItem, whole bool, err error)
	// FindConversationItem returns the item itemID of the renter's
	// conversation id: ENOTFOUND naming the conversation or the item.
	FindConversationItem(ctx context.Context, renterID, id, itemID string) (*ConversationItem, error)
	// FindItem returns the item itemID of any of the renter's
	// conversations, the one added last when several have it: an
	// item_reference in a response's input names it. ENOTFOUND when none
	// of them has it.
	FindItem(ctx context.Context, renterID, itemID string) (*ConversationItem, error)
	// DeleteConversationItem deletes the item itemID of the renter's
	// conversation id: ENOTFOUND naming the conversation or the item.
	DeleteConversationItem(ctx context.Context, renterID, id, itemID string) error
	// ConversationUsage returns what the renter's conversations hold, as
	// the writes that added and deleted their items left it: none for a
	// renter with none.
	ConversationUsage(ctx context.Context, renterID string) (ConversationUsage, error)
}
