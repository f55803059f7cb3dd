// Throughput of the FP64 tensor-core MMA shapes on device 0: each
// warp issues eight independent accumulator chains of one shape, four blocks an SM, and
// the rate is the multiply-adds done over the kernel's time. On an H100 m8n8k4 (the shape
// of dmma_tiles.cuh's Dmma) ran at half the rate of m16n8k4, m16n8k8 and m16n8k16: 33
// against 66 TFLOP/s (docs/performance.md).
//   spexd_dmma_shape_bench [iterations]
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

namespace {

template <int kShape>
__global__ void Chains(double* out, int iters) {
  double a[8], b[4], d[8][4];
  for (int i = 0; i < 8; ++i) a[i] = threadIdx.x * 1e-3 + i;
  for (int i = 0; i < 4; ++i) b[i] = 1.0 + i * 1e-3;
  for (int j = 0; j < 8; ++j) d[j][0] = d[j][1] = d[j][2] = d[j][3] = 0.0;
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      if constexpr (kShape == 0) {
        asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, {%0,%1};"
                     : "+d"(d[j][0]), "+d"(d[j][1])
                     : "d"(a[j]), "d"(b[0]));
      } else if constexpr (kShape == 1) {
        asm volatile(
            "mma.sync.aligned.m16n8k4.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5}, {%6}, "
            "{%0,%1,%2,%3};"
            : "+d"(d[j][0]), "+d"(d[j][1]), "+d"(d[j][2]), "+d"(d[j][3])
            : "d"(a[0]), "d"(a[1]), "d"(b[0]));
      } else if constexpr (kShape == 2) {
        asm volatile(
            "mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
            "{%8,%9}, {%0,%1,%2,%3};"
            : "+d"(d[j][0]), "+d"(d[j][1]), "+d"(d[j][2]), "+d"(d[j][3])
            : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(b[0]), "d"(b[1]));
      } else {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, "
            "{%4,%5,%6,%7,%8,%9,%10,%11}, {%12,%13,%14,%15}, {%0,%1,%2,%3};"
            : "+d"(d[j][0]), "+d"(d[j][1]), "+d"(d[j][2]), "+d"(d[j][3])
            : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(a[4]), "d"(a[5]), "d"(a[6]),
              "d"(a[7]), "d"(b[0]), "d"(b[1]), "d"(b[2]), "d"(b[3]));
      }
    }
  }
  double s = 0.0;  // keeps the chains live
  for (int j = 0; j < 8; ++j) s += d[j][0] + d[j][1] + d[j][2] + d[j][3];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

// TFLOP/s of shape kShape (multiply-adds per instruction: fma), or a negative on error.
template <int kShape>
double Rate(int warps_per_block, int iters, double fma) {
  int sms = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0) != cudaSuccess) return -1;
  const int blocks = 4 * sms, threads = 32 * warps_per_block;
  double* out = nullptr;
  if (cudaMalloc(&out, sizeof(double) * blocks * threads) != cudaSuccess) return -1;
  Chains<kShape><<<blocks, threads>>>(out, 16);  // warm-up
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  cudaEventRecord(e0);
  Chains<kShape><<<blocks, threads>>>(out, iters);
  cudaEventRecord(e1);
  const bool ok = cudaEventSynchronize(e1) == cudaSuccess && cudaGetLastError() == cudaSuccess;
  float ms = 0.0f;
  cudaEventElapsedTime(&ms, e0, e1);
  cudaFree(out);
  if (!ok || ms <= 0.0f) return -1;
  return 2.0 * fma * blocks * warps_per_block * iters * 8 / (1e-3 * ms) / 1e12;
}

}  // namespace

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 4096;
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
    std::fprintf(stderr, "no CUDA device\n");
    return 1;
  }
  std::printf("{\"benchmark\": \"dmma_shape\", \"device\": \"%s\", \"iterations\": %d, \"tflops\": {",
              prop.name, iters);
  const char* sep = "";
  for (int w : {4, 8}) {
    std::printf("%s\"m8n8k4_w%d\": %.1f, \"m16n8k4_w%d\": %.1f, \"m16n8k8_w%d\": %.1f, \"m16n8k16_w%d\": %.1f",
                sep, w, Rate<0>(w, iters, 8 * 8 * 4), w, Rate<1>(w, iters, 16 * 8 * 4), w,
                Rate<2>(w, iters, 16 * 8 * 8), w, Rate<3>(w, iters, 16 * 8 * 16));
    sep = ", ";
  }
  std::printf("}}\n");
  return 0;
}
