package gateway_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/gateway"
	"github.com/idlegrid/idlegrid/internal/metricstest"
)

// backgroundParams asks the mock's model for a response to text, run in
// the background.
func backgroundParams(text string) responses.ResponseNewParams {
	p := responseParams(text)
	p.Background = oai.Bool(true)
	return p
}

// pollUntil reads the response id until its status is not one of those
// given, and returns it.
func pollUntil(t *testing.T, sdk oai.Client, id string, while ...responses.ResponseStatus) *responses.Response {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		got, err := sdk.Responses.Get(context.Background(), id, responses.ResponseGetParams{})
		if err != nil {
			t.Fatalf("GET %s: %s", id, describe(err))
		}
		still := false
		for _, st := range while {
			still = still || got.Status == st
		}
		if !still || time.Now().After(deadline) {
			return got
		}
	}
}

// mustRunning starts a background response, with the model server set to
// hold it (faultHold), and returns it once it is in progress.
func mustRunning(t *testing.T, sdk oai.Client, text string) *responses.Response {
	t.Helper()
	queued, err := sdk.Responses.New(context.Background(), backgroundParams(text))
	if err != nil {
		t.Fatal(describe(err))
	}
	running := pollUntil(t, sdk, queued.ID, responses.ResponseStatusQueued)
	if running.Status != responses.ResponseStatusInProgress {
		t.Fatalf("with the model server holding it: %s; want in_progress", running.RawJSON())
	}
	return running
}

// TestGateway_responsesBackground: a background response is answered at
// once, queued; the gateway runs it and keeps the answer, which the renter
// polls for, is charged for, and may continue.
func TestGateway_responsesBackground(t *testing.T) {
	f, up := mustSolo(t, nil)
	ctx := context.Background()
	sdk := f.sdk(f.RenterKey)
	queued, err := sdk.Responses.New(ctx, backgroundParams("Write a report."))
	if err != nil {
		t.Fatal(describe(err))
	}
	if queued.Status != responses.ResponseStatusQueued || !queued.Background || !strings.HasPrefix(queued.ID, "resp_") || len(queued.Output) != 0 {
		t.Fatalf("POST with background: %s; want it queued, background, with the gateway's ID and no output yet", queued.RawJSON())
	}
	done := pollUntil(t, sdk, queued.ID, responses.ResponseStatusQueued, responses.ResponseStatusInProgress)
	if done.Status != responses.ResponseStatusCompleted || done.OutputText() != "Hello from alpha." || !done.Background ||
		done.ID != queued.ID || done.Usage.OutputTokens != mockCompletionTokens {
		t.Fatalf("polled: %s; want alpha's answer, completed, background, its usage", done.RawJSON())
	}
	if body := string(up.lastBody()); strings.Contains(body, "background") {
		t.Errorf("the model server was sent %s; want no background: the gateway runs it", body)
	}
	mustSync(t, f)
	us, err := f.Store.ListInferenceUsage(ctx, idlegrid.UsageFilter{AccountID: f.RenterID, Limit: 1})
	if err != nil || len(us) != 1 || "resp_"+strings.TrimPrefix(us[0].ID, "req_") != queued.ID || us[0].OutputTokens != mockCompletionTokens {
		t.Fatalf("usage %+v, %v; want the background response's, charged", us, err)
	}
	next, err := sdk.Responses.New(ctx, continuing("And then?", queued.ID))
	if err != nil || next.PreviousResponseID != queued.ID {
		t.Errorf("continuing the background response: %v, %s", next, describe(err))
	}
	if got := sentInput(t, up); len(got) != 3 {
		t.Errorf("continuing, the model server was sent %q; want the background turn before the new input", got)
	}
}

