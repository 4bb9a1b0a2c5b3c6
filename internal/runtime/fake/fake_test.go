package fake_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"math"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/runtime"
	"github.com/idlegrid/idlegrid/internal/runtime/fake"
)

// run is what one workload sent, collected until its Exit.
type run struct {
	logs     []idlegrid.LogLine
	progress []float64
	exit     runtime.Exit  // without At, which ended holds
	took     time.Duration // from Start to Exit
	began    time.Time     // when Start was called
	ended    time.Time     // the Exit's At
	// checkpoints are when the workload said it saved its work, from
	// Start.
	checkpoints []time.Duration
}

func (r *run) text() string {
	var b strings.Builder
	for _, l := range r.logs {
		b.WriteString(l.Stream + ": " + l.Text + "\n")
	}
	return b.String()
}

func workload(id string, seconds int64, env map[string]string) runtime.Workload {
	return runtime.Workload{
		LeaseID: id, GPUs: []string{"GPU-fake-1", "GPU-fake-2"}, LimitSeconds: seconds,
		Job: idlegrid.JobSpec{Name: "llama-ft", Kind: idlegrid.KindFineTune, Image: "ghcr.io/acme/train:1",
			GPUs: 2, DurationSeconds: seconds, Env: env},
	}
}

// mustStart starts w and returns a channel that yields its run once it exits.
func mustStart(tb testing.TB, r *fake.Runtime, w runtime.Workload) <-chan *run {
	tb.Helper()
	events := make(chan runtime.Event)
	began := time.Now()
	if err := r.Start(context.Background(), w, events); err != nil {
		tb.Fatalf("Start: %v", err)
	}
	done := make(chan *run, 1)
	go func() {
		out := &run{began: began}
		for ev := range events {
			if ev.LeaseID != w.LeaseID {
				tb.Errorf("event for lease %q, want %q", ev.LeaseID, w.LeaseID)
			}
			switch {
			case ev.Log != nil:
				out.logs = append(out.logs, *ev.Log)
			case ev.Progress != nil:
				out.progress = append(out.progress, *ev.Progress)
			case ev.Checkpoint != nil:
				out.checkpoints = append(out.checkpoints, time.Since(began))
			case ev.Exit != nil:
				out.exit, out.took = *ev.Exit, time.Since(began)
				out.ended, out.exit.At = out.exit.At, time.Time{}
				done <- out
				return
			}
		}
	}()
	return done
}

