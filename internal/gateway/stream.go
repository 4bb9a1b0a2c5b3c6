package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/openai"
)

func decodeJSON(b []byte, v any) error { return json.Unmarshal(b, v) }

// deliver passes a provider's answer on to the renter, meters it, and
// records how the provider did. A stream goes through chunk by chunk, each
// flushed as it arrives; nothing is buffered.
func (x *exchange) deliver(w http.ResponseWriter, r *http.Request, c *candidate, a *answer, attempts int) {
	defer a.close()
	defer x.renterWrites(w)() // a renter who stops reading must not hold the provider's slot
	h := w.Header()
	h.Set("Content-Type", answerType(a))
	h.Set("X-Idlegrid-Node", c.NodeID)
	if ra := a.resp.Header.Get("Retry-After"); ra != "" {
		h.Set("Retry-After", ra)
	}
	if a.resp.StatusCode != http.StatusOK { // the renter's own mistake, as the model server saw it
		x.res.release(0) // before the answer: the renter's next request may follow it at once
		h.Set("Content-Length", strconv.Itoa(len(a.first)))
		w.WriteHeader(a.resp.StatusCode)
		w.Write(a.first)
		x.g.health.success(c.up, x.upstreamTTFT(a), 0) // the provider is fine
		return
	}
	var m openai.Metered
	var ttft time.Duration
	var broke error
	if a.complete {
		body := x.echo(a.first)
		h.Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(http.StatusOK)
		x.res.done() // the key's slot, before the answer: the renter's next request may follow it at once
		x.writeWhole(w, body)
		// Out now, in one write, rather than when the handler returns:
		// the renter need not wait for the metering below.
		http.NewResponseController(w).Flush()
		ttft = time.Since(x.start)
		m = openai.MeterAnswer(x.req.Endpoint, a.first)
	} else {
		h.Set("Cache-Control", "no-cache")
		h.Del("Content-Length")
		w.WriteHeader(http.StatusOK)
		sm := openai.StreamMeter{Endpoint: x.req.Endpoint}
		ttft, broke = x.pass(w, a, &sm)
		sm.End() // the last event counts though the stream ends without its blank line
		m = sm.Metered
	}
	renterGone := errors.Is(broke, errRenterGone) || r.Context().Err() != nil
	latency := time.Since(x.start)
	u := x.usage(c, m)
	switch {
	case broke == nil && !x.failed:
		tps := tokensPerSecond(u.out, latency-ttft, a.complete, latency)
		x.g.health.success(c.up, x.upstreamTTFT(a), tps)
	case renterGone:
		x.g.health.release(c.up)
	case broke == nil: // a response that failed for its model server's own error, as a stream that broke off
		x.g.health.failure(c.up)
		x.g.log.Warn("gateway: a response failed for its model server's error", "request", x.id, "node", c.NodeID)
	default:
		x.g.health.failure(c.up)
		x.g.log.Warn("gateway: a stream broke off after its first byte", "request", x.id, "node", c.NodeID, "err", broke)
	}
	x.meter(c, u, ttft, latency, attempts)
}

// writeWhole writes a whole answer in pieces, each with StallTimeout to
// go (renterWrites): a renter on a slow link may take long over a big
// answer, but not stop reading it.
func (x *exchange) writeWhole(w http.ResponseWriter, b []byte) {
	const piece = 64 << 10
	rc := http.NewResponseController(w)
	for len(b) > 0 {
		n := min(len(b), piece)
		rc.SetWriteDeadline(time.Now().Add(x.g.cfg.StallTimeout))
		if _, err := w.Write(b[:n]); err != nil {
			return
		}
		b = b[n:]
	}
}

// renterWrites gives the renter StallTimeout to take each write of the
// answer (pass moves it on before each of a stream's), as a provider gets
// StallTimeout for each of its reads: a renter that stops reading, whose
// connection's buffers fill, would otherwise hold the provider's slot
// for as long as it keeps the connection. The returned func clears the
// deadline, so that the connection's next request starts without it.
func (x *exchange) renterWrites(w http.ResponseWriter) (clear func()) {
	rc := http.NewResponseController(w)
	if rc.SetWriteDeadline(time.Now().Add(x.g.cfg.StallTimeout)) != nil {
		return func() {} // a writer without deadlines (a test's recorder)
	}
	return func() { rc.SetWriteDeadline(time.Time{}) }
}

// answerType is the Content-Type the renter gets: JSON for a whole answer
// or an error, an event stream for a stream. The provider's own is not
// passed on: it is served from the server's address, where a browser
// must never take a provider's answer for a page.
func answerType(a *answer) string {
	if a.complete || a.resp.StatusCode != http.StatusOK {
		return "application/json"
	}
	return "text/event-stream"
}

