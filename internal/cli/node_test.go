package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/idlegrid/idlegrid"
)

// TestNode_lsByState: node ls --state keeps the nodes in those states; a
// node whose agent said goodbye is listed offline, and online again once
// it beats. A state that is none is refused, naming the ones there are.
func TestNode_lsByState(t *testing.T) {
	m := mustMoneyMarket(t) // one node, "rig", online
	var nodes []*idlegrid.Node
	mustJSON(t, m.provider, &nodes, "node", "ls", "--state", "online")
	if len(nodes) != 1 || nodes[0].Name != "rig" {
		t.Fatalf("node ls --state online = %+v, want rig", nodes)
	}
	if r := run(t, m.provider, "node", "ls", "--state", "offline,lost"); r.code != 0 || r.out != "no node matches --state offline,lost\n" {
		t.Errorf("node ls --state offline,lost with rig online: %s", r)
	}
	mustOK(t, m.node.Goodbye(context.Background()))
	mustJSON(t, m.admin, &nodes, "node", "ls", "--state", "offline", "--state", "lost")
	if len(nodes) != 1 || nodes[0].Name != "rig" || nodes[0].State != idlegrid.NodeOffline {
		t.Errorf("node ls --state offline --state lost after rig's goodbye = %+v, want rig, offline", nodes)
	}
	if r := run(t, m.provider, "node", "ls", "--state", "offline", "--limit", "1"); r.code != 0 ||
		!strings.Contains(r.out, "more may follow: idlegrid node ls --state offline --limit 1 --after "+nodes[0].ID+"\n") {
		t.Errorf("a full page of node ls --state offline: %s", r)
	}
	_, err := m.node.Heartbeat(context.Background(), idlegrid.HeartbeatRequest{})
	mustOK(t, err)
	mustJSON(t, m.provider, &nodes, "node", "ls", "--state", "offline")
	if len(nodes) != 0 {
		t.Errorf("node ls --state offline once rig beat again = %+v, want none", nodes)
	}
	if r := run(t, m.provider, "node", "ls", "--state", "gone"); r.code != 2 ||
		!strings.Contains(r.err, `--state: unknown node state "gone"; use online, offline, lost or retired`) {
		t.Errorf("node ls --state gone: %s", r)
	}
}

