package agent

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/idlegrid/idlegrid"
)

var (
	configType = reflect.TypeOf(Config{})
	timeType   = reflect.TypeOf(time.Time{})
)

// checkKeys walks a YAML document against the Go type it will decode into
// and fails on the first key that type does not know, naming it, its line
// and the keys that would be known there. On the way it records the config
// path of each value's line in paths, so that later type errors, which yaml
// reports by line only, can name their field.
func checkKeys(n *yaml.Node, t reflect.Type, path string, paths map[int]string) error {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if path != "" {
		if _, ok := paths[n.Line]; !ok {
			paths[n.Line] = path
		}
	}
	switch {
	case t == timeType:
		var tm time.Time
		if err := n.Decode(&tm); err != nil {
			return idlegrid.Invalid(path, "line %d: want a time such as 2025-06-01T18:00:00Z, got %q", n.Line, n.Value)
		}
	case t.Kind() == reflect.Struct && n.Kind == yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Value == "<<" { // a merge: its keys belong here
				if err := checkKeys(v, t, path, paths); err != nil {
					return err
				}
				continue
			}
			f, ok := yamlField(t, k.Value)
			if !ok {
				return idlegrid.Invalid(join(path, k.Value), "line %d: unknown key; known keys here: %s", k.Line, strings.Join(yamlKeys(t), ", "))
			}
			paths[k.Line] = join(path, k.Value)
			if err := checkKeys(v, f.Type, join(path, k.Value), paths); err != nil {
				return err
			}
		}
	case t.Kind() == reflect.Slice && n.Kind == yaml.SequenceNode:
		for i, item := range n.Content {
			if err := checkKeys(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i), paths); err != nil {
				return err
			}
		}
	case t.Kind() == reflect.Map && n.Kind == yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			paths[k.Line] = join(path, k.Value)
			if err := checkKeys(v, t.Elem(), join(path, k.Value), paths); err != nil {
				return err
			}
		}
	}
	return nil
}

// yamlField finds the field of struct type t that yaml.v3 decodes key into:
// the name in its yaml tag, or its lower-cased Go name.
func yamlField(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.IsExported() && yamlName(f) == key {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func yamlKeys(t reflect.Type) []string {
	var keys []string
	for i := 0; i < t.NumField(); i++ {
		if f := t.Field(i); f.IsExported() && yamlName(f) != "-" {
			keys = append(keys, yamlName(f))
		}
	}
	return keys
}

func yamlName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if name == "" {
		return strings.ToLower(f.Name)
	}
	return name
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

var unmarshalRE = regexp.MustCompile("^line (\\d+): cannot unmarshal !!(\\w+)(?: `(.*)`)? into (.+)$")

// translateYAMLError turns the first of yaml's decoding errors into an
// *idlegrid.Error naming the field, with the wanted kind of value in words.
func translateYAMLError(err error, paths map[int]string) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) || len(te.Errors) == 0 {
		return idlegrid.Invalid("config", "%s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	msg := te.Errors[0]
	m := unmarshalRE.FindStringSubmatch(msg)
	if m == nil {
		return idlegrid.Invalid("config", "%s", msg)
	}
	line, _ := strconv.Atoi(m[1])
	field := paths[line]
	if field == "" {
		field = "config"
	}
	got := m[3]
	if got == "" {
		got = "a " + map[string]string{"map": "mapping", "seq": "list"}[m[2]]
	} else {
		got = strconv.Quote(got)
	}
	return idlegrid.Invalid(field, "line %d: want %s, got %s", line, wantedKind(m[4]), got)
}

func wantedKind(goType string) string {
	switch {
	case goType == "time.Duration":
		return "a duration such as 10m or 30s"
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "uint"):
		return "a whole number"
	case strings.HasPrefix(goType, "float"):
		return "a number"
	case goType == "time.Time":
		return "a time such as 2025-06-01T18:00:00Z"
	case strings.HasPrefix(goType, "[]"):
		return "a list"
	case strings.HasPrefix(goType, "map["), strings.Contains(goType, "Config"), strings.Contains(goType, "Window"):
		return "a mapping of keys to values"
	}
	return "text" // string and the domain's string types
}