// TestGateway_responsesBackgroundCancel: a background response in
// progress cannot be continued yet; cancelled, its run stops at the
// provider, it reads cancelled, and nothing is charged; deleted, its run
// stops too. A response that is not a background one cannot be
// cancelled.
func TestGateway_responsesBackgroundCancel(t *testing.T) {
	f, up := mustSolo(t, nil)
	ctx := context.Background()
	sdk := f.sdk(f.RenterKey)
	up.set(faultHold)
	defer up.free()
	queued := mustRunning(t, sdk, "Write a report.")
	_, err := sdk.Responses.New(ctx, continuing("And then?", queued.ID))
	if e := apiError(t, err); e.Param != "previous_response_id" || !strings.Contains(e.Message, "still running") {
		t.Errorf("continuing a response in progress: %s; want 400 saying it is still running", describe(err))
	}
	cancelled, err := sdk.Responses.Cancel(ctx, queued.ID)
	if err != nil || cancelled.Status != responses.ResponseStatusCancelled {
		t.Fatalf("cancel: %v, %s; want it cancelled", cancelled, describe(err))
	}
	if got := pollUntil(t, sdk, queued.ID); got.Status != responses.ResponseStatusCancelled {
		t.Errorf("after cancelling: %s", got.RawJSON())
	}
	deleted, err := sdk.Responses.New(ctx, backgroundParams("Write another."))
	if err != nil {
		t.Fatal(describe(err))
	}
	pollUntil(t, sdk, deleted.ID, responses.ResponseStatusQueued)
	if err := sdk.Responses.Delete(ctx, deleted.ID); err != nil {
		t.Fatalf("deleting a background response in progress: %s", describe(err))
	}
	if _, err := sdk.Responses.Get(ctx, deleted.ID, responses.ResponseGetParams{}); apiError(t, err).StatusCode != 404 {
		t.Errorf("GET a background response deleted while it ran: %s; want 404", describe(err))
	}
	mustSync(t, f) // returns once both runs have ended: the deleted one was cancelled too
	if bal, err := f.Admin.Balance(ctx, f.RenterID); err != nil || bal.Available != 100*idlegrid.MicrosPerUnit {
		t.Errorf("balance %+v (%v): a cancelled response must cost nothing", bal, err)
	}
	up.set(faultNone)
	whole, err := sdk.Responses.New(ctx, responseParams("Hi"))
	if err != nil {
		t.Fatal(describe(err))
	}
	if _, err := sdk.Responses.Cancel(ctx, whole.ID); apiError(t, err).StatusCode != 400 {
		t.Errorf("cancelling a response answered whole: %s; want 400", describe(err))
	}
}

// TestGateway_responsesBackgroundOrphaned: a background response still
// queued past its hold ran on a server that stopped: it reads as failed,
// and is recorded so, so that a run that was only late cannot turn it
// completed; one within its hold reads as kept, however old. One kept
// before holds is held as long as a run may take.
func TestGateway_responsesBackgroundOrphaned(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	f, _ := mustSolo(t, func(c *gateway.Config) { c.Metrics = reg })
	ctx := context.Background()
	sdk := f.sdk(f.RenterKey)
	for _, tc := range []struct {
		name      string
		age, held time.Duration // held: from now; 0 for none
		want      responses.ResponseStatus
	}{
		{"young_unheld", time.Minute, 0, responses.ResponseStatusQueued},
		{"old_unheld", 24 * time.Hour, 0, responses.ResponseStatusFailed},
		{"old_held", 24 * time.Hour, time.Minute, responses.ResponseStatusQueued},
		{"young_hold_run_out", time.Minute, -time.Second, responses.ResponseStatusFailed},
	} {
		created := time.Now().Add(-tc.age)
		id := "resp_orphan_" + tc.name
		r := &idlegrid.KeptResponse{ID: id, RenterID: f.RenterID, Model: testModel, Input: []byte(`[]`),
			Response:  []byte(`{"id":"` + id + `","object":"response","status":"queued","background":true,"output":[]}`),
			CreatedAt: created, ExpiresAt: created.Add(30 * 24 * time.Hour)}
		if tc.held != 0 {
			r.HeldUntil = time.Now().Add(tc.held)
		}
		if err := f.Store.KeepResponse(ctx, r); err != nil {
			t.Fatal(err)
		}
		got, err := sdk.Responses.Get(ctx, id, responses.ResponseGetParams{})
		if err != nil || got.Status != tc.want || (tc.want == responses.ResponseStatusFailed && !strings.Contains(got.Error.Message, "stopped")) {
			t.Errorf("%s: %v, %s; want %s", tc.name, got.RawJSON(), describe(err), tc.want)
		}
		kr, err := f.Store.FindResponse(ctx, f.RenterID, id, time.Now())
		if err != nil || !strings.Contains(string(kr.Response), `"status":"`+string(tc.want)+`"`) {
			t.Errorf("%s: stored %s (%v); want it recorded %s", tc.name, kr.Response, err, tc.want)
		}
	}
	if _, err := sdk.Responses.Get(ctx, "resp_orphan_old_unheld", responses.ResponseGetParams{}); err != nil {
		t.Fatal(describe(err)) // read again: recorded once
	}
	if got := metricstest.Value(t, reg, "idlegrid_inference_background_orphans_total", nil); got != 2 {
		t.Errorf("orphans recorded = %v, want 2", got)
	}
}

