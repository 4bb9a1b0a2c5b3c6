package sqlstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
)

// newConversation is a valid conversation of renter, with no metadata.
func newConversation(renterID string) *idlegrid.Conversation {
	return &idlegrid.Conversation{ID: id("conv"), RenterID: renterID, CreatedAt: t0}
}

// convItem is a valid item itemID: a message of the user's saying text.
func convItem(itemID, text string) *idlegrid.ConversationItem {
	return &idlegrid.ConversationItem{
		ID: itemID,
		Item: json.RawMessage(fmt.Sprintf(`{"id": %q, "type": "message", "role": "user",
			"content": [{"type": "input_text", "text": %q}]}`, itemID, text)),
		CreatedAt: at(time.Second),
	}
}

// convItems are n new valid items, each saying text.
func convItems(n int, text string) []*idlegrid.ConversationItem {
	items := make([]*idlegrid.ConversationItem, n)
	for i := range items {
		items[i] = convItem(id("msg"), text)
	}
	return items
}

// mustConversationOf stores a new conversation of renter with n first
// items and returns it and them.
func mustConversationOf(t *testing.T, db *sqlstore.DB, renterID string, n int) (*idlegrid.Conversation, []*idlegrid.ConversationItem) {
	t.Helper()
	c, items := newConversation(renterID), convItems(n, "hello")
	mustOK(t, db.CreateConversation(context.Background(), c, items))
	return c, items
}

// itemIDs are the IDs of items, in order.
func itemIDs(items []*idlegrid.ConversationItem) []string {
	ids := make([]string, len(items))
	for i, it := range items {
		ids[i] = it.ID
	}
	return ids
}

// itemSeqs are the Seqs of items, in order.
func itemSeqs(items []*idlegrid.ConversationItem) []int64 {
	seqs := make([]int64, len(items))
	for i, it := range items {
		seqs[i] = it.Seq
	}
	return seqs
}

// allItems returns every item of the renter's conversation convID, in
// order.
func allItems(t *testing.T, db *sqlstore.DB, renterID, convID string) []*idlegrid.ConversationItem {
	t.Helper()
	items, err := db.ConversationItems(context.Background(), renterID, convID,
		idlegrid.ConversationItemFilter{Limit: idlegrid.MaxConversationPage})
	mustOK(t, err)
	return items
}

// wantNotFound fails t unless err is ENOTFOUND naming the kind's id.
func wantNotFound(t *testing.T, err error, kind, id string) {
	t.Helper()
	wantCode(t, err, idlegrid.ENOTFOUND)
	if name := fmt.Sprintf("%s %q", kind, id); !strings.Contains(err.Error(), name) {
		t.Fatalf("error = %v, want it to name %s", err, name)
	}
}

// wantConflict fails t unless err is ECONFLICT naming field.
func wantConflict(t *testing.T, err error, field string) {
	t.Helper()
	var e *idlegrid.Error
	if !errors.As(err, &e) || e.Code != idlegrid.ECONFLICT || e.Field != field {
		t.Fatalf("error = %v, want a conflict of %s", err, field)
	}
}

