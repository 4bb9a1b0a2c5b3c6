package sqlstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
)

// equateJSON compares JSON texts by what they say, not how they are
// spelled: a store may keep them in its own form.
var equateJSON = cmp.Comparer(func(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return string(a) == string(b)
	}
	return cmp.Equal(x, y)
})

// keptResponse is a valid response of renter, continuing prev, created
// at created and kept until expires.
func keptResponse(renterID, respID, prev string, created, expires time.Time) *idlegrid.KeptResponse {
	return &idlegrid.KeptResponse{
		ID: respID, RenterID: renterID, Model: "llama-3-8b", PreviousID: prev,
		Input:     json.RawMessage(fmt.Sprintf(`[{"role": "user", "content": "after %s"}]`, prev)),
		Response:  json.RawMessage(fmt.Sprintf(`{"id": %q, "object": "response", "output": [{"type": "message"}]}`, respID)),
		CreatedAt: created, ExpiresAt: expires,
	}
}

// mustKeep stores a response of renter continuing prev, kept for a day
// from t0, and returns it.
func mustKeep(t *testing.T, db *sqlstore.DB, renterID, prev string) *idlegrid.KeptResponse {
	t.Helper()
	r := keptResponse(renterID, id("resp"), prev, t0, at(24*time.Hour))
	mustOK(t, db.KeepResponse(context.Background(), r))
	return r
}

// mustConversation stores a conversation of n responses of renter, each
// continuing the one before, and returns them, the first first.
func mustConversation(t *testing.T, db *sqlstore.DB, renterID string, n int) []*idlegrid.KeptResponse {
	t.Helper()
	var conv []*idlegrid.KeptResponse
	prev := ""
	for range n {
		r := mustKeep(t, db, renterID, prev)
		conv, prev = append(conv, r), r.ID
	}
	return conv
}

// responseIDs are the IDs of rs, in order.
func responseIDs(rs []*idlegrid.KeptResponse) []string {
	ids := make([]string, len(rs))
	for i, r := range rs {
		ids[i] = r.ID
	}
	return ids
}

// anyChars bounds a chain's characters beyond any a test keeps.
const anyChars = 1 << 40

// wantChain fails t unless the renter's chain from respID, at now and
// limit, is want, the first having PreviousID firstPrev.
func wantChain(t *testing.T, db *sqlstore.DB, renterID, respID string, now time.Time, limit int, firstPrev string, want ...string) {
	t.Helper()
	got, err := db.ResponseChain(context.Background(), renterID, respID, now, limit, anyChars)
	mustOK(t, err)
	if diff := cmp.Diff(want, responseIDs(got)); diff != "" {
		t.Fatalf("ResponseChain(%s, limit %d) (-want +got):\n%s", respID, limit, diff)
	}
	if got[0].PreviousID != firstPrev {
		t.Errorf("ResponseChain(%s, limit %d): the first continues %q, want %q", respID, limit, got[0].PreviousID, firstPrev)
	}
}

