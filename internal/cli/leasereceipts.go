package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/nodekey"
)

// checkedReceipt is one receipt of "lease receipts --json", with the
// outcome of checking it here.
type checkedReceipt struct {
	idlegrid.Receipt
	Hash     string `json:"hash"`
	Verified bool   `json:"verified"`
	Problem  string `json:"problem,omitempty"`
}

// checkedReceipts is the --json form of "lease receipts".
type checkedReceipts struct {
	LeaseID       string           `json:"lease_id"`
	NodeID        string           `json:"node_id"`
	NodePublicKey string           `json:"node_public_key"`
	GPUs          int              `json:"gpus"`
	GPUSeconds    int64            `json:"gpu_seconds"`
	Receipts      []checkedReceipt `json:"receipts"`
	Verified      bool             `json:"verified"` // every receipt verified
}

func (c *leaseCommand) receipts(ctx context.Context, args []string) error {
	fs := c.env.flags("lease receipts", help{
		usage: "idlegrid lease receipts ID [--json]",
		about: `Export a lease's usage receipts: what its node signed it ran, interval by
interval, and what the renter was charged from. Each receipt is checked here,
not on the server: its signature against the node's public key, and its place
in the chain (sequence, the previous receipt's hash, no overlap, no more
GPU-seconds than the lease's GPUs could run). A receipt that fails is shown
FAILED and the command exits non-zero.`,
		examples: "idlegrid lease receipts lease_abc123\n idlegrid lease receipts lease_abc123 --json > receipts.json",
	})
	r := c.env.remoteFlags(fs)
	asJSON := fs.Bool("json", false, "print JSON, with each receipt's hash and check")
	args, err := fs.parseArgs(args, 1, 1, "one lease ID")
	if err != nil {
		return err
	}
	cl, err := r.client()
	if err != nil {
		return err
	}
	export, err := cl.ListReceipts(ctx, args[0])
	if err != nil {
		return err
	}
	out := checkReceipts(export, args[0])
	if *asJSON {
		err = printJSON(c.env.Out, out)
	} else {
		err = printReceipts(c.env, out)
	}
	if err != nil {
		return err
	}
	return receiptsVerdict(out)
}

// checkReceipts checks each exported receipt with the node's public key, as
// the export names it, and the chain; leaseID is the lease asked for.
func checkReceipts(x *idlegrid.LeaseReceipts, leaseID string) *checkedReceipts {
	out := &checkedReceipts{LeaseID: x.LeaseID, NodeID: x.NodeID, NodePublicKey: x.NodePublicKey, GPUs: x.GPUs, Verified: true}
	pub, keyErr := nodekey.ParsePublic(x.NodePublicKey)
	var errs []error
	if keyErr == nil {
		errs = nodekey.VerifyReceiptChain(pub, leaseID, x.GPUs, x.Receipts)
	}
	for i, r := range x.Receipts {
		cr := checkedReceipt{Receipt: r, Hash: r.Hash(), Verified: true}
		switch {
		case keyErr != nil:
			cr.Problem = "the node's public key: " + keyErr.Error()
		case errs[i] != nil:
			cr.Problem = errs[i].Error()
		}
		if cr.Problem != "" {
			cr.Verified, out.Verified = false, false
		}
		out.GPUSeconds += r.GPUSeconds
		out.Receipts = append(out.Receipts, cr)
	}
	if out.Receipts == nil {
		out.Receipts = []checkedReceipt{}
	}
	return out
}

func printReceipts(e *env, x *checkedReceipts) error {
	fmt.Fprintf(e.Out, "Lease %s ran on node %s (%d GPU); node key %s\n\n", x.LeaseID, x.NodeID, x.GPUs, orDash(x.NodePublicKey))
	t := newTable(e.Out, "SEQ", "START", "END", "GPU-S", "UTIL", "ENERGY", "HASH", "CHECK")
	for _, r := range x.Receipts {
		check := "verified"
		if !r.Verified {
			check = "FAILED: " + r.Problem
		}
		t.row(r.Seq, r.Start.UTC().Format(time.RFC3339), r.End.UTC().Format(time.RFC3339), r.GPUSeconds,
			fmt.Sprintf("%d%%", r.AvgUtilPct), energy(r.EnergyWh), r.Hash[:12], check)
	}
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintf(e.Out, "\n%d receipt(s), %d GPU-seconds", len(x.Receipts), x.GPUSeconds)
	if x.Verified && len(x.Receipts) > 0 {
		fmt.Fprint(e.Out, "; every signature and the chain verified with the node's key")
	}
	fmt.Fprintln(e.Out)
	return nil
}

func energy(wh int64) string {
	if wh == 0 {
		return "-"
	}
	return fmt.Sprintf("%d Wh", wh)
}

// receiptsVerdict is the command's error when any receipt failed its check.
func receiptsVerdict(x *checkedReceipts) error {
	failed := 0
	for _, r := range x.Receipts {
		if !r.Verified {
			failed++
		}
	}
	if failed == 0 {
		return nil
	}
	return fmt.Errorf("%d of %d receipts of lease %s failed verification; do not trust this export", failed, len(x.Receipts), x.LeaseID)
}
