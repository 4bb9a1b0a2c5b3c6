package cli

import (
	"flag"
	"io"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid/internal/gateway"
)

// TestFirstByteLimits_apply: the first-byte flags reach the gateway's
// config; the longest wait, when not given, is raised to a first-byte
// timeout above it, as the gateway's own default is.
func TestFirstByteLimits_apply(t *testing.T) {
	for _, tc := range []struct {
		args                 []string
		timeout, perK, limit time.Duration
	}{
		{nil, gateway.DefaultFirstByteTimeout, gateway.DefaultFirstBytePerKTokens, gateway.DefaultMaxFirstByteTimeout},
		{[]string{"--inference-first-byte-timeout", "10m"}, 10 * time.Minute, gateway.DefaultFirstBytePerKTokens, 10 * time.Minute},
		{[]string{"--inference-first-byte-timeout", "10s", "--inference-first-byte-per-1k-tokens", "250ms", "--inference-max-first-byte-timeout", "2m"},
			10 * time.Second, 250 * time.Millisecond, 2 * time.Minute},
		{[]string{"--inference-first-byte-timeout", "45s", "--inference-max-first-byte-timeout", "45s"}, 45 * time.Second, gateway.DefaultFirstBytePerKTokens, 45 * time.Second}, // no allowance by prompt
	} {
		fs := &flagSet{FlagSet: flag.NewFlagSet("server", flag.ContinueOnError)}
		fs.SetOutput(io.Discard)
		l := firstByteFlags(fs)
		if err := fs.FlagSet.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		if err := l.check(fs); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		var c gateway.Config
		l.apply(&c)
		if c.FirstByteTimeout != tc.timeout || c.FirstBytePerKTokens != tc.perK || c.MaxFirstByteTimeout != tc.limit {
			t.Errorf("%v: first byte %s + %s per 1k tokens, at most %s; want %s + %s, at most %s", tc.args,
				c.FirstByteTimeout, c.FirstBytePerKTokens, c.MaxFirstByteTimeout, tc.timeout, tc.perK, tc.limit)
		}
	}
}

// TestServerCommand_badLockAndFirstByteFlags: a duration out of range,
// a negative one among them, is a usage error naming its flag.
func TestServerCommand_badLockAndFirstByteFlags(t *testing.T) { // and the auth-failure flags
	for _, tt := range []struct {
		name string
		args []string
		want string // the first line of stderr
	}{
		{"NegativeFirstByte", []string{"--inference-first-byte-timeout", "-1s"}, "idlegrid: --inference-first-byte-timeout must be between 1s and 1h, got -1s"},
		{"ZeroFirstByte", []string{"--inference-first-byte-timeout", "0"}, "idlegrid: --inference-first-byte-timeout must be between 1s and 1h, got 0s"},
		{"NegativePerK", []string{"--inference-first-byte-per-1k-tokens", "-5ms"}, "idlegrid: --inference-first-byte-per-1k-tokens must be between 1ms and 1m, got -5ms"},
		{"NegativeMax", []string{"--inference-max-first-byte-timeout", "-1m"}, "idlegrid: --inference-max-first-byte-timeout must be between --inference-first-byte-timeout (30s) and 1h, got -1m0s"},
		{"MaxUnderFirstByte", []string{"--inference-first-byte-timeout", "2m", "--inference-max-first-byte-timeout", "1m"}, "idlegrid: --inference-max-first-byte-timeout must be between --inference-first-byte-timeout (2m0s) and 1h, got 1m0s"},
		{"NegativeLockGrace", []string{"--market-lock-grace", "-30s"}, "idlegrid: --market-lock-grace must be between 20s (two checks of the lock) and 1h, got -30s"},
		{"ShortLockGrace", []string{"--market-lock-grace", "5s"}, "idlegrid: --market-lock-grace must be between 20s (two checks of the lock) and 1h, got 5s"},
		{"NegativeAuthFailures", []string{"--auth-failures-per-minute", "-1"}, "idlegrid: --auth-failures-per-minute must be between 0 (no limit) and 1000000, got -1"},
		{"ZeroAuthBurst", []string{"--auth-failure-burst", "0"}, "idlegrid: --auth-failure-burst must be between 1 and 1000000, got 0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, nil, append([]string{"server"}, tt.args...)...)
			if got := firstLines(r.err, 1); r.code != 2 || got != tt.want {
				t.Fatalf("got exit %d, stderr %q\nwant exit 2, stderr %q", r.code, got, tt.want)
			}
		})
	}
}

// authFailureRate: 0 given on the command line means no limit, which the
// API spells as a negative rate; a config that sets neither takes the
// API's defaults.
func TestAuthFailureRate(t *testing.T) {
	for _, tt := range []struct {
		perMinute float64
		burst     int
		want      float64
	}{{6, 30, 6}, {0, 30, -1}, {0, 0, 0}, {-1, 0, -1}} {
		if got := authFailureRate(tt.perMinute, tt.burst); got != tt.want {
			t.Errorf("authFailureRate(%g, %d) = %g, want %g", tt.perMinute, tt.burst, got, tt.want)
		}
	}
}