// TestNode_asRenter: a renter lists the nodes on offer and reads one, as
// the market shows them.
func TestNode_asRenter(t *testing.T) {
	_, renter, _, _, _ := moneyMarket(t) // one node, "rig": an RTX4090 in eu-west
	var nodes []*idlegrid.Node
	mustJSON(t, renter, &nodes, "node", "ls", "--limit", "5")
	if len(nodes) != 1 || nodes[0].Name != "rig" || nodes[0].PublicKey == "" {
		t.Fatalf("a renter's node ls = %+v, want rig with its public key", nodes)
	}
	mustJSON(t, renter, &nodes, "node", "ls", "--gpu-model", "H100-80GB,A100-80GB")
	if len(nodes) != 0 {
		t.Errorf("a renter's H100s and A100s = %+v, want none", nodes)
	}
	// A model no node has lists none, and says which models there are:
	// a model is named in full (H100-80GB), and H100 matches none.
	if r := run(t, renter, "node", "ls", "--gpu-model", "H100"); r.code != 0 ||
		r.out != "no node matches --gpu-model H100\nthe GPU models in the market now: RTX4090 (named in full, e.g. --gpu-model RTX4090)\n" {
		t.Errorf("node ls --gpu-model H100: %s", r)
	}
	// One misnamed but for case, or named in part, is said as the one meant.
	if r := run(t, renter, "node", "ls", "--gpu-model", "4090"); r.code != 0 ||
		r.out != "no node matches --gpu-model 4090\nthe GPU models in the market now: RTX4090 (named in full, e.g. --gpu-model RTX4090); did you mean --gpu-model RTX4090?\n" {
		t.Errorf("node ls --gpu-model 4090: %s", r)
	}
	if r := run(t, renter, "node", "ls", "--region", "eu"); r.code != 0 ||
		r.out != "no node matches --region eu\nthe regions in the market now: eu-west; did you mean --region eu-west?\n" {
		t.Errorf("node ls --region eu: %s", r)
	}
	// Both named right, but no node has both: no list to read.
	if r := run(t, renter, "node", "ls", "--gpu-model", "RTX4090", "--min-gpus", "2"); r.code != 0 || r.out != "no node matches --gpu-model RTX4090 --min-gpus 2\n" {
		t.Errorf("node ls --gpu-model RTX4090 --min-gpus 2: %s", r)
	}
	// rig is a newcomer: a search of the nodes a job at trust level 1
	// may run on finds none.
	if r := run(t, renter, "node", "ls", "--min-level", "1"); r.code != 0 || r.out != "no node matches --min-level 1\n" {
		t.Errorf("node ls --min-level 1: %s", r)
	}
	if r := run(t, renter, "node", "ls", "--min-level", "17"); r.code != 2 || !strings.Contains(r.err, "--min-level: 17 is out of range") {
		t.Errorf("node ls --min-level 17: %s", r)
	}
	mustJSON(t, renter, &nodes, "node", "ls", "--min-level", "0")
	if len(nodes) != 1 {
		t.Errorf("node ls --min-level 0 = %+v, want rig", nodes)
	}
	mustJSON(t, renter, &nodes, "node", "ls", "--gpu-model", "RTX4090", "--region", "us-east,eu-west")
	if len(nodes) != 1 {
		t.Fatalf("a renter's RTX4090s in us-east or eu-west = %+v, want rig", nodes)
	}
	// Pages: a full one ends with the command for the next. Each node
	// shows its trust level, which a job's --min-trust-level names.
	if r := run(t, renter, "node", "ls", "--limit", "1", "--sort", "price"); r.code != 0 ||
		!strings.Contains(r.out, "more may follow: idlegrid node ls --sort price --limit 1 --after "+nodes[0].ID+"\n") ||
		!regexp.MustCompile(`RELIABILITY\s+LEVEL\s+HEARTBEAT\n.*\s\d\.\d\d\s+0\s+\S+\n`).MatchString(r.out) {
		t.Errorf("a full page of node ls: %s", r)
	}
	mustJSON(t, renter, &nodes, "node", "ls", "--after", nodes[0].ID)
	if len(nodes) != 0 {
		t.Errorf("the page after the last node: %+v, want none", nodes)
	}
	if r := run(t, renter, "node", "ls", "--after", "node_missing"); r.code != 2 || !strings.Contains(r.err, "--after: \"node_missing\" is not a node you list") {
		t.Errorf("node ls --after a node that is not there: %s", r)
	}
	if r := run(t, renter, "node", "ls", "--region", "EU-West"); r.code != 2 || !strings.Contains(r.err, `--region: "EU-West" is not a region`) {
		t.Errorf("node ls --region EU-West: %s", r)
	}
	// rig sells silver alone, at $0.40 a GPU-hour, on one 24 GB GPU.
	for _, tc := range []struct {
		flags []string
		want  int
	}{
		{[]string{"--max-price", "0.40", "--sort", "price"}, 1},
		{[]string{"--max-price", "0.39"}, 0},
		{[]string{"--tier", "gold"}, 0},
		{[]string{"--tier", "silver", "--min-vram-mb", "24576", "--min-gpus", "1", "--sort", "reliability"}, 1},
		{[]string{"--min-vram-mb", "24577"}, 0},
		{[]string{"--min-gpus", "2"}, 0},
	} {
		mustJSON(t, renter, &nodes, append([]string{"node", "ls"}, tc.flags...)...)
		if len(nodes) != tc.want {
			t.Errorf("node ls %v: %d nodes, want %d", tc.flags, len(nodes), tc.want)
		}
	}
	for flag, want := range map[string]string{"--sort=cheap": "give oldest, price or reliability", "--tier=platinum": "give gold, silver or bronze",
		"--max-price=cheap": "a decimal amount such as 2.50", "--min-gpus=-1": "give a number of GPUs",
		"--min-free-gpus=65": "give 1 to 64 GPUs"} {
		if r := run(t, renter, "node", "ls", flag); r.code != 2 || !strings.Contains(r.err, want) {
			t.Errorf("node ls %s: %s; want a usage error saying %q", flag, r, want)
		}
	}
	// rig's one GPU is free now: the market's lease has ended.
	var free []struct {
		Name     string `json:"name"`
		FreeGPUs *int   `json:"free_gpus"`
	}
	eventually(t, "the market to free rig's GPU", func() error { // the scheduler takes the lease's end in on its own goroutine
		mustJSON(t, renter, &free, "node", "ls")
		if len(free) != 1 || free[0].FreeGPUs == nil || *free[0].FreeGPUs != 1 {
			return fmt.Errorf("node ls --json: %+v, want rig with free_gpus 1", free)
		}
		return nil
	})
	if r := run(t, renter, "node", "ls"); !regexp.MustCompile(`(?m)^\S+ +rig +online +1xRTX4090 +1 +eu-west `).MatchString(r.out) {
		t.Errorf("node ls names rig's GPUs and how many are free: %s", r)
	}
	for _, tc := range []struct {
		flags []string
		want  int
	}{
		{[]string{"--min-free-gpus", "1"}, 1},
		{[]string{"--min-free-gpus", "1", "--gpu-model", "RTX4090", "--region", "eu-west", "--tier", "silver"}, 1},
		{[]string{"--min-free-gpus", "2"}, 0},
		{[]string{"--min-free-gpus", "1", "--gpu-model", "H100-80GB"}, 0},
		{[]string{"--min-free-gpus", "1", "--region", "us-east"}, 0},
	} {
		mustJSON(t, renter, &free, append([]string{"node", "ls"}, tc.flags...)...)
		if len(free) != tc.want {
			t.Errorf("node ls %v: %+v, want %d nodes", tc.flags, free, tc.want)
		}
	}
	mustJSON(t, renter, &nodes, "node", "ls")
	r := run(t, renter, "node", "get", nodes[0].ID)
	if r.code != 0 || !strings.Contains(r.out, "rig") || !strings.Contains(r.out, "1xRTX4090") || !strings.Contains(r.out, "eu-west") {
		t.Errorf("a renter's node get: %s", r)
	}
	var jobs []*idlegrid.Job
	mustJSON(t, renter, &jobs, "job", "ls")
	if len(jobs) != 1 {
		t.Fatalf("the renter's jobs = %+v, want the one placed on rig", jobs)
	}
	r = run(t, renter, "job", "leases", jobs[0].ID)
	if r.code != 0 || !regexp.MustCompile(`\brig +`+nodes[0].ID+` `).MatchString(r.out) {
		t.Errorf("job leases names its node rig beside its ID %s: %s", nodes[0].ID, r)
	}
}

