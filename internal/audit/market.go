package audit

import (
	"slices"
	"time"

	"github.com/idlegrid/idlegrid"
)

// This file makes the entries the market logs, so that every caller logs a
// posting, a receipt or a lease transition the same way, and a user can
// recompute an entry's leaf from the records the API shows them.

// PostingEntry is the entry of one ledger transfer. Its subjects are every
// account holder the transfer touches and the lease it belongs to; its
// payload is the transfer as the API shows it.
func PostingEntry(t *idlegrid.Transfer) (Entry, error) {
	var subjects []string
	for _, e := range t.Entries {
		if owner := e.Account.Owner(); owner != "" {
			subjects = append(subjects, owner)
		}
	}
	if t.LeaseID != "" {
		subjects = append(subjects, t.LeaseID)
	}
	return NewEntry(KindPosting, subjects, t, t.CreatedAt)
}

// ReceiptEntry is the entry of a receipt the server accepted for lease l at
// at. Its subjects are the lease, its job, node, renter and provider; its
// payload is the signed receipt, so that anyone holding the node's public
// key can check the signature of what was logged.
func ReceiptEntry(l *idlegrid.Lease, r *idlegrid.Receipt, at time.Time) (Entry, error) {
	return NewEntry(KindReceipt, leaseSubjects(l), r, at)
}

// leaseTransition is the payload of a lease transition: the event and what
// decides who pays for it.
type leaseTransition struct {
	idlegrid.LeaseEvent
	Fault         idlegrid.Fault  `json:"fault,omitempty"`
	ChargedMicros idlegrid.Micros `json:"charged_micros"`
}

// LeaseEntry is the entry of one state change of lease l: ev with the fault
// and the charge the lease carries after it. Its subjects are the lease,
// its job, node, renter and provider.
func LeaseEntry(l *idlegrid.Lease, ev idlegrid.LeaseEvent) (Entry, error) {
	return NewEntry(KindLeaseTransition, leaseSubjects(l),
		leaseTransition{LeaseEvent: ev, Fault: l.Fault, ChargedMicros: l.ChargedMicros}, ev.At)
}

// DisputeEntry is the entry of a dispute as it is after it was opened or
// resolved at at: the provider charged, the harmed renter, the node and
// the lease can each find it. The penalty's ledger transfer has its own
// posting entry.
//
// The operator's texts are logged as the API now takes them, at most
// idlegrid.MaxDisputeEvidenceBytes and MaxDisputeResolutionBytes: a
// dispute stored before those limits, with more, is logged cut, rather
// than be too big for an entry and so impossible to resolve.
func DisputeEntry(d *idlegrid.Dispute, at time.Time) (Entry, error) {
	logged := *d
	logged.Evidence = idlegrid.ClipText(d.Evidence, idlegrid.MaxDisputeEvidenceBytes)
	logged.Resolution = idlegrid.ClipText(d.Resolution, idlegrid.MaxDisputeResolutionBytes)
	return NewEntry(KindDispute, nonEmpty(d.ID, d.ProviderID, d.RenterID, d.NodeID, d.LeaseID), &logged, at)
}

// The trust events the store logs in the transaction that saves them.
const (
	// KindAttestation: a node presented a hardware fingerprint, with the
	// changes from the one before.
	KindAttestation Kind = "trust.attestation"
	// KindChallenge: a hardware challenge was resolved: passed, failed
	// (with the quarantine it caused), expired or unsupported.
	KindChallenge Kind = "trust.challenge"
	// KindQuarantine: an admin quarantined a node, or lifted its
	// quarantine (a failed challenge's quarantine is in its challenge's
	// entry).
	KindQuarantine Kind = "trust.quarantine"
	// KindNodeJoined: a node joined, with the public key it signs its
	// requests, receipts and attestations with.
	KindNodeJoined Kind = "node.joined"
)

// nodeJoined is the payload of a node's join entry: who it is, whose, and
// the key that proves it.
type nodeJoined struct {
	NodeID     string    `json:"node_id"`
	ProviderID string    `json:"provider_id"`
	Name       string    `json:"name"`
	PublicKey  string    `json:"public_key"`
	JoinedAt   time.Time `json:"joined_at"`
}