func TestRuntime_Start(t *testing.T) {
	t.Run("Checkpoints", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			w := workload("lease_a", 3600, nil)
			w.Job.CheckpointEverySeconds = 1000 // at the tick that holds 1,000, 2,000 and 3,000 s
			got := <-mustStart(t, &fake.Runtime{}, w)
			want := []time.Duration{1008 * time.Second, 2016 * time.Second, 3024 * time.Second} // ticks of 72 s
			if !slices.Equal(got.checkpoints, want) {
				t.Errorf("checkpoints at %v, want %v", got.checkpoints, want)
			}
			if n := strings.Count(got.text(), "checkpoint saved"); n != 3 {
				t.Errorf("%d checkpoint lines, want 3:\n%s", n, got.text())
			}
			got = <-mustStart(t, &fake.Runtime{}, workload("lease_b", 3600, nil))
			if len(got.checkpoints) != 0 {
				t.Errorf("a job that does not checkpoint saved at %v", got.checkpoints)
			}
		})
	})
	t.Run("RunsToCompletion", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := &fake.Runtime{}
			got := <-mustStart(t, r, workload("lease_a", 3600, nil))
			if got.exit != (runtime.Exit{Code: 0}) {
				t.Errorf("exit = %+v, want code 0", got.exit)
			}
			if got.took != time.Hour {
				t.Errorf("took %v, want 1h at speed 1", got.took)
			}
			if want := got.began.Add(time.Hour); !got.ended.Equal(want) {
				t.Errorf("Exit.At = %v, want %v: when the run ended, on the runtime's clock", got.ended, want)
			}
			if len(got.progress) != fake.Ticks || got.progress[len(got.progress)-1] != 1 {
				t.Errorf("progress = %v, want %d reports ending at 1", got.progress, fake.Ticks)
			}
			for i := 1; i < len(got.progress); i++ {
				if got.progress[i] <= got.progress[i-1] || got.progress[i]-got.progress[i-1] > 0.05 {
					t.Fatalf("progress %v then %v: want steady steps of a few percent", got.progress[i-1], got.progress[i])
				}
			}
			text := got.text()
			for _, want := range []string{"stdout: visible GPUs: GPU-fake-1,GPU-fake-2", "step 500/1000 loss=", "step 1000/1000", "training complete"} {
				if !strings.Contains(text, want) {
					t.Errorf("logs lack %q:\n%s", want, text)
				}
			}
			for _, l := range got.logs {
				if l.At.IsZero() {
					t.Fatalf("log line %q has no time", l.Text)
				}
			}
			mustClose(t, r)
		})
	})
	t.Run("Speed", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := &fake.Runtime{Speed: 60}
			if got := (<-mustStart(t, r, workload("lease_a", 3600, nil))).took; got != time.Minute {
				t.Errorf("took %v, want 1m at speed 60", got)
			}
		})
	})
	t.Run("ExitCode", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			got := <-mustStart(t, &fake.Runtime{}, workload("lease_a", 100, map[string]string{"FAKE_EXIT_CODE": "3"}))
			if got.exit.Code != 3 || got.took != 100*time.Second {
				t.Errorf("exit %+v after %v, want code 3 after 100s", got.exit, got.took)
			}
			if !strings.Contains(got.text(), "stderr: exiting with code 3") {
				t.Errorf("logs lack the exit:\n%s", got.text())
			}
		})
	})
	t.Run("FailAt", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			got := <-mustStart(t, &fake.Runtime{}, workload("lease_a", 100, map[string]string{"FAKE_FAIL_AT": "0.5"}))
			if got.exit.Code != 1 || got.took != 50*time.Second {
				t.Errorf("exit %+v after %v, want code 1 after 50s", got.exit, got.took)
			}
			if last := got.progress[len(got.progress)-1]; last >= 0.5 {
				t.Errorf("last progress %v, want below 0.5", last)
			}
			if !strings.Contains(got.text(), "stderr: RuntimeError: CUDA error") {
				t.Errorf("logs lack the crash:\n%s", got.text())
			}
		})
	})
	t.Run("FailAtWithExitCode", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			env := map[string]string{"FAKE_FAIL_AT": "0.25", "FAKE_EXIT_CODE": "7"}
			if got := <-mustStart(t, &fake.Runtime{}, workload("lease_a", 100, env)); got.exit.Code != 7 || got.took != 26*time.Second {
				t.Errorf("exit %+v after %v, want code 7 after 26s (the first 2%% step at or past 25%%)", got.exit, got.took)
			}
		})
	})
	t.Run("BadEnv", func(t *testing.T) {
		for _, env := range []map[string]string{{"FAKE_FAIL_AT": "half"}, {"FAKE_FAIL_AT": "1.5"}, {"FAKE_EXIT_CODE": "-1"}} {
			synctest.Test(t, func(t *testing.T) {
				got := <-mustStart(t, &fake.Runtime{}, workload("lease_a", 100, env))
				if got.exit.Code != 2 || got.took != 0 || !strings.Contains(got.text(), "stderr: fake: bad FAKE_") {
					t.Errorf("env %v: exit %+v after %v, logs:\n%s\nwant exit 2 at once, naming the variable", env, got.exit, got.took, got.text())
				}
			})
		}
	})
	t.Run("StartError", func(t *testing.T) {
		r := &fake.Runtime{}
		events := make(chan runtime.Event, 1)
		err := r.Start(context.Background(), workload("lease_a", 100, map[string]string{"FAKE_START_ERROR": "manifest unknown"}), events)
		if err == nil || !strings.Contains(err.Error(), "manifest unknown") {
			t.Fatalf("Start error = %v, want one mentioning manifest unknown", err)
		}
		if len(events) != 0 {
			t.Errorf("got %d events after a failed start, want none", len(events))
		}
	})
	t.Run("Pull", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := &fake.Runtime{Speed: 10}
			w := workload("lease_a", 100, map[string]string{"FAKE_PULL_SECONDS": "120", "FAKE_IMAGE_MB": "1024"})
			var heard []runtime.PullProgress
			var at []time.Duration
			began := time.Now()
			w.OnPull = func(p runtime.PullProgress) { heard, at = append(heard, p), append(at, time.Since(began)) }
			if err := r.Start(context.Background(), w, make(chan runtime.Event, 64)); err != nil {
				t.Fatal(err)
			}
			if took := time.Since(began); took != 12*time.Second {
				t.Errorf("Start returned after %s, want 12s: a 120 s pull at speed 10", took)
			}
			if len(heard) != 11 || heard[0] != (runtime.PullProgress{TotalBytes: 1 << 30}) || heard[10] != (runtime.PullProgress{DoneBytes: 1 << 30, TotalBytes: 1 << 30}) || at[5] != 6*time.Second {
				t.Errorf("pull reports %v at %v; want 11, from none to all of 1 GiB, half at 6s", heard, at)
			}
			r.Close()
		})
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			w := workload("lease_b", 100, map[string]string{"FAKE_PULL_SECONDS": "120"})
			time.AfterFunc(30*time.Second, cancel)
			began := time.Now()
			if err := (&fake.Runtime{}).Start(ctx, w, make(chan runtime.Event, 1)); err == nil || time.Since(began) != 30*time.Second {
				t.Errorf("a pull whose context ended after 30s: Start = %v after %s, want the context's error then", err, time.Since(began))
			}
		})
		for _, env := range []map[string]string{{"FAKE_PULL_SECONDS": "soon"}, {"FAKE_PULL_SECONDS": "-1"}, {"FAKE_PULL_SECONDS": "5", "FAKE_IMAGE_MB": "0"}} {
			err := (&fake.Runtime{}).Start(context.Background(), workload("lease_c", 100, env), make(chan runtime.Event, 1))
			if idlegrid.ErrorCode(err) != idlegrid.EINVALID || !strings.Contains(err.Error(), "FAKE_") {
				t.Errorf("env %v: Start = %v, want EINVALID naming the variable", env, err)
			}
		}
	})
	t.Run("Duplicate", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := &fake.Runtime{}
			done := mustStart(t, r, workload("lease_a", 100, nil))
			err := r.Start(context.Background(), workload("lease_a", 100, nil), make(chan runtime.Event))
			if got := idlegrid.ErrorCode(err); got != idlegrid.ECONFLICT {
				t.Errorf("second Start: code %q (%v), want %q", got, err, idlegrid.ECONFLICT)
			}
			<-done
		})
	})
	t.Run("Cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := (&fake.Runtime{}).Start(ctx, workload("lease_a", 1, nil), make(chan runtime.Event)); err == nil {
			t.Error("Start with a cancelled context: got nil error")
		}
	})
}

