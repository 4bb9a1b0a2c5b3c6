// A fake of cuBLAS's SGEMM for internal/gpu/cuda's tests: the BLAS
// definition, column-major, computed naively on the CPU from "device"
// pointers that are host addresses (testdata/fakecuda.c). Configured by
// the environment:
//
//   FAKECUBLAS_FAIL     a function name: it returns CUBLAS_STATUS_EXECUTION_FAILED
//   FAKECUBLAS_CORRUPT  1: add 1 to the first element of every result
//
// It refuses any math mode but CUBLAS_DEFAULT_MATH (0) and
// CUBLAS_PEDANTIC_MATH (2), which compute in plain FP32.
#include <stdlib.h>
#include <string.h>

typedef int cublasStatus_t;
enum { OK = 0, NOT_INITIALIZED = 1, INVALID_VALUE = 7, EXECUTION_FAILED = 13, NOT_SUPPORTED = 15 };
enum { OP_N = 0, OP_T = 1 };

typedef struct { int mode; int live; } handle;

static int fails(const char *fn) {
	const char *f = getenv("FAKECUBLAS_FAIL");
	return f && strcmp(f, fn) == 0;
}

cublasStatus_t cublasCreate_v2(handle **h) {
	if (fails("cublasCreate_v2")) return NOT_INITIALIZED;
	*h = calloc(1, sizeof(handle));
	(*h)->live = 1;
	return OK;
}

cublasStatus_t cublasDestroy_v2(handle *h) {
	if (!h || !h->live) return NOT_INITIALIZED;
	h->live = 0;
	free(h);
	return OK;
}

cublasStatus_t cublasSetMathMode(handle *h, int mode) {
	if (!h || !h->live) return NOT_INITIALIZED;
	h->mode = mode;
	return OK;
}

// op(X)[r, c] of a column-major matrix with leading dimension ld.
static float at(const float *x, int trans, int ld, int r, int c) {
	return trans == OP_N ? x[r + (size_t)c * ld] : x[c + (size_t)r * ld];
}

cublasStatus_t cublasSgemm_v2(handle *h, int ta, int tb, int m, int n, int k, const float *alpha,
		const float *A, int lda, const float *B, int ldb, const float *beta, float *C, int ldc) {
	if (!h || !h->live) return NOT_INITIALIZED;
	if (h->mode != 0 && h->mode != 2) return NOT_SUPPORTED;
	if (m < 0 || n < 0 || k < 0 || lda < (ta == OP_N ? m : k) || ldb < (tb == OP_N ? k : n) || ldc < m)
		return INVALID_VALUE;
	if (fails("cublasSgemm_v2")) return EXECUTION_FAILED;
	for (int j = 0; j < n; j++)
		for (int i = 0; i < m; i++) {
			float s = 0;
			for (int l = 0; l < k; l++) s += at(A, ta, lda, i, l) * at(B, tb, ldb, l, j);
			float *c = &C[i + (size_t)j * ldc];
			*c = *alpha * s + (*beta == 0 ? 0 : *beta * *c);
		}
	if (m > 0 && n > 0 && getenv("FAKECUBLAS_CORRUPT") && strcmp(getenv("FAKECUBLAS_CORRUPT"), "1") == 0) C[0] += 1;
	return OK;
}
