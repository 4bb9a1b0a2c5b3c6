package audit

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
)

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 123456000, time.UTC)

func TestEntry_Leaf(t *testing.T) {
	e := Entry{
		Kind:     KindPosting,
		Subjects: []string{"prv_b", "lea_1", "rnt_a", "prv_b"},
		Payload:  json.RawMessage(`{ "z": 1, "a": [true, null, "x<y"], "m": 1.50 }`),
		At:       t0,
	}
	got, err := e.Leaf()
	if err != nil {
		t.Fatal(err)
	}
	want := "idlegrid-audit-entry-v1\n" +
		"kind=ledger.posting\n" +
		"at=1748779200123456\n" +
		"subject=lea_1\n" +
		"subject=prv_b\n" +
		"subject=rnt_a\n" +
		`payload={"a":[true,null,"x<y"],"m":1.50,"z":1}` + "\n"
	if string(got) != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestEntry_LeafHash(t *testing.T) {
	base := Entry{Kind: KindReceipt, Subjects: []string{"lea_1"}, Payload: json.RawMessage(`{"seq":1,"lease_id":"lea_1"}`), At: t0}
	h0 := mustLeafHash(t, base)

	t.Run("same value, other spelling", func(t *testing.T) {
		e := base
		e.Payload = json.RawMessage("{\n  \"lease_id\": \"lea_\\u0031\",\n  \"seq\": 1\n}\n")
		e.Subjects = []string{"lea_1", "lea_1"}
		if got := mustLeafHash(t, e); got != h0 {
			t.Errorf("got %s, want %s", got, h0)
		}
	})
	for name, change := range map[string]func(e *Entry){
		"kind":      func(e *Entry) { e.Kind = KindPosting },
		"subject":   func(e *Entry) { e.Subjects = []string{"lea_2"} },
		"subjects+": func(e *Entry) { e.Subjects = append(e.Subjects, "rnt_a") },
		"payload":   func(e *Entry) { e.Payload = json.RawMessage(`{"seq":2,"lease_id":"lea_1"}`) },
		"number":    func(e *Entry) { e.Payload = json.RawMessage(`{"seq":1.0,"lease_id":"lea_1"}`) },
		"at":        func(e *Entry) { e.At = e.At.Add(time.Microsecond) },
	} {
		t.Run(name, func(t *testing.T) {
			e := base
			change(&e)
			if got := mustLeafHash(t, e); got == h0 {
				t.Error("a different entry has the same leaf hash")
			}
		})
	}
}

func mustLeafHash(tb testing.TB, e Entry) Hash {
	tb.Helper()
	h, err := e.LeafHash()
	if err != nil {
		tb.Fatal(err)
	}
	return h
}

func TestEntry_Validate(t *testing.T) {
	good := Entry{Kind: KindPosting, Subjects: []string{"rnt_a"}, Payload: json.RawMessage(`{}`), At: t0}
	if err := good.Validate(); err != nil {
		t.Fatalf("good entry: %v", err)
	}
	for _, tt := range []struct {
		field  string
		change func(e *Entry)
	}{
		{"entry.kind", func(e *Entry) { e.Kind = "" }},
		{"entry.kind", func(e *Entry) { e.Kind = "Posting\nsubject=x" }},
		{"entry.subjects", func(e *Entry) { e.Subjects = []string{""} }},
		{"entry.subjects", func(e *Entry) { e.Subjects = []string{"a\nsubject=b"} }},
		{"entry.subjects", func(e *Entry) { e.Subjects = make([]string, MaxSubjects+1) }},
		{"entry.payload", func(e *Entry) { e.Payload = json.RawMessage(`{`) }},
		{"entry.payload", func(e *Entry) { e.Payload = json.RawMessage(`1 2`) }},
		{"entry.payload", func(e *Entry) { e.Payload = json.RawMessage(`"` + strings.Repeat("x", MaxPayloadBytes) + `"`) }},
		{"entry.at", func(e *Entry) { e.At = time.Time{} }},
	} {
		e := good
		tt.change(&e)
		err := e.Validate()
		var ie *idlegrid.Error
		if !errors.As(err, &ie) || ie.Code != idlegrid.EINVALID || ie.Field != tt.field {
			t.Errorf("%+v: got %v, want EINVALID on %s", e.Kind, err, tt.field)
		}
	}
}

func TestCanonicalize(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{`{"b":1,"a":2}`, `{"a":2,"b":1}`},
		{" [ 1 , 2.50 , -0 , 1e3 ] ", `[1,2.50,-0,1e3]`},
		{`{"a":1,"a":2}`, `{"a":2}`},
		{`"\u003c\/"`, `"</"`},
		{`"tab\there"`, `"tab\there"`},
	} {
		got, err := Canonicalize([]byte(tt.in))
		if err != nil || string(got) != tt.want {
			t.Errorf("%s: got %s, %v; want %s", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{``, `{`, `1 2`, `{} x`, `nul`} {
		if _, err := Canonicalize([]byte(bad)); err == nil {
			t.Errorf("%q: got no error", bad)
		}
	}
}

func TestPostingEntry(t *testing.T) {
	tr := &idlegrid.Transfer{
		ID: "trf_1", IdempotencyKey: "settle:lea_1", Kind: idlegrid.TransferSettle, LeaseID: "lea_1",
		Entries: []idlegrid.Entry{
			{Account: idlegrid.RenterHeld("rnt_a"), Amount: -1000},
			{Account: idlegrid.ProviderPending("prv_b"), Amount: 900},
			{Account: idlegrid.PlatformFees, Amount: 100},
		},
		CreatedAt: t0,
	}
	e, err := PostingEntry(tr)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"lea_1", "prv_b", "rnt_a"}; strings.Join(e.Subjects, ",") != strings.Join(want, ",") {
		t.Errorf("subjects: got %v, want %v", e.Subjects, want)
	}
	var back idlegrid.Transfer
	if err := json.Unmarshal(e.Payload, &back); err != nil || back.ID != "trf_1" || len(back.Entries) != 3 || !back.CreatedAt.Equal(t0) {
		t.Errorf("payload: got %+v, %v", back, err)
	}
	if e.Kind != KindPosting || !e.At.Equal(t0) {
		t.Errorf("got kind %s at %s", e.Kind, e.At)
	}
}

func TestLeaseEntry(t *testing.T) {
	l := &idlegrid.Lease{ID: "lea_1", JobID: "job_1", NodeID: "nod_1", RenterID: "rnt_a", ProviderID: "prv_b",
		Fault: idlegrid.FaultProvider}
	ev := idlegrid.LeaseEvent{LeaseID: "lea_1", From: idlegrid.LeaseRunning, To: idlegrid.LeaseLost, Reason: "node lost", At: t0}
	e, err := LeaseEntry(l, ev)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(e.Subjects, ","), "job_1,lea_1,nod_1,prv_b,rnt_a"; got != want {
		t.Errorf("subjects: got %s, want %s", got, want)
	}
	want := `{"at":"2025-06-01T12:00:00.123456Z","charged_micros":0,"fault":"provider","from":"running","lease_id":"lea_1","reason":"node lost","to":"lost"}`
	if string(e.Payload) != want {
		t.Errorf("payload: got %s, want %s", e.Payload, want)
	}

	r := &idlegrid.Receipt{LeaseID: "lea_1", Seq: 1, Start: t0, End: t0.Add(time.Minute), GPUSeconds: 60}
	re, err := ReceiptEntry(l, r, t0.Add(time.Minute))
	if err != nil || re.Kind != KindReceipt || !re.Concerns("nod_1") || !re.Concerns("rnt_a") {
		t.Errorf("receipt entry: got %+v, %v", re, err)
	}
}

// TestNewEntry_canonicalLeaf holds NewEntry's shortcut to the rule: the
// leaf of an entry NewEntry made, whose payload it does not canonicalize
// again, is the leaf of the same entry read back from its JSON, which it
// does.
func TestNewEntry_canonicalLeaf(t *testing.T) {
	values := []any{
		map[string]any{"z": 1, "a": []any{true, nil, "x<y&z>"}, "m": 1.5, "é": "ü\u2028\t\"q\""},
		struct {
			B string  `json:"b"`
			A float64 `json:"a"`
			C []int   `json:"c"`
		}{"\\u00e9 \x01", 1e21, []int{3, 1, 2}},
		"just a string",
		[]any{map[string]any{"y": map[string]any{"b": 2, "a": 1}}, 0.1, -0},
	}
	for i, v := range values {
		e, err := NewEntry(KindPosting, []string{"rnt_a", "prv_b"}, v, t0)
		if err != nil {
			t.Fatalf("value %d: %v", i, err)
		}
		raw, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		var back Entry
		if err := json.Unmarshal(raw, &back); err != nil {
			t.Fatal(err)
		}
		got, err := e.Leaf()
		if err != nil {
			t.Fatal(err)
		}
		want, err := back.Leaf()
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("value %d: leaf of the entry made\n%s\nwant the leaf of the entry read back\n%s", i, got, want)
		}
	}
}
