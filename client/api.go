package client

import (
	"context"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/httpapi/wire"
)

// requireID refuses an empty ID before it becomes a request for a list.
func requireID(field, id string) error {
	if id == "" {
		return idlegrid.Invalid(field, "required")
	}
	return nil
}

// CreateAccount creates an account with its first API key, returning the
// key's secret, which is shown only this once. Admins only.
func (c *Client) CreateAccount(ctx context.Context, name string, role idlegrid.Role) (*idlegrid.Account, *idlegrid.APIKey, string, error) {
	a, k, secret, _, err := c.CreateAccountOnce(ctx, name, role, "")
	return a, k, secret, err
}

// CreateAccountOnce creates an account with an idempotency key ("" for
// none), so that sending it again, after an answer that never came, makes
// no second account: the server answers with the first, replayed says so,
// and since the first key's secret was shown once, the key and secret
// are a new key's for the account. A key sent with another name or role
// is refused (ECONFLICT).
func (c *Client) CreateAccountOnce(ctx context.Context, name string, role idlegrid.Role, key string) (
	a *idlegrid.Account, k *idlegrid.APIKey, secret string, replayed bool, err error) {
	var out wire.CreateAccountResponse
	replayed, err = c.postOnce(ctx, path("accounts"), wire.CreateAccountRequest{Name: name, Role: role}, &out, key)
	if err != nil {
		return nil, nil, "", false, err
	}
	return out.Account, out.APIKey, out.Secret, replayed, nil
}

// ListAccounts lists the accounts f selects, oldest first, a page at a
// time (f.After: the last of the page before). Admins only.
func (c *Client) ListAccounts(ctx context.Context, f idlegrid.AccountFilter) ([]*idlegrid.Account, error) {
	q := url.Values{}
	setString(q, "role", string(f.Role))
	setString(q, "after", f.After)
	setInt(q, "limit", int64(f.Limit))
	var out wire.Accounts
	err := c.do(ctx, call{method: http.MethodGet, path: path("accounts"), query: q, out: &out})
	return out.Accounts, err
}

