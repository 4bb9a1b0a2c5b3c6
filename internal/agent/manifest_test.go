package agent_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/idlegrid/idlegrid/internal/agent"
)

// TestKubernetesManifest_config: the agent config in the Kubernetes
// manifest's ConfigMap is one the agent loads, so that applying the
// manifest as shipped never fails on it.
func TestKubernetesManifest_config(t *testing.T) {
	text, err := os.ReadFile(filepath.Join("..", "..", "deploy", "kubernetes", "idlegrid-agent.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var config string
	dec := yaml.NewDecoder(bytes.NewReader(text))
	for {
		var doc struct {
			Kind string            `yaml:"kind"`
			Data map[string]string `yaml:"data"`
		}
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("the manifest is not YAML: %v", err)
		}
		if doc.Kind == "ConfigMap" {
			config = doc.Data["agent.yaml"]
		}
	}
	if config == "" {
		t.Fatal("the manifest has no ConfigMap with agent.yaml")
	}
	cfg, err := agent.ParseConfig([]byte(config))
	if err != nil {
		t.Fatalf("the manifest's agent.yaml: %v", err)
	}
	if cfg.Server == "" || cfg.Region == "" {
		t.Errorf("the manifest's agent.yaml loads as %+v, want its server and region", cfg)
	}
}
