package docker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/registry"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/registrytest"
	"github.com/idlegrid/idlegrid/internal/runtime"
)

// mustPushedImage builds an image of the test workload with an ID of its
// own (so that marking it leaves the other tests' image alone), pushes it
// to each registry as repo:1, and removes it from the node, so that only a
// pull brings it back; and again once the test is over, with its mark. It
// returns the references pushed, in the order of regs.
func mustPushedImage(tb testing.TB, repo string, regs ...*registrytest.Registry) []string {
	tb.Helper()
	return mustPushedImageWith(tb, repo, nil, regs...)
}

// mustPushedImageWith is mustPushedImage whose image has a layer of its
// own holding blob (none when blob is nil), which a pull downloads.
func mustPushedImageWith(tb testing.TB, repo string, blob []byte, regs ...*registrytest.Registry) []string {
	tb.Helper()
	cli := mustEngine(tb)
	ctx := context.Background()
	built := "idlegrid-test/" + randomID("private") + ":1"
	dockerfile := fmt.Sprintf("FROM %s\nLABEL idlegrid.test=%s\n", testImage, built)
	files := []contextFile{{"Dockerfile", 0o644, nil}}
	if blob != nil {
		dockerfile += "COPY blob /blob\n"
		files = append(files, contextFile{"blob", 0o644, blob})
	}
	files[0].data = []byte(dockerfile)
	if err := buildTagged(cli, built, files...); err != nil {
		tb.Fatal(err)
	}
	img, err := cli.ImageInspect(ctx, built)
	if err != nil {
		tb.Fatalf("inspect the image built: %v", err)
	}
	tb.Cleanup(func() { cli.ImageRemove(context.Background(), img.ID, image.RemoveOptions{Force: true}) })
	var refs []string
	for _, reg := range regs {
		ref := reg.Host + "/" + repo + ":1"
		if err := cli.ImageTag(ctx, img.ID, ref); err != nil {
			tb.Fatalf("tag %s: %v", ref, err)
		}
		mustPush(tb, reg, ref)
		refs = append(refs, ref)
	}
	for _, ref := range append(refs, built) { // the last tag gone, the image goes
		if _, err := cli.ImageRemove(ctx, ref, image.RemoveOptions{}); err != nil {
			tb.Fatalf("remove %s: %v", ref, err)
		}
	}
	return refs
}

func mustPush(tb testing.TB, reg *registrytest.Registry, ref string) {
	tb.Helper()
	var login idlegrid.RegistryAuth // the engine wants a login, even empty
	if reg.Login != nil {
		login = *reg.Login
	}
	encoded, err := encodeAuth(login)
	if err != nil {
		tb.Fatal(err)
	}
	rc, err := mustEngine(tb).ImagePush(context.Background(), ref, image.PushOptions{RegistryAuth: encoded})
	if err == nil {
		err = StreamError(rc)
		rc.Close()
	}
	if err != nil {
		tb.Fatalf("push %s: %v", ref, err)
	}
}

// mustRefuse starts w on r and fails unless Start refuses it with code,
// saying each of wants, and leaving nothing behind.
func mustRefuse(tb testing.TB, r *Runtime, w runtime.Workload, code string, wants ...string) error {
	tb.Helper()
	err := r.Start(context.Background(), w, make(chan runtime.Event, 1))
	if got := idlegrid.ErrorCode(err); got != code {
		tb.Errorf("Start: code %q (%v), want %q", got, err, code)
	}
	for _, want := range wants {
		if err != nil && !strings.Contains(err.Error(), want) {
			tb.Errorf("Start: %v\nwant it to say %q", err, want)
		}
	}
	mustBeGone(tb, w.LeaseID)
	return err
}

