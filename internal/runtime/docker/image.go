package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/distribution/reference"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/registry"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/runtime"
)

// PrivateRepository is the repository of the marks of private images
// (idlegrid.PrivateImageRepository). An image pulled with a renter's login
// is tagged PrivateRepository:<hex of the image ID>, e.g.
// "idlegrid-private:3f2a…", so that the node remembers, across agent
// restarts, that the image came from a private registry: a workload
// without a login may run it only once the registry gives it the image
// without one (see the package comment). No workload may name this
// repository. The mark concerns nothing else: containers name their image
// by ID, Adopt and the cleanups go by labels, and the runtime removes no
// image.
const PrivateRepository = idlegrid.PrivateImageRepository

// dockerHubServer is the server address Docker gives logins to Docker Hub.
const dockerHubServer = "https://index.docker.io/v1/"

// ensureImage returns the local image of w's job, pulling it as the
// package comment says: always when w has a login, else when the node
// lacks the image or has it only as another renter's private image.
func (r *Runtime) ensureImage(ctx context.Context, w runtime.Workload) (image.InspectResponse, error) {
	ref := w.Job.Image
	if w.RegistryAuth != nil && !r.opt.NoPull {
		if err := r.opt.checkRegistry(ctx, ref); err != nil {
			return image.InspectResponse{}, err
		}
		return r.pullWithLogin(ctx, ref, *w.RegistryAuth, w.OnPull)
	}
	img, err := r.cli.ImageInspect(ctx, ref)
	switch {
	case err == nil && w.RegistryAuth == nil && (isPrivate(img) || r.pullingWithLogin(ref)):
		if err := r.opt.checkRegistry(ctx, ref); err != nil && !r.opt.NoPull {
			return image.InspectResponse{}, err
		}
		return r.pullPublic(ctx, ref, w.OnPull)
	case err == nil:
		return img, nil
	case !cerrdefs.IsNotFound(err):
		return img, fmt.Errorf("docker runtime: inspect image %s: %w", ref, err)
	case r.opt.NoPull:
		return img, fmt.Errorf("image %s is not present locally, and this node does not pull images; load it with docker load or build it on this node", ref)
	}
	if err := r.opt.checkRegistry(ctx, ref); err != nil {
		return img, err
	}
	if err := r.pull(ctx, ref, "", w.OnPull); err != nil {
		return img, missingError(ref, err)
	}
	return r.inspectPulled(ctx, ref)
}

// pullWithLogin pulls ref with a renter's login and marks the image
// private. It pulls even when the node has the image, so that the registry
// checks that this renter may read it, and the tag's current version runs.
func (r *Runtime) pullWithLogin(ctx context.Context, ref string, auth idlegrid.RegistryAuth, onPull func(runtime.PullProgress)) (image.InspectResponse, error) {
	encoded, err := encodeAuth(auth)
	if err != nil {
		return image.InspectResponse{}, fmt.Errorf("docker runtime: encode the login %s: %w", auth, err)
	}
	defer r.beginLoginPull(ref)()
	if err := r.pull(ctx, ref, encoded, onPull); err != nil {
		return image.InspectResponse{}, loginError(ref, auth, err)
	}
	img, err := r.inspectPulled(ctx, ref)
	if err != nil {
		return img, err
	}
	if err := r.cli.ImageTag(ctx, img.ID, privateMark(img.ID)); err != nil {
		// Unmarked, the private image must not stay under its name, where a
		// workload without a login would find it.
		if _, rmErr := r.cli.ImageRemove(ctx, ref, image.RemoveOptions{}); rmErr != nil {
			r.opt.Logger.Error("a private image could be neither marked nor untagged", "image", ref, "err", rmErr)
		}
		return img, fmt.Errorf("docker runtime: mark image %s (%s) as private: %w", ref, img.ID, err)
	}
	return img, nil
}

// pullPublic pulls ref without a login, for a workload that has none and
// found the image marked private (or being pulled with a login): it may
// run the image only if the registry gives it to anyone.
func (r *Runtime) pullPublic(ctx context.Context, ref string, onPull func(runtime.PullProgress)) (image.InspectResponse, error) {
	if r.opt.NoPull {
		return image.InspectResponse{}, privateError(ref, "this node does not pull images, so it cannot ask the registry whether the image is public")
	}
	if err := r.pull(ctx, ref, "", onPull); err != nil {
		return image.InspectResponse{}, privateError(ref, "the registry did not give it without a login: "+err.Error())
	}
	return r.inspectPulled(ctx, ref)
}

