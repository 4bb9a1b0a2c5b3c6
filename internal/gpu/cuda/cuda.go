// Package cuda runs the hardware challenge workload (internal/challenge,
// docs/trust.md) on a real NVIDIA GPU: the product C = A×B as one FP32
// SGEMM through cuBLAS, timed with CUDA events, then as much of the GPU's
// memory as it can allocate and write.
//
// It loads the driver's libcuda.so.1 and cuBLAS (libcublas.so.13, .12 or
// .11, found as blasCandidates says) with dlopen when Open is called, so a binary built with it needs
// neither at link time and still starts on a machine without CUDA; there
// Open fails with an error that wraps ErrUnavailable, as it does in a
// build without cgo. No kernel is written here: cuBLAS does the work, and
// the operands are generated on the host in Go from the challenge's seed,
// the same entries the coordinator uses.
//
// This file holds the parts that need no GPU (operand layout, result
// conversion, error names, UUIDs, the memory back-off policy), so that
// they are tested on any machine; cuda_cgo.go makes the calls.
package cuda

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid/internal/challenge"
)

// ErrUnavailable is wrapped by every error that means this machine cannot
// run the workload at all: no cgo, no driver library, no cuBLAS.
var ErrUnavailable = errors.New("CUDA challenge runner unavailable")

// Result is one challenge run on one GPU.
type Result struct {
	// RowHashes are challenge.Task.RowHash of every row of C, in order.
	RowHashes []byte
	// Elapsed is the time of one SGEMM (after an untimed warm-up), as CUDA
	// events on the GPU measured it.
	Elapsed time.Duration
	// VRAMMB is the memory the workload held at its peak: the product's
	// three matrices and the largest further allocation it could write.
	VRAMMB int
	// What the driver said of the GPU before the run.
	Device      string // the CUDA device's name
	TotalMB     int    // cuMemGetInfo: the GPU's memory
	FreeMBAtRun int    // cuMemGetInfo: free before the product was allocated
}

// Library names, tried in order.
const (
	DriverLibrary = "libcuda.so.1"
)

// BLASLibraries are the cuBLAS versions tried, newest first.
var BLASLibraries = []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so.11"}

// BLASEnv names a cuBLAS library to load before any other, as a path or
// a name the loader searches.
const BLASEnv = "IDLEGRID_CUBLAS"

// cudaHomes are where the CUDA toolkit is commonly installed; its
// libraries are often not on the loader's path.
var cudaHomes = []string{"/usr/local/cuda"}

// blasCandidates is what Open tries to load, in order: the library named
// by BLASEnv, then each of names as the loader finds it, then each under
// the toolkit's lib64 in $CUDA_HOME, $CUDA_PATH and cudaHomes.
func blasCandidates(getenv func(string) string, names []string) []string {
	var out []string
	if v := strings.TrimSpace(getenv(BLASEnv)); v != "" {
		out = append(out, v)
	}
	out = append(out, names...)
	homes := append([]string{getenv("CUDA_HOME"), getenv("CUDA_PATH")}, cudaHomes...)
	seen := map[string]bool{}
	for _, h := range homes {
		if h == "" || seen[h] {
			continue
		}
		seen[h] = true
		for _, n := range names {
			out = append(out, filepath.Join(h, "lib64", n))
		}
	}
	return out
}

// callError is a CUDA driver or cuBLAS call that did not succeed.
type callError struct {
	call   string // e.g. "cuMemAlloc_v2"
	code   int
	cublas bool // code is a cublasStatus_t, else a CUresult
}

func (e *callError) Error() string {
	if e.cublas {
		return e.call + ": " + blasStatusName(e.code)
	}
	return e.call + ": " + resultName(e.code)
}

// cudaOutOfMemory is CUDA_ERROR_OUT_OF_MEMORY.
const cudaOutOfMemory = 2

func isOutOfMemory(err error) bool {
	var ce *callError
	return errors.As(err, &ce) && !ce.cublas && ce.code == cudaOutOfMemory
}