// FindAccount returns an account: the caller's own, or any for admins.
func (c *Client) FindAccount(ctx context.Context, id string) (*idlegrid.Account, error) {
	if err := requireID("account", id); err != nil {
		return nil, err
	}
	var out idlegrid.Account
	if err := c.do(ctx, call{method: http.MethodGet, path: path("accounts", id), out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// Me returns the caller's own account.
func (c *Client) Me(ctx context.Context) (*idlegrid.Account, error) {
	var out idlegrid.Account
	if err := c.do(ctx, call{method: http.MethodGet, path: path("me"), out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// KeyID returns the ID of the API key the client calls with.
func (c *Client) KeyID(ctx context.Context) (string, error) {
	var out wire.Me
	if err := c.do(ctx, call{method: http.MethodGet, path: path("me"), out: &out}); err != nil {
		return "", err
	}
	return out.KeyID, nil
}

// CreateAPIKey makes a new key for the caller's account, with access all,
// and returns its secret, shown only this once.
func (c *Client) CreateAPIKey(ctx context.Context, name string) (*idlegrid.APIKey, string, error) {
	return c.CreateAPIKeyWithAccess(ctx, name, "")
}

// CreateAPIKeyWithAccess is CreateAPIKey for a key that may do only what
// access allows: use (all but manage the account) or read; "" is all, and
// is not sent, so that a server older than accesses takes it.
func (c *Client) CreateAPIKeyWithAccess(ctx context.Context, name string, access idlegrid.Access) (*idlegrid.APIKey, string, error) {
	k, secret, _, err := c.CreateAPIKeyOnce(ctx, name, access, "")
	return k, secret, err
}

// CreateAPIKeyOnce is CreateAPIKeyWithAccess with an idempotency key (""
// for none), so that sending it again, after an answer that never came,
// makes no second key: the server answers with the first, replayed says
// so, and the secret is a new one for it (the first's stops working). A
// key sent with another name or access is refused (ECONFLICT).
func (c *Client) CreateAPIKeyOnce(ctx context.Context, name string, access idlegrid.Access, key string) (
	k *idlegrid.APIKey, secret string, replayed bool, err error) {
	var out wire.CreateAPIKeyResponse
	replayed, err = c.postOnce(ctx, path("keys"), wire.CreateAPIKeyRequest{Name: name, Access: access}, &out, key)
	if err != nil {
		return nil, "", false, err
	}
	return out.APIKey, out.Secret, replayed, nil
}

// ListAPIKeys lists an account's keys: the caller's own (accountID ""), or
// any account's for admins.
func (c *Client) ListAPIKeys(ctx context.Context, accountID string) ([]*idlegrid.APIKey, error) {
	q := url.Values{}
	setString(q, "account_id", accountID)
	var out wire.APIKeys
	err := c.do(ctx, call{method: http.MethodGet, path: path("keys"), query: q, out: &out})
	return out.APIKeys, err
}

// RevokeAPIKey revokes one of an account's keys: the caller's own
// (accountID ""), or any account's for admins.
func (c *Client) RevokeAPIKey(ctx context.Context, accountID, keyID string) error {
	if err := requireID("key_id", keyID); err != nil {
		return err
	}
	q := url.Values{}
	setString(q, "account_id", accountID)
	return c.do(ctx, call{method: http.MethodDelete, path: path("keys", keyID), query: q})
}

// CreateJoinToken makes a token that lets up to maxUses agents join the
// caller's fleet within ttl, and returns its secret, shown only this once.
// Providers only.
func (c *Client) CreateJoinToken(ctx context.Context, name string, maxUses int, ttl time.Duration) (*idlegrid.JoinToken, string, error) {
	t, secret, _, err := c.CreateJoinTokenOnce(ctx, name, maxUses, ttl, "")
	return t, secret, err
}

// CreateJoinTokenOnce is CreateJoinToken with an idempotency key ("" for
// none), as CreateAPIKeyOnce: sent again, the first token with a new
// secret, while it is usable.
func (c *Client) CreateJoinTokenOnce(ctx context.Context, name string, maxUses int, ttl time.Duration, key string) (
	t *idlegrid.JoinToken, secret string, replayed bool, err error) {
	var out wire.CreateJoinTokenResponse
	in := wire.CreateJoinTokenRequest{Name: name, MaxUses: maxUses, TTLSeconds: int64(math.Ceil(ttl.Seconds()))}
	if replayed, err = c.postOnce(ctx, path("join-tokens"), in, &out, key); err != nil {
		return nil, "", false, err
	}
	return out.JoinToken, out.Secret, replayed, nil
}

// ListJoinTokens lists the caller's join tokens.
func (c *Client) ListJoinTokens(ctx context.Context) ([]*idlegrid.JoinToken, error) {
	var out wire.JoinTokens
	err := c.do(ctx, call{method: http.MethodGet, path: path("join-tokens"), out: &out})
	return out.JoinTokens, err
}

// RevokeJoinToken revokes one of the caller's join tokens.
func (c *Client) RevokeJoinToken(ctx context.Context, tokenID string) error {
	if err := requireID("join_token_id", tokenID); err != nil {
		return err
	}
	return c.do(ctx, call{method: http.MethodDelete, path: path("join-tokens", tokenID)})
}

// ListNodes lists nodes: a provider's own, for an admin all, and for a
// renter the market's offers as anyone may see them. Of f it sends the
// search (Name, GPUModels, Regions, MinGPUs, MinVRAMMB, MinLevel, Tier, MaxFloor), Sort
// (oldest first by default) and Limit (0: the server's default); the
// caller's role decides the rest.
func (c *Client) ListNodes(ctx context.Context, f idlegrid.NodeFilter) ([]*idlegrid.Node, error) {
	out, err := c.SearchNodes(ctx, f)
	if err != nil {
		return nil, err
	}
	return out.Nodes, nil
}

// SearchNodes is ListNodes with, beside the nodes, how many GPUs of each
// a job could take now (FreeGPUs; a node the market does not hold now is
// left out of it).
func (c *Client) SearchNodes(ctx context.Context, f idlegrid.NodeFilter) (*wire.Nodes, error) {
	q := url.Values{}
	setString(q, "name", f.Name)
	setList(q, "state", f.States)
	setList(q, "gpu_model", f.GPUModels)
	setList(q, "region", f.Regions)
	setInt(q, "min_gpus", int64(f.MinGPUs))
	setInt(q, "min_vram_mb", int64(f.MinVRAMMB))
	setInt(q, "min_level", int64(f.MinLevel))
	setString(q, "tier", string(f.Tier))
	setInt(q, "max_price_micros_per_gpu_hour", int64(f.MaxFloor))
	setInt(q, "min_free_gpus", int64(f.MinFreeGPUs))
	setString(q, "sort", string(f.Sort))
	setInt(q, "limit", int64(f.Limit))
	setString(q, "after", f.After)
	var out wire.Nodes
	if err := c.do(ctx, call{method: http.MethodGet, path: path("nodes"), query: q, out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// FindNode returns a node: the whole record of one of the caller's (or
// for an admin any), and of another provider's what the market shows.
func (c *Client) FindNode(ctx context.Context, id string) (*idlegrid.Node, error) {
	if err := requireID("node_id", id); err != nil {
		return nil, err
	}
	var out idlegrid.Node
	if err := c.do(ctx, call{method: http.MethodGet, path: path("nodes", id), out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// SubmitJob queues a job. Renters only.
func (c *Client) SubmitJob(ctx context.Context, spec idlegrid.JobSpec) (*idlegrid.Job, error) {
	j, _, err := c.SubmitJobOnce(ctx, spec, "")
	return j, err
}

// SubmitJobOnce submits a job with an idempotency key ("" for none), so
// that sending it again, after an answer that never came, makes no second
// job: the server answers with the first, and replayed says so. A key
// sent with another spec is refused (ECONFLICT).
func (c *Client) SubmitJobOnce(ctx context.Context, spec idlegrid.JobSpec, key string) (j *idlegrid.Job, replayed bool, err error) {
	var out idlegrid.Job
	if replayed, err = c.postOnce(ctx, path("jobs"), spec, &out, key); err != nil {
		return nil, false, err
	}
	return &out, replayed, nil
}

// postOnce posts in to p, decoding the answer into out, with an
// idempotency key ("" for none), and reports whether the server answered
// with what the key made before (Idempotent-Replayed).
func (c *Client) postOnce(ctx context.Context, p string, in, out any, key string) (replayed bool, err error) {
	var meta answerMeta
	cl := call{method: http.MethodPost, path: p, in: in, out: out, answered: &meta}
	if key != "" {
		cl.header = idempotent(key)
	}
	if err := c.do(ctx, cl); err != nil {
		return false, err
	}
	return meta.header.Get(wire.HeaderIdempotentReplayed) == "true", nil
}

// ListJobs lists the caller's jobs (admins: everyone's) in f's states, up
// to f.Limit of them. f.RenterID is not sent: the server scopes by caller.
func (c *Client) ListJobs(ctx context.Context, f idlegrid.JobFilter) ([]*idlegrid.Job, error) {
	q := url.Values{}
	setList(q, "state", f.States)
	setInt(q, "limit", int64(f.Limit))
	setString(q, "before", f.Before)
	setString(q, "name", f.NamePrefix)
	var out wire.Jobs
	err := c.do(ctx, call{method: http.MethodGet, path: path("jobs"), query: q, out: &out})
	return out.Jobs, err
}

// FindJob returns one of the caller's jobs.
func (c *Client) FindJob(ctx context.Context, id string) (*idlegrid.Job, error) {
	if err := requireID("job_id", id); err != nil {
		return nil, err
	}
	var out idlegrid.Job
	if err := c.do(ctx, call{method: http.MethodGet, path: path("jobs", id), out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// WatchJob returns a job and its leases with their version. Given the
// version seen last, it waits up to wait (the server caps it, at 30 s by
// default) for the job or a lease to change, and returns nil and the same
// version if nothing did. An older server without the watch answers
// ENOTFOUND, "no such endpoint".
func (c *Client) WatchJob(ctx context.Context, id, seen string, wait time.Duration) (*idlegrid.JobView, string, error) {
	if err := requireID("job_id", id); err != nil {
		return nil, "", err
	}
	secs := int64((max(wait, 0) + time.Second - 1) / time.Second)
	cl := call{method: http.MethodGet, path: path("jobs", id, "watch"), query: url.Values{"wait": {strconv.FormatInt(secs, 10)}},
		timeout: time.Duration(secs)*time.Second + longPollMargin, answered: &answerMeta{}}
	if seen != "" {
		cl.header = http.Header{"If-None-Match": {`"` + seen + `"`}}
	}
	var out idlegrid.JobView
	cl.out = &out
	if err := c.do(ctx, cl); err != nil {
		return nil, "", err
	}
	version := strings.Trim(cl.answered.header.Get("ETag"), `"`)
	if cl.answered.status == http.StatusNotModified {
		return nil, version, nil
	}
	return &out, version, nil
}

// CancelJob cancels one of the caller's jobs and returns it as it is now.
func (c *Client) CancelJob(ctx context.Context, id string) (*idlegrid.Job, error) {
	if err := requireID("job_id", id); err != nil {
		return nil, err
	}
	var out idlegrid.Job
	if err := c.do(ctx, call{method: http.MethodPost, path: path("jobs", id, "cancel"), out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListLeases lists the leases the caller may see, selected by f's job,
// node and states. ProviderID and RenterID are not sent: the server scopes
// by caller.
func (c *Client) ListLeases(ctx context.Context, f idlegrid.LeaseFilter) ([]*idlegrid.Lease, error) {
	q := url.Values{}
	setString(q, "job_id", f.JobID)
	setString(q, "node_id", f.NodeID)
	setList(q, "state", f.States)
	setInt(q, "limit", int64(f.Limit))
	setString(q, "before", f.Before)
	var out wire.Leases
	err := c.do(ctx, call{method: http.MethodGet, path: path("leases"), query: q, out: &out})
	return out.Leases, err
}

// FindLease returns a lease the caller may see, with its history.
func (c *Client) FindLease(ctx context.Context, id string) (*idlegrid.Lease, []*idlegrid.LeaseEvent, error) {
	if err := requireID("lease_id", id); err != nil {
		return nil, nil, err
	}
	var out wire.LeaseDetail
	if err := c.do(ctx, call{method: http.MethodGet, path: path("leases", id), out: &out}); err != nil {
		return nil, nil, err
	}
	return out.Lease, out.Events, nil
}

// LeaseLogs returns up to limit lines of a lease's output after line
// afterSeq; limit 0 lets the server choose.
func (c *Client) LeaseLogs(ctx context.Context, leaseID string, afterSeq int64, limit int) ([]idlegrid.LogLine, error) {
	if err := requireID("lease_id", leaseID); err != nil {
		return nil, err
	}
	q := url.Values{}
	setInt(q, "after", afterSeq)
	setInt(q, "limit", int64(limit))
	var out wire.Logs
	err := c.do(ctx, call{method: http.MethodGet, path: path("leases", leaseID, "logs"), query: q, out: &out})
	return out.Lines, err
}

// LeaseLogTail returns the last n lines of a lease's output, in order.
func (c *Client) LeaseLogTail(ctx context.Context, leaseID string, n int) ([]idlegrid.LogLine, error) {
	if err := requireID("lease_id", leaseID); err != nil {
		return nil, err
	}
	q := url.Values{}
	setInt(q, "tail", int64(n))
	var out wire.Logs
	err := c.do(ctx, call{method: http.MethodGet, path: path("leases", leaseID, "logs"), query: q, out: &out})
	return out.Lines, err
}

// TopUp credits a renter's balance. A retry with the same idempotencyKey is
// not applied twice. Admins only.
func (c *Client) TopUp(ctx context.Context, accountID string, amount idlegrid.Micros, idempotencyKey string) (*idlegrid.Balance, error) {
	b, _, err := c.TopUpOnce(ctx, accountID, amount, idempotencyKey)
	return b, err
}

// TopUpOnce is TopUp, saying too whether the key had credited the account
// before (replayed): this call moved nothing.
func (c *Client) TopUpOnce(ctx context.Context, accountID string, amount idlegrid.Micros, idempotencyKey string) (b *idlegrid.Balance, replayed bool, err error) {
	if err := requireID("account_id", accountID); err != nil {
		return nil, false, err
	}
	var out idlegrid.Balance
	if replayed, err = c.postOnce(ctx, path("accounts", accountID, "topup"), wire.TopUpRequest{AmountMicros: amount}, &out, idempotencyKey); err != nil {
		return nil, false, err
	}
	return &out, replayed, nil
}

// Balance returns an account's money; accountID "" is the caller's own.
func (c *Client) Balance(ctx context.Context, accountID string) (*idlegrid.Balance, error) {
	p := path("balance")
	if accountID != "" {
		p = path("accounts", accountID, "balance")
	}
	var out idlegrid.Balance
	if err := c.do(ctx, call{method: http.MethodGet, path: p, out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListTransfers lists up to f.Limit transfers that touch f.AccountID
// ("" is the caller's own), newest first, after f.Before when it is set.
func (c *Client) ListTransfers(ctx context.Context, f idlegrid.TransferFilter) ([]*idlegrid.Transfer, error) {
	q := url.Values{}
	setString(q, "account_id", f.AccountID)
	setInt(q, "limit", int64(f.Limit))
	setString(q, "before", f.Before)
	var out wire.Transfers
	err := c.do(ctx, call{method: http.MethodGet, path: path("transfers"), query: q, out: &out})
	return out.Transfers, err
}

// Summary counts the market at a glance. Admins only.
func (c *Client) Summary(ctx context.Context) (*idlegrid.Summary, error) {
	var out idlegrid.Summary
	if err := c.do(ctx, call{method: http.MethodGet, path: path("summary"), out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

func setString(q url.Values, name, v string) {
	if v != "" {
		q.Set(name, v)
	}
}

func setInt(q url.Values, name string, v int64) {
	if v != 0 {
		q.Set(name, strconv.FormatInt(v, 10))
	}
}

func setList[T ~string](q url.Values, name string, vs []T) {
	if len(vs) == 0 {
		return
	}
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = string(v)
	}
	q.Set(name, strings.Join(s, ","))
}