func (r *Runtime) inspectPulled(ctx context.Context, ref string) (image.InspectResponse, error) {
	img, err := r.cli.ImageInspect(ctx, ref)
	if err != nil {
		return img, fmt.Errorf("docker runtime: inspect image %s after pulling it: %w", ref, err)
	}
	return img, nil
}

// pull pulls ref, with encodedAuth as the login unless it is empty,
// telling onPull (when not nil) how far it has come. The engine reports
// most failures inside the stream.
func (r *Runtime) pull(ctx context.Context, ref, encodedAuth string, onPull func(runtime.PullProgress)) error {
	rc, err := r.cli.ImagePull(ctx, ref, image.PullOptions{RegistryAuth: encodedAuth})
	if err != nil {
		return err
	}
	defer rc.Close()
	return pullStream(rc, onPull)
}

// encodeAuth encodes a renter's login as the engine takes it with a pull.
func encodeAuth(a idlegrid.RegistryAuth) (string, error) {
	server := a.Registry
	if server == "docker.io" {
		server = dockerHubServer
	}
	return registry.EncodeAuthConfig(registry.AuthConfig{Username: a.Username, Password: a.Password, ServerAddress: server})
}

// privateMark is the tag that marks the image id as private.
func privateMark(id string) string {
	return PrivateRepository + ":" + id[strings.LastIndex(id, ":")+1:]
}

func isPrivate(img image.InspectResponse) bool {
	return slices.Contains(img.RepoTags, privateMark(img.ID))
}

// beginLoginPull counts a pull with a login of ref's repository, until the
// func it returns is called. Until its mark is set, a private image just
// pulled looks like any other, so a workload without a login treats an
// image of a repository being pulled with one as marked.
func (r *Runtime) beginLoginPull(ref string) (done func()) {
	repo := repository(ref)
	r.mu.Lock()
	r.loginPulls[repo]++
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.loginPulls[repo]--; r.loginPulls[repo] == 0 {
			delete(r.loginPulls, repo)
		}
	}
}

func (r *Runtime) pullingWithLogin(ref string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.loginPulls[repository(ref)] > 0
}

// repository is ref's repository in full ("docker.io/library/ubuntu"), or
// ref itself when it names none.
func repository(ref string) string {
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return ref
	}
	return named.Name()
}

// registryOf is the registry of ref, for messages.
func registryOf(ref string) string {
	reg, err := idlegrid.ImageRegistry(ref)
	if err != nil {
		return "its registry"
	}
	return reg
}

// refusedByRegistry reports whether a pull failed because the registry
// would not give the image to this caller: no login, a wrong one, or one
// without access (registries answer "not found" to whoever may not see an
// image).
func refusedByRegistry(err error) bool {
	return cerrdefs.IsUnauthorized(err) || cerrdefs.IsPermissionDenied(err) || cerrdefs.IsNotFound(err) ||
		containsAny(strings.ToLower(err.Error()), "unauthorized", "denied", "forbidden", "not found",
			"authentication required", "no basic auth credentials", "manifest unknown", "name unknown")
}

// unknownHost reports whether a pull failed because the registry's name
// does not exist: the image's name is wrong, not the node (a resolver
// that cannot be reached says otherwise).
func unknownHost(err error, registry string) bool {
	host := registry
	if h, _, err := net.SplitHostPort(registry); err == nil {
		host = h
	}
	if registry == "docker.io" {
		host = "registry-1.docker.io" // where the engine pulls Docker Hub's images from
	}
	msg := err.Error() // the engine's answer carries the resolver's words
	return strings.Contains(msg, "no such host") && strings.Contains(msg, "lookup "+host)
}

// missingError explains a failed pull without a login of an image the node
// lacks.
func missingError(ref string, err error) error {
	if reg := registryOf(ref); unknownHost(err, reg) {
		return idlegrid.Errorf(idlegrid.EINVALID, "image %s could not be pulled: its registry %s does not exist (%v); check the image's name", ref, reg, err)
	}
	if !refusedByRegistry(err) {
		return fmt.Errorf("image %s is not present locally and could not be pulled: %v; load it with docker load or build it on this node", ref, err)
	}
	reg := registryOf(ref)
	return idlegrid.Errorf(idlegrid.EFORBIDDEN, "image %s is not present locally and could not be pulled: the registry %s refused it without a login (%v); check the image's name, and if the image is private, the job's renter must add its login for the registry: idlegrid registry login %s", ref, reg, err, reg)
}

