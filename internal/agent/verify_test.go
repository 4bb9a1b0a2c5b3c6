package agent_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/agent"
	"github.com/idlegrid/idlegrid/internal/nodekey"
	"github.com/idlegrid/idlegrid/internal/runtime"
	rtfake "github.com/idlegrid/idlegrid/internal/runtime/fake"
)

// A verifiable job's success carries the digest of its standard output,
// which depends on its inputs only: two leases of the same work on
// different GPUs print the same; other work prints otherwise.
func TestAgent_OutputDigest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, rt := &fakeServer{}, &rtfake.Runtime{}
		r := startAgent(t, testConfig(t), srv, rt)
		verifiable := job(60, nil)
		verifiable.Verifiable = true
		other := verifiable
		other.Command = []string{"python", "train.py", "--seed", "2"}
		// Two GPUs: a and b run at once, one on each; c and d each start
		// once the lease before it on its GPU has ended.
		for i, x := range []struct {
			id string
			j  idlegrid.JobSpec
		}{{"lease_a", verifiable}, {"lease_b", verifiable}, {"lease_c", other}, {"lease_d", job(60, nil)}} {
			srv.assign(idlegrid.Lease{ID: x.id, JobID: "job_" + x.id, GPUUUIDs: r.gpus[i%2 : i%2+1], LimitSeconds: x.j.DurationSeconds, Tier: x.j.Tier}, x.j)
		}
		digest := map[string]string{}
		for _, id := range []string{"lease_a", "lease_b", "lease_c", "lease_d"} {
			waitFor(t, id+" to succeed", leaseIn(srv, id, idlegrid.LeaseSucceeded))
			rs := srv.reportsFor(id)
			digest[id] = rs[len(rs)-1].OutputDigest
		}
		if d := digest["lease_a"]; !strings.HasPrefix(d, "sha256:") || len(d) != len("sha256:")+64 {
			t.Fatalf("digest = %q, want sha256: and 64 hex digits", d)
		}
		if digest["lease_a"] != digest["lease_b"] {
			t.Errorf("the same work printed %s and %s", digest["lease_a"], digest["lease_b"])
		}
		if digest["lease_c"] == digest["lease_a"] {
			t.Errorf("other work printed the same digest %s", digest["lease_c"])
		}
		if digest["lease_d"] != "" {
			t.Errorf("a job that is not verifiable reported digest %q", digest["lease_d"])
		}
		if err := r.stop(t); err != nil {
			t.Fatal(err)
		}
		rt.Close()
	})
}

// longLineRuntime runs every workload as one that prints lines of
// lineBytes, each followed by a short marker, then succeeds.
type longLineRuntime struct {
	runtime.Runtime
	lines, lineBytes int
}

func (r longLineRuntime) Start(ctx context.Context, w runtime.Workload, events chan<- runtime.Event) error {
	go func() {
		for i := range r.lines {
			for _, text := range []string{strings.Repeat("x", r.lineBytes), fmt.Sprintf("marker %d", i)} {
				events <- runtime.Event{LeaseID: w.LeaseID, Log: &idlegrid.LogLine{Stream: "stdout", Text: text}}
			}
		}
		events <- runtime.Event{LeaseID: w.LeaseID, Exit: &runtime.Exit{}}
	}()
	return nil
}

// A line longer than the server keeps is cut before it is sent, so that a
// batch of them stays within a request's size; the digest still covers
// the whole line.
func TestAgent_LongLines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &fakeServer{}
		rt := longLineRuntime{Runtime: &rtfake.Runtime{}, lines: 150, lineBytes: 20_000}
		r := startAgent(t, testConfig(t), srv, rt)
		j := job(60, nil)
		j.Verifiable = true
		r.assign(srv, "lease_a", j)
		waitFor(t, "the lease to succeed", leaseIn(srv, "lease_a", idlegrid.LeaseSucceeded))
		logs, markers := srv.logsFor("lease_a"), 0
		for _, l := range logs {
			if len(l.Text) > idlegrid.MaxLogLineBytes {
				t.Fatalf("a line of %d bytes was sent, over the %d the server keeps", len(l.Text), idlegrid.MaxLogLineBytes)
			}
			if strings.HasPrefix(l.Text, "marker ") {
				markers++
			}
		}
		if markers != rt.lines {
			t.Errorf("%d markers arrived, want %d", markers, rt.lines)
		}
		h := sha256.New()
		for i := range rt.lines {
			fmt.Fprintf(h, "%s\nmarker %d\n", strings.Repeat("x", rt.lineBytes), i)
		}
		rs := srv.reportsFor("lease_a")
		if got, want := rs[len(rs)-1].OutputDigest, "sha256:"+hex.EncodeToString(h.Sum(nil)); got != want {
			t.Errorf("digest = %s, want %s, of the whole lines", got, want)
		}
		if err := r.stop(t); err != nil {
			t.Fatal(err)
		}
	})
}

