package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
	"github.com/idlegrid/idlegrid/internal/httpapi/wire"
)

// TestJobSubmit_stuckNote: a job no node would take as the market stands
// is accepted with a note that says why; one a node would take is not.
func TestJobSubmit_stuckNote(t *testing.T) {
	_, renter, _, _, _ := moneyMarket(t) // one RTX4090 node, asking $0.40 for silver
	submit := func(args ...string) result {
		t.Helper()
		r := run(t, renter, append([]string{"job", "submit", "--image", "python:3.12", "--duration", "1m"}, args...)...)
		if r.code != 0 || !strings.Contains(r.out, "job_") {
			t.Fatalf("job submit %v: %s", args, r)
		}
		return r
	}
	r := submit("--gpu-model", "H200", "--max-price", "5")
	if !strings.Contains(r.out, "note: as the market stands no node will take it: no online node meets its hardware and rules") ||
		!strings.Contains(r.out, "idlegrid job explain job_") {
		t.Errorf("a job for a model no node has:\n%s", r.out)
	}
	r = submit("--gpu-model", "RTX4090", "--max-price", "0.10")
	if !strings.Contains(r.out, "no node will take it: every node that meets its hardware and rules asks more than the cap") {
		t.Errorf("a job capped under every ask:\n%s", r.out)
	}
	// Explain names the node whose ask it would need to beat.
	capped := regexp.MustCompile(`job_[a-z0-9]+`).FindString(r.out)
	if x := run(t, renter, "job", "explain", capped); x.code != 0 || !regexp.MustCompile(`(?m)^rig +node_[a-z0-9]+ +eu-west +RTX4090 +\$0\.400000 `).MatchString(x.out) {
		t.Errorf("job explain of the capped job: %s", x)
	}
	if r = submit("--gpu-model", "RTX4090", "--max-price", "5"); strings.Contains(r.out, "note:") {
		t.Errorf("a job the node would take:\n%s", r.out)
	}
	if r = submit("--gpu-model", "H200", "--max-price", "5", "--json"); strings.Contains(r.out, "note:") {
		t.Errorf("job submit --json printed a note into its JSON:\n%s", r.out)
	}
	// With --wait the watch says why it waits, so the note is not said twice.
	r = run(t, renter, "job", "submit", "--image", "python:3.12", "--duration", "1m", "--gpu-model", "H200", "--max-price", "5",
		"--wait", "--every", "500ms", "--timeout", "1500ms")
	if r.code != 1 || strings.Contains(r.out, "note: as the market stands") || !strings.Contains(r.out, "waits: ") {
		t.Errorf("job submit --wait of a job no node would take: %s", r)
	}
}

// TestJobSubmit_moneyNote: a job nodes would take but whose renter cannot
// pay its escrow hold, for want of funds or under a key's spend limit, is
// accepted with a note that says it waits for money and what would let it
// start, rather than in silence until 'job get' shows the reason.
func TestJobSubmit_moneyNote(t *testing.T) {
	_, renter, _, _, _ := moneyMarket(t) // $10 topped up; one RTX4090 node, asking $0.40 for silver
	r := run(t, renter, "job", "submit", "--image", "python:3.12", "--gpu-model", "RTX4090", "--max-price", "5", "--duration", "720h")
	if r.code != 0 || !strings.Contains(r.out, "note: waiting for funds: ") || !strings.Contains(r.out, "idlegrid account topup ") {
		t.Errorf("a job whose hold is over the balance: %s", r)
	}
	var k createdKey
	mustJSON(t, renter, &k, "key", "create", "--name", "ci", "--spend-limit", "0.01")
	limited := map[string]string{"IDLEGRID_ADDR": renter["IDLEGRID_ADDR"], "IDLEGRID_KEY": k.Secret}
	r = run(t, limited, "job", "submit", "--image", "python:3.12", "--gpu-model", "RTX4090", "--max-price", "5", "--duration", "1h")
	if r.code != 0 || !strings.Contains(r.out, "note: waiting: spend limit of API key "+k.Key.ID) ||
		!strings.Contains(r.out, "idlegrid key limit "+k.Key.ID) {
		t.Errorf("a job whose hold is over its key's spend limit: %s", r)
	}
}