// testConversations: a conversation and its first items read back as
// they were stored, the items numbered from 1; its ID is its own; an
// invalid one, or one whose items share an ID, is refused naming the
// field and stores nothing; its metadata is set whole.
func testConversations(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	created := at(time.Second).Add(789 * time.Nanosecond) // kept to the microsecond
	c := &idlegrid.Conversation{ID: "conv_1", RenterID: "acct_ada", Metadata: map[string]string{"topic": "héllo"}, CreatedAt: created}
	first, second := convItem("msg_1", "héllo"), convItem("msg_2", "again")
	first.Item = json.RawMessage(`{ "id":"msg_1",  "type": "message", "content": "h\u00e9llo" }`) // spelled as the client did
	first.ResponseID, first.CreatedAt = "resp_1", created
	mustOK(t, db.CreateConversation(ctx, c, []*idlegrid.ConversationItem{first, second}))
	if first.Seq != 1 || second.Seq != 2 || first.ConversationID != c.ID || second.ConversationID != c.ID {
		t.Errorf("created items are %d and %d of %q and %q, want 1 and 2 of %q",
			first.Seq, second.Seq, first.ConversationID, second.ConversationID, c.ID)
	}

	want := *c
	want.CreatedAt = created.Truncate(time.Microsecond)
	got, err := db.FindConversation(ctx, "acct_ada", c.ID)
	mustOK(t, err)
	if diff := cmp.Diff(&want, got); diff != "" {
		t.Errorf("FindConversation (-want +got):\n%s", diff)
	}
	wantFirst := *first
	wantFirst.CreatedAt = created.Truncate(time.Microsecond)
	items := allItems(t, db, "acct_ada", c.ID)
	if diff := cmp.Diff([]*idlegrid.ConversationItem{&wantFirst, second}, items); diff != "" {
		t.Errorf("ConversationItems (-want +got):\n%s", diff) // the item as spelled, too
	}

	// Metadata: none reads back as empty, not nil; an update sets all of it.
	bare, _ := mustConversationOf(t, db, "acct_ada", 0)
	got, err = db.FindConversation(ctx, "acct_ada", bare.ID)
	mustOK(t, err)
	if got.Metadata == nil || len(got.Metadata) != 0 {
		t.Errorf("a conversation stored without metadata reads back with %#v, want an empty map", got.Metadata)
	}
	labels := map[string]string{"project": "lr-search", "owner": "ada"}
	updated, err := db.UpdateConversation(ctx, "acct_ada", c.ID, labels)
	mustOK(t, err)
	want.Metadata = labels
	for _, got := range []*idlegrid.Conversation{updated, mustFindConversation(t, db, "acct_ada", c.ID)} {
		if diff := cmp.Diff(&want, got); diff != "" {
			t.Errorf("after UpdateConversation (-want +got):\n%s", diff)
		}
	}
	updated, err = db.UpdateConversation(ctx, "acct_ada", c.ID, nil)
	mustOK(t, err)
	if len(updated.Metadata) != 0 || len(mustFindConversation(t, db, "acct_ada", c.ID).Metadata) != 0 {
		t.Errorf("metadata updated to none is %v, want none", updated.Metadata)
	}
	tooMany := map[string]string{}
	for i := range idlegrid.MaxMetadataPairs + 1 {
		tooMany[fmt.Sprint("k", i)] = "v"
	}
	_, err = db.UpdateConversation(ctx, "acct_ada", c.ID, tooMany)
	wantField(t, err, "metadata")
	_, err = db.UpdateConversation(ctx, "acct_ada", "conv_none", labels)
	wantNotFound(t, err, "conversation", "conv_none")

	// Its ID is its own, whoever asks.
	wantCode(t, db.CreateConversation(ctx, &idlegrid.Conversation{ID: c.ID, RenterID: "acct_bob", CreatedAt: t0}, nil), idlegrid.ECONFLICT)

	for field, spoil := range map[string]func(x *creation){
		"conversation.id":         func(x *creation) { x.c.ID = "" },
		"conversation.renter_id":  func(x *creation) { x.c.RenterID = "" },
		"conversation.created_at": func(x *creation) { x.c.CreatedAt = time.Time{} },
		"metadata":                func(x *creation) { x.c.Metadata = tooMany },
		"items[1].id":             func(x *creation) { x.items[1].ID = "" },
		"items[0]":                func(x *creation) { x.items[0].Item = json.RawMessage(`[]`) },
		"items[1].created_at":     func(x *creation) { x.items[1].CreatedAt = time.Time{} },
	} {
		bad := &creation{&idlegrid.Conversation{ID: "conv_bad", RenterID: "acct_ada", CreatedAt: t0}, convItems(2, "x")}
		spoil(bad)
		wantField(t, db.CreateConversation(ctx, bad.c, bad.items), field)
	}
	twice := convItems(3, "x")
	twice[2].ID = twice[0].ID
	wantConflict(t, db.CreateConversation(ctx, &idlegrid.Conversation{ID: "conv_bad", RenterID: "acct_ada", CreatedAt: t0}, twice), "items[2].id")
	_, err = db.FindConversation(ctx, "acct_ada", "conv_bad")
	wantNotFound(t, err, "conversation", "conv_bad") // none of the refused ones was stored
}

