package cli

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
	"github.com/idlegrid/idlegrid/internal/nodekey"
)

// receiptsMarket runs the real server with a renter whose job runs on a
// node, and returns the server's URL, the renter's key and the lease, with
// receipts of 30 s and 20 s signed by the node.
func receiptsMarket(t *testing.T) (url, renterKey string, l *idlegrid.Lease, sent []idlegrid.Receipt) {
	t.Helper()
	ctx := context.Background()
	rs, err := startServer(ctx, serveConfig{
		listen: "127.0.0.1:0", dsn: filepath.Join(t.TempDir(), "idlegrid.db"),
		adminKeyFile: filepath.Join(t.TempDir(), "admin.key"), logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.stop() })
	admin := client.New(rs.url, rs.adminKey)
	renter, _, renterKey, err := admin.CreateAccount(ctx, "ren", idlegrid.RoleRenter)
	mustOK(t, err)
	_, _, providerKey, err := admin.CreateAccount(ctx, "prov", idlegrid.RoleProvider)
	mustOK(t, err)
	_, err = admin.TopUp(ctx, renter.ID, 10*idlegrid.MicrosPerUnit, "t")
	mustOK(t, err)
	_, token, err := client.New(rs.url, providerKey).CreateJoinToken(ctx, "n", 1, time.Hour)
	mustOK(t, err)
	_, key, err := ed25519.GenerateKey(nil)
	mustOK(t, err)
	node := client.NewAgent(rs.url, key)
	offer := idlegrid.Offer{
		Name: "rig", GPUs: []idlegrid.GPU{{UUID: "GPU-1", Model: "RTX4090", VRAMMB: 24576}}, Region: "eu-west", Residency: "EU",
		Schedule: idlegrid.Schedule{Mode: idlegrid.ScheduleAlways},
		Ask:      idlegrid.Ask{FloorMicrosPerGPUHour: map[idlegrid.Tier]idlegrid.Micros{idlegrid.TierSilver: 400_000}},
	}
	_, err = node.Join(ctx, idlegrid.JoinRequest{Token: token, Offer: offer})
	mustOK(t, err)
	mustOK(t, node.UpdateOffer(ctx, idlegrid.OfferRequest{Offer: offer}))
	renterClient := client.New(rs.url, renterKey)
	_, err = renterClient.SubmitJob(ctx, idlegrid.JobSpec{Kind: idlegrid.KindTraining, Image: "x/y:1", GPUs: 1,
		Tier: idlegrid.TierSilver, MaxPriceMicrosPerGPUHour: idlegrid.MicrosPerUnit, DurationSeconds: 600})
	mustOK(t, err)
	var lease *idlegrid.Lease
	for lease == nil {
		cmds, err := node.Commands(ctx, 5*time.Second)
		mustOK(t, err)
		for _, c := range cmds {
			lease = c.Lease
		}
	}
	mustOK(t, node.ReportLease(ctx, lease.ID, idlegrid.LeaseReport{State: idlegrid.LeaseRunning}))
	lease, _, err = renterClient.FindLease(ctx, lease.ID)
	mustOK(t, err)
	start, prev := *lease.StartedAt, ""
	for i, secs := range []int64{30, 20} { // within the clock skew the server allows
		r := idlegrid.Receipt{LeaseID: lease.ID, Seq: int64(i + 1), Start: start, End: start.Add(time.Duration(secs) * time.Second),
			GPUSeconds: secs, AvgUtilPct: 90, EnergyWh: 3, PrevHash: prev}
		nodekey.SignReceipt(key, &r)
		sent = append(sent, r)
		start, prev = r.End, r.Hash()
	}
	mustOK(t, node.SendReceipts(ctx, lease.ID, sent))
	return rs.url, renterKey, lease, sent
}

func mustOK(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}

func TestLeaseReceipts(t *testing.T) {
	url, key, l, sent := receiptsMarket(t)
	vars := map[string]string{"IDLEGRID_ADDR": url, "IDLEGRID_KEY": key}

	t.Run("Text", func(t *testing.T) {
		r := run(t, vars, "lease", "receipts", l.ID)
		if r.code != 0 {
			t.Fatalf("got %s, want exit 0", r)
		}
		if n := strings.Count(r.out, " verified\n"); n != 2 {
			t.Errorf("%d receipts shown verified, want 2:\n%s", n, r.out)
		}
		for _, want := range []string{"2 receipt(s), 50 GPU-seconds; every signature and the chain verified", sent[1].Hash()[:12], "90%", "3 Wh"} {
			if !strings.Contains(r.out, want) {
				t.Errorf("output lacks %q:\n%s", want, r.out)
			}
		}
	})
	t.Run("JSON", func(t *testing.T) {
		r := run(t, vars, "lease", "receipts", l.ID, "--json")
		if r.code != 0 {
			t.Fatalf("got %s, want exit 0", r)
		}
		var got checkedReceipts
		if err := json.Unmarshal([]byte(r.out), &got); err != nil {
			t.Fatal(err)
		}
		if !got.Verified || got.GPUSeconds != 50 || len(got.Receipts) != 2 || got.Receipts[1].Hash != sent[1].Hash() || !got.Receipts[0].Verified {
			t.Errorf("--json = %+v, want 2 verified receipts of 50 GPU-seconds", got)
		}
	})
	t.Run("UnknownLease", func(t *testing.T) {
		if r := run(t, vars, "lease", "receipts", "lease_nope"); r.code == 0 || !strings.Contains(r.err, "not found") {
			t.Errorf("got %s, want a not-found error", r)
		}
	})
}

// TestLeaseReceipts_lyingServer checks that the CLI does not take the
// server's word: a server that changes a receipt is caught.
func TestLeaseReceipts_lyingServer(t *testing.T) {
	url, key, l, _ := receiptsMarket(t)
	export, err := client.New(url, key).ListReceipts(context.Background(), l.ID)
	mustOK(t, err)
	for _, tt := range []struct {
		name   string
		change func(x *idlegrid.LeaseReceipts)
		want   string
	}{
		{"InflatedReceipt", func(x *idlegrid.LeaseReceipts) { x.Receipts[0].GPUSeconds = 30_000 }, "signature"},
		{"DroppedReceipt", func(x *idlegrid.LeaseReceipts) { x.Receipts = x.Receipts[1:] }, "receipt.seq"},
		{"OtherKey", func(x *idlegrid.LeaseReceipts) {
			pub, _, _ := ed25519.GenerateKey(nil)
			x.NodePublicKey = nodekey.PublicString(pub)
		}, "signature"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			x := *export
			x.Receipts = append([]idlegrid.Receipt(nil), export.Receipts...)
			tt.change(&x)
			liar := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				json.NewEncoder(w).Encode(&x)
			}))
			defer liar.Close()
			r := run(t, map[string]string{"IDLEGRID_ADDR": liar.URL, "IDLEGRID_KEY": key}, "lease", "receipts", l.ID)
			if r.code == 0 || !strings.Contains(r.out, "FAILED: ") || !strings.Contains(r.out, tt.want) ||
				!strings.Contains(r.err, "failed verification") {
				t.Errorf("got %s\nwant a FAILED receipt mentioning %q and a non-zero exit", r, tt.want)
			}
		})
	}
}