// resultNames are the CUresult values (cuda.h) a run is likely to meet.
var resultNames = map[int]string{
	0: "CUDA_SUCCESS", 1: "CUDA_ERROR_INVALID_VALUE", 2: "CUDA_ERROR_OUT_OF_MEMORY",
	3: "CUDA_ERROR_NOT_INITIALIZED", 4: "CUDA_ERROR_DEINITIALIZED", 34: "CUDA_ERROR_STUB_LIBRARY",
	46: "CUDA_ERROR_DEVICE_UNAVAILABLE", 100: "CUDA_ERROR_NO_DEVICE", 101: "CUDA_ERROR_INVALID_DEVICE",
	200: "CUDA_ERROR_INVALID_IMAGE", 201: "CUDA_ERROR_INVALID_CONTEXT", 214: "CUDA_ERROR_ECC_UNCORRECTABLE",
	400: "CUDA_ERROR_INVALID_HANDLE", 500: "CUDA_ERROR_NOT_FOUND", 600: "CUDA_ERROR_NOT_READY",
	700: "CUDA_ERROR_ILLEGAL_ADDRESS", 702: "CUDA_ERROR_LAUNCH_TIMEOUT", 719: "CUDA_ERROR_LAUNCH_FAILED",
	800: "CUDA_ERROR_NOT_PERMITTED", 801: "CUDA_ERROR_NOT_SUPPORTED", 802: "CUDA_ERROR_SYSTEM_NOT_READY",
	803: "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", 804: "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
	999: "CUDA_ERROR_UNKNOWN",
}

func resultName(code int) string {
	if n, ok := resultNames[code]; ok {
		return fmt.Sprintf("%s (%d)", n, code)
	}
	return fmt.Sprintf("CUresult %d", code)
}

// blasStatusNames are the cublasStatus_t values (cublas_api.h).
var blasStatusNames = map[int]string{
	0: "CUBLAS_STATUS_SUCCESS", 1: "CUBLAS_STATUS_NOT_INITIALIZED", 3: "CUBLAS_STATUS_ALLOC_FAILED",
	7: "CUBLAS_STATUS_INVALID_VALUE", 8: "CUBLAS_STATUS_ARCH_MISMATCH", 11: "CUBLAS_STATUS_MAPPING_ERROR",
	13: "CUBLAS_STATUS_EXECUTION_FAILED", 14: "CUBLAS_STATUS_INTERNAL_ERROR", 15: "CUBLAS_STATUS_NOT_SUPPORTED",
	16: "CUBLAS_STATUS_LICENSE_ERROR",
}

func blasStatusName(code int) string {
	if n, ok := blasStatusNames[code]; ok {
		return fmt.Sprintf("%s (%d)", n, code)
	}
	return fmt.Sprintf("cublasStatus %d", code)
}

