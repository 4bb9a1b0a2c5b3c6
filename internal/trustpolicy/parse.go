package trustpolicy

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/reputation"
)

//go:embed default.yaml
var defaultYAML []byte

// DefaultYAML returns the default policy file, to show or to start from.
func DefaultYAML() []byte { return bytes.Clone(defaultYAML) }

// Default returns the default policy.
func Default() *Policy {
	p, err := Parse(defaultYAML)
	if err != nil {
		panic("trustpolicy: the embedded default policy is invalid: " + err.Error())
	}
	return p
}

// maxFileBytes bounds a policy file.
const maxFileBytes = 1 << 20

// Load reads and parses the policy file at path.
func Load(path string) (*Policy, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read trust policy: %w", err)
	}
	p, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("trust policy %s: %w", path, err)
	}
	return p, nil
}

// Parse reads a policy file. It is strict: the version must be given and
// known, every key must be known and given once, and every value must be
// of its type and in range; the error, an *idlegrid.Error, names the field
// ("slashing.forged_receipt.bond_percent") and the line. Keys left out keep
// the default policy's values.
func Parse(data []byte) (*Policy, error) {
	if len(data) > maxFileBytes {
		return nil, idlegrid.Invalid("policy", "larger than %d bytes", maxFileBytes)
	}
	root, err := document(data)
	if err != nil {
		return nil, err
	}
	version, err := checkVersion(root)
	if err != nil {
		return nil, err
	}
	f, err := defaultFile()
	if err != nil {
		return nil, err
	}
	if err := decode(root, reflect.ValueOf(f).Elem(), "", version); err != nil {
		return nil, err
	}
	p, err := f.policy()
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	p.SHA256 = hex.EncodeToString(sum[:])
	return p, nil
}

// document returns the one YAML document of data, which must be a mapping.
func document(data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
		return nil, idlegrid.Invalid("version", "the policy is empty; it needs at least \"version: %d\"", Version)
	} else if err != nil {
		return nil, idlegrid.Invalid("policy", "not YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		return nil, idlegrid.Invalid("policy", "a policy file holds one YAML document")
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, idlegrid.Invalid("policy", "must be a mapping of keys, starting with \"version: %d\"", Version)
	}
	return doc.Content[0], nil
}

// checkVersion checks the version before anything else, so that a newer
// file fails on its version, not on the first key this build does not know.
func checkVersion(root *yaml.Node) (int, error) {
	for i := 0; i+1 < len(root.Content); i += 2 {
		if k, v := root.Content[i], root.Content[i+1]; k.Value == "version" {
			n, err := strconv.Atoi(v.Value)
			if v.Kind != yaml.ScalarNode || err != nil {
				return 0, idlegrid.Invalid("version", "line %d: must be a whole number, got %q", v.Line, v.Value)
			} else if n < 1 || n > Version {
				return 0, idlegrid.Invalid("version", "line %d: this build reads version 1 to %d policies, got %d", v.Line, Version, n)
			}
			return n, nil
		}
	}
	return 0, idlegrid.Invalid("version", "required: \"version: %d\"", Version)
}

// scalar is a value read from one YAML scalar by its own rules.
type scalar interface{ parseScalar(s string) error }

// decode sets v from n, by v's yaml tags, naming path in every error. A
// key whose field has a since tag needs a file of at least that version.
func decode(n *yaml.Node, v reflect.Value, path string, version int) error {
	if n.Kind == yaml.AliasNode {
		return idlegrid.Invalid(orRoot(path), "line %d: aliases are not allowed in a policy", n.Line)
	}
	if s, ok := v.Addr().Interface().(scalar); ok {
		if n.Kind != yaml.ScalarNode {
			return idlegrid.Invalid(path, "line %d: want a single value", n.Line)
		} else if err := s.parseScalar(n.Value); err != nil {
			return idlegrid.Invalid(path, "line %d: %v", n.Line, err)
		}
		return nil
	}
	switch v.Kind() {
	case reflect.Struct:
		return decodeMapping(n, v, path, version)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return idlegrid.Invalid(path, "line %d: want a list", n.Line)
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, item := range n.Content {
			if err := decode(item, s.Index(i), fmt.Sprintf("%s[%d]", path, i), version); err != nil {
				return err
			}
		}
		v.Set(s)
		return nil
	}
	if n.Kind != yaml.ScalarNode {
		return idlegrid.Invalid(path, "line %d: want a single value", n.Line)
	}
	if err := n.Decode(v.Addr().Interface()); err != nil {
		return idlegrid.Invalid(path, "line %d: want %s, got %q", n.Line, kindWord(v.Kind()), n.Value)
	}
	return nil
}