// pullingRuntime's Start pulls an image that never arrives: it returns
// only when its context ends.
type pullingRuntime struct {
	runtime.Runtime
	gaveUp chan struct{}
}

func (r pullingRuntime) Start(ctx context.Context, w runtime.Workload, events chan<- runtime.Event) error {
	<-ctx.Done()
	close(r.gaveUp)
	return fmt.Errorf("pull image %s: %w", w.Job.Image, ctx.Err())
}

// A stop that comes while the workload's image is still being pulled ends
// the pull, and the lease is reported as the stop asked, at once.
func TestAgent_StopWhilePulling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &fakeServer{}
		rt := pullingRuntime{Runtime: &rtfake.Runtime{}, gaveUp: make(chan struct{})}
		r := startAgent(t, testConfig(t), srv, rt)
		r.assign(srv, "lease_a", job(3600, nil))
		time.Sleep(time.Minute) // pulling
		srv.requestStop("lease_a", "cancelled by the renter")
		waitFor(t, "the lease to be cancelled", leaseIn(srv, "lease_a", idlegrid.LeaseCancelled))
		select {
		case <-rt.gaveUp:
		default:
			t.Error("the pull goes on after the stop")
		}
		if got := lastReport(srv, "lease_a"); got.ExitCode != nil || !strings.Contains(got.Message, "cancelled by the renter") {
			t.Errorf("report = %+v, want cancelled with the reason and no exit code: it never ran", got)
		}
		if err := r.stop(t); err != nil {
			t.Fatal(err)
		}
	})
}

// A node the server refuses for good (retired: 403) stops its workloads
// and its agent ends, saying why, rather than trying again for ever.
func TestAgent_Retired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &fakeServer{}
		rt := &countingRuntime{Runtime: &rtfake.Runtime{}}
		r := startAgent(t, testConfig(t), srv, rt)
		r.assign(srv, "lease_a", job(3600, nil))
		waitFor(t, "the lease to run", leaseIn(srv, "lease_a", idlegrid.LeaseRunning))
		srv.fail("Heartbeat", idlegrid.Errorf(idlegrid.EFORBIDDEN, "node node_1 is retired: it is refused for good"))
		err := r.wait(t)
		if err == nil || !strings.Contains(err.Error(), "retired") || !strings.Contains(err.Error(), "empty data dir") {
			t.Errorf("Run = %v, want it to end saying the node was retired and how to serve again", err)
		}
		if got := lastReport(srv, "lease_a"); got.State != idlegrid.LeaseFailed {
			t.Errorf("the lease's last report = %+v, want its workload stopped", got)
		}
	})
}

