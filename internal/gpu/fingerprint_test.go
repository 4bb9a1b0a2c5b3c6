package gpu_test

import (
	"strings"
	"testing"

	"github.com/idlegrid/idlegrid/internal/gpu"
)

func TestPCIID(t *testing.T) {
	for in, want := range map[string]string{
		"233010DE": "233010DE", "0x233010de": "233010DE", " 0X1EB810DE ": "1EB810DE", "10DE": "000010DE",
		"": "", "N/A": "", "0x": "", "123456789": "", "0": "",
	} {
		if got := gpu.PCIID(in); got != want {
			t.Errorf("PCIID(%q) = %q, want %q", in, got, want)
		}
	}
	if got := gpu.PCIIDOf(0x233010DE); got != "233010DE" {
		t.Errorf("PCIIDOf = %q", got)
	}
}

func TestVersion(t *testing.T) {
	if got := gpu.Version(" 96.00.74.00.01 "); got != "96.00.74.00.01" {
		t.Errorf("Version = %q", got)
	}
	if got := gpu.Version(strings.Repeat("9", 100)); len(got) != gpu.MaxVersion {
		t.Errorf("len(Version(100 chars)) = %d, want %d", len(got), gpu.MaxVersion)
	}
}