// creation is what CreateConversation is given.
type creation struct {
	c     *idlegrid.Conversation
	items []*idlegrid.ConversationItem
}

// mustFindConversation returns the renter's conversation convID.
func mustFindConversation(t *testing.T, db *sqlstore.DB, renterID, convID string) *idlegrid.Conversation {
	t.Helper()
	c, err := db.FindConversation(context.Background(), renterID, convID)
	mustOK(t, err)
	return c
}

// testConversationItems: items added take the next Seqs, in order; pages
// run either way from an item; an add whose items' IDs are taken, or
// given twice, or which is invalid, adds none and takes no Seq; an item
// deleted leaves a gap that no later one fills.
func testConversationItems(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	c, items := mustConversationOf(t, db, "acct_ada", 2)
	more := convItems(3, "more")
	more[1].ResponseID = "resp_1"
	mustOK(t, db.AddConversationItems(ctx, "acct_ada", c.ID, more))
	mustOK(t, db.AddConversationItems(ctx, "acct_ada", c.ID, nil))
	items = append(items, more...)
	if diff := cmp.Diff([]int64{1, 2, 3, 4, 5}, itemSeqs(items)); diff != "" {
		t.Errorf("Seqs set (-want +got):\n%s", diff)
	}
	for _, it := range more {
		if it.ConversationID != c.ID {
			t.Errorf("added item %s is of conversation %q, want %q", it.ID, it.ConversationID, c.ID)
		}
	}
	if diff := cmp.Diff(items, allItems(t, db, "acct_ada", c.ID), equateJSON); diff != "" {
		t.Errorf("ConversationItems (-added +got):\n%s", diff)
	}

	ids := itemIDs(items)
	for _, tc := range []struct {
		f    idlegrid.ConversationItemFilter
		want []string
	}{
		{idlegrid.ConversationItemFilter{Limit: 2}, ids[:2]},
		{idlegrid.ConversationItemFilter{After: ids[1], Limit: 2}, ids[2:4]},
		{idlegrid.ConversationItemFilter{After: ids[3], Limit: 10}, ids[4:]},
		{idlegrid.ConversationItemFilter{After: ids[4], Limit: 10}, nil},
		{idlegrid.ConversationItemFilter{Limit: 2, Desc: true}, []string{ids[4], ids[3]}},
		{idlegrid.ConversationItemFilter{After: ids[3], Limit: 10, Desc: true}, []string{ids[2], ids[1], ids[0]}},
		{idlegrid.ConversationItemFilter{After: ids[0], Limit: 10, Desc: true}, nil},
	} {
		got, err := db.ConversationItems(ctx, "acct_ada", c.ID, tc.f)
		mustOK(t, err)
		if diff := cmp.Diff(tc.want, itemIDs(got), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("ConversationItems(%+v) (-want +got):\n%s", tc.f, diff)
		}
	}
	other, theirs := mustConversationOf(t, db, "acct_ada", 1)
	for _, after := range []string{"msg_none", theirs[0].ID} {
		_, err := db.ConversationItems(ctx, "acct_ada", c.ID, idlegrid.ConversationItemFilter{After: after, Limit: 10})
		wantField(t, err, "after")
	}
	for _, limit := range []int{0, -1, idlegrid.MaxConversationPage + 1} {
		_, err := db.ConversationItems(ctx, "acct_ada", c.ID, idlegrid.ConversationItemFilter{Limit: limit})
		wantField(t, err, "limit")
	}

	// Refused adds add nothing, and take no Seq.
	fresh := convItem(id("msg"), "new")
	wantConflict(t, db.AddConversationItems(ctx, "acct_ada", c.ID, []*idlegrid.ConversationItem{fresh, convItem(ids[1], "again")}), "items[1].id")
	twice := convItems(3, "x")
	twice[2].ID = twice[1].ID
	wantConflict(t, db.AddConversationItems(ctx, "acct_ada", c.ID, twice), "items[2].id")
	invalid := []*idlegrid.ConversationItem{fresh, convItem("", "x")}
	wantField(t, db.AddConversationItems(ctx, "acct_ada", c.ID, invalid), "items[1].id")
	_, err := db.FindConversationItem(ctx, "acct_ada", c.ID, fresh.ID)
	wantNotFound(t, err, "item", fresh.ID)
	if got := itemIDs(allItems(t, db, "acct_ada", c.ID)); !cmp.Equal(ids, got) {
		t.Errorf("after refused adds the items are %v, want %v", got, ids)
	}
	// An item's ID is its conversation's own: another may hold it too.
	mustOK(t, db.AddConversationItems(ctx, "acct_ada", other.ID, []*idlegrid.ConversationItem{convItem(ids[0], "mine too")}))

	// Found by ID; deleted, it leaves a gap that later items do not fill.
	got, err := db.FindConversationItem(ctx, "acct_ada", c.ID, ids[3])
	mustOK(t, err)
	if diff := cmp.Diff(items[3], got, equateJSON); diff != "" {
		t.Errorf("FindConversationItem (-added +got):\n%s", diff)
	}
	mustOK(t, db.DeleteConversationItem(ctx, "acct_ada", c.ID, ids[4]))
	_, err = db.FindConversationItem(ctx, "acct_ada", c.ID, ids[4])
	wantNotFound(t, err, "item", ids[4])
	wantNotFound(t, db.DeleteConversationItem(ctx, "acct_ada", c.ID, ids[4]), "item", ids[4])
	_, err = db.ConversationItems(ctx, "acct_ada", c.ID, idlegrid.ConversationItemFilter{After: ids[4], Limit: 10})
	wantField(t, err, "after")
	last := convItem(id("msg"), "last")
	mustOK(t, db.AddConversationItems(ctx, "acct_ada", c.ID, []*idlegrid.ConversationItem{fresh, last}))
	if fresh.Seq != 6 || last.Seq != 7 {
		t.Errorf("items added after refused adds and a delete are %d and %d, want 6 and 7", fresh.Seq, last.Seq)
	}
	want := append(ids[:4:4], fresh.ID, last.ID)
	if got := itemIDs(allItems(t, db, "acct_ada", c.ID)); !cmp.Equal(want, got) {
		t.Errorf("items %v, want %v", got, want)
	}

	_, err = db.FindConversationItem(ctx, "acct_ada", "conv_none", ids[0])
	wantNotFound(t, err, "conversation", "conv_none")
	wantNotFound(t, db.DeleteConversationItem(ctx, "acct_ada", "conv_none", ids[0]), "conversation", "conv_none")
	wantNotFound(t, db.AddConversationItems(ctx, "acct_ada", "conv_none", convItems(1, "x")), "conversation", "conv_none")
	_, err = db.ConversationItems(ctx, "acct_ada", "conv_none", idlegrid.ConversationItemFilter{Limit: 10})
	wantNotFound(t, err, "conversation", "conv_none")
}

