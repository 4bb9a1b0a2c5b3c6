package agent

import (
	"bytes"
	_ "embed"
	"fmt"
	"strings"
	"text/template"

	"gopkg.in/yaml.v3"

	"github.com/idlegrid/idlegrid"
)

// Starter is what 'idlegrid agent init' knows of a new node: enough to
// write a config that works as it is and says, in comments, what else
// may be set.
type Starter struct {
	Path      string // where the config is written, for the commands it names
	Server    string
	DataDir   string
	Name      string
	Region    string
	Residency string
	Schedule  idlegrid.Schedule
	Mode      Mode
	// Floors are the least the node takes per GPU-hour, by tier.
	Floors map[idlegrid.Tier]idlegrid.Micros
	// GPUs says what was found, e.g. "2x RTX4090 (24576 MB), by NVML".
	GPUs     string
	FakeGPUs string
}

//go:embed starter.yaml.tmpl
var starterText string

var starterTemplate = template.Must(template.New("agent.yaml").
	Funcs(template.FuncMap{"join": strings.Join, "q": yamlScalar,
		"line": func(s string) string { return strings.Join(strings.Fields(s), " ") }}).Parse(starterText))

// yamlScalar writes s as a YAML scalar that reads back as s: plain when
// that is safe, else quoted.
func yamlScalar(s string) (string, error) {
	b, err := yaml.Marshal(s)
	return strings.TrimSuffix(string(b), "\n"), err
}

// starterFloor is one line of the ask's floors.
type starterFloor struct {
	Tier  idlegrid.Tier
	Price string
	Note  string
}

// Config renders the starter config, commented, and checks that it
// parses and validates as the agent will read it.
func (s Starter) Config() ([]byte, error) {
	view := struct {
		Starter
		Floors []starterFloor
	}{Starter: s}
	if view.Mode == "" {
		view.Mode = ModeSchedule
	}
	for _, t := range idlegrid.Tiers {
		if p, ok := s.Floors[t]; ok {
			view.Floors = append(view.Floors, starterFloor{Tier: t, Price: decimal(p), Note: floorNotes[t]})
		}
	}
	var b bytes.Buffer
	if err := starterTemplate.Execute(&b, view); err != nil {
		return nil, err
	}
	if _, err := ParseConfig(b.Bytes()); err != nil {
		return nil, fmt.Errorf("the config written would not load: %w", err)
	}
	return b.Bytes(), nil
}

// floorNotes say what each tier sells, beside its floor.
var floorNotes = map[idlegrid.Tier]string{
	idlegrid.TierGold:   "   # guaranteed: never preempted; only where the window covers the job",
	idlegrid.TierSilver: " # on demand",
	idlegrid.TierBronze: " # interruptible with notice: the cheapest, and what fills short gaps",
}

// decimal writes m as the config's prices are written: "0.40", "0.125".
func decimal(m idlegrid.Micros) string {
	s := strings.TrimPrefix(m.String(), "$")
	for strings.HasSuffix(s, "0") && len(s)-strings.IndexByte(s, '.') > 3 {
		s = s[:len(s)-1]
	}
	return s
}