func TestRuntime_Stop(t *testing.T) {
	t.Run("Checkpoints", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := &fake.Runtime{}
			done := mustStart(t, r, workload("lease_a", 1000, nil))
			time.Sleep(110 * time.Second) // virtual: between the ticks at 100 and 120 s, so which runs first at one instant never matters
			if err := r.Stop("lease_a", 10*time.Second); err != nil {
				t.Fatalf("Stop: %v", err)
			}
			if err := r.Stop("lease_a", time.Hour); err != nil {
				t.Errorf("second Stop: %v, want nil", err)
			}
			got := <-done
			if got.exit != (runtime.Exit{Code: 143, Stopped: true}) {
				t.Errorf("exit = %+v, want 143 stopped", got.exit)
			}
			if got.took > 120*time.Second {
				t.Errorf("exited %v after start, want within the 10s grace of the stop at 110s", got.took)
			}
			text := got.text()
			for _, want := range []string{"stderr: received SIGTERM, checkpointing", "checkpoint saved: /checkpoints/step-100.pt"} {
				if !strings.Contains(text, want) {
					t.Errorf("logs lack %q:\n%s", want, text)
				}
			}
		})
	})
	t.Run("ResumesFromCheckpoint", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := &fake.Runtime{}
			w := workload("lease_a", 1000, nil)
			w.JobID, w.Job.CheckpointEverySeconds = "job_a", 100
			done := mustStart(t, r, w)
			time.Sleep(410 * time.Second) // virtual: 20 ticks of 20 s
			r.Stop("lease_a", 10*time.Second)
			got := <-done
			ref := fake.CheckpointRef("job_a")
			if got.exit.CheckpointRef != ref {
				t.Fatalf("stopped exit's CheckpointRef = %q, want %q", got.exit.CheckpointRef, ref)
			}

			w.LeaseID, w.Job.CheckpointRef = "lease_b", ref
			again := <-mustStart(t, r, w)
			if len(again.progress) == 0 || again.progress[0] != 0.4 {
				t.Errorf("resumed run's progress begins %v, want 0.4: where the checkpoint was", again.progress)
			}
			if again.took != 600*time.Second {
				t.Errorf("resumed run took %v, want the 600s left", again.took)
			}
			if text := again.text(); !strings.Contains(text, "resuming from step 400") {
				t.Errorf("logs lack the resume:\n%s", text)
			}
			if again.exit.CheckpointRef != "" {
				t.Errorf("finished run's CheckpointRef = %q, want none", again.exit.CheckpointRef)
			}

			w.LeaseID = "lease_c" // another node keeps no checkpoint of the job
			if other := <-mustStart(t, &fake.Runtime{}, w); other.took != 1000*time.Second {
				t.Errorf("run on another runtime took %v, want the whole 1000s", other.took)
			}
		})
	})
	t.Run("NoGrace", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := &fake.Runtime{}
			done := mustStart(t, r, workload("lease_a", 1000, nil))
			synctest.Wait()
			r.Stop("lease_a", 0)
			if got := <-done; got.exit != (runtime.Exit{Code: 137, Stopped: true}) || got.took != 0 {
				t.Errorf("exit = %+v after %v, want 137 stopped at once", got.exit, got.took)
			}
		})
	})
	t.Run("Unknown", func(t *testing.T) {
		err := (&fake.Runtime{}).Stop("lease_nope", time.Second)
		if got := idlegrid.ErrorCode(err); got != idlegrid.ENOTFOUND {
			t.Errorf("code = %q (%v), want %q", got, err, idlegrid.ENOTFOUND)
		}
	})
	t.Run("AfterExit", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := &fake.Runtime{}
			<-mustStart(t, r, workload("lease_a", 10, nil))
			if got := idlegrid.ErrorCode(r.Stop("lease_a", time.Second)); got != idlegrid.ENOTFOUND {
				t.Errorf("code = %q, want %q", got, idlegrid.ENOTFOUND)
			}
		})
	})
}

