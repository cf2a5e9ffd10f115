// Probe: hardware FP4 (e2m1) conversion (registry feature "fp4", Blackwell family targets).
//
// On the device, floats are converted to __nv_fp4_e2m1 and back through cuda_fp4.h
// and, in the same kernel, through the instructions themselves
// (cvt.rn.satfinite.e2m1x2.f32 and cvt.rn.f16x2.e2m1x2) in inline PTX.  Both must give
// the bit patterns and values of the table below, written out by hand from the format
// (sign, 2 exponent bits with bias 1, 1 mantissa bit; values 0, 0.5 .. 6).
//
// The instructions exist only in arch- or family-specific code of sm_100 and newer
// (sm_100a/f, sm_103a/f, sm_110a/f, sm_120a/f, sm_121a/f); cuda_fp4.h emulates them
// in software everywhere else, which would "pass" on any GPU.  So "verified" needs
// the instructions compiled in and run; other builds (sm_90a included) report
// "unsupported_build", as do toolkits without cuda_fp4.h (CUDA < 12.8).
//
// Output: one JSON line on stdout ({"probe":"fp4","status":...,"detail":...}).
// Exit status 0, except 1 (status "error") for an unexpected CUDA error.

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#if defined(__has_include)
#if __has_include(<cuda_fp4.h>)
#include <cuda_fp4.h>

#define PROBE_NAME "fp4"
#include "probe_common.cuh"
#define PROBE_HAVE_FP4_HEADER 1
#endif
#endif
#ifndef PROBE_HAVE_FP4_HEADER
#define PROBE_HAVE_FP4_HEADER 0
#endif

// The e2m1 conversion instructions: family-specific code of majors 10, 11 and 12.
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FAMILY_SPECIFIC__) && PROBE_HAVE_FP4_HEADER
#if __CUDA_ARCH_FAMILY_SPECIFIC__ >= 1000 && __CUDA_ARCH_FAMILY_SPECIFIC__ < 1300
#define PROBE_NATIVE_FP4 1
#endif
#endif

namespace {

struct Case {
  float in;
  uint8_t bits;
  float value;
};
constexpr Case kCases[] = {
    {0.0f, 0x0, 0.0f},   {0.5f, 0x1, 0.5f},  {1.0f, 0x2, 1.0f},   {1.5f, 0x3, 1.5f},
    {2.0f, 0x4, 2.0f},   {3.0f, 0x5, 3.0f},  {4.0f, 0x6, 4.0f},   {6.0f, 0x7, 6.0f},
    {-1.0f, 0xA, -1.0f}, {-6.0f, 0xF, -6.0f},
    {100.0f, 0x7, 6.0f},  // saturates to the largest finite value (satfinite)
    {-100.0f, 0xF, -6.0f},
    {2.5f, 0x4, 2.0f},    // tie between 2 and 3 -> even mantissa (2)
    {5.0f, 0x6, 4.0f},    // tie between 4 and 6 -> even (4)
    {0.25f, 0x0, 0.0f},   // tie between 0 and 0.5 -> even (0)
    {0.75f, 0x2, 1.0f},   // tie between 0.5 and 1 -> even (1)
};
constexpr int kCaseCount = sizeof(kCases) / sizeof(kCases[0]);

struct DeviceResult {
  uint32_t hdr_bits;
  float hdr_value;
  uint32_t ins_bits;
  float ins_value;
};
enum Info : int { kCompiled = 0, kCudaArch = 1, kInfoWords = 2 };

__global__ void convert(const float* in, int n, DeviceResult* out, int* info) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  DeviceResult r{};
#if PROBE_HAVE_FP4_HEADER
  const float x = in[i];
  const __nv_fp4_e2m1 v(x);  // cuda_fp4.h: satfinite, round to nearest even
  r.hdr_bits = v.__x;
  r.hdr_value = static_cast<float>(v);
#endif
#if defined(PROBE_NATIVE_FP4)
  // Convert (0, x): x lands in the low nibble of the .b8 result.  Then unpack the
  // byte to f16x2 and take the low half.
  uint16_t packed = 0;
  uint32_t halves = 0;
  asm("{\n"
      "  .reg .b8 q;\n"
      "  cvt.rn.satfinite.e2m1x2.f32 q, %1, %2;\n"
      "  cvt.u16.u8 %0, q;\n"
      "}\n"
      : "=h"(packed)
      : "f"(0.0f), "f"(x));
  asm("{\n"
      "  .reg .b8 lo, hi;\n"
      "  mov.b16 {lo, hi}, %1;\n"
      "  cvt.rn.f16x2.e2m1x2 %0, lo;\n"
      "}\n"
      : "=r"(halves)
      : "h"(packed));
  r.ins_bits = packed;
  r.ins_value = __half2float(__ushort_as_half(static_cast<unsigned short>(halves & 0xFFFFu)));
  if (i == 0) {
    info[kCompiled] = 1;
    info[kCudaArch] = __CUDA_ARCH__;
  }
#else
  if (i == 0) info[kCompiled] = 0;
#endif
  out[i] = r;
}

