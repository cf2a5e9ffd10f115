// Probe: warpgroup MMA (registry feature "wgmma", arch-specific: sm_90a only).
//
// One warpgroup (128 threads) runs a real wgmma.mma_async m64n8k16 with f32
// accumulation, once with f16 and once with bf16 inputs, both operands read from
// shared memory through matrix descriptors (no swizzle, K-major).  D = A*B + C is
// compared exactly with a host reference: the inputs are small integers, so every
// product and sum is exact in f32 and any layout or instruction error shows.
//
// The instruction exists only in sm_90a code, so the kernel body is compiled only
// under __CUDA_ARCH_FEAT_SM90_ALL; any other build reports "unsupported_build".
//
// Output: one JSON line on stdout ({"probe":"wgmma","status":...,"detail":...}).
// Exit status 0, except 1 (status "error") for an unexpected CUDA error.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#define PROBE_NAME "wgmma"
#include "probe_common.cuh"

namespace {

constexpr int kM = 64, kN = 8, kK = 16;
constexpr int kThreads = 128;  // one warpgroup
enum Info : int { kCompiled = 0, kCudaArch = 1, kInfoWords = 2 };

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// Shared-memory layout without swizzling ("interleave" mode): the operand is cut into
// core matrices of 8 rows x 16 bytes (8 x 8 16-bit elements), each stored as 128
// contiguous bytes.  For a K-major operand the descriptor's leading byte offset (LBO)
// is the step between core matrices adjacent along K, the stride byte offset (SBO)
// the step between adjacent 8-row groups along M (or N).  LBO != SBO on purpose, so
// that swapping them would be caught.
constexpr uint32_t kLbo = 128, kSbo = 256;

// A[m][k] (64 x 16): core matrix (m/8, k/8) at ((m/8)*2 + k/8) * 128 bytes.
__device__ int a_index(int m, int k) { return ((m / 8) * 2 + k / 8) * 64 + (m % 8) * 8 + (k % 8); }
// B[k][n] (16 x 8), K-major (k contiguous for each n): core matrix k/8 at (k/8) * 128 bytes.
__device__ int b_index(int k, int n) { return (k / 8) * 64 + n * 8 + (k % 8); }

// The 64-bit wgmma matrix descriptor: start address, LBO and SBO in 16-byte units,
// base offset 0, layout type 0 (no swizzle).
__device__ uint64_t make_desc(const void* smem) {
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(kLbo >> 4) << 16) |
         (static_cast<uint64_t>(kSbo >> 4) << 32);
}

template <bool kBf16>
__device__ void mma(float (&d)[4], uint64_t desc_a, uint64_t desc_b) {
  // scale-d = 1 (accumulate onto C), scale-a = scale-b = 1, no transposes (both K-major).
  if constexpr (kBf16) {
    asm volatile(
        "{\n"
        "  .reg .pred p;\n"
        "  setp.ne.b32 p, %6, 0;\n"
        "  wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0, %1, %2, %3}, %4, %5, p, 1, 1, 0, 0;\n"
        "}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "l"(desc_a), "l"(desc_b), "r"(1)
        : "memory");
  } else {
    asm volatile(
        "{\n"
        "  .reg .pred p;\n"
        "  setp.ne.b32 p, %6, 0;\n"
        "  wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0, %1, %2, %3}, %4, %5, p, 1, 1, 0, 0;\n"
        "}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "l"(desc_a), "l"(desc_b), "r"(1)
        : "memory");
  }
}
#endif

// a: 64x16 row-major 16-bit values, b: 16x8 row-major, c and d: 64x8 row-major f32.
template <bool kBf16>
__global__ void wgmma_m64n8k16(const uint16_t* a, const uint16_t* b, const float* c, float* d, int* info) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  __shared__ alignas(128) uint16_t sa[kM * kK];
  __shared__ alignas(128) uint16_t sb[kK * kN];
  const int t = threadIdx.x;
  for (int i = t; i < kM * kK; i += kThreads) sa[a_index(i / kK, i % kK)] = a[i];
  for (int i = t; i < kK * kN; i += kThreads) sb[b_index(i / kN, i % kN)] = b[i];
  // wgmma reads shared memory through the async proxy: order the generic writes first.
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();

  // Accumulator fragment of m64nNk16: warp w owns rows 16w..16w+15; lane l holds
  // rows 16w + l/4 (+8) and columns 2*(l%4) (+1).
  const int warp = t / 32, lane = t % 32;
  const int row = warp * 16 + lane / 4, col = (lane % 4) * 2;
  float acc[4] = {c[row * kN + col], c[row * kN + col + 1], c[(row + 8) * kN + col], c[(row + 8) * kN + col + 1]};

  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
  mma<kBf16>(acc, make_desc(sa), make_desc(sb));
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");

  d[row * kN + col] = acc[0];
  d[row * kN + col + 1] = acc[1];
  d[(row + 8) * kN + col] = acc[2];
  d[(row + 8) * kN + col + 1] = acc[3];
  if (t == 0) {
    info[kCompiled] = 1;
    info[kCudaArch] = __CUDA_ARCH__;
  }
#else
  if (threadIdx.x == 0) info[kCompiled] = 0;
#endif
}

uint16_t to_bits(float v, bool bf16) {
  if (bf16) {
    __nv_bfloat16_raw r = __nv_bfloat16(v);
    return r.x;
  }
  __half_raw r = __half(v);
  return r.x;
}

