package client

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/nodekey"
)

// AgentClient calls the agent API for one node, signing every request with
// the node's key. It is safe for concurrent use.
//
// While RunSession keeps a session to the server up, the client's requests
// travel over it; otherwise they go over plain HTTP.
type AgentClient struct {
	t     transport
	key   ed25519.PrivateKey
	pub   string // the key's public half, as sent on the wire
	now   func() time.Time
	route *sessionRoute // the live session, if any, that requests take

	mu       sync.Mutex
	nodeID   string
	signedAt int64 // the time of the last request signed, unix ms
}

// NewAgent returns an agent client of the server at addr that signs with key.
func NewAgent(addr string, key ed25519.PrivateKey) *AgentClient {
	a := &AgentClient{
		t:     newTransport(addr, serverSetting),
		key:   key,
		pub:   nodekey.PublicString(key.Public().(ed25519.PublicKey)),
		now:   time.Now,
		route: newSessionRoute(httpClient.Transport),
	}
	a.t.http = &http.Client{Transport: a.route, CheckRedirect: httpClient.CheckRedirect}
	return a
}

// SetNodeID sets the node's ID, which every request after the join carries.
func (a *AgentClient) SetNodeID(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.nodeID = id
}

func (a *AgentClient) node() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.nodeID
}

// do sends a request signed by the node. A join carries the public key;
// everything else carries the node ID.
func (a *AgentClient) do(ctx context.Context, c call, join bool) error {
	nodeID := a.node()
	if !join && nodeID == "" {
		return errors.New("the agent has no node ID yet; join first")
	}
	return a.t.do(ctx, c, func(req *http.Request, body []byte) error {
		if join {
			req.Header.Set(nodekey.HeaderPublicKey, a.pub)
		} else {
			req.Header.Set(nodekey.HeaderNode, nodeID)
		}
		a.sign(req.Header, req.Method, req.URL.RequestURI(), body)
		return nil
	})
}

// sign adds the protocol version, the time and the node's signature of the
// request to h. No two requests are signed at the same time, so that no two
// signatures are the same: the server refuses a signature it has taken.
func (a *AgentClient) sign(h http.Header, method, requestURI string, body []byte) {
	ms := a.signingTime()
	h.Set(nodekey.HeaderProtocol, strconv.Itoa(idlegrid.ProtocolVersion))
	h.Set(nodekey.HeaderTime, strconv.FormatInt(ms, 10))
	h.Set(nodekey.HeaderSignature, nodekey.Sign(a.key, method, requestURI, ms, body))
}

// signingTime is now in unix ms, or a millisecond after the last request
// signed when that is later: requests signed in the same millisecond, or
// under a clock that stands still, still differ.
func (a *AgentClient) signingTime() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now().UnixMilli()
	if now < a.signedAt-1000 {
		a.signedAt = now // the clock was stepped back (NTP): sign by it, not a second ahead of the server's
	} else {
		a.signedAt = max(now, a.signedAt+1)
	}
	return a.signedAt
}

// Join joins a provider's fleet with a join token. The request's public key
// is set to the client's own. On success the client keeps the node ID.
func (a *AgentClient) Join(ctx context.Context, req idlegrid.JoinRequest) (*idlegrid.JoinResponse, error) {
	req.PublicKey = a.pub
	var out idlegrid.JoinResponse
	if err := a.do(ctx, call{method: http.MethodPost, path: path("agent", "join"), in: req, out: &out}, true); err != nil {
		return nil, err
	}
	a.SetNodeID(out.NodeID)
	return &out, nil
}

// UpdateOffer replaces what the node offers.
func (a *AgentClient) UpdateOffer(ctx context.Context, req idlegrid.OfferRequest) error {
	return a.do(ctx, call{method: http.MethodPut, path: path("agent", "offer"), in: req}, false)
}

// Heartbeat says the node is alive, with its leases' progress.
//
// It waits at most 5 s for the answer, then sends the heartbeat once more
// on a new connection. A connection that died without a word (a NAT that
// forgot it) fails only when the kernel, or a session's keepalive, finds
// out: up to 25 s later for a session, and a heartbeat waiting that long
// leaves the node silent for over the 30 s that get it declared lost. A
// session that does not answer in time is abandoned (RunSession dials
// again) and the heartbeat goes over plain HTTP; over plain HTTP the idle
// kept-alive connections, likely as dead, are dropped first.
func (a *AgentClient) Heartbeat(ctx context.Context, req idlegrid.HeartbeatRequest) (*idlegrid.HeartbeatResponse, error) {
	s := a.route.current()
	out, err := a.heartbeat(ctx, req, heartbeatWait)
	if err == nil || ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
		return out, err
	}
	a.route.unstick(s, fmt.Errorf("a heartbeat got no answer over it in %s", heartbeatWait))
	return a.heartbeat(ctx, req, 0)
}

// heartbeat sends one heartbeat, waiting at most wait for the answer (0:
// the default request timeout).
func (a *AgentClient) heartbeat(ctx context.Context, req idlegrid.HeartbeatRequest, wait time.Duration) (*idlegrid.HeartbeatResponse, error) {
	var out idlegrid.HeartbeatResponse
	if err := a.do(ctx, call{method: http.MethodPost, path: path("agent", "heartbeat"), in: req, out: &out, timeout: wait}, false); err != nil {
		return nil, err
	}
	return &out, nil
}

// Goodbye says the agent is stopping: the server takes the node offline
// at once, placing nothing new on it, rather than wait for its missed
// heartbeats. Its leases stay live until they are reported.
func (a *AgentClient) Goodbye(ctx context.Context) error {
	return a.do(ctx, call{method: http.MethodPost, path: path("agent", "goodbye")}, false)
}

// Commands long-polls for what the node should do: it returns as soon as
// there are commands, or with none after about wait (which the server may
// cap). Commands repeat until reports make them moot.
func (a *AgentClient) Commands(ctx context.Context, wait time.Duration) ([]idlegrid.Command, error) {
	secs := int64(0)
	if wait > 0 {
		secs = int64((wait + time.Second - 1) / time.Second)
	}
	q := url.Values{"wait": {strconv.FormatInt(secs, 10)}}
	var out idlegrid.CommandsResponse
	err := a.do(ctx, call{method: http.MethodGet, path: path("agent", "commands"), query: q, out: &out,
		timeout: time.Duration(secs)*time.Second + longPollMargin}, false)
	return out.Commands, err
}

// ReportLease gives the node's account of one of its leases.
func (a *AgentClient) ReportLease(ctx context.Context, leaseID string, r idlegrid.LeaseReport) error {
	if err := requireID("lease_id", leaseID); err != nil {
		return err
	}
	return a.do(ctx, call{method: http.MethodPost, path: path("agent", "leases", leaseID, "report"), in: r}, false)
}

// AppendLogs sends lines of a lease's output.
func (a *AgentClient) AppendLogs(ctx context.Context, leaseID string, b idlegrid.LogBatch) error {
	if err := requireID("lease_id", leaseID); err != nil {
		return err
	}
	return a.do(ctx, call{method: http.MethodPost, path: path("agent", "leases", leaseID, "logs"), in: b}, false)
}
