// 80 x 80 tile products on the FP64 tensor cores (mma.sync m8n8k4 f64), shared by the
// block-inversion kernels (device-only header). A tile is 10 x 10 tiles of 8 x 8; a warp
// holds some of them in registers (two doubles per lane each).
#ifndef SPEXD_CUDA_DMMA_TILE_CUH_
#define SPEXD_CUDA_DMMA_TILE_CUH_

namespace spexd::cuda {

constexpr int kDmmaEdge = 80;            // largest nt handled: a block padded to 80 x 80
constexpr int kDmmaTiles = kDmmaEdge / 8;

// D += A B for one 8x8 tile: lane l holds A(l/4, l%4), B(l%4, l/4), D(l/4, 2(l%4) + {0,1}).
__device__ inline void Dmma(double (&d)[2], double a, double b) {
  asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};"
               : "+d"(d[0]), "+d"(d[1])
               : "d"(a), "d"(b));
}

}  // namespace spexd::cuda

#endif  // SPEXD_CUDA_DMMA_TILE_CUH_
