// Command workload is the docker runtime's test workload: a pretend trainer
// that runs in a FROM scratch image. It prints progress, checkpoints its
// step to $IDLEGRID_CHECKPOINT_DIR (default /checkpoint) after every step,
// resumes from a checkpoint it finds there, and on SIGTERM saves a final
// checkpoint and exits 143. Before it starts it reports what it sees of its
// sandbox, so the tests can prove the runtime's settings from inside.
//
// Its env steers it:
//
//	WORKLOAD_STEPS=20          steps to run in all (a resumed run does the rest)
//	WORKLOAD_STEP_MS=50        milliseconds per step
//	WORKLOAD_EXIT_CODE=3       exit with code 3 at the end instead of 0
//	WORKLOAD_IGNORE_SIGTERM=1  ignore SIGTERM, so only a kill ends it early
//	WORKLOAD_ALLOC_MB=512      first take and touch this much memory
//	WORKLOAD_LISTEN=:8000      accept TCP connections there while it runs
//	WORKLOAD_CONNECT=IP:8000   first try to connect there, and say whether it could
//	WORKLOAD_LONG_LINE=40000   first print a line of this many x's
//	WORKLOAD_WRITE_MB=64       first write this much to $IDLEGRID_SCRATCH_DIR/fill
package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() { os.Exit(run()) }

var hog [][]byte // WORKLOAD_ALLOC_MB's memory, kept reachable

func run() int {
	dir := envOr("IDLEGRID_CHECKPOINT_DIR", "/checkpoint")
	steps, stepMS := envInt("WORKLOAD_STEPS", 20), envInt("WORKLOAD_STEP_MS", 50)
	exitCode := envInt("WORKLOAD_EXIT_CODE", 0)

	term := make(chan os.Signal, 1)
	if os.Getenv("WORKLOAD_IGNORE_SIGTERM") == "1" {
		signal.Ignore(syscall.SIGTERM)
	} else {
		signal.Notify(term, syscall.SIGTERM)
	}
	sandboxReport()
	reach()
	if n := envInt("WORKLOAD_LONG_LINE", 0); n > 0 {
		fmt.Println(strings.Repeat("x", n))
	}
	if mb := envInt("WORKLOAD_ALLOC_MB", 0); mb > 0 {
		fmt.Printf("allocating %d MB\n", mb)
		hog = make([][]byte, mb)
		for i := range hog {
			hog[i] = make([]byte, 1<<20)
			for j := 0; j < len(hog[i]); j += 4096 {
				hog[i][j] = 1
			}
		}
		fmt.Printf("allocated %d MB\n", mb)
	}

	if mb := envInt("WORKLOAD_WRITE_MB", 0); mb > 0 {
		fill(filepath.Join(envOr("IDLEGRID_SCRATCH_DIR", "/scratch"), "fill"), mb)
	}

	step := loadStep(dir)
	if step > 0 {
		fmt.Printf("resuming from step %d\n", step)
	}
	tick := time.NewTicker(time.Duration(stepMS) * time.Millisecond)
	defer tick.Stop()
	for step < steps {
		select {
		case <-term:
			fmt.Fprintf(os.Stderr, "received SIGTERM at step %d, checkpointing\n", step)
			if err := saveStep(dir, step); err != nil {
				fmt.Fprintf(os.Stderr, "checkpoint failed: %v\n", err)
				return 1
			}
			fmt.Printf("checkpoint saved: step %d\n", step)
			return 143
		case <-tick.C:
		}
		step++
		if err := saveStep(dir, step); err != nil {
			fmt.Fprintf(os.Stderr, "checkpoint failed: %v\n", err)
			return 1
		}
		fmt.Printf("step %d/%d\n", step, steps)
		fmt.Printf("idlegrid:progress=%.4f\n", float64(step)/float64(steps))
	}
	fmt.Printf("done: %d steps\n", steps)
	if exitCode != 0 {
		fmt.Fprintf(os.Stderr, "exiting with code %d\n", exitCode)
	}
	return exitCode
}

// reach listens and connects as WORKLOAD_LISTEN and WORKLOAD_CONNECT ask.
func reach() {
	if addr := os.Getenv("WORKLOAD_LISTEN"); addr != "" {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			fmt.Printf("listen %s: %v\n", addr, err)
		} else {
			fmt.Printf("listening on %s\n", addr)
			go accept(ln)
		}
	}
	if addr := os.Getenv("WORKLOAD_CONNECT"); addr != "" {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			fmt.Printf("connect %s: failed\n", addr)
		} else {
			c.Close()
			fmt.Printf("connect %s: connected\n", addr)
		}
	}
}

func accept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		c.Close()
	}
}

// sandboxReport prints one line per fact the tests check.
func sandboxReport() {
	fmt.Printf("uid=%d gid=%d\n", os.Getuid(), os.Getgid())
	fmt.Printf("rootfs writable: %v\n", writable("/"))
	fmt.Printf("scratch writable: %v\n", writable("/scratch"))
	fmt.Printf("tmp writable: %v\n", writable("/tmp"))
	fmt.Printf("gpus: IDLEGRID_GPUS=%s NVIDIA_VISIBLE_DEVICES=%s\n", os.Getenv("IDLEGRID_GPUS"), os.Getenv("NVIDIA_VISIBLE_DEVICES"))
	var names []string
	if ifs, err := net.Interfaces(); err == nil {
		for _, i := range ifs {
			names = append(names, i.Name)
		}
	}
	fmt.Printf("network interfaces: %s\n", strings.Join(names, ","))
	if status, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range strings.Split(string(status), "\n") {
			if strings.HasPrefix(line, "CapEff:") || strings.HasPrefix(line, "NoNewPrivs:") {
				fmt.Println(strings.Join(strings.Fields(line), " "))
			}
		}
	}
	fmt.Fprintln(os.Stderr, "this line goes to stderr")
}

func writable(dir string) bool {
	f, err := os.CreateTemp(dir, ".probe-")
	if err != nil {
		return false
	}
	f.Close()
	os.Remove(f.Name())
	return true
}

func loadStep(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, "step"))
	if errors.Is(err, os.ErrNotExist) {
		return 0
	} else if err != nil {
		fmt.Fprintf(os.Stderr, "cannot read checkpoint: %v\n", err)
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// saveStep writes the checkpoint atomically: a kill mid-write leaves the
// previous one.
func saveStep(dir string, step int) error {
	tmp := filepath.Join(dir, "step.tmp")
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(step)+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, "step"))
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func envInt(key string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(key)); err == nil {
		return n
	}
	return def
}

// fill writes mb MB of zeros to path, and says so.
func fill(path string, mb int) {
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fill:", err)
		return
	}
	defer f.Close()
	block := make([]byte, 1<<20)
	for range mb {
		if _, err := f.Write(block); err != nil {
			fmt.Fprintln(os.Stderr, "fill:", err)
			return
		}
	}
	f.Sync()
	fmt.Printf("wrote %d MB\n", mb)
}
