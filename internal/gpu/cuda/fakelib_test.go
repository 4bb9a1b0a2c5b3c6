//go:build cgo

package cuda

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idlegrid/idlegrid/internal/challenge"
)

// The runner's every call runs here against testdata/fakecuda.c and
// fakecublas.c, built into shared libraries: the CUDA driver API and
// cuBLAS as documented, on the CPU. What only a GPU shows (the real
// libraries' behaviour, the time) is gpu_test.go's, run with -tags gpu.

var fakeLibs struct{ cuda, blas, skip string }

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fakecuda")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fakeLibs.cuda, fakeLibs.blas = filepath.Join(dir, "libcuda.so.1"), filepath.Join(dir, "libcublas.so.12")
	fakeLibs.skip = buildFake("testdata/fakecuda.c", fakeLibs.cuda)
	if fakeLibs.skip == "" {
		fakeLibs.skip = buildFake("testdata/fakecublas.c", fakeLibs.blas)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// buildFake compiles src into a shared library at out, or says why not.
func buildFake(src, out string) string {
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "gcc"
	}
	if _, err := exec.LookPath(cc); err != nil {
		return "no C compiler to build the fake CUDA libraries: " + err.Error()
	}
	if b, err := exec.Command(cc, "-shared", "-fPIC", "-O1", "-o", out, src).CombinedOutput(); err != nil {
		return fmt.Sprintf("building %s: %v: %s", src, err, b)
	}
	return ""
}

const (
	fakeGPU0 = "GPU-5b1a0c3e-9f2d-4e61-8a7b-0123456789ab"
	fakeGPU1 = "GPU-00000000-1111-2222-3333-444455556666"
)

func hexOf(uuid string) string { return strings.ReplaceAll(strings.TrimPrefix(uuid, "GPU-"), "-", "") }

// mustFakeRunner opens the runner on the fake libraries with two GPUs.
func mustFakeRunner(t *testing.T) *Runner {
	t.Helper()
	if fakeLibs.skip != "" {
		t.Skip(fakeLibs.skip)
	}
	t.Setenv("FAKECUDA_UUIDS", hexOf(fakeGPU0)+","+strings.ToUpper(hexOf(fakeGPU1)))
	t.Setenv("FAKECUDA_MEM_MB", "256")
	t.Setenv("FAKECUDA_RESERVE_MB", "40")
	r, err := OpenLibraries(fakeLibs.cuda, "/nonexistent/libcublas.so.12", fakeLibs.blas)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func TestOpen_Unavailable(t *testing.T) {
	_, err := OpenLibraries("/nonexistent/libcuda.so.1", "libcublas.so.12")
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "unavailable: /nonexistent/libcuda.so.1 not found") {
		t.Errorf("OpenLibraries without the driver = %v, want ErrUnavailable saying libcuda.so.1 was not found", err)
	}
	if r, err := Open(); err == nil {
		r.Close()
		t.Log("this machine has libcuda.so.1 and cuBLAS; Open's failure is not checked here")
	} else if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "not found") {
		t.Errorf("Open = %v, want ErrUnavailable saying what was not found", err)
	}
	if fakeLibs.skip != "" {
		t.Skip(fakeLibs.skip)
	}
	_, err = OpenLibraries(fakeLibs.cuda, "/nonexistent/libcublas.so.12")
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "no cuBLAS library found") {
		t.Errorf("OpenLibraries without cuBLAS = %v, want ErrUnavailable naming cuBLAS", err)
	}
	_, err = OpenLibraries(fakeLibs.cuda)
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "no cuBLAS library found (tried ; the first: no library named)") {
		t.Errorf("OpenLibraries with no cuBLAS named = %v, want ErrUnavailable naming cuBLAS", err)
	}
	_, err = OpenLibraries(fakeLibs.blas, fakeLibs.blas)
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "has no cuInit") {
		t.Errorf("OpenLibraries with cuBLAS as the driver = %v, want ErrUnavailable naming cuInit", err)
	}
	t.Setenv("FAKECUDA_FAIL", "cuInit")
	_, err = OpenLibraries(fakeLibs.cuda, fakeLibs.blas)
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "cuInit: CUDA_ERROR_NO_DEVICE (100)") {
		t.Errorf("OpenLibraries when cuInit fails = %v, want ErrUnavailable naming cuInit and its code", err)
	}
}

func TestRunner_Devices(t *testing.T) {
	r := mustFakeRunner(t)
	got, err := r.Devices()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{fakeGPU0, fakeGPU1}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("Devices = %v, want %v", got, want)
	}
	if r.BLAS() != fakeLibs.blas {
		t.Errorf("BLAS = %q, want %q (the first that loads)", r.BLAS(), fakeLibs.blas)
	}
}