func TestRuntime_Start_PrivateImage(t *testing.T) {
	t.Parallel()
	cli := mustEngine(t)
	private := registrytest.New(t, "renter", "s3cret-Pa55")
	ref := mustPushedImage(t, "acme/private", private)[0]
	login := func() *idlegrid.RegistryAuth { l := *private.Login; return &l }
	wrong := &idlegrid.RegistryAuth{Registry: private.Host, Username: "renter", Password: "wr0ng-Pa55"}
	workload := func(auth *idlegrid.RegistryAuth) runtime.Workload {
		w := testWorkload(map[string]string{"WORKLOAD_STEPS": "1", "WORKLOAD_STEP_MS": "1"})
		w.Job.Image, w.RegistryAuth = ref, auth
		return w
	}
	r := mustRuntime(t, Options{LocalRegistries: []string{private.Host}})
	howToLogin := "idlegrid registry login " + private.Host

	t.Run("NoLogin", func(t *testing.T) {
		mustRefuse(t, r, workload(nil), idlegrid.EFORBIDDEN, ref, "refused it without a login", howToLogin)
	})
	t.Run("WrongPassword", func(t *testing.T) {
		err := mustRefuse(t, r, workload(wrong), idlegrid.EFORBIDDEN, ref, "refused the renter's login renter@"+private.Host, howToLogin)
		if err != nil && strings.Contains(err.Error(), wrong.Password) {
			t.Errorf("Start: %v\nwant no password in it", err)
		}
	})
	t.Run("LoginForAnotherRegistry", func(t *testing.T) {
		before := private.Requests()
		other := &idlegrid.RegistryAuth{Registry: "ghcr.io", Username: "renter", Password: "s3cret-Pa55"}
		mustRefuse(t, r, workload(other), idlegrid.EINVALID, "the login is for ghcr.io")
		if n := private.Requests() - before; n != 0 {
			t.Errorf("the registry got %d requests, want none: the login is refused before any pull", n)
		}
	})
	t.Run("Login", func(t *testing.T) {
		if got := mustStart(t, r, workload(login())).exited(t); got != (runtime.Exit{}) {
			t.Errorf("exit = %+v, want code 0", got)
		}
		img, err := cli.ImageInspect(context.Background(), ref)
		if err != nil || !slices.Contains(img.RepoTags, privateMark(img.ID)) {
			t.Fatalf("the image pulled has tags %q (%v), want its mark %s", img.RepoTags, err, privateMark(img.ID))
		}
	})
	// The image is on the node now, marked private.
	t.Run("CachedNoLogin", func(t *testing.T) {
		mustRefuse(t, r, workload(nil), idlegrid.EFORBIDDEN, ref, "came to this node from a private registry", howToLogin)
	})
	t.Run("CachedWrongPassword", func(t *testing.T) {
		mustRefuse(t, r, workload(wrong), idlegrid.EFORBIDDEN, "refused the renter's login")
	})
	t.Run("CachedLogin", func(t *testing.T) {
		before := private.Requests()
		if got := mustStart(t, r, workload(login())).exited(t); got != (runtime.Exit{}) {
			t.Errorf("exit = %+v, want code 0", got)
		}
		if private.Requests() == before {
			t.Errorf("the registry got no request: want a pull even though the node has the image")
		}
	})
	t.Run("NoPull", func(t *testing.T) {
		noPull := mustRuntime(t, Options{NoPull: true})
		before := private.Requests()
		mustRefuse(t, noPull, workload(nil), idlegrid.EFORBIDDEN, "came to this node from a private registry", "does not pull images", howToLogin)
		if got := mustStart(t, noPull, workload(login())).exited(t); got != (runtime.Exit{}) {
			t.Errorf("with a login: exit = %+v, want code 0 from the image the node has", got)
		}
		if n := private.Requests() - before; n != 0 {
			t.Errorf("the registry got %d requests from a node that does not pull", n)
		}
	})
}

// TestRuntime_Start_PublicImage pulls a public image with a login, which
// marks it: a workload without a login runs it all the same, once the
// registry has given it to a pull without one.
func TestRuntime_Start_PublicImage(t *testing.T) {
	t.Parallel()
	open := registrytest.New(t, "", "")
	ref := mustPushedImage(t, "acme/public", open)[0]
	r := mustRuntime(t, Options{LocalRegistries: []string{open.Host}})
	for _, auth := range []*idlegrid.RegistryAuth{
		{Registry: open.Host, Username: "renter", Password: "s3cret-Pa55"},
		nil,
	} {
		w := testWorkload(map[string]string{"WORKLOAD_STEPS": "1", "WORKLOAD_STEP_MS": "1"})
		w.Job.Image, w.RegistryAuth = ref, auth
		before := open.Requests()
		if got := mustStart(t, r, w).exited(t); got != (runtime.Exit{}) {
			t.Errorf("login %v: exit = %+v, want code 0", auth, got)
		}
		if open.Requests() == before {
			t.Errorf("login %v: the registry got no request, want a pull", auth)
		}
	}
}

func TestEncodeAuth(t *testing.T) {
	for _, tt := range []struct{ registry, server string }{
		{"ghcr.io", "ghcr.io"},
		{"registry.example.com:5000", "registry.example.com:5000"},
		{"docker.io", "https://index.docker.io/v1/"},
	} {
		encoded, err := encodeAuth(idlegrid.RegistryAuth{Registry: tt.registry, Username: "renter", Password: "s3cret"})
		if err != nil {
			t.Fatalf("encodeAuth(%s): %v", tt.registry, err)
		}
		got, err := registry.DecodeAuthConfig(encoded)
		if err != nil {
			t.Fatalf("decode the login for %s: %v", tt.registry, err)
		}
		if got.Username != "renter" || got.Password != "s3cret" || got.ServerAddress != tt.server {
			t.Errorf("login for %s decodes to %q, %q, server %q; want renter, s3cret, server %q", tt.registry, got.Username, got.Password, got.ServerAddress, tt.server)
		}
	}
}

func TestLoginError(t *testing.T) {
	auth := idlegrid.RegistryAuth{Registry: "ghcr.io", Username: "renter", Password: "s3cret"}
	for _, tt := range []struct {
		err  error
		code string
	}{
		{errors.New("Head https://ghcr.io/v2/acme/x/manifests/1: unauthorized: s3cret is wrong"), idlegrid.EFORBIDDEN},
		{errors.New("dial tcp: connect: connection refused (s3cret)"), idlegrid.EINTERNAL},
	} {
		got := loginError("ghcr.io/acme/x:1", auth, tt.err)
		if idlegrid.ErrorCode(got) != tt.code {
			t.Errorf("loginError(%v): code %q, want %q", tt.err, idlegrid.ErrorCode(got), tt.code)
		}
		if msg := got.Error(); strings.Contains(msg, "s3cret") || !strings.Contains(msg, "ghcr.io/acme/x:1") || !strings.Contains(msg, "renter@ghcr.io") {
			t.Errorf("loginError(%v) = %q, want the image and the login named, and no password", tt.err, msg)
		}
	}
}
