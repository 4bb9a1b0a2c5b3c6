package cli

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid/internal/gateway"
)

func TestInferenceLimits_apply(t *testing.T) {
	for _, tc := range []struct {
		args               []string
		timeout            time.Duration
		queue              int
		rps                float64
		burst, concurrency int
	}{
		{nil, gateway.DefaultQueueTimeout, gateway.DefaultMaxQueue, 0, 0, 0},
		{[]string{"--inference-queue-timeout", "0"}, -1, gateway.DefaultMaxQueue, 0, 0, 0}, // refused at once
		{[]string{"--inference-queue-timeout", "2s", "--inference-max-queue", "50"}, 2 * time.Second, 50, 0, 0, 0},
		{[]string{"--inference-key-rps", "2.5", "--inference-key-concurrency", "4"}, gateway.DefaultQueueTimeout, gateway.DefaultMaxQueue, 2.5, 3, 4},
		{[]string{"--inference-key-rps", "2.5", "--inference-key-burst", "10"}, gateway.DefaultQueueTimeout, gateway.DefaultMaxQueue, 2.5, 10, 0},
	} {
		fs := &flagSet{FlagSet: flag.NewFlagSet("server", flag.ContinueOnError)}
		fs.SetOutput(io.Discard)
		l := inferenceFlags(fs)
		if err := fs.FlagSet.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		if err := l.check(); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		var c gateway.Config
		l.apply(&c)
		if c.QueueTimeout != tc.timeout || c.MaxQueue != tc.queue || c.KeyRequestsPerSecond != tc.rps || c.KeyBurst != tc.burst || c.KeyConcurrency != tc.concurrency {
			t.Errorf("%v: queue %s/%d, key %g/s burst %d concurrency %d; want %s/%d, %g/s burst %d concurrency %d", tc.args,
				c.QueueTimeout, c.MaxQueue, c.KeyRequestsPerSecond, c.KeyBurst, c.KeyConcurrency, tc.timeout, tc.queue, tc.rps, tc.burst, tc.concurrency)
		}
	}
}

func TestInferenceLimits_responseRetention(t *testing.T) {
	for args, want := range map[string]time.Duration{
		"":                          gateway.DefaultResponseRetention,
		"--response-retention=72h":  72 * time.Hour,
		"--response-retention=30s":  0,
		"--response-retention=-24h": 0,
	} {
		fs := &flagSet{FlagSet: flag.NewFlagSet("server", flag.ContinueOnError)}
		fs.SetOutput(io.Discard)
		l := inferenceFlags(fs)
		if err := fs.FlagSet.Parse(strings.Fields(args)); err != nil {
			t.Fatal(err)
		}
		err := l.check()
		if want == 0 {
			if err == nil || !strings.Contains(err.Error(), "--response-retention") {
				t.Errorf("%s: %v; want an error naming the flag", args, err)
			}
			continue
		}
		var c gateway.Config
		l.apply(&c)
		if err != nil || c.ResponseRetention != want {
			t.Errorf("%s: %v, retention %s; want %s", args, err, c.ResponseRetention, want)
		}
	}
}