// testConversationsOtherRenter: another renter's conversation is none of
// the renter's, for every method, and is left as it was.
func testConversationsOtherRenter(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	c, items := mustConversationOf(t, db, "acct_ada", 3)
	c.Metadata = map[string]string{"k": "v"}
	_, err := db.UpdateConversation(ctx, "acct_ada", c.ID, c.Metadata)
	mustOK(t, err)
	bob := "acct_bob"
	_, err = db.FindConversation(ctx, bob, c.ID)
	wantNotFound(t, err, "conversation", c.ID)
	_, err = db.UpdateConversation(ctx, bob, c.ID, nil)
	wantNotFound(t, err, "conversation", c.ID)
	wantNotFound(t, db.AddConversationItems(ctx, bob, c.ID, convItems(1, "x")), "conversation", c.ID)
	wantNotFound(t, db.AddConversationItems(ctx, bob, c.ID, nil), "conversation", c.ID)
	_, err = db.ConversationItems(ctx, bob, c.ID, idlegrid.ConversationItemFilter{Limit: 10})
	wantNotFound(t, err, "conversation", c.ID)
	_, _, err = db.ConversationHistory(ctx, bob, c.ID, 10, anyChars)
	wantNotFound(t, err, "conversation", c.ID)
	_, err = db.FindConversationItem(ctx, bob, c.ID, items[0].ID)
	wantNotFound(t, err, "conversation", c.ID)
	wantNotFound(t, db.DeleteConversationItem(ctx, bob, c.ID, items[0].ID), "conversation", c.ID)
	wantNotFound(t, db.DeleteConversation(ctx, bob, c.ID), "conversation", c.ID)

	if got := mustFindConversation(t, db, "acct_ada", c.ID); !cmp.Equal(c.Metadata, got.Metadata) {
		t.Errorf("after another renter's calls the metadata is %v, want %v", got.Metadata, c.Metadata)
	}
	if diff := cmp.Diff(items, allItems(t, db, "acct_ada", c.ID), equateJSON); diff != "" {
		t.Errorf("after another renter's calls (-added +got):\n%s", diff)
	}
}

