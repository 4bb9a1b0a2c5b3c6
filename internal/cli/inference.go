package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/httpapi/wire"
)

// inferenceCommand is "idlegrid inference": the inference gateway from the
// terminal. Requests themselves go through any OpenAI client.
type inferenceCommand struct{ env *env }

func (c *inferenceCommand) Run(ctx context.Context, args []string) error {
	return c.env.runGroup("inference", `The OpenAI-compatible gateway to the models providers serve. Point any
OpenAI client at this server's /v1/ with your API key (docs/gateway.md).`, []subcommand{
		{"models", "the models served now, with the cheapest prices and how many providers serve each", func(a []string) error { return c.models(ctx, a) }},
		{"stats", "per model: latency, time to first token, tokens/s, $ per million tokens, requests waiting", func(a []string) error { return c.stats(ctx, a) }},
		{"usage", "your metered requests, newest first: tokens, latency, charge", func(a []string) error { return c.usage(ctx, a) }},
		{"conversations", "what your kept conversations hold, and the most they may", func(a []string) error { return c.conversations(ctx, a) }},
	}, args)
}

func (c *inferenceCommand) models(ctx context.Context, args []string) error {
	fs := c.env.flags("inference models", help{
		usage: "idlegrid inference models [--json]",
		about: `List the models that providers serve now through the gateway, with the
cheapest price per million prompt and completion tokens, and how many
providers serve each. Providers cut off by their circuit breaker, or
without a live session, do not count.`,
		examples: "idlegrid inference models\n idlegrid inference models --json",
	})
	r := c.env.remoteFlags(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := fs.parseArgs(args, 0, 0, "no arguments"); err != nil {
		return err
	}
	cl, err := r.client()
	if err != nil {
		return err
	}
	ms, err := cl.InferenceModels(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(c.env.Out, nonNil(ms))
	}
	if len(ms) == 0 {
		_, err := io.WriteString(c.env.Out, "no model is served now; providers list theirs in the agent config (docs/gateway.md)\n")
		return err
	}
	t := newTable(c.env.Out, "MODEL", "PROVIDERS", "PROMPT $/M TOKENS", "COMPLETION $/M TOKENS")
	for _, m := range ms {
		in, out := "-", "-"
		if p := m.Pricing; p != nil {
			in, out = idlegrid.Micros(p.InputMicrosPerMTokens).String(), idlegrid.Micros(p.OutputMicrosPerMTokens).String()
		}
		t.row(m.ID, m.Providers, in, out)
	}
	return t.flush()
}

func (c *inferenceCommand) stats(ctx context.Context, args []string) error {
	fs := c.env.flags("inference stats", help{
		usage: "idlegrid inference stats [--json]",
		about: `Show the gateway's figures per model over its recent requests: latency
and time to first token at p50 and p95 (of streamed requests; "-" when
none streamed), completion tokens a second, what a
million tokens cost on average, and the requests waiting now for a
provider with room. Then each provider as routing sees it now: the requests
in flight there over its max concurrency, those its model server says wait
in its queue, the load they make, its time to first token, tokens a second
and share of requests answered (moving averages), and its circuit breaker;
then the breakers that have tripped.`,
		examples: "idlegrid inference stats\n idlegrid inference stats --json",
	})
	r := c.env.remoteFlags(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := fs.parseArgs(args, 0, 0, "no arguments"); err != nil {
		return err
	}
	cl, err := r.client()
	if err != nil {
		return err
	}
	st, err := cl.InferenceStats(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(c.env.Out, st)
	}
	return printInferenceStats(c.env.Out, st)
}

// printInferenceStats shows the models' figures, then the providers' load
// and the breakers.
func printInferenceStats(out io.Writer, st *wire.InferenceStats) error {
	if err := printModelStats(out, st); err != nil {
		return err
	}
	if err := printProviderLoads(out, st.Providers); err != nil {
		return err
	}
	return printBreakers(out, st.Breakers)
}

// printProviderLoads shows each provider as routing sees it now.
func printProviderLoads(out io.Writer, ps []wire.ProviderLoad) error {
	if len(ps) == 0 {
		return nil
	}
	io.WriteString(out, "\nProviders now (queued: at the node's model server, by its metrics; - when it does not say):\n")
	t := newTable(out, "  NODE", "NAME", "MODEL", "IN FLIGHT", "QUEUED", "LOAD", "TTFT MS", "TOKENS/S", "ANSWERED", "BREAKER")
	for _, p := range ps {
		queued := "-"
		if p.Queued != nil {
			queued = fmt.Sprint(*p.Queued)
		}
		t.row("  "+p.NodeID, p.NodeName, p.Model, fmt.Sprintf("%d/%d", p.InFlight, p.MaxConcurrency), queued, fmt.Sprintf("%.0f%%", 100*p.Load),
			measured("%.0f", p.TTFTMS), measured("%.1f", p.TokensPerSecond), fmt.Sprintf("%.0f%%", 100*p.SuccessRate), p.Breaker)
	}
	if err := t.flush(); err != nil {
		return err
	}
	for _, p := range ps {
		if p.TextCompletionsSkippedUntil != nil {
			fmt.Fprintf(out, "  text completions skip %s (%s) for %s until %s: its model server answered one 404, as one that serves chats only does\n",
				p.NodeID, p.NodeName, p.Model, p.TextCompletionsSkippedUntil.Format(time.RFC3339))
		}
		if p.ResponsesSkippedUntil != nil {
			fmt.Fprintf(out, "  responses skip %s (%s) for %s until %s: its model server answered one 404, as one without the Responses API does\n",
				p.NodeID, p.NodeName, p.Model, p.ResponsesSkippedUntil.Format(time.RFC3339))
		}
	}
	return nil
}

// printBreakers shows the circuit breakers that have tripped.
func printBreakers(out io.Writer, bs []wire.BreakerStats) error {
	if len(bs) == 0 {
		return nil
	}
	io.WriteString(out, "\nCircuit breakers that have tripped:\n")
	t := newTable(out, "  NODE", "NAME", "MODEL", "STATE", "TRIPS", "HALF-OPENS", "CLOSES")
	for _, b := range bs {
		t.row("  "+b.NodeID, orDash(b.NodeName), b.Model, b.State, b.Trips, b.HalfOpens, b.Closes)
	}
	return t.flush()
}

// measured formats a moving average, or "-" when there is none yet.
func measured(format string, x float64) string {
	if x == 0 {
		return "-"
	}
	return fmt.Sprintf(format, x)
}

// ttftCell is a model's time to first token at p50/p95, "-" when none of
// its recent requests streamed (the gateway measures it on streams only).
func ttftCell(m wire.ModelStats) string {
	if m.TTFTP50MS == 0 && m.TTFTP95MS == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f/%.0f", m.TTFTP50MS, m.TTFTP95MS)
}

// printModelStats shows the models' figures and the requests waiting.
func printModelStats(out io.Writer, st *wire.InferenceStats) error {
	if len(st.Models) == 0 && len(st.Waiting) == 0 {
		_, err := io.WriteString(out, "no inference requests yet\n")
		return err
	}
	t := newTable(out, "MODEL", "REQUESTS", "LATENCY P50/P95 MS", "TTFT P50/P95 MS", "TOKENS/S", "$/M TOKENS", "WAITING")
	seen := map[string]bool{}
	for _, m := range st.Models {
		seen[m.Model] = true
		t.row(m.Model, m.Requests, fmt.Sprintf("%.0f/%.0f", m.LatencyP50MS, m.LatencyP95MS),
			ttftCell(m), fmt.Sprintf("%.1f", m.TokensPerSecond), m.MicrosPerMTokens, st.Waiting[m.Model])
	}
	for _, model := range sortedKeys(st.Waiting) {
		if !seen[model] {
			t.row(model, 0, "-", "-", "-", "-", st.Waiting[model])
		}
	}
	return t.flush()
}

func (c *inferenceCommand) usage(ctx context.Context, args []string) error {
	fs := c.env.flags("inference usage", help{
		usage: "idlegrid inference usage [--limit N] [--before ID] [--json]",
		about: `List your metered gateway requests, newest first: model, node, tokens in
and out (and whether the model server reported them or the gateway
counted them), latency, time to first token, providers tried, the status
and the charge. A provider sees the requests its nodes served. A full
page ends with the command for the next, which --before the last
request's ID asks for.`,
		examples: "idlegrid inference usage\n idlegrid inference usage --limit 1000 --json",
	})
	r := c.env.remoteFlags(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	limit := fs.Int("limit", 100, "at most this many requests (1–1000)")
	before := fs.String("before", "", "the requests older than this one, the last of the page before")
	if _, err := fs.parseArgs(args, 0, 0, "no arguments"); err != nil {
		return err
	}
	if *limit < 1 || *limit > 1000 {
		return usagef("--limit must be between 1 and 1000, got %d", *limit)
	}
	cl, err := r.client()
	if err != nil {
		return err
	}
	us, err := cl.InferenceUsage(ctx, idlegrid.UsageFilter{Limit: *limit, Before: *before})
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(c.env.Out, nonNil(us))
	}
	if len(us) == 0 {
		_, err := io.WriteString(c.env.Out, "no inference requests yet\n")
		return err
	}
	t := newTable(c.env.Out, "AT", "MODEL", "ENDPOINT", "NODE", "TOKENS IN/OUT", "COUNTED BY", "LATENCY", "TTFT", "TRIES", "STATUS", "CHARGE")
	for _, u := range us {
		t.row(u.CreatedAt.UTC().Format(time.RFC3339), u.Model, u.Endpoint, u.NodeID, fmt.Sprintf("%d/%d", u.InputTokens, u.OutputTokens), u.Source,
			micros(u.LatencyMicros), micros(u.TTFTMicros), u.Attempts, u.Status, u.ChargeMicros)
	}
	if err := t.flush(); err != nil {
		return err
	}
	return nextPage(c.env.Out, "idlegrid inference usage", len(us), *limit, us[len(us)-1].ID)
}

func (c *inferenceCommand) conversations(ctx context.Context, args []string) error {
	fs := c.env.flags("inference conversations", help{
		usage: "idlegrid inference conversations [--json]",
		about: `Show what your conversations (POST /v1/conversations) hold, all
together: their items and the items' characters, and the most this
server keeps for an account. Past either, adding to them is refused until
you delete conversations or items you no longer need.`,
		examples: "idlegrid inference conversations\n idlegrid inference conversations --json",
	})
	r := c.env.remoteFlags(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := fs.parseArgs(args, 0, 0, "no arguments"); err != nil {
		return err
	}
	cl, err := r.client()
	if err != nil {
		return err
	}
	u, err := cl.ConversationUsage(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(c.env.Out, u)
	}
	_, err = fmt.Fprintf(c.env.Out, "your conversations hold %s items%s and %s characters%s\n",
		humanize.Comma(u.Items), ofBound(u.MaxItems), humanize.Comma(u.Chars), ofBound(u.MaxChars))
	return err
}

// ofBound is " of N" for a bound of N, " (no bound)" for none.
func ofBound(n *int64) string {
	if n == nil {
		return " (no bound)"
	}
	return " of " + humanize.Comma(*n)
}

// micros shows a duration in microseconds as milliseconds, e.g. "12.3ms".
func micros(us int64) string {
	return (time.Duration(us) * time.Microsecond).Round(100 * time.Microsecond).String()
}