// testKeptResponses: a response reads back as it was kept, its ID is its
// own, an invalid one is refused naming its field, and another renter's
// response is none of the renter's to read, follow or delete.
func testKeptResponses(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	created := at(time.Second).Add(789 * time.Nanosecond) // kept to the microsecond
	r := keptResponse("acct_ada", "resp_1", "resp_0", created, created.Add(30*24*time.Hour))
	r.Input = json.RawMessage(`[ {"role":"user",  "content": "héllo \u00e9"} ]`) // spelled as the client did
	r.HeldUntil = created.Add(30 * time.Second)
	mustOK(t, db.KeepResponse(ctx, r))

	want := *r
	want.CreatedAt, want.ExpiresAt = created.Truncate(time.Microsecond), r.ExpiresAt.Truncate(time.Microsecond)
	want.HeldUntil = r.HeldUntil.Truncate(time.Microsecond)
	got, err := db.FindResponse(ctx, "acct_ada", "resp_1", at(time.Hour))
	mustOK(t, err)
	if diff := cmp.Diff(&want, got, equateJSON); diff != "" {
		t.Errorf("FindResponse (-want +got):\n%s", diff)
	}

	again := keptResponse("acct_bob", "resp_1", "", t0, at(time.Hour))
	wantCode(t, db.KeepResponse(ctx, again), idlegrid.ECONFLICT)

	for field, spoil := range map[string]func(r *idlegrid.KeptResponse){
		"response.id":          func(r *idlegrid.KeptResponse) { r.ID = "" },
		"response.renter_id":   func(r *idlegrid.KeptResponse) { r.RenterID = "" },
		"response.model":       func(r *idlegrid.KeptResponse) { r.Model = "" },
		"response.previous_id": func(r *idlegrid.KeptResponse) { r.PreviousID = r.ID },
		"response.input":       func(r *idlegrid.KeptResponse) { r.Input = json.RawMessage(`"hello"`) },
		"response.response":    func(r *idlegrid.KeptResponse) { r.Response = json.RawMessage(`[]`) },
		"response.created_at":  func(r *idlegrid.KeptResponse) { r.CreatedAt = time.Time{} },
		"response.expires_at":  func(r *idlegrid.KeptResponse) { r.ExpiresAt = r.CreatedAt },
		"response.held_until":  func(r *idlegrid.KeptResponse) { r.HeldUntil = r.CreatedAt },
	} {
		bad := keptResponse("acct_ada", "resp_bad", "", t0, at(time.Hour))
		spoil(bad)
		wantField(t, db.KeepResponse(ctx, bad), field)
	}
	_, err = db.FindResponse(ctx, "acct_ada", "resp_bad", t0)
	wantCode(t, err, idlegrid.ENOTFOUND) // none of the invalid ones was kept

	// Another renter's: not found, and left as it is.
	_, err = db.FindResponse(ctx, "acct_bob", "resp_1", at(time.Hour))
	wantCode(t, err, idlegrid.ENOTFOUND)
	_, err = db.ResponseChain(ctx, "acct_bob", "resp_1", at(time.Hour), 10, anyChars)
	wantCode(t, err, idlegrid.ENOTFOUND)
	wantCode(t, db.DeleteResponse(ctx, "acct_bob", "resp_1", at(time.Hour)), idlegrid.ENOTFOUND)
	if _, err := db.FindResponse(ctx, "acct_ada", "resp_1", at(time.Hour)); err != nil {
		t.Fatalf("the renter's response after another renter's delete: %v, want it kept", err)
	}

	mustOK(t, db.DeleteResponse(ctx, "acct_ada", "resp_1", at(time.Hour)))
	_, err = db.FindResponse(ctx, "acct_ada", "resp_1", at(time.Hour))
	wantCode(t, err, idlegrid.ENOTFOUND)
	wantCode(t, db.DeleteResponse(ctx, "acct_ada", "resp_1", at(time.Hour)), idlegrid.ENOTFOUND)
	_, err = db.FindResponse(ctx, "acct_ada", "resp_none", at(time.Hour))
	wantCode(t, err, idlegrid.ENOTFOUND)
}

