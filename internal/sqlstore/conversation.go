package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/idlegrid/idlegrid"
)

// Conversations: the gateway's conversations of OpenAI's Conversations
// API, each with its items in the order they were added
// (idlegrid.ConversationStore). A conversation counts the Seq its next
// item takes (next_seq); a write that adds items locks the conversation's
// row before it reads anything else, so that adders on several servers
// queue there and their items take increasing Seqs. A write's checks all
// come before its first change: one that shares a group commit
// (writebatch.go) and fails with an error of its own is not rolled back.

var _ idlegrid.ConversationStore = (*DB)(nil)

// MaxConversationHistory is the most items one ConversationHistory
// returns.
const MaxConversationHistory = 10000

const (
	conversationColumns     = `id, renter_id, metadata, created_at`
	conversationItemColumns = `conversation_id, seq, item_id, item, response_id, created_at`
)

// CreateConversation stores c with its first items, in order, setting
// their Seq (from 1) and ConversationID: EINVALID naming the field,
// ECONFLICT when c's ID is taken, by any renter, or naming items[i].id
// when two items share an ID.
func (db *DB) CreateConversation(ctx context.Context, c *idlegrid.Conversation, items []*idlegrid.ConversationItem) error {
	if err := c.Validate(); err != nil {
		return err
	}
	if err := checkItems(items); err != nil {
		return err
	}
	metadata, err := metadataArg(c.Metadata)
	if err != nil {
		return err
	}
	err = db.writes().submit(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO conversations (`+conversationColumns+`, next_seq)
			VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO NOTHING`,
			c.ID, c.RenterID, metadata, timeArg(c.CreatedAt), len(items)+1)
		if err := expectOne(res, err, func() error {
			return idlegrid.Errorf(idlegrid.ECONFLICT, "conversation %q already exists", c.ID)
		}); err != nil {
			return err
		}
		return insertItems(ctx, tx, c.RenterID, c.ID, 1, items)
	})
	if err == nil {
		numberItems(c.ID, 1, items)
	}
	return err
}

// FindConversation returns the renter's conversation id; ENOTFOUND when
// the renter has none such. Its Metadata is never nil.
func (db *DB) FindConversation(ctx context.Context, renterID, id string) (*idlegrid.Conversation, error) {
	var c *idlegrid.Conversation
	err := db.view(ctx, func(tx *sql.Tx) error {
		var err error
		c, err = findRow(ctx, tx, scanConversation, "conversation", id, `SELECT `+conversationColumns+` FROM conversations
			WHERE id = $1 AND renter_id = $2`, id, renterID)
		return err
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// UpdateConversation sets the metadata of the renter's conversation id,
// all of it (nil or empty clears it), and returns the conversation:
// ENOTFOUND when the renter has none such, EINVALID naming metadata.
func (db *DB) UpdateConversation(ctx context.Context, renterID, id string, metadata map[string]string) (*idlegrid.Conversation, error) {
	if err := idlegrid.ValidateMetadata("metadata", metadata); err != nil {
		return nil, err
	}
	m, err := metadataArg(metadata)
	if err != nil {
		return nil, err
	}
	var c *idlegrid.Conversation
	err = db.writes().submit(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var err error
		c, err = findRow(ctx, tx, scanConversation, "conversation", id, `UPDATE conversations SET metadata = $1
			WHERE id = $2 AND renter_id = $3 RETURNING `+conversationColumns, m, id, renterID)
		return err
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// DeleteConversation deletes the renter's conversation id and its items;
// ENOTFOUND when the renter has none such. The conversation's row goes
// first, so that an adder waiting on its lock then finds it gone.
func (db *DB) DeleteConversation(ctx context.Context, renterID, id string) error {
	return db.update(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM conversations WHERE id = $1 AND renter_id = $2`, id, renterID)
		if err := expectOne(res, err, func() error { return notFound("conversation", id) }); err != nil {
			return err
		}
		var gone idlegrid.ConversationUsage
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(chars), 0) FROM conversation_items WHERE conversation_id = $1`,
			id).Scan(&gone.Items, &gone.Chars); err != nil {
			return err
		}
		if _, err = tx.ExecContext(ctx, `DELETE FROM conversation_items WHERE conversation_id = $1`, id); err != nil {
			return err
		}
		return addUsage(ctx, tx, renterID, idlegrid.ConversationUsage{Items: -gone.Items, Chars: -gone.Chars})
	})
}

// AddConversationItems adds items to the end of the renter's conversation
// id, in order, setting their Seq and ConversationID, all or none:
// ENOTFOUND when the renter has no such conversation, ECONFLICT naming
// items[i].id when an item's ID is already in it or twice among items,
// EINVALID naming the field. None added is no change, but still
// ENOTFOUND for a conversation not the renter's.
func (db *DB) AddConversationItems(ctx context.Context, renterID, id string, items []*idlegrid.ConversationItem) error {
	if err := checkItems(items); err != nil {
		return err
	}
	var first int64
	err := db.writes().submit(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var err error
		if first, err = db.lockConversation(ctx, tx, renterID, id); err != nil {
			return err
		}
		if err := itemsNotIn(ctx, tx, db.dialect, id, items); err != nil || len(items) == 0 {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE conversations SET next_seq = $1 WHERE id = $2`,
			first+int64(len(items)), id); err != nil {
			return err
		}
		return insertItems(ctx, tx, renterID, id, first, items)
	})
	if err == nil {
		numberItems(id, first, items)
	}
	return err
}

