#include "core/frame/frame.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "core/base/parallel_for.h"
#include "core/base/prefault.h"
#include "core/frame/frame_array_pool.h"
#include "core/frame/internal/middle_values.h"

namespace spexd::core {

void FinalizeBundle(const std::vector<double>& dwave, BundleResult* b) {
  if (b->per_angstrom) return;
  for (int f = 0; f < b->nfibers; ++f) {
    for (int w = 0; w < b->nwave; ++w) {
      const std::size_t i = static_cast<std::size_t>(f) * b->nwave + w;
      b->flux[i] /= dwave[w];
      b->ivar[i] *= dwave[w] * dwave[w];
    }
  }
  b->per_angstrom = true;
  const std::size_t nw = static_cast<std::size_t>(std::max(b->nwave, 0));
  b->fiber_chi2pix_median.clear();
  if (b->chi2pix.size() != static_cast<std::size_t>(std::max(b->nfibers, 0)) * nw) return;
  std::vector<double> scratch;
  for (int f = 0; f < b->nfibers; ++f) {
    b->fiber_chi2pix_median.push_back(
        RowMedian(b->chi2pix.data() + static_cast<std::size_t>(f) * nw, nw, &scratch));
  }
}

double MedianInPlace(double* begin, double* end) {
  if (begin == end) return 0.0;
  const internal::MiddleValues m =
      internal::SelectMiddle(begin, static_cast<std::size_t>(end - begin));
  if (m.nan) return std::numeric_limits<double>::quiet_NaN();
  return m.lo + (m.hi - m.lo) * 0.5;  // numpy's mean of the two middle values
}

double Median(std::vector<double> v) { return MedianInPlace(v.data(), v.data() + v.size()); }

double RowMedian(const double* row, std::size_t n, std::vector<double>* scratch) {
  scratch->assign(row, row + n);
  return MedianInPlace(scratch->data(), scratch->data() + n);
}

double BundleFiberMedian(const BundleResult& b, int f, std::vector<double>* scratch) {
  const std::size_t nw = static_cast<std::size_t>(std::max(b.nwave, 0));
  if (b.fiber_chi2pix_median.size() == static_cast<std::size_t>(b.nfibers)) {
    return b.fiber_chi2pix_median[static_cast<std::size_t>(f)];
  }
  return RowMedian(b.chi2pix.data() + static_cast<std::size_t>(f) * nw, nw, scratch);
}

namespace {

// Wavelengths per task of the column medians: a block of rows is read contiguously into
// one column per wavelength, rather than one cache line per value; the blocks (and the
// fibres' rows) are spread over the pool.
constexpr int kWaveBlock = 64;
constexpr int kFiberBlock = 25;

// The per-bin arrays FrameAssembler reserves for the whole frame.
template <typename F>
void ForEachBinArray(Frame& f, F fn) {
  fn(f.flux);
  fn(f.ivar);
  fn(f.rdiags);
  fn(f.pixmask_fraction);
  fn(f.chi2pix);
  fn(f.failed_bins);
}

}  // namespace

FrameAssembler::FrameAssembler(const Geometry& geometry, bool want_model, Keep keep,
                               FrameArrayPool* arrays)
    : geometry_(geometry), keep_(keep) {
  if (arrays != nullptr) arrays->Lend(&frame_);  // empty arrays with their capacity
  const PatchPlan& plan = geometry.plan();
  frame_.nwave = plan.nwave;
  frame_.ndiag = plan.ndiag;
  frame_.wave = plan.wave;
  // The whole frame's arrays at once: appending bundle by bundle would regrow and copy
  // them (rdiags alone is ~100 MB for an r frame) on the extracting thread between
  // bundles, while the backend's other threads wait. Pages of bundles a job
  // does not extract are never touched.
  const std::size_t bins = static_cast<std::size_t>(plan.nspec) * plan.nwave;
  if (keep_ != Keep::kMaskInputs) {
    frame_.flux.reserve(bins);
    frame_.ivar.reserve(bins);
  }
  if (keep_ == Keep::kAll) {
    frame_.rdiags.reserve(bins * static_cast<std::size_t>(2 * plan.ndiag + 1));
  }
  frame_.pixmask_fraction.reserve(bins);
  frame_.chi2pix.reserve(bins);
  frame_.failed_bins.reserve(bins);
  // Huge pages for the ~260 MB (r frame) the bundles are copied into: faulted in 4 KiB at a
  // time they took ~1 s of CPU a frame on a VM (4 ms a MB), most of the CPU backend's sink.
  ForEachBinArray(frame_,
                  [](auto& v) { AdviseHugePages(v.data(), v.capacity() * sizeof(v[0])); });
  if (want_model) {
    frame_.model_height = plan.image_height;
    frame_.model_width = plan.image_width;
    frame_.model.assign(static_cast<std::size_t>(plan.image_height) * plan.image_width, 0.0);
  }
}

void FrameAssembler::Prefault(TaskPool* pool) {
  // The reserved capacity of each array, in 1 MiB pieces.
  struct Span {
    void* data;
    std::size_t bytes;
  };
  std::vector<Span> spans;
  auto add = [&spans](auto& v) {
    constexpr std::size_t kPiece = std::size_t{1} << 20;
    const std::size_t bytes = v.capacity() * sizeof(v[0]);
    auto* base = reinterpret_cast<unsigned char*>(v.data());
    for (std::size_t off = 0; off < bytes; off += kPiece) {
      spans.push_back({base + off, std::min(kPiece, bytes - off)});
    }
  };
  ForEachBinArray(frame_, add);
  ParallelFor(pool, HardwareThreads(), static_cast<int>(spans.size()), [&](int, int i) {
    PrefaultForWrite(spans[static_cast<std::size_t>(i)].data, spans[static_cast<std::size_t>(i)].bytes);
  });
}

absl::Status FrameAssembler::Add(const BundleResult& b) {
  if (!b.per_angstrom) return absl::InternalError("bundle added before FinalizeBundle");
  if (b.bundle <= last_bundle_) return absl::InternalError("bundles added out of order");
  if (b.nwave != frame_.nwave) return absl::InternalError("bundle has the wrong number of wavelengths");
  if (frame_.nspec == 0) frame_.specmin = b.fiber_begin;
  last_bundle_ = b.bundle;
  frame_.nspec += b.nfibers;
  auto append = [](std::vector<double>* dst, const std::vector<double>& src) {
    dst->insert(dst->end(), src.begin(), src.end());
  };
  if (keep_ != Keep::kMaskInputs) {
    append(&frame_.flux, b.flux);
    append(&frame_.ivar, b.ivar);
  }
  if (keep_ == Keep::kAll) append(&frame_.rdiags, b.rdiags);
  append(&frame_.pixmask_fraction, b.pixmask_fraction);
  append(&frame_.chi2pix, b.chi2pix);
  const std::size_t nw = static_cast<std::size_t>(b.nwave);
  for (int f = 0; f < b.nfibers; ++f) {
    const std::size_t r = static_cast<std::size_t>(f) * nw;
    if (r + nw > b.chi2pix.size()) break;  // Finish then computes them all itself
    fiber_median_.push_back(BundleFiberMedian(b, f, &row_));
  }
  frame_.failed_bins.insert(frame_.failed_bins.end(), b.failed_bins.begin(), b.failed_bins.end());
  frame_.counts += b.counts;
  if (!frame_.model.empty() && !b.model.empty()) {
    // Bundle canvases are added into the frame model (spec §2.12).
    for (int y = 0; y < b.model_ny; ++y) {
      const int gy = b.model_y0 + y;
      if (gy < 0 || gy >= frame_.model_height) continue;
      for (int x = 0; x < b.model_nx; ++x) {
        const int gx = b.model_x0 + x;
        if (gx < 0 || gx >= frame_.model_width) continue;
        frame_.model[static_cast<std::size_t>(gy) * frame_.model_width + gx] +=
            b.model[static_cast<std::size_t>(y) * b.model_nx + x];
      }
    }
  }
  return absl::OkStatus();
}

Frame FrameAssembler::Finish(MaskPolicy policy, TaskPool* pool) {
  const bool medians = fiber_median_.size() == static_cast<std::size_t>(frame_.nspec);
  ComputeSpecMask(&frame_, policy, pool, medians ? &fiber_median_ : nullptr);
  return std::move(frame_);
}

uint32_t LocalMaskBits(double pf, bool failed, MaskPolicy policy) {
  uint32_t m = 0;
  if (pf > 0.5) m |= kSomeBadPix;
  // desispec tests == 1.0; a normalised stamp sums to 1 only up to rounding that
  // depends on summation order, so allow 1e-12 (deliberate: a fully masked bin must
  // not escape ALLBADPIX by one ulp). kDesispecExact keeps desispec's == 1.0.
  const double all_bad = policy == MaskPolicy::kDesispecExact ? 1.0 : 1.0 - 1e-12;
  if (pf >= all_bad) m |= kAllBadPix;
  if (failed) m |= kBad2DFit;
  return m;
}

std::vector<double> WaveMediansWhereDeciding(const double* chi2, int ns, int nw,
                                             const std::vector<double>& fiber_median,
                                             TaskPool* pool) {
  const std::size_t nsz = static_cast<std::size_t>(std::max(ns, 0));
  const std::size_t nwz = static_cast<std::size_t>(std::max(nw, 0));
  std::vector<double> med_wave(nwz, 0.0);
  const int workers = HardwareThreads();
  std::vector<std::vector<double>> scratch(static_cast<std::size_t>(workers));
  const int wave_blocks = (nw + kWaveBlock - 1) / kWaveBlock;
  ParallelFor(pool, workers, wave_blocks, [&](int worker, int block) {
    const int w0 = block * kWaveBlock, nb = std::min(kWaveBlock, nw - w0);
    bool needed[kWaveBlock] = {};
    bool any = false;
    for (std::size_t s = 0; s < nsz; ++s) {
      const double* row = chi2 + s * nwz + static_cast<std::size_t>(w0);
      const double limit = 5 * fiber_median[s];
      for (int j = 0; j < nb; ++j) {
        if (row[j] > limit) needed[j] = any = true;
      }
    }
    if (!any) return;
    // A column holds its values in fibre order.
    std::vector<double>& col = scratch[static_cast<std::size_t>(worker)];
    col.resize(nsz);
    for (int j = 0; j < nb; ++j) {
      if (!needed[j]) continue;
      for (std::size_t s = 0; s < nsz; ++s) col[s] = chi2[s * nwz + static_cast<std::size_t>(w0 + j)];
      med_wave[static_cast<std::size_t>(w0 + j)] = MedianInPlace(col.data(), col.data() + nsz);
    }
  });
  return med_wave;
}

void ComputeSpecMask(Frame* f, MaskPolicy policy, TaskPool* pool,
                     const std::vector<double>* fiber_medians) {
  const int ns = f->nspec, nw = f->nwave;
  const std::size_t nsz = static_cast<std::size_t>(ns), nwz = static_cast<std::size_t>(nw);
  f->mask.assign(nsz * nwz, 0);
  const bool given = fiber_medians != nullptr && fiber_medians->size() == nsz;
  std::vector<double> med_fiber = given ? *fiber_medians : std::vector<double>(nsz);
  const double* chi2 = f->chi2pix.data();
  const int workers = HardwareThreads();
  std::vector<std::vector<double>> scratch(static_cast<std::size_t>(workers));
  // Each fibre's median over its wavelengths, then the wavelengths' where they decide.
  const int fiber_blocks = (ns + kFiberBlock - 1) / kFiberBlock;
  ParallelFor(pool, workers, given ? 0 : fiber_blocks, [&](int worker, int block) {
    std::vector<double>& row = scratch[static_cast<std::size_t>(worker)];
    const int s1 = std::min(ns, (block + 1) * kFiberBlock);
    for (int s = block * kFiberBlock; s < s1; ++s) {
      med_fiber[static_cast<std::size_t>(s)] =
          RowMedian(chi2 + static_cast<std::size_t>(s) * nwz, nwz, &row);
    }
  });
  const std::vector<double> med_wave = WaveMediansWhereDeciding(chi2, ns, nw, med_fiber, pool);
  // The mask rows.
  ParallelFor(pool, workers, fiber_blocks, [&](int /*worker*/, int block) {
    const int s1 = std::min(ns, (block + 1) * kFiberBlock);
    for (int s = block * kFiberBlock; s < s1; ++s) {
      const std::size_t r = static_cast<std::size_t>(s) * nwz;
      const double fiber_limit = 5 * med_fiber[static_cast<std::size_t>(s)];
      for (std::size_t w = 0; w < nwz; ++w) {
        const std::size_t i = r + w;
        uint32_t m = LocalMaskBits(f->pixmask_fraction[i],
                                   !f->failed_bins.empty() && f->failed_bins[i] != 0, policy);
        const double c = chi2[i];
        if (c > fiber_limit && c > 5 * med_wave[w]) m |= kBad2DFit;
        f->mask[i] = m;
      }
    }
  });
}

}  // namespace spexd::core