// testKeptResponsesChain: a conversation reads back the first first, the
// latest limit of it when it is longer, none past the response that
// brings it over its bound of characters, and stops where a response it
// continued is gone or is another renter's; a loop of responses ends.
func testKeptResponsesChain(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	now := at(time.Hour)
	conv := mustConversation(t, db, "acct_ada", 5)
	ids := responseIDs(conv)

	wantChain(t, db, "acct_ada", ids[4], now, 10, "", ids...)
	wantChain(t, db, "acct_ada", ids[4], now, 5, "", ids...)
	wantChain(t, db, "acct_ada", ids[4], now, 3, ids[1], ids[2:]...)
	wantChain(t, db, "acct_ada", ids[4], now, 1, ids[3], ids[4])
	wantChain(t, db, "acct_ada", ids[2], now, 10, "", ids[:3]...)
	got, err := db.ResponseChain(ctx, "acct_ada", ids[4], now, 10, anyChars)
	mustOK(t, err)
	if diff := cmp.Diff(conv, got, equateJSON); diff != "" {
		t.Errorf("ResponseChain reads back (-kept +got):\n%s", diff)
	}
	for _, limit := range []int{0, -1, sqlstore.MaxResponseChain + 1} {
		_, err := db.ResponseChain(ctx, "acct_ada", ids[4], now, limit, anyChars)
		wantField(t, err, "limit")
	}
	// Bounded by characters: no response read past the one that crossed
	// the bound.
	chars := func(r *idlegrid.KeptResponse) int64 {
		return int64(len([]rune(string(r.Input))) + len([]rune(string(r.Response))))
	}
	last, lastTwo := chars(conv[4]), chars(conv[4])+chars(conv[3])
	for _, tc := range []struct {
		max  int64
		want []string
	}{{1, ids[4:]}, {last, ids[3:]}, {lastTwo - 1, ids[3:]}, {lastTwo, ids[2:]}, {anyChars, ids}} {
		got, err := db.ResponseChain(ctx, "acct_ada", ids[4], now, 10, tc.max)
		mustOK(t, err)
		if diff := cmp.Diff(tc.want, responseIDs(got)); diff != "" {
			t.Errorf("ResponseChain(%d characters) (-want +got):\n%s", tc.max, diff)
		}
	}
	for _, bound := range []int64{0, -1} {
		_, err := db.ResponseChain(ctx, "acct_ada", ids[4], now, 10, bound)
		wantField(t, err, "max_chars")
	}

	// Another renter continuing the renter's response follows none of it.
	theirs := mustKeep(t, db, "acct_bob", ids[4])
	wantChain(t, db, "acct_bob", theirs.ID, now, 10, ids[4], theirs.ID)

	// A deleted response cuts the chains through it; the rest are kept.
	mustOK(t, db.DeleteResponse(ctx, "acct_ada", ids[2], now))
	wantChain(t, db, "acct_ada", ids[4], now, 10, ids[2], ids[3:]...)
	wantChain(t, db, "acct_ada", ids[1], now, 10, "", ids[:2]...)
	_, err = db.ResponseChain(ctx, "acct_ada", ids[2], now, 10, anyChars)
	wantCode(t, err, idlegrid.ENOTFOUND)

	// Two responses that continue each other, each kept before the other.
	a, b := id("resp"), id("resp")
	mustOK(t, db.KeepResponse(ctx, keptResponse("acct_ada", a, b, t0, at(24*time.Hour))))
	mustOK(t, db.KeepResponse(ctx, keptResponse("acct_ada", b, a, t0, at(24*time.Hour))))
	wantChain(t, db, "acct_ada", a, now, 10, a, b, a)
	wantChain(t, db, "acct_ada", a, now, sqlstore.MaxResponseChain, a, b, a)
	wantChain(t, db, "acct_ada", a, now, 1, b, a)
	// And a conversation that runs into such a loop.
	c := mustKeep(t, db, "acct_ada", a)
	wantChain(t, db, "acct_ada", c.ID, now, 10, a, b, a, c.ID)
}