// lockConversation locks the row of the renter's conversation id against
// other writers of it until tx ends, and returns the Seq its next item
// takes; ENOTFOUND when the renter has no such conversation.
func (db *DB) lockConversation(ctx context.Context, tx *sql.Tx, renterID, id string) (int64, error) {
	var next int64
	err := tx.QueryRowContext(ctx, `SELECT next_seq FROM conversations WHERE id = $1 AND renter_id = $2`+db.dialect.forUpdate,
		id, renterID).Scan(&next)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, notFound("conversation", id)
	}
	return next, err
}

// itemsNotIn returns ECONFLICT naming the first of items whose ID is
// already in the conversation id.
func itemsNotIn(ctx context.Context, tx *sql.Tx, d *dialect, id string, items []*idlegrid.ConversationItem) error {
	if len(items) == 0 {
		return nil
	}
	ids := make([]string, len(items))
	for i, it := range items {
		ids[i] = it.ID
	}
	list, err := jsonArg(ids)
	if err != nil {
		return err
	}
	taken := map[string]bool{}
	err = queryEach(ctx, tx, `SELECT item_id FROM conversation_items WHERE conversation_id = $1
		AND item_id IN (`+d.texts("$2")+`)`, []any{id, list}, func(rs *sql.Rows) error {
		var itemID string
		err := rs.Scan(&itemID)
		taken[itemID] = true
		return err
	})
	if err != nil {
		return err
	}
	for i, it := range items {
		if taken[it.ID] {
			return itemConflict(i, "item %q is already in conversation %q", it.ID, id)
		}
	}
	return nil
}

// checkItems checks items before they are added: EINVALID naming the
// field, ECONFLICT naming the ID of the second of two that share one.
func checkItems(items []*idlegrid.ConversationItem) error {
	seen := make(map[string]bool, len(items))
	for i, it := range items {
		if err := it.Validate(fmt.Sprintf("items[%d]", i)); err != nil {
			return err
		}
		if seen[it.ID] {
			return itemConflict(i, "item %q is given twice", it.ID)
		}
		seen[it.ID] = true
	}
	return nil
}

// itemConflict is the ECONFLICT of items[i]'s ID.
func itemConflict(i int, format string, args ...any) error {
	return &idlegrid.Error{Code: idlegrid.ECONFLICT, Field: fmt.Sprintf("items[%d].id", i), Message: fmt.Sprintf(format, args...)}
}