// loginError explains a failed pull with a renter's login, without its
// password.
func loginError(ref string, auth idlegrid.RegistryAuth, err error) error {
	msg := err.Error()
	if auth.Password != "" {
		msg = strings.ReplaceAll(msg, auth.Password, "********")
	}
	if unknownHost(err, auth.Registry) {
		return idlegrid.Errorf(idlegrid.EINVALID, "image %s could not be pulled: its registry %s does not exist (%s); check the image's name", ref, auth.Registry, msg)
	}
	if !refusedByRegistry(err) {
		return fmt.Errorf("image %s could not be pulled with the renter's login %s: %s", ref, auth, msg)
	}
	return idlegrid.Errorf(idlegrid.EFORBIDDEN, "image %s could not be pulled: the registry %s refused the renter's login %s (%s); check the image's name and that the login may read it, and renew the login with idlegrid registry login %s", ref, auth.Registry, auth, msg, auth.Registry)
}

// privateError refuses a workload without a login the image that another
// renter's login brought to the node, saying why.
func privateError(ref, why string) error {
	reg := registryOf(ref)
	return idlegrid.Errorf(idlegrid.EFORBIDDEN, "image %s came to this node from a private registry, %s, and the job's renter has no login for %s; %s; if the renter may pull the image, it adds its login with idlegrid registry login %s", ref, reg, reg, why, reg)
}

// StreamError reads a stream of the engine's JSON progress messages (from
// a pull, a push or a build) to its end and returns the first error in it.
func StreamError(rc io.Reader) error { return pullStream(rc, nil) }

// streamMessage is one of the engine's JSON progress messages.
type streamMessage struct {
	Error       string `json:"error"`
	ErrorDetail struct {
		Message string `json:"message"`
	} `json:"errorDetail"`
	ID             string `json:"id"` // the layer, in a pull
	Status         string `json:"status"`
	ProgressDetail struct {
		Current int64 `json:"current"`
		Total   int64 `json:"total"`
	} `json:"progressDetail"`
}

// pullStream is StreamError for a pull, telling onPull (when not nil) how
// far the layers' downloads have come after each message that moves them.
func pullStream(rc io.Reader, onPull func(runtime.PullProgress)) error {
	dec := json.NewDecoder(rc)
	var layers pullLayers
	for {
		var msg streamMessage
		if err := dec.Decode(&msg); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
		if msg.Error != "" {
			return errors.New(msg.Error)
		} else if msg.ErrorDetail.Message != "" {
			return errors.New(msg.ErrorDetail.Message)
		}
		if onPull != nil && layers.note(msg) {
			onPull(layers.progress())
		}
	}
}

// pullLayers is each layer's download in a pull: bytes done, of its size.
type pullLayers map[string][2]int64

// note takes a message into the layers, and reports whether it moved one:
// a download's progress, or its end (then all of its size is done).
func (p *pullLayers) note(msg streamMessage) bool {
	if msg.ID == "" {
		return false
	}
	if *p == nil {
		*p = pullLayers{}
	}
	cur := (*p)[msg.ID]
	switch {
	case msg.Status == "Downloading" && msg.ProgressDetail.Total > 0:
		(*p)[msg.ID] = [2]int64{min(msg.ProgressDetail.Current, msg.ProgressDetail.Total), msg.ProgressDetail.Total}
	case (msg.Status == "Download complete" || msg.Status == "Pull complete") && cur[1] > 0:
		(*p)[msg.ID] = [2]int64{cur[1], cur[1]}
	}
	return (*p)[msg.ID] != cur
}

func (p pullLayers) progress() runtime.PullProgress {
	var pp runtime.PullProgress
	for _, l := range p {
		pp.DoneBytes += l[0]
		pp.TotalBytes += l[1]
	}
	return pp
}

func imageUser(img image.InspectResponse) string {
	if img.Config == nil {
		return ""
	}
	return img.Config.User
}
