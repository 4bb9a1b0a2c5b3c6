package infersim_test

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/infersim"
)

func mustTrace(tb testing.TB, path, service string) []infersim.Request {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	rows, err := infersim.ParseTrace(f, service)
	if err != nil {
		tb.Fatalf("ParseTrace(%s): %v", path, err)
	}
	return rows
}

func TestParseTrace(t *testing.T) {
	code := mustTrace(t, "testdata/code_head.csv", "code")
	if len(code) != 40 {
		t.Fatalf("got %d rows, want 40", len(code))
	}
	want := infersim.Request{Service: "code", Line: 2, At: time.Date(2023, 11, 16, 18, 17, 3, 979960000, time.UTC), ContextTokens: 4808, GeneratedTokens: 10}
	if got := code[0]; got != want {
		t.Errorf("first row = %+v, want %+v", got, want)
	}
	if got := code[39].Line; got != 41 {
		t.Errorf("last row's line = %d, want 41", got)
	}
}

func TestParseTrace_BadRows(t *testing.T) {
	const head = infersim.TraceHeader + "\n"
	for _, tc := range []struct {
		name, text, field, reason string
	}{
		{"Empty", "", "trace.x:1.header", "an empty file"},
		{"WrongHeader", "TIMESTAMP,Prompt,Output\n", "trace.x:1.header", "want"},
		{"FewFields", head + "2023-11-16 18:17:03.9799600,12\n", "trace.x:2.row", "want 3 fields"},
		{"BadTime", head + "2023-11-16 18:17:03.9799600,1,2\nyesterday,1,2\n", "trace.x:3.TIMESTAMP", "yesterday"},
		{"NegativeContext", head + "2023-11-16 18:17:03.9799600,-4,2\n", "trace.x:2.ContextTokens", "whole number"},
		{"HugeGenerated", head + "2023-11-16 18:17:03.9799600,4,99999999\n", "trace.x:2.GeneratedTokens", "99999999"},
		{"BadQuote", head + "\"2023-11-16,4,2\n", "trace.x:2.row", "quote"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := infersim.ParseTrace(strings.NewReader(tc.text), "x")
			var e *idlegrid.Error
			if !errors.As(err, &e) || e.Code != idlegrid.EINVALID {
				t.Fatalf("got %v, want an EINVALID *idlegrid.Error", err)
			}
			if e.Field != tc.field || !strings.Contains(e.Message, tc.reason) {
				t.Errorf("got field %q, message %q; want field %q and a message with %q", e.Field, e.Message, tc.field, tc.reason)
			}
		})
	}
}

func TestMerge(t *testing.T) {
	code := mustTrace(t, "testdata/code_head.csv", "code")
	conv := mustTrace(t, "testdata/conv_head.csv", "conv")
	t.Run("All", func(t *testing.T) {
		got := infersim.Merge(infersim.Slice{}, code, conv)
		if len(got) != 80 {
			t.Fatalf("got %d requests, want 80", len(got))
		}
		// conv begins at 18:15:46.68, code at 18:17:03.98.
		if got[0].Service != "conv" || got[0].Offset != 0 || got[0].Line != 2 {
			t.Errorf("first = %+v, want conv line 2 at offset 0", got[0])
		}
		for i := 1; i < len(got); i++ {
			if got[i].Offset < got[i-1].Offset || got[i].Offset != got[i].At.Sub(got[0].At) {
				t.Fatalf("request %d at %v after %v: out of order or offset not from the first", i, got[i].Offset, got[i-1].Offset)
			}
		}
	})
	t.Run("StartAndDuration", func(t *testing.T) {
		s := infersim.Slice{Start: 20 * time.Second, Duration: 5 * time.Second}
		got := infersim.Merge(s, code, conv)
		first := conv[0].At.Add(s.Start)
		want := 0
		for _, r := range append(append([]infersim.Request{}, code...), conv...) {
			if !r.At.Before(first) && r.At.Before(first.Add(s.Duration)) {
				want++
			}
		}
		if len(got) != want || want == 0 {
			t.Fatalf("got %d requests, want %d (and some)", len(got), want)
		}
		if got[0].At.Before(first) || !got[len(got)-1].At.Before(first.Add(s.Duration)) {
			t.Errorf("got %v to %v, want within [%v, %v)", got[0].At, got[len(got)-1].At, first, first.Add(s.Duration))
		}
	})
	t.Run("Requests", func(t *testing.T) {
		if got := infersim.Merge(infersim.Slice{Requests: 7}, code, conv); len(got) != 7 {
			t.Errorf("got %d requests, want 7", len(got))
		}
	})
}

func FuzzParseTrace(f *testing.F) {
	for _, path := range []string{"testdata/code_head.csv", "testdata/conv_head.csv"} {
		b, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(infersim.TraceHeader + "\n2023-11-16 18:17:03.9799600,1,2"))
	f.Add([]byte(infersim.TraceHeader + "\n\"a\"\"b\",1,2\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		rows, err := infersim.ParseTrace(bytes.NewReader(b), "fuzz")
		if err != nil {
			var e *idlegrid.Error
			if !errors.As(err, &e) || !strings.HasPrefix(e.Field, "trace.fuzz:") {
				t.Fatalf("error %v does not name the trace line and field", err)
			}
			return
		}
		for _, r := range rows {
			if r.ContextTokens < 0 || r.GeneratedTokens < 0 || r.Line < 2 || r.At.IsZero() || r.Service != "fuzz" {
				t.Fatalf("accepted a bad row: %+v", r)
			}
		}
	})
}
