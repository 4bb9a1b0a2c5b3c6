// A fake of the few CUDA driver API calls internal/gpu/cuda makes, on the
// CPU, for its tests on machines without a GPU. "Device" memory is host
// memory; a device pointer is its address. Configured by the environment,
// read at each call:
//
//   FAKECUDA_UUIDS      comma-separated devices, 32 hex digits each
//   FAKECUDA_MEM_MB     each device's memory (default 256)
//   FAKECUDA_RESERVE_MB what cuMemGetInfo counts as free but no allocation
//                       gets (default 40), as a real driver keeps some
//   FAKECUDA_FAIL       a function name: it returns CUDA_ERROR_LAUNCH_FAILED
//                       (cuInit returns CUDA_ERROR_NO_DEVICE)
//
// It checks what the real driver would refuse: memory calls without a
// current context on the calling thread, and (stricter than the real one)
// a primary context retained twice, so that a run that does not release
// its context fails the next.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
enum { OK = 0, INVALID_VALUE = 1, OUT_OF_MEMORY = 2, NO_DEVICE = 100, INVALID_DEVICE = 101,
	INVALID_CONTEXT = 201, LAUNCH_FAILED = 719 };

#define MAXDEV 8
static int retained[MAXDEV];
static size_t allocated[MAXDEV];
static __thread int current = -1; // the device whose context is current here, or -1

static int fails(const char *fn) {
	const char *f = getenv("FAKECUDA_FAIL");
	return f && strcmp(f, fn) == 0;
}

static size_t env_mb(const char *name, size_t def) {
	const char *v = getenv(name);
	return (v ? (size_t)strtoull(v, NULL, 10) : def) << 20;
}

static int ndevices(void) {
	const char *u = getenv("FAKECUDA_UUIDS");
	if (!u || !*u) return 0;
	int n = 1;
	for (; *u; u++) n += *u == ',';
	return n > MAXDEV ? MAXDEV : n;
}

CUresult cuInit(unsigned flags) { return fails("cuInit") ? NO_DEVICE : (flags ? INVALID_VALUE : OK); }

CUresult cuDeviceGetCount(int *n) { *n = ndevices(); return fails("cuDeviceGetCount") ? LAUNCH_FAILED : OK; }

CUresult cuDeviceGet(int *d, int i) {
	if (i < 0 || i >= ndevices()) return INVALID_DEVICE;
	*d = i;
	return OK;
}

static int hexval(char c) {
	if (c >= '0' && c <= '9') return c - '0';
	if (c >= 'a' && c <= 'f') return c - 'a' + 10;
	if (c >= 'A' && c <= 'F') return c - 'A' + 10;
	return 0;
}

CUresult cuDeviceGetUuid(unsigned char *out, int d) {
	if (d < 0 || d >= ndevices()) return INVALID_DEVICE;
	const char *u = getenv("FAKECUDA_UUIDS");
	for (int i = 0; i < d; i++) u = strchr(u, ',') + 1;
	for (int i = 0; i < 16; i++) out[i] = (unsigned char)(hexval(u[2 * i]) << 4 | hexval(u[2 * i + 1]));
	return OK;
}

CUresult cuDeviceGetName(char *s, int n, int d) {
	if (d < 0 || d >= ndevices()) return INVALID_DEVICE;
	strncpy(s, "Fake CUDA Device", (size_t)n);
	s[n - 1] = 0;
	return OK;
}

CUresult cuDevicePrimaryCtxRetain(void **ctx, int d) {
	if (d < 0 || d >= ndevices()) return INVALID_DEVICE;
	if (retained[d]) return INVALID_CONTEXT; // the last run did not release it
	retained[d] = 1;
	*ctx = &retained[d];
	return OK;
}

CUresult cuDevicePrimaryCtxRelease_v2(int d) {
	if (d < 0 || d >= ndevices() || !retained[d]) return INVALID_CONTEXT;
	retained[d] = 0;
	return OK;
}

CUresult cuCtxSetCurrent(void *ctx) {
	if (!ctx) { current = -1; return OK; }
	current = (int)((int *)ctx - retained);
	return OK;
}

CUresult cuCtxSynchronize(void) { return current < 0 ? INVALID_CONTEXT : fails("cuCtxSynchronize") ? LAUNCH_FAILED : OK; }

CUresult cuMemGetInfo_v2(size_t *free, size_t *total) {
	if (current < 0) return INVALID_CONTEXT;
	*total = env_mb("FAKECUDA_MEM_MB", 256);
	*free = *total - allocated[current];
	return OK;
}

// Each block remembers its size just before the address handed out.
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
	if (current < 0) return INVALID_CONTEXT;
	if (fails("cuMemAlloc_v2")) return LAUNCH_FAILED;
	size_t usable = env_mb("FAKECUDA_MEM_MB", 256) - env_mb("FAKECUDA_RESERVE_MB", 40);
	if (n == 0) return INVALID_VALUE;
	if (allocated[current] + n > usable) return OUT_OF_MEMORY;
	size_t *b = malloc(n + 16);
	if (!b) return OUT_OF_MEMORY;
	b[0] = n;
	allocated[current] += n;
	*p = (CUdeviceptr)(uintptr_t)((char *)b + 16);
	return OK;
}

CUresult cuMemFree_v2(CUdeviceptr p) {
	if (current < 0) return INVALID_CONTEXT;
	size_t *b = (size_t *)((char *)(uintptr_t)p - 16);
	allocated[current] -= b[0];
	free(b);
	return OK;
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *h, size_t n) {
	if (current < 0) return INVALID_CONTEXT;
	if (fails("cuMemcpyHtoD_v2")) return LAUNCH_FAILED;
	memcpy((void *)(uintptr_t)d, h, n);
	return OK;
}

CUresult cuMemcpyDtoH_v2(void *h, CUdeviceptr d, size_t n) {
	if (current < 0) return INVALID_CONTEXT;
	memcpy(h, (void *)(uintptr_t)d, n);
	return OK;
}

CUresult cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n) {
	if (current < 0) return INVALID_CONTEXT;
	if (fails("cuMemsetD8_v2")) return LAUNCH_FAILED;
	memset((void *)(uintptr_t)d, v, n);
	return OK;
}

typedef struct { struct timespec at; int recorded; } event;

CUresult cuEventCreate(void **e, unsigned flags) {
	if (current < 0) return INVALID_CONTEXT;
	*e = calloc(1, sizeof(event));
	return OK;
}

CUresult cuEventRecord(void *e, void *stream) {
	clock_gettime(CLOCK_MONOTONIC, &((event *)e)->at);
	((event *)e)->recorded = 1;
	return OK;
}

CUresult cuEventSynchronize(void *e) { return ((event *)e)->recorded ? OK : INVALID_VALUE; }

CUresult cuEventElapsedTime(float *ms, void *a, void *b) {
	event *x = a, *y = b;
	if (!x->recorded || !y->recorded) return INVALID_VALUE;
	*ms = (float)((y->at.tv_sec - x->at.tv_sec) * 1e3 + (y->at.tv_nsec - x->at.tv_nsec) / 1e6);
	return OK;
}

CUresult cuEventDestroy_v2(void *e) { free(e); return OK; }