func TestRuntime_Close(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &fake.Runtime{}
		a := mustStart(t, r, workload("lease_a", 1000, nil))
		b := mustStart(t, r, workload("lease_b", 1000, nil))
		time.Sleep(30 * time.Second)
		r.Stop("lease_b", 10*time.Second) // checkpointing when Close comes
		synctest.Wait()
		mustClose(t, r)
		synctest.Wait() // the readers have handed over what they got
		for _, done := range []<-chan *run{a, b} {
			select {
			case got := <-done:
				if got.exit != (runtime.Exit{Code: 137, Stopped: true}) || got.took != 30*time.Second {
					t.Errorf("exit = %+v after %v, want 137 stopped at 30s", got.exit, got.took)
				}
			default:
				t.Error("Close returned before a workload's Exit was sent")
			}
		}
		if err := r.Start(context.Background(), workload("lease_c", 1, nil), make(chan runtime.Event)); err == nil {
			t.Error("Start after Close: got nil error")
		}
	})
}

func mustClose(tb testing.TB, r *fake.Runtime) {
	tb.Helper()
	if err := r.Close(); err != nil {
		tb.Fatalf("Close: %v", err)
	}
}

// follower collects a workload's events from a channel until its Exit or
// Detached, whichever ends them.
type follower struct {
	events chan runtime.Event
	done   chan []runtime.Event
}

func follow() *follower {
	f := &follower{events: make(chan runtime.Event), done: make(chan []runtime.Event, 1)}
	go func() {
		var got []runtime.Event
		for ev := range f.events {
			got = append(got, ev)
			if ev.Exit != nil || ev.Detached {
				f.done <- got
				return
			}
		}
	}()
	return f
}

