package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/idlegrid/idlegrid/internal/audit"
	"github.com/idlegrid/idlegrid/internal/httpapi/wire"
)

// The audit log (docs/trust.md). The client only fetches: heads, proofs
// and entries are checked with audit.Check, against a log key the caller
// got out of band, never the one the server reports.

// AuditHead returns the log's signed tree head now, and the public key the
// server says it signs with.
func (c *Client) AuditHead(ctx context.Context) (*wire.AuditHead, error) {
	var out wire.AuditHead
	if err := c.do(ctx, call{method: http.MethodGet, path: path("audit", "head"), out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// AuditConsistency returns the proof that the log of from entries is a
// prefix of the log of to entries.
func (c *Client) AuditConsistency(ctx context.Context, from, to uint64) (*audit.ConsistencyProof, error) {
	q := url.Values{"from": {strconv.FormatUint(from, 10)}, "to": {strconv.FormatUint(to, 10)}}
	var out audit.ConsistencyProof
	if err := c.do(ctx, call{method: http.MethodGet, path: path("audit", "consistency"), query: q, out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// AuditEntriesQuery selects a page of an account's audit entries.
type AuditEntriesQuery struct {
	AccountID string // "": the caller's own; another's: admins only
	TreeSize  uint64 // the head to prove against; 0: the latest
	From      uint64 // the first index; a page's Next gives the next page's
	Limit     int    // 0: the server's default
}

// AuditEntries returns one page of an account's entries with their
// inclusion proofs against the page's head.
func (c *Client) AuditEntries(ctx context.Context, f AuditEntriesQuery) (*wire.AuditEntries, error) {
	q := url.Values{}
	setString(q, "account_id", f.AccountID)
	if f.TreeSize > 0 {
		q.Set("tree_size", strconv.FormatUint(f.TreeSize, 10))
	}
	if f.From > 0 {
		q.Set("from", strconv.FormatUint(f.From, 10))
	}
	setInt(q, "limit", int64(f.Limit))
	var out wire.AuditEntries
	if err := c.do(ctx, call{method: http.MethodGet, path: path("audit", "entries"), query: q, out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// AllAuditEntries pages through every entry of an account proven against
// the head of treeSize (0: the latest). It returns the head of each page,
// all of one size (a server that signed two roots for it has forked, and
// audit.Check says so), and the entries.
func (c *Client) AllAuditEntries(ctx context.Context, accountID string, treeSize uint64) ([]audit.SignedTreeHead, []audit.EntryProof, error) {
	f := AuditEntriesQuery{AccountID: accountID, TreeSize: treeSize}
	var heads []audit.SignedTreeHead
	var out []audit.EntryProof
	for {
		page, err := c.AuditEntries(ctx, f)
		if err != nil {
			return nil, nil, err
		}
		heads, out = append(heads, page.Head), append(out, page.Entries...)
		if page.Next == nil {
			return heads, out, nil
		} else if *page.Next <= f.From {
			return nil, nil, fmt.Errorf("the server paged the audit entries backwards, from %d to %d", f.From, *page.Next)
		}
		f.TreeSize, f.From = page.Head.Size, *page.Next
	}
}
