package client

import (
	"context"
	"net/http"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/httpapi/wire"
)

// SendReceipts sends a lease's signed usage receipts, in order. Receipts
// the server already accepted may be sent again: that is a no-op, so a
// batch whose answer was lost is safely sent again.
func (a *AgentClient) SendReceipts(ctx context.Context, leaseID string, rs []idlegrid.Receipt) error {
	if err := requireID("lease_id", leaseID); err != nil {
		return err
	}
	return a.do(ctx, call{method: http.MethodPost, path: path("agent", "leases", leaseID, "receipts"),
		in: wire.ReceiptBatch{Receipts: rs}}, false)
}

// LastReceipt returns the last receipt the server accepted for one of the
// node's leases, or nil when it has none: where the node's chain goes on
// from when the server refused a batch or the node lost what it sent.
func (a *AgentClient) LastReceipt(ctx context.Context, leaseID string) (*idlegrid.Receipt, error) {
	if err := requireID("lease_id", leaseID); err != nil {
		return nil, err
	}
	var out wire.LastReceipt
	err := a.do(ctx, call{method: http.MethodGet, path: path("agent", "leases", leaseID, "receipts", "last"), out: &out}, false)
	if err != nil {
		return nil, err
	}
	return out.Receipt, nil
}

// ListReceipts exports a lease's usage receipts, in order, with the public
// key of the node that signed them; the lease's renter, the provider whose
// node ran it, and admins may. Check them with nodekey.VerifyReceipt rather
// than take the server's word.
func (c *Client) ListReceipts(ctx context.Context, leaseID string) (*idlegrid.LeaseReceipts, error) {
	if err := requireID("lease_id", leaseID); err != nil {
		return nil, err
	}
	var out idlegrid.LeaseReceipts
	if err := c.do(ctx, call{method: http.MethodGet, path: path("leases", leaseID, "receipts"), out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}
