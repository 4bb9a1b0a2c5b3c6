package wire

import "github.com/idlegrid/idlegrid"

// ReceiptBatch is the body of POST /v1/agent/leases/{id}/receipts: a
// node's signed usage receipts for one lease, in order. GET
// /v1/leases/{id}/receipts answers with an idlegrid.LeaseReceipts.
type ReceiptBatch struct {
	Receipts []idlegrid.Receipt `json:"receipts"`
}
