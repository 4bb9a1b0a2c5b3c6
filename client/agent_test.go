package client_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
	"github.com/idlegrid/idlegrid/internal/nodekey"
)

func mustKey(tb testing.TB) ed25519.PrivateKey {
	tb.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	return priv
}

// verifier is a test server that checks every agent request's signature
// the way the coordinator does, and answers 401 when it is wrong.
type verifier struct {
	pub ed25519.PublicKey

	mu   sync.Mutex
	reqs []recorded
}

func (v *verifier) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	v.mu.Lock()
	v.reqs = append(v.reqs, recorded{r.Method, r.URL.RequestURI(), r.Header.Clone(), body})
	v.mu.Unlock()
	err := nodekey.Verify(v.pub, r.Method, r.URL.RequestURI(), r.Header.Get(nodekey.HeaderTime),
		body, r.Header.Get(nodekey.HeaderSignature), time.Now())
	if err != nil {
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"error":{"code":"unauthorized","message":"`+err.Error()+`"}}`)
		return
	}
	switch r.URL.Path {
	case "/v1/agent/join":
		io.WriteString(w, `{"node_id":"node_1","provider_id":"acct_p","heartbeat_seconds":10}`)
	case "/v1/agent/commands":
		io.WriteString(w, `{"commands":[{"kind":"start","lease":{"id":"lease_1"}}]}`)
	case "/v1/agent/heartbeat":
		io.WriteString(w, `{"heartbeat_seconds":10}`)
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

func (v *verifier) last(tb testing.TB) recorded {
	tb.Helper()
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.reqs) == 0 {
		tb.Fatal("no request reached the server")
	}
	return v.reqs[len(v.reqs)-1]
}

func TestAgentClient_Join(t *testing.T) {
	key := mustKey(t)
	v := &verifier{pub: key.Public().(ed25519.PublicKey)}
	srv := mustServe(t, v)
	a := client.NewAgent(srv.URL, key)

	resp, err := a.Join(context.Background(), idlegrid.JoinRequest{Token: "igj_x", AgentVersion: "test"})
	if err != nil {
		t.Fatalf("Join: %v", err)
	}
	if resp.NodeID != "node_1" {
		t.Errorf("node ID = %q, want node_1", resp.NodeID)
	}
	got := v.last(t)
	wantPub := nodekey.PublicString(key.Public().(ed25519.PublicKey))
	if h := got.Header.Get(nodekey.HeaderPublicKey); h != wantPub {
		t.Errorf("%s = %q, want %q", nodekey.HeaderPublicKey, h, wantPub)
	}
	var body idlegrid.JoinRequest
	if err := json.Unmarshal(got.Body, &body); err != nil {
		t.Fatal(err)
	}
	if body.PublicKey != wantPub || body.Token != "igj_x" {
		t.Errorf("body public key, token = %q, %q; want %q, igj_x", body.PublicKey, body.Token, wantPub)
	}
	if h := got.Header.Get(nodekey.HeaderProtocol); h != strconv.Itoa(idlegrid.ProtocolVersion) {
		t.Errorf("%s = %q, want %d", nodekey.HeaderProtocol, h, idlegrid.ProtocolVersion)
	}

	// After the join, requests carry the node ID the server gave.
	if _, err := a.Heartbeat(context.Background(), idlegrid.HeartbeatRequest{}); err != nil {
		t.Fatalf("Heartbeat: %v", err)
	}
	if h := v.last(t).Header.Get(nodekey.HeaderNode); h != "node_1" {
		t.Errorf("%s = %q, want node_1", nodekey.HeaderNode, h)
	}
}

func TestAgentClient_signed(t *testing.T) {
	ctx := context.Background()
	key := mustKey(t)
	v := &verifier{pub: key.Public().(ed25519.PublicKey)}
	srv := mustServe(t, v)
	a := client.NewAgent(srv.URL, key)
	a.SetNodeID("node_1")

	tests := []struct {
		name    string
		call    func() error
		wantURI string
	}{
		{"offer", func() error { return a.UpdateOffer(ctx, idlegrid.OfferRequest{AgentVersion: "v"}) }, "/v1/agent/offer"},
		{"heartbeat", func() error {
			_, err := a.Heartbeat(ctx, idlegrid.HeartbeatRequest{Leases: []idlegrid.LeaseProgress{{LeaseID: "lease_1", Progress: 0.5}}})
			return err
		}, "/v1/agent/heartbeat"},
		{"commands, with the wait in the signed query", func() error {
			cmds, err := a.Commands(ctx, 1500*time.Millisecond)
			if err == nil && (len(cmds) != 1 || cmds[0].Lease.ID != "lease_1") {
				t.Errorf("commands = %+v, want one for lease_1", cmds)
			}
			return err
		}, "/v1/agent/commands?wait=2"},
		{"report", func() error {
			return a.ReportLease(ctx, "lease_1", idlegrid.LeaseReport{State: idlegrid.LeaseRunning})
		}, "/v1/agent/leases/lease_1/report"},
		{"logs", func() error {
			return a.AppendLogs(ctx, "lease_1", idlegrid.LogBatch{Lines: []idlegrid.LogLine{{Text: "hello"}}})
		}, "/v1/agent/leases/lease_1/logs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); err != nil {
				t.Fatalf("call: %v (the signature must verify)", err)
			}
			got := v.last(t)
			if got.URI != tt.wantURI {
				t.Errorf("URI = %q, want %q", got.URI, tt.wantURI)
			}
			if h := got.Header.Get(nodekey.HeaderNode); h != "node_1" {
				t.Errorf("%s = %q, want node_1", nodekey.HeaderNode, h)
			}
		})
	}
}

func TestAgentClient_wrongKey(t *testing.T) {
	v := &verifier{pub: mustKey(t).Public().(ed25519.PublicKey)} // not the agent's key
	srv := mustServe(t, v)
	a := client.NewAgent(srv.URL, mustKey(t))
	a.SetNodeID("node_1")
	err := a.UpdateOffer(context.Background(), idlegrid.OfferRequest{})
	if got := idlegrid.ErrorCode(err); got != idlegrid.EUNAUTHORIZED {
		t.Errorf("code = %q (%v), want %q", got, err, idlegrid.EUNAUTHORIZED)
	}
}

// TestAgentClient_unreachable: an agent's operator sets the server with
// --server or server: in the config, not the CLI's --addr, and the error
// the agent logs while it retries says so.
func TestAgentClient_unreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.Listener.Addr().String()
	srv.Close() // nothing listens there now

	_, err := client.NewAgent(addr, mustKey(t)).Join(context.Background(), idlegrid.JoinRequest{Token: "igj_x"})
	if err == nil {
		t.Fatal("err = nil, want a connection error")
	}
	for _, want := range []string{"is the server running at http://" + addr, "--server", "server: in the agent's config"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err = %q, want it to contain %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "IDLEGRID_ADDR") {
		t.Errorf("err = %q names the CLI's IDLEGRID_ADDR, which the agent does not read", err)
	}
}

// TestAgentClient_httpsToPlainServer: an https:// address of a server that
// speaks plain HTTP is a mistake in the address, not a server down.
func TestAgentClient_httpsToPlainServer(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	addr := "https://" + srv.Listener.Addr().String()

	_, err := client.NewAgent(addr, mustKey(t)).Join(context.Background(), idlegrid.JoinRequest{Token: "igj_x"})
	if err == nil {
		t.Fatal("err = nil, want an error")
	}
	for _, want := range []string{"speaks plain HTTP, not HTTPS", "give its address as http://" + srv.Listener.Addr().String(), "--server"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err = %q, want it to contain %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "is the server running") {
		t.Errorf("err = %q asks whether the server runs; it answered", err)
	}
}

func TestAgentClient_beforeJoin(t *testing.T) {
	v := &verifier{}
	srv := mustServe(t, v)
	err := client.NewAgent(srv.URL, mustKey(t)).UpdateOffer(context.Background(), idlegrid.OfferRequest{})
	if err == nil {
		t.Fatal("err = nil, want an error for a node that has not joined")
	}
	if len(v.reqs) != 0 {
		t.Errorf("%d requests sent, want none", len(v.reqs))
	}
}
