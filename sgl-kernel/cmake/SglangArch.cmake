# SglangArch.cmake: CUDA architectures for a CMake build, from the sglang-arch registry.
#
# Why: the registry already knows, per GPU tier and CUDA toolkit, which targets to
# build ('a' arch-specific targets where a tier's kernels need them, such as wgmma on
# sm_90a; 'f' family targets; PTX for the newest tier).  Asking it keeps kernel builds
# and the runtime's feature decisions on one table instead of a hand-kept list.
#
# Usage (after project(... LANGUAGES CXX CUDA), so the CUDA compiler version is known):
#
#   include(cmake/SglangArch.cmake)
#   sglang_arch_cuda_architectures(MY_ARCHS)
#   set_target_properties(my_kernels PROPERTIES CUDA_ARCHITECTURES "${MY_ARCHS}")
#
# Inputs:
#   SGLANG_ARCH_CAPABILITIES  optional list of capabilities ("9.0;10.0"); each becomes a
#                             --capability.  Unset: the GPUs of the build machine
#                             (--detected), which fails on a machine without one.
#   Python_EXECUTABLE         the interpreter that can import sglang_arch; found with
#                             find_package(Python) when unset.
#   CMAKE_CUDA_COMPILER_VERSION  its major.minor is passed as --cuda, so the targets
#                             match the compiler CMake really uses (not whatever nvcc
#                             is first on PATH).
#
# The result is the registry's "cmake" format, e.g. "90a-real;90-virtual".

include_guard(GLOBAL)

set(SGLANG_ARCH_CAPABILITIES "${SGLANG_ARCH_CAPABILITIES}" CACHE STRING
    "Compute capabilities to build for, e.g. 9.0;10.0 (empty: the GPUs of this machine)")

function(sglang_arch_cuda_architectures OUT_VAR)
  if(NOT Python_EXECUTABLE)
    find_package(Python COMPONENTS Interpreter REQUIRED)
  endif()

  set(args -m sglang_arch gencode --format cmake)
  if(SGLANG_ARCH_CAPABILITIES)
    foreach(cap IN LISTS SGLANG_ARCH_CAPABILITIES)
      list(APPEND args --capability "${cap}")
    endforeach()
  else()
    list(APPEND args --detected)
  endif()
  if(CMAKE_CUDA_COMPILER_VERSION)
    if(NOT CMAKE_CUDA_COMPILER_VERSION MATCHES "^([0-9]+)\\.([0-9]+)")
      message(FATAL_ERROR "sglang_arch_cuda_architectures: cannot read major.minor from "
                          "CMAKE_CUDA_COMPILER_VERSION='${CMAKE_CUDA_COMPILER_VERSION}'")
    endif()
    list(APPEND args --cuda "${CMAKE_MATCH_1}.${CMAKE_MATCH_2}")
  endif()

  execute_process(
    COMMAND "${Python_EXECUTABLE}" ${args}
    RESULT_VARIABLE rc
    OUTPUT_VARIABLE out
    ERROR_VARIABLE err
    OUTPUT_STRIP_TRAILING_WHITESPACE
    ERROR_STRIP_TRAILING_WHITESPACE)
  list(JOIN args " " shown)
  if(NOT rc EQUAL 0)
    set(hint "")
    if(NOT SGLANG_ARCH_CAPABILITIES)
      string(CONCAT hint "\nNo capabilities were given, so the build machine's GPUs were used; "
                         "pass -DSGLANG_ARCH_CAPABILITIES=9.0 (a list) to build without one.")
    endif()
    if(err MATCHES "No module named")
      string(CONCAT hint "${hint}\n${Python_EXECUTABLE} cannot import sglang_arch: pass "
                         "-DPython_EXECUTABLE=<an interpreter with sglang-arch installed>.")
    endif()
    message(FATAL_ERROR "sglang_arch_cuda_architectures: '${Python_EXECUTABLE} ${shown}' failed "
                        "(exit ${rc}):\n${err}${hint}")
  endif()
  if(out STREQUAL "")
    message(FATAL_ERROR "sglang_arch_cuda_architectures: '${Python_EXECUTABLE} ${shown}' printed nothing")
  endif()
  message(STATUS "sglang-arch CUDA architectures: ${out}")
  set(${OUT_VAR} "${out}" PARENT_SCOPE)
endfunction()