// uuidString writes a CUDA device's 16-byte UUID as NVML names the GPU:
// "GPU-" and the bytes in hex, grouped 8-4-4-4-12.
func uuidString(b [16]byte) string {
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// operand names a matrix on the device.
type operand int

const (
	matA operand = iota
	matB
	matC
)

func (o operand) String() string { return [...]string{"A", "B", "C"}[o] }

// sgemmArgs are the arguments of cublasSgemm_v2 (no transposes, α = 1,
// β = 0), with operands named rather than as device pointers.
type sgemmArgs struct {
	m, n, k       int
	a, b, c       operand
	lda, ldb, ldc int
}

// productCall is the SGEMM that leaves the row-major product C = A×B of
// row-major n×n A and B in C. cuBLAS reads memory column-major, where a
// row-major matrix reads as its transpose: it computes Cᵀ = Bᵀ·Aᵀ, which
// is C row-major, so B goes first.
func productCall(n int) sgemmArgs {
	return sgemmArgs{m: n, n: n, k: n, a: matB, b: matA, c: matC, lda: n, ldb: n, ldc: n}
}

// fillRows writes rows row0… of the task's matrix m (A or B), row-major,
// into dst as float32; len(dst) must be a multiple of the size. The
// entries (0–15) are exact in float32.
func fillRows(t challenge.Task, m operand, row0 int, dst []float32) {
	entry := t.A
	if m == matB {
		entry = t.B
	}
	n := t.Size
	for r := 0; r < len(dst)/n; r++ {
		row := dst[r*n : (r+1)*n]
		for j := range row {
			row[j] = float32(entry(row0+r, j))
		}
	}
}

// maxExact is 2^24: every integer below it is exact in float32, and every
// entry of C is below it (challenge.MaxSize).
const maxExact = 1 << 24

// hashRows converts rows row0… of C, as the GPU returned them, to the
// integers they must be and appends their row hashes to out. An entry
// that is not such an integer means the product went wrong: an error, not
// a hash of it.
func hashRows(t challenge.Task, row0 int, block []float32, row []uint32, out []byte) ([]byte, error) {
	n := t.Size
	for r := 0; r < len(block)/n; r++ {
		for j, v := range block[r*n : (r+1)*n] {
			if !(v >= 0 && v < maxExact) || v != float32(math.Trunc(float64(v))) {
				return out, fmt.Errorf("entry (%d, %d) of the product is %v, not an integer in [0, 2^24)", row0+r, j, v)
			}
			row[j] = uint32(v)
		}
		h := t.RowHash(row0+r, row)
		out = append(out, h[:]...)
	}
	return out, nil
}

// chunkBytes bounds the host buffer the operands and the result pass
// through, so that the agent's memory stays small whatever N is.
var chunkBytes = 64 << 20 // a variable so that tests cross chunk boundaries

// chunkRows is how many rows of an n×n float32 matrix fit in chunkBytes
// (at least one).
func chunkRows(n int) int { return max(1, chunkBytes/(4*n)) }

// The memory check's back-off (grabMemory).
const (
	grabAlign   = 2 << 20  // allocations are rounded down to this
	grabMin     = 64 << 20 // free memory under this is not worth another allocation
	grabTries   = 64       // allocations tried, in all
	grabBackoff = 32       // each failed try asks for 1/grabBackoff less (at least grabMin)
)

// deviceMemory is what grabMemory needs of a GPU; cuda_cgo.go implements
// it with cuMemGetInfo_v2, cuMemAlloc_v2, cuMemsetD8_v2 and cuMemFree_v2.
type deviceMemory interface {
	free() (uint64, error)
	alloc(bytes uint64) (uintptr, error)
	fill(ptr uintptr, bytes uint64) error // write every byte, so the pages are real
	release(ptr uintptr) error
}

// grabMemory allocates as much of the GPU's memory as it can, writes all
// of it, frees it again and returns how many bytes it held. The driver
// reports more free memory than one allocation can take (it keeps some,
// and memory fragments), so a request that runs out of memory is retried
// smaller, and what is still free afterwards is taken by further
// allocations. Errors other than running out of memory end the check.
func grabMemory(m deviceMemory) (held uint64, err error) {
	var ptrs []uintptr
	defer func() {
		for _, p := range ptrs {
			if rerr := m.release(p); rerr != nil && err == nil {
				err = rerr
			}
		}
	}()
	tries := 0
	for tries < grabTries {
		free, err := m.free()
		if err != nil {
			return held, err
		}
		size := free / grabAlign * grabAlign
		got := false
		for size >= grabMin && tries < grabTries {
			tries++
			p, err := m.alloc(size)
			if isOutOfMemory(err) {
				size -= max(size/grabBackoff, grabMin)
				size = size / grabAlign * grabAlign
				continue
			} else if err != nil {
				return held, err
			}
			ptrs = append(ptrs, p)
			if err := m.fill(p, size); err != nil {
				return held, err
			}
			held += size
			got = true
			break
		}
		if !got {
			return held, nil
		}
	}
	return held, nil
}
