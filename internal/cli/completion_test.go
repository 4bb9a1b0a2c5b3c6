package cli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/httpapi/wire"
)

// complete returns what "idlegrid __complete words…" offers.
func complete(t *testing.T, words ...string) []string {
	t.Helper()
	r := run(t, nil, append([]string{completeWord}, words...)...)
	if r.code != 0 || r.err != "" {
		t.Fatalf("__complete %q: %s\nwant exit 0 and no stderr", words, r)
	}
	return strings.Fields(r.out)
}

// TestComplete: the words offered for what is being typed (the last word,
// maybe empty): commands, a group's subcommands, a command's subwords,
// flags and the first argument's choices, a flag's values; none where
// nothing is known, and no command run to learn them (a server would
// not return).
func TestComplete(t *testing.T) {
	jobCommands := []string{"submit", "ls", "get", "cancel", "watch", "explain", "leases", "logs"}
	for _, c := range []struct {
		words []string
		want  []string
	}{
		{[]string{"jo"}, []string{"job"}},
		{[]string{"job", ""}, jobCommands},
		{[]string{"job", "l"}, []string{"ls", "leases", "logs"}},
		{[]string{"help", "jo"}, []string{"job"}},
		{[]string{"--addr", "http://127.0.0.1:1", "job", "lo"}, []string{"logs"}},
		{[]string{"--key=k", "jo"}, []string{"job"}},
		{[]string{"--a"}, []string{"--addr"}},
		{[]string{"job", "logs", "job_1", "--t"}, []string{"--tail", "--timestamps"}},
		{[]string{"job", "logs", "--tail", "5", "--n"}, []string{"--node"}},
		{[]string{"job", "submit", "--tier", ""}, []string{"gold", "silver", "bronze"}},
		{[]string{"job", "submit", "--tier", "s"}, []string{"silver"}},
		{[]string{"job", "submit", "--tier", "=", "b"}, []string{"bronze"}}, // bash splits --tier=b at the "="
		{[]string{"job", "submit", "--tier=g"}, []string{"--tier=gold"}},
		{[]string{"job", "submit", "--kind", "fi"}, []string{"fine-tuning"}},
		{[]string{"job", "submit", "--json", ""}, nil}, // a boolean flag takes no value
		{[]string{"job", "submit", "--image", ""}, nil},
		{[]string{"job", "submit", "--", "python", "--t"}, nil}, // the workload's own arguments
		{[]string{"account", "create", "--role", ""}, []string{"renter", "provider", "admin"}},
		{[]string{"job", "ls", "--state", ""}, []string{"queued", "running", "succeeded", "failed", "cancelled"}},
		{[]string{"job", "ls", "--state", "queued,r"}, []string{"queued,running"}}, // a list
		{[]string{"job", "ls", "--state=queued,s"}, []string{"--state=queued,succeeded"}},
		{[]string{"job", "ls", "--state=queued,running,"}, []string{"--state=queued,running,succeeded", "--state=queued,running,failed", "--state=queued,running,cancelled"}},
		{[]string{"lease", "ls", "--state", "p"}, []string{"preempted"}},
		{[]string{"node", "ls", "--sort", ""}, []string{"oldest", "price", "reliability"}},
		{[]string{"node", "challenges", "node_1", "--state", "e"}, []string{"expired"}},
		{[]string{"dispute", "ls", "--state", "open,"}, []string{"open,upheld", "open,dismissed"}}, // not open again
		{[]string{"payout", "ls", "--state", "s"}, []string{"settled"}},
		{[]string{"key", "routing", "key_1", "--sort", ""}, []string{"price", "latency", "throughput", "none"}},
		{[]string{"key", "routing", "key_1", "--sticky", "f"}, []string{"false"}},
		{[]string{"dispute", "open", "--offence", "f"}, []string{"forged_receipt", "fake_hardware"}},
		{[]string{"server", "--log-level", "w"}, []string{"warn"}},
		{[]string{"sim", "--align", "m"}, []string{"median"}},
		{[]string{"audit", "verify", "--state", ""}, nil}, // a file there
		{[]string{"agent", ""}, []string{"init", "gpu-probe", "net-probe", "hand-over"}},
		{[]string{"agent", "init", "--reg"}, []string{"--region"}},
		{[]string{"agent", "--run"}, []string{"--runtime"}},
		{[]string{"agent", "--runtime", ""}, []string{"docker", "fake"}},
		{[]string{"sim", "c"}, []string{"cheaters"}},
		{[]string{"completion", ""}, []string{"bash", "fish", "zsh"}},
		{[]string{"server", "--db", ""}, nil},
		{[]string{"server", "--db", "x.db", "--listen", "127.0.0.1:0", ""}, nil},
		{[]string{"dev", ""}, nil},
		{[]string{"nosuch", ""}, nil},
		{[]string{"job", "nosuch", ""}, nil},
	} {
		if got := complete(t, c.words...); !slices.Equal(got, c.want) {
			t.Errorf("__complete %q = %q, want %q", c.words, got, c.want)
		}
	}

	all := complete(t, "")
	for _, want := range []string{"dev", "job", "completion", "version", "help"} {
		if !slices.Contains(all, want) {
			t.Errorf("__complete \"\" = %q, want %q among them", all, want)
		}
	}
	if slices.Contains(all, completeWord) {
		t.Errorf("__complete \"\" offers itself: %q", all)
	}
	flags := complete(t, "job", "submit", "-")
	for _, want := range []string{"--help", "--max-price", "--gpus", "--addr", "--key", "--json"} {
		if !slices.Contains(flags, want) {
			t.Errorf("__complete job submit - = %q, want %q among them", flags, want)
		}
	}
}

