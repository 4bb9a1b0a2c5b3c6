package idlegrid

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/distribution/reference"
)

// A renter's images are usually private: its training code lives in its
// own repository on ghcr.io, a cloud's registry or Docker Hub. The renter
// keeps a login per registry on its account (a RegistryLogin); when one of
// its jobs starts, the node it runs on is handed the login for the job's
// image's registry (RegistryAuth, in the start command) and pulls the
// image with it. The secret is never in an answer to anyone, and it is
// sealed in the database with a key the database does not hold.

// RegistryLogin is a renter's login to a private container registry, used
// to pull the images of its jobs that name the registry.
type RegistryLogin struct {
	AccountID string `json:"account_id"`
	// Registry is the image registry's host, with its port when it has
	// one, as image references name it: "ghcr.io", "nvcr.io",
	// "registry.example.com:5000"; "docker.io" for Docker Hub.
	Registry string `json:"registry"`
	Username string `json:"username"`
	// Secret is the password or access token, as the renter gives it. It
	// is written, never read back: no answer carries it, and the store
	// keeps only Sealed.
	Secret string `json:"-"`
	// Sealed is Secret encrypted by the server (internal/server), the form
	// the Store keeps.
	Sealed    []byte    `json:"-"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// RegistryLoginStore keeps renters' registry logins.
type RegistryLoginStore interface {
	// PutRegistryLogin stores l, Sealed set and Secret empty, replacing the
	// account's login to the same registry (CreatedAt then stays). An
	// account holds at most MaxRegistryLogins: ECONFLICT past it.
	PutRegistryLogin(ctx context.Context, l *RegistryLogin) error
	// FindRegistryLogin returns the account's login to registry, Sealed
	// set; ENOTFOUND when it has none.
	FindRegistryLogin(ctx context.Context, accountID, registry string) (*RegistryLogin, error)
	// ListRegistryLogins returns the account's logins by registry, Sealed
	// not set.
	ListRegistryLogins(ctx context.Context, accountID string) ([]*RegistryLogin, error)
	// RemoveRegistryLogin removes the account's login to registry;
	// ENOTFOUND when it has none.
	RemoveRegistryLogin(ctx context.Context, accountID, registry string) error

	// A login is active while it has been set or used (handed to a node)
	// since a time the server's policy gives; an idle one has expired
	// (internal/server/expiry.go).

	// FindActiveRegistryLogin is FindRegistryLogin of a login active since
	// since, with when it was last set or used; ENOTFOUND for an idle one.
	FindActiveRegistryLogin(ctx context.Context, accountID, registry string, since time.Time) (*RegistryLogin, time.Time, error)
	// ListActiveRegistryLogins is ListRegistryLogins of the logins active
	// since since.
	ListActiveRegistryLogins(ctx context.Context, accountID string, since time.Time) ([]*RegistryLogin, error)
	// TouchRegistryLogin records a use of the account's login at at.
	TouchRegistryLogin(ctx context.Context, accountID, registry string, at time.Time) error
	// DeleteIdleRegistryLogins deletes at most limit logins idle since
	// since, and says how many.
	DeleteIdleRegistryLogins(ctx context.Context, since time.Time, limit int) (int, error)
}

// RegistryAuth is what a node needs to pull a start command's image: the
// login of the job's renter for the image's registry.
type RegistryAuth struct {
	Registry string `json:"registry"`
	Username string `json:"username"`
	Password string `json:"password"`
}

// String keeps the password out of logs and error messages.
func (a RegistryAuth) String() string {
	return fmt.Sprintf("%s@%s", a.Username, a.Registry)
}

// PrivateImageRepository is the repository a node tags the images it pulled
// with a renter's login in, "idlegrid-private:<hex of the image ID>", so
// that it remembers, across restarts, that they are private
// (internal/runtime/docker). No job may name it.
const PrivateImageRepository = "idlegrid-private"

// IsPrivateMark reports whether image names PrivateImageRepository, in
// whichever spelling ("idlegrid-private:x", "docker.io/library/idlegrid-private:x").
func IsPrivateMark(image string) bool {
	named, err := reference.ParseNormalizedNamed(image)
	return err == nil && named.Name() == "docker.io/library/"+PrivateImageRepository
}

// Limits on a registry login.
const (
	MaxRegistryUsername = 256
	MaxRegistrySecret   = 8192 // cloud registries' tokens run to a few kilobytes
	MaxRegistryLogins   = 32   // an account's
)

// ImageRegistry returns the registry an image reference pulls from, as
// RegistryLogin.Registry names it: "docker.io" for a bare name such as
// "ubuntu:22.04" or "acme/trainer:1".
func ImageRegistry(image string) (string, error) {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return "", err
	}
	return reference.Domain(named), nil
}

// checkImage refuses an image reference that no registry could serve:
// one reference.ParseNormalizedNamed refuses (a digest that is not one,
// "x@sha256:zz"), or whose registry's port is not a port.
func checkImage(image string) error {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return fmt.Errorf("%q is not an image reference: %v", image, err)
	}
	return checkPort(reference.Domain(named))
}

// checkPort refuses a registry host, as an image reference names it,
// whose port is not between 1 and 65535; one without a port is fine.
func checkPort(host string) error {
	i := strings.LastIndexByte(host, ':')
	if i < 0 || strings.HasSuffix(host, "]") { // no port, or an IPv6 address without one
		return nil
	}
	if n, err := strconv.Atoi(host[i+1:]); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("the port of %s must be between 1 and 65535", host)
	}
	return nil
}

// printable reports whether s is text (IsText) without control
// characters, such as the line break that would split the login a node
// is handed, or a line of a log that shows a label or a version.
func printable(s string) bool { return IsText(s) && strings.IndexFunc(s, unicode.IsControl) < 0 }

// Validate checks a login as a renter writes it: the registry a host name
// (with an optional port), a username and a secret, each within its
// limit; every field at fault is named.
func (l *RegistryLogin) Validate() error {
	var p Faults
	reg, err := ParseRegistry(l.Registry)
	p.Check(err == nil && reg == l.Registry, "registry",
		"must be a registry host such as ghcr.io or registry.example.com:5000 (a port between 1 and 65535), got %q", l.Registry)
	p.Check(l.Username != "" && len(l.Username) <= MaxRegistryUsername && printable(l.Username), "username",
		"required, printable, at most %d bytes", MaxRegistryUsername)
	p.Check(l.Secret != "" && len(l.Secret) <= MaxRegistrySecret && printable(l.Secret), "password",
		"required, printable, at most %d bytes", MaxRegistrySecret)
	return p.Err()
}

// NormalRegistry is the registry s names, written as docker login takes it
// ("https://ghcr.io/", "index.docker.io"), as image references name it
// ("ghcr.io", "docker.io"); s itself when it names none, for Validate to
// refuse.
func NormalRegistry(s string) string {
	s = strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(s, "https://"), "http://"), "/")
	if reg, err := ParseRegistry(s); err == nil {
		return reg
	}
	return s
}

// ParseRegistry returns the registry s names, as an image "s/x" would
// pull from: s itself in lower case, or its usual name ("docker.io" for
// "index.docker.io"). Host names are case-insensitive and images name
// them in lower case (the job spec's image pattern), so "GHCR.IO" is
// ghcr.io, whose login a job's ghcr.io/acme/x:1 finds.
func ParseRegistry(s string) (string, error) {
	if s == "" || len(s) > 253 || strings.ContainsAny(s, "/@") {
		return "", fmt.Errorf("%q is not a registry host", s)
	}
	s = strings.ToLower(s)
	got, err := ImageRegistry(s + "/x")
	if err != nil || (got == "docker.io" && !strings.Contains(s, "docker.io")) {
		return "", fmt.Errorf("%q is not a registry host", s) // "acme/x" is Docker Hub's acme
	}
	if err := checkPort(got); err != nil {
		return "", err
	}
	return got, nil
}
