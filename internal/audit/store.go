package audit

import (
	"context"
	"errors"

	"github.com/idlegrid/idlegrid"
)

// This file joins the log to the coordinator's store: the store keeps the
// entries (idlegrid.AuditStore), appending each in the transaction of the
// change it records, and a Tree reads their leaf hashes through StoreLeaves.

// StoreLeaves is the LeafStore over the coordinator's store. It only
// reads: the store logs entries, not bare leaf hashes, so AppendLeaves
// refuses (log with idlegrid.AuditStore.AppendAudit, or through the store
// method that makes the change).
func StoreLeaves(s idlegrid.AuditStore) LeafStore { return storeLeaves{s} }

type storeLeaves struct{ s idlegrid.AuditStore }

var errLeavesOnly = errors.New("audit: the store logs whole entries; append them with AppendAudit, not as bare leaf hashes")

func (l storeLeaves) AppendLeaves(context.Context, []Hash) (uint64, error) { return 0, errLeavesOnly }

func (l storeLeaves) LeafHashes(ctx context.Context, start, end uint64) ([]Hash, error) {
	hs, err := l.s.AuditLeafHashes(ctx, start, end)
	if err != nil {
		return nil, err
	}
	out := make([]Hash, len(hs))
	for i, h := range hs {
		out[i] = Hash(h)
	}
	return out, nil
}

func (l storeLeaves) Size(ctx context.Context) (uint64, error) { return l.s.AuditSize(ctx) }

// EntryOf is the entry a stored audit entry records.
func EntryOf(e *idlegrid.AuditEntry) Entry {
	return Entry{Kind: Kind(e.Kind), Subjects: e.Subjects, Payload: e.Payload, At: e.At}
}
