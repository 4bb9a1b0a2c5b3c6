package server

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/nodekey"
)

// hashSecret is how API keys and join tokens are stored. The secrets are 256
// random bits, so a plain SHA-256 is enough; no salt or stretching is needed.
func hashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// AuthenticateKey returns the caller that secret identifies.
func (s *Server) AuthenticateKey(ctx context.Context, secret string) (*idlegrid.Caller, error) {
	if secret == "" {
		return nil, idlegrid.Errorf(idlegrid.EUNAUTHORIZED, "missing API key")
	}
	key, acct, err := s.store.FindAPIKey(ctx, hashSecret(secret))
	if idlegrid.ErrorCode(err) == idlegrid.ENOTFOUND {
		return nil, idlegrid.Errorf(idlegrid.EUNAUTHORIZED, "invalid or revoked API key")
	} else if err != nil {
		return nil, err
	}
	return &idlegrid.Caller{AccountID: acct.ID, Role: acct.Role, KeyID: key.ID, Access: key.Access}, nil
}

// NodeIdentity returns a node's identity key, to check its signatures, and
// the provider that owns it.
func (s *Server) NodeIdentity(ctx context.Context, nodeID string) (ed25519.PublicKey, string, error) {
	n, err := s.store.FindNode(ctx, nodeID)
	if idlegrid.ErrorCode(err) == idlegrid.ENOTFOUND {
		return nil, "", idlegrid.Errorf(idlegrid.EUNAUTHORIZED, "%s %q; join again with a new join token", nodekey.UnknownWords, nodeID)
	} else if err != nil {
		return nil, "", err
	} else if n.State == idlegrid.NodeRetired {
		return nil, "", idlegrid.Errorf(idlegrid.EFORBIDDEN, "node %s is retired: it is refused for good; a machine that is to serve again joins as a new node, with a new key and a join token", nodeID)
	}
	pub, err := nodekey.ParsePublic(n.PublicKey)
	if err != nil {
		return nil, "", idlegrid.Errorf(idlegrid.EINTERNAL, "node %s has a corrupt public key", nodeID)
	}
	return pub, n.ProviderID, nil
}

// maxListLimit is the most rows one listing may ask for.
const maxListLimit = 10000

// checkLimit refuses a listing's limit outside 0–maxListLimit (0: the
// store's default page).
func checkLimit(limit int) error {
	if limit < 0 || limit > maxListLimit {
		return idlegrid.Invalid("limit", "must be between 0 and %d", maxListLimit)
	}
	return nil
}

// account returns the API-key caller in ctx, refusing agents and anonymous calls.
func account(ctx context.Context) (*idlegrid.Caller, error) {
	c := idlegrid.CallerFromContext(ctx)
	if c == nil || c.AccountID == "" {
		return nil, idlegrid.Errorf(idlegrid.EUNAUTHORIZED, "authentication required")
	} else if c.NodeID != "" {
		return nil, idlegrid.Errorf(idlegrid.EFORBIDDEN, "node keys may only use the agent API")
	}
	return c, nil
}

// requireRole returns the caller if it has one of roles.
func requireRole(ctx context.Context, roles ...idlegrid.Role) (*idlegrid.Caller, error) {
	c, err := account(ctx)
	if err != nil {
		return nil, err
	}
	for _, r := range roles {
		if c.Role == r {
			return c, nil
		}
	}
	return nil, idlegrid.Errorf(idlegrid.EFORBIDDEN, "%s account may not do this; it takes %s account", withArticle(c.Role), roleList(roles))
}

// requireUse returns the caller if it has one of roles (any, when none are
// given) and its API key may act, not only read: submit, cancel, operate
// nodes (idlegrid.AccessUse).
func requireUse(ctx context.Context, roles ...idlegrid.Role) (*idlegrid.Caller, error) {
	return requireAccess(ctx, idlegrid.AccessUse, roles)
}

// requireManage returns the caller if it has one of roles (any, when none
// are given) and its API key may manage the account: its keys, spend
// limits, key routing, registry logins, join tokens, money, and for admins
// other accounts (idlegrid.AccessAll).
func requireManage(ctx context.Context, roles ...idlegrid.Role) (*idlegrid.Caller, error) {
	return requireAccess(ctx, idlegrid.AccessAll, roles)
}

func requireAccess(ctx context.Context, need idlegrid.Access, roles []idlegrid.Role) (*idlegrid.Caller, error) {
	c, err := account(ctx)
	if err == nil && len(roles) > 0 {
		c, err = requireRole(ctx, roles...)
	}
	if err != nil {
		return nil, err
	}
	if err := c.Allow(need); err != nil {
		return nil, err
	}
	return c, nil
}

// withArticle is "a renter", "an admin".
func withArticle(r idlegrid.Role) string {
	if r != "" && strings.ContainsRune("aeiou", rune(r[0])) {
		return "an " + string(r)
	}
	return "a " + string(r)
}

// roleList is "a provider", "a provider or an admin", "a renter, a provider or an admin".
func roleList(roles []idlegrid.Role) string {
	s := ""
	for i, r := range roles {
		switch {
		case i == 0:
		case i == len(roles)-1:
			s += " or "
		default:
			s += ", "
		}
		s += withArticle(r)
	}
	return s
}

// node returns the agent caller in ctx.
func node(ctx context.Context) (*idlegrid.Caller, error) {
	c := idlegrid.CallerFromContext(ctx)
	if c == nil || c.NodeID == "" {
		return nil, idlegrid.Errorf(idlegrid.EUNAUTHORIZED, "a signed node request is required")
	}
	return c, nil
}

// notFound is what a caller sees for an object it may not see, so that it
// cannot tell whether the object exists.
func notFound(kind, id string) error {
	return idlegrid.Errorf(idlegrid.ENOTFOUND, "%s %q not found", kind, id)
}

// RequireAdmin refuses anyone but an admin: for what only the operator may
// read, such as the server's metrics.
func (s *Server) RequireAdmin(ctx context.Context) error {
	_, err := requireRole(ctx, idlegrid.RoleAdmin)
	return err
}
