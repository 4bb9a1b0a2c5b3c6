package idlegrid

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"time"
)

// GPU is one device on a node.
type GPU struct {
	UUID   string `json:"uuid"`
	Model  string `json:"model"` // canonical model name, e.g. "H100-80GB", "RTX4090"
	VRAMMB int    `json:"vram_mb"`
	// The hardware's fingerprint (attest.go), where the driver reports it.
	PCIBusID       string `json:"pci_bus_id,omitempty"`       // e.g. "00000000:18:00.0"
	PCIDeviceID    string `json:"pci_device_id,omitempty"`    // 8 hex digits, device then vendor, e.g. "233010DE"
	PCISubsystemID string `json:"pci_subsystem_id,omitempty"` // e.g. "16C110DE"
	DriverVersion  string `json:"driver_version,omitempty"`   // e.g. "550.54.15"
	VBIOSVersion   string `json:"vbios_version,omitempty"`    // e.g. "96.00.74.00.01"
}

// NodeState is whether a node is reachable.
type NodeState string

const (
	NodeOnline  NodeState = "online"  // heartbeating
	NodeOffline NodeState = "offline" // said goodbye, or never heartbeated yet
	NodeLost    NodeState = "lost"    // missed too many heartbeats; its leases were ended
	// NodeRetired is final: its provider or an admin retired it (its key
	// may have leaked), its key is refused, and its leases were ended.
	NodeRetired NodeState = "retired"
)

// NodeStates lists every node state.
var NodeStates = []NodeState{NodeOnline, NodeOffline, NodeLost, NodeRetired}

// Valid reports whether s is a node state.
func (s NodeState) Valid() bool { return slices.Contains(NodeStates, s) }

// WorkloadKind is a class of renter work an owner may allow or refuse.
type WorkloadKind string

const (
	KindTraining  WorkloadKind = "training"
	KindFineTune  WorkloadKind = "fine-tuning"
	KindInference WorkloadKind = "batch-inference"
	KindEval      WorkloadKind = "eval"
	KindSweep     WorkloadKind = "sweep"
	KindOther     WorkloadKind = "other"
)

// WorkloadKinds lists every kind, in display order.
var WorkloadKinds = []WorkloadKind{KindTraining, KindFineTune, KindInference, KindEval, KindSweep, KindOther}

// Valid reports whether k is a known kind.
func (k WorkloadKind) Valid() bool {
	for _, w := range WorkloadKinds {
		if k == w {
			return true
		}
	}
	return false
}

// Ask is a provider's standing offer for a node: a price floor per GPU-hour
// for each tier, and the rules renters' work must follow.
type Ask struct {
	FloorMicrosPerGPUHour map[Tier]Micros `json:"floor_micros_per_gpu_hour"`
	AllowedKinds          []WorkloadKind  `json:"allowed_kinds,omitempty"` // empty: all kinds
	MaxJobSeconds         int64           `json:"max_job_seconds,omitempty"`
	// TimeOfDay scales the floor at peak and off-peak hours, in the node's
	// time zone. The first window that contains a moment applies.
	TimeOfDay []PriceWindow `json:"time_of_day,omitempty"`
}

// PriceWindow scales an ask's floor on the given days (all days when empty)
// from Start to End local time ("HH:MM"; an End at or before Start runs past
// midnight). MultiplierPercent 150 makes the floor 1.5 times as high.
type PriceWindow struct {
	Days              []string `json:"days,omitempty"`
	Start             string   `json:"start"`
	End               string   `json:"end"`
	MultiplierPercent int64    `json:"multiplier_percent"`
}

// Floor returns the ask's floor for tier, and whether the node sells that tier.
func (a *Ask) Floor(t Tier) (Micros, bool) {
	p, ok := a.FloorMicrosPerGPUHour[t]
	return p, ok && p > 0
}

// Allows reports whether the ask allows work of kind k.
func (a *Ask) Allows(k WorkloadKind) bool {
	if len(a.AllowedKinds) == 0 {
		return true
	}
	for _, w := range a.AllowedKinds {
		if w == k {
			return true
		}
	}
	return false
}

