// Probe: hardware FP8 conversion (registry feature "fp8", sm_89 and newer).
//
// On the device, floats are converted to __nv_fp8_e4m3 / __nv_fp8_e5m2 and back
// through cuda_fp8.h, and, in the same kernel, through the conversion instructions
// themselves (cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32 and cvt.rn.f16x2.{e4m3x2,e5m2x2})
// in inline PTX.  Both must give the bit patterns and values in the tables below,
// written out by hand from the formats (no host conversion is trusted as reference):
// exact values, ties to even, saturation to the largest finite value, subnormals.
//
// cuda_fp8.h falls back to software emulation below sm_89, which would "pass" on any
// GPU; so the probe reports "verified" only when the conversion instructions were
// compiled in and ran, and "unsupported_build" when the build target is below sm_89.
//
// Output: one JSON line on stdout ({"probe":"fp8","status":...,"detail":...}).
// Exit status 0, except 1 (status "error") for an unexpected CUDA error.

#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#define PROBE_NAME "fp8"
#include "probe_common.cuh"

namespace {

// One test value: input, expected e4m3 bits and value, expected e5m2 bits and value.
struct Case {
  float in;
  uint8_t e4m3;
  float e4m3_value;
  uint8_t e5m2;
  float e5m2_value;
};
// e4m3: bias 7, 3 mantissa bits, max 448, no infinity; e5m2: bias 15, 2 mantissa bits, max 57344.
constexpr Case kCases[] = {
    {0.0f, 0x00, 0.0f, 0x00, 0.0f},
    {1.0f, 0x38, 1.0f, 0x3C, 1.0f},
    {-2.0f, 0xC0, -2.0f, 0xC0, -2.0f},
    {0.5f, 0x30, 0.5f, 0x38, 0.5f},
    {3.0f, 0x44, 3.0f, 0x42, 3.0f},
    {448.0f, 0x7E, 448.0f, 0x5F, 448.0f},            // e4m3 max; exact in e5m2 (1.75 * 2^8)
    {57344.0f, 0x7E, 448.0f, 0x7B, 57344.0f},        // e5m2 max; e4m3 saturates
    {1.0e6f, 0x7E, 448.0f, 0x7B, 57344.0f},          // both saturate (satfinite)
    {-1.0e6f, 0xFE, -448.0f, 0xFB, -57344.0f},
    {0.001953125f, 0x01, 0.001953125f, 0x18, 0.001953125f},     // 2^-9: e4m3 smallest subnormal, e5m2 normal
    {1.52587890625e-05f, 0x00, 0.0f, 0x01, 1.52587890625e-05f},  // 2^-16: e5m2's smallest subnormal
    {1.0625f, 0x38, 1.0f, 0x3C, 1.0f},               // e4m3 tie -> even (1.0); e5m2 rounds to 1.0
    {1.1875f, 0x3A, 1.25f, 0x3D, 1.25f},             // e4m3 tie -> even (1.25); e5m2 nearest 1.25
    {1.375f, 0x3B, 1.375f, 0x3E, 1.5f},              // exact in e4m3; e5m2 tie -> even (1.5)
};
constexpr int kCaseCount = sizeof(kCases) / sizeof(kCases[0]);

// Per case, what the device produced: [0] header bits, [1] header value,
// [2] instruction bits, [3] instruction value; for e4m3 then e5m2.
struct DeviceResult {
  uint32_t hdr_bits[2];
  float hdr_value[2];
  uint32_t ins_bits[2];
  float ins_value[2];
};
enum Info : int { kCompiled = 0, kCudaArch = 1, kInfoWords = 2 };

__global__ void convert(const float* in, int n, DeviceResult* out, int* info) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float x = in[i];
  DeviceResult r{};
  const __nv_fp8_e4m3 a(x);  // cuda_fp8.h: satfinite, round to nearest even
  const __nv_fp8_e5m2 b(x);
  r.hdr_bits[0] = a.__x;
  r.hdr_bits[1] = b.__x;
  r.hdr_value[0] = static_cast<float>(a);
  r.hdr_value[1] = static_cast<float>(b);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  // The instructions themselves: convert (x, 0) to a packed pair; the second source
  // lands in the low byte.  Then unpack back to f16x2 and take the low half.
  uint16_t p4 = 0, p5 = 0;
  uint32_t h4 = 0, h5 = 0;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(p4) : "f"(0.0f), "f"(x));
  asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(p5) : "f"(0.0f), "f"(x));
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h4) : "h"(p4));
  asm("cvt.rn.f16x2.e5m2x2 %0, %1;" : "=r"(h5) : "h"(p5));
  r.ins_bits[0] = p4;
  r.ins_bits[1] = p5;
  r.ins_value[0] = __half2float(__ushort_as_half(static_cast<unsigned short>(h4 & 0xFFFFu)));
  r.ins_value[1] = __half2float(__ushort_as_half(static_cast<unsigned short>(h5 & 0xFFFFu)));
  if (i == 0) {
    info[kCompiled] = 1;
    info[kCudaArch] = __CUDA_ARCH__;
  }
#else
  if (i == 0) info[kCompiled] = 0;
#endif
  out[i] = r;
}

std::string hex2(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%02X", v);
  return buf;
}

}  // namespace

int main() {
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
    const uint32_t want_bits[2] = {c.e4m3, c.e5m2};
    const float want_value[2] = {c.e4m3_value, c.e5m2_value};
    const char* names[2] = {"e4m3", "e5m2"};
    for (int f = 0; f < 2; ++f) {
      const std::string hdr = std::string("cuda_fp8.h ") + names[f];
      check(r.hdr_bits[f] == want_bits[f], hdr.c_str(), i, hex2(r.hdr_bits[f]), hex2(want_bits[f]));
      check(r.hdr_value[f] == want_value[f], (hdr + " back").c_str(), i, std::to_string(r.hdr_value[f]),
            std::to_string(want_value[f]));
      if (!native) continue;
      // The packed pair holds the converted 0.0 in its high byte.
      const std::string ins = std::string("cvt ") + names[f];
      check(r.ins_bits[f] == want_bits[f], ins.c_str(), i, hex2(r.ins_bits[f]), hex2(want_bits[f]));
      check(r.ins_value[f] == want_value[f], (ins + " back").c_str(), i, std::to_string(r.ins_value[f]),
            std::to_string(want_value[f]));
    }
  }
  const std::string fields = probe::field("cuda_arch", info[kCudaArch]) + probe::field("cases", kCaseCount);
  if (!native) {
    probe::emit("unsupported_build",
         std::string("built without sm_89+ code for this device: cuda_fp8.h only emulates in software here (") +
             (wrong ? "and the emulation was wrong: " + first : "emulation correct") + ")",
         fields);
    return 0;
  }
  if (wrong) {
    probe::emit("refuted", std::to_string(wrong) + " wrong conversions; first: " + first, fields);
    return 0;
  }
  probe::emit("verified", "e4m3/e5m2 conversions (cvt instructions and cuda_fp8.h) matched " + std::to_string(kCaseCount) +
                       " cases: exact values, ties to even, saturation, subnormals",
       fields);
  return 0;
}
