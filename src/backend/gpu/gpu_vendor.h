/* gpu_vendor.h: the GPU backend's sources are written against the CUDA
 * runtime's names; this header maps them to HIP's when built for AMD GPUs
 * (hipcc, RG_GPU_HIP) or for HIP-CPU, AMD's header-only HIP runtime on the
 * host CPU that a developer machine without a GPU can run the kernels on
 * (RG_GPU_HIP_CPU, scripts/gpu-check-cpu.sh). ggml's vendors/hip.h does the
 * same for its CUDA backend.
 *
 * Kernels are launched with RG_LAUNCH, not <<< >>>: HIP-CPU is a plain C++
 * library, which only hipLaunchKernelGGL reaches. Kernels use no warp
 * intrinsics (warps are 32 lanes on NVIDIA, 64 on most AMD GPUs): block
 * reductions go through shared memory, which every runtime has. */
#ifndef RG_GPU_VENDOR_H
#define RG_GPU_VENDOR_H

#if defined(RG_GPU_HIP) || defined(RG_GPU_HIP_CPU)
#include <hip/hip_runtime.h>

#define cudaError_t hipError_t
#define cudaSuccess hipSuccess
#define cudaGetErrorString hipGetErrorString
#define cudaGetLastError hipGetLastError
#define cudaSetDevice hipSetDevice
#define cudaGetDeviceCount hipGetDeviceCount
#define cudaDeviceProp hipDeviceProp_t
#define cudaGetDeviceProperties hipGetDeviceProperties
#define cudaMemGetInfo hipMemGetInfo
#define cudaMalloc hipMalloc
#define cudaFree hipFree
#define cudaMemcpy hipMemcpy
#define cudaMemcpyAsync hipMemcpyAsync
#define cudaMemcpy2DAsync hipMemcpy2DAsync
#define cudaMemsetAsync hipMemsetAsync
#define cudaMemcpyHostToDevice hipMemcpyHostToDevice
#define cudaMemcpyDeviceToHost hipMemcpyDeviceToHost
#define cudaMemcpyDeviceToDevice hipMemcpyDeviceToDevice
#define cudaStream_t hipStream_t
#define cudaStreamCreate hipStreamCreate
#define cudaStreamDestroy hipStreamDestroy
#define cudaStreamSynchronize hipStreamSynchronize

#define RG_LAUNCH(kernel, grid, block, shmem, stream, ...) \
  do {                                                     \
    hipLaunchKernelGGL(kernel, grid, block, shmem, stream, __VA_ARGS__); \
  } while (0)
#define RG_GPU_VENDOR_NAME "hip"

#if defined(RG_GPU_HIP_CPU)
#include <string.h>
/* HIP-CPU makes __shared__ thread_local and sizes dynamic shared memory
 * per launch through its own macro; it has no bit-cast intrinsics. */
#define RG_DYNAMIC_SHARED(type, var) HIP_DYNAMIC_SHARED(type, var)
static inline float rg_uint_as_float(unsigned u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}
static inline unsigned rg_float_as_uint(float f) {
  unsigned u;
  memcpy(&u, &f, sizeof u);
  return u;
}
#endif

#else /* CUDA */
#include <cuda_runtime.h>

#define RG_LAUNCH(kernel, grid, block, shmem, stream, ...) \
  do {                                                     \
    kernel<<<grid, block, shmem, stream>>>(__VA_ARGS__);   \
  } while (0)
#define RG_GPU_VENDOR_NAME "cuda"
#define RG_GPU_CUBLAS 1 /* matrix products through cuBLAS (HIP builds: the own kernel, backend/gpu/gemm.cu) */
#endif

#if !defined(RG_GPU_HIP_CPU)
#define RG_DYNAMIC_SHARED(type, var) extern __shared__ type var[]
#define rg_uint_as_float __uint_as_float
#define rg_float_as_uint __float_as_uint
#endif

#endif