// TestGateway_responsesBackgroundHeld: a run renews its response's hold
// while it runs, so a response in progress for longer than any hold
// still reads so, then completed.
func TestGateway_responsesBackgroundHeld(t *testing.T) {
	clock := &manualClock{now: time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)}
	reg := prometheus.NewPedanticRegistry()
	f, up := mustSolo(t, func(c *gateway.Config) { c.Clock, c.BackgroundHeartbeat, c.Metrics = clock, 10*time.Millisecond, reg })
	ctx := context.Background()
	sdk := f.sdk(f.RenterKey)
	up.set(faultHold)
	defer up.free()
	running := mustRunning(t, sdk, "Write a report.")
	clock.advance(time.Hour) // past its first hold, and the longest a run may take
	eventually(t, "the run renewing its hold", func() string {
		kr, err := f.Store.FindResponse(ctx, f.RenterID, running.ID, clock.Now())
		if err != nil || !kr.HeldUntil.After(clock.Now()) {
			return fmt.Sprintf("held until %v (%v), now %s", kr.HeldUntil, err, clock.Now())
		}
		return ""
	})
	if got, err := sdk.Responses.Get(ctx, running.ID, responses.ResponseGetParams{}); err != nil || got.Status != responses.ResponseStatusInProgress {
		t.Fatalf("an hour on, its run holding it: %v, %s; want in_progress", got.RawJSON(), describe(err))
	}
	if got := metricstest.Value(t, reg, "idlegrid_inference_background_running", nil); got != 1 {
		t.Errorf("background responses running = %v, want 1", got)
	}
	up.free()
	if got := pollUntil(t, sdk, running.ID, responses.ResponseStatusInProgress); got.Status != responses.ResponseStatusCompleted {
		t.Errorf("freed: %s; want completed", got.RawJSON())
	}
	mustSync(t, f)
	if got := metricstest.Value(t, reg, "idlegrid_inference_background_running", nil); got != 0 {
		t.Errorf("background responses running once done = %v, want 0", got)
	}
}

