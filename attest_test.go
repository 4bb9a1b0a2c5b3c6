package idlegrid_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/audit"
)

func h100(uuid string) idlegrid.GPU {
	return idlegrid.GPU{UUID: uuid, Model: "H100-80GB", VRAMMB: 81920, PCIBusID: "00000000:18:00.0",
		PCIDeviceID: "233010DE", PCISubsystemID: "16C110DE", DriverVersion: "550.54.15", VBIOSVersion: "96.00.74.00.01"}
}

func TestHardwareFingerprint_Hash(t *testing.T) {
	a := idlegrid.FingerprintOf([]idlegrid.GPU{h100("GPU-b"), h100("GPU-a")})
	b := idlegrid.FingerprintOf([]idlegrid.GPU{h100("GPU-a"), h100("GPU-b")})
	if a.Hash() != b.Hash() {
		t.Fatal("the same GPUs in another order hash differently; FingerprintOf must sort them")
	}
	t.Run("EveryFieldCounts", func(t *testing.T) {
		for name, change := range map[string]func(g *idlegrid.GPU){
			"uuid": func(g *idlegrid.GPU) { g.UUID = "GPU-c" }, "model": func(g *idlegrid.GPU) { g.Model = "T4" },
			"vram": func(g *idlegrid.GPU) { g.VRAMMB-- }, "bus": func(g *idlegrid.GPU) { g.PCIBusID = "x" },
			"device": func(g *idlegrid.GPU) { g.PCIDeviceID = "x" }, "subsystem": func(g *idlegrid.GPU) { g.PCISubsystemID = "x" },
			"driver": func(g *idlegrid.GPU) { g.DriverVersion = "x" }, "vbios": func(g *idlegrid.GPU) { g.VBIOSVersion = "x" },
		} {
			g := h100("GPU-a")
			change(&g)
			if f := idlegrid.FingerprintOf([]idlegrid.GPU{g, h100("GPU-b")}); f.Hash() == b.Hash() {
				t.Errorf("changing %s left the hash as it was", name)
			}
		}
	})
	t.Run("NoFieldForgery", func(t *testing.T) {
		// A value that contains another field's text must not read as it.
		g := h100("GPU-a")
		g.Model = `H100-80GB" vbios_version="x`
		f := idlegrid.FingerprintOf([]idlegrid.GPU{g})
		if got := strings.Count(string(f.Canonical()), "\n"); got != 2 {
			t.Fatalf("canonical form has %d lines, want 2:\n%s", got, f.Canonical())
		}
		if !strings.Contains(string(f.Canonical()), `model="H100-80GB\" vbios_version=\"x"`) {
			t.Fatalf("model not quoted:\n%s", f.Canonical())
		}
	})
}

