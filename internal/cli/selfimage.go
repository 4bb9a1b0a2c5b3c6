package cli

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	"github.com/idlegrid/idlegrid/internal/runtime/docker"
)

// selfPath is where the idlegrid binary lies in a self image. A test
// binary copied there runs Main (see TestMain), so tests can use these
// images too.
const selfPath = "/idlegrid"

// selfImage makes sure the engine has an image of the running idlegrid
// binary, FROM scratch, whose entrypoint runs it with args, and returns the
// image's reference. idlegrid runs its own code in containers this way:
// the demo workload of 'idlegrid dev --runtime docker', and the probe of
// 'idlegrid agent --check' that looks for GPUs from inside a container. No
// registry is needed, nor a Go toolchain.
//
// A binary built with cgo (for NVML) is linked dynamically: the image then
// also holds its loader and the shared libraries it needs, copied from
// this machine. The tag is a digest of the image's content, so that it is
// built once per binary and the next start finds it.
func selfImage(ctx context.Context, cli *client.Client, repo string, args ...string) (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find the idlegrid binary: %w", err)
	}
	files, env, err := selfFiles(exe)
	if err != nil {
		return "", err
	}
	if err := sameArch(ctx, cli); err != nil {
		return "", err
	}
	entry, _ := json.Marshal(append([]string{selfPath}, args...))
	dockerfile := "FROM scratch\nCOPY rootfs/ /\n"
	if env != "" {
		dockerfile += "ENV " + env + "\n"
	}
	dockerfile += "ENTRYPOINT " + string(entry) + "\n"
	ref := repo + ":" + contentTag(dockerfile, files)
	if _, err := cli.ImageInspect(ctx, ref); err == nil {
		return ref, nil
	} else if !cerrdefs.IsNotFound(err) {
		return "", fmt.Errorf("inspect image %s: %w", ref, err)
	}
	buildCtx, err := tarContext(dockerfile, files)
	if err != nil {
		return "", err
	}
	res, err := cli.ImageBuild(ctx, buildCtx, build.ImageBuildOptions{
		Tags: []string{ref}, Remove: true, ForceRemove: true,
		Labels: map[string]string{docker.LabelManagedBy: docker.ManagedBy},
	})
	if err != nil {
		return "", fmt.Errorf("build image %s: %w", ref, err)
	}
	defer res.Body.Close()
	if err := docker.StreamError(res.Body); err != nil {
		return "", fmt.Errorf("build image %s: %w", ref, err)
	}
	removeOtherTags(ctx, cli, repo, ref)
	return ref, nil
}

// removeOtherTags removes the images of repo other than ref: those of
// earlier idlegrid binaries. One a container still uses stays.
func removeOtherTags(ctx context.Context, cli *client.Client, repo, ref string) {
	list, err := cli.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(filters.Arg("reference", repo))})
	if err != nil {
		return
	}
	for _, img := range list {
		for _, tag := range img.RepoTags {
			if tag != ref && strings.HasPrefix(tag, repo+":") {
				cli.ImageRemove(ctx, tag, image.RemoveOptions{PruneChildren: true})
			}
		}
	}
}

// imageFile is one file of a self image, by its path in the image.
type imageFile struct {
	path string
	mode int64
	data []byte
}

// selfFiles lists the files of the self image of the binary at exe, and
// the image's LD_LIBRARY_PATH setting ("" for a static binary).
func selfFiles(exe string) ([]imageFile, string, error) {
	data, err := os.ReadFile(exe)
	if err != nil {
		return nil, "", fmt.Errorf("read the idlegrid binary: %w", err)
	}
	files := []imageFile{{path: selfPath, mode: 0o755, data: data}}
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return nil, "", fmt.Errorf("the idlegrid binary %s is not a Linux executable, so it cannot run in a container: %w", exe, err)
	}
	defer f.Close()
	interp := interpreter(f)
	if interp == "" {
		return files, "", nil // static
	}
	libs, dirs, err := sharedLibraries(f)
	if err != nil {
		return nil, "", err
	}
	for _, p := range append([]string{interp}, libs...) {
		b, err := os.ReadFile(p) // through symlinks: the image holds the file under the name asked for
		if err != nil {
			return nil, "", fmt.Errorf("the idlegrid binary needs %s: %w", p, err)
		}
		files = append(files, imageFile{path: p, mode: 0o755, data: b})
	}
	return files, "LD_LIBRARY_PATH=" + strings.Join(dirs, ":"), nil
}

