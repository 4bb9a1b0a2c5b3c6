package idlegrid_test

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
)

func TestReliabilityOf(t *testing.T) {
	tests := []struct {
		completed, failed int64
		want              float64
	}{
		{0, 0, 0.9},
		{0, 1, 9.0 / 11},
		{1, 0, 10.0 / 11},
		{90, 0, 0.99},
		{990, 0, 0.999},
		{0, 90, 0.09},
		{45, 45, 54.0 / 100},
	}
	for _, tt := range tests {
		if got := idlegrid.ReliabilityOf(tt.completed, tt.failed); math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("ReliabilityOf(%d, %d) = %v, want %v", tt.completed, tt.failed, got, tt.want)
		}
	}
	t.Run("always in (0,1]", func(t *testing.T) {
		for _, c := range []int64{0, 1, 10, 1e6, 1e12} {
			for _, f := range []int64{0, 1, 10, 1e6, 1e12} {
				if got := idlegrid.ReliabilityOf(c, f); got <= 0 || got > 1 {
					t.Errorf("ReliabilityOf(%d, %d) = %v", c, f, got)
				}
			}
		}
	})
	t.Run("one early failure does not ruin a node", func(t *testing.T) {
		if got := idlegrid.ReliabilityOf(0, 1); got < 0.8 {
			t.Errorf("ReliabilityOf(0, 1) = %v", got)
		}
	})
}

func TestWorkloadKind_Valid(t *testing.T) {
	for _, k := range idlegrid.WorkloadKinds {
		if !k.Valid() {
			t.Errorf("%q not valid", k)
		}
	}
	for _, k := range []idlegrid.WorkloadKind{"", "Training", "mining"} {
		if k.Valid() {
			t.Errorf("%q valid", k)
		}
	}
}

func validAsk() idlegrid.Ask {
	return idlegrid.Ask{
		FloorMicrosPerGPUHour: map[idlegrid.Tier]idlegrid.Micros{idlegrid.TierSilver: 2 * idlegrid.MicrosPerUnit},
		AllowedKinds:          []idlegrid.WorkloadKind{idlegrid.KindInference},
		MaxJobSeconds:         3600,
	}
}

func TestAsk_Validate(t *testing.T) {
	a := validAsk()
	if err := a.Validate("offer.ask"); err != nil {
		t.Fatalf("valid ask: %v", err)
	}
	tests := []struct {
		name   string
		change func(a *idlegrid.Ask)
		field  string
	}{
		{"no prices", func(a *idlegrid.Ask) { a.FloorMicrosPerGPUHour = nil }, "offer.ask.floor_micros_per_gpu_hour"},
		{"unknown tier", func(a *idlegrid.Ask) { a.FloorMicrosPerGPUHour = map[idlegrid.Tier]idlegrid.Micros{"platinum": 1} }, "offer.ask.floor_micros_per_gpu_hour"},
		{"zero price", func(a *idlegrid.Ask) { a.FloorMicrosPerGPUHour[idlegrid.TierSilver] = 0 }, "offer.ask.floor_micros_per_gpu_hour.silver"},
		{"negative price", func(a *idlegrid.Ask) { a.FloorMicrosPerGPUHour[idlegrid.TierSilver] = -1 }, "offer.ask.floor_micros_per_gpu_hour.silver"},
		{"price over 1000", func(a *idlegrid.Ask) { a.FloorMicrosPerGPUHour[idlegrid.TierGold] = 1000*idlegrid.MicrosPerUnit + 1 }, "offer.ask.floor_micros_per_gpu_hour.gold"},
		{"unknown kind", func(a *idlegrid.Ask) { a.AllowedKinds = append(a.AllowedKinds, "mining") }, "offer.ask.allowed_kinds"},
		{"negative max", func(a *idlegrid.Ask) { a.MaxJobSeconds = -1 }, "offer.ask.max_job_seconds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := validAsk()
			tt.change(&a)
			wantField(t, a.Validate("offer.ask"), tt.field)
		})
	}
	t.Run("bounds", func(t *testing.T) {
		a := validAsk()
		a.FloorMicrosPerGPUHour[idlegrid.TierBronze] = 1
		a.FloorMicrosPerGPUHour[idlegrid.TierGold] = 1000 * idlegrid.MicrosPerUnit
		a.MaxJobSeconds = 0
		if err := a.Validate("ask"); err != nil {
			t.Error(err)
		}
	})
}

