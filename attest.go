package idlegrid

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Hardware attestation (docs/trust.md): a node's identity key signs its
// hardware fingerprint; the coordinator keeps every fingerprint a node
// presented, flags each change, challenges the hardware with a workload
// whose result and running time it can check, and quarantines a node whose
// results do not fit its claim, with the evidence.

// HardwareFingerprint is a node's hardware as its agent detected it: every
// GPU with its identifying numbers, in UUID order.
type HardwareFingerprint struct {
	GPUs []GPU `json:"gpus"`
}

// FingerprintOf returns the fingerprint of gpus: a copy, sorted by UUID.
func FingerprintOf(gpus []GPU) HardwareFingerprint {
	out := slices.Clone(gpus)
	slices.SortFunc(out, func(a, b GPU) int { return strings.Compare(a.UUID, b.UUID) })
	return HardwareFingerprint{GPUs: out}
}

// maxFingerprintField bounds each text field of a fingerprint.
const maxFingerprintField = 128

// MaxFingerprintBytes bounds a whole fingerprint, as JSON: the audit log
// keeps it with its attestation, in an entry of at most 64 KiB that also
// holds the changes it flags. 64 GPUs with their usual fields take about
// 15 KiB.
const MaxFingerprintBytes = 24 << 10

// Validate checks a fingerprint's shape, naming fields under prefix.
func (f *HardwareFingerprint) Validate(prefix string) error {
	if err := f.validateGPUs(prefix); err != nil {
		return err
	}
	b, err := json.Marshal(f)
	if err != nil {
		return err
	} else if len(b) > MaxFingerprintBytes {
		return Invalid(prefix, "at most %d bytes as JSON, got %d: shorten its fields", MaxFingerprintBytes, len(b))
	}
	return nil
}

// validateGPUs checks each GPU of a fingerprint.
func (f *HardwareFingerprint) validateGPUs(prefix string) error {
	if len(f.GPUs) == 0 || len(f.GPUs) > 64 {
		return Invalid(prefix+".gpus", "must list between 1 and 64 GPUs")
	}
	for i, g := range f.GPUs {
		field := fmt.Sprintf("%s.gpus[%d]", prefix, i)
		if g.UUID == "" || g.Model == "" {
			return Invalid(field, "uuid and model are required")
		} else if i > 0 && f.GPUs[i-1].UUID >= g.UUID {
			return Invalid(field+".uuid", "GPUs must be unique and in UUID order (FingerprintOf sorts them)")
		} else if g.VRAMMB <= 0 {
			return Invalid(field+".vram_mb", "must be positive")
		}
		for name, v := range fingerprintFields(g) {
			if len(v) > maxFingerprintField {
				return Invalid(field+"."+name, "longer than %d characters", maxFingerprintField)
			}
		}
	}
	return nil
}

func fingerprintFields(g GPU) map[string]string {
	return map[string]string{
		"uuid": g.UUID, "model": g.Model, "pci_bus_id": g.PCIBusID, "pci_device_id": g.PCIDeviceID,
		"pci_subsystem_id": g.PCISubsystemID, "driver_version": g.DriverVersion, "vbios_version": g.VBIOSVersion,
	}
}

// Canonical is the fingerprint's fixed text encoding, what its hash and
// signature cover: a header line, then one line per GPU in UUID order with
// every field quoted (Go syntax), so that no value can forge a field.
//
//	idlegrid-hardware-v1
//	gpu uuid="GPU-…" model="H100-80GB" vram_mb=81559 pci_bus_id="…" pci_device_id="…" pci_subsystem_id="…" driver_version="…" vbios_version="…"
func (f HardwareFingerprint) Canonical() []byte {
	var b strings.Builder
	b.WriteString("idlegrid-hardware-v1\n")
	for _, g := range f.GPUs {
		fmt.Fprintf(&b, "gpu uuid=%s model=%s vram_mb=%d pci_bus_id=%s pci_device_id=%s pci_subsystem_id=%s driver_version=%s vbios_version=%s\n",
			strconv.Quote(g.UUID), strconv.Quote(g.Model), g.VRAMMB, strconv.Quote(g.PCIBusID),
			strconv.Quote(g.PCIDeviceID), strconv.Quote(g.PCISubsystemID), strconv.Quote(g.DriverVersion),
			strconv.Quote(g.VBIOSVersion))
	}
	return []byte(b.String())
}