// testKeptResponsesExpiry: a response reads as gone from its ExpiresAt on,
// whether or not it was deleted, and cuts the chains through it;
// ForgetResponses deletes those expired before its cutoff, the first to
// expire first, a batch at a time.
func testKeptResponsesExpiry(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	first := keptResponse("acct_ada", id("resp"), "", t0, at(time.Hour))
	second := keptResponse("acct_ada", id("resp"), first.ID, at(time.Minute), at(3*time.Hour))
	mustOK(t, db.KeepResponse(ctx, first))
	mustOK(t, db.KeepResponse(ctx, second))

	justBefore := at(time.Hour - time.Microsecond)
	if _, err := db.FindResponse(ctx, "acct_ada", first.ID, justBefore); err != nil {
		t.Fatalf("FindResponse a microsecond before it expires: %v", err)
	}
	wantChain(t, db, "acct_ada", second.ID, justBefore, 10, "", first.ID, second.ID)
	_, err := db.FindResponse(ctx, "acct_ada", first.ID, at(time.Hour))
	wantCode(t, err, idlegrid.ENOTFOUND)
	_, err = db.ResponseChain(ctx, "acct_ada", first.ID, at(time.Hour), 10, anyChars)
	wantCode(t, err, idlegrid.ENOTFOUND)
	wantCode(t, db.DeleteResponse(ctx, "acct_ada", first.ID, at(time.Hour)), idlegrid.ENOTFOUND)
	wantChain(t, db, "acct_ada", second.ID, at(time.Hour), 10, first.ID, second.ID)
	// Expired, not yet deleted: its ID is still taken.
	wantCode(t, db.KeepResponse(ctx, keptResponse("acct_ada", first.ID, "", at(time.Hour), at(2*time.Hour))), idlegrid.ECONFLICT)

	// Five more, expiring at 1h30m, 2h, 2h, 2h30m and 4h.
	var later []*idlegrid.KeptResponse
	for _, m := range []time.Duration{90, 120, 120, 150, 240} {
		r := keptResponse("acct_ada", id("resp"), "", t0, at(m*time.Minute))
		mustOK(t, db.KeepResponse(ctx, r))
		later = append(later, r)
	}
	// kept says which of first, second and later... are still stored: each
	// reads back at t0, before any expired, unless deleted.
	kept := func(want ...bool) {
		t.Helper()
		for i, r := range append([]*idlegrid.KeptResponse{first, second}, later...) {
			_, err := db.FindResponse(ctx, "acct_ada", r.ID, t0)
			if stored := err == nil; stored != want[i] {
				t.Errorf("response %d (expires %s) stored: %v (%v), want %v", i, r.ExpiresAt.Sub(t0), stored, err, want[i])
			}
		}
	}
	before := at(2*time.Hour + 30*time.Minute) // the one expiring at it is not due
	forget := func(limit, want int) {
		t.Helper()
		if n, err := db.ForgetResponses(ctx, before, limit); err != nil || n != want {
			t.Fatalf("ForgetResponses(before 2h30m, limit %d) = %d, %v; want %d", limit, n, err, want)
		}
	}
	forget(2, 2)
	kept(false, true, false, true, true, true, true) // 1h and 1h30m
	forget(1, 1)
	kept(false, true, false, false, true, true, true) // of the two at 2h, the lesser ID
	forget(10, 1)
	kept(false, true, false, false, false, true, true)
	if n, err := db.ForgetResponses(ctx, before, 10); err != nil || n != 0 {
		t.Errorf("ForgetResponses once more = %d, %v; want none due", n, err)
	}
	if n, err := db.ForgetResponses(ctx, at(5*time.Hour), sqlstore.MaxExpiryBatch); err != nil || n != 3 {
		t.Errorf("ForgetResponses(before 5h) = %d, %v; want the 3 left", n, err)
	}
	kept(false, false, false, false, false, false, false)
	for _, limit := range []int{0, sqlstore.MaxExpiryBatch + 1} {
		_, err := db.ForgetResponses(ctx, before, limit)
		wantField(t, err, "limit")
	}
}

