package server

import (
	"context"

	"github.com/idlegrid/idlegrid"
)

// SetKeyRouting sets the default routing of the inference requests one of
// the caller's API keys sends (docs/gateway.md); a request's own
// "provider" object overrides it field by field. The gateway sees a change
// within its AuthTTL.
func (s *Server) SetKeyRouting(ctx context.Context, keyID string, r idlegrid.Routing) (*idlegrid.KeyRouting, error) {
	c, err := requireManage(ctx, idlegrid.RoleRenter)
	if err != nil {
		return nil, err
	}
	if err := r.Validate("routing"); err != nil {
		return nil, err
	}
	kr := &idlegrid.KeyRouting{KeyID: keyID, AccountID: c.AccountID, Routing: r, UpdatedAt: s.Now()}
	if err := s.store.SetKeyRouting(ctx, kr); err != nil {
		return nil, err
	}
	return kr, nil
}

// KeyRouting returns the default routing of one of the caller's API keys:
// empty when none is set. Another account's key is not found.
func (s *Server) KeyRouting(ctx context.Context, keyID string) (*idlegrid.KeyRouting, error) {
	c, err := account(ctx)
	if err != nil {
		return nil, err
	}
	kr, err := s.store.FindKeyRouting(ctx, keyID)
	if idlegrid.ErrorCode(err) == idlegrid.ENOTFOUND {
		if owns, err := s.ownsKey(ctx, c.AccountID, keyID); err != nil {
			return nil, err
		} else if !owns {
			return nil, notFound("API key", keyID)
		}
		return &idlegrid.KeyRouting{KeyID: keyID, AccountID: c.AccountID}, nil
	} else if err != nil {
		return nil, err
	}
	if kr.AccountID != c.AccountID {
		return nil, notFound("API key", keyID)
	}
	return kr, nil
}

// RemoveKeyRouting removes the default routing of one of the caller's
// API keys; removing none is no error.
func (s *Server) RemoveKeyRouting(ctx context.Context, keyID string) error {
	c, err := requireManage(ctx)
	if err != nil {
		return err
	}
	err = s.store.RemoveKeyRouting(ctx, c.AccountID, keyID)
	if idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND {
		return err
	}
	if owns, err := s.ownsKey(ctx, c.AccountID, keyID); err != nil {
		return err
	} else if !owns {
		return notFound("API key", keyID)
	}
	return nil
}

func (s *Server) ownsKey(ctx context.Context, accountID, keyID string) (bool, error) {
	keys, err := s.store.ListAPIKeys(ctx, accountID)
	if err != nil {
		return false, err
	}
	for _, k := range keys {
		if k.ID == keyID {
			return true, nil
		}
	}
	return false, nil
}