// Hash is the hex SHA-256 of the canonical form.
func (f HardwareFingerprint) Hash() string {
	sum := sha256.Sum256(f.Canonical())
	return hex.EncodeToString(sum[:])
}

// Attestation is a fingerprint signed by the node's identity key
// (internal/nodekey.SignAttestation): portable evidence of what the node
// said it is, checkable by anyone holding the node's public key.
type Attestation struct {
	NodeID      string              `json:"node_id"`
	Fingerprint HardwareFingerprint `json:"fingerprint"`
	SignedAt    time.Time           `json:"signed_at"`
	Signature   string              `json:"signature"` // base64 ed25519 over Message
	// Hash is the fingerprint's hash; the server sets it.
	Hash string `json:"hash,omitempty"`
	// ReceivedAt is when the coordinator accepted it; the server sets it.
	ReceivedAt time.Time `json:"received_at,omitzero"`
	// ChallengeRunner is what the node runs hardware challenges with; the
	// coordinator sizes the node's challenges for it. It is signed with
	// the fingerprint when set; older agents leave it out.
	ChallengeRunner ChallengeRunner `json:"challenge_runner,omitempty"`
}

// ChallengeRunner is what runs the challenge workload on a node.
type ChallengeRunner string

const (
	// RunnerUnknown: an older agent, or one that cannot run challenges on
	// its GPUs; it gets challenges of the simulated size and answers them
	// unsupported if it must.
	RunnerUnknown ChallengeRunner = ""
	// RunnerSimulated computes the product on the CPU for simulated GPUs
	// (internal/gpu/fake): small challenges.
	RunnerSimulated ChallengeRunner = "simulated"
	// RunnerCUDA runs it on the GPU with cuBLAS (internal/gpu/cuda):
	// challenges sized to keep the GPU busy about a second.
	RunnerCUDA ChallengeRunner = "cuda"
)

// Validate checks that r is a runner this version knows.
func (r ChallengeRunner) Validate(field string) error {
	switch r {
	case RunnerUnknown, RunnerSimulated, RunnerCUDA:
		return nil
	}
	return Invalid(field, "must be %q, %q or left out, got %q", RunnerSimulated, RunnerCUDA, string(r))
}

// Message is what the signature covers:
//
//	idlegrid-attestation-v1
//	node=<node ID>
//	signed_at=<unix milliseconds>
//	fingerprint=<hex SHA-256 of the canonical fingerprint>
//	challenge_runner=<runner>     (only when set, so older agents' messages are unchanged)
func (a *Attestation) Message() []byte {
	m := "idlegrid-attestation-v1\nnode=" + a.NodeID + "\nsigned_at=" +
		strconv.FormatInt(a.SignedAt.UnixMilli(), 10) + "\nfingerprint=" + a.Fingerprint.Hash() + "\n"
	if a.ChallengeRunner != RunnerUnknown {
		m += "challenge_runner=" + string(a.ChallengeRunner) + "\n"
	}
	return []byte(m)
}

// HardwareChangeKind is what changed between two fingerprints.
type HardwareChangeKind string

const (
	ChangeGPUAdded   HardwareChangeKind = "gpu_added"
	ChangeGPURemoved HardwareChangeKind = "gpu_removed" // a GPU swapped shows as removed and added
	ChangeModel      HardwareChangeKind = "model_changed"
	ChangeVRAM       HardwareChangeKind = "vram_changed"
	ChangePCI        HardwareChangeKind = "pci_changed" // bus, device or subsystem ID
	ChangeDriver     HardwareChangeKind = "driver_changed"
	ChangeVBIOS      HardwareChangeKind = "vbios_changed"
)

