package market_test

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"hash"
	"maps"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/market"
)

// updateDigest rewrites testdata/decisions.digest with what the
// engine decides now.
var updateDigest = flag.Bool("update-digest", false, "TestEngine_decisionDigest: write the engine's digest to its testdata file")

// decisionDigestFile holds the digest TestEngine_decisionDigest expects.
const decisionDigestFile = "testdata/decisions.digest"

// The engine's work on speed must not change what it decides. This runs
// BenchmarkPlace's loop (mixed models, regions, windows in six time zones,
// time-of-day prices, gangs, data, reliability weights, 80% busy) on 3,000
// nodes for 40,000 placements, its clock moving ten minutes every 1,000
// (six hours and forty minutes in all), and compares a digest of
// everything it decided (picks, GPUs, prices, scores, price notes,
// runner-ups, preemptions, reservations, rejections, window notices) with
// the one on record. A change that means to decide differently updates
// the record:
//
//	go test ./internal/market -run TestEngine_decisionDigest -update-digest
//
// The scores are floating point, and other architectures may fuse a
// multiply and an add where amd64 does not, so the record is amd64's.
func TestEngine_decisionDigest(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skipf("the digest on record is amd64's; this is %s", runtime.GOARCH)
	}
	if testing.Short() {
		t.Skip("places 40,000 jobs")
	}
	const placements = 40_000
	l := newPlaceLoop(3000, false)
	l.clockStep = 10 * time.Minute // 40 Advances: windows open and close in every time zone
	h := sha256.New()
	for i := range placements {
		j, d, _ := l.step(i)
		for _, n := range l.notices {
			fmt.Fprintf(h, "notice %s %s %s %d %s %s %s\n", n.LeaseID, n.JobID, n.NodeID, n.NoticeSeconds, stamp(n.NoticeAt), stamp(n.StopAt), n.Reason)
		}
		digestDecision(h, j, d)
	}
	got := hex.EncodeToString(h.Sum(nil))
	if *updateDigest {
		if err := os.WriteFile(decisionDigestFile, []byte(got+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(decisionDigestFile)
	if err != nil {
		t.Fatal(err)
	}
	if got != strings.TrimSpace(string(want)) {
		t.Errorf("the engine decided differently over %d placements: digest %s, want %s.\nIf that is meant, rerun with -update-digest.", placements, got, want)
	}
}

// digestDecision writes what the engine decided for j.
func digestDecision(h hash.Hash, j *idlegrid.Job, d market.Decision) {
	fmt.Fprintf(h, "%s %q\n", j.ID, d.Reason)
	for _, p := range d.Picks {
		uuids := make([]string, len(p.GPUs))
		for i, g := range p.GPUs {
			uuids[i] = g.UUID
		}
		fmt.Fprintf(h, " pick %s %v %d %v %d %d %s %v %v %q\n", p.Node.ID, uuids, p.PriceMicrosPerGPUHour, p.Score,
			p.AskMicrosPerGPUHour, p.CreditMicrosPerGPUHour, p.RunnerUpNodeID, p.RunnerUpScore, p.ShadowRunnerUp, p.PriceNote())
	}
	for _, p := range d.Preemptions {
		fmt.Fprintf(h, " preempt %+v\n", p)
	}
	if r := d.Reservation; r != nil {
		fmt.Fprintf(h, " reserve %s %s %+v %v\n", r.JobID, stamp(r.Start), r.Nodes, r.Preempting)
	}
	for _, k := range slices.Sorted(maps.Keys(d.Rejections)) {
		fmt.Fprintf(h, " rejected %v %d\n", k, d.Rejections[k])
	}
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