// interpreter is the dynamic loader an ELF file names, or "" for a static
// one.
func interpreter(f *elf.File) string {
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err == nil {
				return strings.TrimRight(string(b), "\x00")
			}
		}
	}
	return ""
}

// libraryDirs are where the loader looks for libraries on common Linux
// distributions, for this architecture.
func libraryDirs() []string {
	triplet := map[string]string{"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}[goruntime.GOARCH]
	dirs := []string{"/lib64", "/usr/lib64"}
	if triplet != "" {
		dirs = append(dirs, "/lib/"+triplet, "/usr/lib/"+triplet)
	}
	return append(dirs, "/lib", "/usr/lib")
}

// sharedLibraries finds, on this machine, every library f needs, directly
// or through another, and the directories they are in.
func sharedLibraries(f *elf.File) (libs, dirs []string, err error) {
	seen := map[string]bool{}
	queue, err := f.ImportedLibraries()
	if err != nil {
		return nil, nil, fmt.Errorf("read the idlegrid binary's libraries: %w", err)
	}
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		if seen[name] {
			continue
		}
		seen[name] = true
		path := findLibrary(name)
		if path == "" {
			return nil, nil, fmt.Errorf("the idlegrid binary needs %s, which is in none of %s; build it with CGO_ENABLED=0", name, strings.Join(libraryDirs(), ", "))
		}
		libs = append(libs, path)
		if d := filepath.Dir(path); !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
		lf, err := elf.Open(path)
		if err != nil {
			return nil, nil, fmt.Errorf("read %s: %w", path, err)
		}
		more, err := lf.ImportedLibraries()
		lf.Close()
		if err != nil {
			return nil, nil, fmt.Errorf("read %s: %w", path, err)
		}
		queue = append(queue, more...)
	}
	return libs, dirs, nil
}

func findLibrary(name string) string {
	for _, d := range libraryDirs() {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p
		}
	}
	return ""
}

// sameArch fails when the engine runs another architecture than this
// binary's, which it could not run.
func sameArch(ctx context.Context, cli *client.Client) error {
	info, err := cli.Info(ctx)
	if err != nil {
		return fmt.Errorf("ask the Docker engine about itself: %w", err)
	}
	arch := map[string]string{"x86_64": "amd64", "aarch64": "arm64"}[info.Architecture]
	if arch != "" && arch != goruntime.GOARCH {
		return fmt.Errorf("the Docker engine at %s runs %s, but this idlegrid binary is for %s", cli.DaemonHost(), info.Architecture, goruntime.GOARCH)
	}
	return nil
}

func contentTag(dockerfile string, files []imageFile) string {
	h := sha256.New()
	io.WriteString(h, dockerfile)
	for _, f := range files {
		fmt.Fprintf(h, "\x00%s\x00%o\x00%d\x00", f.path, f.mode, len(f.data))
		h.Write(f.data)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// tarContext is a build context: the Dockerfile and the files under rootfs/.
func tarContext(dockerfile string, files []imageFile) (io.Reader, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	all := append([]imageFile{{path: "Dockerfile", mode: 0o644, data: []byte(dockerfile)}}, prefixed("rootfs", files)...)
	for _, f := range all {
		if err := tw.WriteHeader(&tar.Header{Name: f.path, Mode: f.mode, Size: int64(len(f.data)), Typeflag: tar.TypeReg}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return &buf, nil
}

func prefixed(dir string, files []imageFile) []imageFile {
	out := make([]imageFile, len(files))
	for i, f := range files {
		f.path = dir + f.path // image paths are absolute
		out[i] = f
	}
	return out
}