// Validate checks an ask, naming fields under prefix; it reports every
// field at fault (Faults).
func (a *Ask) Validate(prefix string) error {
	var f Faults
	floors := prefix + ".floor_micros_per_gpu_hour"
	f.Check(len(a.FloorMicrosPerGPUHour) > 0, floors, "at least one tier must have a price")
	for _, t := range slices.Sorted(maps.Keys(a.FloorMicrosPerGPUHour)) {
		if p := a.FloorMicrosPerGPUHour[t]; !t.Valid() {
			f.Add(floors, "unknown tier %q", t)
		} else if p <= 0 || p > 1000*MicrosPerUnit {
			f.Add(floors+"."+string(t), "must be between 1 micro and 1000 per GPU-hour")
		}
	}
	for _, k := range a.AllowedKinds {
		if !k.Valid() {
			f.Add(prefix+".allowed_kinds", "unknown workload kind %q", k)
			break
		}
	}
	f.Check(len(a.TimeOfDay) <= MaxScheduleWindows, prefix+".time_of_day", "at most %d windows, got %d", MaxScheduleWindows, len(a.TimeOfDay))
	for i, w := range a.TimeOfDay {
		at := fmt.Sprintf("%s.time_of_day[%d]", prefix, i)
		f.Also(WeeklyWindow{Days: w.Days, Start: w.Start, End: w.End}.validate(at, false))
		f.Check(w.MultiplierPercent >= 10 && w.MultiplierPercent <= 1000, at+".multiplier_percent", "must be between 10 and 1000")
	}
	f.Check(a.MaxJobSeconds >= 0, prefix+".max_job_seconds", "must not be negative")
	return f.Err()
}

// Offer is what an agent publishes about its node: hardware, place, when it
// is available and at what price. The agent sends it on join and whenever it
// changes.
type Offer struct {
	Name      string            `json:"name"`
	GPUs      []GPU             `json:"gpus"`
	CPUCores  int               `json:"cpu_cores"`
	RAMMB     int               `json:"ram_mb"`
	DiskGB    int               `json:"disk_gb"`
	Region    string            `json:"region"`    // e.g. "eu-west", "us-east"
	Residency string            `json:"residency"` // legal jurisdiction of the data, e.g. "EU", "US"
	Labels    map[string]string `json:"labels,omitempty"`
	Schedule  Schedule          `json:"schedule"`
	Ask       Ask               `json:"ask"`
	// CachedDatasets names the datasets the node already holds locally.
	CachedDatasets []string `json:"cached_datasets,omitempty"`
	// Models are the models the node serves for inference now: those of
	// its configured local servers that pass their health checks.
	Models []ModelOffer `json:"models,omitempty"`
}

// Clone returns a copy of the offer that shares no slice or map with it,
// so that changing either leaves the other as it was.
func (o *Offer) Clone() Offer {
	c := *o
	c.GPUs = slices.Clone(o.GPUs)
	c.Labels = maps.Clone(o.Labels)
	c.Schedule.Weekly = slices.Clone(o.Schedule.Weekly)
	for i := range c.Schedule.Weekly {
		c.Schedule.Weekly[i].Days = slices.Clone(o.Schedule.Weekly[i].Days)
	}
	c.Schedule.OneOff = slices.Clone(o.Schedule.OneOff)
	c.Ask.FloorMicrosPerGPUHour = maps.Clone(o.Ask.FloorMicrosPerGPUHour)
	c.Ask.AllowedKinds = slices.Clone(o.Ask.AllowedKinds)
	c.Ask.TimeOfDay = slices.Clone(o.Ask.TimeOfDay)
	for i := range c.Ask.TimeOfDay {
		c.Ask.TimeOfDay[i].Days = slices.Clone(o.Ask.TimeOfDay[i].Days)
	}
	c.CachedDatasets = slices.Clone(o.CachedDatasets)
	c.Models = slices.Clone(o.Models)
	return c
}

// Equal reports whether o and p offer the same, field by field; a nil and
// an empty list or map are the same, and so are one-off windows at the
// same instants.
func (o *Offer) Equal(p *Offer) bool {
	return o.Name == p.Name && slices.Equal(o.GPUs, p.GPUs) && o.CPUCores == p.CPUCores && o.RAMMB == p.RAMMB &&
		o.DiskGB == p.DiskGB && o.Region == p.Region && o.Residency == p.Residency && maps.Equal(o.Labels, p.Labels) &&
		o.Schedule.equal(&p.Schedule) && o.Ask.equal(&p.Ask) &&
		slices.Equal(o.CachedDatasets, p.CachedDatasets) && slices.Equal(o.Models, p.Models)
}

