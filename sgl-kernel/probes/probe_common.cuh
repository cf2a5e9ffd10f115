// Shared by every probe: one JSON line on stdout, CUDA error handling, and the two
// classes of launch error the verdicts depend on.  Define PROBE_NAME before including.
//
// Output: {"probe":PROBE_NAME,"status":...,"detail":...[,extra fields]}; status "error"
// (exit 1) is reserved for an unexpected CUDA error.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <type_traits>

#ifndef PROBE_NAME
#error "define PROBE_NAME before including probe_common.cuh"
#endif

namespace probe {

inline std::string json_str(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

template <typename T, typename std::enable_if<std::is_integral<T>::value && !std::is_same<T, bool>::value,
                                              int>::type = 0>
inline std::string field(const char* key, T value) {
  return std::string(",\"") + key + "\":" + std::to_string(value);
}
inline std::string field(const char* key, const std::string& value) {
  return std::string(",\"") + key + "\":" + json_str(value);
}
inline std::string field(const char* key, const char* value) { return field(key, std::string(value)); }
inline std::string field(const char* key, bool value) {
  return std::string(",\"") + key + "\":" + (value ? "true" : "false");
}

inline void emit(const char* status, const std::string& detail, const std::string& fields = "") {
  std::printf("{\"probe\":%s,\"status\":%s,\"detail\":%s%s}\n", json_str(PROBE_NAME).c_str(),
              json_str(status).c_str(), json_str(detail).c_str(), fields.c_str());
  std::fflush(stdout);
}

inline std::string cuda_error(cudaError_t err) {
  return std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
}

[[noreturn]] inline void die(const char* what, cudaError_t err, const std::string& fields = "") {
  emit("error", std::string(what) + " failed: " + cuda_error(err), fields);
  std::exit(1);
}

// The binary has no code this device can run: the build target, not the hardware.
inline bool build_mismatch(cudaError_t err) {
  return err == cudaErrorNoKernelImageForDevice || err == cudaErrorInvalidDeviceFunction ||
         err == cudaErrorUnsupportedPtxVersion || err == cudaErrorInvalidPtx || err == cudaErrorJitCompilerNotFound;
}

// The kernel under test broke on the device: evidence against a claimed feature.
inline bool kernel_fault(cudaError_t err) {
  return err == cudaErrorIllegalInstruction || err == cudaErrorIllegalAddress || err == cudaErrorMisalignedAddress ||
         err == cudaErrorInvalidPc || err == cudaErrorLaunchFailure || err == cudaErrorHardwareStackError ||
         err == cudaErrorInvalidAddressSpace || err == cudaErrorLaunchTimeout;
}

// After a launch of the kernel under test: returns only when it ran cleanly.  No kernel
// image for this device ends the probe with "unsupported_build", a fault on the device
// with "refuted" (both exit 0); any other CUDA error is unexpected ("error", exit 1).
inline void finish_launch(const char* what) {
  cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) err = cudaDeviceSynchronize();
  if (err == cudaSuccess) return;
  if (build_mismatch(err)) {
    emit("unsupported_build", std::string(what) + ": no kernel image for this device: " + cuda_error(err));
    std::exit(0);
  }
  if (kernel_fault(err)) {
    emit("refuted", std::string(what) + " faulted on the device: " + cuda_error(err));
    std::exit(0);
  }
  die(what, err);
}

}  // namespace probe

#define PROBE_CHECK(call)                                          \
  do {                                                             \
    cudaError_t probe_err_ = (call);                               \
    if (probe_err_ != cudaSuccess) probe::die(#call, probe_err_); \
  } while (0)