// testKeptResponsesUpdate: a background response's object moves on in
// place, for its renter only, until it expires, and only from the object
// its writer last read: a write that another one came before changes
// nothing.
func testKeptResponsesUpdate(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	r := mustKeep(t, db, "acct_ada", "")
	done := json.RawMessage(`{"id": "x", "status": "completed", "output": [{"type": "message"}]}`)
	mustOK(t, db.UpdateResponse(ctx, "acct_ada", r.ID, r.Response, done, at(time.Hour)))
	got, err := db.FindResponse(ctx, "acct_ada", r.ID, at(time.Hour))
	mustOK(t, err)
	if !equateJSONBytes(got.Response, done) || string(got.Input) != string(r.Input) {
		t.Errorf("after UpdateResponse: %s, input %s; want the new object, the input as kept", got.Response, got.Input)
	}
	cancelled := json.RawMessage(`{"id": "x", "status": "cancelled", "output": []}`)
	for _, tc := range []struct {
		renter    string
		now       time.Time
		was, resp json.RawMessage
		code      string
	}{
		{"acct_ada", at(time.Hour), r.Response, cancelled, idlegrid.ECONFLICT},        // done came first
		{"acct_bob", at(time.Hour), got.Response, cancelled, idlegrid.ENOTFOUND},      // another renter's
		{"acct_ada", at(25 * time.Hour), got.Response, cancelled, idlegrid.ENOTFOUND}, // expired
		{"acct_ada", at(time.Hour), got.Response, json.RawMessage(`[1]`), idlegrid.EINVALID},
	} {
		if err := db.UpdateResponse(ctx, tc.renter, r.ID, tc.was, tc.resp, tc.now); idlegrid.ErrorCode(err) != tc.code {
			t.Errorf("UpdateResponse(%s, %s, from %s to %s) = %v, want %s", tc.renter, tc.now, tc.was, tc.resp, err, tc.code)
		}
	}
	if got, _ := db.FindResponse(ctx, "acct_ada", r.ID, at(time.Hour)); !equateJSONBytes(got.Response, done) {
		t.Errorf("a refused update changed the response: %s", got.Response)
	}
	mustOK(t, db.UpdateResponse(ctx, "acct_ada", r.ID, got.Response, cancelled, at(time.Hour)))
}

// testKeptResponsesHold: a background run renews its response's hold
// while the object is as it last stored it; once another write changed
// the object (a cancel), or the response is gone, the hold is refused and
// left as it was. The object's own updates leave the hold as it is.
func testKeptResponsesHold(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	r := keptResponse("acct_ada", id("resp"), "", t0, at(24*time.Hour))
	r.HeldUntil = at(30 * time.Second)
	mustOK(t, db.KeepResponse(ctx, r))
	held := func(want time.Time) {
		t.Helper()
		got, err := db.FindResponse(ctx, "acct_ada", r.ID, at(time.Minute))
		mustOK(t, err)
		if !got.HeldUntil.Equal(want) {
			t.Errorf("held until %s, want %s", got.HeldUntil, want)
		}
	}
	mustOK(t, db.HoldResponse(ctx, "acct_ada", r.ID, r.Response, at(time.Minute), at(30*time.Second)))
	held(at(time.Minute))
	running := json.RawMessage(`{"id": "x", "status": "in_progress", "output": []}`)
	mustOK(t, db.UpdateResponse(ctx, "acct_ada", r.ID, r.Response, running, at(40*time.Second)))
	held(at(time.Minute))
	for _, tc := range []struct {
		renter string
		now    time.Time
		was    json.RawMessage
		until  time.Time
		code   string
	}{
		{"acct_ada", at(time.Minute), r.Response, at(2 * time.Minute), idlegrid.ECONFLICT}, // moved on since
		{"acct_bob", at(time.Minute), running, at(2 * time.Minute), idlegrid.ENOTFOUND},    // another renter's
		{"acct_ada", at(25 * time.Hour), running, at(26 * time.Hour), idlegrid.ENOTFOUND},  // expired
		{"acct_ada", at(time.Minute), running, time.Time{}, idlegrid.EINVALID},
	} {
		if err := db.HoldResponse(ctx, tc.renter, r.ID, tc.was, tc.until, tc.now); idlegrid.ErrorCode(err) != tc.code {
			t.Errorf("HoldResponse(%s, %s, from %s until %s) = %v, want %s", tc.renter, tc.now, tc.was, tc.until, err, tc.code)
		}
	}
	held(at(time.Minute))
	mustOK(t, db.HoldResponse(ctx, "acct_ada", r.ID, running, at(90*time.Second), at(time.Minute)))
	held(at(90 * time.Second))
}

func equateJSONBytes(a, b json.RawMessage) bool { return cmp.Equal(a, b, equateJSON) }