// A node the server no longer knows (its database was reset) stops its
// workloads once the server has said so for agent.ForgetAfter, and its
// agent ends saying why; a server that forgot it briefly is ridden out.
func TestAgent_Forgotten(t *testing.T) {
	unknown := idlegrid.Errorf(idlegrid.EUNAUTHORIZED, "%s %q; join again with a new join token", nodekey.UnknownWords, "node_1")
	t.Run("ForGood", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv := &fakeServer{}
			r := startAgent(t, testConfig(t), srv, &rtfake.Runtime{})
			r.assign(srv, "lease_a", job(3600, nil))
			waitFor(t, "the lease to run", leaseIn(srv, "lease_a", idlegrid.LeaseRunning))
			for range 1000 {
				srv.fail("Heartbeat", unknown)
			}
			began := time.Now()
			err := r.wait(t)
			if err == nil || !strings.Contains(err.Error(), "no longer knows") || !strings.Contains(err.Error(), "join token") {
				t.Errorf("Run = %v, want it to end saying the server forgot the node and how to join again", err)
			}
			if took := time.Since(began); took < agent.ForgetAfter {
				t.Errorf("stopped %v after the first refusal, want at least %v", took, agent.ForgetAfter)
			}
			if got := lastReport(srv, "lease_a"); got.State != idlegrid.LeaseFailed {
				t.Errorf("the lease's last report = %+v, want its workload stopped", got)
			}
		})
	})
	t.Run("ThroughAnOutage", func(t *testing.T) {
		// The server forgets the node, then is unreachable for a while,
		// then still does not know it: the outage does not reset the clock.
		synctest.Test(t, func(t *testing.T) {
			srv := &fakeServer{}
			r := startAgent(t, testConfig(t), srv, &rtfake.Runtime{})
			waitFor(t, "the offer", func() bool { _, offers, _ := srv.counts(); return offers == 1 })
			down := errors.New("dial tcp 127.0.0.1:7070: connection refused")
			srv.fail("Heartbeat", unknown)
			for range 40 {
				srv.fail("Heartbeat", down)
			}
			for range 1000 {
				srv.fail("Heartbeat", unknown)
			}
			if err := r.wait(t); err == nil || !strings.Contains(err.Error(), "no longer knows") {
				t.Errorf("Run = %v, want it to end saying the server forgot the node", err)
			}
			if n := len(srv.callTimes("Heartbeat")); n > 43 {
				t.Errorf("%d heartbeats, want the agent to stop at the first answer after the outage (42)", n)
			}
		})
	})
	t.Run("Briefly", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv := &fakeServer{}
			r := startAgent(t, testConfig(t), srv, &rtfake.Runtime{})
			r.assign(srv, "lease_a", job(3600, nil))
			waitFor(t, "the lease to run", leaseIn(srv, "lease_a", idlegrid.LeaseRunning))
			srv.fail("Heartbeat", unknown, unknown, unknown)
			time.Sleep(2 * agent.ForgetAfter)
			if got := srv.lease("lease_a").State; got != idlegrid.LeaseRunning {
				t.Errorf("lease is %s, want it still running", got)
			}
			if err := r.stop(t); err != nil {
				t.Fatal(err)
			}
		})
	})
}

// A 429 is asked again: the server refuses the requests of an address
// that failed to authenticate too often (other nodes behind the same NAT,
// say) until it may try again, and a lease's report must not be lost for it.
func TestAgent_ReportAfterA429(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &fakeServer{}
		r := startAgent(t, testConfig(t), srv, &rtfake.Runtime{})
		busy := idlegrid.Errorf(idlegrid.ETOOMANY, "too many requests from 192.0.2.7 failed to authenticate; wait 3s")
		srv.fail("ReportLease", busy, busy)
		r.assign(srv, "lease_a", job(60, nil))
		waitFor(t, "the lease to succeed", leaseIn(srv, "lease_a", idlegrid.LeaseSucceeded))
		if got := states(srv.reportsFor("lease_a")); got != "running,succeeded" {
			t.Errorf("reports = %s, want running,succeeded", got)
		}
		if err := r.stop(t); err != nil {
			t.Fatal(err)
		}
	})
}

// A 401 is asked again: the server refuses a request signed at a time off
// its clock, which NTP mends, and a lease's report must not be lost for it.
func TestAgent_ReportAfterA401(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &fakeServer{}
		r := startAgent(t, testConfig(t), srv, &rtfake.Runtime{})
		skew := idlegrid.Errorf(idlegrid.EUNAUTHORIZED, "request time is 3m0s %s; check the node's clock (NTP)", nodekey.SkewWords)
		srv.fail("ReportLease", skew, skew)
		r.assign(srv, "lease_a", job(60, nil))
		waitFor(t, "the lease to succeed", leaseIn(srv, "lease_a", idlegrid.LeaseSucceeded))
		if err := r.stop(t); err != nil {
			t.Fatal(err)
		}
	})
}
