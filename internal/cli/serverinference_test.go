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

// The bounds on what a renter's conversations hold: the gateway's
// defaults unless set, 0 for none (the gateway's negative), and a
// negative flag refused naming it.
func TestInferenceLimits_conversationQuota(t *testing.T) {
	for _, tc := range []struct {
		args         string
		items, chars int64 // as the gateway reads them; 0: refused
		flag         string
	}{
		{"", gateway.DefaultConversationItems, gateway.DefaultConversationChars, ""},
		{"--inference-conversation-items=500 --inference-conversation-chars=9000", 500, 9000, ""},
		{"--inference-conversation-items=0 --inference-conversation-chars=0", -1, -1, ""},
		{"--inference-conversation-items=-1", 0, 0, "--inference-conversation-items"},
		{"--inference-conversation-chars=-5", 0, 0, "--inference-conversation-chars"},
	} {
		fs := &flagSet{FlagSet: flag.NewFlagSet("server", flag.ContinueOnError)}
		fs.SetOutput(io.Discard)
		l := inferenceFlags(fs)
		if err := fs.FlagSet.Parse(strings.Fields(tc.args)); err != nil {
			t.Fatal(err)
		}
		err := l.check()
		if tc.flag != "" {
			if err == nil || !strings.Contains(err.Error(), tc.flag) {
				t.Errorf("%s: %v; want an error naming %s", tc.args, err, tc.flag)
			}
			continue
		}
		var c gateway.Config
		l.apply(&c)
		if err != nil || c.ConversationItems != tc.items || c.ConversationChars != tc.chars {
			t.Errorf("%s: %v, %d items and %d characters; want %d and %d", tc.args, err, c.ConversationItems, c.ConversationChars, tc.items, tc.chars)
		}
	}
}
