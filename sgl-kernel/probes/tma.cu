// Probe: the Tensor Memory Accelerator (registry feature "tma", sm_90 and newer).
//
// Two parts, both through inline PTX so that nothing but the instructions under test
// is involved:
//  1. bulk copies: cp.async.bulk global -> shared completing on an mbarrier, the
//     threads change the data, then cp.async.bulk shared -> global (bulk_group);
//  2. a tensor-map tile load: cp.async.bulk.tensor.2d of a 32x32 box from a 2D
//     tensor, once fully inside it and once hanging over its corner, where the
//     hardware must fill the out-of-bounds part with zeros.
// The tensor map is encoded through the driver entry point obtained from the
// runtime, so the probe needs no -lcuda.
//
// Output: one JSON line on stdout ({"probe":"tma","status":...,"detail":...});
// "unsupported_build" when the binary has no sm_90+ code for the device.
// Exit status 0, except 1 (status "error") for an unexpected CUDA error.

#include <cuda.h>  // CUtensorMap and its enums only; no driver function is linked
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#define PROBE_NAME "tma"
#include "probe_common.cuh"

namespace {

// Device-side status words written by the kernels.
enum Info : int { kCompiled = 0, kCudaArch = 1, kTimedOut = 2, kInfoWords = 4 };

constexpr int kBulkBytes = 16384;  // a multiple of 16, as cp.async.bulk requires
constexpr uint32_t kXorMask = 0x5A5A5A5Au;
constexpr int kRows = 64, kCols = 128;  // the 2D tensor, uint32 elements
constexpr int kBox = 32;                // a 32x32 box, 4 KiB
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
// Spin limit on an mbarrier wait, so a copy that never completes reports instead of hanging.
constexpr long long kWaitCycles = 4000000000LL;

__device__ uint32_t smem_addr(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

__device__ void barrier_init(uint32_t bar, uint32_t arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(arrivals) : "memory");
  // Make the initialised barrier visible to the async proxy that completes on it.
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

__device__ void barrier_expect(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}

// Waits for the phase with the given parity; false when it did not complete in time.
__device__ bool barrier_wait(uint32_t bar, uint32_t parity) {
  const long long start = clock64();
  uint32_t done = 0;
  while (true) {
    asm volatile(
        "{\n"
        "  .reg .pred p;\n"
        "  mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "  selp.u32 %0, 1, 0, p;\n"
        "}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
    if (done) return true;
    if (clock64() - start > kWaitCycles) return false;
  }
}
#endif

// Part 1: global -> shared bulk copy, XOR in shared memory, shared -> global bulk copy.
__global__ void bulk_roundtrip(const uint32_t* src, uint32_t* dst, int* info) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  __shared__ alignas(128) uint32_t buf[kBulkBytes / sizeof(uint32_t)];
  __shared__ alignas(8) uint64_t bar;
  const uint32_t bar_a = smem_addr(&bar), buf_a = smem_addr(buf);
  if (threadIdx.x == 0) barrier_init(bar_a, 1);
  __syncthreads();
  if (threadIdx.x == 0) {
    barrier_expect(bar_a, kBulkBytes);
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(buf_a),
        "l"(src), "r"(kBulkBytes), "r"(bar_a)
        : "memory");
  }
  if (!barrier_wait(bar_a, 0)) {
    info[kTimedOut] = 1;
    return;
  }
  for (int i = threadIdx.x; i < kBulkBytes / 4; i += blockDim.x) buf[i] ^= kXorMask;
  // Generic-proxy writes must be visible to the async proxy before the bulk store reads them.
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  if (threadIdx.x == 0) {
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst), "r"(buf_a),
                 "r"(kBulkBytes)
                 : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
    info[kCompiled] = 1;
    info[kCudaArch] = __CUDA_ARCH__;
  }
#else
  if (threadIdx.x == 0) info[kCompiled] = 0;
#endif
}