// NodeJoinedEntry is the entry of node n's join, in the transaction that
// stores it: its public key is in the log from then on, so that a key
// the server later shows for the node, to check its receipts by, can be
// held to the one it joined with. Its subjects are the node and its
// provider.
func NodeJoinedEntry(n *idlegrid.Node) (Entry, error) {
	return NewEntry(KindNodeJoined, nonEmpty(n.ID, n.ProviderID),
		nodeJoined{NodeID: n.ID, ProviderID: n.ProviderID, Name: n.Name, PublicKey: n.PublicKey, JoinedAt: n.CreatedAt}, n.CreatedAt)
}

// QuarantineEntry is the entry of a quarantine an admin put a node in, or,
// once LiftedAt is set, lifted: at is when. Its subjects are the
// quarantine, its node and the node's provider.
func QuarantineEntry(q *idlegrid.Quarantine, at time.Time) (Entry, error) {
	return NewEntry(KindQuarantine, nonEmpty(q.ID, q.NodeID, q.ProviderID), q, at)
}

// attestationRecord is the payload of an attestation entry.
type attestationRecord struct {
	Attestation *idlegrid.Attestation     `json:"attestation"`
	Changes     []idlegrid.HardwareChange `json:"changes,omitempty"`
	// ChangesInAll counts the changes flagged when the entry holds only
	// the first maxLoggedChanges of them; 0 when it holds them all.
	ChangesInAll int `json:"changes_in_all,omitempty"`
}

// maxLoggedChanges is the most hardware changes an attestation entry
// holds. Every GPU of a big node changing at once (a new driver and
// VBIOS) would not fit an entry; the rest follow from the fingerprints,
// this one's and the one before it, which the log holds whole.
const maxLoggedChanges = 16

// AttestationEntry is the entry of a fingerprint node presented, signed,
// with the changes it flagged. Its subjects are the node and its
// provider; its time is when the server received it.
func AttestationEntry(a *idlegrid.Attestation, providerID string, changes []idlegrid.HardwareChange) (Entry, error) {
	rec := attestationRecord{Attestation: a, Changes: changes}
	if len(changes) > maxLoggedChanges {
		rec.Changes, rec.ChangesInAll = changes[:maxLoggedChanges], len(changes)
	}
	return NewEntry(KindAttestation, nonEmpty(a.NodeID, providerID), rec, a.ReceivedAt)
}

// challengeRecord is the payload of a challenge entry.
type challengeRecord struct {
	Challenge  *idlegrid.Challenge  `json:"challenge"`
	Quarantine *idlegrid.Quarantine `json:"quarantine,omitempty"`
}

// ChallengeEntry is the entry of a resolved challenge, with the
// quarantine it caused. The answer's row hashes are left out, as the store
// leaves them out: its digest stands for them, and a GPU-sized answer
// (up to 16,384 hashes) would not fit an entry. So is the quarantine's
// evidence, which is the challenge itself. Its subjects are the
// challenge, its node and the node's provider; its time is the
// resolution's.
func ChallengeEntry(c *idlegrid.Challenge, q *idlegrid.Quarantine, providerID string) (Entry, error) {
	kept := *c
	if c.Answer != nil {
		ans := *c.Answer
		ans.RowHashes = nil
		kept.Answer = &ans
	}
	var qk *idlegrid.Quarantine
	if q != nil {
		x := *q
		x.Evidence = nil
		qk = &x
	}
	at := c.IssuedAt
	if c.ResolvedAt != nil {
		at = *c.ResolvedAt
	}
	return NewEntry(KindChallenge, nonEmpty(c.ID, c.NodeID, providerID), challengeRecord{Challenge: &kept, Quarantine: qk}, at)
}

// nonEmpty returns the strings that are not empty.
func nonEmpty(ss ...string) []string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

func leaseSubjects(l *idlegrid.Lease) []string {
	return nonEmpty(l.ID, l.JobID, l.NodeID, l.RenterID, l.ProviderID)
}

// NewEntry makes a valid entry of kind k about subjects, with v in canonical
// JSON as its payload: the way to log anything else, such as a
// reputation.Change (KindLevelChange) or the policy in force (KindPolicy).
// Subjects are sorted and deduplicated.
func NewEntry(k Kind, subjects []string, v any, at time.Time) (Entry, error) {
	payload, err := CanonicalJSON(v)
	if err != nil {
		return Entry{}, err
	}
	subjects = slices.Clone(subjects)
	slices.Sort(subjects)
	e := Entry{Kind: k, Subjects: slices.Compact(subjects), Payload: payload, At: at, canonical: true}
	return e, e.Validate()
}
