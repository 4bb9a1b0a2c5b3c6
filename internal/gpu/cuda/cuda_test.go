package cuda

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/idlegrid/idlegrid/internal/challenge"
)

func mustTask(tb testing.TB, size int) challenge.Task {
	tb.Helper()
	t := challenge.Task{Size: size}
	for i := range t.Seed {
		t.Seed[i] = byte(7*i + size)
	}
	return t
}

func TestUUIDString(t *testing.T) {
	var b [16]byte
	for i := range b {
		b[i] = byte(i)
	}
	b[15] = 0xaf
	if got, want := uuidString(b), "GPU-00010203-0405-0607-0809-0a0b0c0d0eaf"; got != want {
		t.Errorf("uuidString = %q, want %q", got, want)
	}
}

func TestCallError(t *testing.T) {
	for _, tc := range []struct {
		err  *callError
		want string
		oom  bool
	}{
		{&callError{call: "cuMemAlloc_v2", code: 2}, "cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (2)", true},
		{&callError{call: "cuInit", code: 100}, "cuInit: CUDA_ERROR_NO_DEVICE (100)", false},
		{&callError{call: "cuCtxSynchronize", code: 4242}, "cuCtxSynchronize: CUresult 4242", false},
		{&callError{call: "cublasSgemm_v2", code: 13, cublas: true}, "cublasSgemm_v2: CUBLAS_STATUS_EXECUTION_FAILED (13)", false},
		{&callError{call: "cublasCreate_v2", code: 2, cublas: true}, "cublasCreate_v2: cublasStatus 2", false},
	} {
		wrapped := fmt.Errorf("allocating A: %w", tc.err)
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
		if got := isOutOfMemory(wrapped); got != tc.oom {
			t.Errorf("isOutOfMemory(%v) = %v, want %v", wrapped, got, tc.oom)
		}
	}
}

// colMajorSgemm is cublasSgemm_v2 as BLAS defines it (no transposes, α = 1,
// β = 0): C[i + j·ldc] = Σ_l A[i + l·lda] · B[l + j·ldb], column-major.
func colMajorSgemm(g sgemmArgs, mats [3][]float32) {
	a, b, c := mats[g.a], mats[g.b], mats[g.c]
	for j := 0; j < g.n; j++ {
		for i := 0; i < g.m; i++ {
			var s float32
			for l := 0; l < g.k; l++ {
				s += a[i+l*g.lda] * b[l+j*g.ldb]
			}
			c[i+j*g.ldc] = s
		}
	}
}

// product computes t as the GPU would under call g: the operands filled
// as the runner uploads them, C read back and hashed as it downloads it.
func product(tb testing.TB, t challenge.Task, g sgemmArgs) ([]float32, []byte) {
	tb.Helper()
	n := t.Size
	var mats [3][]float32
	for i := range mats {
		mats[i] = make([]float32, n*n)
	}
	// Two chunks each, as the runner copies them.
	half := n / 2 * n
	fillRows(t, matA, 0, mats[matA][:half])
	fillRows(t, matA, n/2, mats[matA][half:])
	fillRows(t, matB, 0, mats[matB][:half])
	fillRows(t, matB, n/2, mats[matB][half:])
	colMajorSgemm(g, mats)
	row := make([]uint32, n)
	out, err := hashRows(t, 0, mats[matC][:half], row, nil)
	if err == nil {
		out, err = hashRows(t, n/2, mats[matC][half:], row, out)
	}
	if err != nil {
		tb.Fatal(err)
	}
	return mats[matC], out
}

func TestProductCall(t *testing.T) {
	task := mustTask(t, 64)
	c, hashes := product(t, task, productCall(task.Size))
	n := task.Size
	for i := 0; i < n; i++ {
		want := task.Row(i)
		for j := range want {
			if got := c[i*n+j]; got != float32(want[j]) {
				t.Fatalf("C[%d][%d] = %v, want %d", i, j, got, want[j])
			}
		}
	}
	cpu, _, err := challenge.Run(context.Background(), task)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(hashes, cpu) {
		t.Errorf("row hashes differ from challenge.Run's")
	}

	t.Run("operands swapped", func(t *testing.T) {
		g := productCall(task.Size)
		g.a, g.b = g.b, g.a // computes (B×A), not A×B
		if _, h := product(t, task, g); bytes.Equal(h, cpu) {
			t.Error("a product with its operands swapped hashed like A×B: the check cannot fail")
		}
	})
}

func TestFillRows(t *testing.T) {
	task := mustTask(t, 128)
	dst := make([]float32, 3*task.Size)
	for _, m := range []operand{matA, matB} {
		fillRows(task, m, 5, dst)
		for r := 0; r < 3; r++ {
			for j := 0; j < task.Size; j++ {
				want := task.A(5+r, j)
				if m == matB {
					want = task.B(5+r, j)
				}
				if got := dst[r*task.Size+j]; got != float32(want) {
					t.Fatalf("%s[%d][%d] = %v, want %d", m, 5+r, j, got, want)
				}
			}
		}
	}
}

func TestHashRows_Refuses(t *testing.T) {
	task := mustTask(t, 64)
	for _, bad := range []float32{0.5, -1, float32(math.NaN()), float32(math.Inf(1)), 1 << 24} {
		block := make([]float32, 2*task.Size)
		block[task.Size+3] = bad
		_, err := hashRows(task, 10, block, make([]uint32, task.Size), nil)
		if err == nil || !strings.Contains(err.Error(), "entry (11, 3)") {
			t.Errorf("hashRows with %v = %v, want an error naming entry (11, 3)", bad, err)
		}
	}
}