// HardwareChange is one difference between a node's previous fingerprint
// and the one it attested next, recorded with both values as evidence.
type HardwareChange struct {
	ID       string             `json:"id"`
	NodeID   string             `json:"node_id"`
	Kind     HardwareChangeKind `json:"kind"`
	GPUUUID  string             `json:"gpu_uuid"`
	Before   string             `json:"before"`
	After    string             `json:"after"`
	FromHash string             `json:"from_hash"` // the fingerprints compared
	ToHash   string             `json:"to_hash"`
	At       time.Time          `json:"at"`
}

// DiffFingerprints lists what changed from before to after, GPU by GPU in
// UUID order. IDs, node and time are left for the caller.
func DiffFingerprints(before, after HardwareFingerprint) []HardwareChange {
	old := map[string]GPU{}
	for _, g := range before.GPUs {
		old[g.UUID] = g
	}
	var out []HardwareChange
	add := func(k HardwareChangeKind, uuid, b, a string) {
		out = append(out, HardwareChange{Kind: k, GPUUUID: uuid, Before: b, After: a})
	}
	seen := map[string]bool{}
	for _, g := range after.GPUs {
		seen[g.UUID] = true
		p, ok := old[g.UUID]
		if !ok {
			add(ChangeGPUAdded, g.UUID, "", describeGPU(g))
			continue
		}
		if p.Model != g.Model {
			add(ChangeModel, g.UUID, p.Model, g.Model)
		}
		if p.VRAMMB != g.VRAMMB {
			add(ChangeVRAM, g.UUID, strconv.Itoa(p.VRAMMB)+" MB", strconv.Itoa(g.VRAMMB)+" MB")
		}
		if pb, pa := pciOf(p), pciOf(g); pb != pa {
			add(ChangePCI, g.UUID, pb, pa)
		}
		if p.DriverVersion != g.DriverVersion {
			add(ChangeDriver, g.UUID, p.DriverVersion, g.DriverVersion)
		}
		if p.VBIOSVersion != g.VBIOSVersion {
			add(ChangeVBIOS, g.UUID, p.VBIOSVersion, g.VBIOSVersion)
		}
	}
	for _, g := range before.GPUs {
		if !seen[g.UUID] {
			add(ChangeGPURemoved, g.UUID, describeGPU(g), "")
		}
	}
	return out
}

func pciOf(g GPU) string {
	return "bus " + g.PCIBusID + ", device " + g.PCIDeviceID + ", subsystem " + g.PCISubsystemID
}

func describeGPU(g GPU) string {
	return fmt.Sprintf("%s %d MB, %s, vbios %s", g.Model, g.VRAMMB, pciOf(g), g.VBIOSVersion)
}

// ChallengeState is where a hardware challenge stands.
type ChallengeState string

const (
	ChallengeIssued      ChallengeState = "issued"      // waiting for the agent's answer
	ChallengePassed      ChallengeState = "passed"      // the answer fit the claim
	ChallengeFailed      ChallengeState = "failed"      // it did not; the node was quarantined
	ChallengeExpired     ChallengeState = "expired"     // no answer before the deadline
	ChallengeUnsupported ChallengeState = "unsupported" // the agent cannot run the workload on this GPU
)

// ChallengeStates are the challenge states, in the order a challenge
// goes through them.
var ChallengeStates = []ChallengeState{ChallengeIssued, ChallengePassed, ChallengeFailed, ChallengeExpired, ChallengeUnsupported}

// Valid reports whether s is one of ChallengeStates.
func (s ChallengeState) Valid() bool { return slices.Contains(ChallengeStates, s) }

// ChallengeReason is why a challenge was issued.
type ChallengeReason string

const (
	ChallengeAtJoin   ChallengeReason = "join"               // the node's first attestation
	ChallengeOnChange ChallengeReason = "fingerprint_change" // its hardware changed
	ChallengeAtRandom ChallengeReason = "random"             // a random time no node can predict
	ChallengeByAdmin  ChallengeReason = "admin"              // an admin asked for one
)