func TestAsk_Floor(t *testing.T) {
	a := idlegrid.Ask{FloorMicrosPerGPUHour: map[idlegrid.Tier]idlegrid.Micros{idlegrid.TierSilver: 5, idlegrid.TierGold: 0}}
	tests := []struct {
		tier  idlegrid.Tier
		price idlegrid.Micros
		ok    bool
	}{
		{idlegrid.TierSilver, 5, true},
		{idlegrid.TierGold, 0, false},
		{idlegrid.TierBronze, 0, false},
	}
	for _, tt := range tests {
		if p, ok := a.Floor(tt.tier); ok != tt.ok || (ok && p != tt.price) {
			t.Errorf("Floor(%s) = %d, %v; want %d, %v", tt.tier, p, ok, tt.price, tt.ok)
		}
	}
	var empty idlegrid.Ask
	if _, ok := empty.Floor(idlegrid.TierSilver); ok {
		t.Errorf("empty ask sells silver")
	}
}

func TestAsk_Allows(t *testing.T) {
	var all idlegrid.Ask
	for _, k := range idlegrid.WorkloadKinds {
		if !all.Allows(k) {
			t.Errorf("an ask with no kinds refuses %s", k)
		}
	}
	some := validAsk()
	if !some.Allows(idlegrid.KindInference) || some.Allows(idlegrid.KindTraining) {
		t.Errorf("ask allowing %v: inference %v training %v", some.AllowedKinds, some.Allows(idlegrid.KindInference), some.Allows(idlegrid.KindTraining))
	}
}

func validOffer() idlegrid.Offer {
	return idlegrid.Offer{
		Name: "rig-1.home",
		GPUs: []idlegrid.GPU{
			{UUID: "GPU-a", Model: "RTX4090", VRAMMB: 24576},
			{UUID: "GPU-b", Model: "RTX4090", VRAMMB: 24576},
		},
		CPUCores:  16,
		RAMMB:     64000,
		DiskGB:    500,
		Region:    "eu-west",
		Residency: "EU",
		Schedule:  idlegrid.Schedule{Mode: idlegrid.ScheduleAlways},
		Ask:       validAsk(),
	}
}

