package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/ledger"
	"github.com/idlegrid/idlegrid/internal/market"
)

// CreateAccount creates an account and its first API key. Admins only.
func (s *Server) CreateAccount(ctx context.Context, name string, role idlegrid.Role) (*idlegrid.Account, *idlegrid.APIKey, string, error) {
	a, k, secret, _, err := s.CreateAccountOnce(ctx, name, role, "")
	return a, k, secret, err
}

// retryKeyName names the key a creation sent again makes (reissue).
const retryKeyName = "retry"

// CreateAccountOnce is CreateAccount with the admin's idempotency key (""
// for none): a creation sent again with the same key, name and role
// answers with the account the first made, and replayed says so; with
// another name or role it is refused (ECONFLICT naming idempotency_key).
// Admins share one space of keys. An account of the role that holds the
// name already is ECONFLICT naming name. The account and its first key
// are stored together, so that none is left without a key.
func (s *Server) CreateAccountOnce(ctx context.Context, name string, role idlegrid.Role, key string) (
	a *idlegrid.Account, k *idlegrid.APIKey, secret string, replayed bool, err error) {
	if _, err := requireManage(ctx, idlegrid.RoleAdmin); err != nil {
		return nil, nil, "", false, err
	}
	a = &idlegrid.Account{ID: idlegrid.NewID("acct"), Name: name, Role: role, IdempotencyKey: key, CreatedAt: s.Now()}
	if err := a.Validate(); err != nil {
		return nil, nil, "", false, err
	}
	if key != "" {
		if err := ledger.CheckIdempotencyKey("idempotency_key", key); err != nil {
			return nil, nil, "", false, err
		}
		if first, err := s.accountCreatedWith(ctx, key, name, role); idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND {
			return s.reissue(ctx, first, err)
		}
	}
	k, secret, err = s.apiKey(a.ID, "default", idlegrid.AccessAll)
	if err != nil {
		return nil, nil, "", false, err
	}
	err = s.store.CreateAccountWithKey(ctx, a, k)
	if key != "" && conflictOn(err, "idempotency_key") { // sent twice at once: the other was stored
		first, err := s.accountCreatedWith(ctx, key, name, role)
		return s.reissue(ctx, first, err)
	} else if err != nil {
		return nil, nil, "", false, err
	}
	return a, k, secret, false, nil
}

// accountCreatedWith returns the account created with key, if it has name
// and role; ENOTFOUND when the key made none, ECONFLICT when it made
// another.
func (s *Server) accountCreatedWith(ctx context.Context, key, name string, role idlegrid.Role) (*idlegrid.Account, error) {
	a, err := s.store.FindAccountByIdempotencyKey(ctx, key)
	if err != nil {
		return nil, err
	} else if a.Name != name || a.Role != role {
		return nil, &idlegrid.Error{Code: idlegrid.ECONFLICT, Field: "idempotency_key", Message: fmt.Sprintf(
			"idempotency key %q was used for %s account %s named %q, not a %s named %q; use a new key for a new account",
			key, a.Role, a.ID, a.Name, role, name)}
	}
	return a, nil
}

// reissue answers a creation sent again with the account the first made,
// or with err when that could not be found. The first key's secret was
// shown once and is not kept, so the account gets a new key whose secret
// this answer shows: a caller whose first answer was lost still gets a
// key it can use. The first key stays, for a caller that did receive it;
// the account's owner or an admin may revoke the one not used.
func (s *Server) reissue(ctx context.Context, a *idlegrid.Account, err error) (*idlegrid.Account, *idlegrid.APIKey, string, bool, error) {
	if err != nil {
		return nil, nil, "", false, err
	}
	k, secret, err := s.newAPIKey(ctx, a.ID, retryKeyName, idlegrid.AccessAll)
	if err != nil {
		return nil, nil, "", false, err
	}
	s.log.Info("account creation sent again: made it a new key", "account", a.ID, "key", k.ID)
	return a, k, secret, true, nil
}

// conflictOn reports whether err is ECONFLICT naming field.
func conflictOn(err error, field string) bool {
	var e *idlegrid.Error
	return errors.As(err, &e) && e.Code == idlegrid.ECONFLICT && e.Field == field
}

