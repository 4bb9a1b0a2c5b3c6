package cli

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/idlegrid/idlegrid"
)

// routingFlags are the flags of "key routing" that change a field.
type routingFlags struct {
	sort, fallbacks, sticky, maxPrompt, maxCompletion string
	order, only, ignore, region, residency            stringList
}

func (c *keyCommand) routing(ctx context.Context, args []string) error {
	fs := c.env.flags("key routing", help{
		usage: "idlegrid key routing ID [--sort price|latency|throughput] [--region R]... [--residency R]...\n\t  [--only P]... [--ignore P]... [--order P]... [--max-prompt-price AMOUNT] [--max-completion-price AMOUNT]\n\t  [--fallbacks true|false] [--sticky true|false] [--clear] [--json]",
		about: `Show or set the default routing of one of your API keys: the "provider" object
(docs/gateway.md) that its inference requests get. A request's own "provider"
object overrides it field by field; a list the request sends, even an empty one,
replaces the key's.

With no flag it shows the key's routing. Each flag sets one field and keeps the
rest; a list flag may repeat or take commas, and "none" empties it. --clear
removes the key's routing first. The gateway applies a change within seconds.
Providers are node IDs or provider account IDs; prices are per million tokens.`,
		examples: `idlegrid key routing key_abc123
 idlegrid key routing key_abc123 --residency EU --sort price
 idlegrid key routing key_abc123 --ignore node_x,node_y --max-completion-price 2.50
 idlegrid key routing key_abc123 --region none
 idlegrid key routing key_abc123 --clear`,
	})
	r := c.env.remoteFlags(fs)
	var f routingFlags
	fs.StringVar(&f.sort, "sort", "", "order providers by price, latency or throughput (\"none\": the default, price weighted by load and reliability)")
	fs.Var(&f.region, "region", "only providers in these regions, e.g. eu-west")
	fs.Var(&f.residency, "residency", "only providers whose data stays in these jurisdictions, e.g. EU")
	fs.Var(&f.only, "only", "only these providers")
	fs.Var(&f.ignore, "ignore", "never these providers")
	fs.Var(&f.order, "order", "try these providers first, in this order")
	fs.StringVar(&f.maxPrompt, "max-prompt-price", "", "the most per million prompt tokens, e.g. 1.50 (\"none\": no cap)")
	fs.StringVar(&f.maxCompletion, "max-completion-price", "", "the most per million completion tokens (\"none\": no cap)")
	fs.StringVar(&f.fallbacks, "fallbacks", "", "false: one provider only, no failover")
	fs.StringVar(&f.sticky, "sticky", "", "false: no routing by prompt prefix")
	clear := fs.Bool("clear", false, "remove the key's routing (before applying any other flag)")
	asJSON := fs.Bool("json", false, "print JSON")
	args, err := fs.parseArgs(args, 1, 1, "one key ID")
	if err != nil {
		return err
	}
	changed := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { changed[fl.Name] = true })
	delete(changed, "addr")
	delete(changed, "key")
	delete(changed, "json")
	delete(changed, "clear")
	if err := f.apply(&idlegrid.Routing{}, changed); err != nil { // refuse bad flags before changing anything
		return err
	}
	cl, err := r.client()
	if err != nil {
		return err
	}
	keyID := args[0]
	if *clear {
		if err := cl.RemoveKeyRouting(ctx, keyID); err != nil {
			return err
		}
	}
	kr, err := cl.KeyRouting(ctx, keyID)
	if err != nil {
		return err
	}
	if len(changed) > 0 {
		routing := kr.Routing
		if err := f.apply(&routing, changed); err != nil {
			return err
		}
		if kr, err = cl.SetKeyRouting(ctx, keyID, routing); err != nil {
			return err
		}
	}
	if *asJSON {
		return printJSON(c.env.Out, kr)
	}
	return printRouting(c.env, kr)
}