// TestComplete_everyCommand: every command line is reached word by word,
// and offers its own flags.
func TestComplete_everyCommand(t *testing.T) {
	for _, cmd := range everyCommand {
		if slices.ContainsFunc(hiddenCommands, func(h []string) bool { return slices.Equal(h, cmd) }) {
			continue
		}
		for i, w := range cmd {
			if got := complete(t, append(slices.Clone(cmd[:i]), w[:1])...); !slices.Contains(got, w) {
				t.Errorf("__complete %q = %q, want %q among them", append(slices.Clone(cmd[:i]), w[:1]), got, w)
			}
		}
		if got := complete(t, append(slices.Clone(cmd), "--he")...); !slices.Contains(got, "--help") {
			t.Errorf("__complete %q = %q, want --help among them", append(slices.Clone(cmd), "--he"), got)
		}
	}
}

// TestCompletion_scripts: a script for each shell, each calling back with
// the hidden word; any other shell is the command line's mistake.
func TestCompletion_scripts(t *testing.T) {
	for _, sh := range []string{"bash", "zsh", "fish"} {
		r := run(t, nil, "completion", sh)
		if r.code != 0 || !strings.Contains(r.out, " "+completeWord+" ") || !strings.Contains(r.out, "idlegrid") {
			t.Errorf("completion %s: %s", sh, r)
		}
	}
	if r := run(t, nil, "completion", "tcsh"); r.code != 2 || !strings.Contains(r.err, `unknown shell "tcsh"; idlegrid completes in bash, zsh and fish`) {
		t.Errorf("completion tcsh: %s\nwant exit 2 naming the shells", r)
	}
}

