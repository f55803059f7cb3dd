// ApplyPixelRules, DecodeRawPlanes and WidenPlanes (core/io/preproc.h): the pixel rules,
// the byte order of raw planes and the float64 widening over whole planes, chunk by chunk
// on the decode pool.
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "core/base/float_convert.h"
#include "core/base/parallel_for.h"
#include "core/io/internal/plane_decode.h"
#include "core/io/internal/plane_rules.h"
#include "core/io/preproc.h"

namespace spexd::core {
namespace {

template <typename T, typename Plane>
void ApplyRules(uint16_t bad_bits, const uint16_t* mask, Plane& image, Plane& ivar,
                TaskPool* pool, PreprocImage* frame) {
  const std::size_t n = image.size() < ivar.size() ? image.size() : ivar.size();
  const int chunks = DecodeChunks(static_cast<int64_t>(n));
  std::atomic<std::size_t> n_masked{0}, n_nonfinite{0};
  ParallelFor(pool, HardwareThreads(), chunks, [&](int /*worker*/, int c) {
    std::size_t masked = 0, nonfinite = 0;
    ApplyRulesChunk<T>(bad_bits, mask, image.data(), ivar.data(), n, c, &masked, &nonfinite);
    n_masked += masked;
    n_nonfinite += nonfinite;
  });
  frame->n_masked = n_masked.load();
  frame->n_nonfinite = n_nonfinite.load();
}

}  // namespace

void ApplyPixelRules(const uint16_t* mask, MaskPolicy policy, PreprocImage* frame, TaskPool* pool) {
  const uint16_t bad_bits = MaskBadBits(policy);
  if (frame->has_float32_planes()) {
    ApplyRules<float>(bad_bits, mask, frame->image32, frame->ivar32, pool, frame);
  } else {
    ApplyRules<double>(bad_bits, mask, frame->image, frame->ivar, pool, frame);
  }
}

void DecodeRawPlanes(PreprocImage* frame, TaskPool* pool) {
  if (!frame->has_raw_planes()) return;
  // In place: each big-endian word becomes the native float32 it holds, then the rules.
  PlaneBuffer<float> image = std::move(frame->image_raw).Reinterpret<float>();
  PlaneBuffer<float> ivar = std::move(frame->ivar_raw).Reinterpret<float>();
  PlaneBuffer<uint16_t> mask = std::move(frame->mask_raw);
  const std::size_t n = image.size() < ivar.size() ? image.size() : ivar.size();
  const int chunks = DecodeChunks(static_cast<int64_t>(n));
  ParallelFor(pool, HardwareThreads(), chunks, [&](int /*worker*/, int c) {
    const std::size_t lo = static_cast<std::size_t>(c) * kDecodeChunkPixels;
    const std::size_t hi = std::min(n, lo + static_cast<std::size_t>(kDecodeChunkPixels));
    FromBigEndianFloat32(reinterpret_cast<const char*>(image.data() + lo), image.data() + lo, hi - lo);
    FromBigEndianFloat32(reinterpret_cast<const char*>(ivar.data() + lo), ivar.data() + lo, hi - lo);
  });
  frame->image32 = std::move(image);
  frame->ivar32 = std::move(ivar);
  ApplyRules<float>(frame->raw_bad_bits, mask.empty() ? nullptr : mask.data(), frame->image32,
                    frame->ivar32, pool, frame);
}

void WidenPlanes(PreprocImage* frame, TaskPool* pool) {
  DecodeRawPlanes(frame, pool);
  if (!frame->has_float32_planes()) return;
  const std::size_t n = frame->image32.size();
  frame->image.resize(n);
  frame->ivar.resize(frame->ivar32.size());
  const int chunks = DecodeChunks(static_cast<int64_t>(n));
  ParallelFor(pool, HardwareThreads(), chunks, [&](int /*worker*/, int c) {
    const std::size_t lo = static_cast<std::size_t>(c) * kDecodeChunkPixels;
    const std::size_t hi = std::min(n, lo + static_cast<std::size_t>(kDecodeChunkPixels));
    for (std::size_t i = lo; i < hi; ++i) frame->image[i] = frame->image32[i];
    for (std::size_t i = lo; i < hi && i < frame->ivar32.size(); ++i) frame->ivar[i] = frame->ivar32[i];
  });
  frame->image32.Release();
  frame->ivar32.Release();
}

}  // namespace spexd::core