// apply sets the fields whose flags were given.
func (f *routingFlags) apply(r *idlegrid.Routing, changed map[string]bool) error {
	if changed["sort"] {
		switch r.Sort = noneTo(f.sort, ""); r.Sort {
		case "", idlegrid.RoutingSortPrice, idlegrid.RoutingSortLatency, idlegrid.RoutingSortThroughput:
		default:
			return usagef("--sort: want price, latency, throughput or none, got %q", f.sort)
		}
	}
	for _, l := range []struct {
		name string
		from stringList
		to   *[]string
	}{{"region", f.region, &r.Region}, {"residency", f.residency, &r.DataResidency}, {"only", f.only, &r.Only},
		{"ignore", f.ignore, &r.Ignore}, {"order", f.order, &r.Order}} {
		if changed[l.name] {
			*l.to = nil
			if !(len(l.from) == 1 && l.from[0] == "none") {
				*l.to = l.from
			}
		}
	}
	for _, b := range []struct {
		name, text string
		to         **bool
	}{{"fallbacks", f.fallbacks, &r.AllowFallbacks}, {"sticky", f.sticky, &r.Sticky}} {
		if !changed[b.name] {
			continue
		}
		v, err := strconv.ParseBool(b.text)
		if err != nil {
			return usagef("--%s: want true or false, got %q", b.name, b.text)
		}
		*b.to = &v
	}
	for _, p := range []struct {
		name, text string
		to         func(mp *idlegrid.RoutingMaxPrice) **idlegrid.Micros
	}{
		{"max-prompt-price", f.maxPrompt, func(mp *idlegrid.RoutingMaxPrice) **idlegrid.Micros { return &mp.Prompt }},
		{"max-completion-price", f.maxCompletion, func(mp *idlegrid.RoutingMaxPrice) **idlegrid.Micros { return &mp.Completion }},
	} {
		if !changed[p.name] {
			continue
		}
		if r.MaxPrice == nil {
			r.MaxPrice = &idlegrid.RoutingMaxPrice{}
		}
		*p.to(r.MaxPrice) = nil
		if p.text != "none" {
			m, err := idlegrid.ParseMicros(p.text)
			if err != nil || m < 0 {
				return usagef("--%s: want a price per million tokens such as 1.50, or none, got %q", p.name, p.text)
			}
			*p.to(r.MaxPrice) = &m
		}
	}
	if r.MaxPrice != nil && r.MaxPrice.Prompt == nil && r.MaxPrice.Completion == nil {
		r.MaxPrice = nil
	}
	return nil
}

func noneTo(s, none string) string {
	if s == "none" {
		return none
	}
	return s
}

func printRouting(e *env, kr *idlegrid.KeyRouting) error {
	r := kr.Routing
	if r.IsZero() {
		fmt.Fprintf(e.Out, "API key %s has no default routing: its requests use the gateway's default\n", kr.KeyID)
		return nil
	}
	fmt.Fprintf(e.Out, "default routing of API key %s:\n", kr.KeyID)
	line := func(name, v string) {
		if v != "" {
			fmt.Fprintf(e.Out, "  %-22s %s\n", name, v)
		}
	}
	line("sort", r.Sort)
	line("region", strings.Join(r.Region, ", "))
	line("data residency", strings.Join(r.DataResidency, ", "))
	line("only", strings.Join(r.Only, ", "))
	line("ignore", strings.Join(r.Ignore, ", "))
	line("order", strings.Join(r.Order, ", "))
	if mp := r.MaxPrice; mp != nil {
		if mp.Prompt != nil {
			line("max prompt price", mp.Prompt.String()+" per M tokens")
		}
		if mp.Completion != nil {
			line("max completion price", mp.Completion.String()+" per M tokens")
		}
	}
	if r.AllowFallbacks != nil {
		line("fallbacks", strconv.FormatBool(*r.AllowFallbacks))
	}
	if r.Sticky != nil {
		line("sticky", strconv.FormatBool(*r.Sticky))
	}
	return nil
}
