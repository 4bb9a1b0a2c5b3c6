//go:build cgo

package cuda

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

// The few types of cuda.h and cublas_api.h used here; the libraries are
// loaded at run time, so their headers are not needed to build.
typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef unsigned long long CUdeviceptr;
typedef void *CUevent;
typedef void *CUstream;
typedef void *cublasHandle_t;
typedef int cublasStatus_t;

typedef struct {
	void *cuda, *blas;
	CUresult (*cuInit)(unsigned int);
	CUresult (*cuDeviceGetCount)(int *);
	CUresult (*cuDeviceGet)(CUdevice *, int);
	CUresult (*cuDeviceGetUuid)(unsigned char *, CUdevice);
	CUresult (*cuDeviceGetName)(char *, int, CUdevice);
	CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
	CUresult (*cuDevicePrimaryCtxRelease)(CUdevice);
	CUresult (*cuCtxSetCurrent)(CUcontext);
	CUresult (*cuCtxSynchronize)(void);
	CUresult (*cuMemGetInfo)(size_t *, size_t *);
	CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
	CUresult (*cuMemFree)(CUdeviceptr);
	CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void *, size_t);
	CUresult (*cuMemcpyDtoH)(void *, CUdeviceptr, size_t);
	CUresult (*cuMemsetD8)(CUdeviceptr, unsigned char, size_t);
	CUresult (*cuEventCreate)(CUevent *, unsigned int);
	CUresult (*cuEventRecord)(CUevent, CUstream);
	CUresult (*cuEventSynchronize)(CUevent);
	CUresult (*cuEventElapsedTime)(float *, CUevent, CUevent);
	CUresult (*cuEventDestroy)(CUevent);
	cublasStatus_t (*cublasCreate)(cublasHandle_t *);
	cublasStatus_t (*cublasDestroy)(cublasHandle_t);
	cublasStatus_t (*cublasSetMathMode)(cublasHandle_t, int);
	cublasStatus_t (*cublasSgemm)(cublasHandle_t, int, int, int, int, int, const float *,
		const float *, int, const float *, int, const float *, float *, int);
} ig_cuda;

// ig_sym finds the first of names (NULL-terminated) in lib; on failure it
// sets *missing to the first name.
static void *ig_sym(void *lib, const char **names, const char **missing) {
	for (const char **n = names; *n; n++) {
		void *p = dlsym(lib, *n);
		if (p) return p;
	}
	if (!*missing) *missing = names[0];
	return NULL;
}

#define IG_SYM(lib, field, ...) do { \
	const char *names_[] = {__VA_ARGS__, NULL}; \
	*(void **)(&c->field) = ig_sym(lib, names_, missing); \
} while (0)