// testConversationsDelete: a deleted conversation is gone with its items,
// and a conversation stored again under its ID starts empty, from Seq 1,
// free to hold items of the deleted one's IDs.
func testConversationsDelete(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	c, items := mustConversationOf(t, db, "acct_ada", 3)
	kept, keptItems := mustConversationOf(t, db, "acct_ada", 2)
	mustOK(t, db.DeleteConversation(ctx, "acct_ada", c.ID))
	_, err := db.FindConversation(ctx, "acct_ada", c.ID)
	wantNotFound(t, err, "conversation", c.ID)
	_, err = db.FindConversationItem(ctx, "acct_ada", c.ID, items[0].ID)
	wantNotFound(t, err, "conversation", c.ID)
	wantNotFound(t, db.DeleteConversation(ctx, "acct_ada", c.ID), "conversation", c.ID)

	again := &idlegrid.Conversation{ID: c.ID, RenterID: "acct_ada", CreatedAt: at(time.Hour)}
	mustOK(t, db.CreateConversation(ctx, again, nil))
	if got := allItems(t, db, "acct_ada", c.ID); len(got) != 0 {
		t.Errorf("a conversation stored again under a deleted one's ID holds %v, want none", itemIDs(got))
	}
	_, whole, err := db.ConversationHistory(ctx, "acct_ada", c.ID, 10, anyChars)
	mustOK(t, err)
	if !whole {
		t.Errorf("the history of an empty conversation is not whole")
	}
	reused := convItem(items[1].ID, "reused")
	mustOK(t, db.AddConversationItems(ctx, "acct_ada", c.ID, []*idlegrid.ConversationItem{reused}))
	if reused.Seq != 1 {
		t.Errorf("the first item of a conversation stored again is %d, want 1", reused.Seq)
	}
	if diff := cmp.Diff(keptItems, allItems(t, db, "acct_ada", kept.ID), equateJSON); diff != "" {
		t.Errorf("another conversation's items after a delete (-added +got):\n%s", diff)
	}
}

