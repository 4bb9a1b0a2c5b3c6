package gateway

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/dirlock"
)

func journalCharge(id string) idlegrid.InferenceCharge {
	return idlegrid.InferenceCharge{Usage: &idlegrid.InferenceUsage{
		ID: id, RenterID: "acct_r", KeyID: "key_1", ProviderID: "acct_p", NodeID: "node_1", Model: "m",
		Endpoint: "chat/completions", InputTokens: 3, OutputTokens: 5, Source: idlegrid.UsageUpstream,
		ChargeMicros: 170, FeeMicros: 17, Status: 200, CreatedAt: time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC),
	}}
}

// journalFiles lists the journal's file names in dir, all but its lock.
func journalFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if e.Name() != dirlock.Name {
			names = append(names, e.Name())
		}
	}
	return names
}

// TestJournal_files follows a journal whose every line starts a file: a
// file goes once the journal moved past it and its charges are done, one
// with a charge kept stays, and a reopened journal returns the kept
// charge and numbers its next file after the last it found.
func TestJournal_files(t *testing.T) {
	dir := t.TempDir()
	j, left, files, err := openJournal(dir, slog.New(slog.DiscardHandler))
	if err != nil || len(left) != 0 || len(files) != 0 {
		t.Fatalf("a new journal: %d charges, %v, %v", len(left), files, err)
	}
	j.segmentBytes = 1
	a, b, c := j.append(journalCharge("req_a")), j.append(journalCharge("req_b")), j.append(journalCharge("req_c"))
	if a == nil || b == nil || c == nil || a == b || b == c {
		t.Fatalf("segments %p %p %p: want three files", a, b, c)
	}
	want := []string{"meter-00000000000000000001.jsonl", "meter-00000000000000000002.jsonl", "meter-00000000000000000003.jsonl"}
	if got := journalFiles(t, dir); !slices.Equal(got, want) {
		t.Fatalf("files = %v, want %v", got, want)
	}
	j.done(a, false)
	j.done(b, true)
	j.done(c, false)
	if got := journalFiles(t, dir); !slices.Equal(got, want[1:]) {
		t.Fatalf("after the charges: files = %v, want the kept one and the current one, %v", got, want[1:])
	}
	j.close()
	j.close()
	if got := journalFiles(t, dir); !slices.Equal(got, want[1:2]) {
		t.Fatalf("after close: files = %v, want the kept one only, %v", got, want[1:2])
	}
	if s := j.append(journalCharge("req_d")); s != nil {
		t.Error("a closed journal took a charge")
	}

	j, left, files, err = openJournal(dir, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 || left[0].Usage.ID != "req_b" || *left[0].Usage != *journalCharge("req_b").Usage {
		t.Fatalf("reopened: charges %+v, want req_b as journaled", left)
	}
	if len(files) != 1 || filepath.Base(files[0]) != want[1] {
		t.Fatalf("reopened: files %v, want %s", files, want[1])
	}
	if err := forget(files); err != nil {
		t.Fatal(err)
	}
	j.segmentBytes = 1
	j.append(journalCharge("req_e"))
	if got := journalFiles(t, dir); !slices.Equal(got, want[2:]) {
		t.Fatalf("after a reopen: files = %v, want the number after the last file found, %v", got, want[2:])
	}
	// A number someone else took is passed over.
	if err := os.WriteFile(filepath.Join(dir, "meter-00000000000000000004.jsonl"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if j.append(journalCharge("req_f")) == nil {
		t.Fatal("the journal stopped at a taken number")
	}
	if got, want := journalFiles(t, dir), []string{want[2], "meter-00000000000000000004.jsonl", "meter-00000000000000000005.jsonl"}; !slices.Equal(got, want) {
		t.Fatalf("files = %v, want %v", got, want)
	}
	j.close()
}

// TestJournal_tornLine checks that a line a power cut tore, and a file
// that is not the journal's, are passed over.
func TestJournal_tornLine(t *testing.T) {
	dir := t.TempDir()
	j, _, _, err := openJournal(dir, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	s := j.append(journalCharge("req_a"))
	j.append(journalCharge("req_b"))
	if _, err := s.f.WriteString(`{"usage":{"id":"req_c","renter`); err != nil {
		t.Fatal(err)
	}
	s.f.Close() // the crash: the file stays as it is, and the lock goes with the process
	if err := j.lock.Release(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not a charge\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	var logged bytes.Buffer
	_, left, files, err := openJournal(dir, slog.New(slog.NewTextHandler(&logged, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 2 || left[0].Usage.ID != "req_a" || left[1].Usage.ID != "req_b" || len(files) != 1 {
		t.Fatalf("charges %d, files %v: want req_a and req_b from one file", len(left), files)
	}
	if !strings.Contains(logged.String(), "line=3") {
		t.Errorf("the torn line was not logged: %s", logged.String())
	}
}

// TestJournal_unwritable checks that a journal whose directory cannot be
// written to says so at once.
func TestJournal_unwritable(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := openJournal(filepath.Join(file, "journal"), slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "meter journal") {
		t.Fatalf("openJournal under a file: %v, want an error naming the meter journal", err)
	}
}

// TestJournal_inUse checks that one journal has one owner at a time: a
// second open of its directory is refused, naming the lock, until the
// first closes.
func TestJournal_inUse(t *testing.T) {
	dir := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	j, _, _, err := openJournal(dir, log)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := openJournal(dir, log); !errors.Is(err, ErrJournalInUse) || !strings.Contains(err.Error(), filepath.Join(dir, dirlock.Name)) {
		t.Fatalf("a second open: %v, want ErrJournalInUse naming the lock", err)
	}
	j.close()
	j, _, _, err = openJournal(dir, log)
	if err != nil {
		t.Fatalf("an open after the first closed: %v", err)
	}
	j.close()
}

func TestJournalSeq(t *testing.T) {
	for name, want := range map[string]uint64{
		"meter-00000000000000000012.jsonl": 12,
		"meter-1.jsonl":                    1,
		"xmeter-1.jsonl":                   0,
		"meter-1.jsonl.bak":                0,
		"meter-.jsonl":                     0,
		"meter--1.jsonl":                   0,
		"notes.txt":                        0,
	} {
		if got := journalSeq(name); got != want {
			t.Errorf("journalSeq(%q) = %d, want %d", name, got, want)
		}
	}
}

// TestJournal_failing checks that a journal that cannot write says so
// once a spell, takes charges again once it can, and makes its directory
// again if it was removed.
func TestJournal_failing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "journal")
	var logged bytes.Buffer
	j, _, _, err := openJournal(dir, slog.New(slog.NewTextHandler(&logged, nil)))
	if err != nil {
		t.Fatal(err)
	}
	j.segmentBytes = 1 // each line starts a file
	if j.append(journalCharge("req_a")) == nil {
		t.Fatal("the first line failed")
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, nil, 0o600); err != nil { // a file where the directory was
		t.Fatal(err)
	}
	if j.append(journalCharge("req_b")) != nil || j.append(journalCharge("req_c")) != nil {
		t.Fatal("a line was journaled where no directory can be made")
	}
	if n := strings.Count(logged.String(), "could not journal"); n != 1 {
		t.Errorf("%d failures logged for a spell of two, want 1:\n%s", n, logged.String())
	}
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if j.append(journalCharge("req_d")) == nil {
		t.Fatal("the journal did not make its directory again")
	}
	if !strings.Contains(logged.String(), "works again") {
		t.Errorf("the recovery was not logged:\n%s", logged.String())
	}
	if got := journalFiles(t, dir); len(got) != 1 {
		t.Errorf("files %v, want the one holding req_d", got)
	}
	j.close()
}