// upstreamTTFT is the provider's time to first byte for the latency sort:
// a stream's; 0 (not measured) for a non-streamed request, whose first
// byte comes with the whole answer, which would count its length as
// latency.
func (x *exchange) upstreamTTFT(a *answer) time.Duration {
	if !x.req.Stream {
		return 0
	}
	return a.ttft
}

// errRenterGone is why a stream ended when the renter stopped reading.
var errRenterGone = errors.New("the renter went away")

// pass copies a stream to the renter, flushing every piece, and meters it
// on the way with sm. broke is why it ended early: the provider failed or
// stalled, or the renter went away (errRenterGone).
func (x *exchange) pass(w http.ResponseWriter, a *answer, sm *openai.StreamMeter) (ttft time.Duration, broke error) {
	rc := http.NewResponseController(w)
	var drop *openai.UsageDropper // the usage event the gateway asked for, unless the renter did
	if !x.req.IncludeUsage {
		drop = &openai.UsageDropper{}
	}
	events := x.responseEvents()
	write := func(p []byte) error {
		rc.SetWriteDeadline(time.Now().Add(x.g.cfg.StallTimeout)) // see renterWrites
		if _, err := w.Write(p); err != nil {
			return fmt.Errorf("%w: %v", errRenterGone, err)
		}
		if err := rc.Flush(); err != nil {
			return fmt.Errorf("%w: %v", errRenterGone, err)
		}
		return nil
	}
	send := func(p []byte) error {
		if endsStream(p) {
			x.res.done() // the key's slot, before the stream's end: the renter's next request may follow it at once
		}
		out := p
		if drop != nil {
			out = drop.Pass(p)
		} else if events != nil {
			out = x.passEvents(events, events.Pass(p))
		}
		if len(out) > 0 {
			if err := write(out); err != nil {
				return err
			}
		}
		sm.Write(p)
		return nil
	}
	if err := send(a.first); err != nil {
		return time.Since(x.start), err
	}
	ttft = time.Since(x.start)
	buf := *a.buf
	for {
		n, err := a.read(buf, x.g.cfg.StallTimeout)
		if n > 0 {
			if werr := send(buf[:n]); werr != nil {
				return ttft, werr
			}
		}
		if errors.Is(err, io.EOF) {
			var rest []byte // an event never ended goes on as it came
			if drop != nil {
				rest = drop.Rest()
			} else if events != nil {
				rest = x.passEvents(events, events.Rest())
			}
			if len(rest) > 0 {
				if werr := write(rest); werr != nil {
					return ttft, werr
				}
			}
			return ttft, nil
		} else if err != nil {
			if cause := contextCause(a); cause != nil {
				err = cause
			}
			x.streamError(w, rc, err)
			return ttft, err
		}
	}
}

// responseEvents is the filter a Responses API stream passes through
// (openai.ResponseEvents); nil for other endpoints.
func (x *exchange) responseEvents() *openai.ResponseEvents {
	if x.kept == nil {
		return nil
	}
	k := x.kept
	return &openai.ResponseEvents{Echoed: k.echoed(), MaxEvent: int(x.g.cfg.MaxAnswerBytes)}
}

// passEvents returns out, what the filter passed of the stream, followed
// by its last event once it came, the response kept first (keep).
func (x *exchange) passEvents(f *openai.ResponseEvents, out []byte) []byte {
	final, response := f.TakeFinal()
	if final == nil {
		return out
	}
	x.keep(response)
	return append(out, final...)
}

// streamEnd is the event that ends an OpenAI stream, after which a
// renter's SDK reads no more, at the start of a line (after a \n, or a
// lone \r, as server-sent events allow).
var streamEnd, streamEndCR = []byte("\ndata: [DONE]"), []byte("\rdata: [DONE]")

// endsStream reports whether p, read from a stream, holds its end: the
// event at the start of a line (a model's text, inside an event's JSON,
// has its line ends escaped).
func endsStream(p []byte) bool {
	return bytes.HasPrefix(p, streamEnd[1:]) || bytes.Contains(p, streamEnd) || bytes.Contains(p, streamEndCR)
}

func contextCause(a *answer) error {
	if c := a.ctx.Err(); c == nil {
		return nil
	}
	return context.Cause(a.ctx)
}

// streamError ends a stream that broke off with an error event, in
// OpenAI's format, so that the renter's SDK reports it.
func (x *exchange) streamError(w http.ResponseWriter, rc *http.ResponseController, err error) {
	msg := "the provider's stream broke off: " + err.Error()
	if errors.Is(err, errStalled) {
		msg = "the provider's stream stalled for over " + x.g.cfg.StallTimeout.String()
	}
	b, _ := json.Marshal(ErrorBody(idlegrid.Errorf(idlegrid.EUNAVAILABLE, "%s", msg)))
	x.res.done() // the key's slot, before the stream's last event
	// The last write's deadline ends when the stall is declared: the event
	// saying why gets a deadline of its own.
	rc.SetWriteDeadline(time.Now().Add(x.g.cfg.StallTimeout))
	w.Write([]byte("data: "))
	w.Write(b)
	w.Write([]byte("\n\n"))
	rc.Flush()
}