// Challenge is one run of the challenge workload on one GPU
// (internal/challenge): a product of two seeded N×N matrices whose result
// the coordinator can spot-check cheaply, expected within a time band for
// the claimed model, and an allocation of the claimed memory.
type Challenge struct {
	ID      string          `json:"id"`
	NodeID  string          `json:"node_id"`
	GPUUUID string          `json:"gpu_uuid"`
	Model   string          `json:"model"`   // the claimed model
	VRAMMB  int             `json:"vram_mb"` // the claimed memory
	Seed    string          `json:"seed"`    // hex, 16 random bytes
	Size    int             `json:"size"`    // N
	Reason  ChallengeReason `json:"reason"`
	State   ChallengeState  `json:"state"`
	// The time band the claimed model should finish in, from the spec
	// table; both 0 when the model has no spec (time is not judged).
	MinNanos int64     `json:"min_nanos"`
	MaxNanos int64     `json:"max_nanos"`
	IssuedAt time.Time `json:"issued_at"`
	Deadline time.Time `json:"deadline"`
	// What the agent answered and what the coordinator found; set once.
	Answer     *ChallengeAnswer `json:"answer,omitempty"`
	Findings   []string         `json:"findings,omitempty"` // each check, in words
	ResolvedAt *time.Time       `json:"resolved_at,omitempty"`
}

// ChallengeAnswer is what the agent returns for a challenge.
type ChallengeAnswer struct {
	// RowHashes are the SHA-256 hashes of the product's rows, in order
	// (32 bytes each; base64 on the wire). The coordinator recomputes rows
	// it picks at random after receiving them. Not stored.
	RowHashes []byte `json:"row_hashes,omitempty"`
	// Digest is the hex SHA-256 of RowHashes: the result, kept as evidence.
	Digest       string `json:"digest"`
	ElapsedNanos int64  `json:"elapsed_nanos"` // the product's running time as measured on the node
	VRAMMB       int    `json:"vram_mb"`       // memory the workload could allocate on the GPU
	// Unsupported, when set, says why the agent cannot run the workload on
	// this GPU; the rest is then empty.
	Unsupported string `json:"unsupported,omitempty"`
}

// Quarantine keeps a node from taking new leases, with the reason and the
// evidence, until an admin lifts it.
type Quarantine struct {
	ID         string          `json:"id"`
	NodeID     string          `json:"node_id"`
	ProviderID string          `json:"provider_id"`
	Reason     string          `json:"reason"`
	Evidence   json.RawMessage `json:"evidence"` // e.g. the failed challenge, as the API shows it
	Since      time.Time       `json:"since"`
	LiftedAt   *time.Time      `json:"lifted_at,omitempty"`
	LiftedBy   string          `json:"lifted_by,omitempty"` // the admin's account ID
	LiftNote   string          `json:"lift_note,omitempty"`
}

// Active reports whether the quarantine still holds.
func (q *Quarantine) Active() bool { return q.LiftedAt == nil }

// ChallengeFilter selects challenges. Empty fields match all.
type ChallengeFilter struct {
	NodeID string
	States []ChallengeState
	Limit  int // 0: the store's default
	// Before, a challenge ID, lists only the challenges listed after it,
	// newest first: the next page after a page that ended with it.
	// EINVALID when it is not one of NodeID's.
	Before string
}

// QuarantineFilter selects quarantines. Empty fields match all.
type QuarantineFilter struct {
	NodeID     string
	ProviderID string
	ActiveOnly bool
	Limit      int // 0: the store's default
	// Before, a quarantine ID, lists only the quarantines listed after
	// it, newest first: the next page after a page that ended with it.
	// EINVALID when it is not one of NodeID's and ProviderID's, lifted or
	// not, so that a page lifted while read does not end the paging.
	Before string
}

