package gateway

import (
	"context"
	"net/http"

	"github.com/dustin/go-humanize"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/httpapi/wire"
)

// What a renter's conversations may hold, all together
// (Config.ConversationItems, Config.ConversationChars): conversations cost
// nothing to keep, so without a bound one renter's script could fill the
// coordinator's database. A request that would add items past either
// bound is refused (403, conversation_quota_exceeded) until the renter
// deletes some. A response in a conversation is refused before it runs
// when its input would not fit; its output, which nothing foresees, may
// take the renter a response's worth over.

// Defaults of Config.ConversationItems and ConversationChars: far more
// than a person's chats, far less than a database minds.
const (
	DefaultConversationItems = 1_000_000
	DefaultConversationChars = 1 << 30
)

// roomFor refuses adding items to the renter's conversations when they
// would hold more than the gateway keeps for a renter.
func (g *Gateway) roomFor(ctx context.Context, renterID string, items []*idlegrid.ConversationItem) error {
	var chars int64
	for _, it := range items {
		chars += it.Chars()
	}
	return g.roomForCount(ctx, renterID, int64(len(items)), chars)
}

// roomForCount is roomFor of n items of chars characters in all.
func (g *Gateway) roomForCount(ctx context.Context, renterID string, n, chars int64) error {
	maxItems, maxChars := g.cfg.ConversationItems, g.cfg.ConversationChars
	if n == 0 || (maxItems < 0 && maxChars < 0) {
		return nil
	}
	u, err := g.cfg.Store.ConversationUsage(ctx, renterID)
	switch {
	case err != nil:
		return err
	case maxItems >= 0 && u.Items+n > maxItems:
		return quotaExceeded(u.Items, n, maxItems, "items")
	case maxChars >= 0 && u.Chars+chars > maxChars:
		return quotaExceeded(u.Chars, chars, maxChars, "characters")
	}
	return nil
}

// quotaExceeded is the refusal of a write that would take a renter's
// conversations from held of what (items, characters), by more, over
// most.
func quotaExceeded(held, more, most int64, what string) error {
	err := idlegrid.Errorf(idlegrid.EFORBIDDEN, "your account's conversations hold %s %s; %s more would take them over the %s this server keeps for an account: delete conversations (DELETE /v1/conversations/{id}) or items you no longer need, or ask the operator for more",
		humanize.Comma(held), what, humanize.Comma(more), humanize.Comma(most))
	return &codedError{err: err, code: "conversation_quota_exceeded"}
}

// serveConversationUsage answers GET /v1/inference/conversations: what the
// renter's conversations hold, and the most they may.
func (g *Gateway) serveConversationUsage(w http.ResponseWriter, r *http.Request, c *apiKey) error {
	if _, err := checkQuery(r); err != nil {
		return err
	}
	if err := renterOnly(c, "conversations"); err != nil {
		return err
	}
	u, err := g.cfg.Store.ConversationUsage(r.Context(), c.AccountID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wire.ConversationUsage{Object: "conversation.usage", Items: u.Items, Chars: u.Chars,
		MaxItems: bound(g.cfg.ConversationItems), MaxChars: bound(g.cfg.ConversationChars)})
	return nil
}

// bound is a bound as the API gives it: nil for none.
func bound(n int64) *int64 {
	if n < 0 {
		return nil
	}
	return &n
}