// Part 2: two 32x32 tile loads through a tensor map; the second hangs over the corner.
__global__ void tensor_tiles(const __grid_constant__ CUtensorMap map, int x0, int y0, int x1, int y1, uint32_t* out,
                             int* info) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  __shared__ alignas(128) uint32_t tiles[2][kBox * kBox];
  __shared__ alignas(8) uint64_t bar;
  const uint32_t bar_a = smem_addr(&bar);
  if (threadIdx.x == 0) barrier_init(bar_a, 1);
  __syncthreads();
  if (threadIdx.x == 0) {
    // Out-of-bounds elements are filled and still count towards the transaction bytes.
    barrier_expect(bar_a, 2 * kBox * kBox * sizeof(uint32_t));
    const int xs[2] = {x0, x1}, ys[2] = {y0, y1};
    for (int t = 0; t < 2; ++t) {
      asm volatile(
          "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], "
          "[%4];" ::"r"(smem_addr(tiles[t])),
          "l"(&map), "r"(xs[t]), "r"(ys[t]), "r"(bar_a)
          : "memory");
    }
  }
  if (!barrier_wait(bar_a, 0)) {
    info[kTimedOut] = 1;
    return;
  }
  for (int i = threadIdx.x; i < 2 * kBox * kBox; i += blockDim.x) out[i] = tiles[i / (kBox * kBox)][i % (kBox * kBox)];
  if (threadIdx.x == 0) {
    info[kCompiled] = 1;
    info[kCudaArch] = __CUDA_ARCH__;
  }
#else
  if (threadIdx.x == 0) info[kCompiled] = 0;
#endif
}

uint32_t tensor_value(int row, int col) { return static_cast<uint32_t>(row * 1000 + col + 1); }  // never 0

}  // namespace

