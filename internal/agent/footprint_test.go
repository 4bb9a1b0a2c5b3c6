package agent_test

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"os"
	goruntime "runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/agent"
	"github.com/idlegrid/idlegrid/internal/nodekey"
	rtfake "github.com/idlegrid/idlegrid/internal/runtime/fake"
)

// Footprint targets for an idle agent: what a GPU owner gives up to run it.
const (
	targetRSSMB  = 30
	targetCPUPct = 1.0
)

// tenSecondServer is the fake server asking for a heartbeat every 10 s.
type tenSecondServer struct{ *fakeServer }

func (s tenSecondServer) Heartbeat(ctx context.Context, req idlegrid.HeartbeatRequest) (*idlegrid.HeartbeatResponse, error) {
	if _, err := s.fakeServer.Heartbeat(ctx, req); err != nil {
		return nil, err
	}
	return &idlegrid.HeartbeatResponse{HeartbeatSeconds: 10}, nil
}

// BenchmarkIdleAgent runs an idle agent with 8 fake H100s that looks at its
// GPUs and heartbeats every 10 s, in real time, and reports the process's
// resident memory and the share of one core it used over a window
// (IDLEGRID_FOOTPRINT_WINDOW, default 1m). It runs once whatever -benchtime
// says:
//
//	go test -run '^$' -bench BenchmarkIdleAgent ./internal/agent
//
// The numbers are the whole test binary's, so they overstate the agent's.
func BenchmarkIdleAgent(b *testing.B) {
	if goruntime.GOOS != "linux" {
		b.Skip("reads /proc/self/status")
	}
	window := time.Minute
	if s := os.Getenv("IDLEGRID_FOOTPRINT_WINDOW"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			b.Fatalf("IDLEGRID_FOOTPRINT_WINDOW: %v", err)
		}
		window = d
	}
	cfg := testConfig(b)
	cfg.FakeGPUs = "8xH100-80GB"
	cfg.Mode = agent.ModeWhenIdle
	cfg.ThermalCapC, cfg.PowerCapW = 83, 500
	key, err := nodekey.LoadOrCreate(cfg.KeyPath())
	if err != nil {
		b.Fatal(err)
	}
	det, err := cfg.Detector(key)
	if err != nil {
		b.Fatal(err)
	}
	srv := tenSecondServer{&fakeServer{}}
	rt := &rtfake.Runtime{}
	defer rt.Close()
	a, err := agent.New(agent.Options{
		Config: cfg, Server: srv, Detector: det, Runtime: rt, Key: key,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Version: "bench",
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			b.Errorf("Run: %v", err)
		}
	}()
	for { // until the agent has published its offer and settled
		if _, offers, _ := srv.counts(); offers > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	goruntime.GC()

	b.ResetTimer()
	cpu0, wall0 := cpuTime(b), time.Now()
	time.Sleep(window)
	cpu, wall := cpuTime(b)-cpu0, time.Since(wall0)
	b.StopTimer()

	rss, peak := procStatusMB(b, "VmRSS"), procStatusMB(b, "VmHWM")
	cpuPct := 100 * cpu.Seconds() / wall.Seconds()
	_, _, beats := srv.counts()
	b.ReportMetric(rss, "RSS-MB")
	b.ReportMetric(peak, "peakRSS-MB")
	b.ReportMetric(cpuPct, "%CPU")
	b.ReportMetric(float64(beats), "heartbeats")
	b.Logf("idle agent, 8 GPUs, %v: RSS %.1f MB (peak %.1f), CPU %v = %.3f%% of one core, %d heartbeats",
		wall.Round(time.Second), rss, peak, cpu.Round(time.Millisecond), cpuPct, beats)
	if rss > targetRSSMB || cpuPct > targetCPUPct {
		b.Errorf("over the target of %d MB and %.0f%% of a core", targetRSSMB, targetCPUPct)
	}
}

// cpuTime is the user and system CPU time the process has used.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procStatusMB reads a "kB" field of /proc/self/status, in MB.
func procStatusMB(tb testing.TB, field string) float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		name, rest, ok := strings.Cut(s.Text(), ":")
		if !ok || name != field {
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
		if err != nil {
			tb.Fatal(err)
		}
		return kb / 1024
	}
	tb.Fatalf("no %s in /proc/self/status", field)
	return 0
}