// Bootstrap creates an account and its first key, stored together, without
// a caller. It is for the operator's first admin account; the HTTP API
// never reaches it.
func (s *Server) Bootstrap(ctx context.Context, name string, role idlegrid.Role) (*idlegrid.Account, *idlegrid.APIKey, string, error) {
	a := &idlegrid.Account{ID: idlegrid.NewID("acct"), Name: name, Role: role, CreatedAt: s.Now()}
	if err := a.Validate(); err != nil {
		return nil, nil, "", err
	}
	key, secret, err := s.apiKey(a.ID, "default", idlegrid.AccessAll)
	if err != nil {
		return nil, nil, "", err
	}
	if err := s.store.CreateAccountWithKey(ctx, a, key); err != nil {
		return nil, nil, "", err
	}
	return a, key, secret, nil
}

// KeylessAdmin returns the oldest admin when no admin has a usable API key
// (none unrevoked with access all): a first start that stopped between
// making the admin and its key, or whose key could not be kept, or an
// admin left with only restricted keys, is an admin no one can act as, and
// only the operator, who runs the server, can mend it (BootstrapKey). It
// returns nil when an admin has a key, or there is no admin.
func (s *Server) KeylessAdmin(ctx context.Context) (*idlegrid.Account, error) {
	admins, err := s.store.ListAccounts(ctx, idlegrid.AccountFilter{Role: idlegrid.RoleAdmin, Limit: maxListLimit})
	if err != nil || len(admins) == 0 {
		return nil, err
	}
	for _, a := range admins {
		keys, err := s.store.ListAPIKeys(ctx, a.ID)
		if err != nil {
			return nil, err
		}
		for _, k := range keys {
			if k.RevokedAt == nil && k.Access == idlegrid.AccessAll {
				return nil, nil
			}
		}
	}
	return admins[0], nil
}

// BootstrapKey makes an API key for an account without a caller, for the
// operator (KeylessAdmin); the HTTP API never reaches it.
func (s *Server) BootstrapKey(ctx context.Context, accountID string) (*idlegrid.APIKey, string, error) {
	return s.newAPIKey(ctx, accountID, "bootstrap", idlegrid.AccessAll)
}

// ListAccounts lists the accounts f selects, oldest first, a page at a
// time. Admins only.
func (s *Server) ListAccounts(ctx context.Context, f idlegrid.AccountFilter) ([]*idlegrid.Account, error) {
	if _, err := requireRole(ctx, idlegrid.RoleAdmin); err != nil {
		return nil, err
	}
	if err := checkLimit(f.Limit); err != nil {
		return nil, err
	}
	if f.Role != "" && !f.Role.Valid() {
		return nil, idlegrid.Invalid("role", "must be renter, provider or admin, got %q", f.Role)
	}
	if f.After != "" {
		if _, err := s.store.FindAccount(ctx, f.After); idlegrid.ErrorCode(err) == idlegrid.ENOTFOUND {
			return nil, idlegrid.Invalid("after", "no account %s to list from; give the last account ID of the page before", f.After)
		} else if err != nil {
			return nil, err
		}
	}
	return s.store.ListAccounts(ctx, f)
}

// FindAccount returns an account: the caller's own, or any for admins.
func (s *Server) FindAccount(ctx context.Context, id string) (*idlegrid.Account, error) {
	c, err := account(ctx)
	if err != nil {
		return nil, err
	}
	if id != c.AccountID && !c.IsAdmin() {
		return nil, notFound("account", id)
	}
	a, err := s.store.FindAccount(ctx, id)
	if idlegrid.ErrorCode(err) == idlegrid.ENOTFOUND {
		return nil, notFound("account", id)
	}
	return a, err
}

// Me returns the caller's account.
func (s *Server) Me(ctx context.Context) (*idlegrid.Account, error) {
	c, err := account(ctx)
	if err != nil {
		return nil, err
	}
	return s.store.FindAccount(ctx, c.AccountID)
}