// ig_bind resolves every function; *missing is left set to the first one
// that neither library has.
static void ig_bind(ig_cuda *c, const char **missing) {
	IG_SYM(c->cuda, cuInit, "cuInit");
	IG_SYM(c->cuda, cuDeviceGetCount, "cuDeviceGetCount");
	IG_SYM(c->cuda, cuDeviceGet, "cuDeviceGet");
	// The first version reports the physical GPU's UUID, as NVML does,
	// also under MIG; _v2 would report a MIG instance's.
	IG_SYM(c->cuda, cuDeviceGetUuid, "cuDeviceGetUuid", "cuDeviceGetUuid_v2");
	IG_SYM(c->cuda, cuDeviceGetName, "cuDeviceGetName");
	IG_SYM(c->cuda, cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
	IG_SYM(c->cuda, cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease");
	IG_SYM(c->cuda, cuCtxSetCurrent, "cuCtxSetCurrent");
	IG_SYM(c->cuda, cuCtxSynchronize, "cuCtxSynchronize");
	IG_SYM(c->cuda, cuMemGetInfo, "cuMemGetInfo_v2");
	IG_SYM(c->cuda, cuMemAlloc, "cuMemAlloc_v2");
	IG_SYM(c->cuda, cuMemFree, "cuMemFree_v2");
	IG_SYM(c->cuda, cuMemcpyHtoD, "cuMemcpyHtoD_v2");
	IG_SYM(c->cuda, cuMemcpyDtoH, "cuMemcpyDtoH_v2");
	IG_SYM(c->cuda, cuMemsetD8, "cuMemsetD8_v2");
	IG_SYM(c->cuda, cuEventCreate, "cuEventCreate");
	IG_SYM(c->cuda, cuEventRecord, "cuEventRecord");
	IG_SYM(c->cuda, cuEventSynchronize, "cuEventSynchronize");
	IG_SYM(c->cuda, cuEventElapsedTime, "cuEventElapsedTime");
	IG_SYM(c->cuda, cuEventDestroy, "cuEventDestroy_v2");
	IG_SYM(c->blas, cublasCreate, "cublasCreate_v2");
	IG_SYM(c->blas, cublasDestroy, "cublasDestroy_v2");
	IG_SYM(c->blas, cublasSetMathMode, "cublasSetMathMode");
	IG_SYM(c->blas, cublasSgemm, "cublasSgemm_v2");
}

static void *ig_dlopen(const char *name) { return dlopen(name, RTLD_NOW | RTLD_LOCAL); }
static int ig_dlclose(void *lib) { return dlclose(lib); }
static const char *ig_dlerror(void) { return dlerror(); }

// The calls, one shim each: cgo cannot call a function pointer itself.
static CUresult ig_init(ig_cuda *c) { return c->cuInit(0); }
static CUresult ig_count(ig_cuda *c, int *n) { return c->cuDeviceGetCount(n); }
static CUresult ig_device(ig_cuda *c, CUdevice *d, int i) { return c->cuDeviceGet(d, i); }
static CUresult ig_uuid(ig_cuda *c, unsigned char *u, CUdevice d) { return c->cuDeviceGetUuid(u, d); }
static CUresult ig_name(ig_cuda *c, char *s, int n, CUdevice d) { return c->cuDeviceGetName(s, n, d); }
static CUresult ig_retain(ig_cuda *c, CUcontext *x, CUdevice d) { return c->cuDevicePrimaryCtxRetain(x, d); }
static CUresult ig_release(ig_cuda *c, CUdevice d) { return c->cuDevicePrimaryCtxRelease(d); }
static CUresult ig_current(ig_cuda *c, CUcontext x) { return c->cuCtxSetCurrent(x); }
static CUresult ig_sync(ig_cuda *c) { return c->cuCtxSynchronize(); }
static CUresult ig_meminfo(ig_cuda *c, size_t *f, size_t *t) { return c->cuMemGetInfo(f, t); }
static CUresult ig_alloc(ig_cuda *c, CUdeviceptr *p, size_t n) { return c->cuMemAlloc(p, n); }
static CUresult ig_free(ig_cuda *c, CUdeviceptr p) { return c->cuMemFree(p); }
static CUresult ig_htod(ig_cuda *c, CUdeviceptr d, const void *h, size_t n) { return c->cuMemcpyHtoD(d, h, n); }
static CUresult ig_dtoh(ig_cuda *c, void *h, CUdeviceptr d, size_t n) { return c->cuMemcpyDtoH(h, d, n); }
static CUresult ig_memset(ig_cuda *c, CUdeviceptr d, unsigned char v, size_t n) { return c->cuMemsetD8(d, v, n); }
static CUresult ig_event(ig_cuda *c, CUevent *e) { return c->cuEventCreate(e, 0); }
static CUresult ig_record(ig_cuda *c, CUevent e) { return c->cuEventRecord(e, NULL); }
static CUresult ig_wait(ig_cuda *c, CUevent e) { return c->cuEventSynchronize(e); }
static CUresult ig_elapsed(ig_cuda *c, float *ms, CUevent a, CUevent b) { return c->cuEventElapsedTime(ms, a, b); }
static CUresult ig_event_destroy(ig_cuda *c, CUevent e) { return c->cuEventDestroy(e); }
static cublasStatus_t ig_blas_create(ig_cuda *c, cublasHandle_t *h) { return c->cublasCreate(h); }
static cublasStatus_t ig_blas_destroy(ig_cuda *c, cublasHandle_t h) { return c->cublasDestroy(h); }
static cublasStatus_t ig_blas_math(ig_cuda *c, cublasHandle_t h, int mode) { return c->cublasSetMathMode(h, mode); }
static cublasStatus_t ig_sgemm(ig_cuda *c, cublasHandle_t h, int m, int n, int k,
		CUdeviceptr a, int lda, CUdeviceptr b, int ldb, CUdeviceptr out, int ldc) {
	const float one = 1, zero = 0;
	// 0 is CUBLAS_OP_N: no transposes.
	return c->cublasSgemm(h, 0, 0, m, n, k, &one, (const float *)a, lda, (const float *)b, ldb, &zero, (float *)out, ldc);
}
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/idlegrid/idlegrid/internal/challenge"
)

// cublasPedanticMath is CUBLAS_PEDANTIC_MATH: plain FP32, never TF32
// tensor cores, which would run several times faster than the FP32 peak
// that the time band is drawn from and fail it as "faster than claimed".
const cublasPedanticMath = 2

// Runner runs challenges through the CUDA driver and cuBLAS. Make one with
// Open; it holds no GPU memory and no context between runs, and runs one
// challenge at a time.
type Runner struct {
	c    *C.ig_cuda
	blas string // the cuBLAS library loaded
	mu   sync.Mutex
}

// Open loads libcuda.so.1 and cuBLAS (BLASLibraries, where
// blasCandidates looks) and initialises the driver. Where either library
// is missing the error wraps ErrUnavailable and names it.
func Open() (*Runner, error) {
	return OpenLibraries(DriverLibrary, blasCandidates(os.Getenv, BLASLibraries)...)
}

// OpenLibraries is Open with the libraries named: the driver's, then the
// cuBLAS libraries to try in order (paths or names the loader searches).
func OpenLibraries(driver string, blas ...string) (*Runner, error) {
	cuda, err := dlopen(driver)
	if err != nil {
		return nil, fmt.Errorf("%w: %s not found (%v); install the NVIDIA driver", ErrUnavailable, driver, err)
	}
	var lib unsafe.Pointer
	var name string
	first := errors.New("no library named")
	for i, b := range blas {
		if lib, err = dlopen(b); err == nil {
			name = b
			break
		}
		if i == 0 {
			first = err
		}
	}
	if lib == nil {
		C.ig_dlclose(cuda)
		return nil, fmt.Errorf("%w: no cuBLAS library found (tried %s; the first: %s); install cuBLAS (the CUDA toolkit's libcublas, or pip's nvidia-cublas) where the loader finds it, or set %s to its path",
			ErrUnavailable, strings.Join(blas, ", "), first, BLASEnv)
	}
	c := (*C.ig_cuda)(C.calloc(1, C.size_t(unsafe.Sizeof(C.ig_cuda{}))))
	c.cuda, c.blas = cuda, lib
	var missing *C.char
	C.ig_bind(c, &missing)
	if missing != nil {
		fn := C.GoString(missing)
		C.ig_dlclose(cuda)
		C.ig_dlclose(lib)
		C.free(unsafe.Pointer(c))
		return nil, fmt.Errorf("%w: %s or %s has no %s: too old a driver or cuBLAS", ErrUnavailable, driver, name, fn)
	}
	r := &Runner{c: c, blas: name}
	if err := r.check("cuInit", C.ig_init(c)); err != nil {
		r.Close()
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return r, nil
}

func dlopen(name string) (unsafe.Pointer, error) {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	lib := C.ig_dlopen(cs)
	if lib == nil {
		return nil, fmt.Errorf("%s", C.GoString(C.ig_dlerror()))
	}
	return lib, nil
}

// Close unloads the libraries. The Runner must not be used afterwards.
func (r *Runner) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.c == nil {
		return nil
	}
	C.ig_dlclose(r.c.blas)
	C.ig_dlclose(r.c.cuda)
	C.free(unsafe.Pointer(r.c))
	r.c = nil
	return nil
}

// BLAS is the cuBLAS library loaded, e.g. "libcublas.so.12".
func (r *Runner) BLAS() string { return r.blas }

func (r *Runner) check(call string, code C.CUresult) error {
	if code != 0 {
		return &callError{call: call, code: int(code)}
	}
	return nil
}

func (r *Runner) checkBLAS(call string, code C.cublasStatus_t) error {
	if code != 0 {
		return &callError{call: call, code: int(code), cublas: true}
	}
	return nil
}

// Devices lists the UUIDs of the CUDA devices this process sees, in the
// driver's order, as NVML names them.
func (r *Runner) Devices() ([]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.c == nil {
		return nil, fmt.Errorf("%w: the runner is closed", ErrUnavailable)
	}
	var n C.int
	if err := r.check("cuDeviceGetCount", C.ig_count(r.c, &n)); err != nil {
		return nil, err
	}
	out := make([]string, 0, int(n))
	for i := 0; i < int(n); i++ {
		var d C.CUdevice
		if err := r.check("cuDeviceGet", C.ig_device(r.c, &d, C.int(i))); err != nil {
			return nil, err
		}
		var u [16]byte
		if err := r.check("cuDeviceGetUuid", C.ig_uuid(r.c, (*C.uchar)(unsafe.Pointer(&u[0])), d)); err != nil {
			return nil, err
		}
		out = append(out, uuidString(u))
	}
	return out, nil
}

// device finds the CUDA device whose UUID is uuid (NVML's "GPU-…" form).
func (r *Runner) device(uuid string) (C.CUdevice, error) {
	var n C.int
	if err := r.check("cuDeviceGetCount", C.ig_count(r.c, &n)); err != nil {
		return 0, err
	}
	found, matches := C.CUdevice(0), 0
	for i := 0; i < int(n); i++ {
		var d C.CUdevice
		if err := r.check("cuDeviceGet", C.ig_device(r.c, &d, C.int(i))); err != nil {
			return 0, err
		}
		var u [16]byte
		if err := r.check("cuDeviceGetUuid", C.ig_uuid(r.c, (*C.uchar)(unsafe.Pointer(&u[0])), d)); err != nil {
			return 0, err
		}
		if strings.EqualFold(uuidString(u), uuid) {
			found, matches = d, matches+1
		}
	}
	switch {
	case matches == 0:
		return 0, fmt.Errorf("no CUDA device has UUID %s among the %d this process sees (CUDA_VISIBLE_DEVICES?)", uuid, int(n))
	case matches > 1:
		// MIG: each instance reports its GPU's UUID and holds a share of it.
		return 0, fmt.Errorf("GPU %s shows as %d CUDA devices (MIG instances?); the challenge needs the whole GPU", uuid, matches)
	}
	return found, nil
}

// Run computes the challenge t on the GPU with uuid and checks its memory
// (see Result). It takes the GPU's primary context for the run and
// releases it, with all it allocated, before it returns. Every failed
// call is an error naming the call and its code. ctx is checked between
// steps: a running SGEMM is not interrupted.
func (r *Runner) Run(ctx context.Context, uuid string, t challenge.Task) (*Result, error) {
	if t.Size < challenge.MinSize || t.Size > challenge.MaxSize {
		return nil, fmt.Errorf("challenge size %d out of range", t.Size)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.c == nil {
		return nil, fmt.Errorf("%w: the runner is closed", ErrUnavailable)
	}
	// A CUDA context is current per OS thread: the whole run stays on one.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	dev, err := r.device(uuid)
	if err != nil {
		return nil, err
	}
	var ctxh C.CUcontext
	if err := r.check("cuDevicePrimaryCtxRetain", C.ig_retain(r.c, &ctxh, dev)); err != nil {
		return nil, err
	}
	defer C.ig_release(r.c, dev)
	if err := r.check("cuCtxSetCurrent", C.ig_current(r.c, ctxh)); err != nil {
		return nil, err
	}
	defer C.ig_current(r.c, nil)
	res := &Result{Device: r.deviceName(dev)}
	job := &run{r: r, t: t}
	defer job.free()
	if err := job.do(ctx, res); err != nil {
		return nil, err
	}
	return res, nil
}

func (r *Runner) deviceName(dev C.CUdevice) string {
	var buf [256]C.char
	if C.ig_name(r.c, &buf[0], C.int(len(buf)), dev) != 0 {
		return ""
	}
	return C.GoString(&buf[0])
}

// run is one challenge on the current context: its device buffers, freed
// by free.
type run struct {
	r    *Runner
	t    challenge.Task
	mats [3]C.CUdeviceptr // A, B, C
}

const mib = 1 << 20

func (x *run) do(ctx context.Context, res *Result) error {
	r, n := x.r, x.t.Size
	var free, total C.size_t
	if err := r.check("cuMemGetInfo_v2", C.ig_meminfo(r.c, &free, &total)); err != nil {
		return err
	}
	res.TotalMB, res.FreeMBAtRun = int(total/mib), int(free/mib)
	matBytes := uint64(n) * uint64(n) * 4
	for i := range x.mats {
		if err := r.check("cuMemAlloc_v2", C.ig_alloc(r.c, &x.mats[i], C.size_t(matBytes))); err != nil {
			return fmt.Errorf("allocating %s (%d MB): %w", operand(i), matBytes/mib, err)
		}
	}
	if err := x.upload(ctx, matA); err != nil {
		return err
	}
	if err := x.upload(ctx, matB); err != nil {
		return err
	}
	elapsed, err := x.product(ctx)
	if err != nil {
		return err
	}
	res.Elapsed = elapsed
	if res.RowHashes, err = x.download(ctx); err != nil {
		return err
	}
	held, err := grabMemory(&cudaMemory{r: r})
	if err != nil {
		return fmt.Errorf("memory check: %w", err)
	}
	res.VRAMMB = int((3*matBytes + held) / mib)
	return nil
}

// upload generates matrix m on the host, a chunk of rows at a time, and
// copies it to the device.
func (x *run) upload(ctx context.Context, m operand) error {
	n := x.t.Size
	rows := chunkRows(n)
	buf := make([]float32, rows*n)
	for row0 := 0; row0 < n; row0 += rows {
		if err := ctx.Err(); err != nil {
			return err
		}
		block := buf[:min(rows, n-row0)*n]
		fillRows(x.t, m, row0, block)
		dst := x.mats[m] + C.CUdeviceptr(uint64(row0)*uint64(n)*4)
		err := x.r.check("cuMemcpyHtoD_v2", C.ig_htod(x.r.c, dst, unsafe.Pointer(&block[0]), C.size_t(4*len(block))))
		if err != nil {
			return fmt.Errorf("copying %s to the GPU: %w", m, err)
		}
	}
	return nil
}

// product runs one untimed SGEMM, so that cuBLAS has loaded its kernels,
// then times one with events on the default stream.
func (x *run) product(ctx context.Context) (time.Duration, error) {
	r := x.r
	var h C.cublasHandle_t
	if err := r.checkBLAS("cublasCreate_v2", C.ig_blas_create(r.c, &h)); err != nil {
		return 0, err
	}
	defer C.ig_blas_destroy(r.c, h)
	if err := r.checkBLAS("cublasSetMathMode", C.ig_blas_math(r.c, h, cublasPedanticMath)); err != nil {
		return 0, err
	}
	g := productCall(x.t.Size)
	sgemm := func() error {
		return r.checkBLAS("cublasSgemm_v2", C.ig_sgemm(r.c, h, C.int(g.m), C.int(g.n), C.int(g.k),
			x.mats[g.a], C.int(g.lda), x.mats[g.b], C.int(g.ldb), x.mats[g.c], C.int(g.ldc)))
	}
	if err := sgemm(); err != nil {
		return 0, fmt.Errorf("warm-up: %w", err)
	}
	if err := r.check("cuCtxSynchronize", C.ig_sync(r.c)); err != nil {
		return 0, fmt.Errorf("warm-up: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	var start, stop C.CUevent
	if err := r.check("cuEventCreate", C.ig_event(r.c, &start)); err != nil {
		return 0, err
	}
	defer C.ig_event_destroy(r.c, start)
	if err := r.check("cuEventCreate", C.ig_event(r.c, &stop)); err != nil {
		return 0, err
	}
	defer C.ig_event_destroy(r.c, stop)
	if err := r.check("cuEventRecord", C.ig_record(r.c, start)); err != nil {
		return 0, err
	}
	if err := sgemm(); err != nil {
		return 0, err
	}
	if err := r.check("cuEventRecord", C.ig_record(r.c, stop)); err != nil {
		return 0, err
	}
	if err := r.check("cuEventSynchronize", C.ig_wait(r.c, stop)); err != nil {
		return 0, err
	}
	var ms C.float
	if err := r.check("cuEventElapsedTime", C.ig_elapsed(r.c, &ms, start, stop)); err != nil {
		return 0, err
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}

// download copies C back a chunk of rows at a time and hashes its rows.
func (x *run) download(ctx context.Context) ([]byte, error) {
	n := x.t.Size
	rows := chunkRows(n)
	buf := make([]float32, rows*n)
	row := make([]uint32, n)
	out := make([]byte, 0, 32*n)
	for row0 := 0; row0 < n; row0 += rows {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		block := buf[:min(rows, n-row0)*n]
		src := x.mats[matC] + C.CUdeviceptr(uint64(row0)*uint64(n)*4)
		if err := x.r.check("cuMemcpyDtoH_v2", C.ig_dtoh(x.r.c, unsafe.Pointer(&block[0]), src, C.size_t(4*len(block)))); err != nil {
			return nil, fmt.Errorf("copying C from the GPU: %w", err)
		}
		var err error
		if out, err = hashRows(x.t, row0, block, row, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (x *run) free() {
	for i, p := range x.mats {
		if p != 0 {
			C.ig_free(x.r.c, p)
			x.mats[i] = 0
		}
	}
}

// cudaMemory is the current context's memory, for grabMemory.
type cudaMemory struct{ r *Runner }

func (m *cudaMemory) free() (uint64, error) {
	var free, total C.size_t
	err := m.r.check("cuMemGetInfo_v2", C.ig_meminfo(m.r.c, &free, &total))
	return uint64(free), err
}

func (m *cudaMemory) alloc(bytes uint64) (uintptr, error) {
	var p C.CUdeviceptr
	if err := m.r.check("cuMemAlloc_v2", C.ig_alloc(m.r.c, &p, C.size_t(bytes))); err != nil {
		return 0, err
	}
	return uintptr(p), nil
}

// fill writes every byte and waits for it, so that the memory is backed
// and a failure shows here rather than later.
func (m *cudaMemory) fill(p uintptr, bytes uint64) error {
	if err := m.r.check("cuMemsetD8_v2", C.ig_memset(m.r.c, C.CUdeviceptr(p), 0xa5, C.size_t(bytes))); err != nil {
		return err
	}
	return m.r.check("cuCtxSynchronize", C.ig_sync(m.r.c))
}

func (m *cudaMemory) release(p uintptr) error {
	return m.r.check("cuMemFree_v2", C.ig_free(m.r.c, C.CUdeviceptr(p)))
}
