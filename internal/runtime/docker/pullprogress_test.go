package docker

import (
	"crypto/rand"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/idlegrid/idlegrid/internal/registrytest"
	"github.com/idlegrid/idlegrid/internal/runtime"
)

// pullStream reads a pull's messages as the engine sends them: a layer the
// node has counts nothing, a downloading layer counts its bytes done of
// its size, a finished download all of its size; an error in the stream
// ends it.
func TestPullStream_progress(t *testing.T) {
	stream := strings.Join([]string{
		`{"status":"Pulling from acme/trainer","id":"1.4"}`,
		`{"status":"Already exists","progressDetail":{},"id":"aaa"}`,
		`{"status":"Pulling fs layer","progressDetail":{},"id":"bbb"}`,
		`{"status":"Pulling fs layer","progressDetail":{},"id":"ccc"}`,
		`{"status":"Downloading","progressDetail":{"current":100,"total":1000},"progress":"[>  ]","id":"bbb"}`,
		`{"status":"Downloading","progressDetail":{"current":50,"total":3000},"id":"ccc"}`,
		`{"status":"Downloading","progressDetail":{"current":600,"total":1000},"id":"bbb"}`,
		`{"status":"Verifying Checksum","progressDetail":{},"id":"bbb"}`,
		`{"status":"Download complete","progressDetail":{},"id":"bbb"}`,
		`{"status":"Extracting","progressDetail":{"current":1000,"total":1000},"id":"bbb"}`,
		`{"status":"Downloading","progressDetail":{"current":3000,"total":3000},"id":"ccc"}`,
		`{"status":"Pull complete","progressDetail":{},"id":"ccc"}`,
		`{"status":"Digest: sha256:0123"}`,
	}, "\n")
	var got []runtime.PullProgress
	if err := pullStream(strings.NewReader(stream), func(p runtime.PullProgress) { got = append(got, p) }); err != nil {
		t.Fatal(err)
	}
	pp := func(done, total int64) runtime.PullProgress {
		return runtime.PullProgress{DoneBytes: done, TotalBytes: total}
	}
	want := []runtime.PullProgress{pp(100, 1000), pp(150, 4000), pp(650, 4000), pp(1050, 4000), pp(4000, 4000)}
	if !slices.Equal(got, want) {
		t.Errorf("progress = %v, want %v", got, want)
	}

	failed := `{"status":"Downloading","progressDetail":{"current":1,"total":9},"id":"bbb"}` + "\n" +
		`{"errorDetail":{"message":"unexpected EOF"},"error":"unexpected EOF"}`
	if err := pullStream(strings.NewReader(failed), func(runtime.PullProgress) {}); err == nil || err.Error() != "unexpected EOF" {
		t.Errorf("a stream with an error = %v, want it", err)
	}
}

// TestRuntime_Start_PullProgress pulls an image with a layer of its own
// from a registry, and hears how far the pull has come until the layer is
// whole.
func TestRuntime_Start_PullProgress(t *testing.T) {
	t.Parallel()
	reg := registrytest.New(t, "", "")
	blob := make([]byte, 4<<20)
	rand.Read(blob) // so that the layer does not compress
	ref := mustPushedImageWith(t, "acme/large", blob, reg)[0]
	r := mustRuntime(t, Options{LocalRegistries: []string{reg.Host}})
	w := testWorkload(map[string]string{"WORKLOAD_STEPS": "1", "WORKLOAD_STEP_MS": "1"})
	w.Job.Image = ref
	var mu sync.Mutex
	var heard []runtime.PullProgress
	w.OnPull = func(p runtime.PullProgress) {
		mu.Lock()
		defer mu.Unlock()
		heard = append(heard, p)
	}
	if got := mustStart(t, r, w).exited(t); got != (runtime.Exit{}) {
		t.Errorf("exit = %+v, want code 0", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(heard) == 0 {
		t.Fatal("no progress heard from the pull")
	}
	last := heard[len(heard)-1]
	if last.TotalBytes < 4<<20 || last.DoneBytes != last.TotalBytes {
		t.Errorf("the pull's last progress = %+v, want all of at least the 4 MiB layer done", last)
	}
	for i, p := range heard {
		if p.DoneBytes < 0 || p.DoneBytes > p.TotalBytes || (i > 0 && p.DoneBytes < heard[i-1].DoneBytes) {
			t.Errorf("progress %d of %d: %+v after %+v, want done bytes within the total, never falling", i, len(heard), p, heard[max(i-1, 0)])
		}
	}
}