func decodeMapping(n *yaml.Node, v reflect.Value, path string, version int) error {
	if n.Kind != yaml.MappingNode {
		return idlegrid.Invalid(orRoot(path), "line %d: want a mapping with keys %s", n.Line, strings.Join(keysOf(v.Type()), ", "))
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.Value == "" {
			return idlegrid.Invalid(orRoot(path), "line %d: keys must be plain names", k.Line)
		}
		at := join(path, k.Value)
		if seen[k.Value] {
			return idlegrid.Invalid(at, "line %d: given twice", k.Line)
		}
		seen[k.Value] = true
		i, ok := fieldIndex(v.Type(), k.Value)
		if !ok {
			return idlegrid.Invalid(at, "line %d: unknown key; known keys here: %s", k.Line, strings.Join(keysOf(v.Type()), ", "))
		}
		if since := sinceVersion(v.Type().Field(i)); version < since {
			return idlegrid.Invalid(at, "line %d: needs a version %d policy; this file is version %d", k.Line, since, version)
		}
		if err := decode(val, v.Field(i), at, version); err != nil {
			return err
		}
	}
	return nil
}

func fieldIndex(t reflect.Type, key string) (int, bool) {
	for i := range t.NumField() {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); name == key {
			return i, true
		}
	}
	return 0, false
}

// sinceVersion is the policy version that added a field's key: its since
// tag, or 1.
func sinceVersion(f reflect.StructField) int {
	if n, err := strconv.Atoi(f.Tag.Get("since")); err == nil {
		return n
	}
	return 1
}

func keysOf(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		out = append(out, name)
	}
	return out
}