// listingServer is a server that lists two jobs, a lease, two nodes, a
// dispute, a payout, two API keys (one revoked), a join token, an account,
// two registry logins and the market of two GPU models in two regions to
// the key "k", and refuses any other.
func listingServer(t *testing.T) *httptest.Server {
	revoked := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("Authorization") != "Bearer k" {
			w.WriteHeader(http.StatusUnauthorized)
			json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": "unauthorized", "message": "invalid API key"}})
			return
		}
		switch r.URL.Path {
		case "/v1/jobs":
			json.NewEncoder(w).Encode(wire.Jobs{Jobs: []*idlegrid.Job{{ID: "job_2"}, {ID: "job_1"}}})
		case "/v1/leases":
			json.NewEncoder(w).Encode(wire.Leases{Leases: []*idlegrid.Lease{{ID: "lease_1"}}})
		case "/v1/market":
			json.NewEncoder(w).Encode([]wire.MarketStat{{GPUModel: "H100-80GB", Region: "eu-west"}, {GPUModel: "A100-80GB", Region: "eu-west"}, {GPUModel: "H100-80GB", Region: "us-east"}})
		case "/v1/disputes":
			json.NewEncoder(w).Encode(wire.Disputes{Disputes: []*idlegrid.Dispute{{ID: "dispute_1"}}})
		case "/v1/payouts":
			json.NewEncoder(w).Encode(wire.Payouts{Payouts: []*idlegrid.Payout{{ID: "payout_1"}}})
		case "/v1/keys":
			json.NewEncoder(w).Encode(wire.APIKeys{APIKeys: []*idlegrid.APIKey{{ID: "key_2"}, {ID: "key_1", RevokedAt: &revoked}}})
		case "/v1/join-tokens":
			json.NewEncoder(w).Encode(wire.JoinTokens{JoinTokens: []*idlegrid.JoinToken{{ID: "jtok_1"}}})
		case "/v1/accounts":
			json.NewEncoder(w).Encode(wire.Accounts{Accounts: []*idlegrid.Account{{ID: "acct_1"}}})
		case "/v1/registry-logins":
			json.NewEncoder(w).Encode(wire.RegistryLogins{Logins: []*idlegrid.RegistryLogin{{Registry: "ghcr.io"}, {Registry: "nvcr.io"}}})
		case "/v1/nodes":
			json.NewEncoder(w).Encode(wire.Nodes{Nodes: []*idlegrid.Node{{ID: "node_1", Offer: idlegrid.Offer{Name: "rig-a"}}, {ID: "node_2", Offer: idlegrid.Offer{Name: "rig-b"}}}})
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(ts.Close)
	return ts
}

// TestComplete_serverWords: a command whose first argument is an ID is
// offered the IDs the caller's key lists (a node's name too), and so are
// --node and --from, and --gpu-model and --region the market's models and
// regions, by the address and key in the environment or on the command
// line; none once the argument is given, nor without a key, nor with one
// refused.
func TestComplete_serverWords(t *testing.T) {
	ts := listingServer(t)
	vars := map[string]string{"IDLEGRID_ADDR": ts.URL, "IDLEGRID_KEY": "k"}
	completeAs := func(vars map[string]string, words ...string) []string {
		t.Helper()
		r := run(t, vars, append([]string{completeWord}, words...)...)
		if r.code != 0 || r.err != "" {
			t.Fatalf("__complete %q: %s\nwant exit 0 and no stderr", words, r)
		}
		return strings.Fields(r.out)
	}
	for _, c := range []struct {
		vars  map[string]string
		words []string
		want  []string
	}{
		{vars, []string{"job", "logs", ""}, []string{"job_2", "job_1"}},
		{vars, []string{"job", "logs", "--tail", "5", "-f", "job_1"}, []string{"job_1"}},
		{vars, []string{"job", "cancel", ""}, []string{"job_2", "job_1"}},
		{vars, []string{"lease", "receipts", ""}, []string{"lease_1"}},
		{vars, []string{"dispute", "uphold", ""}, []string{"dispute_1"}},
		{vars, []string{"payout", "settle", ""}, []string{"payout_1"}},
		{vars, []string{"key", "revoke", ""}, []string{"key_2"}}, // not the revoked key_1
		{vars, []string{"key", "limit", "key_2", ""}, nil},       // then an amount
		{vars, []string{"token", "revoke", ""}, []string{"jtok_1"}},
		{vars, []string{"account", "show", ""}, []string{"acct_1"}},
		{vars, []string{"registry", "logout", "n"}, []string{"nvcr.io"}},
		{vars, []string{"node", "quarantine", "lift", ""}, []string{"rig-a", "node_1", "rig-b", "node_2"}},
		{vars, []string{"node", "get", "rig"}, []string{"rig-a", "rig-b"}},
		{vars, []string{"node", "drain", "--wait", ""}, []string{"rig-a", "node_1", "rig-b", "node_2"}},
		{vars, []string{"job", "logs", "job_1", "--node", ""}, []string{"node_1", "node_2"}},
		{vars, []string{"lease", "ls", "--node=node_2"}, []string{"--node=node_2"}},
		{vars, []string{"job", "submit", "--from", ""}, []string{"job_2", "job_1"}},
		{vars, []string{"job", "submit", "--gpu-model", ""}, []string{"H100-80GB", "A100-80GB"}},
		{vars, []string{"node", "ls", "--gpu-model", "H100-80GB,A"}, []string{"H100-80GB,A100-80GB"}},
		{vars, []string{"agent", "init", "--region", ""}, []string{"eu-west", "us-east"}},
		{vars, []string{"job", "logs", "job_1", ""}, nil}, // it has its ID
		{vars, []string{"job", "ls", ""}, nil},            // it takes none
		{vars, []string{"completion", ""}, []string{"bash", "fish", "zsh"}},
		{nil, []string{"job", "logs", ""}, nil},
		{nil, []string{"--addr", ts.URL, "--key", "k", "job", "logs", ""}, []string{"job_2", "job_1"}},
		{nil, []string{"job", "logs", "--addr", ts.URL, "--key=k", ""}, []string{"job_2", "job_1"}},
		{map[string]string{"IDLEGRID_ADDR": ts.URL, "IDLEGRID_KEY": "wrong"}, []string{"job", "logs", ""}, nil},
		{vars, []string{"--addr", ""}, nil},
	} {
		if got := completeAs(c.vars, c.words...); !slices.Equal(got, c.want) {
			t.Errorf("__complete %q (%v) = %q, want %q", c.words, c.vars, got, c.want)
		}
	}
}

// TestComplete_valuesNameRealFlags: each command and flag that
// commandFlagValues and flagServerWords give values for exists.
func TestComplete_valuesNameRealFlags(t *testing.T) {
	e := &env{getenv: func(string) string { return "" }}
	for path, flags := range commandFlagValues {
		_, fs := e.probe(t.Context(), strings.Fields(path))
		if fs == nil {
			t.Errorf("commandFlagValues names %q, no command", path)
			continue
		}
		for name := range flags {
			if fs.Lookup(name) == nil {
				t.Errorf("commandFlagValues names --%s of %q, which has no such flag", name, path)
			}
		}
	}
	for cmd, name := range map[string]string{"job logs": "node", "lease ls": "node", "dispute open": "node", "job submit": "from", "node ls": "gpu-model", "agent init": "region"} {
		if _, fs := e.probe(t.Context(), strings.Fields(cmd)); fs == nil || fs.Lookup(name) == nil || flagServerWords[name] == "" {
			t.Errorf("%q has no --%s for flagServerWords to complete", cmd, name)
		}
	}
}