func TestStuckNote(t *testing.T) {
	never := "unknown: no online node meets its hardware and rules; relax those that rule out the most nodes"
	for _, tc := range []struct {
		name string
		x    wire.Explanation
		want string
	}{
		{"no node matches", wire.Explanation{EstimateNote: never}, never[len("unknown: "):]},
		{"a node fits now", wire.Explanation{Fits: 1, EstimateNote: never}, ""},
		{"a start is estimated", wire.Explanation{EstimatedStart: time.Unix(1, 0), EstimateNote: "when a lease ends"}, ""},
		{"a reservation is held", wire.Explanation{Reservation: &wire.Reservation{}, EstimateNote: never}, ""},
	} {
		if got := stuckNote(&tc.x); got != tc.want {
			t.Errorf("%s: note = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestJobSubmit_specFlags: every field of a job spec can be given as a
// flag, reaches the server, and job get shows it; --from starts from an
// earlier job's spec; a flag's bad value is refused naming the flag, and a
// deadline the run cannot fit before is refused naming job.deadline.
func TestJobSubmit_specFlags(t *testing.T) {
	_, renter, _, _, _ := moneyMarket(t)
	r := run(t, renter, "job", "submit", "--image", "python:3.12", "--duration", "1h", "--max-price", "5", "--json",
		"--deadline", "6h", "--cpu-cores", "4", "--ram-mb", "8000", "--reliability-weight", "2",
		"--dataset", "imagenet:150", "--dataset", "c4:0", "--verifiable", "--avoid-provider", "acct_x,acct_y", "--min-trust-level", "1")
	if r.code != 0 {
		t.Fatalf("job submit: %s", r)
	}
	var job idlegrid.Job
	mustOK(t, json.Unmarshal([]byte(r.out), &job))
	if job.Deadline == nil || time.Until(*job.Deadline) < 5*time.Hour || time.Until(*job.Deadline) > 6*time.Hour {
		t.Errorf("deadline = %v, want about 6 h from now", job.Deadline)
	}
	want := idlegrid.JobSpec{CPUCores: 4, RAMMB: 8000, ReliabilityWeight: 2, Verifiable: true,
		Datasets: []idlegrid.Dataset{{Name: "imagenet", SizeGB: 150}, {Name: "c4"}}, AvoidProviders: []string{"acct_x", "acct_y"}, MinTrustLevel: 1}
	got := idlegrid.JobSpec{CPUCores: job.CPUCores, RAMMB: job.RAMMB, ReliabilityWeight: job.ReliabilityWeight,
		Verifiable: job.Verifiable, Datasets: job.Datasets, AvoidProviders: job.AvoidProviders, MinTrustLevel: job.MinTrustLevel}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("submitted %+v, want %+v", got, want)
	}
	g := run(t, renter, "job", "get", job.ID)
	for _, line := range []string{"it must start by ", "CPU cores   4", "RAM         8000 MB",
		"imagenet (150 GB), c4 (0 GB)", "Verifiable  yes", "Avoids      acct_x, acct_y", "Rel weight  2: nodes rank by ask ÷ reliability^2",
		"Min trust   level 1, on every node"} {
		if !strings.Contains(g.out, line) {
			t.Errorf("job get lacks %q:\n%s", line, g.out)
		}
	}

	// --from starts from that job's spec; the flags given override it.
	r = run(t, renter, "job", "submit", "--from", job.ID, "--max-price", "6", "--name", "again", "--json")
	if r.code != 0 {
		t.Fatalf("job submit --from: %s", r)
	}
	var again idlegrid.Job
	mustOK(t, json.Unmarshal([]byte(r.out), &again))
	wantSpec := job.JobSpec
	wantSpec.MaxPriceMicrosPerGPUHour, wantSpec.Name = 6*idlegrid.MicrosPerUnit, "again"
	if again.ID == job.ID || !reflect.DeepEqual(again.JobSpec, wantSpec) {
		t.Errorf("job submit --from %s:\n got %+v\nwant %+v", job.ID, again.JobSpec, wantSpec)
	}
	// A bronze job (interruptible) copied to silver is not interruptible.
	r = run(t, renter, "job", "submit", "--from", job.ID, "--tier", "bronze", "--json")
	var bronze idlegrid.Job
	if mustOK(t, json.Unmarshal([]byte(r.out), &bronze)); !bronze.Interruptible {
		t.Fatalf("a bronze job: %+v, want interruptible", bronze.JobSpec)
	}
	r = run(t, renter, "job", "submit", "--from", bronze.ID, "--tier", "silver", "--json")
	var silver idlegrid.Job
	if r.code != 0 || json.Unmarshal([]byte(r.out), &silver) != nil || silver.Tier != idlegrid.TierSilver || silver.Interruptible {
		t.Errorf("job submit --from %s --tier silver: %s; want a silver job, not interruptible", bronze.ID, r)
	}
	if r := run(t, renter, "job", "submit", "--from", job.ID, "-f", "job.yaml"); r.code != 2 || !strings.Contains(r.err, "not both") {
		t.Errorf("job submit with -f and --from: %s", r)
	}
	if r := run(t, renter, "job", "submit", "--from", "job_nosuch"); r.code == 0 || !strings.Contains(r.err, "job_nosuch") {
		t.Errorf("job submit --from a job that is not there: %s", r)
	}

	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--dataset", ":3"}, `invalid value ":3" for flag --dataset`},
		{[]string{"--dataset", "imagenet"}, "want NAME:SIZE_GB"},
		{[]string{"--dataset", "imagenet:big"}, "must be whole gigabytes"},
		{[]string{"--deadline", "tomorrow"}, `invalid value "tomorrow" for flag --deadline`},
		{[]string{"--deadline", "30m"}, "--deadline: leaves less than the job's duration (1h0m0s)"},
		{[]string{"--reliability-weight", "5"}, "--reliability-weight: must be between 0 and 4"},
		{[]string{"--min-trust-level", "-1"}, "--min-trust-level: must be between 0 and 16"},
		{[]string{"--min-trust-level", "9"}, "--min-trust-level: the trust policy's highest level is"},
	} {
		r := run(t, renter, append([]string{"job", "submit", "--image", "python:3.12", "--duration", "1h", "--max-price", "5"}, tt.args...)...)
		if r.code != 2 || !strings.Contains(r.err, tt.want) {
			t.Errorf("job submit %v: %s, want a usage error saying %q", tt.args, r, tt.want)
		}
	}
}

func TestParseDeadline(t *testing.T) {
	now := time.Date(2026, 12, 3, 14, 0, 0, 500, time.UTC)
	for _, tt := range []struct {
		in   string
		want time.Time
	}{
		{"6h", time.Date(2026, 12, 3, 20, 0, 0, 0, time.UTC)},
		{"90m", time.Date(2026, 12, 3, 15, 30, 0, 0, time.UTC)},
		{"2026-12-24T18:00:00Z", time.Date(2026, 12, 24, 18, 0, 0, 0, time.UTC)},
		{"2026-12-24T18:00:00+01:00", time.Date(2026, 12, 24, 17, 0, 0, 0, time.UTC)},
		{"2026-12-24 18:00", time.Date(2026, 12, 24, 18, 0, 0, 0, time.UTC)},
		{"2026-12-24T18:00", time.Date(2026, 12, 24, 18, 0, 0, 0, time.UTC)},
	} {
		got, err := parseDeadline(tt.in, now)
		if err != nil || !got.Equal(tt.want) {
			t.Errorf("parseDeadline(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "-1h", "0s", "tomorrow", "24/12/2026"} {
		if _, err := parseDeadline(bad, now); err == nil {
			t.Errorf("parseDeadline(%q) took it", bad)
		}
	}
}

// TestJobList_pages: a full page of job ls ends with the command for the
// next, which lists the jobs after it; a cursor that is not one of the
// renter's jobs is refused naming --before's field.
func TestJobList_pages(t *testing.T) {
	admin, renter, _, _, _ := moneyMarket(t)
	for range 3 {
		if r := run(t, renter, "job", "submit", "--image", "python:3.12", "--duration", "1m", "--max-price", "0.01"); r.code != 0 {
			t.Fatalf("job submit: %s", r)
		}
	}
	// The test market's clock stands still: the jobs share a creation time,
	// and the list's order among them is by ID (the store's contract test
	// checks the order). The pages must follow that order.
	var all []idlegrid.Job
	mustOK(t, json.Unmarshal([]byte(must(t, renter, "job", "ls", "--json")), &all))
	if len(all) < 3 {
		t.Fatalf("job ls lists %d jobs, want at least the 3 submitted", len(all))
	}
	var ids []string
	for _, j := range all {
		ids = append(ids, j.ID)
	}
	r := run(t, renter, "job", "ls", "--limit", "2")
	next := regexp.MustCompile(`(?m)^more may follow: idlegrid job ls --limit 2 --before (job_\w+)$`).FindStringSubmatch(r.out)
	if r.code != 0 || next == nil || next[1] != ids[1] || !strings.Contains(r.out, ids[0]) || strings.Contains(r.out, ids[2]) {
		t.Fatalf("job ls --limit 2: %s\nwant %s and %s, then the next page's command", r, ids[0], ids[1])
	}
	r = run(t, renter, "job", "ls", "--limit", "2", "--before", next[1], "--json")
	var page []idlegrid.Job
	mustOK(t, json.Unmarshal([]byte(r.out), &page))
	if len(page) == 0 || page[0].ID != ids[2] || slices.ContainsFunc(page, func(j idlegrid.Job) bool { return j.ID == ids[0] || j.ID == ids[1] }) {
		t.Errorf("the next page: %s, want %s first and none of the page before", r.out, ids[2])
	}
	if r := run(t, renter, "job", "ls", "--before", "job_nosuch"); r.code == 0 || !strings.Contains(r.err, "before: no job job_nosuch of yours") {
		t.Errorf("job ls --before a job that is not there: %s", r)
	}
	// Another renter's job is no cursor for this one.
	_, _, other, err := client.New(admin["IDLEGRID_ADDR"], admin["IDLEGRID_KEY"]).CreateAccount(context.Background(), "other", idlegrid.RoleRenter)
	mustOK(t, err)
	if r := run(t, map[string]string{"IDLEGRID_ADDR": admin["IDLEGRID_ADDR"], "IDLEGRID_KEY": other}, "job", "ls", "--before", ids[0]); r.code == 0 || !strings.Contains(r.err, "of yours") {
		t.Errorf("job ls --before another renter's job: %s", r)
	}
}

// TestJobCancel_several: job cancel takes several IDs, cancels those it
// can, says why not for the others, and fails naming them.
func TestJobCancel_several(t *testing.T) {
	_, renter, _, _, _ := moneyMarket(t)
	var ids []string
	for range 2 {
		r := run(t, renter, "job", "submit", "--image", "python:3.12", "--duration", "1m", "--max-price", "0.01", "--json")
		var j idlegrid.Job
		if r.code != 0 || json.Unmarshal([]byte(r.out), &j) != nil {
			t.Fatalf("job submit: %s", r)
		}
		ids = append(ids, j.ID)
	}
	r := run(t, renter, "job", "cancel", ids[0], "job_nosuch", ids[1], "--json")
	var cancelled []idlegrid.Job
	if json.Unmarshal([]byte(r.out), &cancelled) != nil || len(cancelled) != 2 || cancelled[0].ID != ids[0] || cancelled[1].ID != ids[1] ||
		cancelled[0].State != idlegrid.JobCancelled || cancelled[1].State != idlegrid.JobCancelled {
		t.Errorf("job cancel of three, one not there: %s\nwant both real jobs cancelled, as a JSON list", r)
	}
	if r.code != 1 || !strings.Contains(r.err, "idlegrid: job_nosuch: ") || !strings.Contains(r.err, "1 of 3 jobs not cancelled: job_nosuch") {
		t.Errorf("job cancel of three, one not there: %s\nwant exit 1, naming job_nosuch", r)
	}
	if r := run(t, renter, "job", "cancel", ids[0]); r.code != 1 || !strings.Contains(r.err, "already cancelled") {
		t.Errorf("job cancel of a cancelled job: %s", r)
	}
}

// TestJobSubmit_idempotencyKey: the same submission run again under its
// --idempotency-key shows the job the first made and makes no other;
// with another spec the key is refused, naming it.
func TestJobSubmit_idempotencyKey(t *testing.T) {
	_, renter, _, _, _ := moneyMarket(t)
	args := []string{"job", "submit", "--image", "python:3.12", "--duration", "1m", "--max-price", "0.01", "--idempotency-key", "nightly-42"}
	var first idlegrid.Job
	mustJSON(t, renter, &first, args...)
	if first.IdempotencyKey != "nightly-42" {
		t.Fatalf("the job submitted: %+v, want its key", first)
	}
	out := must(t, renter, args...)
	if !strings.Contains(out, "already submitted under idempotency key nightly-42: "+first.ID) {
		t.Errorf("the same submission again printed:\n%s\nwant it to show %s, not submitted again", out, first.ID)
	}
	if out := must(t, renter, "job", "get", first.ID); !regexp.MustCompile(`(?m)^Submitted +under idempotency key nightly-42$`).MatchString(out) {
		t.Errorf("job get printed:\n%s\nwant the key it was submitted under", out)
	}
	var jobs []idlegrid.Job
	mustJSON(t, renter, &jobs, "job", "ls")
	n := 0
	for _, j := range jobs {
		if j.IdempotencyKey == "nightly-42" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("jobs under the key: %d, want 1", n)
	}
	r := run(t, renter, append(args, "--gpus", "2")...)
	if r.code != 1 || !strings.Contains(r.err, `idempotency key "nightly-42" was used for job `+first.ID+", whose spec differs") {
		t.Errorf("the key with another spec: %s", r)
	}
}

// TestSubmitFailed: a submission sent that got no answer names its key,
// to send again safely; one refused, or never sent, does not.
func TestSubmitFailed(t *testing.T) {
	ctx := context.Background()
	lost := fmt.Errorf("no answer from the idlegrid server at http://x in time: %w", context.DeadlineExceeded)
	var hinted *hintError
	if got := submitFailed(ctx, lost, "sub_1"); !errors.As(got, &hinted) || !strings.Contains(hinted.hint, "--idempotency-key sub_1") {
		t.Errorf("an answer lost: %v, want a hint with the key to send again with", got)
	}
	refused := idlegrid.Invalid("job.gpus", "must be between 1 and 16")
	dial := fmt.Errorf("cannot reach http://127.0.0.1:1: %w", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")})
	for _, err := range []error{refused, dial} {
		if got := submitFailed(ctx, err, "sub_1"); got != err {
			t.Errorf("submitFailed(%v) = %v, want it unchanged", err, got)
		}
	}
}

// TestJobCancel_byName: --name cancels one job that matches at once; when
// several match it lists them and cancels none without --yes (off a
// terminal there is no one to ask), and with --yes cancels them all and
// no other.
func TestJobCancel_byName(t *testing.T) {
	_, renter, _, _, _ := moneyMarket(t)
	ids := map[string]string{}
	for _, name := range []string{"w-1", "w-2", "other"} {
		var j idlegrid.Job
		mustJSON(t, renter, &j, "job", "submit", "--name", name, "--image", "python:3.12", "--gpu-model", "H200-141GB",
			"--duration", "1m", "--max-price", "0.01")
		ids[name] = j.ID
	}
	r := run(t, renter, "job", "cancel", "--name", "w")
	if r.code != 2 || r.out != "" {
		t.Fatalf("job cancel --name w: %s\nwant exit 2 and nothing cancelled", r)
	}
	for _, want := range []string{`2 queued or running jobs' names begin with "w":`, ids["w-1"], "w-1", ids["w-2"], "w-2",
		"cancelled nothing: cancel these 2 jobs with --yes (idlegrid job cancel --name w --yes)"} {
		if !strings.Contains(r.err, want) {
			t.Errorf("job cancel --name w printed:\n%s\nwant %q", r.err, want)
		}
	}
	var queued []idlegrid.Job
	mustJSON(t, renter, &queued, "job", "ls", "--state", "queued")
	if len(queued) != 3 {
		t.Errorf("after job cancel --name w without --yes: %d jobs queued, want all 3", len(queued))
	}
	var cancelled []idlegrid.Job
	mustJSON(t, renter, &cancelled, "job", "cancel", "--name", "w", "--yes")
	if got := fmtNames(cancelled); len(cancelled) != 2 || !strings.Contains(got, "w-1") || !strings.Contains(got, "w-2") {
		t.Errorf("job cancel --name w --yes cancelled %s, want w-1 and w-2", got)
	}
	if out := must(t, renter, "job", "cancel", "--name", "oth"); !strings.Contains(out, ids["other"]+": cancelled") {
		t.Errorf("job cancel --name of one job: %q, want it cancelled without asking", out)
	}
	if out := must(t, renter, "job", "cancel", "--help"); !strings.Contains(out, "--yes") || !strings.Contains(out, "only with --yes") {
		t.Errorf("job cancel --help does not say how --name asks:\n%s", out)
	}
}

// TestJobSubmit_modelNote: a job that asks only for GPU models no node in
// the market has is accepted (one may join), with a note naming the
// models there are, and the one meant where a name is the start of one.
func TestJobSubmit_modelNote(t *testing.T) {
	_, renter, _, _, _ := moneyMarket(t) // one node: an RTX4090
	submit := func(models string) string {
		return must(t, renter, "job", "submit", "--image", "python:3.12", "--gpu-model", models, "--duration", "1m", "--max-price", "0.01")
	}
	out := submit("H200")
	if want := "note: no node in the market has a GPU of model H200; the models in it now: RTX4090\n"; !strings.Contains(out, want) ||
		!strings.Contains(out, "it waits until a node with one joins") {
		t.Errorf("job submit --gpu-model H200 printed:\n%s\nwant %q", out, want)
	}
	if out := submit("H200,rtx"); !strings.Contains(out, "no node in the market has a GPU of model H200 or rtx") ||
		!strings.Contains(out, "did you mean --gpu-model RTX4090?") {
		t.Errorf("job submit --gpu-model H200,rtx printed:\n%s", out)
	}
	if out := submit("H200,rtx4090"); strings.Contains(out, "GPU of model") {
		t.Errorf("job submit --gpu-model of a model in the market (in another case) printed a note:\n%s", out)
	}
	// A sweep notes the same, once.
	out = must(t, renter, "job", "submit", "--image", "python:3.12", "--gpu-model", "rtx", "--duration", "1m", "--max-price", "0.01",
		"--sweep", "LR=1,2")
	if strings.Count(out, "did you mean --gpu-model RTX4090?") != 1 {
		t.Errorf("a sweep with --gpu-model rtx printed:\n%s\nwant the model noted once", out)
	}
}

// TestJobSubmit_regionNote: a job that requires a region, or a residency,
// no node in the market has is accepted (a node there may join), with a
// note naming those there are and how to submit it again; a region only
// preferred, or one a node is in, gets none.
func TestJobSubmit_regionNote(t *testing.T) {
	_, renter, _, _, _ := moneyMarket(t) // one node: in eu-west, residency EU
	submit := func(args ...string) string {
		t.Helper()
		out := must(t, renter, append([]string{"job", "submit", "--image", "python:3.12", "--duration", "1m", "--max-price", "0.01"}, args...)...)
		if !strings.Contains(out, "job_") {
			t.Fatalf("job submit %v: not submitted:\n%s", args, out)
		}
		return out
	}
	out := submit("--region", "mars-1")
	if want := "note: no node in the market is in region mars-1; the regions in it now: eu-west\n"; !strings.Contains(out, want) ||
		!regexp.MustCompile(`it waits until a node there joins; to run elsewhere: idlegrid job cancel job_[a-z0-9]+, then submit with --region REGION`).MatchString(out) {
		t.Errorf("job submit --region mars-1 printed:\n%s\nwant %q", out, want)
	}
	if out := submit("--region", "eu"); !strings.Contains(out, "no node in the market is in region eu;") ||
		!strings.Contains(out, "did you mean --region eu-west?") {
		t.Errorf("job submit --region eu printed:\n%s", out)
	}
	for _, args := range [][]string{{"--region", "eu-west"}, {"--region", "mars-1", "--region-preferred"}} {
		if out := submit(args...); strings.Contains(out, "in region") {
			t.Errorf("job submit %v printed a note:\n%s", args, out)
		}
	}
	out = submit("--residency", "XX")
	if want := "note: no node in the market has residency XX; the residencies in it now: EU\n"; !strings.Contains(out, want) ||
		!regexp.MustCompile(`it waits until a node with it joins; to run under another: idlegrid job cancel job_[a-z0-9]+, then submit with --residency RESIDENCY`).MatchString(out) {
		t.Errorf("job submit --residency XX printed:\n%s\nwant %q", out, want)
	}
	if out := submit("--residency", "eu"); strings.Contains(out, "residency") { // matched whatever the case
		t.Errorf("job submit --residency eu printed a note:\n%s", out)
	}
	// A job file's region, preferred there, is no requirement either.
	file := mustFile(t, "job.yaml", "region: mars-1\nregion_preferred: true\n")
	if out := submit("-f", file); strings.Contains(out, "in region") {
		t.Errorf("job submit -f of a preferred region printed a note:\n%s", out)
	}
	if out := submit("--region", "mars-1", "--json"); strings.Contains(out, "note:") {
		t.Errorf("job submit --json printed a note into its JSON:\n%s", out)
	}
}

// TestJobSubmit_fileDeadline: a job file's deadline is written as
// --deadline takes it, a span from now among them; one that is neither a
// time nor a span is named, as the file's field, with both forms.
func TestJobSubmit_fileDeadline(t *testing.T) {
	_, renter, _, _, _ := moneyMarket(t)
	file := mustFile(t, "job.yaml", "image: x/y:1\nmax_price: \"0.01\"\nduration: 1m\ndeadline: 2h\n")
	before := time.Now().Truncate(time.Second)
	var j idlegrid.Job
	mustJSON(t, renter, &j, "job", "submit", "-f", file)
	after := time.Now()
	if j.Deadline == nil || j.Deadline.Before(before.Add(2*time.Hour)) || j.Deadline.After(after.Add(2*time.Hour)) {
		t.Errorf("deadline: 2h submitted between %s and %s gave the deadline %v, want 2h after", before, after, j.Deadline)
	}
	file = mustFile(t, "late.yaml", "image: x/y:1\nmax_price: \"0.01\"\nduration: 1m\ndeadline: by friday\n")
	r := run(t, renter, "job", "submit", "-f", file)
	want := "idlegrid: " + file + ": job.deadline: line 4: must be a time such as 2026-12-24T18:00:00Z (or 2026-12-24 18:00, UTC) or a span from now such as 6h, got \"by friday\"\n" +
		"  fix the job file where named above and try again; 'idlegrid job submit --help' shows a job file's fields\n"
	if r.code != 1 || r.err != want {
		t.Errorf("got %s\nwant exit 1 and stderr %q", r, want)
	}
}

// TestJobSubmit_fileTypeError: a value of the wrong type in a job file is
// named as the file's field, with its line and what it should be.
func TestJobSubmit_fileTypeError(t *testing.T) {
	for _, tt := range []struct{ name, file, want string }{
		{"YAML", "image: x/y:1\ngpus: two\n", `job.gpus: line 2: "two" is text; want a whole number`},
		{"JSON", "{\"image\": \"x/y:1\",\n \"gpus\": \"two\"}", "job.gpus: line 2: must be a whole number, not text"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			file := mustFile(t, "job."+strings.ToLower(tt.name), tt.file)
			r := run(t, map[string]string{"IDLEGRID_KEY": "k"}, "job", "submit", "-f", file, "--max-price", "1", "--duration", "1h")
			want := "idlegrid: " + file + ": " + tt.want + "\n  fix the job file where named above and try again; 'idlegrid job submit --help' shows a job file's fields\n"
			if r.code != 1 || r.err != want {
				t.Errorf("got %s\nwant exit 1 and stderr %q", r, want)
			}
		})
	}
}

// TestCheckFromDeadline: a job run again --from one whose deadline passed
// is told to give a new one, unless --deadline does.
func TestCheckFromDeadline(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	past, future := now.Add(-time.Hour), now.Add(time.Hour)
	for _, tt := range []struct {
		name     string
		from     string
		deadline *time.Time
		set      map[string]bool
		refused  bool
	}{
		{"past, from an earlier job", "job_1", &past, nil, true},
		{"past, with a new --deadline", "job_1", &past, map[string]bool{"deadline": true}, false},
		{"still ahead", "job_1", &future, nil, false},
		{"no deadline", "job_1", nil, nil, false},
		{"not --from", "", &past, nil, false},
	} {
		err := checkFromDeadline(tt.from, &idlegrid.JobSpec{Deadline: tt.deadline}, tt.set, now)
		if (err != nil) != tt.refused {
			t.Errorf("%s: %v, want refused %v", tt.name, err, tt.refused)
		} else if ue := (*usageError)(nil); err != nil && (!errors.As(err, &ue) || !strings.Contains(err.Error(), "has passed: give the new job one with --deadline")) {
			t.Errorf("%s: %v, want a usage error saying to give --deadline", tt.name, err)
		}
	}
}