func kindWord(k reflect.Kind) string {
	switch k {
	case reflect.Bool:
		return "true or false"
	case reflect.Int:
		return "a whole number"
	case reflect.Float64:
		return "a number"
	}
	return "a string"
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func orRoot(path string) string {
	if path == "" {
		return "policy"
	}
	return path
}

// The file's shape. Every field has a yaml tag, which is its key.
type (
	file struct {
		Version      int              `yaml:"version"`
		Reputation   fileReputation   `yaml:"reputation"`
		Levels       fileLevels       `yaml:"levels"`
		Gold         fileGold         `yaml:"gold"`
		Challenges   fileChallenges   `yaml:"challenges"`
		Verification fileVerification `yaml:"verification"`
		Slashing     fileSlashing     `yaml:"slashing"`
	}
	fileReputation struct {
		Prior     fileWeight  `yaml:"prior"`
		HalfLife  duration    `yaml:"half_life"`
		Weights   fileWeights `yaml:"weights"`
		FlagBelow float64     `yaml:"flag_below"`
	}
	fileWeight struct {
		Good float64 `yaml:"good"`
		Bad  float64 `yaml:"bad"`
	}
	fileWeights struct {
		Leases     fileWeight `yaml:"leases"`
		Uptime     fileWeight `yaml:"uptime"`
		Notices    fileWeight `yaml:"notices"`
		Receipts   fileWeight `yaml:"receipts"`
		Challenges fileWeight `yaml:"challenges"`
	}
	fileLevels struct {
		DemotionMargin float64     `yaml:"demotion_margin"`
		OffenceHold    duration    `yaml:"offence_hold" since:"3"`
		Rules          []fileLevel `yaml:"rules"`
	}
	fileLevel struct {
		Level            int     `yaml:"level"`
		Name             string  `yaml:"name"`
		MinScore         float64 `yaml:"min_score"`
		MinGPUHours      float64 `yaml:"min_gpu_hours"`
		VerifiedHardware bool    `yaml:"verified_hardware"`
	}
	fileGold struct {
		MinLevel int `yaml:"min_level"`
	}
	fileChallenges struct {
		AtJoin                     bool     `yaml:"at_join"`
		OnFingerprintChange        bool     `yaml:"on_fingerprint_change"`
		PerNodePerDay              float64  `yaml:"per_node_per_day"`
		AllowSimulatedRunners      bool     `yaml:"allow_simulated_runners" since:"2"`
		UnverifiedAfterUnsupported int      `yaml:"unverified_after_unsupported" since:"2"`
		MaxOwed                    duration `yaml:"max_owed" since:"4"`
	}
	fileVerification struct {
		SampleFraction         float64 `yaml:"sample_fraction"`
		NewcomerSampleFraction float64 `yaml:"newcomer_sample_fraction"`
		FirstChecks            int     `yaml:"first_checks"`
	}
	fileSlashing struct {
		ForgedReceipt    fileRule `yaml:"forged_receipt"`
		FakeHardware     fileRule `yaml:"fake_hardware"`
		MismatchedResult fileRule `yaml:"mismatched_result"`
		BrokenNotice     fileRule `yaml:"broken_notice"`
	}
	fileRule struct {
		Fixed       amount  `yaml:"fixed"`
		BondPercent percent `yaml:"bond_percent"`
		HarmPercent percent `yaml:"harm_percent"`
		Max         amount  `yaml:"max"`
		To          string  `yaml:"to"`
	}
)

// defaultFile is the embedded default, decoded, for a file to override.
func defaultFile() (*file, error) {
	root, err := document(defaultYAML)
	if err != nil {
		return nil, err
	}
	f := &file{}
	return f, decode(root, reflect.ValueOf(f).Elem(), "", Version)
}

func (c fileChallenges) policy() Challenges {
	return Challenges{AtJoin: c.AtJoin, OnFingerprintChange: c.OnFingerprintChange, PerNodePerDay: c.PerNodePerDay,
		AllowSimulatedRunners: c.AllowSimulatedRunners, UnverifiedAfterUnsupported: c.UnverifiedAfterUnsupported,
		MaxOwed: time.Duration(c.MaxOwed)}
}

// policy checks the file's values and makes the Policy.
func (f *file) policy() (*Policy, error) {
	w := f.Reputation.Weights
	p := &Policy{
		Version: f.Version,
		Reputation: reputation.Params{
			PriorGood: f.Reputation.Prior.Good, PriorBad: f.Reputation.Prior.Bad,
			HalfLife: time.Duration(f.Reputation.HalfLife),
			Weights: map[reputation.Dimension]reputation.Weight{
				reputation.DimLeases:     reputation.Weight(w.Leases),
				reputation.DimUptime:     reputation.Weight(w.Uptime),
				reputation.DimNotices:    reputation.Weight(w.Notices),
				reputation.DimReceipts:   reputation.Weight(w.Receipts),
				reputation.DimChallenges: reputation.Weight(w.Challenges),
			},
			FlagBelow: f.Reputation.FlagBelow,
		},
		Levels:       reputation.Levels{DemotionMargin: f.Levels.DemotionMargin, OffenceHold: time.Duration(f.Levels.OffenceHold)},
		Gold:         Gold(f.Gold),
		Challenges:   f.Challenges.policy(),
		Verification: Verification(f.Verification),
		Slashing:     map[Offence]SlashRule{},
	}
	for _, l := range f.Levels.Rules {
		p.Levels.Rules = append(p.Levels.Rules, reputation.LevelRule(l))
	}
	rules := []fileRule{f.Slashing.ForgedReceipt, f.Slashing.FakeHardware, f.Slashing.MismatchedResult, f.Slashing.BrokenNotice}
	for i, o := range Offences {
		r := rules[i]
		p.Slashing[o] = SlashRule{FixedMicros: idlegrid.Micros(r.Fixed), BondBPS: int64(r.BondPercent),
			HarmBPS: int64(r.HarmPercent), MaxMicros: idlegrid.Micros(r.Max), To: Recipient(r.To)}
	}
	return p, p.Validate()
}

// maxOwed is the longest challenges.max_owed: the longest job's run.
const maxOwed = 30 * 24 * time.Hour

// Validate checks a policy, naming fields as the file does.
func (p *Policy) Validate() error {
	if err := p.Reputation.Validate(); err != nil {
		return err
	} else if err := p.Levels.Validate(); err != nil {
		return err
	}
	switch {
	case p.Gold.MinLevel < 0 || p.Gold.MinLevel > len(p.Levels.Rules):
		return idlegrid.Invalid("gold.min_level", "must be between 0 and the highest level, %d; got %d", len(p.Levels.Rules), p.Gold.MinLevel)
	case !(p.Challenges.PerNodePerDay >= 0 && p.Challenges.PerNodePerDay <= 96):
		return idlegrid.Invalid("challenges.per_node_per_day", "must be between 0 and 96, got %g", p.Challenges.PerNodePerDay)
	case !fraction(p.Verification.SampleFraction):
		return idlegrid.Invalid("verification.sample_fraction", "must be between 0 and 1, got %g", p.Verification.SampleFraction)
	case !fraction(p.Verification.NewcomerSampleFraction):
		return idlegrid.Invalid("verification.newcomer_sample_fraction", "must be between 0 and 1, got %g", p.Verification.NewcomerSampleFraction)
	case p.Challenges.UnverifiedAfterUnsupported < 0 || p.Challenges.UnverifiedAfterUnsupported > 100:
		return idlegrid.Invalid("challenges.unverified_after_unsupported", "must be between 0 (never) and 100, got %d", p.Challenges.UnverifiedAfterUnsupported)
	case p.Challenges.MaxOwed < 0 || p.Challenges.MaxOwed > maxOwed:
		return idlegrid.Invalid("challenges.max_owed", "must be between 0 (never closes a node) and 30d, got %s", p.Challenges.MaxOwed)
	case p.Verification.FirstChecks < 0 || p.Verification.FirstChecks > 100:
		return idlegrid.Invalid("verification.first_checks", "must be between 0 and 100, got %d", p.Verification.FirstChecks)
	}
	for _, o := range Offences {
		r, ok := p.Slashing[o]
		f := "slashing." + string(o)
		switch {
		case !ok:
			return idlegrid.Invalid(f, "required")
		case r.FixedMicros < 0:
			return idlegrid.Invalid(f+".fixed", "must not be negative")
		case r.BondBPS < 0 || r.BondBPS > 10000:
			return idlegrid.Invalid(f+".bond_percent", "must be between 0 and 100")
		case r.HarmBPS < 0 || r.HarmBPS > 100000:
			return idlegrid.Invalid(f+".harm_percent", "must be between 0 and 1000")
		case r.MaxMicros < 0:
			return idlegrid.Invalid(f+".max", "must not be negative (0: no cap but the bond)")
		case r.To != ToRenter && r.To != ToPlatform:
			return idlegrid.Invalid(f+".to", "must be renter or platform, got %q", r.To)
		}
	}
	return nil
}

func fraction(x float64) bool { return x >= 0 && x <= 1 }

// amount is an amount of money written as a decimal in units of account:
// 50, 2.5, "$0.000001". It never passes through a float.
type amount idlegrid.Micros

func (a *amount) parseScalar(s string) error {
	m, err := idlegrid.ParseMicros(s)
	if err != nil {
		return fmt.Errorf("want an amount such as 50 or 2.50: %v", err)
	} else if m < 0 {
		return errors.New("must not be negative")
	}
	*a = amount(m)
	return nil
}

// percent is a percentage with at most two decimals, kept in basis points:
// 25 is 2500, 2.5 is 250, 0.01 is 1.
type percent int64

func (p *percent) parseScalar(s string) error {
	s = strings.TrimSuffix(strings.TrimSpace(s), "%")
	whole, frac, _ := strings.Cut(s, ".")
	if whole == "" || len(frac) > 2 || !digits(whole) || !digits(frac) || len(whole) > 6 {
		return fmt.Errorf("want a percentage such as 25 or 2.5 (at most two decimals), got %q", s)
	}
	w, _ := strconv.ParseInt(whole, 10, 64)
	f, _ := strconv.ParseInt((frac + "00")[:2], 10, 64)
	*p = percent(w*100 + f)
	return nil
}

// duration is a time span written with a unit: 60d, 1440h, 90m, or 0.
type duration time.Duration

func (d *duration) parseScalar(s string) error {
	s = strings.TrimSpace(s)
	if s == "0" {
		*d = 0
		return nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 64)
		if err != nil || n < 0 || n > 100*365 {
			return fmt.Errorf("want a whole number of days up to 36500, such as 60d, got %q", s)
		}
		*d = duration(time.Duration(n) * 24 * time.Hour)
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil || v < 0 {
		return fmt.Errorf("want a span such as 60d or 1440h, got %q", s)
	}
	*d = duration(v)
	return nil
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
