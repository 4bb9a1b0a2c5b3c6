package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/idlegrid/idlegrid/internal/trustsim"
)

// simCheatersCommand is "idlegrid sim cheaters": cheating providers
// against the real coordinator, and how fast the trust checks catch them.
type simCheatersCommand struct{ env *env }

func (c *simCheatersCommand) Run(ctx context.Context, args []string) error {
	fs := c.env.flags("sim cheaters", help{
		usage: "idlegrid sim cheaters [--providers N] [--cheaters FRACTION] [--behaviours LIST] [--leases N] [--verifiable FRACTION] [--flag-score S] [--policy FILE] [--seed S] [--json]",
		about: `Run simulated providers, honest and cheating, against the real coordinator
(server.Open on a SQLite store in a temporary folder, on a virtual clock)
and report how many cheaters the market flags within their first --leases
leases, the median leases to detection, and how many honest providers it
flags by mistake. Each provider is an in-process agent with its own node
key that joins, attests, answers hardware challenges, heartbeats, runs
leases and signs receipts through the coordinator's API; renters submit
real jobs, --verifiable of them verifiable.

Cheaters are dealt evenly over the behaviours: lies-gpu (offers a better
GPU than it has), inflates-receipts (claims more GPU-seconds than an
interval holds), bills-offline (bills while it skips heartbeats),
drops-jobs (never starts, or silently stops, half its leases) and
fakes-uptime (heartbeats and bills, never runs the work, prints made-up
output). A provider is flagged by an upheld dispute, a quarantined node,
or the reputation flag: a provider score below --flag-score with at least
two incidents against it (one may be an accident). docs/trust.md, "Cheating
providers, simulated", defines each. The same seed gives the same table.`,
		examples: `idlegrid sim cheaters
		idlegrid sim cheaters --providers 50 --seed 7 --json
		idlegrid sim cheaters --behaviours drops-jobs,fakes-uptime --policy internal/trustsim/testdata/stricter.yaml`,
	})
	var (
		cfg                trustsim.Config
		behaviours, policy string
		asJSON, quiet      bool
	)
	fs.IntVar(&cfg.Providers, "providers", 200, "providers in the market, one node of one GPU each")
	fs.Float64Var(&cfg.Cheaters, "cheaters", 0.5, "share of providers that cheat, dealt evenly over --behaviours")
	fs.StringVar(&behaviours, "behaviours", "lies-gpu,inflates-receipts,bills-offline,drops-jobs,fakes-uptime", "cheating behaviours to deal, comma-separated")
	fs.IntVar(&cfg.Leases, "leases", 20, "leases each provider is watched for")
	fs.Float64Var(&cfg.Verifiable, "verifiable", 0.5, "share of renters' jobs marked verifiable")
	fs.Float64Var(&cfg.FlagScore, "flag-score", 0, "a provider score below this, with at least two incidents, flags the provider; 0: the policy's reputation.flag_below (default 0.80)")
	fs.Float64Var(&cfg.MaxHours, "max-hours", 14*24, "stop after this much simulated time")
	fs.StringVar(&policy, "policy", "", "trust policy file (YAML, as the server's --trust-policy; docs/trust.md) instead of the default")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "seed for every random draw")
	fs.BoolVar(&asJSON, "json", false, "print the report as JSON")
	fs.BoolVar(&quiet, "quiet", false, "no progress on standard error")
	_, err := fs.parseArgs(args, 0, 0, "no arguments")
	if err != nil {
		return err
	}
	if cfg.Behaviours, err = trustsim.ParseBehaviours(behaviours); err != nil {
		return err
	}
	if cfg.Policy, err = loadTrustPolicy(policy); err != nil {
		return err
	}
	if cfg.Cheaters == 0 {
		cfg.Cheaters = -1 // none, not the default
	}
	if !quiet {
		cfg.Progress = c.env.Err
	}
	return c.run(ctx, cfg, asJSON)
}

func (c *simCheatersCommand) run(ctx context.Context, cfg trustsim.Config, asJSON bool) error {
	began := time.Now()
	r, err := trustsim.Run(ctx, cfg)
	if err != nil {
		return err
	}
	if cfg.Progress != nil {
		fmt.Fprintf(cfg.Progress, "trustsim: done in %s\n", time.Since(began).Round(time.Second))
	}
	if asJSON {
		return printJSON(c.env.Out, r)
	}
	return r.WriteTable(c.env.Out)
}
