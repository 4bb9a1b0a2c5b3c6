package trace

import (
	"io"
	"io/fs"
	"maps"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/gpu"
)

var (
	memSuffixRE   = regexp.MustCompile(`^(.*?)\s*\((\d+)\s*GB\)\s*$`)
	workstationRE = regexp.MustCompile(`^A(4000|5000|6000)$`)
	tiRE          = regexp.MustCompile(`(?i)^(\d{4})\s*Ti$`)
)

// CanonicalModel maps a GPU name as price tables and traces write it
// ("V100 (32 GB)", "A6000 (48 GB)", "H100 PCIe (80GB)", "RTX4090") onto
// idlegrid's canonical model name ("V100-32GB", "RTXA6000", "H100-80GB",
// "RTX4090"), the name agents report and renters ask for. vramMB helps
// where a family comes in several sizes and the name does not say; 0 when
// unknown.
func CanonicalModel(name string, vramMB int) string {
	name = strings.TrimSpace(name)
	if m := memSuffixRE.FindStringSubmatch(name); m != nil {
		name = m[1]
		if gb, err := strconv.Atoi(m[2]); err == nil && gb > 0 && gb < 10_000 {
			vramMB = gb * 1024
		}
	}
	ada := ""
	if base, ok := strings.CutSuffix(name, "-Ada"); ok {
		name, ada = base, "-Ada"
	}
	switch {
	case workstationRE.MatchString(name):
		name = "RTX " + name
	case tiRE.MatchString(name):
		name = "RTX " + tiRE.ReplaceAllString(name, "$1 Ti")
	}
	return gpu.ModelName(name, vramMB) + ada
}

// PriceOffer is one priced GPU offer of a cloud or a marketplace.
type PriceOffer struct {
	Source   string // "cloud" (on-demand list prices) or "marketplace"
	Provider string
	Model    string // canonical
	GPUs     int
	// PerGPU is the on-demand price per GPU-hour (cloud), or the asking
	// price per GPU-hour (marketplace).
	PerGPU idlegrid.Micros
	// SpotPerGPU is the cloud's interruptible price per GPU-hour; zero when
	// the table has none.
	SpotPerGPU idlegrid.Micros
	Region     string // marketplace: the continent code, e.g. EU; cloud: ""
}

// Prices is every offer of the price tables read.
type Prices struct {
	Source string
	Offers []PriceOffer
	Report
}

// OnDemand is the median cloud on-demand price per GPU-hour of a model.
func (p *Prices) OnDemand(model string) (idlegrid.Micros, bool) {
	return p.median(model, func(o PriceOffer) idlegrid.Micros {
		if o.Source == "cloud" {
			return o.PerGPU
		}
		return 0
	})
}

// Market is what the GPU rents for in a marketplace, per GPU-hour: the
// median marketplace ask of the model, or failing that the median cloud
// spot price (the interruptible price a provider competes with).
func (p *Prices) Market(model string) (idlegrid.Micros, bool) {
	if m, ok := p.median(model, func(o PriceOffer) idlegrid.Micros {
		if o.Source == "marketplace" {
			return o.PerGPU
		}
		return 0
	}); ok {
		return m, true
	}
	return p.median(model, func(o PriceOffer) idlegrid.Micros { return o.SpotPerGPU })
}