// CallerKey returns the ID and access of the API key making the call, so
// that the caller can tell what it may do of what its role allows; both
// are "" for a caller made without a key. A key whose access is unset
// (made before keys had one) has all.
func (s *Server) CallerKey(ctx context.Context) (string, idlegrid.Access, error) {
	c, err := account(ctx)
	if err != nil || c.KeyID == "" {
		return "", "", err
	}
	if c.Access == "" {
		return c.KeyID, idlegrid.AccessAll, nil
	}
	return c.KeyID, c.Access, nil
}

// CreateAPIKey makes a new key for the caller's own account with access
// ("": all). The secret is returned once and never stored. Only a key with
// access all may make keys, so none makes a key that may do more than it.
func (s *Server) CreateAPIKey(ctx context.Context, name string, access idlegrid.Access) (*idlegrid.APIKey, string, error) {
	k, secret, _, err := s.CreateAPIKeyOnce(ctx, name, access, "")
	return k, secret, err
}

func (s *Server) newAPIKey(ctx context.Context, accountID, name string, access idlegrid.Access) (*idlegrid.APIKey, string, error) {
	k, secret, err := s.apiKey(accountID, name, access)
	if err != nil {
		return nil, "", err
	}
	if err := s.store.CreateAPIKey(ctx, k); err != nil {
		return nil, "", err
	}
	return k, secret, nil
}

// apiKey makes, without storing it, a key for the account and its secret.
func (s *Server) apiKey(accountID, name string, access idlegrid.Access) (*idlegrid.APIKey, string, error) {
	if name == "" || len(name) > 100 {
		return nil, "", idlegrid.Invalid("key.name", "must be 1-100 characters")
	} else if err := access.Validate("key.access"); err != nil {
		return nil, "", err
	}
	secret := idlegrid.NewSecret("igk")
	return &idlegrid.APIKey{
		ID: idlegrid.NewID("key"), AccountID: accountID, Name: name,
		Prefix: secret[:12], Access: access, Hash: hashSecret(secret), CreatedAt: s.Now(),
	}, secret, nil
}

// ListAPIKeys lists an account's keys: the caller's own ("" or its ID),
// or any account's for admins.
func (s *Server) ListAPIKeys(ctx context.Context, accountID string) ([]*idlegrid.APIKey, error) {
	id, err := ownAccount(ctx, accountID)
	if err != nil {
		return nil, err
	}
	if _, err := s.store.FindAccount(ctx, id); err != nil {
		return nil, err
	}
	return s.store.ListAPIKeys(ctx, id)
}

// RevokeAPIKey revokes one of an account's keys: the caller's own, or, for
// admins, any account's (a key leaked, or an account to stop at once).
func (s *Server) RevokeAPIKey(ctx context.Context, accountID, keyID string) error {
	if _, err := requireManage(ctx); err != nil {
		return err
	}
	id, err := ownAccount(ctx, accountID)
	if err != nil {
		return err
	}
	return s.store.RevokeAPIKey(ctx, id, keyID, s.Now())
}

// Join token limits.
const (
	defaultJoinTTL = 24 * time.Hour
	maxJoinTTL     = 30 * 24 * time.Hour
)

// CreateJoinToken makes a token that lets agents join the caller's fleet.
// maxUses 0 means one use; ttl 0 means a day.
func (s *Server) CreateJoinToken(ctx context.Context, name string, maxUses int, ttl time.Duration) (*idlegrid.JoinToken, string, error) {
	t, secret, _, err := s.CreateJoinTokenOnce(ctx, name, maxUses, ttl, "")
	return t, secret, err
}

