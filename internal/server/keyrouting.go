package server

import (
	"context"
	"fmt"
	"slices"
	"strings"

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

// keyRoutingAllows refuses a job the submitting key's routing would not
// let it run: a bound key (access use, one handed to a teammate or a
// script) whose routing keeps its work to some regions or data
// residencies (the hard constraints of its inference) submits jobs that
// require one of them too, so that a key meant to keep data in one
// jurisdiction cannot send a job's data out of it. The owner's key
// (access all) is bound by nothing, as in the gateway; providers and
// prices bind inference only.
func (s *Server) keyRoutingAllows(ctx context.Context, c *idlegrid.Caller, spec *idlegrid.JobSpec) error {
	if c.KeyID == "" || c.Access != idlegrid.AccessUse {
		return nil
	}
	kr, err := s.store.FindKeyRouting(ctx, c.KeyID)
	if idlegrid.ErrorCode(err) == idlegrid.ENOTFOUND {
		return nil
	} else if err != nil {
		return err
	}
	r := kr.Routing
	switch {
	case len(r.DataResidency) > 0 && !slices.Contains(r.DataResidency, spec.Residency):
		return &idlegrid.Error{Code: idlegrid.EFORBIDDEN, Field: "job.residency", Message: fmt.Sprintf(
			"this API key's routing keeps its work in data residency %s; set the job's residency to one of them, or submit with another key", strings.Join(r.DataResidency, ", "))}
	case len(r.Region) > 0 && (spec.RegionPreferred || !slices.Contains(r.Region, spec.Region)):
		return &idlegrid.Error{Code: idlegrid.EFORBIDDEN, Field: "job.region", Message: fmt.Sprintf(
			"this API key's routing keeps its work in region %s; require one of them as the job's region (not only preferred), or submit with another key", strings.Join(r.Region, ", "))}
	}
	return nil
}