func TestRunner_Run(t *testing.T) {
	r := mustFakeRunner(t)
	old := chunkBytes
	chunkBytes = 10 * 4 * 192 // 10 rows a chunk: 192 rows end in a part chunk
	t.Cleanup(func() { chunkBytes = old })
	task := mustTask(t, 192)
	want, _, err := challenge.Run(context.Background(), task)
	if err != nil {
		t.Fatal(err)
	}
	// Twice: the first run must release its context and memory.
	for i := 0; i < 2; i++ {
		res, err := r.Run(context.Background(), fakeGPU1, task)
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		if !bytes.Equal(res.RowHashes, want) {
			t.Errorf("run %d: row hashes differ from challenge.Run's", i)
		}
		if res.Elapsed <= 0 {
			t.Errorf("run %d: Elapsed = %v, want the SGEMM's time", i, res.Elapsed)
		}
		if res.TotalMB != 256 || res.FreeMBAtRun != 256 {
			t.Errorf("run %d: TotalMB, FreeMBAtRun = %d, %d, want 256, 256 (nothing held from before)", i, res.TotalMB, res.FreeMBAtRun)
		}
		// 216 MB can be allocated; the back-off may leave up to grabMin.
		if res.VRAMMB < 216-grabMin>>20 || res.VRAMMB > 216 {
			t.Errorf("run %d: VRAMMB = %d, want %d–216", i, res.VRAMMB, 216-grabMin>>20)
		}
		if res.Device != "Fake CUDA Device" {
			t.Errorf("run %d: Device = %q", i, res.Device)
		}
	}
}

func TestRunner_RunFails(t *testing.T) {
	task := mustTask(t, 64)
	for _, tc := range []struct{ env, fn, want string }{
		{"FAKECUDA_FAIL", "cuMemAlloc_v2", "allocating A (0 MB): cuMemAlloc_v2: CUDA_ERROR_LAUNCH_FAILED (719)"},
		{"FAKECUDA_FAIL", "cuMemcpyHtoD_v2", "copying A to the GPU: cuMemcpyHtoD_v2: CUDA_ERROR_LAUNCH_FAILED (719)"},
		{"FAKECUDA_FAIL", "cuCtxSynchronize", "warm-up: cuCtxSynchronize: CUDA_ERROR_LAUNCH_FAILED (719)"},
		{"FAKECUDA_FAIL", "cuMemsetD8_v2", "memory check: cuMemsetD8_v2: CUDA_ERROR_LAUNCH_FAILED (719)"},
		{"FAKECUBLAS_FAIL", "cublasCreate_v2", "cublasCreate_v2: CUBLAS_STATUS_NOT_INITIALIZED (1)"},
		{"FAKECUBLAS_FAIL", "cublasSgemm_v2", "warm-up: cublasSgemm_v2: CUBLAS_STATUS_EXECUTION_FAILED (13)"},
	} {
		t.Run(tc.fn, func(t *testing.T) {
			r := mustFakeRunner(t)
			t.Setenv(tc.env, tc.fn)
			if _, err := r.Run(context.Background(), fakeGPU0, task); err == nil || err.Error() != tc.want {
				t.Errorf("Run = %v, want %q", err, tc.want)
			}
			os.Unsetenv(tc.env)
			if _, err := r.Run(context.Background(), fakeGPU0, task); err != nil {
				t.Errorf("Run after the failure = %v: the failed run left the GPU unusable", err)
			}
		})
	}
	t.Run("unknown GPU", func(t *testing.T) {
		r := mustFakeRunner(t)
		_, err := r.Run(context.Background(), "GPU-ffffffff-0000-0000-0000-000000000000", task)
		if err == nil || !strings.Contains(err.Error(), "no CUDA device has UUID GPU-ffffffff-0000-0000-0000-000000000000 among the 2") {
			t.Errorf("Run = %v, want no such device", err)
		}
	})
	t.Run("MIG", func(t *testing.T) {
		r := mustFakeRunner(t)
		t.Setenv("FAKECUDA_UUIDS", hexOf(fakeGPU0)+","+hexOf(fakeGPU0))
		if _, err := r.Run(context.Background(), fakeGPU0, task); err == nil || !strings.Contains(err.Error(), "shows as 2 CUDA devices") {
			t.Errorf("Run = %v, want the whole GPU asked for", err)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		r := mustFakeRunner(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := r.Run(ctx, fakeGPU0, task); !errors.Is(err, context.Canceled) {
			t.Errorf("Run = %v, want context.Canceled", err)
		}
	})
	t.Run("closed", func(t *testing.T) {
		r := mustFakeRunner(t)
		r.Close()
		if _, err := r.Run(context.Background(), fakeGPU0, task); !errors.Is(err, ErrUnavailable) {
			t.Errorf("Run = %v, want ErrUnavailable", err)
		}
	})
}

// A wrong product is returned as computed: catching it is the caller's
// self-check (internal/agent), which this shows can fail.
func TestRunner_RunWrongProduct(t *testing.T) {
	r := mustFakeRunner(t)
	t.Setenv("FAKECUBLAS_CORRUPT", "1")
	task := mustTask(t, 64)
	res, err := r.Run(context.Background(), fakeGPU0, task)
	if err != nil {
		t.Fatal(err)
	}
	want, _, err := challenge.Run(context.Background(), task)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(res.RowHashes[:32], want[:32]) || !bytes.Equal(res.RowHashes[32:], want[32:]) {
		t.Errorf("with C[0][0] off by one, want row 0 alone to differ")
	}
}
