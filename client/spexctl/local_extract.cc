#include "client/spexctl/local_extract.h"

#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "client/spexctl/lapack_on_demand.h"
#include "client/spexctl/progress_bar.h"
#include "core/backend/backend.h"
#include "core/backend/extract_frame.h"
#include "core/frame/frame_writer.h"
#include "core/plan/barycentric.h"
#include "core/plan/extraction_params.h"
#include "core/plan/geometry.h"
#include "core/io/preproc.h"
#include "core/io/psf.h"
#include "core/base/status_macros.h"

namespace spexd::client {
namespace {

// The shortest decimal that reads back as `v` (0.8, not 0.80000000000000004).
std::string Shortest(double v) {
  char buf[32];
  const std::to_chars_result r = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, r.ptr);
}

// -v/--verbose: the parameters, as desi_extract_spectra logs them. The grid is the plan's
// (core::RequestedGrid): without -w, the PSF's domain, not the parameters' r-camera defaults.
void PrintParams(const ExtractCommand& cmd, const core::ExtractionPlan& plan, double heliocor) {
  const core::ExtractionParams& p = plan.params();
  const core::GridRequest& g = plan.grid();
  std::fprintf(stderr,
               "spexctl: input = %s\nspexctl: psf = %s\nspexctl: specmin = %d\nspexctl: nspec = %d\n"
               "spexctl: wavelength = %s,%s,%s (extraction grid)\n"
               "spexctl: barycentric_correction_factor = %s\nspexctl: nwavestep = %d\n"
               "spexctl: regularize = %s\n",
               cmd.input.c_str(), cmd.psf.c_str(), p.specmin, p.nspec, Shortest(g.wmin).c_str(),
               Shortest(g.wmax).c_str(), Shortest(g.dw).c_str(), Shortest(heliocor).c_str(),
               p.nwavestep, Shortest(p.regularize).c_str());
}

}  // namespace

absl::Status RunLocalExtract(const ExtractCommand& cmd) {
  const auto t0 = std::chrono::steady_clock::now();
  // Before any file is read: a missing LAPACK is reported at once, and the CPU backend
  // finds OpenBLAS's thread setter when it is created.
  SPEXD_RETURN_IF_ERROR(LoadLapackOnDemand());
  SPEXD_ASSIGN_OR_RETURN(core::Psf psf_value, core::Psf::Load(cmd.psf));
  auto psf = std::make_shared<const core::Psf>(std::move(psf_value));
  // The server's checks, before the image is read: the parameters
  // validated once, into the plan everything below uses.
  SPEXD_ASSIGN_OR_RETURN(core::ExtractionPlan plan, core::ExtractionPlan::Create(cmd.params, *psf));
  core::PreprocOptions popts;
  popts.mask_policy = cmd.params.mask_policy;
  // The planes as stored (float32 in desispec's files): both backends take them, so the
  // host neither widens nor zero-fills 2 x 8 bytes a pixel (widened below if one does not).
  popts.keep_float32 = true;
  SPEXD_ASSIGN_OR_RETURN(core::PreprocImage image, core::ReadPreproc(cmd.input, popts));
  // -f/--fibermap replaces the image's FIBERMAP (desi_extract_spectra reads it instead).
  if (!cmd.fibermap.empty()) {
    SPEXD_ASSIGN_OR_RETURN(image.fibermap_fits, core::ReadFibermapFile(cmd.fibermap));
  }
  core::ExtractionParams params = cmd.params;
  SPEXD_ASSIGN_OR_RETURN(core::BarycentricGrid bary,
                         core::ApplyBarycentricCorrection(plan, image.image_header,
                                                          image.fibermap_fits, &params));
  // The corrected grid is a new request: validated once more, into its own plan.
  if (bary.factor != 1.0) {
    SPEXD_ASSIGN_OR_RETURN(plan, core::ExtractionPlan::Create(params, *psf));
  }
  if (cmd.verbose) PrintParams(cmd, plan, bary.factor);
  // One frame only: spots are not kept after their bundle is done.
  SPEXD_ASSIGN_OR_RETURN(auto geometry, core::Geometry::Create(psf, plan, image.height, image.width,
                                                               /*cache_spots=*/false));
  core::BackendOptions bopts;
  bopts.kind = cmd.backend;
  bopts.threads = cmd.threads;
  if (const char* module = std::getenv("SPEXD_CUDA_MODULE")) bopts.cuda_module = module;
  SPEXD_ASSIGN_OR_RETURN(std::unique_ptr<core::Backend> backend, core::CreateBackend(bopts));
  if (image.has_float32_planes() && !core::TakesFloat32Planes(*backend)) core::WidenPlanes(&image);

  core::ExtractionJob job;
  job.geometry = geometry;
  job.image = &image;
  job.regularize = plan.params().regularize;
  job.psferr = plan.psferr();
  job.want_model = plan.params().want_model;
  const auto t1 = std::chrono::steady_clock::now();

  ProgressBar bar("extract", geometry->plan().nbundles, !cmd.quiet);
  int done = 0;
  core::ExtractionSummary summary;
  SPEXD_ASSIGN_OR_RETURN(
      core::Frame frame,
      core::ExtractFrame(*backend, job, [&](const core::BundleResult&) { bar.Update(++done); },
                         &summary));
  bar.Finish();
  if (cmd.params.mask_policy == core::MaskPolicy::kDesispecExact) {
    core::ComputeSpecMask(&frame, cmd.params.mask_policy);  // desispec's exact ALLBADPIX rule
  }
  const auto t2 = std::chrono::steady_clock::now();

  if (bary.factor != 1.0) frame.wave = bary.wave;  // the frame keeps the uncorrected grid
  core::FrameMetadata meta;
  meta.heliocor = bary.factor;
  meta.scores = cmd.params.scores;
  meta.image_header = image.image_header;
  meta.fibermap_fits = image.fibermap_fits;
  meta.in_psf = cmd.psf;
  meta.in_img = cmd.input;
  meta.orig_psf = psf->in_psf().value_or("");
  const core::GridRequest& grid = bary.grid;
  meta.wmin = grid.wmin;
  meta.wmax = grid.wmax;
  meta.dw = grid.dw;
  const core::FitsWriteOptions write_options = FileWriteOptions(cmd);
  SPEXD_ASSIGN_OR_RETURN(std::string bytes, core::FrameToFits(frame, meta, write_options));
  SPEXD_RETURN_IF_ERROR(core::WriteFitsAtomically(cmd.output, bytes, cmd.threads));
  if (!cmd.model.empty()) {
    SPEXD_ASSIGN_OR_RETURN(std::string model_bytes,
                           core::ModelToFits(frame, meta, write_options));
    SPEXD_RETURN_IF_ERROR(core::WriteFitsAtomically(cmd.model, model_bytes, cmd.threads));
  }
  const auto t3 = std::chrono::steady_clock::now();
  auto secs = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
  std::fprintf(stderr,
               "spexctl: %d spectra x %d wavelengths with %s: load %.2f s, extract %.2f s, write "
               "%.2f s; patches %lld extracted, %lld skipped, %lld retried, %lld failed\n",
               frame.nspec, frame.nwave, backend->description().c_str(), secs(t0, t1), secs(t1, t2),
               secs(t2, t3), static_cast<long long>(summary.counts.extracted),
               static_cast<long long>(summary.counts.skipped),
               static_cast<long long>(summary.counts.retried),
               static_cast<long long>(summary.counts.failed));
  return absl::OkStatus();
}

}  // namespace spexd::client