struct Outcome {
  bool compiled = false;
  int cuda_arch = 0;
  int wrong = 0;
  std::string first_wrong;
};

// Runs one input type; small integers keep every product and partial sum exact.
template <bool kBf16>
Outcome run_case() {
  std::vector<float> a(kM * kK), b(kK * kN), c(kM * kN), ref(kM * kN);
  for (int m = 0; m < kM; ++m)
    for (int k = 0; k < kK; ++k) a[m * kK + k] = static_cast<float>((m * 3 + k * 5) % 7 - 3);
  for (int k = 0; k < kK; ++k)
    for (int n = 0; n < kN; ++n) b[k * kN + n] = static_cast<float>((k * 2 + n * 3) % 5 - 2);
  for (int m = 0; m < kM; ++m)
    for (int n = 0; n < kN; ++n) c[m * kN + n] = static_cast<float>((m + n) % 4);
  for (int m = 0; m < kM; ++m) {
    for (int n = 0; n < kN; ++n) {
      float s = c[m * kN + n];
      for (int k = 0; k < kK; ++k) s += a[m * kK + k] * b[k * kN + n];
      ref[m * kN + n] = s;
    }
  }
  std::vector<uint16_t> a16(a.size()), b16(b.size());
  for (size_t i = 0; i < a.size(); ++i) a16[i] = to_bits(a[i], kBf16);
  for (size_t i = 0; i < b.size(); ++i) b16[i] = to_bits(b[i], kBf16);

  uint16_t *da = nullptr, *db = nullptr;
  float *dc = nullptr, *dd = nullptr;
  int* info = nullptr;
  PROBE_CHECK(cudaMalloc(&da, a16.size() * sizeof(uint16_t)));
  PROBE_CHECK(cudaMalloc(&db, b16.size() * sizeof(uint16_t)));
  PROBE_CHECK(cudaMalloc(&dc, c.size() * sizeof(float)));
  PROBE_CHECK(cudaMalloc(&dd, c.size() * sizeof(float)));
  PROBE_CHECK(cudaMalloc(&info, kInfoWords * sizeof(int)));
  PROBE_CHECK(cudaMemcpy(da, a16.data(), a16.size() * sizeof(uint16_t), cudaMemcpyHostToDevice));
  PROBE_CHECK(cudaMemcpy(db, b16.data(), b16.size() * sizeof(uint16_t), cudaMemcpyHostToDevice));
  PROBE_CHECK(cudaMemcpy(dc, c.data(), c.size() * sizeof(float), cudaMemcpyHostToDevice));
  PROBE_CHECK(cudaMemset(dd, 0xFF, c.size() * sizeof(float)));  // NaNs until written
  PROBE_CHECK(cudaMemset(info, 0, kInfoWords * sizeof(int)));
  wgmma_m64n8k16<kBf16><<<1, kThreads>>>(da, db, dc, dd, info);
  probe::finish_launch(kBf16 ? "bf16 wgmma kernel" : "f16 wgmma kernel");

  Outcome out;
  int host_info[kInfoWords] = {};
  std::vector<float> d(c.size());
  PROBE_CHECK(cudaMemcpy(host_info, info, sizeof host_info, cudaMemcpyDeviceToHost));
  PROBE_CHECK(cudaMemcpy(d.data(), dd, d.size() * sizeof(float), cudaMemcpyDeviceToHost));
  out.compiled = host_info[kCompiled] != 0;
  out.cuda_arch = host_info[kCudaArch];
  for (int i = 0; i < kM * kN; ++i) {
    if (d[i] != ref[i]) {
      if (out.wrong++ == 0) {
        char buf[128];
        std::snprintf(buf, sizeof buf, "D[%d][%d] = %g, expected %g", i / kN, i % kN, d[i], ref[i]);
        out.first_wrong = buf;
      }
    }
  }
  PROBE_CHECK(cudaFree(da));
  PROBE_CHECK(cudaFree(db));
  PROBE_CHECK(cudaFree(dc));
  PROBE_CHECK(cudaFree(dd));
  PROBE_CHECK(cudaFree(info));
  return out;
}

}  // namespace

int main() {
  int count = 0;
  PROBE_CHECK(cudaGetDeviceCount(&count));
  PROBE_CHECK(cudaSetDevice(0));
  const Outcome f16 = run_case<false>();
  if (!f16.compiled) {
    probe::emit("unsupported_build", "built without sm_90a code for this device (wgmma needs __CUDA_ARCH_FEAT_SM90_ALL)");
    return 0;
  }
  const Outcome bf16 = run_case<true>();
  const std::string fields = probe::field("cuda_arch", f16.cuda_arch);
  if (f16.wrong || bf16.wrong) {
    std::string detail = "wgmma.mma_async m64n8k16 gave wrong results:";
    const std::string of = "/" + std::to_string(kM * kN);
    if (f16.wrong) detail += " f16 " + std::to_string(f16.wrong) + of + " (" + f16.first_wrong + ")";
    if (bf16.wrong) detail += " bf16 " + std::to_string(bf16.wrong) + of + " (" + bf16.first_wrong + ")";
    probe::emit("refuted", detail, fields);
    return 0;
  }
  probe::emit("verified", "wgmma.mma_async m64n8k16 f32+=f16*f16 and f32+=bf16*bf16 from shared-memory descriptors matched "
                   "the host reference exactly (64x8 outputs each)", fields);
  return 0;
}
