package agent_test

import (
	"context"
	"crypto/ed25519"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
	"github.com/idlegrid/idlegrid/internal/agent"
	"github.com/idlegrid/idlegrid/internal/gpu"
	"github.com/idlegrid/idlegrid/internal/gpu/fake"
	"github.com/idlegrid/idlegrid/internal/httpapi"
	"github.com/idlegrid/idlegrid/internal/nodekey"
	rtfake "github.com/idlegrid/idlegrid/internal/runtime/fake"
	"github.com/idlegrid/idlegrid/internal/server"
	"github.com/idlegrid/idlegrid/internal/session"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
	"github.com/idlegrid/idlegrid/internal/sqlstore/sqlstoretest"
	"github.com/idlegrid/idlegrid/internal/trustpolicy"
)

// The public client takes attestations and challenges for the agent.
var _ agent.AttestServer = (*client.AgentClient)(nil)

// attestServer is the coordinator on SQLite behind a real listener, with
// small challenges so that the agent computes them quickly.
type attestServer struct {
	URL      string
	Admin    *client.Client
	Provider *client.Client
}

func mustAttestServer(tb testing.TB, maxSize int) *attestServer {
	tb.Helper()
	// The agents' GPUs are simulated: let their passes verify hardware.
	policy, err := trustpolicy.Parse([]byte("version: 2\nchallenges: {allow_simulated_runners: true}\n"))
	if err != nil {
		tb.Fatal(err)
	}
	url, admin := mustCoordinator(tb, server.Config{SchedulePeriod: 50 * time.Millisecond, ChallengeMaxSize: maxSize, TrustPolicy: policy}, nil)
	s := &attestServer{URL: url, Admin: admin}
	_, _, providerKey, err := s.Admin.CreateAccount(context.Background(), "prov", idlegrid.RoleProvider)
	if err != nil {
		tb.Fatal(err)
	}
	s.Provider = client.New(url, providerKey)
	return s
}