int main() {
  int count = 0;
  PROBE_CHECK(cudaGetDeviceCount(&count));
  PROBE_CHECK(cudaSetDevice(0));
  int* info = nullptr;
  PROBE_CHECK(cudaMalloc(&info, kInfoWords * sizeof(int)));
  int host_info[kInfoWords] = {};

  // ---- part 1: bulk copies ----
  std::vector<uint32_t> src(kBulkBytes / 4);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint32_t>(i * 2246822519u + 7u);
  uint32_t *d_src = nullptr, *d_dst = nullptr;
  PROBE_CHECK(cudaMalloc(&d_src, kBulkBytes));
  PROBE_CHECK(cudaMalloc(&d_dst, kBulkBytes));
  PROBE_CHECK(cudaMemcpy(d_src, src.data(), kBulkBytes, cudaMemcpyHostToDevice));
  PROBE_CHECK(cudaMemset(d_dst, 0, kBulkBytes));
  PROBE_CHECK(cudaMemset(info, 0, kInfoWords * sizeof(int)));
  bulk_roundtrip<<<1, 256>>>(d_src, d_dst, info);
  probe::finish_launch("bulk copy kernel");
  PROBE_CHECK(cudaMemcpy(host_info, info, sizeof host_info, cudaMemcpyDeviceToHost));
  const std::string arch = probe::field("cuda_arch", host_info[kCudaArch]);
  if (host_info[kTimedOut]) {
    probe::emit("refuted", "cp.async.bulk global->shared never completed its mbarrier", arch);
    return 0;
  }
  if (!host_info[kCompiled]) {
    probe::emit("unsupported_build", "built without sm_90+ code for this device (cp.async.bulk needs __CUDA_ARCH__ >= 900)");
    return 0;
  }
  std::vector<uint32_t> dst(src.size());
  PROBE_CHECK(cudaMemcpy(dst.data(), d_dst, kBulkBytes, cudaMemcpyDeviceToHost));
  size_t bulk_bad = 0;
  for (size_t i = 0; i < src.size(); ++i) bulk_bad += dst[i] != (src[i] ^ kXorMask);
  if (bulk_bad) {
    probe::emit("refuted", "cp.async.bulk round trip: " + std::to_string(bulk_bad) + " of " + std::to_string(src.size()) +
                        " words wrong", arch);
    return 0;
  }

  // ---- part 2: tensor-map tile loads ----
  void* entry = nullptr;
  cudaDriverEntryPointQueryResult query{};
  PROBE_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &entry, 12000, cudaEnableDefault, &query));
  if (query != cudaDriverEntryPointSuccess || entry == nullptr) {
    probe::emit("error", "the driver does not provide cuTensorMapEncodeTiled (query result " +
                      std::to_string(static_cast<int>(query)) + ")", arch);
    return 1;
  }
  auto encode = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(entry);
  std::vector<uint32_t> tensor(kRows * kCols);
  for (int r = 0; r < kRows; ++r)
    for (int c = 0; c < kCols; ++c) tensor[r * kCols + c] = tensor_value(r, c);
  uint32_t *d_tensor = nullptr, *d_tiles = nullptr;
  PROBE_CHECK(cudaMalloc(&d_tensor, tensor.size() * sizeof(uint32_t)));
  PROBE_CHECK(cudaMalloc(&d_tiles, 2 * kBox * kBox * sizeof(uint32_t)));
  PROBE_CHECK(cudaMemcpy(d_tensor, tensor.data(), tensor.size() * sizeof(uint32_t), cudaMemcpyHostToDevice));
  PROBE_CHECK(cudaMemset(d_tiles, 0xFF, 2 * kBox * kBox * sizeof(uint32_t)));  // so zero fill is visible

  CUtensorMap map{};
  const cuuint64_t dims[2] = {kCols, kRows};                      // innermost first
  const cuuint64_t strides[1] = {kCols * sizeof(uint32_t)};        // bytes, dims 1..rank-1
  const cuuint32_t box[2] = {kBox, kBox};
  const cuuint32_t elem_strides[2] = {1, 1};
  const CUresult encoded = encode(&map, CU_TENSOR_MAP_DATA_TYPE_UINT32, 2, d_tensor, dims, strides, box, elem_strides,
                                  CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                                  CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (encoded != CUDA_SUCCESS) {
    probe::emit("error", "cuTensorMapEncodeTiled returned CUresult " + std::to_string(static_cast<int>(encoded)), arch);
    return 1;
  }
  const int xs[2] = {32, kCols - kBox / 2}, ys[2] = {16, kRows - kBox / 2};
  PROBE_CHECK(cudaMemset(info, 0, kInfoWords * sizeof(int)));
  tensor_tiles<<<1, 256>>>(map, xs[0], ys[0], xs[1], ys[1], d_tiles, info);
  probe::finish_launch("tensor tile kernel");
  PROBE_CHECK(cudaMemcpy(host_info, info, sizeof host_info, cudaMemcpyDeviceToHost));
  if (host_info[kTimedOut]) {
    probe::emit("refuted", "cp.async.bulk.tensor.2d never completed its mbarrier", arch);
    return 0;
  }
  std::vector<uint32_t> tiles(2 * kBox * kBox);
  PROBE_CHECK(cudaMemcpy(tiles.data(), d_tiles, tiles.size() * sizeof(uint32_t), cudaMemcpyDeviceToHost));
  size_t in_bad = 0, edge_bad = 0;
  for (int t = 0; t < 2; ++t) {
    for (int r = 0; r < kBox; ++r) {
      for (int c = 0; c < kBox; ++c) {
        const int gr = ys[t] + r, gc = xs[t] + c;
        const uint32_t want = (gr < kRows && gc < kCols) ? tensor_value(gr, gc) : 0u;
        if (tiles[t * kBox * kBox + r * kBox + c] != want) ++(t == 0 ? in_bad : edge_bad);
      }
    }
  }
  PROBE_CHECK(cudaFree(d_src));
  PROBE_CHECK(cudaFree(d_dst));
  PROBE_CHECK(cudaFree(d_tensor));
  PROBE_CHECK(cudaFree(d_tiles));
  PROBE_CHECK(cudaFree(info));
  if (in_bad || edge_bad) {
    probe::emit("refuted", "cp.async.bulk.tensor.2d: " + std::to_string(in_bad) + " wrong words in the inner tile, " +
                        std::to_string(edge_bad) + " in the tile over the corner (which must be zero-filled outside)",
         arch);
    return 0;
  }
  probe::emit("verified",
       "cp.async.bulk moved " + std::to_string(kBulkBytes) +
           " bytes global->shared->global through an mbarrier and a bulk group; cp.async.bulk.tensor.2d loaded a "
           "32x32 tile and a corner tile with zero fill, all exact",
       arch);
  return 0;
}
