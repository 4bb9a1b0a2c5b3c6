package docker

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/idlegrid/idlegrid/internal/atomicfile"
)

// A workload left running by Detach is taken back by the next agent's
// runtime, which follows its output from where this one stopped reading,
// so that a hand-over loses none of it. The output is read with the
// engine's timestamps; Detach keeps, in Options.StateDir, the timestamp
// just after the last line each workload's stream delivered, and Adopt
// asks the engine for the output since then. A workload taken back after
// a crash (no such record) shows its output from the adoption on.

// handedOverFile is the record Detach keeps in Options.StateDir: lease ID
// → where the next runtime follows the workload's output from (the zero
// time: from its start, none having been read).
const handedOverFile = "handed-over.json"

func (r *Runtime) handedOverPath() string {
	if r.opt.StateDir == "" {
		return ""
	}
	return filepath.Join(r.opt.StateDir, handedOverFile)
}

// readHandedOver returns the record Detach kept; empty when there is none.
func (r *Runtime) readHandedOver() map[string]time.Time {
	out := map[string]time.Time{}
	path := r.handedOverPath()
	if path == "" {
		return out
	}
	data, err := os.ReadFile(path)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			r.opt.Logger.Warn("docker runtime: cannot read where to follow the output of workloads handed over; they show their output from now", "file", path, "err", err)
		}
		return out
	}
	if err := json.Unmarshal(data, &out); err != nil {
		r.opt.Logger.Warn("docker runtime: the record of workloads handed over is corrupt; they show their output from now", "file", path, "err", err)
		return map[string]time.Time{}
	}
	return out
}

// keepHandedOver adds where each of the workloads Detach left was read to,
// to the record, for the runtime that takes them back.
func (r *Runtime) keepHandedOver(left []*workload) {
	path := r.handedOverPath()
	if path == "" || len(left) == 0 {
		return
	}
	rec := r.readHandedOver()
	for _, wl := range left {
		rec[wl.leaseID] = wl.readTo
	}
	data, err := json.Marshal(rec)
	if err == nil {
		err = atomicfile.Write(path, data)
	}
	if err != nil {
		r.opt.Logger.Warn("docker runtime: cannot record where the workloads handed over were read to; the next agent shows their output from when it takes them back", "file", path, "err", err)
	}
}

// forgetHandedOver removes the record once Adopt has taken back what it
// names.
func (r *Runtime) forgetHandedOver() {
	if path := r.handedOverPath(); path != "" {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			r.opt.Logger.Warn("docker runtime: cannot remove the record of workloads handed over", "file", path, "err", err)
		}
	}
}

// demux copies the engine's multiplexed output (stdcopy's frames, one
// message each) to stdout and stderr. Each message begins with the
// engine's timestamp and a space (LogsOptions.Timestamps), which it takes
// off; read is told each one's timestamp, once the message is written.
func demux(stdout, stderr io.Writer, src io.Reader, read func(time.Time)) error {
	var hdr [8]byte
	var buf []byte
	for {
		if _, err := io.ReadFull(src, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		size := int(binary.BigEndian.Uint32(hdr[4:]))
		if cap(buf) < size {
			buf = make([]byte, size)
		}
		msg := buf[:size]
		if _, err := io.ReadFull(src, msg); err != nil {
			return err
		}
		var at time.Time
		if sp := bytes.IndexByte(msg, ' '); sp > 0 {
			if t, err := time.Parse(time.RFC3339Nano, string(msg[:sp])); err == nil {
				at, msg = t, msg[sp+1:]
			}
		}
		switch hdr[0] {
		case 0, 1: // stdin (a TTY's output), stdout
			stdout.Write(msg)
		case 2:
			stderr.Write(msg)
		default: // the engine's own error
			return fmt.Errorf("%s", bytes.TrimSpace(msg))
		}
		if !at.IsZero() {
			read(at)
		}
	}
}
