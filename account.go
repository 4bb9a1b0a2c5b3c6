package idlegrid

import (
	"context"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Role is what an account may do in the market.
type Role string

const (
	RoleRenter   Role = "renter"   // submits jobs and pays for them
	RoleProvider Role = "provider" // owns nodes and is paid for them
	RoleAdmin    Role = "admin"    // operates the market
)

// Valid reports whether r is a known role.
func (r Role) Valid() bool {
	return r == RoleRenter || r == RoleProvider || r == RoleAdmin
}

// Account is a renter, a provider or an admin. Its name is unique among
// the accounts of its role, so that no one makes a second renter "acme" by
// accident; a renter and a provider may share a name, as one company may
// rent and provide. Accounts made before names were unique keep theirs,
// the oldest holding the name.
type Account struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Role      Role      `json:"role"`
	CreatedAt time.Time `json:"created_at"`
	// IdempotencyKey is the admin's key of the account's creation (the
	// Idempotency-Key header), if it had one: the same creation sent again
	// with it finds this account instead of making another. It is the
	// creator's, not the account's, so the API does not show it.
	IdempotencyKey string `json:"-"`
}

// AccountFilter selects accounts, oldest first.
type AccountFilter struct {
	Role Role // "": any
	// After, an account ID, lists only the accounts listed after it: the
	// next page after a page that ended with it.
	After string
	Limit int
}

// Validate checks an account before it is created.
func (a *Account) Validate() error {
	switch {
	case strings.TrimSpace(a.Name) == "":
		return Invalid("account.name", "required: a name of at most 100 characters, not only spaces")
	case len(a.Name) > 100:
		return Invalid("account.name", "at most 100 characters")
	case strings.TrimSpace(a.Name) != a.Name:
		return Invalid("account.name", "no spaces at its start or end: %q would list like %q", a.Name, strings.TrimSpace(a.Name))
	case strings.ContainsFunc(a.Name, unicode.IsControl) || !utf8.ValidString(a.Name):
		return Invalid("account.name", "must be UTF-8 text without control characters (a tab, a line break)")
	}
	if !a.Role.Valid() {
		return Invalid("account.role", "must be renter, provider or admin, got %q", a.Role)
	}
	return nil
}

// Access is how much of what its account's role allows an API key may do:
// a key handed to a teammate or a script need not be able to mint keys or
// lift its own spend limit.
type Access string

const (
	// AccessAll may do everything the account's role allows. Every key
	// made before keys had an access has it.
	AccessAll Access = "all"
	// AccessUse may do all but manage the account: it submits and cancels
	// jobs, calls the inference gateway, operates nodes and reads, but
	// does not touch API keys, spend limits, key routing, registry logins,
	// join tokens, payouts, bonds or other accounts.
	AccessUse Access = "use"
	// AccessRead may only read.
	AccessRead Access = "read"
)

// Valid reports whether a is a known access.
func (a Access) Valid() bool { return a.rank() >= 0 }

// Validate refuses an unknown access, naming field.
func (a Access) Validate(field string) error {
	if !a.Valid() {
		return Invalid(field, "must be all, use or read, got %q", a)
	}
	return nil
}

// rank orders the accesses, each allowing what the ones below it do; -1
// for an unknown access.
func (a Access) rank() int {
	switch a {
	case AccessRead:
		return 0
	case AccessUse:
		return 1
	case AccessAll:
		return 2
	}
	return -1
}

// Allows reports whether a key with access a may do what takes need.
func (a Access) Allows(need Access) bool { return a.rank() >= need.rank() }

// APIKey authenticates an account. Only the SHA-256 hash of the secret is
// stored; the secret is shown once, when the key is created.
type APIKey struct {
	ID        string     `json:"id"`
	AccountID string     `json:"account_id"`
	Name      string     `json:"name"`
	Prefix    string     `json:"prefix"` // the first characters of the secret, to recognise it
	Access    Access     `json:"access"`
	Hash      string     `json:"-"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
	// IdempotencyKey is the Idempotency-Key it was created with, if any: the
	// same creation sent again finds this key (and gives it a new secret).
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// JoinToken lets an agent join a provider's fleet as a new node. Like an API
// key, only its hash is stored.
type JoinToken struct {
	ID         string     `json:"id"`
	ProviderID string     `json:"provider_id"`
	Name       string     `json:"name"`
	Prefix     string     `json:"prefix"`
	Hash       string     `json:"-"`
	MaxUses    int        `json:"max_uses"`
	Uses       int        `json:"uses"`
	ExpiresAt  time.Time  `json:"expires_at"`
	CreatedAt  time.Time  `json:"created_at"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
	// IdempotencyKey is the Idempotency-Key it was created with, as an
	// APIKey's.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// Usable reports why the token cannot be used at now, or nil.
func (t *JoinToken) Usable(now time.Time) error {
	switch {
	case t.RevokedAt != nil:
		return Errorf(EUNAUTHORIZED, "join token revoked; ask the provider for a new one")
	case !now.Before(t.ExpiresAt):
		return Errorf(EUNAUTHORIZED, "join token expired; ask the provider for a new one")
	case t.MaxUses > 0 && t.Uses >= t.MaxUses:
		return Errorf(EUNAUTHORIZED, "join token used up; ask the provider for a new one")
	}
	return nil
}

// Caller is who is making a request: an account through an API key, or a
// node through its signature.
type Caller struct {
	AccountID string
	Role      Role
	KeyID     string // set for API-key callers
	// Access is the API key's access; "" (agents, callers made without a
	// key) is AccessAll.
	Access Access
	NodeID string // set for agents
}

// IsAdmin reports whether the caller is an admin.
func (c *Caller) IsAdmin() bool { return c != nil && c.Role == RoleAdmin && c.NodeID == "" }

// Allow returns nil when the caller's key has the access need takes, or an
// EFORBIDDEN that says which access does and how to get a key with it.
func (c *Caller) Allow(need Access) error {
	have := c.Access
	if have == "" {
		have = AccessAll
	}
	if have.Allows(need) {
		return nil
	}
	if have == AccessRead { // the API refuses it by method, not knowing what the call takes
		return Errorf(EFORBIDDEN, "this API key's access is read: it may only read; act with one of the account's keys of access use or all, "+
			"or have the account's owner make one (`idlegrid key create --access use`, with a key of access all)")
	}
	return Errorf(EFORBIDDEN, "this API key's access is %s: it may not manage the account (API keys, spend limits, key routing, "+
		"registry logins, join tokens, payouts, bonds, other accounts); do it with the account's key of access all, "+
		"whose holder can also make one (`idlegrid key create --access all`)", have)
}

type callerKey struct{}

// NewContextWithCaller returns ctx carrying c.
func NewContextWithCaller(ctx context.Context, c *Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFromContext returns the caller in ctx, or nil.
func CallerFromContext(ctx context.Context) *Caller {
	c, _ := ctx.Value(callerKey{}).(*Caller)
	return c
}
