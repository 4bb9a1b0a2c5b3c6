package server

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/audit"
	"github.com/idlegrid/idlegrid/internal/trustpolicy"
)

// The audit log (docs/trust.md): the store appends an entry for every
// posting, receipt and lease transition in the transaction that makes it;
// the server signs the log's tree heads with its key and hands out proofs.
// Heads and proofs show only hashes, so any account may read them; the
// entries themselves, with their proofs, only the accounts they name (and
// admins).

// DefaultAuditEntries and MaxAuditEntries bound a page of AuditEntries.
const (
	DefaultAuditEntries = 100
	MaxAuditEntries     = 1000
)

// auditLog is the server's side of the log: the tree over the store's
// leaves and the key that signs its heads.
type auditLog struct {
	tree *audit.Tree
	key  ed25519.PrivateKey
}

// newAuditLog checks cfg.AuditKey. Without one, heads are signed with a
// key made for this process alone, which no user can have been given: fine
// for tests, useless for a market, so it is logged as a warning.
func newAuditLog(cfg Config) (*auditLog, error) {
	key := cfg.AuditKey
	if key == nil {
		var err error
		if _, key, err = ed25519.GenerateKey(rand.Reader); err != nil {
			return nil, fmt.Errorf("audit key: %w", err)
		}
		cfg.Logger.Warn("no audit log key configured: tree heads are signed with a key that dies with this process; set Config.AuditKey")
	} else if len(key) != ed25519.PrivateKeySize {
		return nil, idlegrid.Invalid("audit_key", "must be an ed25519 private key of %d bytes, got %d", ed25519.PrivateKeySize, len(key))
	}
	return &auditLog{tree: audit.NewTree(audit.StoreLeaves(cfg.Store)), key: key}, nil
}

// ErrAuditKeyReplaced is what Open returns when Config.AuditKey is not the
// key the store records as the log's signer: users hold heads signed with
// that one, and every `idlegrid audit verify` would fail against another.
var ErrAuditKeyReplaced = errors.New("server: the audit log is signed with another key")

// claimAuditSigner records the configured key as the log's signer on first
// start, and refuses a key other than the one recorded. A throwaway key
// (none configured) is neither recorded nor checked.
func claimAuditSigner(ctx context.Context, cfg Config) error {
	if cfg.AuditKey == nil {
		return nil
	}
	mine := audit.PublicKeyString(cfg.AuditKey.Public().(ed25519.PublicKey))
	got, err := cfg.Store.ClaimAuditSigner(ctx, idlegrid.AuditSigner{PublicKey: mine, Since: cfg.Clock.Now()})
	if err != nil {
		return fmt.Errorf("server: record the audit log's key: %w", err)
	}
	if got.PublicKey != mine {
		return fmt.Errorf("%w: this database's log has been signed with %s since %s, and the configured key is %s",
			ErrAuditKeyReplaced, got.PublicKey, got.Since.Format(time.RFC3339), mine)
	}
	return nil
}

// AuditKey is the public key the log's tree heads are signed with. Users
// must get it out of band (see docs/trust.md): one fetched from the server
// it checks proves nothing.
func (s *Server) AuditKey() ed25519.PublicKey { return s.audit.key.Public().(ed25519.PublicKey) }

// AuditHead signs the log's current head at the server's time. Any
// account may read it.
func (s *Server) AuditHead(ctx context.Context) (*audit.SignedTreeHead, error) {
	if _, err := account(ctx); err != nil {
		return nil, err
	}
	size, root, err := s.audit.tree.Head(ctx)
	if err != nil {
		return nil, err
	}
	return s.signHead(size, root), nil
}

func (s *Server) signHead(size uint64, root audit.Hash) *audit.SignedTreeHead {
	h := audit.SignTreeHead(s.audit.key, audit.TreeHead{Size: size, RootHash: root, Timestamp: s.clock.Now()})
	return &h
}

// AuditConsistency proves that the log of from entries is a prefix of the
// log of to entries. Any account may ask; to may not exceed the log's size.
func (s *Server) AuditConsistency(ctx context.Context, from, to uint64) (*audit.ConsistencyProof, error) {
	if _, err := account(ctx); err != nil {
		return nil, err
	}
	path, err := s.audit.tree.ConsistencyProof(ctx, from, to)
	if err != nil {
		return nil, err
	}
	return &audit.ConsistencyProof{From: from, To: to, Path: path}, nil
}

// manyParties reports whether e is a posting of a transfer that names more
// than two account holders (a batch of metered inference, for many
// renters and providers): a payload only an admin may read whole, which
// cannot be cut down and still be checked against the log.
func manyParties(e *idlegrid.AuditEntry) bool {
	if e.Kind != string(audit.KindPosting) {
		return false
	}
	var t idlegrid.Transfer
	return json.Unmarshal(e.Payload, &t) != nil || t.Parties() > 2
}

