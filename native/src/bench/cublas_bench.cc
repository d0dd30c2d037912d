#include "bench/cublas_bench.h"

#include <dlfcn.h>

#include <stdexcept>

#include "bench/clock.h"
#include "bench/cuda_driver.h"

namespace fulcrum {
namespace bench {
namespace {

// The cuBLAS v2 C API as documented (cublas_api.h); enums as their integer values.
using CublasHandle = struct CublasContextOpaque*;
using CublasStatus = int;
constexpr int kOpN = 0, kOpT = 1;       // cublasOperation_t
constexpr int kR16F = 2;                // cudaDataType CUDA_R_16F
constexpr int kCompute32F = 68;         // cublasComputeType_t CUBLAS_COMPUTE_32F
constexpr int kGemmDefault = -1;        // cublasGemmAlgo_t CUBLAS_GEMM_DEFAULT

struct Cublas {
  std::string name;
  CublasStatus (*create)(CublasHandle*) = nullptr;
  CublasStatus (*destroy)(CublasHandle) = nullptr;
  CublasStatus (*gemm_ex)(CublasHandle, int, int, int, int, int, const void*, const void*, int, int, const void*, int, int,
                          const void*, void*, int, int, int, int) = nullptr;
  CublasStatus (*gemm_strided_batched_ex)(CublasHandle, int, int, int, int, int, const void*, const void*, int, int,
                                          long long, const void*, int, int, long long, const void*, void*, int, int,
                                          long long, int, int, int) = nullptr;
};

Cublas load_cublas() {
  Cublas c;
  void* lib = nullptr;
  for (const char* n : {"libcublas.so.13", "libcublas.so.12", "libcublas.so.11", "libcublas.so"}) {
    lib = dlopen(n, RTLD_NOW | RTLD_LOCAL);
    if (lib) {
      c.name = n;
      break;
    }
  }
  if (!lib) throw std::runtime_error("cuBLAS not loadable (libcublas.so.13/12/11 not found on the library path)");
  c.create = reinterpret_cast<decltype(c.create)>(dlsym(lib, "cublasCreate_v2"));
  c.destroy = reinterpret_cast<decltype(c.destroy)>(dlsym(lib, "cublasDestroy_v2"));
  c.gemm_ex = reinterpret_cast<decltype(c.gemm_ex)>(dlsym(lib, "cublasGemmEx"));
  c.gemm_strided_batched_ex = reinterpret_cast<decltype(c.gemm_strided_batched_ex)>(dlsym(lib, "cublasGemmStridedBatchedEx"));
  if (!c.create || !c.destroy || !c.gemm_ex || !c.gemm_strided_batched_ex)
    throw std::runtime_error(c.name + " lacks cublasCreate_v2/cublasGemmEx/cublasGemmStridedBatchedEx");
  return c;
}

void check_cublas(CublasStatus s, const char* call) {
  if (s != 0) throw std::runtime_error(std::string(call) + " failed with cuBLAS status " + std::to_string(s));
}

void check_cu(const CudaDriver& d, CuResult r, const char* call) {
  if (r != 0) throw std::runtime_error(d.error(call, r));
}

struct Allocs {
  const CudaDriver& d;
  std::vector<CuDevicePtr> ptrs;
  explicit Allocs(const CudaDriver& drv) : d(drv) {}
  ~Allocs() {
    for (CuDevicePtr p : ptrs) d.cuMemFree(p);
  }
  CuDevicePtr get(size_t bytes) {
    CuDevicePtr p = 0;
    check_cu(d, d.cuMemAlloc(&p, bytes), "cuMemAlloc");
    ptrs.push_back(p);
    // Zeros are ordinary FP16 values; GEMM speed does not depend on them.
    check_cu(d, d.cuMemsetD8Async(p, 0, bytes, nullptr), "cuMemsetD8Async");
    return p;
  }
};

}  // namespace

CublasSamples bench_cublas(int device, const RunPlan& plan, const CancelToken& cancel) {
  std::string why;
  const CudaDriver* dp = cuda_driver(&why);
  if (!dp) throw std::runtime_error("no CUDA device: " + why);
  const CudaDriver& d = *dp;
  CuDevice dev = 0;
  check_cu(d, d.cuDeviceGet(&dev, device), "cuDeviceGet");
  d.cuDevicePrimaryCtxSetFlags(dev, kCuCtxSchedBlockingSync);
  CuContext ctx = nullptr;
  check_cu(d, d.cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  struct Release {
    const CudaDriver& d;
    CuDevice dev;
    ~Release() { d.cuDevicePrimaryCtxRelease(dev); }
  } release{d, dev};
  check_cu(d, d.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");

  const Cublas cb = load_cublas();
  CublasHandle h = nullptr;
  check_cublas(cb.create(&h), "cublasCreate_v2");
  struct Destroy {
    const Cublas& cb;
    CublasHandle h;
    ~Destroy() { cb.destroy(h); }
  } destroy{cb, h};

  CublasSamples s;
  s.library = cb.name;
  const float one = 1.0f, zero = 0.0f;
  Allocs mem(d);
  auto time = [&](std::vector<int64_t>* out, auto&& op) {
    for (int r = 0; r < plan.warmups + plan.runs && !cancel.cancelled(); ++r) {
      const int64_t t0 = now_ns();
      op();
      check_cu(d, d.cuCtxSynchronize(), "cuCtxSynchronize");
      const int64_t t1 = now_ns();
      if (r >= plan.warmups) out->push_back(t1 - t0);
    }
  };

  // GEMM: 8192³ FP16 with FP32 accumulation (1.1 TFLOP: milliseconds on any tensor-core GPU).
  s.gemm_m = s.gemm_n = s.gemm_k = 8192;
  {
    const int n = static_cast<int>(s.gemm_m);
    const size_t b = static_cast<size_t>(n) * n * 2;
    CuDevicePtr A = mem.get(b), B = mem.get(b), C = mem.get(b);
    time(&s.gemm, [&] {
      check_cublas(cb.gemm_ex(h, kOpN, kOpN, n, n, n, &one, reinterpret_cast<void*>(A), kR16F, n, reinterpret_cast<void*>(B),
                              kR16F, n, &zero, reinterpret_cast<void*>(C), kR16F, n, kCompute32F, kGemmDefault),
                   "cublasGemmEx");
    });
  }
  // GEMV: a 16384×16384 FP16 weight (512 MiB, far above any L2) times one activation column.
  s.gemv_rows = s.gemv_cols = 16384;
  {
    const int rows = static_cast<int>(s.gemv_rows), cols = static_cast<int>(s.gemv_cols);
    CuDevicePtr W = mem.get(static_cast<size_t>(rows) * cols * 2), x = mem.get(static_cast<size_t>(cols) * 2),
                y = mem.get(static_cast<size_t>(rows) * 2);
    // y (rows) = Wᵀ-stored-row-major · x: W as column-major cols×rows, transposed.
    time(&s.gemv, [&] {
      check_cublas(cb.gemm_ex(h, kOpT, kOpN, rows, 1, cols, &one, reinterpret_cast<void*>(W), kR16F, cols,
                              reinterpret_cast<void*>(x), kR16F, cols, &zero, reinterpret_cast<void*>(y), kR16F, rows,
                              kCompute32F, kGemmDefault),
                   "cublasGemmEx");
    });
  }
  // Decode attention, one layer: 32 heads × 8192 positions × 128 dims, K and V FP16 per head.
  s.attn_heads = 32;
  s.attn_kv = 8192;
  s.attn_head_dim = 128;
  {
    const int heads = static_cast<int>(s.attn_heads), kv = static_cast<int>(s.attn_kv), hd = static_cast<int>(s.attn_head_dim);
    const long long per_head = static_cast<long long>(kv) * hd;
    CuDevicePtr K = mem.get(static_cast<size_t>(per_head) * heads * 2), V = mem.get(static_cast<size_t>(per_head) * heads * 2);
    CuDevicePtr q = mem.get(static_cast<size_t>(hd) * heads * 2), p = mem.get(static_cast<size_t>(kv) * heads * 2),
                o = mem.get(static_cast<size_t>(hd) * heads * 2);
    time(&s.attention, [&] {
      // scores (kv) = K (kv×hd, row-major = column-major hd×kv, transposed) · q (hd)
      check_cublas(cb.gemm_strided_batched_ex(h, kOpT, kOpN, kv, 1, hd, &one, reinterpret_cast<void*>(K), kR16F, hd, per_head,
                                              reinterpret_cast<void*>(q), kR16F, hd, hd, &zero, reinterpret_cast<void*>(p),
                                              kR16F, kv, kv, heads, kCompute32F, kGemmDefault),
                   "cublasGemmStridedBatchedEx");
      // out (hd) = V (column-major hd×kv) · p (kv)
      check_cublas(cb.gemm_strided_batched_ex(h, kOpN, kOpN, hd, 1, kv, &one, reinterpret_cast<void*>(V), kR16F, hd, per_head,
                                              reinterpret_cast<void*>(p), kR16F, kv, kv, &zero, reinterpret_cast<void*>(o),
                                              kR16F, hd, hd, heads, kCompute32F, kGemmDefault),
                   "cublasGemmStridedBatchedEx");
    });
  }
  return s;
}

}  // namespace bench
}  // namespace fulcrum
