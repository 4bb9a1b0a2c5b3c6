package idlegrid_test

import (
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
)

func TestImageRegistry(t *testing.T) {
	for image, want := range map[string]string{
		"ubuntu:22.04":             "docker.io",
		"acme/trainer:1":           "docker.io",
		"docker.io/acme/trainer:1": "docker.io",
		"ghcr.io/acme/trainer:1.4": "ghcr.io",
		"registry.example.com:5000/team/x@sha256:" + strings.Repeat("a", 64): "registry.example.com:5000",
		"localhost/x":             "localhost",
		"127.0.0.1:5000/acme/x:1": "127.0.0.1:5000",
	} {
		if got, err := idlegrid.ImageRegistry(image); err != nil || got != want {
			t.Errorf("ImageRegistry(%q) = %q, %v; want %q", image, got, err, want)
		}
	}
	if _, err := idlegrid.ImageRegistry("Not An Image"); err == nil {
		t.Error("ImageRegistry of a malformed reference: no error")
	}
}

func TestParseRegistry(t *testing.T) {
	for in, want := range map[string]string{
		"ghcr.io": "ghcr.io", "docker.io": "docker.io", "index.docker.io": "docker.io",
		"registry.example.com:5000": "registry.example.com:5000", "localhost:5000": "localhost:5000",
		// Host names are case-insensitive, and images name them in lower case.
		"GHCR.IO": "ghcr.io", "Registry.Example.com:5000": "registry.example.com:5000", "INDEX.DOCKER.IO": "docker.io",
	} {
		if got, err := idlegrid.ParseRegistry(in); err != nil || got != want {
			t.Errorf("ParseRegistry(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "acme", "ghcr.io/acme", "https://ghcr.io", "user@ghcr.io", "GHCR IO",
		"1.2.3.4:99999", "localhost:0", "registry.example.com:65536"} {
		if got, err := idlegrid.ParseRegistry(bad); err == nil {
			t.Errorf("ParseRegistry(%q) = %q, want an error", bad, got)
		}
	}
}

func TestRegistryAuth_String(t *testing.T) {
	a := idlegrid.RegistryAuth{Registry: "ghcr.io", Username: "acme-bot", Password: "ghp_secret"}
	if s := a.String(); strings.Contains(s, "ghp_secret") || s != "acme-bot@ghcr.io" {
		t.Errorf("String() = %q, want the user and registry, no password", s)
	}
}

func TestJobSpec_privateMark(t *testing.T) {
	for _, image := range []string{"idlegrid-private:3f2a", "docker.io/library/idlegrid-private:3f2a"} {
		s := idlegrid.JobSpec{Kind: idlegrid.KindTraining, Image: image, GPUs: 1, Nodes: 1, Tier: idlegrid.TierSilver,
			MaxPriceMicrosPerGPUHour: 1, DurationSeconds: 60}
		if err := s.Validate(time.Now()); idlegrid.ErrorCode(err) != idlegrid.EINVALID || !strings.Contains(err.Error(), "job.image: the repository idlegrid-private") {
			t.Errorf("a job naming %s: %v, want job.image refused", image, err)
		}
	}
}

func TestNormalRegistry(t *testing.T) {
	for in, want := range map[string]string{
		"ghcr.io": "ghcr.io", "https://ghcr.io/": "ghcr.io", "http://localhost:5000": "localhost:5000",
		"index.docker.io": "docker.io", "acme": "acme", "ghcr.io/acme": "ghcr.io/acme",
		"GHCR.IO": "ghcr.io", "https://GHCR.io/": "ghcr.io",
	} {
		if got := idlegrid.NormalRegistry(in); got != want {
			t.Errorf("NormalRegistry(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRegistryLogin_Validate(t *testing.T) {
	valid := idlegrid.RegistryLogin{Registry: "1.2.3.4:65535", Username: "acme-bot", Secret: "ghp_x"}
	if err := valid.Validate(); err != nil {
		t.Fatalf("valid login: %v", err)
	}
	for _, tt := range []struct {
		name  string
		login idlegrid.RegistryLogin
		field string
	}{
		{"a port past 65535", idlegrid.RegistryLogin{Registry: "1.2.3.4:99999", Username: "u", Secret: "s"}, "registry"},
		{"a registry not in lower case", idlegrid.RegistryLogin{Registry: "GHCR.IO", Username: "u", Secret: "s"}, "registry"},
		{"a line break in the username", idlegrid.RegistryLogin{Registry: "ghcr.io", Username: "acme\nbot", Secret: "s"}, "username"},
		{"a control character in the password", idlegrid.RegistryLogin{Registry: "ghcr.io", Username: "u", Secret: "ghp\x1b"}, "password"},
	} {
		t.Run(tt.name, func(t *testing.T) { wantField(t, tt.login.Validate(), tt.field) })
	}
}
