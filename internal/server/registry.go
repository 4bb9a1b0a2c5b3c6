package server

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"errors"

	"github.com/idlegrid/idlegrid"
)

// Renters' registry logins (idlegrid.RegistryLogin) are sealed before the
// store keeps them: AES-256-GCM under a key derived from the audit log's
// signing key, which lives in a file beside the database, never in it. The
// sealed bytes are bound to their account and registry, so they cannot be
// moved to another's row. A start command carries the login its job's
// image needs (registryAuth).

// registryLoginInfo labels the key derived for sealing registry logins.
const registryLoginInfo = "idlegrid registry logins v1"

// newLoginSealer derives the registry logins' sealing key from the audit
// log's.
func newLoginSealer(audit *auditLog) (cipher.AEAD, error) {
	key, err := hkdf.Key(sha256.New, audit.key.Seed(), nil, registryLoginInfo, 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// sealLogin encrypts l.Secret into l.Sealed, and clears Secret.
func (s *Server) sealLogin(l *idlegrid.RegistryLogin) {
	nonce := make([]byte, s.logins.NonceSize())
	rand.Read(nonce)
	l.Sealed = s.logins.Seal(nonce, nonce, []byte(l.Secret), loginBinding(l))
	l.Secret = ""
}

// openLogin decrypts l.Sealed.
func (s *Server) openLogin(l *idlegrid.RegistryLogin) (string, error) {
	n := s.logins.NonceSize()
	if len(l.Sealed) < n {
		return "", errors.New("sealed login too short")
	}
	plain, err := s.logins.Open(nil, l.Sealed[:n], l.Sealed[n:], loginBinding(l))
	return string(plain), err
}

func loginBinding(l *idlegrid.RegistryLogin) []byte {
	return []byte(l.AccountID + "\x00" + l.Registry)
}

// PutRegistryLogin keeps the calling renter's login to a registry, replacing
// the one it had there: its jobs whose images are on the registry are
// pulled with it. The registry may be given as docker login takes it
// ("https://ghcr.io/"); the answer names it as image references do.
func (s *Server) PutRegistryLogin(ctx context.Context, l idlegrid.RegistryLogin) (*idlegrid.RegistryLogin, error) {
	c, err := requireManage(ctx, idlegrid.RoleRenter)
	if err != nil {
		return nil, err
	}
	l.Registry = idlegrid.NormalRegistry(l.Registry)
	l.AccountID, l.Sealed = c.AccountID, nil
	if err := l.Validate(); err != nil {
		return nil, err
	}
	now := s.Now()
	l.CreatedAt, l.UpdatedAt = now, now
	s.sealLogin(&l)
	if err := s.store.PutRegistryLogin(ctx, &l); err != nil {
		return nil, err
	}
	kept, err := s.store.FindRegistryLogin(ctx, l.AccountID, l.Registry)
	if err != nil {
		return nil, err
	}
	kept.Sealed = nil
	return kept, nil
}

// ListRegistryLogins lists an account's registry logins, without their
// secrets: the caller's own, or for an admin any account's ("": its own).
// An idle login has expired (expiry.go) and is not listed.
func (s *Server) ListRegistryLogins(ctx context.Context, accountID string) ([]*idlegrid.RegistryLogin, error) {
	accountID, err := ownAccount(ctx, accountID)
	if err != nil {
		return nil, err
	}
	if _, err := s.store.FindAccount(ctx, accountID); idlegrid.ErrorCode(err) == idlegrid.ENOTFOUND {
		return nil, notFound("account", accountID) // an admin's typo is not an account without logins
	} else if err != nil {
		return nil, err
	}
	logins, err := s.activeRegistryLogins(ctx, accountID)
	for _, l := range logins {
		l.Sealed = nil
	}
	return logins, err
}

// RemoveRegistryLogin removes an account's login to a registry: the
// caller's own (accountID ""), or for an admin any account's, e.g. one
// whose password leaked. The account's jobs started after this pull from
// the registry without one.
func (s *Server) RemoveRegistryLogin(ctx context.Context, accountID, registry string) error {
	if _, err := requireManage(ctx); err != nil {
		return err
	}
	accountID, err := ownAccount(ctx, accountID)
	if err != nil {
		return err
	}
	if err := s.store.RemoveRegistryLogin(ctx, accountID, idlegrid.NormalRegistry(registry)); err != nil {
		return err
	}
	if c := idlegrid.CallerFromContext(ctx); accountID != c.AccountID {
		s.log.Info("registry login removed by an admin", "account", accountID, "registry", idlegrid.NormalRegistry(registry), "admin", c.AccountID)
	}
	return nil
}

// registryAuth is the login a start command of j carries: its renter's for
// its image's registry, or nil when the renter keeps none there, or only
// an idle one (expiry.go). A login that cannot be opened is logged and
// left out: the node's pull then says that the registry refused it.
func (s *Server) registryAuth(ctx context.Context, j *idlegrid.Job) (*idlegrid.RegistryAuth, error) {
	reg, err := idlegrid.ImageRegistry(j.Image)
	if err != nil {
		return nil, nil // Validate took the image; a node refuses it anyway
	}
	l, err := s.activeRegistryLogin(ctx, j.RenterID, reg)
	if idlegrid.ErrorCode(err) == idlegrid.ENOTFOUND {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	secret, err := s.openLogin(l)
	if err != nil {
		s.log.Error("a registry login cannot be opened; was the audit key replaced?", "account", l.AccountID, "registry", reg, "err", err)
		return nil, nil
	}
	return &idlegrid.RegistryAuth{Registry: reg, Username: l.Username, Password: secret}, nil
}