// testConversationHistory: a history is the conversation's latest limit
// items, the first first, none before the one whose characters (not
// bytes) bring those counted from the last over the bound, and whole only
// when it holds every item.
func testConversationHistory(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	c := newConversation("acct_ada")
	var items []*idlegrid.ConversationItem
	for i := range 5 {
		items = append(items, convItem(id("msg"), strings.Repeat("é", 10*(i+1)))) // a byte is not a character
	}
	mustOK(t, db.CreateConversation(ctx, c, items[:2]))
	mustOK(t, db.AddConversationItems(ctx, "acct_ada", c.ID, items[2:]))
	ids := itemIDs(items)
	chars := func(items ...*idlegrid.ConversationItem) (n int64) {
		for _, it := range items {
			n += int64(utf8.RuneCount(it.Item))
		}
		return n
	}
	last, lastTwo, allButFirst := chars(items[4]), chars(items[3:]...), chars(items[1:]...)
	for _, tc := range []struct {
		limit    int
		maxChars int64
		want     []string
		whole    bool
	}{
		{10, anyChars, ids, true},
		{5, anyChars, ids, true},
		{4, anyChars, ids[1:], false},
		{1, anyChars, ids[4:], false},
		{10, 1, ids[4:], false},
		{10, last - 1, ids[4:], false},
		{10, last, ids[3:], false}, // the one that crosses the bound is the last returned
		{10, lastTwo - 1, ids[3:], false},
		{10, lastTwo, ids[2:], false},
		{10, allButFirst - 1, ids[1:], false},
		{10, allButFirst, ids, true},
		{3, allButFirst, ids[2:], false},
	} {
		got, whole, err := db.ConversationHistory(ctx, "acct_ada", c.ID, tc.limit, tc.maxChars)
		mustOK(t, err)
		if diff := cmp.Diff(tc.want, itemIDs(got)); diff != "" || whole != tc.whole {
			t.Errorf("ConversationHistory(limit %d, %d characters): whole %v, want %v (-want +got):\n%s",
				tc.limit, tc.maxChars, whole, tc.whole, diff)
		}
	}
	got, _, err := db.ConversationHistory(ctx, "acct_ada", c.ID, 10, anyChars)
	mustOK(t, err)
	if diff := cmp.Diff(items, got, equateJSON); diff != "" {
		t.Errorf("ConversationHistory reads back (-added +got):\n%s", diff)
	}
	for _, limit := range []int{0, -1, sqlstore.MaxConversationHistory + 1} {
		_, _, err := db.ConversationHistory(ctx, "acct_ada", c.ID, limit, anyChars)
		wantField(t, err, "limit")
	}
	for _, bound := range []int64{0, -1} {
		_, _, err := db.ConversationHistory(ctx, "acct_ada", c.ID, 10, bound)
		wantField(t, err, "max_chars")
	}
	_, _, err = db.ConversationHistory(ctx, "acct_ada", "conv_none", 10, anyChars)
	wantNotFound(t, err, "conversation", "conv_none")

	// Deleted items are not counted: what is left is whole.
	mustOK(t, db.DeleteConversationItem(ctx, "acct_ada", c.ID, ids[0]))
	mustOK(t, db.DeleteConversationItem(ctx, "acct_ada", c.ID, ids[3]))
	got, whole, err := db.ConversationHistory(ctx, "acct_ada", c.ID, 3, anyChars)
	mustOK(t, err)
	if want := []string{ids[1], ids[2], ids[4]}; !cmp.Equal(want, itemIDs(got)) || !whole {
		t.Errorf("after deletes the history is %v (whole %v), want %v, whole", itemIDs(got), whole, want)
	}
}

// testConversationsConcurrent: adders at once each get a run of Seqs of
// their own, in the order of their items, and no Seq is lost or shared.
func testConversationsConcurrent(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	c, _ := mustConversationOf(t, db, "acct_ada", 1)
	const adders, adds, each = 8, 5, 3
	added := make([][]*idlegrid.ConversationItem, adders)
	errs := make([]error, adders)
	var wg sync.WaitGroup
	for a := range adders {
		wg.Go(func() {
			for range adds {
				items := convItems(each, fmt.Sprint("adder ", a))
				if errs[a] = db.AddConversationItems(ctx, "acct_ada", c.ID, items); errs[a] != nil {
					return
				}
				added[a] = append(added[a], items...)
			}
		})
	}
	wg.Wait()
	if u, err := db.ConversationUsage(ctx, "acct_ada"); err != nil || u.Items != 1+adders*adds*each {
		t.Errorf("after the adds, the renter holds %+v, %v; want %d items", u, err, 1+adders*adds*each)
	}
	bySeq := map[int64]string{1: "first"}
	for a, items := range added {
		mustOK(t, errs[a])
		for i, it := range items {
			if i > 0 && it.Seq <= items[i-1].Seq || i%each > 0 && it.Seq != items[i-1].Seq+1 {
				t.Errorf("adder %d's items take Seqs %v, want each add's a run, and later adds later", a, itemSeqs(items))
				break
			}
			if bySeq[it.Seq] != "" {
				t.Fatalf("Seq %d taken by %s and %s", it.Seq, bySeq[it.Seq], it.ID)
			}
			bySeq[it.Seq] = it.ID
		}
	}
	got := allItems(t, db, "acct_ada", c.ID)
	if len(got) != 1+adders*adds*each {
		t.Fatalf("%d items, want %d", len(got), 1+adders*adds*each)
	}
	for i, it := range got {
		if it.Seq != int64(i+1) || i > 0 && bySeq[it.Seq] != it.ID {
			t.Fatalf("item %d is %s at Seq %d, want Seq %d, %s", i, it.ID, it.Seq, i+1, bySeq[int64(i+1)])
		}
	}
}