// insertItems inserts items into the renter's conversation id, the first
// as Seq first and each after it the next, and counts them in the
// renter's usage.
func insertItems(ctx context.Context, tx *sql.Tx, renterID, id string, first int64, items []*idlegrid.ConversationItem) error {
	if len(items) == 0 {
		return nil
	}
	rows := make([][]any, len(items))
	var chars int64
	for i, it := range items {
		n := it.Chars()
		chars += n
		rows[i] = []any{id, first + int64(i), it.ID, string(it.Item), n, it.ResponseID, timeArg(it.CreatedAt)}
	}
	if err := insertRows(ctx, tx, `INSERT INTO conversation_items
		(conversation_id, seq, item_id, item, chars, response_id, created_at)`, rows); err != nil {
		return err
	}
	return addUsage(ctx, tx, renterID, idlegrid.ConversationUsage{Items: int64(len(items)), Chars: chars})
}

// addUsage adds d (negative: items deleted) to what the renter's
// conversations hold.
func addUsage(ctx context.Context, tx *sql.Tx, renterID string, d idlegrid.ConversationUsage) error {
	if d.Items == 0 {
		return nil
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO conversation_usage (renter_id, items, chars) VALUES ($1, $2, $3)
		ON CONFLICT (renter_id) DO UPDATE SET items = conversation_usage.items + excluded.items,
		chars = conversation_usage.chars + excluded.chars`, renterID, d.Items, d.Chars)
	return err
}

// ConversationUsage returns what the renter's conversations hold.
func (db *DB) ConversationUsage(ctx context.Context, renterID string) (idlegrid.ConversationUsage, error) {
	var u idlegrid.ConversationUsage
	err := db.view(ctx, func(tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, `SELECT items, chars FROM conversation_usage WHERE renter_id = $1`, renterID).Scan(&u.Items, &u.Chars)
		if errors.Is(err, sql.ErrNoRows) {
			return nil // none kept
		}
		return err
	})
	return u, err
}

// numberItems sets the ConversationID and Seq of items added to the
// conversation id from first, once their write committed.
func numberItems(id string, first int64, items []*idlegrid.ConversationItem) {
	for i, it := range items {
		it.ConversationID, it.Seq = id, first+int64(i)
	}
}

// ConversationItems returns the page of the renter's conversation id that
// f selects, in f's order: ENOTFOUND when the renter has no such
// conversation, EINVALID naming after when f.After is not one of its
// items, or naming limit when f.Limit is not 1 to MaxConversationPage.
func (db *DB) ConversationItems(ctx context.Context, renterID, id string, f idlegrid.ConversationItemFilter) ([]*idlegrid.ConversationItem, error) {
	if f.Limit < 1 || f.Limit > idlegrid.MaxConversationPage {
		return nil, idlegrid.Invalid("limit", "must be between 1 and %d, got %d", idlegrid.MaxConversationPage, f.Limit)
	}
	var page []*idlegrid.ConversationItem
	err := db.view(ctx, func(tx *sql.Tx) error {
		if err := ownConversation(ctx, tx, renterID, id); err != nil {
			return err
		}
		from, err := pageStart(ctx, tx, id, f)
		if err != nil {
			return err
		}
		next, order := ">", "ASC"
		if f.Desc {
			next, order = "<", "DESC"
		}
		page, err = queryAll(ctx, tx, scanConversationItem, `SELECT `+conversationItemColumns+` FROM conversation_items
			WHERE conversation_id = $1 AND seq `+next+` $2 ORDER BY seq `+order+` LIMIT $3`, id, from, f.Limit)
		return err
	})
	if err != nil {
		return nil, err
	}
	return page, nil
}

// pageStart is the Seq a page of the conversation id that f selects
// starts after, in f's order: that of the item f.After, else one before
// the first; EINVALID naming after when f.After is not one of its items.
func pageStart(ctx context.Context, tx *sql.Tx, id string, f idlegrid.ConversationItemFilter) (int64, error) {
	switch {
	case f.After == "" && f.Desc:
		return math.MaxInt64, nil
	case f.After == "":
		return 0, nil
	}
	var seq int64
	err := tx.QueryRowContext(ctx, `SELECT seq FROM conversation_items WHERE conversation_id = $1 AND item_id = $2`,
		id, f.After).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, idlegrid.Invalid("after", "no item %q in conversation %q", f.After, id)
	}
	return seq, err
}

// conversationHistory is the items of the conversation $1 that a history
// returns, the first first: of its latest $2, those the items after which
// (in Seq) have at most $3 characters. The latest are picked by their
// chars alone; only those picked are read whole.
const conversationHistory = `SELECT i.conversation_id, i.seq, i.item_id, i.item, i.response_id, i.created_at
	FROM (
		SELECT seq, SUM(chars) OVER (ORDER BY seq DESC ROWS UNBOUNDED PRECEDING) - chars AS later_chars
		FROM conversation_items WHERE conversation_id = $1
		ORDER BY seq DESC LIMIT $2
	) latest
	JOIN conversation_items i ON i.conversation_id = $1 AND i.seq = latest.seq
	WHERE latest.later_chars <= $3
	ORDER BY i.seq`

// ConversationHistory returns the items of the renter's conversation id,
// the first first, for a response that continues it, and whether they are
// all of its items: at most limit (1 to MaxConversationHistory), the
// latest limit when there are more, and none before the one that brings
// their Item's characters, counted from the last, over maxChars (at
// least 1), so that the last is always among them. ENOTFOUND when the
// renter has no such conversation; EINVALID naming limit or max_chars.
func (db *DB) ConversationHistory(ctx context.Context, renterID, id string, limit int, maxChars int64) ([]*idlegrid.ConversationItem, bool, error) {
	if limit < 1 || limit > MaxConversationHistory {
		return nil, false, idlegrid.Invalid("limit", "must be between 1 and %d, got %d", MaxConversationHistory, limit)
	}
	if maxChars < 1 {
		return nil, false, idlegrid.Invalid("max_chars", "must be at least 1, got %d", maxChars)
	}
	var items []*idlegrid.ConversationItem
	whole := false
	err := db.view(ctx, func(tx *sql.Tx) error {
		if err := ownConversation(ctx, tx, renterID, id); err != nil {
			return err
		}
		var err error
		if items, err = queryAll(ctx, tx, scanConversationItem, conversationHistory, id, limit, maxChars); err != nil {
			return err
		}
		whole, err = noItemBefore(ctx, tx, id, items)
		return err
	})
	if err != nil {
		return nil, false, err
	}
	return items, whole, nil
}

// noItemBefore reports whether the conversation id has no item before
// the first of items, the first first: whether they are all of its items.
func noItemBefore(ctx context.Context, tx *sql.Tx, id string, items []*idlegrid.ConversationItem) (bool, error) {
	if len(items) == 0 {
		return true, nil // the last item is always returned: there is none
	}
	var one int
	err := tx.QueryRowContext(ctx, `SELECT 1 FROM conversation_items WHERE conversation_id = $1 AND seq < $2 LIMIT 1`,
		id, items[0].Seq).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return true, nil
	}
	return false, err
}

// FindConversationItem returns the item itemID of the renter's
// conversation id: ENOTFOUND naming the conversation when the renter has
// no such conversation, else naming the item.
func (db *DB) FindConversationItem(ctx context.Context, renterID, id, itemID string) (*idlegrid.ConversationItem, error) {
	var it *idlegrid.ConversationItem
	err := db.view(ctx, func(tx *sql.Tx) error {
		if err := ownConversation(ctx, tx, renterID, id); err != nil {
			return err
		}
		var err error
		it, err = findRow(ctx, tx, scanConversationItem, "item", itemID, `SELECT `+conversationItemColumns+` FROM conversation_items
			WHERE conversation_id = $1 AND item_id = $2`, id, itemID)
		return err
	})
	if err != nil {
		return nil, err
	}
	return it, nil
}

// FindItem returns the item itemID of any of the renter's
// conversations, the one added last when several have it (by the time it
// was added, then its conversation's ID and its Seq); ENOTFOUND when
// none has it.
func (db *DB) FindItem(ctx context.Context, renterID, itemID string) (*idlegrid.ConversationItem, error) {
	var it *idlegrid.ConversationItem
	err := db.view(ctx, func(tx *sql.Tx) error {
		var err error
		it, err = findRow(ctx, tx, scanConversationItem, "item", itemID, `SELECT i.conversation_id, i.seq, i.item_id, i.item, i.response_id, i.created_at
			FROM conversation_items i JOIN conversations c ON c.id = i.conversation_id
			WHERE i.item_id = $1 AND c.renter_id = $2
			ORDER BY i.created_at DESC, i.conversation_id DESC, i.seq DESC LIMIT 1`, itemID, renterID)
		return err
	})
	if err != nil {
		return nil, err
	}
	return it, nil
}

// DeleteConversationItem deletes the item itemID of the renter's
// conversation id, leaving a gap in the Seqs: ENOTFOUND naming the
// conversation when the renter has no such conversation, else naming the
// item.
func (db *DB) DeleteConversationItem(ctx context.Context, renterID, id, itemID string) error {
	return db.update(ctx, func(tx *sql.Tx) error {
		if err := ownConversation(ctx, tx, renterID, id); err != nil {
			return err
		}
		var chars int64
		err := tx.QueryRowContext(ctx, `SELECT chars FROM conversation_items WHERE conversation_id = $1 AND item_id = $2`, id, itemID).Scan(&chars)
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("item", itemID)
		} else if err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM conversation_items WHERE conversation_id = $1 AND item_id = $2`, id, itemID)
		if err := expectOne(res, err, func() error { return notFound("item", itemID) }); err != nil {
			return err
		}
		return addUsage(ctx, tx, renterID, idlegrid.ConversationUsage{Items: -1, Chars: -chars})
	})
}