// TestRuntime_Detach: Detach leaves the workloads running and ends their
// events with Detached; the Successor's Adopt takes them back, with a
// note, and sends what they did meanwhile, then their events from then on:
// nothing is lost, and the Exit of one that ended meanwhile comes with
// when it ended. The old runtime starts, stops and kills nothing more.
func TestRuntime_Detach(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		old := &fake.Runtime{}
		short, long := follow(), follow()
		began := time.Now()
		for _, s := range []struct {
			w runtime.Workload
			f *follower
		}{{workload("lease_s", 100, nil), short}, {workload("lease_l", 1000, nil), long}} {
			s.w.Job.Tier, s.w.Notice = idlegrid.TierBronze, 90*time.Second
			if err := old.Start(context.Background(), s.w, s.f.events); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(30 * time.Second)
		if err := old.Detach(); err != nil {
			t.Fatal(err)
		}
		before := map[string][]runtime.Event{}
		for _, f := range []*follower{short, long} {
			got := <-f.done
			if last := got[len(got)-1]; !last.Detached || last.Exit != nil {
				t.Errorf("the last event before the hand-over is %+v, want Detached", last)
			}
			before[got[0].LeaseID] = got
		}
		if err := old.Stop("lease_l", time.Second); idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND {
			t.Errorf("the old runtime's Stop of a workload it left = %v, want ENOTFOUND", err)
		}
		mustClose(t, old) // kills nothing it left
		if err := old.Start(context.Background(), workload("lease_x", 1, nil), make(chan runtime.Event)); err == nil {
			t.Error("Start after Detach: got nil error")
		}
		time.Sleep(2 * time.Minute) // lease_s ends while no one follows it

		next := old.Successor()
		events := make(chan runtime.Event, 1000)
		ids, err := next.Adopt(context.Background(), events)
		slices.Sort(ids)
		if err != nil || !slices.Equal(ids, []string{"lease_l", "lease_s"}) {
			t.Fatalf("Adopt = %v, %v; want lease_l and lease_s", ids, err)
		}
		if g := next.LeaseGPUs("lease_l"); len(g) != 2 || next.LeaseTier("lease_l") != idlegrid.TierBronze || next.LeaseNotice("lease_l") != 90*time.Second {
			t.Errorf("lease_l as taken back: GPUs %v, tier %q, notice %v; want its workload's", g, next.LeaseTier("lease_l"), next.LeaseNotice("lease_l"))
		}
		if err := next.Stop("lease_l", 10*time.Second); err != nil {
			t.Fatal(err)
		}
		after := map[string][]runtime.Event{}
		for exits := 0; exits < 2; {
			ev := <-events
			after[ev.LeaseID] = append(after[ev.LeaseID], ev)
			if ev.Exit != nil {
				exits++
			}
		}
		for id, evs := range after {
			if n := evs[0].Log; n == nil || !strings.Contains(n.Text, "handed the workload over") {
				t.Errorf("%s's first event once taken back = %+v, want the note of the hand-over", id, evs[0])
			}
			var progress []float64
			for _, ev := range append(before[id], evs...) {
				if ev.Progress != nil {
					progress = append(progress, *ev.Progress)
				}
			}
			for i, p := range progress {
				if want := float64(i+1) / fake.Ticks; math.Abs(p-want) > 1e-9 {
					t.Fatalf("%s's progress across the hand-over: %v; want every tick once, in order", id, progress)
				}
			}
		}
		exitOf := func(evs []runtime.Event) runtime.Exit { return *evs[len(evs)-1].Exit }
		if e := exitOf(after["lease_s"]); e.Code != 0 || !e.At.Equal(began.Add(100*time.Second)) {
			t.Errorf("lease_s's Exit = %+v, want code 0 at its end, 100 s in", e)
		}
		if e := exitOf(after["lease_l"]); e.Code != 143 || !e.Stopped {
			t.Errorf("lease_l's Exit = %+v, want stopped by the successor", e)
		}
		mustClose(t, next)
	})
}

// TestRuntime_AdoptedOutputDigest: a verifiable workload taken back has
// the digest of its whole standard output, what it wrote while no one
// followed it included: that of the same run followed throughout.
func TestRuntime_AdoptedOutputDigest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := workload("lease_v", 100, nil)
		w.Job.Verifiable = true
		whole := <-mustStart(t, &fake.Runtime{}, w)
		h := sha256.New()
		for _, l := range whole.logs {
			if l.Stream == "stdout" {
				io.WriteString(h, l.Text+"\n")
			}
		}
		want := "sha256:" + hex.EncodeToString(h.Sum(nil))

		old, f := &fake.Runtime{}, follow()
		if err := old.Start(context.Background(), w, f.events); err != nil {
			t.Fatal(err)
		}
		time.Sleep(30 * time.Second)
		old.Detach()
		<-f.done
		time.Sleep(30 * time.Second)
		next := old.Successor()
		events := make(chan runtime.Event, 1000)
		if _, err := next.Adopt(context.Background(), events); err != nil {
			t.Fatal(err)
		}
		for ev := range events {
			if ev.Exit != nil {
				break
			}
		}
		if got, ok := next.AdoptedOutputDigest("lease_v"); !ok || got != want {
			t.Errorf("AdoptedOutputDigest = %q, %v; want %q, the whole run's", got, ok, want)
		}
	})
}
