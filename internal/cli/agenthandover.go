package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"time"

	"github.com/idlegrid/idlegrid/internal/agent"
	"github.com/idlegrid/idlegrid/internal/dirlock"
)

// ExitHandedOver is the agent's exit status once it has handed its
// workloads over to the next agent (SIGUSR2, or a stop it was asked to
// hand over at): deploy/idlegrid-agent.service restarts the agent on it,
// and counts it as no failure.
const ExitHandedOver = 75

// defaultHandOverWithin is how long 'idlegrid agent hand-over' asks for
// by default: enough for a rolling update of a few nodes.
const defaultHandOverWithin = 30 * time.Minute

// handOver is 'idlegrid agent hand-over': it asks the agent running with
// a data dir to hand its workloads over, rather than stop them, at its
// next stop (agent.AskHandOverAtStop).
func (c *agentCommand) handOver(args []string) error {
	fs := c.env.flags("agent hand-over", help{
		usage: "idlegrid agent hand-over (--config agent.yaml | --data DIR) [--within 30m | --undo]",
		about: `Ask the agent running with this data dir to hand its workloads over to the
next agent, rather than stop them, when it is next stopped (SIGTERM: a pod
deleted by a Kubernetes rolling update, docker stop, systemctl restart),
if that comes within --within. It leaves them running, as SIGUSR2 does at
once, and the next agent started on the data dir takes them back. Where
the agent can be sent SIGUSR2 and then replaced, as systemd's 'systemctl
reload idlegrid-agent' does, that is simpler; this is for where it
cannot: in a pod, the kubelet would start the same image again.

The ask is for the agent running when it is made, and for one stop: the
stop takes it, and an agent that starts drops one left over; --undo
withdraws it. Start the next agent within the server's missed heartbeats
(30 s by default) of the old one's exit, or the node's leases are lost.`,
		examples: `kubectl -n idlegrid exec POD -- /idlegrid agent hand-over --config /etc/idlegrid/agent.yaml   # then: kubectl -n idlegrid set image ds/idlegrid-agent agent=…:NEW
		idlegrid agent hand-over --data /var/lib/idlegrid --within 10m`,
	})
	var configPath, dataDir string
	var within time.Duration
	fs.StringVar(&configPath, "config", "", "the agent's config file, for its data dir")
	fs.StringVar(&dataDir, "data", "", "the agent's data dir (overrides the config's)")
	fs.DurationVar(&within, "within", defaultHandOverWithin, "how long the ask holds: a stop after it stops the workloads, as without it")
	undo := fs.Bool("undo", false, "withdraw the ask: the agent's next stop stops its workloads")
	if _, err := fs.parseArgs(args, 0, 0, "no arguments"); err != nil {
		return err
	}
	if within < time.Second || within > 24*time.Hour {
		return usagef("--within must be between 1s and 24h, got %s", within)
	}
	dataDir, err := handOverDataDir(configPath, dataDir)
	if err != nil {
		return err
	}
	if *undo {
		return c.withdrawHandOver(dataDir)
	}
	if err := agentRunsIn(dataDir); err != nil {
		return err
	}
	now := time.Now()
	if err := agent.AskHandOverAtStop(dataDir, now, within); err != nil {
		return withHint(err, "run it as a user that may write the agent's data dir (root, or the agent's own)")
	}
	until := now.Add(within)
	fmt.Fprintf(c.env.Out, "asked: the agent with data dir %s hands its workloads over to the next agent if it is stopped before %s.\n"+
		"Stop it now and start the next agent on the same data dir within the server's missed heartbeats (30 s by default).\n",
		dataDir, until.Format("15:04:05 MST"))
	return nil
}

// withdrawHandOver is 'idlegrid agent hand-over --undo'.
func (c *agentCommand) withdrawHandOver(dataDir string) error {
	asked, err := agent.TakeHandOverAtStop(dataDir, time.Now())
	switch {
	case err != nil && !errors.Is(err, agent.ErrBadHandOverAsk):
		return withHint(err, "run it as a user that may write the agent's data dir (root, or the agent's own)")
	case asked:
		fmt.Fprintf(c.env.Out, "withdrawn: the agent with data dir %s stops its workloads when it is stopped, as it did before the ask\n", dataDir)
	default:
		fmt.Fprintf(c.env.Out, "no ask to withdraw: the agent with data dir %s stops its workloads when it is stopped\n", dataDir)
	}
	return nil
}

