package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/idlegrid/idlegrid"
)

// maxAccountFile bounds what is read of an image's /etc/passwd or
// /etc/group: a renter's image must not make the agent read gigabytes.
const maxAccountFile = 1 << 20

// runAs makes user the one the workload runs as, with its volumes owned by
// it when its IDs are known, and writable by anyone (sticky) when not.
func (s *sandbox) runAs(user string) {
	s.config.User = user
	s.uid, s.gid, s.mode = 0, 0, 0o1777
	if uid, gid, ok := numericUser(user); ok {
		s.uid, s.gid, s.mode = uid, gid, 0o755
	}
}

// resolveUser turns a user the image names into the uid:gid its own
// /etc/passwd and /etc/group give it, read from the prep container (prepID)
// before the workload starts, so that the engine only ever gets numbers.
// Left to the engine, a name the image maps to uid 0 ("toor:x:0:0") would
// run as root: such a user is replaced by the node's User, as root itself
// is. A name the image does not list, or lists with IDs that are not
// numbers, is refused.
func (r *Runtime) resolveUser(ctx context.Context, prepID string, s *sandbox) error {
	user := s.config.User
	if _, _, ok := numericUser(user); ok || user == r.opt.User {
		return nil
	}
	name, group, hasGroup := strings.Cut(user, ":")
	uid, gid, err := r.lookupImageID(ctx, prepID, "/etc/passwd", name, 2, 3)
	if err != nil {
		return err
	}
	if hasGroup {
		if gid, _, err = r.lookupImageID(ctx, prepID, "/etc/group", group, 2, 2); err != nil {
			return err
		}
	}
	if uid == 0 {
		s.runAs(r.opt.User)
		s.notes = append(s.notes, fmt.Sprintf("the image's user %q is uid 0 in its /etc/passwd; the workload runs as %s instead", user, r.opt.User))
		return nil
	}
	s.runAs(fmt.Sprintf("%d:%d", uid, gid))
	return nil
}

// lookupImageID returns fields a and b, as numbers, of the line for name
// in the account file at path in the container's image: name itself when
// it is a number.
func (r *Runtime) lookupImageID(ctx context.Context, containerID, path, name string, a, b int) (x, y int, err error) {
	if n, err := strconv.Atoi(name); err == nil && n >= 0 {
		return n, n, nil
	}
	file, err := r.readImageFile(ctx, containerID, path)
	if err != nil {
		return 0, 0, err
	}
	x, y, found := lookupID(file, name, a, b)
	if !found {
		return 0, 0, idlegrid.Errorf(idlegrid.EINVALID, "the image runs as %q, which its %s does not list with numeric IDs; set the image's USER to a uid, or to a name it lists", name, path)
	}
	return x, y, nil
}

// readImageFile returns the file at path in the container's image, or
// nothing when the image has no such file.
func (r *Runtime) readImageFile(ctx context.Context, containerID, path string) ([]byte, error) {
	rc, _, err := r.cli.CopyFromContainer(ctx, containerID, path)
	if cerrdefs.IsNotFound(err) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("docker runtime: read %s from the image: %w", path, err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	hdr, err := tr.Next()
	if err != nil || hdr.Typeflag != tar.TypeReg {
		return nil, nil // empty, a link or a directory: as good as absent
	}
	if hdr.Size > maxAccountFile {
		return nil, fmt.Errorf("docker runtime: the image's %s is %d bytes, over the %d this node reads", path, hdr.Size, maxAccountFile)
	}
	b, err := io.ReadAll(tr)
	if err != nil {
		return nil, fmt.Errorf("docker runtime: read %s from the image: %w", path, err)
	}
	return b, nil
}

// lookupID finds the line of a colon-separated account file (/etc/passwd
// or /etc/group) whose first field is name, and returns its fields a and b
// as numbers.
func lookupID(file []byte, name string, a, b int) (x, y int, found bool) {
	for line := range bytes.Lines(file) {
		fields := strings.Split(strings.TrimSpace(string(line)), ":")
		if len(fields) <= max(a, b) || fields[0] != name {
			continue
		}
		x, errA := strconv.Atoi(fields[a])
		y, errB := strconv.Atoi(fields[b])
		if errA != nil || errB != nil || x < 0 || y < 0 {
			return 0, 0, false
		}
		return x, y, true
	}
	return 0, 0, false
}