// mustCoordinator runs the coordinator with cfg on a fresh SQLite store,
// logging to the test, behind a real listener that takes the agents'
// sessions when sessions is set (from its own registry; the logger is set
// here), and returns its URL and an admin's client.
func mustCoordinator(tb testing.TB, cfg server.Config, sessions *session.Config) (string, *client.Client) {
	tb.Helper()
	ctx := context.Background()
	store, err := sqlstore.Open(ctx, sqlstoretest.Path(tb))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { store.Close() })
	log := slog.New(slog.NewTextHandler(testOutput(tb), &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg.Store, cfg.Logger = store, log
	srv, err := server.Open(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { srv.Close() })
	opts := httpapi.Options{Logger: log}
	if sessions != nil {
		sessions.Logger = log
		opts.Sessions = session.NewRegistry(*sessions)
	}
	ts := httptest.NewServer(httpapi.New(srv, opts))
	tb.Cleanup(ts.Close)
	if opts.Sessions != nil {
		tb.Cleanup(func() { opts.Sessions.Close() }) // before the HTTP server closes
	}
	_, _, secret, err := srv.Bootstrap(ctx, "root", idlegrid.RoleAdmin)
	if err != nil {
		tb.Fatal(err)
	}
	return ts.URL, client.New(ts.URL, secret)
}

// fakeNode is an agent's configuration and its simulated GPUs.
type fakeNode struct {
	cfg *agent.Config
	key ed25519.PrivateKey
	det *fake.Detector
}

func mustFakeNode(tb testing.TB, s *attestServer) *fakeNode {
	tb.Helper()
	_, token, err := s.Provider.CreateJoinToken(context.Background(), "rig", 1, time.Hour)
	if err != nil {
		tb.Fatal(err)
	}
	cfg := testConfig(tb)
	cfg.Server, cfg.JoinToken = s.URL, token
	key, err := nodekey.LoadOrCreate(cfg.KeyPath())
	if err != nil {
		tb.Fatal(err)
	}
	det, err := cfg.Detector(key)
	if err != nil {
		tb.Fatal(err)
	}
	return &fakeNode{cfg: cfg, key: key, det: det.(*fake.Detector)}
}

// start runs the node's agent against the server until the test stops it.
func (n *fakeNode) start(tb testing.TB, s *attestServer) *running {
	tb.Helper()
	a, err := agent.New(agent.Options{
		Config: n.cfg, Server: client.NewAgent(s.URL, n.key), Detector: n.det, Runtime: &rtfake.Runtime{Speed: 600}, Key: n.key,
		Host:    &agent.Host{Name: "host", CPUCores: 8, RAMMB: 32768, DiskGB: 1000},
		Logger:  slog.New(slog.NewTextHandler(testOutput(tb), &slog.HandlerOptions{Level: slog.LevelDebug})),
		Version: "test",
	})
	if err != nil {
		tb.Fatal(err)
	}
	r := &running{a: a, done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	ended := make(chan struct{})
	go func() { r.done <- a.Run(ctx); close(ended) }()
	tb.Cleanup(func() { cancel(); <-ended })
	return r
}

// mustHardware polls the node's hardware record until cond holds.
func mustHardware(tb testing.TB, s *attestServer, r *running, what string, cond func(v *idlegrid.NodeAttestationView) bool) *idlegrid.NodeAttestationView {
	tb.Helper()
	var v *idlegrid.NodeAttestationView
	pollUntil(tb, what, func() bool {
		id := r.a.NodeID()
		if id == "" {
			return false
		}
		var err error
		if v, err = s.Provider.NodeAttestation(context.Background(), id); err != nil {
			tb.Fatal(err)
		}
		return cond(v)
	})
	return v
}

func challengesIn(v *idlegrid.NodeAttestationView, st idlegrid.ChallengeState) int {
	n := 0
	for _, c := range v.Challenges {
		if c.State == st {
			n++
		}
	}
	return n
}

// TestAgent_attest runs agents with simulated GPUs against the real
// server: an honest one passes its challenges, one whose hardware changed
// is flagged and challenged again, a lying one is quarantined with the
// evidence.
func TestAgent_attest(t *testing.T) {
	ctx := context.Background()
	s := mustAttestServer(t, 128)

	honest := mustFakeNode(t, s)
	r := honest.start(t, s)
	v := mustHardware(t, s, r, "the honest node's challenges", func(v *idlegrid.NodeAttestationView) bool {
		return challengesIn(v, idlegrid.ChallengePassed) == 2
	})
	if v.Current == nil || len(v.Current.Fingerprint.GPUs) != 2 || v.Current.Fingerprint.GPUs[0].VBIOSVersion != fake.VBIOS ||
		v.Quarantine != nil || !strings.HasPrefix(v.VerifiedNote, "hardware verified") {
		t.Fatalf("honest node's record = %+v, want its fingerprint, two challenges passed and no quarantine", v)
	}

	t.Run("VBIOSChanged", func(t *testing.T) {
		// The owner flashes a GPU's VBIOS and restarts the agent.
		if err := r.stop(t); err != nil {
			t.Fatal(err)
		}
		uuid := v.Current.Fingerprint.GPUs[1].UUID
		if err := honest.det.Update(uuid, func(d *gpu.Device) { d.VBIOSVersion = "fake-vbios-2" }); err != nil {
			t.Fatal(err)
		}
		again := honest.start(t, s)
		got := mustHardware(t, s, again, "the VBIOS change and its challenge", func(v *idlegrid.NodeAttestationView) bool {
			return len(v.Changes) == 1 && challengesIn(v, idlegrid.ChallengePassed) == 3
		})
		ch := got.Changes[0]
		if ch.Kind != idlegrid.ChangeVBIOS || ch.GPUUUID != uuid || ch.Before != fake.VBIOS || ch.After != "fake-vbios-2" {
			t.Fatalf("change = %+v, want the VBIOS change of %s", ch, uuid)
		}
		if c := got.Challenges[0]; c.Reason != idlegrid.ChallengeOnChange || c.GPUUUID != uuid {
			t.Fatalf("latest challenge = %+v, want one on the changed GPU for the change", c)
		}
	})

	t.Run("Liar", func(t *testing.T) {
		liar := mustFakeNode(t, s)
		devs, err := liar.det.Detect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// It claims two RTX 4090s; the second is really a T4.
		if err := liar.det.SetActual(devs[1].UUID, fake.Actual{Model: "T4"}); err != nil {
			t.Fatal(err)
		}
		lr := liar.start(t, s)
		got := mustHardware(t, s, lr, "the liar's quarantine", func(v *idlegrid.NodeAttestationView) bool { return v.Quarantine != nil })
		q := got.Quarantine
		for _, want := range []string{devs[1].UUID, "performs like a T4", "of the 24564 MB claimed"} {
			if !strings.Contains(q.Reason, want) {
				t.Errorf("quarantine reason %q does not mention %q", q.Reason, want)
			}
		}
		if !strings.Contains(string(q.Evidence), `"state":"failed"`) || !strings.Contains(string(q.Evidence), `"digest"`) {
			t.Errorf("evidence %s, want the failed challenge with the answer's digest", q.Evidence)
		}
		n, err := s.Provider.FindNode(ctx, lr.a.NodeID())
		if err != nil || !n.Quarantined {
			t.Fatalf("FindNode = %+v, %v; want it shown quarantined", n, err)
		}
		qs, err := s.Admin.ListQuarantines(ctx, false)
		if err != nil || len(qs) != 1 || qs[0].NodeID != n.ID {
			t.Fatalf("ListQuarantines = %+v, %v; want the liar's", qs, err)
		}
		if _, err := s.Provider.LiftQuarantine(ctx, n.ID, "trust me"); idlegrid.ErrorCode(err) != idlegrid.EFORBIDDEN {
			t.Fatalf("the provider lifting its own quarantine = %v, want EFORBIDDEN", err)
		}
		lifted, err := s.Admin.LiftQuarantine(ctx, n.ID, "card replaced")
		if err != nil || lifted.Active() {
			t.Fatalf("LiftQuarantine = %+v, %v", lifted, err)
		}
		if n, _ := s.Provider.FindNode(ctx, n.ID); n.Quarantined {
			t.Fatal("still quarantined after the lift")
		}
	})
}

// TestAgent_attestTooBig: a challenge sized for a real GPU is not computed
// on the CPU for a simulated one; the agent says so, and nothing counts.
func TestAgent_attestTooBig(t *testing.T) {
	s := mustAttestServer(t, 2*agent.MaxSimulatedSize)
	r := mustFakeNode(t, s).start(t, s)
	v := mustHardware(t, s, r, "the unsupported answers", func(v *idlegrid.NodeAttestationView) bool {
		return challengesIn(v, idlegrid.ChallengeUnsupported) == 2
	})
	if v.Quarantine != nil || !strings.Contains(v.Challenges[0].Findings[0], "simulated GPUs compute challenges up to N=1024") {
		t.Fatalf("record = %+v, want unsupported challenges that say why, and no quarantine", v)
	}
}