func TestOffer_Validate(t *testing.T) {
	o := validOffer()
	if err := o.Validate(); err != nil {
		t.Fatalf("valid offer: %v", err)
	}
	manyGPUs := make([]idlegrid.GPU, 65)
	for i := range manyGPUs {
		manyGPUs[i] = idlegrid.GPU{UUID: fmt.Sprint("g", i), Model: "m", VRAMMB: 1}
	}
	tests := []struct {
		name   string
		change func(o *idlegrid.Offer)
		field  string
	}{
		{"no name", func(o *idlegrid.Offer) { o.Name = "" }, "offer.name"},
		{"name with space", func(o *idlegrid.Offer) { o.Name = "my rig" }, "offer.name"},
		{"name too long", func(o *idlegrid.Offer) { o.Name = strings.Repeat("a", 64) }, "offer.name"},
		{"name starts with dash", func(o *idlegrid.Offer) { o.Name = "-rig" }, "offer.name"},
		{"no gpus", func(o *idlegrid.Offer) { o.GPUs = nil }, "offer.gpus"},
		{"too many gpus", func(o *idlegrid.Offer) { o.GPUs = manyGPUs }, "offer.gpus"},
		{"gpu without uuid", func(o *idlegrid.Offer) { o.GPUs[1].UUID = "" }, "offer.gpus.uuid"},
		{"duplicate uuid", func(o *idlegrid.Offer) { o.GPUs[1].UUID = "GPU-a" }, "offer.gpus.uuid"},
		{"gpu without model", func(o *idlegrid.Offer) { o.GPUs[0].Model = "" }, "offer.gpus.model"},
		{"gpu without vram", func(o *idlegrid.Offer) { o.GPUs[0].VRAMMB = 0 }, "offer.gpus.vram_mb"},
		{"model longer than a job may name", func(o *idlegrid.Offer) { o.GPUs[1].Model = strings.Repeat("m", idlegrid.MaxGPUModelBytes+1) }, "offer.gpus.model"},
		{"uuid longer than a fingerprint's", func(o *idlegrid.Offer) { o.GPUs[1].UUID = strings.Repeat("u", 129) }, "offer.gpus.uuid"},
		{"long vbios", func(o *idlegrid.Offer) { o.GPUs[0].VBIOSVersion = strings.Repeat("9", 129) }, "offer.gpus.vbios_version"},
		{"too many labels", func(o *idlegrid.Offer) {
			o.Labels = map[string]string{}
			for i := range idlegrid.MaxOfferLabels + 1 {
				o.Labels[fmt.Sprint("l", i)] = "x"
			}
		}, "offer.labels"},
		{"empty label name", func(o *idlegrid.Offer) { o.Labels = map[string]string{"": "x"} }, "offer.labels"},
		{"long label name", func(o *idlegrid.Offer) { o.Labels = map[string]string{strings.Repeat("k", 129): "x"} }, "offer.labels"},
		{"long label", func(o *idlegrid.Offer) { o.Labels = map[string]string{"rack": strings.Repeat("v", 257)} }, "offer.labels.rack"},
		{"label with a line break", func(o *idlegrid.Offer) { o.Labels = map[string]string{"rack": "a\nb"} }, "offer.labels.rack"},
		{"too many price windows", func(o *idlegrid.Offer) {
			o.Ask.TimeOfDay = make([]idlegrid.PriceWindow, idlegrid.MaxScheduleWindows+1)
			for i := range o.Ask.TimeOfDay {
				o.Ask.TimeOfDay[i] = idlegrid.PriceWindow{Start: "09:00", End: "17:00", MultiplierPercent: 150}
			}
		}, "offer.ask.time_of_day"},
		{"negative cpu", func(o *idlegrid.Offer) { o.CPUCores = -1 }, "offer.cpu_cores"},
		{"bad region", func(o *idlegrid.Offer) { o.Region = "EU West" }, "offer.region"},
		{"no region", func(o *idlegrid.Offer) { o.Region = "" }, "offer.region"},
		{"no residency", func(o *idlegrid.Offer) { o.Residency = "" }, "offer.residency"},
		{"residency no job can name", func(o *idlegrid.Offer) { o.Residency = "EU/US" }, "offer.residency"},
		{"bad schedule", func(o *idlegrid.Offer) { o.Schedule.Mode = "sometimes" }, "offer.schedule.mode"},
		{"bad ask", func(o *idlegrid.Offer) { o.Ask.MaxJobSeconds = -1 }, "offer.ask.max_job_seconds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := validOffer()
			tt.change(&o)
			wantField(t, o.Validate(), tt.field)
		})
	}
	t.Run("each resource named", func(t *testing.T) {
		o := validOffer()
		o.RAMMB = -1
		wantField(t, o.Validate(), "offer.ram_mb")
		o = validOffer()
		o.DiskGB = -1
		wantField(t, o.Validate(), "offer.disk_gb")
	})
}

func TestCheckAgentVersion(t *testing.T) {
	for _, v := range []string{"", "dev", "0.4.1", strings.Repeat("v", idlegrid.MaxAgentVersionBytes)} {
		if err := idlegrid.CheckAgentVersion(v); err != nil {
			t.Errorf("CheckAgentVersion(%q) = %v, want nil", v, err)
		}
	}
	for _, v := range []string{strings.Repeat("v", idlegrid.MaxAgentVersionBytes+1), "0.4.1\nfake", "\xff"} {
		wantField(t, idlegrid.CheckAgentVersion(v), "agent_version")
	}
}

// TestOffer_Validate_everyProblem: an offer wrong in several places is
// refused with each named, the schedule's and the ask's included.
func TestOffer_Validate_everyProblem(t *testing.T) {
	o := validOffer()
	o.Name, o.Region, o.Residency, o.Schedule.Mode, o.Ask.MaxJobSeconds = "", "EU West", "", "sometimes", -1
	o.GPUs[0].Model, o.GPUs[1].Model = "", ""
	want := "offer.name,offer.gpus.model,offer.region,offer.residency,offer.schedule.mode,offer.ask.max_job_seconds"
	if got := fieldsAtFault(t, o.Validate()); got != want {
		t.Errorf("fields at fault = %s\nwant %s", got, want)
	}
}