func TestDiffFingerprints(t *testing.T) {
	before := idlegrid.FingerprintOf([]idlegrid.GPU{h100("GPU-a"), h100("GPU-b")})
	flashed := h100("GPU-a")
	flashed.VBIOSVersion = "96.00.99.00.01"
	flashed.DriverVersion = "555.42.06"
	after := idlegrid.FingerprintOf([]idlegrid.GPU{flashed, h100("GPU-c")})
	got := idlegrid.DiffFingerprints(before, after)
	want := []idlegrid.HardwareChange{
		{Kind: idlegrid.ChangeDriver, GPUUUID: "GPU-a", Before: "550.54.15", After: "555.42.06"},
		{Kind: idlegrid.ChangeVBIOS, GPUUUID: "GPU-a", Before: "96.00.74.00.01", After: "96.00.99.00.01"},
		{Kind: idlegrid.ChangeGPUAdded, GPUUUID: "GPU-c", After: "H100-80GB 81920 MB, bus 00000000:18:00.0, device 233010DE, subsystem 16C110DE, vbios 96.00.74.00.01"},
		{Kind: idlegrid.ChangeGPURemoved, GPUUUID: "GPU-b", Before: "H100-80GB 81920 MB, bus 00000000:18:00.0, device 233010DE, subsystem 16C110DE, vbios 96.00.74.00.01"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("DiffFingerprints (-want +got):\n%s", diff)
	}
	if got := idlegrid.DiffFingerprints(before, before); len(got) != 0 {
		t.Fatalf("an unchanged fingerprint shows changes: %+v", got)
	}
}

func TestHardwareFingerprint_Validate(t *testing.T) {
	ok := idlegrid.FingerprintOf([]idlegrid.GPU{h100("GPU-a")})
	if err := ok.Validate("f"); err != nil {
		t.Fatalf("Validate = %v, want nil", err)
	}
	for name, f := range map[string]idlegrid.HardwareFingerprint{
		"Empty":     {},
		"Unsorted":  {GPUs: []idlegrid.GPU{h100("GPU-b"), h100("GPU-a")}},
		"Duplicate": {GPUs: []idlegrid.GPU{h100("GPU-a"), h100("GPU-a")}},
		"NoVRAM":    {GPUs: []idlegrid.GPU{{UUID: "GPU-a", Model: "T4"}}},
		"LongVBIOS": {GPUs: []idlegrid.GPU{{UUID: "GPU-a", Model: "T4", VRAMMB: 1, VBIOSVersion: strings.Repeat("9", 129)}}},
	} {
		t.Run(name, func(t *testing.T) {
			if err := f.Validate("f"); idlegrid.ErrorCode(err) != idlegrid.EINVALID {
				t.Fatalf("Validate = %v, want EINVALID", err)
			}
		})
	}
}

func TestAttestation_Message(t *testing.T) {
	a := idlegrid.Attestation{NodeID: "nod_1", Fingerprint: idlegrid.FingerprintOf([]idlegrid.GPU{h100("GPU-a")}),
		SignedAt: time.UnixMilli(1700000000123)}
	old := "idlegrid-attestation-v1\nnode=nod_1\nsigned_at=1700000000123\nfingerprint=" + a.Fingerprint.Hash() + "\n"
	if got := string(a.Message()); got != old {
		t.Errorf("Message without a runner = %q, want the older agents' %q", got, old)
	}
	a.ChallengeRunner = idlegrid.RunnerCUDA
	if got, want := string(a.Message()), old+"challenge_runner=cuda\n"; got != want {
		t.Errorf("Message with a runner = %q, want %q", got, want)
	}
}

func TestChallengeRunner_Validate(t *testing.T) {
	for _, r := range []idlegrid.ChallengeRunner{"", "simulated", "cuda"} {
		if err := r.Validate("attestation.challenge_runner"); err != nil {
			t.Errorf("Validate(%q) = %v", r, err)
		}
	}
	err := idlegrid.ChallengeRunner("cuda\nnode=x").Validate("attestation.challenge_runner")
	if idlegrid.ErrorCode(err) != idlegrid.EINVALID || !strings.Contains(err.Error(), "attestation.challenge_runner") {
		t.Errorf("Validate of an unknown runner = %v, want EINVALID naming the field", err)
	}
}

// gpusWith is n GPUs, each with every text field length bytes long.
func gpusWith(n, length int) []idlegrid.GPU {
	gpus := make([]idlegrid.GPU, n)
	for i := range gpus {
		text := fmt.Sprintf("%03d", i) + strings.Repeat("x", length-3)
		gpus[i] = idlegrid.GPU{UUID: text, Model: text, VRAMMB: 81920, PCIBusID: text, PCIDeviceID: text,
			PCISubsystemID: text, DriverVersion: text, VBIOSVersion: text}
	}
	return gpus
}

// TestHardwareFingerprint_Validate_fitsTheAuditLog: the log keeps every
// attestation the server takes, so whatever Validate takes fits an entry;
// a fingerprint too big for one is refused, naming it.
func TestHardwareFingerprint_Validate_fitsTheAuditLog(t *testing.T) {
	usual := make([]idlegrid.GPU, 64)
	for i := range usual {
		usual[i] = h100(fmt.Sprintf("GPU-%08d-1f2e-3d4c-5b6a-79880a1b2c3d", i))
	}
	if f := idlegrid.FingerprintOf(usual); f.Validate("attestation.fingerprint") != nil {
		t.Fatalf("64 H100s: %v, want valid", f.Validate("attestation.fingerprint"))
	}
	longest := idlegrid.FingerprintOf(gpusWith(64, 128)) // each field at its own limit
	wantField(t, longest.Validate("attestation.fingerprint"), "attestation.fingerprint")

	length := 128
	largest := idlegrid.FingerprintOf(gpusWith(64, length))
	for largest.Validate("f") != nil {
		length--
		largest = idlegrid.FingerprintOf(gpusWith(64, length))
	}
	a := &idlegrid.Attestation{NodeID: "node_1k8lr7kooo7pqd0hj1dbp629d", Fingerprint: largest,
		SignedAt: jobNow, Signature: strings.Repeat("A", 86) + "==", Hash: largest.Hash(), ReceivedAt: jobNow,
		ChallengeRunner: idlegrid.RunnerCUDA}
	if _, err := audit.AttestationEntry(a, "acct_1k8lr7du00q78f603tvbcsc8q", nil); err != nil {
		t.Errorf("the largest valid fingerprint (64 GPUs, fields of %d bytes): %v, want it logged", length, err)
	}
	// Every field of every GPU changed since the last fingerprint: the
	// entry still fits, holding the first changes and their count.
	before := largest
	before.GPUs = slices.Clone(largest.GPUs)
	for i := range before.GPUs {
		g := &before.GPUs[i]
		g.Model, g.DriverVersion, g.VBIOSVersion = strings.Repeat("m", length), strings.Repeat("d", length), strings.Repeat("v", length)
		g.PCIDeviceID, g.PCISubsystemID = strings.Repeat("p", length), strings.Repeat("s", length)
	}
	changes := idlegrid.DiffFingerprints(before, largest)
	if len(changes) < 64*3 {
		t.Fatalf("%d changes, want every GPU's fields changed", len(changes))
	}
	for i := range changes {
		changes[i].ID, changes[i].NodeID, changes[i].FromHash, changes[i].ToHash = "hc_1k8lr7kooo7pqd0hj1dbp629d", a.NodeID, before.Hash(), largest.Hash()
	}
	e, err := audit.AttestationEntry(a, "acct_1k8lr7du00q78f603tvbcsc8q", changes)
	if err != nil {
		t.Fatalf("the largest fingerprint with %d changes: %v, want it logged", len(changes), err)
	}
	if !strings.Contains(string(e.Payload), fmt.Sprintf(`"changes_in_all":%d`, len(changes))) {
		t.Errorf("the entry does not say how many changes there were in all: %.200s…", e.Payload)
	}
}