std::string hex1(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%X", v);
  return buf;
}

}  // namespace

int main() {
  if (!PROBE_HAVE_FP4_HEADER) {
    probe::emit("unsupported_build", "this CUDA toolkit has no cuda_fp4.h (FP4 needs CUDA >= 12.8)");
    return 0;
  }
  int count = 0;
  PROBE_CHECK(cudaGetDeviceCount(&count));
  PROBE_CHECK(cudaSetDevice(0));
  float inputs[kCaseCount];
  for (int i = 0; i < kCaseCount; ++i) inputs[i] = kCases[i].in;
  float* d_in = nullptr;
  DeviceResult* d_out = nullptr;
  int* d_info = nullptr;
  PROBE_CHECK(cudaMalloc(&d_in, sizeof inputs));
  PROBE_CHECK(cudaMalloc(&d_out, kCaseCount * sizeof(DeviceResult)));
  PROBE_CHECK(cudaMalloc(&d_info, kInfoWords * sizeof(int)));
  PROBE_CHECK(cudaMemcpy(d_in, inputs, sizeof inputs, cudaMemcpyHostToDevice));
  PROBE_CHECK(cudaMemset(d_info, 0, kInfoWords * sizeof(int)));
  convert<<<1, 32>>>(d_in, kCaseCount, d_out, d_info);
  probe::finish_launch("conversion kernel");

  DeviceResult results[kCaseCount];
  int info[kInfoWords] = {};
  PROBE_CHECK(cudaMemcpy(results, d_out, sizeof results, cudaMemcpyDeviceToHost));
  PROBE_CHECK(cudaMemcpy(info, d_info, sizeof info, cudaMemcpyDeviceToHost));
  PROBE_CHECK(cudaFree(d_in));
  PROBE_CHECK(cudaFree(d_out));
  PROBE_CHECK(cudaFree(d_info));

  const bool native = info[kCompiled] != 0;
  int wrong = 0;
  std::string first;
  auto check = [&](bool ok, const char* what, int i, const std::string& got, const std::string& want) {
    if (ok) return;
    if (wrong++ == 0)
      first = std::string(what) + "(" + std::to_string(kCases[i].in) + ") = " + got + ", expected " + want;
  };
  for (int i = 0; i < kCaseCount; ++i) {
    const Case& c = kCases[i];
    const DeviceResult& r = results[i];
    check(r.hdr_bits == c.bits, "cuda_fp4.h e2m1", i, hex1(r.hdr_bits), hex1(c.bits));
    check(r.hdr_value == c.value, "cuda_fp4.h e2m1 back", i, std::to_string(r.hdr_value), std::to_string(c.value));
    if (!native) continue;
    check(r.ins_bits == c.bits, "cvt e2m1", i, hex1(r.ins_bits), hex1(c.bits));
    check(r.ins_value == c.value, "cvt e2m1 back", i, std::to_string(r.ins_value), std::to_string(c.value));
  }
  const std::string fields = probe::field("cuda_arch", info[kCudaArch]) + probe::field("cases", kCaseCount);
  if (!native) {
    probe::emit("unsupported_build",
         std::string("built without sm_100+ arch/family-specific code for this device: cuda_fp4.h only emulates "
                     "in software here (") +
             (wrong ? "and the emulation was wrong: " + first : "emulation correct") + ")",
         fields);
    return 0;
  }
  if (wrong) {
    probe::emit("refuted", std::to_string(wrong) + " wrong conversions; first: " + first, fields);
    return 0;
  }
  probe::emit("verified", "e2m1 conversions (cvt instructions and cuda_fp4.h) matched " + std::to_string(kCaseCount) +
                       " cases: exact values, ties to even, saturation",
       fields);
  return 0;
}