// isAdmin reports whether the caller is an admin.
func isAdmin(ctx context.Context) bool {
	c, err := account(ctx)
	return err == nil && c.Role == idlegrid.RoleAdmin
}

// AuditQuery selects a page of an account's audit entries.
type AuditQuery struct {
	AccountID string // "": the caller's own; another account's: admins only
	TreeSize  uint64 // the head to prove the entries against; 0: the latest
	From      uint64 // the first index to return
	Limit     int    // 0: DefaultAuditEntries
}

// AuditPage is a page of an account's entries, each with its proof of
// inclusion in the tree of Head. Next is the From of the next page; nil
// on the last.
type AuditPage struct {
	Head    *audit.SignedTreeHead
	Entries []audit.EntryProof
	Next    *uint64
}

// AuditEntries returns the entries that name an account, each with its
// inclusion proof against a head signed now for q.TreeSize (or the latest
// head), so that the account can check them with `idlegrid audit verify`.
// A caller sees its own entries, but for postings of more than two
// account holders (manyParties); an admin anyone's (any subject, in fact:
// a lease, a job, a node).
func (s *Server) AuditEntries(ctx context.Context, q AuditQuery) (*AuditPage, error) {
	subject, err := ownAccount(ctx, q.AccountID)
	if err != nil {
		return nil, err
	}
	limit := q.Limit
	if limit == 0 {
		limit = DefaultAuditEntries
	} else if limit < 0 || limit > MaxAuditEntries {
		return nil, idlegrid.Invalid("limit", "must be between 1 and %d", MaxAuditEntries)
	}
	size, root, err := s.auditHeadAt(ctx, q.TreeSize)
	if err != nil {
		return nil, err
	}
	page := &AuditPage{Head: s.signHead(size, root), Entries: []audit.EntryProof{}}
	if q.From >= size {
		return page, nil
	}
	es, err := s.store.ListAuditEntries(ctx, idlegrid.AuditFilter{Subject: subject, From: q.From, Before: size, Limit: limit + 1})
	if err != nil {
		return nil, err
	}
	if len(es) > limit {
		next := es[limit].Index
		page.Next, es = &next, es[:limit]
	}
	admin := isAdmin(ctx)
	for _, e := range es {
		if !admin && manyParties(e) {
			continue // other renters' and providers' money: the caller sees its part in GET /v1/transfers
		}
		path, err := s.audit.tree.InclusionProof(ctx, e.Index, size)
		if err != nil {
			return nil, err
		}
		page.Entries = append(page.Entries, audit.EntryProof{Entry: audit.EntryOf(e),
			InclusionProof: audit.InclusionProof{Index: e.Index, TreeSize: size, Path: path}})
	}
	return page, nil
}

// auditHeadAt returns the size and root of the log at size entries, or the
// latest when size is 0.
func (s *Server) auditHeadAt(ctx context.Context, size uint64) (uint64, audit.Hash, error) {
	if size == 0 {
		return s.audit.tree.Head(ctx)
	}
	root, err := s.audit.tree.Root(ctx, size)
	var e *idlegrid.Error
	if errors.As(err, &e) && e.Code == idlegrid.EINVALID {
		return 0, audit.Hash{}, idlegrid.Invalid("tree_size", "%s", e.Message)
	}
	return size, root, err
}

// PolicySubject names the trust policy's entries in the audit log, so
// that anyone can list every policy the market has run under.
const PolicySubject = "trust-policy"

// policyRecord is the payload of a trust-policy entry: enough to name the
// policy file exactly (its SHA-256) and read its rules.
type policyRecord struct {
	Version int                 `json:"version"`
	SHA256  string              `json:"sha256"`
	Policy  *trustpolicy.Policy `json:"policy"`
}

// auditPolicy logs the trust policy in force when it differs from the
// last one logged: at a market's first start, and whenever an operator
// starts the coordinator under another policy file.
func (s *Server) auditPolicy(ctx context.Context) error {
	pol := s.trust.policy
	logged, err := s.store.ListAuditEntries(ctx, idlegrid.AuditFilter{Subject: PolicySubject, Limit: everyRow})
	if err != nil {
		return err
	}
	if k := len(logged); k > 0 {
		var last policyRecord
		if err := json.Unmarshal(logged[k-1].Payload, &last); err == nil && last.SHA256 == pol.SHA256 {
			return nil
		}
	}
	e, err := audit.NewEntry(audit.KindPolicy, []string{PolicySubject}, policyRecord{Version: pol.Version, SHA256: pol.SHA256, Policy: pol}, s.Now())
	if err != nil {
		return err
	}
	// Not logged to stderr: Open runs before the CLI's own announcements,
	// and the audit entry is the record.
	_, err = s.store.AppendAudit(ctx, []*idlegrid.AuditEntry{{Kind: string(e.Kind), Subjects: e.Subjects, Payload: e.Payload, At: e.At}})
	return err
}