// Models lists the models with an on-demand price, sorted.
func (p *Prices) Models() []string {
	set := map[string]bool{}
	for _, o := range p.Offers {
		if o.Source == "cloud" && o.PerGPU > 0 {
			set[o.Model] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

func (p *Prices) median(model string, price func(PriceOffer) idlegrid.Micros) (idlegrid.Micros, bool) {
	var ps []idlegrid.Micros
	for _, o := range p.Offers {
		if strings.EqualFold(o.Model, model) {
			if v := price(o); v > 0 {
				ps = append(ps, v)
			}
		}
	}
	if len(ps) == 0 {
		return 0, false
	}
	return MedianMicros(ps), true
}

// MedianMicros is the median of ps (the lower middle one for an even
// count: a price someone actually asked, never an average of two). It
// sorts ps.
func MedianMicros(ps []idlegrid.Micros) idlegrid.Micros {
	if len(ps) == 0 {
		return 0
	}
	slices.Sort(ps)
	return ps[(len(ps)-1)/2]
}

// Price table files, as the shared data lays them out.
const (
	CloudPriceFile = "cloud-gpus.csv"
	VastPriceFile  = "vast-snapshot/vms.csv"
)

// ReadPrices reads the price tables in fsys: CloudPriceFile (required)
// and VastPriceFile (when present).
func ReadPrices(fsys fs.FS, source string, opts Options) (*Prices, error) {
	p := &Prices{Source: source}
	f, err := fsys.Open(CloudPriceFile)
	if err != nil {
		return nil, idlegrid.Invalid(source, "no %s: give the gpu-prices folder (Full Stack Deep Learning's cloud GPU table)", CloudPriceFile)
	}
	offers, rep, err := ReadCloudPrices(f, path.Join(source, CloudPriceFile), opts)
	f.Close()
	if err != nil {
		return nil, err
	}
	p.Offers, p.Report = offers, rep
	if f, err := fsys.Open(VastPriceFile); err == nil {
		offers, rep, err := ReadVastPrices(f, path.Join(source, VastPriceFile), opts)
		f.Close()
		if err != nil {
			return nil, err
		}
		p.Offers = append(p.Offers, offers...)
		p.merge(rep)
	}
	return p, nil
}

// ReadCloudPrices reads Full Stack Deep Learning's cloud GPU table
// (cloud-gpus.csv): columns Cloud, GPU Type, GPUs, Per-GPU (on-demand $
// per GPU-hour) and Spot ($ per hour for the whole instance, often empty).
func ReadCloudPrices(r io.Reader, source string, opts Options) ([]PriceOffer, Report, error) {
	return readOffers(r, source, opts, cloudRow, "cloud", "gpu type", "gpus", "per-gpu")
}

// readOffers reads a table of price offers, each row with row; want are
// the columns it needs.
func readOffers(r io.Reader, source string, opts Options, row func(*table) (PriceOffer, error), want ...string) ([]PriceOffer, Report, error) {
	var rep Report
	t, err := newTable(r, source, opts, &rep, want...)
	if err != nil {
		return nil, rep, err
	}
	var out []PriceOffer
	if err := t.each(func() error {
		o, err := row(t)
		if err == nil {
			out = append(out, o)
		}
		return err
	}); err != nil {
		return nil, rep, err
	}
	return out, rep, nil
}

func cloudRow(t *table) (PriceOffer, error) {
	o := PriceOffer{Source: "cloud", Provider: t.get("cloud")}
	if t.get("gpu type") == "" {
		return o, t.errf("gpu type", "required")
	}
	o.Model = CanonicalModel(t.get("gpu type"), 0)
	gpus, err := t.int("gpus", 1, 64)
	if err != nil {
		return o, err
	}
	o.GPUs = int(gpus)
	if o.PerGPU, err = t.money("per-gpu"); err != nil {
		return o, err
	} else if o.PerGPU == 0 {
		return o, t.errf("per-gpu", "required")
	}
	spot, err := t.money("spot")
	if err != nil {
		return o, err
	}
	o.SpotPerGPU = spot / idlegrid.Micros(o.GPUs)
	return o, nil
}

var (
	vastMiBRE   = regexp.MustCompile(`'SizeInMiB':\s*(\d+)`)
	vastCountRE = regexp.MustCompile(`'Count':\s*(\d+)`)
)

// ReadVastPrices reads a Vast.ai offer snapshot as SkyPilot's catalog
// keeps it (vms.csv): columns AcceleratorName, AcceleratorCount, Price ($
// per hour for the whole offer), GpuInfo (for the memory) and Region
// ("State, CC, Continent").
func ReadVastPrices(r io.Reader, source string, opts Options) ([]PriceOffer, Report, error) {
	return readOffers(r, source, opts, vastRow, "acceleratorname", "acceleratorcount", "price")
}

func vastRow(t *table) (PriceOffer, error) {
	o := PriceOffer{Source: "marketplace", Provider: "Vast.ai"}
	if t.get("acceleratorname") == "" {
		return o, t.errf("acceleratorname", "required")
	}
	gpus, err := t.int("acceleratorcount", 1, 64)
	if err != nil {
		return o, err
	}
	o.GPUs = int(gpus)
	price, err := t.money("price")
	if err != nil {
		return o, err
	} else if price == 0 {
		return o, t.errf("price", "required")
	}
	o.PerGPU = price / idlegrid.Micros(o.GPUs)
	vram := 0
	info := t.get("gpuinfo")
	if m, c := vastMiBRE.FindStringSubmatch(info), vastCountRE.FindStringSubmatch(info); m != nil && c != nil {
		mib, _ := strconv.Atoi(m[1])
		if n, _ := strconv.Atoi(c[1]); n > 0 && mib > 0 && mib < 100_000_000 {
			vram = mib / n
		}
	}
	o.Model = CanonicalModel(t.get("acceleratorname"), vram)
	if parts := strings.Split(t.get("region"), ","); len(parts) > 0 {
		o.Region = strings.TrimSpace(parts[len(parts)-1])
	}
	return o, nil
}
