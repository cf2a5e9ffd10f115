// Probe: the opt-in shared memory limits the registry lists per tier
// (smem_per_block_kib, smem_per_sm_kib).
//
// Why a kernel and not only the attributes: the attribute is what the driver
// promises; a kernel that really gets that much dynamic shared memory, fills all
// of it and reads it back through other threads is what kernels (FA3, CUTLASS
// mainloops sized to the last KiB) rely on.  The probe also checks that one byte
// more is refused, so the reported value is the real ceiling and not just a value
// that happens to work.
//
// Output: one JSON line on stdout,
//   {"probe":"smem_optin","status":"verified"|"refuted"|"unsupported_build"|"error",
//    "detail":"...","per_block_optin_bytes":N,"per_sm_bytes":N,...}
// Exit status 0, except 1 (status "error") for an unexpected CUDA error.
// Self-contained: build with  nvcc -std=c++17 -O2 <gencode flags> -o smem_optin smem_optin.cu

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#define PROBE_NAME "smem_optin"
#include "probe_common.cuh"

namespace {

constexpr int kThreads = 1024;

// A value unique to each word, so a read that aliases another word of the window
// (a wrap-around, a bank mapped twice) is caught, not just a dead byte.
__host__ __device__ unsigned int pattern(unsigned int i) { return (i * 2654435761u) ^ 0xA5A5A5A5u; }

// Fills `words` words of dynamic shared memory, then each thread checks words that
// other threads wrote (reversed index), counting mismatches.
__global__ void fill_and_check(unsigned int words, unsigned int* mismatches) {
  extern __shared__ unsigned int smem[];
  for (unsigned int i = threadIdx.x; i < words; i += blockDim.x) smem[i] = pattern(i) ^ blockIdx.x;
  __syncthreads();
  unsigned int bad = 0;
  for (unsigned int i = threadIdx.x; i < words; i += blockDim.x) {
    const unsigned int j = words - 1 - i;
    if (smem[j] != (pattern(j) ^ blockIdx.x)) ++bad;
  }
  if (bad != 0) atomicAdd(mismatches, bad);
}

}  // namespace

int main() {
  int count = 0;
  PROBE_CHECK(cudaGetDeviceCount(&count));
  int dev = 0;
  PROBE_CHECK(cudaSetDevice(dev));
  cudaDeviceProp prop{};
  PROBE_CHECK(cudaGetDeviceProperties(&prop, dev));

  int optin = 0, per_sm = 0, per_block_default = 0, reserved = 0;
  PROBE_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  PROBE_CHECK(cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev));
  PROBE_CHECK(cudaDeviceGetAttribute(&per_block_default, cudaDevAttrMaxSharedMemoryPerBlock, dev));
  PROBE_CHECK(cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock, dev));
  int driver = 0, runtime = 0;
  PROBE_CHECK(cudaDriverGetVersion(&driver));
  PROBE_CHECK(cudaRuntimeGetVersion(&runtime));

  // Everything measured so far goes into every line, also a failing one: the runner
  // compares the attributes even when the kernel could not run.
  std::string fields = probe::field("per_block_optin_bytes", static_cast<long long>(optin)) +
                       probe::field("per_sm_bytes", static_cast<long long>(per_sm)) +
                       probe::field("per_block_default_bytes", static_cast<long long>(per_block_default)) +
                       probe::field("reserved_per_block_bytes", static_cast<long long>(reserved)) +
                       probe::field("device", std::string(prop.name)) +
                       probe::field("capability", std::to_string(prop.major) + "." + std::to_string(prop.minor)) +
                       probe::field("multiprocessors", static_cast<long long>(prop.multiProcessorCount)) +
                       probe::field("device_count", static_cast<long long>(count)) +
                       probe::field("driver_version", static_cast<long long>(driver)) +
                       probe::field("runtime_version", static_cast<long long>(runtime));

  cudaFuncAttributes attrs{};
  cudaError_t err = cudaFuncGetAttributes(&attrs, fill_and_check);
  if (probe::build_mismatch(err)) {
    probe::emit("unsupported_build", "no kernel image for this device: " + probe::cuda_error(err), fields);
    return 0;
  }
  if (err != cudaSuccess) probe::die("cudaFuncGetAttributes", err, fields);
  // Static shared memory counts against the same limit; this kernel has none, but
  // subtract it so the probe stays right if someone adds some.
  const int dynamic_bytes = optin - static_cast<int>(attrs.sharedSizeBytes);

  // One byte over the ceiling must be refused; otherwise the attribute understates it.
  err = cudaFuncSetAttribute(fill_and_check, cudaFuncAttributeMaxDynamicSharedMemorySize, dynamic_bytes + 1);
  const bool over_rejected = err != cudaSuccess;
  (void)cudaGetLastError();  // the expected refusal is not sticky; clear it
  fields += probe::field("over_limit_rejected", over_rejected);

  err = cudaFuncSetAttribute(fill_and_check, cudaFuncAttributeMaxDynamicSharedMemorySize, dynamic_bytes);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    probe::emit("refuted", "the device refused its own opt-in maximum of " + std::to_string(dynamic_bytes) +
                        " dynamic bytes: " + probe::cuda_error(err), fields);
    return 0;
  }

  unsigned int* mismatches = nullptr;
  PROBE_CHECK(cudaMalloc(&mismatches, sizeof(unsigned int)));
  PROBE_CHECK(cudaMemset(mismatches, 0, sizeof(unsigned int)));
  const unsigned int words = static_cast<unsigned int>(dynamic_bytes) / sizeof(unsigned int);
  // One block per SM: each holds the whole opt-in window, so every SM is exercised.
  fill_and_check<<<prop.multiProcessorCount, kThreads, dynamic_bytes>>>(words, mismatches);
  err = cudaGetLastError();
  if (err == cudaSuccess) err = cudaDeviceSynchronize();
  if (probe::build_mismatch(err)) {
    probe::emit("unsupported_build", "no kernel image for this device: " + probe::cuda_error(err), fields);
    return 0;
  }
  if (err != cudaSuccess) {
    probe::emit("refuted", "a kernel with " + std::to_string(dynamic_bytes) + " bytes of dynamic shared memory failed: " +
                        probe::cuda_error(err), fields);
    return 0;
  }
  unsigned int bad = 0;
  PROBE_CHECK(cudaMemcpy(&bad, mismatches, sizeof bad, cudaMemcpyDeviceToHost));
  PROBE_CHECK(cudaFree(mismatches));

  const std::string used = std::to_string(prop.multiProcessorCount) + " blocks each filled and read back " +
                           std::to_string(dynamic_bytes) + " bytes of dynamic shared memory";
  if (bad != 0) {
    probe::emit("refuted", used + ", but " + std::to_string(bad) + " words read back wrong", fields);
  } else if (!over_rejected) {
    probe::emit("refuted", used + ", but one byte more was accepted too: the opt-in attribute is not the ceiling", fields);
  } else {
    probe::emit("verified", used + "; one byte more was refused", fields);
  }
  return 0;
}