// tokensPerSecond is the completion's speed: after the first byte for a
// stream, over the whole request otherwise; 0 when unknown.
func tokensPerSecond(out int64, streaming time.Duration, whole bool, latency time.Duration) float64 {
	d := streaming
	if whole {
		d = latency
	}
	if out <= 0 || d <= 0 {
		return 0
	}
	return float64(out) / d.Seconds()
}

// tokens is what an answer is charged for.
type tokens struct {
	in, out  int64
	upstream bool // the model server's usage, not the gateway's count
}

// usage is what the renter is charged for an answer: the model server's
// usage (or the gateway's count when it gave none), capped by what the
// request and the answer relayed could honestly have used, so that a
// provider bills no more than it served. A cap on the model server's
// usage is logged and counted.
func (x *exchange) usage(c *candidate, m openai.Metered) tokens {
	in, out, upstream := m.Tokens(x.req.PromptTokens)
	if x.req.Endpoint == openai.Embeddings {
		out = 0
	}
	mostIn, mostOut := x.req.MostPromptTokens(len(x.body)), x.req.MostCompletionTokens(m.GeneratedBytes)
	if upstream && (in > mostIn || out > mostOut) {
		x.g.log.Warn("gateway: the model server reported more tokens than the request could have used; charging the most it could",
			"request", x.id, "node", c.NodeID, "model", x.req.Model,
			"input", in, "max_input", mostIn, "output", out, "max_output", mostOut)
		x.g.metrics.capped(x.req.Model, in > mostIn, out > mostOut)
	}
	return tokens{in: min(in, mostIn), out: min(out, mostOut), upstream: upstream}
}

// meter charges the renter for what the provider served, through the
// meter, and adds the request to the statistics.
func (x *exchange) meter(c *candidate, t tokens, ttft, latency time.Duration, attempts int) {
	in, out := t.in, t.out
	source := idlegrid.UsageCounted
	if t.upstream {
		source = idlegrid.UsageUpstream
	}
	u := &idlegrid.InferenceUsage{
		ID: x.id, RenterID: x.caller.AccountID, KeyID: x.caller.KeyID, ProviderID: c.ProviderID, NodeID: c.NodeID,
		Model: x.req.Model, Endpoint: string(x.req.Endpoint), Stream: x.req.Stream,
		InputTokens: in, OutputTokens: out, Source: source, ChargeMicros: x.capToLimits(c.Model.Cost(in, out)),
		LatencyMicros: latency.Microseconds(), TTFTMicros: ttft.Microseconds(), Attempts: attempts, Status: http.StatusOK,
		CreatedAt: x.g.cfg.Clock.Now(),
	}
	var tr *idlegrid.Transfer
	u.FeeMicros, tr = x.g.rules.Inference(u, u.CreatedAt)
	x.res.done()
	x.res.hold(u.ChargeMicros)
	x.g.meter.add(idlegrid.InferenceCharge{Usage: u, Transfer: tr}, x.res)
	smp := sample{latency: latency, ttft: ttft, streamed: x.req.Stream, tokens: in + out, charge: u.ChargeMicros}
	if out > 0 && latency > ttft {
		smp.tps = tokensPerSecond(out, latency-ttft, !x.req.Stream, latency)
	}
	x.g.stats.add(x.req.Model, smp)
	x.g.metrics.served(x.req.Model, latency, ttft, x.req.Stream, in, out, u.ChargeMicros)
}

// capToLimits is charge for no more than the renter's monthly spend limits
// leave the request (reservation.limitLeft): its usage may come to more
// than it reserved (a prompt the estimate undercounts, a completion
// without max_tokens), and a limit is the renter's word on what may be
// spent, which the provider's usage does not override. A capped charge is
// logged and counted, as one capped at the balance is (meter.go).
func (x *exchange) capToLimits(charge idlegrid.Micros) idlegrid.Micros {
	left, which, ok := x.res.limitLeft()
	if !ok || charge <= left {
		return charge
	}
	x.g.log.Warn("gateway: an inference charge was more than the spend limit left; charged what was left", "request", x.id,
		"renter", x.caller.AccountID, "key", x.caller.KeyID, "limit", which, "charge", charge, "charged", left)
	x.g.metrics.chargeCapped(capSpendLimit)
	return left
}
