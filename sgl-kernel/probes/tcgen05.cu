// Probe: 5th-generation tensor core instructions and tensor memory (registry
// feature "tcgen05", datacenter/Thor Blackwell: sm_100, sm_103, sm_110).
//
// One CTA of four warps allocates 32 columns of tensor memory (tcgen05.alloc),
// each warp stores a distinct value per lane and column into its own 32-lane slice
// (tcgen05.st), reads it back (tcgen05.ld), and the allocation is released
// (tcgen05.dealloc).  That is the smallest thing every tcgen05 kernel does first; it
// fails on hardware without tensor memory.
//
// tcgen05 exists only in arch- or family-specific code of majors 10 and 11
// (sm_100a/f, sm_103a/f, sm_110a/f); any other build (sm_90a, sm_120a, plain
// sm_100) compiles the kernel without it and reports "unsupported_build".
//
// Output: one JSON line on stdout ({"probe":"tcgen05","status":...,"detail":...}).
// Exit status 0, except 1 (status "error") for an unexpected CUDA error.

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#define PROBE_NAME "tcgen05"
#include "probe_common.cuh"

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FAMILY_SPECIFIC__)
#if __CUDA_ARCH_FAMILY_SPECIFIC__ >= 1000 && __CUDA_ARCH_FAMILY_SPECIFIC__ < 1200
#define PROBE_HAS_TCGEN05 1
#endif
#endif

namespace {

constexpr int kThreads = 128;  // four warps: warp w may access tensor-memory lanes 32w..32w+31
constexpr uint32_t kColumns = 32;  // the smallest allocation (a power of two >= 32)
constexpr int kUsedColumns = 8;
enum Info : int { kCompiled = 0, kCudaArch = 1, kTmemAddress = 2, kInfoWords = 4 };

__host__ __device__ uint32_t cell_value(int lane, int column) { return 0xC0DE0000u | (lane << 8) | column; }

__global__ void tmem_roundtrip(uint32_t* out, int* info) {
#if defined(PROBE_HAS_TCGEN05)
  __shared__ uint32_t tmem_base;
  const int warp = threadIdx.x / 32;
  if (warp == 0) {
    // The whole warp allocates; the tensor-memory address lands in shared memory.
    const uint32_t dst = static_cast<uint32_t>(__cvta_generic_to_shared(&tmem_base));
    asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], %1;" ::"r"(dst), "r"(kColumns)
                 : "memory");
    asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;" ::: "memory");
  }
  asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
  __syncthreads();
  asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
  const uint32_t base = tmem_base;
  // Address: lane in bits 31..16, column in bits 15..0.  Shape 32x32b: thread t of
  // the warp accesses lane (32w + t) of the given column.
  const uint32_t row = static_cast<uint32_t>(warp * 32) << 16;
  for (int col = 0; col < kUsedColumns; ++col) {
    const uint32_t v = cell_value(threadIdx.x, col);
    asm volatile("tcgen05.st.sync.aligned.32x32b.x1.b32 [%0], {%1};" ::"r"(base + row + col), "r"(v) : "memory");
  }
  asm volatile("tcgen05.wait::st.sync.aligned;" ::: "memory");
  for (int col = 0; col < kUsedColumns; ++col) {
    uint32_t v = 0;
    // The loaded register is valid only after wait::ld, so both sit in one statement.
    asm volatile(
        "tcgen05.ld.sync.aligned.32x32b.x1.b32 {%0}, [%1];\n"
        "tcgen05.wait::ld.sync.aligned;\n"
        : "=r"(v)
        : "r"(base + row + col)
        : "memory");
    out[threadIdx.x * kUsedColumns + col] = v;
  }
  asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
  __syncthreads();
  asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
  if (warp == 0) {
    asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, %1;" ::"r"(base), "r"(kColumns) : "memory");
  }
  if (threadIdx.x == 0) {
    info[kCompiled] = 1;
    info[kCudaArch] = __CUDA_ARCH__;
    info[kTmemAddress] = static_cast<int>(base);
  }
#else
  if (threadIdx.x == 0) info[kCompiled] = 0;
#endif
}

}  // namespace

int main() {
  int count = 0;
  PROBE_CHECK(cudaGetDeviceCount(&count));
  PROBE_CHECK(cudaSetDevice(0));
  const size_t cells = static_cast<size_t>(kThreads) * kUsedColumns;
  uint32_t* d_out = nullptr;
  int* d_info = nullptr;
  PROBE_CHECK(cudaMalloc(&d_out, cells * sizeof(uint32_t)));
  PROBE_CHECK(cudaMalloc(&d_info, kInfoWords * sizeof(int)));
  PROBE_CHECK(cudaMemset(d_out, 0, cells * sizeof(uint32_t)));
  PROBE_CHECK(cudaMemset(d_info, 0, kInfoWords * sizeof(int)));
  tmem_roundtrip<<<1, kThreads>>>(d_out, d_info);
  probe::finish_launch("tensor-memory kernel");

  std::vector<uint32_t> out(cells);
  int info[kInfoWords] = {};
  PROBE_CHECK(cudaMemcpy(out.data(), d_out, cells * sizeof(uint32_t), cudaMemcpyDeviceToHost));
  PROBE_CHECK(cudaMemcpy(info, d_info, sizeof info, cudaMemcpyDeviceToHost));
  PROBE_CHECK(cudaFree(d_out));
  PROBE_CHECK(cudaFree(d_info));
  if (!info[kCompiled]) {
    probe::emit("unsupported_build",
         "built without sm_100/sm_103/sm_110 arch- or family-specific code for this device (tcgen05 needs "
         "__CUDA_ARCH_FAMILY_SPECIFIC__ in 1000..1199)");
    return 0;
  }
  size_t wrong = 0;
  for (int t = 0; t < kThreads; ++t)
    for (int c = 0; c < kUsedColumns; ++c) wrong += out[t * kUsedColumns + c] != cell_value(t, c);
  const std::string fields = probe::field("cuda_arch", info[kCudaArch]) + probe::field("tmem_address", info[kTmemAddress]);
  if (wrong) {
    probe::emit("refuted", "tensor memory read back " + std::to_string(wrong) + " of " + std::to_string(cells) +
                        " cells wrong", fields);
    return 0;
  }
  probe::emit("verified", "tcgen05.alloc of " + std::to_string(kColumns) + " columns, tcgen05.st/ld of 128 lanes x " +
                       std::to_string(kUsedColumns) + " columns read back exactly, tcgen05.dealloc",
       fields);
  return 0;
}
