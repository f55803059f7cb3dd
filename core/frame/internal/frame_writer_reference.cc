#include "core/frame/internal/frame_writer_reference.h"

#include <cstdint>
#include <vector>

#include "core/base/status_macros.h"
#include "core/frame/internal/frame_hdus.h"
#include "core/io/fits_file.h"

namespace spexd::core::internal {
namespace {

std::vector<float> ToFloat(const std::vector<double>& v) {
  return std::vector<float>(v.begin(), v.end());
}

absl::Status Checksum(FitsFile* f) {
  int status = 0;
  fits_write_chksum(f->get(), &status);
  if (status != 0) return f->Error(status, "writing CHECKSUM");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> FrameToFitsReference(const Frame& frame, const FrameMetadata& meta) {
  const long ns = frame.nspec, nw = frame.nwave, nk = 2 * frame.ndiag + 1;
  SPEXD_ASSIGN_OR_RETURN(FitsFile f, FitsFile::CreateMemory("frame"));
  auto flux = ToFloat(frame.flux);
  SPEXD_RETURN_IF_ERROR(f.WriteImage<float>("FLUX", {nw, ns}, flux.data()));
  SPEXD_RETURN_IF_ERROR(WriteFrameHeader(&f, frame, meta));
  SPEXD_RETURN_IF_ERROR(Checksum(&f));
  auto ivar = ToFloat(frame.ivar);
  SPEXD_RETURN_IF_ERROR(f.WriteImage<float>("IVAR", {nw, ns}, ivar.data()));
  SPEXD_RETURN_IF_ERROR(Checksum(&f));
  SPEXD_RETURN_IF_ERROR(f.WriteImage<uint32_t>("MASK", {nw, ns}, frame.mask.data()));
  SPEXD_RETURN_IF_ERROR(ScaleCardsInAstropyOrder(&f));
  SPEXD_RETURN_IF_ERROR(Checksum(&f));
  SPEXD_RETURN_IF_ERROR(f.WriteImage<double>("WAVELENGTH", {nw}, frame.wave.data()));
  SPEXD_RETURN_IF_ERROR(f.WriteKey("BUNIT", std::string("Angstrom"), nullptr));
  SPEXD_RETURN_IF_ERROR(Checksum(&f));
  auto res = ToFloat(frame.rdiags);
  SPEXD_RETURN_IF_ERROR(f.WriteImage<float>("RESOLUTION", {nw, nk, ns}, res.data()));
  SPEXD_RETURN_IF_ERROR(Checksum(&f));
  if (!meta.fibermap_fits.empty()) {
    SPEXD_RETURN_IF_ERROR(AppendFibermap(&f, frame, meta));
    SPEXD_RETURN_IF_ERROR(Checksum(&f));
  }
  auto chi2 = ToFloat(frame.chi2pix);
  SPEXD_RETURN_IF_ERROR(f.WriteImage<float>("CHI2PIX", {nw, ns}, chi2.data()));
  SPEXD_RETURN_IF_ERROR(Checksum(&f));
  const std::vector<FrameScore> scores = ScoresToWrite(frame, meta);
  if (!scores.empty()) {
    SPEXD_RETURN_IF_ERROR(AppendScores(&f, scores, ns));
    SPEXD_RETURN_IF_ERROR(Checksum(&f));
  }
  return f.TakeMemory();
}

absl::StatusOr<std::string> ModelToFitsReference(const Frame& frame, const FrameMetadata& meta) {
  if (frame.model.empty()) return absl::FailedPreconditionError("frame has no model image");
  SPEXD_ASSIGN_OR_RETURN(FitsFile f, FitsFile::CreateMemory("model"));
  SPEXD_RETURN_IF_ERROR(f.WriteImage<double>(
      "IMAGE", {static_cast<long>(frame.model_width), static_cast<long>(frame.model_height)},
      frame.model.data()));
  SPEXD_RETURN_IF_ERROR(WriteFrameHeader(&f, frame, meta));
  int status = 0;
  fits_delete_key(f.get(), "EXTEND", &status);  // one HDU: desispec's file has no EXTEND
  if (status != 0) return f.Error(status, "writing the model header");
  SPEXD_RETURN_IF_ERROR(Checksum(&f));
  return f.TakeMemory();
}

}  // namespace spexd::core::internal