// ownConversation returns ENOTFOUND unless the renter has the
// conversation id.
func ownConversation(ctx context.Context, tx *sql.Tx, renterID, id string) error {
	var one int
	err := tx.QueryRowContext(ctx, `SELECT 1 FROM conversations WHERE id = $1 AND renter_id = $2`, id, renterID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return notFound("conversation", id)
	}
	return err
}

// metadataArg encodes a conversation's metadata for its column: {} for
// none, never null.
func metadataArg(m map[string]string) (string, error) {
	if len(m) == 0 {
		return "{}", nil
	}
	return jsonArg(m)
}

func scanConversation(s scanner) (*idlegrid.Conversation, error) {
	c := &idlegrid.Conversation{}
	var metadata string
	var created sql.NullInt64
	if err := s.Scan(&c.ID, &c.RenterID, &metadata, &created); err != nil {
		return nil, err
	}
	if err := jsonOf(metadata, &c.Metadata); err != nil {
		return nil, err
	}
	if c.Metadata == nil {
		c.Metadata = map[string]string{}
	}
	c.CreatedAt = timeOf(created)
	return c, nil
}

func scanConversationItem(s scanner) (*idlegrid.ConversationItem, error) {
	it := &idlegrid.ConversationItem{}
	var item string
	var created sql.NullInt64
	if err := s.Scan(&it.ConversationID, &it.Seq, &it.ID, &item, &it.ResponseID, &created); err != nil {
		return nil, err
	}
	it.Item, it.CreatedAt = json.RawMessage(item), timeOf(created)
	return it, nil
}

// findRow returns what scan makes of the one row q selects in tx, or
// ENOTFOUND naming kind's id when it selects none.
func findRow[T any](ctx context.Context, tx *sql.Tx, scan func(scanner) (*T, error), kind, id, q string, args ...any) (*T, error) {
	v, err := scan(tx.QueryRowContext(ctx, q, args...))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound(kind, id)
	}
	return v, err
}
