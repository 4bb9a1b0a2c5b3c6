package wire

import "github.com/idlegrid/idlegrid"

// ReceiptBatch is the body of POST /v1/agent/leases/{id}/receipts: a
// node's signed usage receipts for one lease, in order. GET
// /v1/leases/{id}/receipts answers with an idlegrid.LeaseReceipts.
type ReceiptBatch struct {
	Receipts []idlegrid.Receipt `json:"receipts"`
}

// LastReceipt answers GET /v1/agent/leases/{id}/receipts/last: the last
// receipt the server accepted for the lease, or null when it has none.
type LastReceipt struct {
	Receipt *idlegrid.Receipt `json:"receipt"`
}
