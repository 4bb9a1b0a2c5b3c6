package gpu

import (
	"math"
	"regexp"
	"strconv"
	"strings"
)

// Model is a GPU model idlegrid knows by a canonical name, the name renters
// ask for in job.gpu_models.
type Model struct {
	Name        string // canonical, e.g. "H100-80GB"
	VRAMMB      int    // memory of a typical board, as the fake detector reports it
	Product     string // the name NVIDIA's driver reports, e.g. "NVIDIA H100 80GB HBM3"
	ComputeCap  string // CUDA compute capability
	PowerLimitW int    // the default power limit of a typical board
}

// Models lists the models the fake detector simulates, largest first.
var Models = []Model{
	{"H100-80GB", 81920, "NVIDIA H100 80GB HBM3", "9.0", 700},
	{"A100-80GB", 81920, "NVIDIA A100-SXM4-80GB", "8.0", 400},
	{"A100-40GB", 40960, "NVIDIA A100-SXM4-40GB", "8.0", 400},
	{"L40S", 46068, "NVIDIA L40S", "8.9", 350},
	{"RTX3090", 24576, "NVIDIA GeForce RTX 3090", "8.6", 350},
	{"RTX4090", 24564, "NVIDIA GeForce RTX 4090", "8.9", 450},
	{"L4", 23034, "NVIDIA L4", "8.9", 72},
	{"A10G", 23028, "NVIDIA A10G", "8.6", 300},
	{"T4", 15360, "Tesla T4", "7.5", 70},
}

// LookupModel finds a model of Models by canonical name, ignoring case.
func LookupModel(name string) (Model, bool) {
	for _, m := range Models {
		if strings.EqualFold(m.Name, strings.TrimSpace(name)) {
			return m, true
		}
	}
	return Model{}, false
}

// MaxModelName is the longest model name ModelName returns; job.gpu_models
// takes names of at most 64 characters.
const MaxModelName = 64

var (
	// datacenter families, longest first where one is a prefix of another
	familyRE = regexp.MustCompile(`^(GH200|GB200|B200|B100|H200|H100|H800|H20|A100|A800|A10G|A10|A16|A30|A40|A2|L40S|L40|L4|T4|V100S|V100|P100|P40|P4)\b`)
	// consumer and workstation cards: RTX 4090, GTX 1080 Ti, RTX 4080 SUPER, RTX A6000
	geforceRE = regexp.MustCompile(`^(RTX|GTX) ?(A?\d{4})((?: (?:TI|SUPER|D))*)\b`)
	gbRE      = regexp.MustCompile(`(\d+) ?GB\b`)
	notNameRE = regexp.MustCompile(`[^A-Za-z0-9.]+`)
)

// sizedFamilies are families sold with more than one memory size; their
// canonical names carry it ("A100-40GB"), taken from the product name or,
// failing that, the nearest size to the memory the driver reports.
var sizedFamilies = map[string][]int{
	"H100": {80, 94, 96}, "H200": {141}, "H800": {80}, "A100": {40, 80}, "A800": {40, 80},
	"V100": {16, 32}, "V100S": {32}, "GH200": {96, 144}, "B200": {180, 192},
}

// ModelName maps the product name a driver reports, e.g. "NVIDIA H100 80GB
// HBM3", "NVIDIA A100-PCIE-40GB", "NVIDIA GeForce RTX 4090" or "Tesla T4",
// with the memory it reports in MiB, onto idlegrid's canonical model name:
// "H100-80GB", "A100-40GB", "RTX4090", "T4". A name it does not know is
// kept, made safe: letters, digits, '.' and '-', at most MaxModelName.
func ModelName(product string, vramMB int) string {
	s := strings.ToUpper(strings.Join(strings.Fields(product), " "))
	for _, p := range []string{"NVIDIA ", "GEFORCE ", "TESLA ", "QUADRO "} {
		s = strings.TrimPrefix(s, p)
	}
	if m := familyRE.FindStringSubmatch(s); m != nil {
		fam := m[1]
		sizes, sized := sizedFamilies[fam]
		if !sized {
			return fam
		}
		return fam + "-" + strconv.Itoa(memorySize(s, vramMB, sizes)) + "GB"
	}
	if m := geforceRE.FindStringSubmatch(s); m != nil {
		name := m[1] + m[2] + strings.ReplaceAll(m[3], " ", "")
		if strings.Contains(s, "LAPTOP") {
			name += "-Laptop"
		}
		if strings.Contains(s, "ADA GENERATION") {
			name += "-Ada"
		}
		return name
	}
	return sanitizeModel(product)
}

// memorySize is the memory size in GB a product name states, or else the
// size in sizes nearest to vramMB.
func memorySize(name string, vramMB int, sizes []int) int {
	if m := gbRE.FindStringSubmatch(name); m != nil {
		if gb, err := strconv.Atoi(m[1]); err == nil && gb > 0 {
			return gb
		}
	}
	best := sizes[0]
	for _, gb := range sizes {
		if math.Abs(float64(vramMB)/1024-float64(gb)) < math.Abs(float64(vramMB)/1024-float64(best)) {
			best = gb
		}
	}
	return best
}

func sanitizeModel(product string) string {
	s := strings.TrimPrefix(strings.TrimSpace(product), "NVIDIA ")
	s = strings.Trim(notNameRE.ReplaceAllString(s, "-"), "-.")
	if len(s) > MaxModelName {
		s = strings.TrimRight(s[:MaxModelName], "-.")
	}
	if s == "" {
		return "unknown"
	}
	return s
}

// architectureCaps are the compute capabilities of architectures that have
// only one; Ampere (8.0 or 8.6) and Pascal (6.0 or 6.1) do not.
var architectureCaps = map[string]string{
	"hopper": "9.0", "ada lovelace": "8.9", "turing": "7.5", "volta": "7.0",
}

// ComputeCapOf returns the compute capability of a canonical model, or of
// its architecture as the driver names it ("Hopper"), or "" when unknown.
// nvidia-smi's XML report does not state it; NVML does.
func ComputeCapOf(model, architecture string) string {
	if m, ok := LookupModel(model); ok {
		return m.ComputeCap
	}
	for _, p := range []struct{ prefix, cap string }{
		{"H100", "9.0"}, {"H200", "9.0"}, {"GH200", "9.0"}, {"A100", "8.0"}, {"A30", "8.0"},
		{"A10", "8.6"}, {"A40", "8.6"}, {"RTX20", "7.5"}, {"RTX30", "8.6"}, {"RTX40", "8.9"}, {"L4", "8.9"}, {"T4", "7.5"}, {"V100", "7.0"},
	} {
		if strings.HasPrefix(model, p.prefix) {
			return p.cap
		}
	}
	return architectureCaps[strings.ToLower(strings.TrimSpace(architecture))]
}