// Two servers adding to one conversation at once, on PostgreSQL: each
// waits for the conversation's lock before it reads the Seq to take (not
// only when it writes, which would leave its read stale and the commit
// failing on the table's keys, mended only by the group commit's rerun);
// then the second takes the Seqs after the first's, and finds an ID the
// first added already in it, naming the item.
func TestDB_race_conversationItems(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	other := mustOpen(t, r.dsn)
	c, _ := mustConversationOf(t, r.db, "acct_ada", 1)

	mine, theirs := convItems(2, "mine"), convItems(2, "theirs")
	release := r.block(t, `SELECT id FROM conversations WHERE id = $1 FOR UPDATE`, c.ID)
	var wg sync.WaitGroup
	var e1, e2 error
	goErr(&wg, &e1, func() error { return r.db.AddConversationItems(ctx, "acct_ada", c.ID, mine) })
	goErr(&wg, &e2, func() error { return other.AddConversationItems(ctx, "acct_ada", c.ID, theirs) })
	r.waitLocked(t, 2)
	var reading int
	mustOK(t, r.raw.QueryRow(`SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database()
		AND wait_event_type = 'Lock' AND query LIKE 'SELECT next_seq %'`).Scan(&reading))
	release()
	wg.Wait()
	if reading != 2 {
		t.Errorf("%d adders wait for the conversation's lock to read its next Seq, want 2", reading)
	}
	mustOK(t, e1)
	mustOK(t, e2)
	seqs := append(itemSeqs(mine), itemSeqs(theirs)...)
	if want := [][]int64{{2, 3, 4, 5}, {4, 5, 2, 3}}; !cmp.Equal(seqs, want[0]) && !cmp.Equal(seqs, want[1]) {
		t.Errorf("Seqs of two servers' adds: %v, want runs of 2 to 5", seqs)
	}

	release = r.block(t, `SELECT id FROM conversations WHERE id = $1 FOR UPDATE`, c.ID)
	same := []*idlegrid.ConversationItem{convItem(id("msg"), "x"), convItem("msg_same", "same")}
	goErr(&wg, &e1, func() error { return r.db.AddConversationItems(ctx, "acct_ada", c.ID, same[1:]) })
	goErr(&wg, &e2, func() error { return other.AddConversationItems(ctx, "acct_ada", c.ID, same) })
	r.waitLocked(t, 2)
	release()
	wg.Wait()
	if (e1 == nil) == (e2 == nil) {
		t.Fatalf("both servers adding msg_same: %v and %v, want one ECONFLICT", e1, e2)
	}
	if e1 != nil {
		wantConflict(t, e1, "items[0].id")
	} else {
		wantConflict(t, e2, "items[1].id")
	}
	want := 7 // the add of both, after the refused one of msg_same alone
	if e2 != nil {
		want = 6 // the add of msg_same alone, and none of the refused one
	}
	if n := len(allItems(t, r.db, "acct_ada", c.ID)); n != want {
		t.Errorf("%d items, want %d", n, want)
	}
}

