package idlegrid

import (
	"context"
	"time"
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

// Account is a renter, a provider or an admin.
type Account struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Role      Role      `json:"role"`
	CreatedAt time.Time `json:"created_at"`
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
	if a.Name == "" {
		return Invalid("account.name", "required")
	} else if len(a.Name) > 100 {
		return Invalid("account.name", "at most 100 characters")
	} else if !a.Role.Valid() {
		return Invalid("account.role", "must be renter, provider or admin, got %q", a.Role)
	}
	return nil
}

// APIKey authenticates an account. Only the SHA-256 hash of the secret is
// stored; the secret is shown once, when the key is created.
type APIKey struct {
	ID        string     `json:"id"`
	AccountID string     `json:"account_id"`
	Name      string     `json:"name"`
	Prefix    string     `json:"prefix"` // the first characters of the secret, to recognise it
	Hash      string     `json:"-"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
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
	NodeID    string // set for agents
}

// IsAdmin reports whether the caller is an admin.
func (c *Caller) IsAdmin() bool { return c != nil && c.Role == RoleAdmin && c.NodeID == "" }

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