// TestNodeGet_models: node get names the models a node serves through the
// gateway now, with their prices and concurrency, so that a provider sees
// which of its configured models its agent advertises; a node that serves
// none has no such line.
func TestNodeGet_models(t *testing.T) {
	node := idlegrid.Node{ID: "node_a", State: idlegrid.NodeOnline}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(node)
	}))
	defer ts.Close()
	env := map[string]string{"IDLEGRID_ADDR": ts.URL, "IDLEGRID_KEY": "k"}
	if out := must(t, env, "node", "get", "node_a"); strings.Contains(out, "Models") {
		t.Errorf("node get of a node that serves no model:\n%s", out)
	}
	node.Models = []idlegrid.ModelOffer{
		{Name: "llama-3.1-8b", InputMicrosPerMTokens: 100_000, OutputMicrosPerMTokens: 200_000, MaxConcurrency: 16},
		{Name: "embed", InputMicrosPerMTokens: 20_000, MaxConcurrency: 4, Embeddings: true},
	}
	out := must(t, env, "node", "get", "node_a")
	want := regexp.MustCompile(`(?m)^Models +llama-3\.1-8b \$0\.100000/\$0\.200000 per million tokens in/out, 16 at once; embed \$0\.020000/\$0\.000000 per million tokens in/out, 4 at once, embeddings$`)
	if !want.MatchString(out) {
		t.Errorf("node get printed:\n%s\nwant a line matching %s", out, want)
	}
}
