package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
)

// TestKeyCreate_idempotencyKey: "key create" run again with its
// --idempotency-key makes no second key: it shows the first with a new
// secret, and the first secret no longer works; asking for another key
// under it is refused, saying what to do.
func TestKeyCreate_idempotencyKey(t *testing.T) {
	_, renter, _, _, _ := moneyMarket(t)
	ctx := context.Background()
	create := []string{"key", "create", "--name", "ci", "--access", "use", "--idempotency-key", "ci-setup", "--json"}
	var first, again createdKey
	mustJSON(t, renter, &first, create...)
	mustJSON(t, renter, &again, create...)
	if first.Replayed || !again.Replayed || again.Key.ID != first.Key.ID || again.Secret == first.Secret || again.Key.Access != idlegrid.AccessUse {
		t.Fatalf("key create, then again: %+v, then %+v; want the same key, replayed, with a new secret", first, again)
	}
	if _, err := client.New(renter["IDLEGRID_ADDR"], first.Secret).Me(ctx); idlegrid.ErrorCode(err) != idlegrid.EUNAUTHORIZED {
		t.Errorf("the first secret after the replay: %v, want it refused", err)
	}
	if me, err := client.New(renter["IDLEGRID_ADDR"], again.Secret).Me(ctx); err != nil || me.ID != first.Key.AccountID {
		t.Errorf("the new secret: %+v (%v), want the renter's account", me, err)
	}
	keys, err := client.New(renter["IDLEGRID_ADDR"], renter["IDLEGRID_KEY"]).ListAPIKeys(ctx, "")
	mustOK(t, err)
	if n := countNamed(keys, "ci"); n != 1 {
		t.Errorf("%d keys named ci, want one", n)
	}

	out := must(t, renter, create[:len(create)-1]...)
	if !strings.HasPrefix(out, "already created under idempotency key ci-setup: API key "+first.Key.ID+" (ci), access use, not created again") ||
		!strings.Contains(out, "secret (shown once): igk_") {
		t.Errorf("key create run again printed:\n%s", out)
	}
	r := run(t, renter, "key", "create", "--name", "ci-2", "--idempotency-key", "ci-setup")
	if r.code != 1 || !strings.Contains(r.err, "idempotency_key: ") || !strings.Contains(r.err, first.Key.ID) ||
		!strings.Contains(r.err, "another --idempotency-key") {
		t.Errorf("another key under the idempotency key: %s, want its conflict", r)
	}
	must(t, renter, "key", "revoke", first.Key.ID)
	if r := run(t, renter, create...); r.code != 1 || !strings.Contains(r.err, "since revoked") {
		t.Errorf("key create under the key of a revoked key: %s, want its conflict", r)
	}
}

// TestTokenCreate_idempotencyKey: "token create" is made once under its
// --idempotency-key too: the first token with a new secret, which a node
// joins with; the first secret joins nothing.
func TestTokenCreate_idempotencyKey(t *testing.T) {
	_, _, provider, _, _ := moneyMarket(t)
	create := []string{"token", "create", "--name", "rack-4", "--max-uses", "2", "--idempotency-key", "provision-rack-4", "--json"}
	var first, again createdToken
	mustJSON(t, provider, &first, create...)
	mustJSON(t, provider, &again, create...)
	if first.Replayed || !again.Replayed || again.Token.ID != first.Token.ID || again.Secret == first.Secret {
		t.Fatalf("token create, then again: %+v, then %+v; want the same token, replayed, with a new secret", first, again)
	}
	cl := client.New(provider["IDLEGRID_ADDR"], provider["IDLEGRID_KEY"])
	if _, err := joinWith(t, provider["IDLEGRID_ADDR"], first.Secret, "rack-4-a"); idlegrid.ErrorCode(err) != idlegrid.EUNAUTHORIZED {
		t.Errorf("a join with the first secret: %v, want it refused", err)
	}
	if _, err := joinWith(t, provider["IDLEGRID_ADDR"], again.Secret, "rack-4-a"); err != nil {
		t.Errorf("a join with the new secret: %v", err)
	}
	r := run(t, provider, "token", "create", "--name", "rack-4", "--max-uses", "3", "--idempotency-key", "provision-rack-4")
	if r.code != 1 || !strings.Contains(r.err, "idempotency_key: ") || !strings.Contains(r.err, "for 2 uses") {
		t.Errorf("another token under the idempotency key: %s, want its conflict", r)
	}
	mustOK(t, cl.RevokeJoinToken(context.Background(), first.Token.ID))
	if r := run(t, provider, create...); r.code != 1 || !strings.Contains(r.err, "can no longer be used") {
		t.Errorf("token create under the key of a revoked token: %s, want its conflict", r)
	}
}

func countNamed(keys []*idlegrid.APIKey, name string) (n int) {
	for _, k := range keys {
		if k.Name == name {
			n++
		}
	}
	return n
}