// testConversationsFindItem: an item is found by its ID alone among the
// renter's conversations, the one added last when two have it; another
// renter's, or one deleted, is not found.
func testConversationsFindItem(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	first, items := mustConversationOf(t, db, "acct_ada", 2)
	got, err := db.FindItem(ctx, "acct_ada", items[1].ID)
	mustOK(t, err)
	if diff := cmp.Diff(items[1], got, equateJSON); diff != "" {
		t.Errorf("FindItem (-added +got):\n%s", diff)
	}

	second, _ := mustConversationOf(t, db, "acct_ada", 0)
	again := convItem(items[1].ID, "said again")
	again.CreatedAt = at(time.Minute)
	mustOK(t, db.AddConversationItems(ctx, "acct_ada", second.ID, []*idlegrid.ConversationItem{again}))
	if got, err := db.FindItem(ctx, "acct_ada", items[1].ID); err != nil || got.ConversationID != second.ID {
		t.Errorf("FindItem of an ID in two conversations = %+v, %v; want the one in %s, added last", got, err, second.ID)
	}

	_, err = db.FindItem(ctx, "acct_bob", items[0].ID)
	wantNotFound(t, err, "item", items[0].ID)
	mustOK(t, db.DeleteConversation(ctx, "acct_ada", first.ID))
	_, err = db.FindItem(ctx, "acct_ada", items[0].ID)
	wantNotFound(t, err, "item", items[0].ID)
}

// testConversationsUsage: what a renter's conversations hold counts every
// item added and deleted, with its characters (not bytes), whichever way:
// a conversation's first items, items added, an item deleted, a
// conversation deleted; a refused write counts nothing, and each renter
// counts its own.
func testConversationsUsage(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	usage := func(renterID string) idlegrid.ConversationUsage {
		t.Helper()
		u, err := db.ConversationUsage(ctx, renterID)
		mustOK(t, err)
		return u
	}
	chars := func(items ...*idlegrid.ConversationItem) (n int64) {
		for _, it := range items {
			n += int64(utf8.RuneCount(it.Item))
		}
		return n
	}
	if u := usage("acct_ada"); u != (idlegrid.ConversationUsage{}) {
		t.Fatalf("a renter with no conversations holds %+v, want nothing", u)
	}
	c := newConversation("acct_ada")
	first := []*idlegrid.ConversationItem{convItem(id("msg"), "héllo"), convItem(id("msg"), "wörld")}
	mustOK(t, db.CreateConversation(ctx, c, first))
	more := convItems(3, "ça va")
	mustOK(t, db.AddConversationItems(ctx, "acct_ada", c.ID, more))
	want := idlegrid.ConversationUsage{Items: 5, Chars: chars(append(first, more...)...)}
	if u := usage("acct_ada"); u != want {
		t.Fatalf("after 2 items and 3 more: %+v, want %+v", u, want)
	}
	wantConflict(t, db.AddConversationItems(ctx, "acct_ada", c.ID, []*idlegrid.ConversationItem{convItem(id("msg"), "new"), convItem(first[0].ID, "again")}), "items[1].id")
	wantNotFound(t, db.DeleteConversationItem(ctx, "acct_ada", c.ID, "msg_none"), "item", "msg_none")
	wantNotFound(t, db.DeleteConversationItem(ctx, "acct_bob", c.ID, first[0].ID), "conversation", c.ID)
	if u := usage("acct_ada"); u != want {
		t.Fatalf("after refused writes: %+v, want %+v still", u, want)
	}
	_, otherItems := mustConversationOf(t, db, "acct_bob", 2)
	if u := usage("acct_bob"); u != (idlegrid.ConversationUsage{Items: 2, Chars: chars(otherItems...)}) {
		t.Errorf("another renter holds %+v, want its own 2 items", u)
	}
	mustOK(t, db.DeleteConversationItem(ctx, "acct_ada", c.ID, more[1].ID))
	want = idlegrid.ConversationUsage{Items: 4, Chars: want.Chars - chars(more[1])}
	if u := usage("acct_ada"); u != want {
		t.Fatalf("after an item deleted: %+v, want %+v", u, want)
	}
	empty := newConversation("acct_ada")
	mustOK(t, db.CreateConversation(ctx, empty, nil))
	mustOK(t, db.DeleteConversation(ctx, "acct_ada", empty.ID))
	mustOK(t, db.DeleteConversation(ctx, "acct_ada", c.ID))
	if u := usage("acct_ada"); u != (idlegrid.ConversationUsage{}) {
		t.Errorf("after its conversations were deleted: %+v, want nothing", u)
	}
	if u := usage("acct_bob"); u.Items != 2 {
		t.Errorf("the other renter after the first's deletes: %+v, want its 2 items", u)
	}
}
