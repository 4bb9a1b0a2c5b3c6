package gpu_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/idlegrid/idlegrid/internal/gpu"
)

func TestModelName(t *testing.T) {
	tests := []struct {
		product string
		vramMB  int
		want    string
	}{
		{"NVIDIA H100 80GB HBM3", 81559, "H100-80GB"},
		{"NVIDIA H100 PCIe", 81559, "H100-80GB"},
		{"NVIDIA H100 NVL", 95830, "H100-94GB"},
		{"NVIDIA H200", 143771, "H200-141GB"},
		{"NVIDIA A100-SXM4-80GB", 81920, "A100-80GB"},
		{"NVIDIA A100 80GB PCIe", 81920, "A100-80GB"},
		{"NVIDIA A100-PCIE-40GB", 40536, "A100-40GB"},
		{"NVIDIA A100-SXM4-40GB", 40960, "A100-40GB"},
		{"Tesla V100-SXM2-32GB", 32510, "V100-32GB"},
		{"Tesla V100-PCIE-16GB", 16160, "V100-16GB"},
		{"Tesla V100S-PCIE-32GB", 32510, "V100S-32GB"},
		{"NVIDIA L40S", 46068, "L40S"},
		{"NVIDIA L40", 46068, "L40"},
		{"NVIDIA L4", 23034, "L4"},
		{"NVIDIA A10G", 23028, "A10G"},
		{"NVIDIA A10", 23028, "A10"},
		{"NVIDIA A40", 46068, "A40"},
		{"Tesla T4", 15360, "T4"},
		{"NVIDIA T4", 15360, "T4"},
		{"NVIDIA GeForce RTX 4090", 24564, "RTX4090"},
		{"NVIDIA GeForce RTX 3090", 24576, "RTX3090"},
		{"GeForce RTX 3090", 24576, "RTX3090"},
		{"NVIDIA GeForce RTX 4070 Ti SUPER", 16376, "RTX4070TISUPER"},
		{"NVIDIA GeForce RTX 3080 Laptop GPU", 16384, "RTX3080-Laptop"},
		{"NVIDIA GeForce GTX 1080 Ti", 11264, "GTX1080TI"},
		{"NVIDIA RTX A6000", 49140, "RTXA6000"},
		{"NVIDIA RTX 6000 Ada Generation", 49140, "RTX6000-Ada"},
		{"  NVIDIA   GeForce RTX 4090 ", 24564, "RTX4090"},
		// unknown names are kept, made safe
		{"NVIDIA TITAN V", 12288, "TITAN-V"},
		{"NVIDIA Graphics Device", 1024, "Graphics-Device"},
		{"Quadro P2000 <script>", 5120, "Quadro-P2000-script"},
		{"", 0, "unknown"},
		{"!!!", 0, "unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.product, func(t *testing.T) {
			if got := gpu.ModelName(tt.product, tt.vramMB); got != tt.want {
				t.Errorf("ModelName(%q, %d) = %q, want %q", tt.product, tt.vramMB, got, tt.want)
			}
		})
	}
	t.Run("EveryKnownModel", func(t *testing.T) {
		for _, m := range gpu.Models {
			if got := gpu.ModelName(m.Product, m.VRAMMB); got != m.Name {
				t.Errorf("ModelName(%q) = %q, want %q", m.Product, got, m.Name)
			}
		}
	})
	t.Run("LongName", func(t *testing.T) {
		got := gpu.ModelName(strings.Repeat("Very Long Product ", 10), 1)
		if len(got) > gpu.MaxModelName || strings.HasSuffix(got, "-") {
			t.Errorf("ModelName = %q (%d characters), want at most %d, not ending in '-'", got, len(got), gpu.MaxModelName)
		}
	})
}

var safeModelRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9.-]{0,63}$`)

func FuzzModelName(f *testing.F) {
	for _, s := range []string{"NVIDIA H100 80GB HBM3", "Tesla T4", "NVIDIA GeForce RTX 4090", "日本語", "A100 0GB", "H100 99999999999999999999GB"} {
		f.Add(s, 81559)
	}
	f.Fuzz(func(t *testing.T, product string, vramMB int) {
		got := gpu.ModelName(product, vramMB)
		if !safeModelRE.MatchString(got) {
			t.Fatalf("ModelName(%q, %d) = %q, not a safe model name", product, vramMB, got)
		}
	})
}

func TestComputeCapOf(t *testing.T) {
	tests := []struct{ model, arch, want string }{
		{"H100-80GB", "Hopper", "9.0"},
		{"T4", "", "7.5"},
		{"A100-40GB", "Ampere", "8.0"},
		{"A40", "Ampere", "8.6"},
		{"RTX3080-Laptop", "Ampere", "8.6"},
		{"TITAN-V", "Volta", "7.0"},
		{"Graphics-Device", "Ada Lovelace", "8.9"},
		{"Graphics-Device", "Ampere", ""},
		{"Graphics-Device", "", ""},
	}
	for _, tt := range tests {
		if got := gpu.ComputeCapOf(tt.model, tt.arch); got != tt.want {
			t.Errorf("ComputeCapOf(%q, %q) = %q, want %q", tt.model, tt.arch, got, tt.want)
		}
	}
}

func TestDevice_Fault(t *testing.T) {
	tests := []struct {
		name string
		dev  gpu.Device
		want string
	}{
		{"Healthy", gpu.Device{}, ""},
		{"ApplicationXids", gpu.Device{XidErrors: []uint64{13, 31, 43, 45, 68, 109}}, ""},
		{"HardwareXid", gpu.Device{XidErrors: []uint64{13, 79, 48}}, "Xid 79, 48"},
		{"DriverFault", gpu.Device{Faults: []string{"the GPU needs a reset"}}, "the GPU needs a reset"},
		{"Both", gpu.Device{XidErrors: []uint64{94}, Faults: []string{"row remapping failed"}}, "Xid 94; row remapping failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.dev.Fault(); got != tt.want {
				t.Errorf("Fault() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestDevice_Clone(t *testing.T) {
	d := gpu.Device{Processes: []gpu.Process{{PID: 1}}, XidErrors: []uint64{79}, Faults: []string{"x"}}
	c := d.Clone()
	c.Processes[0].PID, c.XidErrors[0], c.Faults[0] = 2, 13, "y"
	if d.Processes[0].PID != 1 || d.XidErrors[0] != 79 || d.Faults[0] != "x" {
		t.Errorf("Clone shares slices with the original: %+v", d)
	}
}