// joinToken makes, without storing it, a token for provider and its
// secret, with CreateJoinToken's defaults.
func (s *Server) joinToken(provider, name string, maxUses int, ttl time.Duration) (*idlegrid.JoinToken, string, error) {
	if maxUses == 0 {
		maxUses = 1
	}
	if ttl == 0 {
		ttl = defaultJoinTTL
	}
	switch {
	case name == "" || len(name) > 100:
		return nil, "", idlegrid.Invalid("join_token.name", "must be 1-100 characters")
	case maxUses < 0 || maxUses > 10000:
		return nil, "", idlegrid.Invalid("join_token.max_uses", "must be between 1 and 10000")
	case ttl < time.Minute || ttl > maxJoinTTL:
		return nil, "", idlegrid.Invalid("join_token.ttl_seconds", "must be between 60 seconds and 30 days")
	}
	now := s.Now()
	secret := idlegrid.NewSecret("igj")
	return &idlegrid.JoinToken{
		ID: idlegrid.NewID("jt"), ProviderID: provider, Name: name,
		Prefix: secret[:12], Hash: hashSecret(secret), MaxUses: maxUses,
		ExpiresAt: now.Add(ttl), CreatedAt: now,
	}, secret, nil
}

// ListJoinTokens lists the caller's join tokens.
func (s *Server) ListJoinTokens(ctx context.Context) ([]*idlegrid.JoinToken, error) {
	c, err := requireRole(ctx, idlegrid.RoleProvider)
	if err != nil {
		return nil, err
	}
	return s.store.ListJoinTokens(ctx, c.AccountID)
}

// RevokeJoinToken revokes one of the caller's join tokens.
func (s *Server) RevokeJoinToken(ctx context.Context, tokenID string) error {
	c, err := requireManage(ctx, idlegrid.RoleProvider)
	if err != nil {
		return err
	}
	return s.store.RevokeJoinToken(ctx, c.AccountID, tokenID, s.Now())
}

// marketNodesShown is how many nodes a renter's list holds unless it asks
// for another number: the first in the search's order.
const marketNodesShown = 1000

// ListNodes lists the nodes the caller may see: a provider its own, an
// admin every node, and a renter the market's offers (online, not in
// quarantine) as anyone may see them (Node.Public). Of q it reads the
// search (regions, GPU models, GPUs, memory, tier, price and free GPUs
// now), the order (oldest first unless it says) and Limit (0: all, or for
// a renter marketNodesShown); the caller's role sets the rest. A price
// filter or order without a tier reads silver's floors. Beside the nodes
// it returns how many GPUs each has free now, as FreeGPUs counts them.
// Free GPUs are the engine's to count: for a search for free GPUs it
// names the nodes with enough (Engine.NodesFree) and counts theirs in the
// same question to the scheduler, so that every node listed shows at
// least the GPUs searched for, and the store reads those nodes; any other
// list asks the engine once after reading the store.
func (s *Server) ListNodes(ctx context.Context, q idlegrid.NodeFilter) ([]*idlegrid.Node, map[string]int, error) {
	nodes, free, err := s.listNodes(ctx, q)
	if err != nil || free != nil {
		return nodes, free, err
	}
	free, err = s.FreeGPUs(ctx, nodes)
	return nodes, free, err
}

// listNodes lists the nodes as ListNodes does and, for a search for free
// GPUs, how many each node listed has free: nil for any other list.
func (s *Server) listNodes(ctx context.Context, q idlegrid.NodeFilter) ([]*idlegrid.Node, map[string]int, error) {
	c, err := account(ctx)
	if err != nil {
		return nil, nil, err
	}
	f, public := idlegrid.NodeFilter{Name: q.Name, States: q.States, Regions: q.Regions, GPUModels: q.GPUModels, MinGPUs: q.MinGPUs, MinVRAMMB: q.MinVRAMMB,
		MinLevel: q.MinLevel, Tier: q.Tier, MaxFloor: q.MaxFloor, MinFreeGPUs: q.MinFreeGPUs, Sort: q.Sort, Limit: q.Limit, After: q.After}, false
	if err := s.checkNodeCursor(ctx, c, f.After); err != nil {
		return nil, nil, err
	}
	if f.Tier == "" && (f.MaxFloor > 0 || f.Sort == idlegrid.NodesCheapest) {
		f.Tier = idlegrid.TierSilver // a price is a tier's: on demand unless the search says
	}
	switch c.Role {
	case idlegrid.RoleAdmin:
	case idlegrid.RoleProvider:
		f.ProviderID = c.AccountID
	default:
		f.Offered, public = true, true
		if f.Limit == 0 {
			f.Limit = marketNodesShown
		}
	}
	var found map[string]int // a search for free GPUs: what each node found has free
	if f.MinFreeGPUs > 0 {
		if found, err = s.searchFree(ctx, &f); err != nil {
			return nil, nil, err
		}
		if len(f.IDs) == 0 {
			return nil, map[string]int{}, nil // none has enough free; nil IDs would be no filter
		}
	}
	nodes, err := s.store.ListNodes(ctx, f)
	if err != nil {
		return nil, nil, err
	}
	var free map[string]int
	if found != nil {
		free = make(map[string]int, len(nodes))
		for _, n := range nodes {
			free[n.ID] = found[n.ID]
		}
	}
	if public {
		for i, n := range nodes {
			nodes[i] = n.Public()
		}
	}
	return nodes, free, nil
}

