package docker

import (
	"slices"
	"strings"
	"testing"

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
	pp := func(done, total int64) runtime.PullProgress { return runtime.PullProgress{DoneBytes: done, TotalBytes: total} }
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