func TestChunkRows(t *testing.T) {
	for _, tc := range []struct{ n, want int }{{64, chunkBytes / 256}, {16384, 1024}, {challenge.MaxSize, 256}, {1 << 25, 1}} {
		if got := chunkRows(tc.n); got != tc.want {
			t.Errorf("chunkRows(%d) = %d, want %d", tc.n, got, tc.want)
		}
	}
}

// fakeMemory is a GPU's memory for grabMemory: free overstates what one
// allocation can take by reserve, and no allocation exceeds largest.
type fakeMemory struct {
	total, reserve, largest, used uint64
	live                          map[uintptr]uint64
	filled                        uint64
	next                          uintptr
	allocs                        int
	failAlloc, failFill           error
}

func newFakeMemory(totalMB, reserveMB, largestMB uint64) *fakeMemory {
	return &fakeMemory{total: totalMB << 20, reserve: reserveMB << 20, largest: largestMB << 20, live: map[uintptr]uint64{}}
}

func (m *fakeMemory) free() (uint64, error) { return m.total - m.used, nil }

func (m *fakeMemory) alloc(n uint64) (uintptr, error) {
	m.allocs++
	if m.failAlloc != nil {
		return 0, m.failAlloc
	}
	if m.used+n > m.total-m.reserve || n > m.largest {
		return 0, &callError{call: "cuMemAlloc_v2", code: cudaOutOfMemory}
	}
	m.next++
	m.live[m.next] = n
	m.used += n
	return m.next, nil
}

func (m *fakeMemory) fill(p uintptr, n uint64) error {
	if m.live[p] != n {
		return fmt.Errorf("fill of %d bytes at %d, which holds %d", n, p, m.live[p])
	}
	m.filled += n
	return m.failFill
}

func (m *fakeMemory) release(p uintptr) error {
	m.used -= m.live[p]
	delete(m.live, p)
	return nil
}

func TestGrabMemory(t *testing.T) {
	for _, tc := range []struct {
		name                        string
		totalMB, reserveMB, largest uint64
		minMB, maxMB                uint64
	}{
		{"all of it", 80 << 10, 0, 1 << 30, 80 << 10, 80 << 10},
		{"driver keeps some", 80 << 10, 600, 1 << 30, 80<<10 - 600 - 2600, 80<<10 - 600},
		{"fragmented", 24 << 10, 300, 8 << 10, 24<<10 - 300 - 512, 24<<10 - 300},
		{"nothing free", 32, 0, 1 << 30, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newFakeMemory(tc.totalMB, tc.reserveMB, tc.largest)
			held, err := grabMemory(m)
			if err != nil {
				t.Fatal(err)
			}
			if mb := held >> 20; mb < tc.minMB || mb > tc.maxMB {
				t.Errorf("held %d MB, want %d–%d MB", mb, tc.minMB, tc.maxMB)
			}
			if m.filled != held {
				t.Errorf("wrote %d bytes of the %d held", m.filled, held)
			}
			if len(m.live) != 0 || m.used != 0 {
				t.Errorf("%d allocations (%d bytes) left after the check", len(m.live), m.used)
			}
			if m.allocs > grabTries {
				t.Errorf("%d allocations tried, at most %d", m.allocs, grabTries)
			}
		})
	}
	t.Run("other errors end it", func(t *testing.T) {
		m := newFakeMemory(1024, 0, 1<<30)
		m.failAlloc = &callError{call: "cuMemAlloc_v2", code: 700}
		if _, err := grabMemory(m); err == nil || !strings.Contains(err.Error(), "CUDA_ERROR_ILLEGAL_ADDRESS") {
			t.Errorf("grabMemory = %v, want the allocation's error", err)
		}
		m = newFakeMemory(1024, 0, 1<<30)
		m.failFill = errors.New("cuMemsetD8_v2: CUDA_ERROR_LAUNCH_FAILED (719)")
		if _, err := grabMemory(m); err == nil || len(m.live) != 0 {
			t.Errorf("grabMemory = %v with %d allocations left, want the fill's error and none left", err, len(m.live))
		}
	})
}

// Open tries the library IDLEGRID_CUBLAS names, then each version as the
// loader finds it, then each in the toolkit's homes, once each.
func TestBLASCandidates(t *testing.T) {
	names := []string{"libcublas.so.13", "libcublas.so.12"}
	env := map[string]string{BLASEnv: " /opt/blas/libcublas.so.13 ", "CUDA_HOME": "/opt/cuda-13", "CUDA_PATH": "/usr/local/cuda"}
	got := blasCandidates(func(k string) string { return env[k] }, names)
	want := []string{"/opt/blas/libcublas.so.13", "libcublas.so.13", "libcublas.so.12",
		"/opt/cuda-13/lib64/libcublas.so.13", "/opt/cuda-13/lib64/libcublas.so.12",
		"/usr/local/cuda/lib64/libcublas.so.13", "/usr/local/cuda/lib64/libcublas.so.12"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("with the variables set:\n got %v\nwant %v", got, want)
	}
	got = blasCandidates(func(string) string { return "" }, names)
	want = []string{"libcublas.so.13", "libcublas.so.12", "/usr/local/cuda/lib64/libcublas.so.13", "/usr/local/cuda/lib64/libcublas.so.12"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("with none set:\n got %v\nwant %v", got, want)
	}
}