func (s *Schedule) equal(t *Schedule) bool {
	return s.Mode == t.Mode && s.TimeZone == t.TimeZone &&
		slices.EqualFunc(s.Weekly, t.Weekly, func(a, b WeeklyWindow) bool {
			return a.Start == b.Start && a.End == b.End && slices.Equal(a.Days, b.Days)
		}) &&
		slices.EqualFunc(s.OneOff, t.OneOff, func(a, b OneOffWindow) bool { return a.Start.Equal(b.Start) && a.End.Equal(b.End) })
}

func (a *Ask) equal(b *Ask) bool {
	return maps.Equal(a.FloorMicrosPerGPUHour, b.FloorMicrosPerGPUHour) && slices.Equal(a.AllowedKinds, b.AllowedKinds) &&
		a.MaxJobSeconds == b.MaxJobSeconds &&
		slices.EqualFunc(a.TimeOfDay, b.TimeOfDay, func(x, y PriceWindow) bool {
			return x.Start == y.Start && x.End == y.End && x.MultiplierPercent == y.MultiplierPercent && slices.Equal(x.Days, y.Days)
		})
}

var (
	regionRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,39}$`)
	nameRE   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)
)

// ValidNodeName reports whether name may name a node: 1 to 63 letters,
// digits, '.', '_' or '-', beginning with a letter or digit.
func ValidNodeName(name string) bool { return nameRE.MatchString(name) }

// ValidRegion reports whether r is written as a region is: lower-case
// letters, digits and '-', e.g. "eu-west".
func ValidRegion(r string) bool { return regionRE.MatchString(r) }

// Validate checks an offer before it is stored.
func (o *Offer) Validate() error {
	var p Faults
	p.Check(ValidNodeName(o.Name), "offer.name", "must be 1-63 letters, digits, '.', '_' or '-'")
	p.Check(len(o.GPUs) >= 1 && len(o.GPUs) <= 64, "offer.gpus", "must list between 1 and 64 GPUs")
	o.checkGPUs(&p)
	p.Check(o.CPUCores >= 0, "offer.cpu_cores", "must not be negative")
	p.Check(o.RAMMB >= 0, "offer.ram_mb", "must not be negative")
	p.Check(o.DiskGB >= 0, "offer.disk_gb", "must not be negative")
	p.Check(regionRE.MatchString(o.Region), "offer.region", "must be lower-case letters, digits and '-', e.g. eu-west")
	p.Check(o.Residency != "", "offer.residency", "required, e.g. EU or US")
	p.Check(o.Residency == "" || residencyRE.MatchString(o.Residency), "offer.residency",
		"must be at most 40 letters, digits and '-', a jurisdiction such as EU or US, as jobs name theirs")
	o.checkLabels(&p)
	p.Also(o.Schedule.Validate("offer.schedule"))
	p.Also(validateModels(o.Models))
	p.Also(o.Ask.Validate("offer.ask"))
	return p.Err()
}

// checkGPUs checks the offer's GPUs, naming the first fault of each kind.
// A GPU's model is named as a job names the models it wants, and its
// identifying numbers fit a fingerprint (HardwareFingerprint.Validate).
func (o *Offer) checkGPUs(p *Faults) {
	seen := map[string]bool{}
	var dup, badModel, noVRAM bool
	for _, g := range o.GPUs {
		dup = dup || g.UUID == "" || seen[g.UUID]
		seen[g.UUID] = true
		badModel = badModel || g.Model == "" || len(g.Model) > MaxGPUModelBytes
		noVRAM = noVRAM || g.VRAMMB <= 0
		fields := fingerprintFields(g)
		delete(fields, "model")
		for _, name := range slices.Sorted(maps.Keys(fields)) {
			p.Check(len(fields[name]) <= maxFingerprintField, "offer.gpus."+name, "at most %d characters", maxFingerprintField)
		}
	}
	p.Check(!dup, "offer.gpus.uuid", "every GPU needs a unique UUID")
	p.Check(!badModel, "offer.gpus.model", "required, at most %d characters", MaxGPUModelBytes)
	p.Check(!noVRAM, "offer.gpus.vram_mb", "must be positive")
}

// Limits on an offer's labels, which are its owner's notes on the node.
const (
	MaxOfferLabels     = 64
	MaxLabelKeyBytes   = 128
	MaxLabelValueBytes = 256
)

// checkLabels checks the offer's labels, naming the first at fault.
func (o *Offer) checkLabels(p *Faults) {
	p.Check(len(o.Labels) <= MaxOfferLabels, "offer.labels", "at most %d labels, got %d", MaxOfferLabels, len(o.Labels))
	for _, k := range slices.Sorted(maps.Keys(o.Labels)) {
		if k == "" || len(k) > MaxLabelKeyBytes || !printable(k) {
			p.Add("offer.labels", "label names must be 1-%d printable characters", MaxLabelKeyBytes)
			return
		}
		if v := o.Labels[k]; len(v) > MaxLabelValueBytes || !printable(v) {
			p.Add("offer.labels."+k, "at most %d printable characters", MaxLabelValueBytes)
			return
		}
	}
}

// MaxAgentVersionBytes bounds the version an agent says it runs.
const MaxAgentVersionBytes = 64

// CheckAgentVersion refuses the version an agent sends with its offer
// when it is longer than MaxAgentVersionBytes or not printable; it may
// be left out.
func CheckAgentVersion(v string) error {
	if len(v) > MaxAgentVersionBytes || !printable(v) {
		return Invalid("agent_version", "at most %d printable characters, e.g. 0.4.1", MaxAgentVersionBytes)
	}
	return nil
}

// Node is a provider's machine, known by the public half of its identity key.
type Node struct {
	ID            string    `json:"id"`
	ProviderID    string    `json:"provider_id"`
	PublicKey     string    `json:"public_key"` // base64 ed25519
	Offer                   // what the agent last published
	State         NodeState `json:"state"`
	LastHeartbeat time.Time `json:"last_heartbeat"`
	AgentVersion  string    `json:"agent_version"`
	// Reliability is in (0,1]: the node's reputation score once it has one
	// (reputation.go), before that from its lease record (ReliabilityOf).
	Reliability     float64   `json:"reliability"`
	LeasesCompleted int64     `json:"leases_completed"`
	LeasesFailed    int64     `json:"leases_failed"` // failures the provider caused
	Level           int       `json:"level"`         // trust level, 0 a newcomer; gold needs the trust policy's (reputation.go)
	CreatedAt       time.Time `json:"created_at"`

	// Quarantined nodes take no new leases until an admin lifts the
	// quarantine (attest.go).
	Quarantined bool `json:"quarantined,omitempty"`
	// DrainingSince, when set, is when the node's owner (or an admin)
	// began to drain it for maintenance: it takes no new leases, its
	// bronze leases get their notice, and its gold and silver leases run
	// to their end. It lasts until undone, whatever the agent publishes.
	DrainingSince *time.Time `json:"draining_since,omitempty"`
}

// Public returns what any account may see of the node: its offer as the
// market matches it (GPU models and memory, place, schedule, ask, cached
// datasets, models served), its state, record and trust level, and its
// public key, which receipts are checked against. It leaves out what is
// its owner's: labels, the agent's version, and the GPUs' hardware
// fingerprints (PCI IDs and VBIOS), which attestation compares. n is not
// changed.
func (n *Node) Public() *Node {
	p := *n
	p.Offer = n.Offer.Clone()
	p.Labels, p.AgentVersion = nil, ""
	for i := range p.GPUs {
		g := &p.GPUs[i]
		g.PCIBusID, g.PCIDeviceID, g.PCISubsystemID, g.VBIOSVersion = "", "", "", ""
	}
	return &p
}

// ReliabilityOf is a node's reliability from its record: the share of leases
// it completed, with a prior of 9 completions in 10 so that a newcomer starts
// at 0.9 and one early failure does not ruin it.
func ReliabilityOf(completed, failed int64) float64 {
	const priorOK, priorN = 9.0, 10.0
	return (float64(completed) + priorOK) / (float64(completed+failed) + priorN)
}