// checkNodeCursor refuses a page's cursor (NodeFilter.After) that is not
// a node the caller lists: one of its own for a provider, any other
// caller's any node.
func (s *Server) checkNodeCursor(ctx context.Context, c *idlegrid.Caller, after string) error {
	if after == "" {
		return nil
	}
	n, err := s.store.FindNode(ctx, after)
	switch {
	case idlegrid.ErrorCode(err) == idlegrid.ENOTFOUND || (err == nil && c.Role == idlegrid.RoleProvider && n.ProviderID != c.AccountID):
		return idlegrid.Invalid("after", "%q is not a node you list; give the ID of the last node of the page before", after)
	}
	return err
}

// searchFree asks the engine, in one question, which nodes of f's search
// have f.MinFreeGPUs GPUs free now, which it sets f.IDs to, and how many
// each of them has.
func (s *Server) searchFree(ctx context.Context, f *idlegrid.NodeFilter) (map[string]int, error) {
	var found map[string]int
	err := s.askScan(ctx, "searches for free GPUs", func(e *market.Engine) {
		now := s.Now()
		f.IDs = e.NodesFree(*f, now)
		found = e.FreeNow(f.IDs, now)
	})
	return found, err
}

// FreeGPUs returns how many GPUs of each of nodes a job could take now, as
// the engine sees the market: its window open, no lease holding them. A
// node the engine does not hold (lost, in quarantine) is left out.
func (s *Server) FreeGPUs(ctx context.Context, nodes []*idlegrid.Node) (map[string]int, error) {
	if _, err := account(ctx); err != nil {
		return nil, err
	}
	ids := make([]string, len(nodes))
	for i, n := range nodes {
		ids[i] = n.ID
	}
	var free map[string]int
	err := s.ask(ctx, func(e *market.Engine) { free = e.FreeNow(ids, s.Now()) })
	return free, err
}

// FindNode returns a node: the whole record to its provider and admins,
// and to anyone else what the market shows of it (Node.Public), so that a
// renter can see where its work ran.
func (s *Server) FindNode(ctx context.Context, id string) (*idlegrid.Node, error) {
	c, err := account(ctx)
	if err != nil {
		return nil, err
	}
	n, err := s.store.FindNode(ctx, id)
	switch {
	case idlegrid.ErrorCode(err) == idlegrid.ENOTFOUND:
		return nil, notFound("node", id)
	case err != nil:
		return nil, err
	case c.IsAdmin() || n.ProviderID == c.AccountID:
		return n, nil
	}
	return n.Public(), nil
}

// ownNode returns one of the caller's nodes, or for an admin any node:
// the check in front of what only a node's owner and admins may see. A
// node of another provider's is not found.
func (s *Server) ownNode(ctx context.Context, id string) (*idlegrid.Node, error) {
	c, err := requireRole(ctx, idlegrid.RoleProvider, idlegrid.RoleAdmin)
	if err != nil {
		return nil, err
	}
	n, err := s.store.FindNode(ctx, id)
	if idlegrid.ErrorCode(err) == idlegrid.ENOTFOUND || (err == nil && !c.IsAdmin() && n.ProviderID != c.AccountID) {
		return nil, notFound("node", id)
	}
	return n, err
}