// TestOffer_Validate_scheduleAndAskFaults: the schedule's and the ask's
// faults are each named too, not only the first of each part.
func TestOffer_Validate_scheduleAndAskFaults(t *testing.T) {
	o := validOffer()
	o.Schedule = idlegrid.Schedule{Mode: "sometimes", TimeZone: "Mars/Olympus",
		Weekly: []idlegrid.WeeklyWindow{{Days: []string{"caturday"}, Start: "25:00", End: "01:00"}}}
	o.Ask.FloorMicrosPerGPUHour["platinum"] = 1
	o.Ask.TimeOfDay = []idlegrid.PriceWindow{{Start: "09:00", End: "18:00", MultiplierPercent: 5}}
	want := "offer.schedule.mode,offer.schedule.time_zone,offer.schedule.weekly[0].days,offer.schedule.weekly[0].start," +
		"offer.ask.floor_micros_per_gpu_hour,offer.ask.time_of_day[0].multiplier_percent"
	if got := fieldsAtFault(t, o.Validate()); got != want {
		t.Errorf("fields at fault = %s\nwant %s", got, want)
	}
}

// A clone equals its offer and shares nothing with it: changing any list
// or map of either leaves the other as it was.
func TestOffer_Clone(t *testing.T) {
	o := testFullOffer()
	c := o.Clone()
	if !reflect.DeepEqual(c, o) {
		t.Fatalf("clone %+v, want %+v", c, o)
	}
	if path := shared(reflect.ValueOf(c), reflect.ValueOf(o), "offer"); path != "" {
		t.Fatalf("the clone shares %s with the offer", path)
	}
	c.GPUs[0].Model = "T4"
	c.Labels["rack"] = "b"
	c.Schedule.Weekly[0].Days[0] = "tue"
	c.Schedule.OneOff[0].End = time.Unix(7200, 0)
	c.Ask.FloorMicrosPerGPUHour[idlegrid.TierSilver] = 2
	c.Ask.AllowedKinds[0] = idlegrid.KindEval
	c.Ask.TimeOfDay[0].Days[0] = "sun"
	c.CachedDatasets[0] = "other"
	c.Models[0].Name = "n"
	if o.GPUs[0].Model != "RTX4090" || o.Labels["rack"] != "a" || o.Schedule.Weekly[0].Days[0] != "mon" ||
		!o.Schedule.OneOff[0].End.Equal(time.Unix(3600, 0)) || o.Ask.FloorMicrosPerGPUHour[idlegrid.TierSilver] != 1 ||
		o.Ask.AllowedKinds[0] != idlegrid.KindTraining || o.Ask.TimeOfDay[0].Days[0] != "sat" ||
		o.CachedDatasets[0] != "ds" || o.Models[0].Name != "m" {
		t.Fatalf("changing the clone changed the offer: %+v", o)
	}
}

// shared returns the path of a slice or map that a and b, values of one
// type, both hold, or "": a field added to Offer that Clone does not copy
// is found here.
func shared(a, b reflect.Value, path string) string {
	if a.Type() == reflect.TypeFor[time.Time]() {
		return "" // a time shares its immutable location
	}
	switch a.Kind() {
	case reflect.Slice:
		if a.Len() > 0 && a.Pointer() == b.Pointer() {
			return path
		}
		for i := range a.Len() {
			if p := shared(a.Index(i), b.Index(i), fmt.Sprintf("%s[%d]", path, i)); p != "" {
				return p
			}
		}
	case reflect.Map:
		if a.Len() > 0 && a.Pointer() == b.Pointer() {
			return path
		}
	case reflect.Struct:
		for i := range a.NumField() {
			if p := shared(a.Field(i), b.Field(i), path+"."+a.Type().Field(i).Name); p != "" {
				return p
			}
		}
	case reflect.Pointer:
		if !a.IsNil() && a.Pointer() == b.Pointer() {
			return path
		}
	}
	return ""
}

// Changing any one field of an offer, at any depth, makes it unequal to
// the offer; a clone is equal. A field added to Offer that Equal does not
// compare fails here.
func TestOffer_Equal(t *testing.T) {
	o := testFullOffer()
	if c := o.Clone(); !o.Equal(&c) {
		t.Fatal("an offer is not equal to its clone")
	}
	for i := 0; ; i++ {
		c, k := o.Clone(), i
		path, ok := changeField(reflect.ValueOf(&c).Elem(), "offer", &k)
		if !ok {
			break
		}
		if o.Equal(&c) {
			t.Errorf("changing %s leaves the offers equal", path)
		}
	}
}