// TestGateway_responsesBackgroundCancelElsewhere: a cancel reaches a
// background response that no run of the gateway's holds (another
// server's, or one whose server stopped without recording its end), and
// the cancel of another server (here, the store's write) wins over a run,
// which finds its response changed at its next heartbeat and stops, its
// provider's answer unawaited: it keeps nothing more.
func TestGateway_responsesBackgroundCancelElsewhere(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	f, up := mustSolo(t, func(c *gateway.Config) { c.BackgroundHeartbeat, c.Metrics = 10*time.Millisecond, reg })
	ctx := context.Background()
	sdk := f.sdk(f.RenterKey)

	created := time.Now().Add(-time.Minute)
	orphan := &idlegrid.KeptResponse{ID: "resp_orphan", RenterID: f.RenterID, Model: testModel, Input: []byte(`[]`),
		Response:  []byte(`{"id":"resp_orphan","object":"response","status":"in_progress","background":true,"output":[]}`),
		CreatedAt: created, ExpiresAt: created.Add(30 * 24 * time.Hour)}
	if err := f.Store.KeepResponse(ctx, orphan); err != nil {
		t.Fatal(err)
	}
	for range 2 { // a second cancel finds it cancelled
		got, err := sdk.Responses.Cancel(ctx, orphan.ID)
		if err != nil {
			t.Fatalf("cancelling a response whose run's server stopped: %s", describe(err))
		} else if got.Status != responses.ResponseStatusCancelled {
			t.Fatalf("cancelling a response whose run's server stopped: %s; want it cancelled", got.RawJSON())
		}
	}
	if got := pollUntil(t, sdk, orphan.ID); got.Status != responses.ResponseStatusCancelled {
		t.Errorf("after cancelling: %s", got.RawJSON())
	}

	up.set(faultHold)
	defer up.free()
	queued := mustRunning(t, sdk, "Write a report.")
	kr, err := f.Store.FindResponse(ctx, f.RenterID, queued.ID, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cancelled := []byte(strings.Replace(string(kr.Response), `"in_progress"`, `"cancelled"`, 1))
	if err := f.Store.UpdateResponse(ctx, f.RenterID, queued.ID, kr.Response, cancelled, time.Now()); err != nil {
		t.Fatal(err)
	}
	stopped, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := f.GW.Sync(stopped); err != nil { // the model server still holds it
		t.Fatalf("the run of a response cancelled elsewhere did not stop: %v", err)
	}
	if got := pollUntil(t, sdk, queued.ID); got.Status != responses.ResponseStatusCancelled || len(got.Output) != 0 {
		t.Errorf("a run whose response another server cancelled: %s; want it cancelled, no output", got.RawJSON())
	}
	if got := metricstest.Value(t, reg, "idlegrid_inference_background_runs_lost_total", nil); got != 1 {
		t.Errorf("runs lost = %v, want 1", got)
	}
}

// streamEvents reads a background response streamed to text until the
// stream ends, and returns its events.
func streamEvents(t *testing.T, sdk oai.Client, text string) []responses.ResponseStreamEventUnion {
	t.Helper()
	stream := sdk.Responses.NewStreaming(context.Background(), backgroundParams(text))
	var events []responses.ResponseStreamEventUnion
	for stream.Next() {
		events = append(events, stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("streaming a background response: %s", describe(err))
	}
	return events
}

// TestGateway_responsesBackgroundStream: a streamed background response
// is answered its response queued at once, then its run's events as they
// come, each response object saying background; it is kept as any
// background response is, and charged once.
func TestGateway_responsesBackgroundStream(t *testing.T) {
	f, _ := mustSolo(t, nil)
	ctx := context.Background()
	sdk := f.sdk(f.RenterKey)
	events := streamEvents(t, sdk, "Write a report.")
	if len(events) < 3 {
		t.Fatalf("%d events; want created, the text, completed", len(events))
	}
	first, last := events[0], events[len(events)-1]
	if first.Type != "response.created" || first.Response.Status != responses.ResponseStatusQueued || !first.Response.Background ||
		!strings.HasPrefix(first.Response.ID, "resp_") {
		t.Errorf("first event %s; want response.created, the response queued, background", first.RawJSON())
	}
	if last.Type != "response.completed" || last.Response.ID != first.Response.ID || !last.Response.Background ||
		last.Response.OutputText() != "Hello from alpha." {
		t.Errorf("last event %s; want response.completed, background, alpha's answer", last.RawJSON())
	}
	var text strings.Builder
	for _, ev := range events[1 : len(events)-1] {
		if ev.Type == "response.created" {
			t.Errorf("a second response.created: %s", ev.RawJSON())
		}
		if ev.Type == "response.output_text.delta" {
			text.WriteString(ev.Delta)
		}
	}
	if text.String() != "Hello from alpha." {
		t.Errorf("the deltas said %q; want alpha's answer", text.String())
	}
	if got := pollUntil(t, sdk, first.Response.ID); got.Status != responses.ResponseStatusCompleted || got.OutputText() != "Hello from alpha." || !got.Background {
		t.Errorf("kept: %s; want it completed, background, with alpha's answer", got.RawJSON())
	}
	mustSync(t, f)
	us, err := f.Store.ListInferenceUsage(ctx, idlegrid.UsageFilter{AccountID: f.RenterID})
	if err != nil || len(us) != 1 || us[0].OutputTokens != mockCompletionTokens {
		t.Errorf("usage %+v, %v; want the response charged once", us, err)
	}
}

// TestGateway_responsesBackgroundStreamLeft: a renter who stops following
// a streamed background response leaves its run going: it ends, is kept
// and charged, and the renter polls it.
func TestGateway_responsesBackgroundStreamLeft(t *testing.T) {
	f, up := mustSolo(t, nil)
	up.set(faultHold)
	defer up.free()
	sdk := f.sdk(f.RenterKey)
	ctx, leave := context.WithCancel(context.Background())
	defer leave()
	stream := sdk.Responses.NewStreaming(ctx, backgroundParams("Write a report."))
	if !stream.Next() {
		t.Fatalf("no first event: %s", describe(stream.Err()))
	}
	id := stream.Current().Response.ID
	if got := pollUntil(t, sdk, id, responses.ResponseStatusQueued); got.Status != responses.ResponseStatusInProgress {
		t.Fatalf("with the model server holding it: %s; want in_progress", got.RawJSON())
	}
	leave()
	stream.Close()
	up.free()
	if got := pollUntil(t, sdk, id, responses.ResponseStatusInProgress); got.Status != responses.ResponseStatusCompleted || got.OutputText() != "Hello from alpha." {
		t.Errorf("after its renter left: %s; want it completed, with alpha's answer", got.RawJSON())
	}
	mustSync(t, f)
	if us, err := f.Store.ListInferenceUsage(context.Background(), idlegrid.UsageFilter{AccountID: f.RenterID}); err != nil || len(us) != 1 {
		t.Errorf("usage %+v, %v; want the response charged", us, err)
	}
}

// TestGateway_responsesBackgroundStreamResume: a streamed background
// response's events are resumed from an event on, by any request of the
// renter's, while it runs and once it ended: each gets those numbered
// after the one it names, then the rest as they come, to the end; a
// renter who stopped following loses nothing. A response not streamed in
// the background, or a bad starting_after, is a 400 naming the field.
func TestGateway_responsesBackgroundStreamResume(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	f, up := mustSolo(t, func(c *gateway.Config) { c.Metrics = reg })
	up.set(faultHold)
	defer up.free()
	sdk := f.sdk(f.RenterKey)
	ctx := context.Background()
	first, leave := context.WithCancel(ctx)
	defer leave()
	stream := sdk.Responses.NewStreaming(first, backgroundParams("Write a report."))
	if !stream.Next() {
		t.Fatalf("no first event: %s", describe(stream.Err()))
	}
	id := stream.Current().Response.ID
	pollUntil(t, sdk, id, responses.ResponseStatusQueued)
	leave() // the renter stops following; another request resumes it
	stream.Close()
	resumed := sdk.Responses.GetStreaming(ctx, id, responses.ResponseGetParams{StartingAfter: oai.Int(0)})
	up.free()
	var seqs []int64
	var text strings.Builder
	last := ""
	for resumed.Next() {
		ev := resumed.Current()
		seqs, last = append(seqs, ev.SequenceNumber), ev.Type
		text.WriteString(ev.Delta)
	}
	if resumed.Err() != nil || len(seqs) == 0 || seqs[0] != 1 || last != "response.completed" || text.String() != "Hello from alpha." {
		t.Fatalf("resumed after event 0: events %v, the last %s, text %q (%v); want from 1 to response.completed, alpha's answer", seqs, last, text.String(), resumed.Err())
	}
	for _, after := range []int64{3, int64(len(seqs))} { // once it ended: the events after, or none
		again := sdk.Responses.GetStreaming(ctx, id, responses.ResponseGetParams{StartingAfter: oai.Int(after)})
		var got []int64
		for again.Next() {
			got = append(got, again.Current().SequenceNumber)
		}
		if want := seqs[min(after, int64(len(seqs))):]; again.Err() != nil || !slices.Equal(got, want) {
			t.Errorf("resumed after event %d once ended: %v (%v), want %v", after, got, again.Err(), want)
		}
	}
	if n, b := metricstest.Value(t, reg, "idlegrid_inference_background_stream_logs", nil), metricstest.Value(t, reg, "idlegrid_inference_background_stream_log_bytes", nil); n != 1 || b < 100 {
		t.Errorf("stream logs held: %v, of %v bytes; want the one, its events", n, b)
	}
	whole, err := sdk.Responses.New(ctx, responseParams("Hi"))
	if err != nil {
		t.Fatal(describe(err))
	}
	for _, tc := range []struct{ id, after, field string }{{whole.ID, "0", "stream"}, {id, "-1", "starting_after"}, {id, "x", "starting_after"}} {
		_, err := sdk.Responses.Get(ctx, tc.id, responses.ResponseGetParams{}, option.WithQuery("stream", "true"), option.WithQuery("starting_after", tc.after))
		if e := apiError(t, err); e.StatusCode != 400 || e.Param != tc.field {
			t.Errorf("resuming %s after %s: %s; want 400 naming %s", tc.id, tc.after, describe(err), tc.field)
		}
	}
	_, err = sdk.Responses.Get(ctx, id, responses.ResponseGetParams{}, option.WithRequestBody("application/json", []byte("stream please")))
	if e := apiError(t, err); e.StatusCode != 400 || e.Param != "body" {
		t.Errorf("a GET with a body that is no JSON: %s; want 400 naming body", describe(err))
	}
}

// TestGateway_responsesBackgroundStreamCancelled: a streamed background
// response cancelled before any of its answer came, here or through
// another server (here, the store's write), ends in one
// response.cancelled event.
func TestGateway_responsesBackgroundStreamCancelled(t *testing.T) {
	for _, where := range []string{"here", "elsewhere"} {
		t.Run(where, func(t *testing.T) {
			f, up := mustSolo(t, func(c *gateway.Config) { c.BackgroundHeartbeat = 10 * time.Millisecond })
			up.set(faultHold)
			defer up.free()
			sdk := f.sdk(f.RenterKey)
			ctx := context.Background()
			stream := sdk.Responses.NewStreaming(ctx, backgroundParams("Write a report."))
			if !stream.Next() {
				t.Fatalf("no first event: %s", describe(stream.Err()))
			}
			id := stream.Current().Response.ID
			pollUntil(t, sdk, id, responses.ResponseStatusQueued)
			if where == "here" {
				if _, err := sdk.Responses.Cancel(ctx, id); err != nil {
					t.Fatal(describe(err))
				}
			} else {
				kr, err := f.Store.FindResponse(ctx, f.RenterID, id, time.Now())
				if err != nil {
					t.Fatal(err)
				}
				cancelled := []byte(strings.Replace(string(kr.Response), `"in_progress"`, `"cancelled"`, 1))
				if err := f.Store.UpdateResponse(ctx, f.RenterID, id, kr.Response, cancelled, time.Now()); err != nil {
					t.Fatal(err)
				}
			}
			var rest []string
			for stream.Next() {
				ev := stream.Current()
				rest = append(rest, ev.Type+" "+string(ev.Response.Status))
			}
			if strings.Join(rest, ",") != "response.cancelled cancelled" {
				t.Errorf("after the cancel the stream said %q (%v); want one response.cancelled, the response cancelled", rest, stream.Err())
			}
		})
	}
}

// TestGateway_responsesBackgroundStreamBreaks: a streamed background
// response whose provider's stream breaks off mid-way is recorded failed,
// saying so.
func TestGateway_responsesBackgroundStreamBreaks(t *testing.T) {
	f, up := mustSolo(t, nil)
	up.set(faultDrop)
	sdk := f.sdk(f.RenterKey)
	stream := sdk.Responses.NewStreaming(context.Background(), backgroundParams("Write a report."))
	var id string
	for stream.Next() {
		if ev := stream.Current(); ev.Type == "response.created" {
			id = ev.Response.ID
		}
	}
	if id == "" {
		t.Fatalf("no response.created: %s", describe(stream.Err()))
	}
	got := pollUntil(t, sdk, id, responses.ResponseStatusQueued, responses.ResponseStatusInProgress)
	if got.Status != responses.ResponseStatusFailed || got.Error.Code != "server_error" || !strings.Contains(got.Error.Message, "broke off") {
		t.Errorf("a background stream that broke off: %s; want failed, server_error, saying it broke off", got.RawJSON())
	}
}

// TestGateway_responsesBackgroundFails: a background response no provider
// answers, or its model server refuses, reads as failed, whose error says
// whose the failure is: the providers' (server_error), the request's
// (invalid_prompt) or a limit's (rate_limit_exceeded); it costs nothing.
// Streamed, it ends in a response.failed event saying so.
func TestGateway_responsesBackgroundFails(t *testing.T) {
	for _, tc := range []struct {
		fault, code, says string
	}{
		{fault500, "server_error", "failed"},
		{fault400, "invalid_prompt", "longer than the model's context"},
		{fault429, "rate_limit_exceeded", "at capacity"}, // the gateway's own answer, once no provider had room
	} {
		t.Run(tc.fault, func(t *testing.T) {
			f, up := mustSolo(t, nil)
			up.set(tc.fault)
			ctx := context.Background()
			sdk := f.sdk(f.RenterKey)
			queued, err := sdk.Responses.New(ctx, backgroundParams("Write a report."))
			if err != nil {
				t.Fatal(describe(err))
			}
			got := pollUntil(t, sdk, queued.ID, responses.ResponseStatusQueued, responses.ResponseStatusInProgress)
			if got.Status != responses.ResponseStatusFailed || string(got.Error.Code) != tc.code || !strings.Contains(got.Error.Message, tc.says) {
				t.Errorf("with its model server answering %s: %s; want failed, %s, saying %q", tc.fault, got.RawJSON(), tc.code, tc.says)
			}
			events := streamEvents(t, sdk, "Write a report.") // streamed, it ends in the failure
			if last := events[len(events)-1]; len(events) != 2 || last.Type != "response.failed" || string(last.Response.Error.Code) != tc.code {
				t.Errorf("streamed, with its model server answering %s: %d events, the last %s; want created then response.failed, %s", tc.fault, len(events), last.RawJSON(), tc.code)
			}
			mustSync(t, f)
			if bal, err := f.Admin.Balance(ctx, f.RenterID); err != nil || bal.Available != 100*idlegrid.MicrosPerUnit {
				t.Errorf("balance %+v (%v): a failed response must cost nothing", bal, err)
			}
		})
	}
}

// TestGateway_responsesBackgroundClosed: a gateway that closes cancels its
// background runs and records each failed, saying the server stopped,
// before Close returns; a background request after that is refused, or,
// streamed, ends failed.
func TestGateway_responsesBackgroundClosed(t *testing.T) {
	f, up := mustSolo(t, nil)
	up.set(faultHold)
	defer up.free()
	ctx := context.Background()
	sdk := f.sdk(f.RenterKey)
	queued := mustRunning(t, sdk, "Write a report.")
	if err := f.GW.Close(); err != nil {
		t.Fatal(err)
	}
	kr, err := f.Store.FindResponse(ctx, f.RenterID, queued.ID, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var got responses.Response
	if err := got.UnmarshalJSON(kr.Response); err != nil || got.Status != responses.ResponseStatusFailed ||
		got.Error.Code != "server_error" || !strings.Contains(got.Error.Message, "server stopped") {
		t.Errorf("after Close: %s (%v); want failed, the server stopped", kr.Response, err)
	}
	_, err = sdk.Responses.New(ctx, backgroundParams("Write another."))
	if e := apiError(t, err); e.StatusCode != 503 || !strings.Contains(e.Message, "stopping") {
		t.Fatalf("a background request after Close: %s; want 503, the server stopping", describe(err))
	}
	events := streamEvents(t, sdk, "Write another.")
	if last := events[len(events)-1]; len(events) != 2 || last.Type != "response.failed" || !strings.Contains(last.Response.Error.Message, "server stopped") {
		t.Errorf("a streamed background request after Close: %d events, the last %s; want created then response.failed, the server stopped", len(events), last.RawJSON())
	}
}
