package fake_test

import (
	"context"
	"testing"

	"github.com/idlegrid/idlegrid/internal/gpu/fake"
)

func TestDetector_Actual(t *testing.T) {
	d, err := fake.Parse("2xH100-80GB", "seed")
	if err != nil {
		t.Fatal(err)
	}
	devs, err := d.Detect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	honest, liar := devs[0], devs[1]
	if honest.VBIOSVersion != fake.VBIOS || honest.PCIDeviceID != "fake-H100-80GB" || honest.PCISubsystemID != fake.PCISubsystemID ||
		honest.DriverVersion != fake.Driver || honest.PCIBusID != "00000000:10:00.0" {
		t.Fatalf("fingerprint fields = %+v, want the fake's named values", honest.GPU)
	}
	if got, ok := d.Actual(honest.UUID); !ok || got != (fake.Actual{Model: "H100-80GB", VRAMMB: 79462}) {
		t.Fatalf("Actual(honest) = %+v, %v; want what it claims, 97%% of its memory", got, ok)
	}
	if err := d.SetActual(liar.UUID, fake.Actual{Model: "t4"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := d.Actual(liar.UUID); got != (fake.Actual{Model: "T4", VRAMMB: 14899}) {
		t.Fatalf("Actual(liar) = %+v, want a T4 with a T4's memory", got)
	}
	again, _ := d.Detect(context.Background())
	if again[1].Model != "H100-80GB" {
		t.Fatalf("the liar claims %s, want it to keep claiming H100-80GB", again[1].Model)
	}
	if err := d.SetActual(liar.UUID, fake.Actual{Model: "TPU"}); err == nil {
		t.Fatal("SetActual accepted an unknown model")
	}
	if err := d.SetActual("GPU-none", fake.Actual{Model: "T4"}); err == nil {
		t.Fatal("SetActual accepted an unknown GPU")
	}
	if _, ok := d.Actual("GPU-none"); ok {
		t.Fatal("Actual found an unknown GPU")
	}
}