// changeField changes the *n-th changeable value under v (counting down n
// as it goes), and returns its path; false when there are fewer.
func changeField(v reflect.Value, path string, n *int) (string, bool) {
	switch {
	case v.Type() == reflect.TypeFor[time.Time]():
		if *n == 0 {
			v.Set(reflect.ValueOf(v.Interface().(time.Time).Add(time.Second)))
			return path, true
		}
		*n--
		return "", false
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if p, ok := changeField(v.Field(i), path+"."+v.Type().Field(i).Name, n); ok {
				return p, true
			}
		}
		return "", false
	case reflect.Slice:
		for i := range v.Len() {
			if p, ok := changeField(v.Index(i), fmt.Sprintf("%s[%d]", path, i), n); ok {
				return p, true
			}
		}
	case reflect.Map:
		if *n == 0 {
			for _, k := range v.MapKeys() {
				e := reflect.New(v.Type().Elem()).Elem()
				e.Set(v.MapIndex(k))
				zero := 0
				changeField(e, "", &zero)
				v.SetMapIndex(k, e)
				return path + "[" + fmt.Sprint(k) + "]", true
			}
		}
		*n--
		return "", false
	case reflect.String:
		if *n == 0 {
			v.SetString(v.String() + "x")
			return path, true
		}
	case reflect.Int, reflect.Int64:
		if *n == 0 {
			v.SetInt(v.Int() + 1)
			return path, true
		}
	case reflect.Bool:
		if *n == 0 {
			v.SetBool(!v.Bool())
			return path, true
		}
	default:
		panic(fmt.Sprintf("changeField: %s is a %s: teach the test to change it", path, v.Kind()))
	}
	if v.Kind() != reflect.Slice {
		*n--
	}
	return "", false
}

// testFullOffer is an offer with every list and map filled.
func testFullOffer() idlegrid.Offer {
	return idlegrid.Offer{
		Name: "rig", GPUs: []idlegrid.GPU{{UUID: "g0", Model: "RTX4090", VRAMMB: 24576}}, Region: "eu-west",
		Labels: map[string]string{"rack": "a"},
		Schedule: idlegrid.Schedule{Mode: idlegrid.ScheduleWindows,
			Weekly: []idlegrid.WeeklyWindow{{Days: []string{"mon"}, Start: "08:00", End: "18:00"}},
			OneOff: []idlegrid.OneOffWindow{{Start: time.Unix(0, 0), End: time.Unix(3600, 0)}}},
		Ask: idlegrid.Ask{FloorMicrosPerGPUHour: map[idlegrid.Tier]idlegrid.Micros{idlegrid.TierSilver: 1},
			AllowedKinds: []idlegrid.WorkloadKind{idlegrid.KindTraining},
			TimeOfDay:    []idlegrid.PriceWindow{{Days: []string{"sat"}, Start: "00:00", End: "06:00", MultiplierPercent: 80}}},
		CachedDatasets: []string{"ds"},
		Models:         []idlegrid.ModelOffer{{Name: "m", MaxConcurrency: 1}},
	}
}

func TestNode_Public(t *testing.T) {
	n := &idlegrid.Node{ID: "node_1", ProviderID: "acct_p", PublicKey: "pk", AgentVersion: "1.2.3", Reliability: 0.97, Level: 2,
		Offer: idlegrid.Offer{Name: "rig", Region: "eu-west", Labels: map[string]string{"room": "attic"}, CachedDatasets: []string{"c4"},
			GPUs: []idlegrid.GPU{{UUID: "GPU-0", Model: "RTX4090", VRAMMB: 24564, DriverVersion: "550.54.15",
				PCIBusID: "00000000:18:00.0", PCIDeviceID: "268410DE", PCISubsystemID: "16C110DE", VBIOSVersion: "95.02"}}}}
	p := n.Public()
	want := idlegrid.GPU{UUID: "GPU-0", Model: "RTX4090", VRAMMB: 24564, DriverVersion: "550.54.15"}
	if p.GPUs[0] != want || p.Labels != nil || p.AgentVersion != "" {
		t.Errorf("public = GPU %+v, labels %v, agent %q; want %+v and no labels or agent version", p.GPUs[0], p.Labels, p.AgentVersion, want)
	}
	if p.Name != "rig" || p.Region != "eu-west" || p.PublicKey != "pk" || p.Reliability != 0.97 || p.Level != 2 || p.CachedDatasets[0] != "c4" {
		t.Errorf("public = %+v, want the offer, key and record kept", p)
	}
	if n.GPUs[0].PCIBusID == "" || n.Labels == nil || n.AgentVersion == "" {
		t.Errorf("Public changed the node: %+v", n)
	}
}