// AttestationStore keeps fingerprints, their changes, challenges and
// quarantines. Each method is one transaction.
type AttestationStore interface {
	// SaveAttestation stores a verified attestation as the node's current
	// fingerprint, with the changes from the one before. prevHash is the
	// hash of the fingerprint the changes were computed from ("" for the
	// first); ECONFLICT when the node's current one is another.
	SaveAttestation(ctx context.Context, a *Attestation, prevHash string, changes []HardwareChange) error
	// LatestAttestation returns the node's current attestation; ENOTFOUND
	// when it never attested.
	LatestAttestation(ctx context.Context, nodeID string) (*Attestation, error)
	// ListAttestations returns up to limit of the node's attestations,
	// newest first: each distinct fingerprint once, with when it was last
	// presented in ReceivedAt.
	ListAttestations(ctx context.Context, nodeID string, limit int) ([]*Attestation, error)
	// ListHardwareChanges returns up to limit of the node's changes, newest first.
	ListHardwareChanges(ctx context.Context, nodeID string, limit int) ([]*HardwareChange, error)

	CreateChallenge(ctx context.Context, c *Challenge) error
	FindChallenge(ctx context.Context, id string) (*Challenge, error)
	// ListChallenges returns the challenges f selects, newest first (by
	// issue, then ID).
	ListChallenges(ctx context.Context, f ChallengeFilter) ([]*Challenge, error)
	// ResolveChallenge stores c's outcome (State, Answer less its row
	// hashes, Findings, ResolvedAt) if it is still issued, ECONFLICT
	// otherwise; with q, it quarantines the node in the same transaction,
	// unless the node is in a quarantine already, which stands, and stores
	// the follow-up f, when given, with it (the conviction that follows a
	// failed challenge: internal/server/followup.go). quarantined says
	// whether q was put in force.
	ResolveChallenge(ctx context.Context, c *Challenge, q *Quarantine, f *FollowUp) (quarantined bool, err error)

	// QuarantineNode puts a node in quarantine. A node already quarantined
	// stays under its first quarantine: q is not stored and ECONFLICT.
	QuarantineNode(ctx context.Context, q *Quarantine) error
	// LiftQuarantine ends the node's quarantine; ECONFLICT when it has none.
	LiftQuarantine(ctx context.Context, nodeID, by, note string, at time.Time) (*Quarantine, error)
	// FindQuarantine returns the node's quarantine in force; ENOTFOUND when none.
	FindQuarantine(ctx context.Context, nodeID string) (*Quarantine, error)
	// ListQuarantines returns the quarantines f selects, newest first (by
	// Since, then ID).
	ListQuarantines(ctx context.Context, f QuarantineFilter) ([]*Quarantine, error)
}

// AttestRequest is an agent's signed fingerprint (POST /v1/agent/attestation).
type AttestRequest struct {
	Attestation Attestation `json:"attestation"`
}

// AttestResponse says what the coordinator made of an attestation.
type AttestResponse struct {
	Hash       string           `json:"hash"`
	Changes    []HardwareChange `json:"changes"`    // flagged since the last one
	Challenges []*Challenge     `json:"challenges"` // issued now: run them
}

// ChallengesResponse lists challenges: those waiting for a node's answer
// (GET /v1/agent/challenges), those just issued, or a page of a node's
// (GET /v1/nodes/{id}/challenges).
type ChallengesResponse struct {
	Challenges []*Challenge `json:"challenges"`
}

// NodeAttestationView is what an owner or admin sees of a node's hardware
// (GET /v1/nodes/{id}/attestation).
type NodeAttestationView struct {
	NodeID       string            `json:"node_id"`
	Current      *Attestation      `json:"current,omitempty"`
	History      []*Attestation    `json:"history"`
	Changes      []*HardwareChange `json:"changes"`
	Challenges   []*Challenge      `json:"challenges"`
	Quarantine   *Quarantine       `json:"quarantine,omitempty"` // in force
	Quarantines  []*Quarantine     `json:"quarantines"`
	VerifiedNote string            `json:"verified_note"` // in words
	// ChallengeOwed is the random challenge the node owes, if any.
	ChallengeOwed *OwedChallenge `json:"challenge_owed,omitempty"`
}

// OwedChallenge is a random challenge a node was drawn for while every
// GPU it offers ran a lease: it is issued at the first challenge pass that
// finds one idle. NoNewLeases: the node has owed it for the trust policy's
// challenges.max_owed, and takes no new leases until it has been issued
// (ChallengeID) and answered, or has expired.
type OwedChallenge struct {
	Since       time.Time `json:"since"`
	NoNewLeases bool      `json:"no_new_leases"`
	ChallengeID string    `json:"challenge_id,omitempty"`
}

// LiftQuarantineRequest is an admin's lifting of a quarantine.
type LiftQuarantineRequest struct {
	Note string `json:"note"`
}