// handOverDataDir is the data dir 'idlegrid agent hand-over' names: --data,
// or the config's.
func handOverDataDir(configPath, dataDir string) (string, error) {
	switch {
	case dataDir != "":
		return dataDir, nil
	case configPath == "":
		return "", usagef("give --config (the agent's config file) or --data (its data dir)")
	}
	cfg, err := loadAgentConfig(configPath, nil)
	if err != nil {
		return "", withHint(err, "give the running agent's config with --config, or its data dir with --data")
	}
	return cfg.DataDir, nil
}

// agentRunsIn returns an error unless an agent holds dataDir's lock.
func agentRunsIn(dataDir string) error {
	if _, err := os.Stat(dataDir); err != nil {
		return withHint(err, "give the running agent's data dir (--data, or data_dir: in --config)")
	} else if _, err := os.Stat(filepath.Join(dataDir, "node.key")); err != nil {
		return fmt.Errorf("%s is not an agent's data dir: it holds no node.key; give the running agent's (--data, or data_dir: in --config)", dataDir)
	}
	lock, err := dirlock.Take(dataDir)
	if errors.Is(err, dirlock.ErrHeld) {
		return nil
	} else if err != nil {
		return err
	}
	lock.Release()
	return fmt.Errorf("no agent is running with data dir %s: there is nothing to hand over; start the new agent instead", dataDir)
}

// dropHandOverAsk drops an ask to hand over at the next stop that the
// agent before this one left: an ask is for the agent running when it is
// made, so that a later stop of this one (systemctl stop) stops the work.
func dropHandOverAsk(dataDir string, log *slog.Logger) {
	if asked, err := agent.TakeHandOverAtStop(dataDir, time.Now()); asked || err != nil {
		log.Info("dropped an ask to hand over at the next stop, which was for the agent before this one", "err", err)
	}
}

// stopOrHandOver returns the context the agent runs in: ctx's end (a stop
// signal) ends it, unless the agent was asked to hand over at this stop
// ('idlegrid agent hand-over'), when it hands over instead. stop ends the
// watch.
func stopOrHandOver(ctx context.Context, a *agent.Agent, dataDir string, log *slog.Logger) (run context.Context, stop func()) {
	run, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done, ended := make(chan struct{}), make(chan struct{})
	go func() { // owned by stop
		defer close(ended)
		select {
		case <-done:
			return
		case <-ctx.Done():
		}
		asked, err := agent.TakeHandOverAtStop(dataDir, time.Now())
		if err != nil {
			log.Warn("cannot read whether to hand over at this stop; stopping the workloads", "err", err)
		}
		if asked {
			err := a.HandOver()
			if err == nil {
				log.Info("asked to hand over at this stop ('idlegrid agent hand-over'): handing the workloads over to the next agent")
				return
			}
			log.Warn("asked to hand over at this stop, but cannot; stopping the workloads", "err", err)
		}
		cancel()
	}()
	return run, func() {
		cancel()
		close(done)
		<-ended
	}
}

// handOverOnSignal asks a to hand its workloads over (agent.HandOver) on
// SIGUSR2, until stop is called. Only the docker runtime's workloads
// outlive the agent's process; with another runtime the signal is
// refused in the log.
func handOverOnSignal(a *agent.Agent, runtimeName string, log *slog.Logger) (stop func()) {
	if len(handOverSignals) == 0 {
		return func() {}
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, handOverSignals...)
	done, ended := make(chan struct{}), make(chan struct{})
	go func() { // owned by stop
		defer close(ended)
		for {
			select {
			case <-done:
				return
			case <-sig:
			}
			if runtimeName != agent.RuntimeDocker {
				log.Warn("asked to hand the workloads over to the next agent, but the "+runtimeName+" runtime's workloads live in this process and would end with it; stop the agent instead (SIGTERM)", "signal", "SIGUSR2")
			} else if err := a.HandOver(); err != nil {
				log.Warn("cannot hand the workloads over to the next agent", "err", err)
			}
		}
	}()
	return func() {
		signal.Stop(sig)
		close(done)
		<-ended
	}
}
