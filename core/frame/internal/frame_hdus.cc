#include "core/frame/internal/frame_hdus.h"

#include <optional>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/base/status_macros.h"
#include "core/base/version.h"
#include "core/frame/desi_conventions.h"
#include "core/io/preproc.h"

namespace spexd::core::internal {
namespace {

#define SPEXD_STRINGIFY_INNER(x) #x
#define SPEXD_STRINGIFY(x) SPEXD_STRINGIFY_INNER(x)
constexpr const char* kCfitsioVersion = SPEXD_STRINGIFY(CFITSIO_MAJOR) "." SPEXD_STRINGIFY(
    CFITSIO_MINOR) "." SPEXD_STRINGIFY(CFITSIO_MICRO);

// desiutil.depend.setdep: update the DEPVERnn of `name` when a DEPNAMnn already names it
// (e.g. copied from the input image header), else use the first free nn in 00..99.
absl::Status SetDependency(FitsFile* f, const std::string& name, const std::string& version) {
  for (int i = 0; i < 100; ++i) {
    const std::string nk = absl::StrFormat("DEPNAM%02d", i);
    const std::string vk = absl::StrFormat("DEPVER%02d", i);
    std::optional<std::string> existing = f->ReadOptionalString(nk.c_str());
    if (existing.has_value() && *existing != name) continue;
    if (!existing.has_value()) SPEXD_RETURN_IF_ERROR(f->WriteKey(nk.c_str(), name, nullptr));
    return f->WriteKey(vk.c_str(), version, nullptr);
  }
  return absl::OkStatus();  // 100 dependencies already recorded: desiutil gives up silently too
}

// The input's IMAGE cards without the COMMENT cards the new HDU already has (CFITSIO
// writes the standard FITS COMMENT pair on every primary HDU, and so does the input's).
std::vector<std::string> NewCards(FitsFile* f, const std::vector<std::string>& cards) {
  std::vector<std::string> existing;
  int nkeys = 0, more = 0, status = 0;
  fits_get_hdrspace(f->get(), &nkeys, &more, &status);
  char record[FLEN_CARD];
  for (int i = 1; status == 0 && i <= nkeys; ++i) {
    if (fits_read_record(f->get(), i, record, &status) == 0 && absl::StartsWith(record, "COMMENT")) {
      existing.emplace_back(record);
    }
  }
  std::vector<std::string> out;
  for (const std::string& card : cards) {
    std::string trimmed = card.substr(0, card.find_last_not_of(' ') + 1);
    bool dup = false;
    for (const std::string& e : existing) {
      dup |= absl::StartsWith(card, "COMMENT") && e.substr(0, e.find_last_not_of(' ') + 1) == trimmed;
    }
    if (!dup) out.push_back(card);
  }
  return out;
}

// A float32 image HDU whose data the assembly encodes from `values`.
HduSource Float32Image(const char* extname, std::vector<long> naxes,
                       const std::vector<double>& values) {
  HduSource h;
  h.build = [extname, naxes](FitsFile& f) { return f.CreateImage<float>(extname, naxes); };
  h.encoding = HduSource::Encoding::kFloat32;
  h.values = values.data();
  h.count = values.size();
  return h;
}

}  // namespace

FrameHduList FrameHduSources(const Frame& frame, const FrameMetadata& meta,
                             const std::vector<FrameScore>& scores) {
  const long ns = frame.nspec, nw = frame.nwave, nk = 2 * frame.ndiag + 1;
  FrameHduList out;
  auto add = [&out](FrameHdu kind, HduSource h) {
    out.hdus.push_back(std::move(h));
    out.kinds.push_back(kind);
  };
  HduSource flux = Float32Image("FLUX", {nw, ns}, frame.flux);
  flux.primary = true;
  flux.build = [&frame, &meta, nw, ns](FitsFile& f) {
    SPEXD_RETURN_IF_ERROR(f.CreateImage<float>("FLUX", {nw, ns}));
    return WriteFrameHeader(&f, frame, meta);
  };
  add(FrameHdu::kFlux, std::move(flux));
  add(FrameHdu::kIvar, Float32Image("IVAR", {nw, ns}, frame.ivar));
  HduSource mask;
  mask.build = [nw, ns](FitsFile& f) {
    SPEXD_RETURN_IF_ERROR(f.CreateImage<uint32_t>("MASK", {nw, ns}));
    return ScaleCardsInAstropyOrder(&f);
  };
  mask.encoding = HduSource::Encoding::kUint32WithZero;
  mask.values = frame.mask.data();
  mask.count = frame.mask.size();
  add(FrameHdu::kMask, std::move(mask));
  HduSource wave;
  wave.build = [&frame, nw](FitsFile& f) {
    SPEXD_RETURN_IF_ERROR(f.WriteImage<double>("WAVELENGTH", {nw}, frame.wave.data()));
    return f.WriteKey("BUNIT", std::string("Angstrom"), nullptr);
  };
  add(FrameHdu::kWavelength, std::move(wave));
  add(FrameHdu::kResolution, Float32Image("RESOLUTION", {nw, nk, ns}, frame.rdiags));
  if (!meta.fibermap_fits.empty()) {
    HduSource fibermap;
    fibermap.build = [&frame, &meta](FitsFile& f) { return AppendFibermap(&f, frame, meta); };
    add(FrameHdu::kFibermap, std::move(fibermap));
  }
  add(FrameHdu::kChi2pix, Float32Image("CHI2PIX", {nw, ns}, frame.chi2pix));
  if (!scores.empty()) {
    HduSource table;
    table.build = [&scores, ns](FitsFile& f) { return AppendScores(&f, scores, ns); };
    add(FrameHdu::kScores, std::move(table));
  }
  return out;
}

absl::Status WriteFrameHeader(FitsFile* f, const Frame& frame, const FrameMetadata& meta) {
  SPEXD_RETURN_IF_ERROR(f->WriteCards(NewCards(f, meta.image_header)));
  if (meta.heliocor != 1.0) SPEXD_RETURN_IF_ERROR(f->WriteKey("HELIOCOR", meta.heliocor, nullptr));
  SPEXD_RETURN_IF_ERROR(f->WriteKey("NSPEC", static_cast<long>(frame.nspec), "Number of spectra"));
  SPEXD_RETURN_IF_ERROR(f->WriteKey("WAVEMIN", meta.wmin, "First wavelength [Angstroms]"));
  SPEXD_RETURN_IF_ERROR(f->WriteKey("WAVEMAX", meta.wmax, "Last wavelength [Angstroms]"));
  SPEXD_RETURN_IF_ERROR(f->WriteKey("WAVESTEP", meta.dw, "Wavelength step size [Angstroms]"));
  SPEXD_RETURN_IF_ERROR(f->WriteKey("SPECTER", std::string(kSpexdVersion), "spexd version"));
  SPEXD_RETURN_IF_ERROR(f->WriteKey("IN_PSF", ShortenDesiPath(meta.in_psf), "Input spectral PSF"));
  SPEXD_RETURN_IF_ERROR(f->WriteKey("IN_IMG", ShortenDesiPath(meta.in_img), nullptr));
  // Provenance: the software that made and wrote the numbers (the same for a local run,
  // the server and spexctl over the server), then desiutil's environment entries.
  SPEXD_RETURN_IF_ERROR(SetDependency(f, "spexd", kSpexdVersion));
  SPEXD_RETURN_IF_ERROR(SetDependency(f, "cfitsio", kCfitsioVersion));
  for (const auto& [name, value] : DesiEnvironmentDependencies()) {
    SPEXD_RETURN_IF_ERROR(SetDependency(f, name, value));
  }
  if (!meta.orig_psf.empty()) SPEXD_RETURN_IF_ERROR(f->WriteKey("ORIG_PSF", meta.orig_psf, nullptr));
  SPEXD_RETURN_IF_ERROR(f->WriteKey("BUNIT", std::string("electron/Angstrom"), nullptr));
  SPEXD_RETURN_IF_ERROR(f->WriteKey("FIBERMIN", static_cast<long>(frame.specmin), nullptr));
  return absl::OkStatus();
}

absl::Status ScaleCardsInAstropyOrder(FitsFile* f) {
  int status = 0, nkeys = 0, position = 0;
  char bscale[FLEN_CARD], bzero[FLEN_CARD];
  fits_read_card(f->get(), "BSCALE", bscale, &status);
  fits_delete_key(f->get(), "BSCALE", &status);
  fits_read_card(f->get(), "BZERO", bzero, &status);
  fits_get_hdrpos(f->get(), &nkeys, &position, &status);  // position: the card after BZERO
  fits_insert_record(f->get(), position - 1, bscale, &status);
  if (status != 0) return f->Error(status, "ordering BSCALE/BZERO");
  return absl::OkStatus();
}

absl::Status AppendScores(FitsFile* f, const std::vector<FrameScore>& scores, long nspec) {
  if (scores.empty()) return absl::OkStatus();
  std::vector<char*> ttype, tform;
  char format[] = "D";
  for (const FrameScore& s : scores) {
    ttype.push_back(const_cast<char*>(s.name.c_str()));
    tform.push_back(format);
  }
  int status = 0;
  fits_create_tbl(f->get(), BINARY_TBL, nspec, static_cast<int>(scores.size()), ttype.data(),
                  tform.data(), nullptr, "SCORES", &status);
  for (std::size_t c = 0; status == 0 && c < scores.size(); ++c) {
    const std::string key = absl::StrCat("TTYPE", c + 1);
    fits_modify_comment(f->get(), key.c_str(), scores[c].comment.c_str(), &status);
    fits_write_col(f->get(), TDOUBLE, static_cast<int>(c + 1), 1, 1, nspec,
                   const_cast<double*>(scores[c].values.data()), &status);
  }
  if (status != 0) return f->Error(status, "writing SCORES");
  return absl::OkStatus();
}

absl::Status AppendFibermap(FitsFile* out, const Frame& frame, const FrameMetadata& meta) {
  if (meta.fibermap_fits.empty()) return absl::OkStatus();
  SPEXD_ASSIGN_OR_RETURN(FitsFile in, FitsFile::OpenMemory(meta.fibermap_fits.data(),
                                                           meta.fibermap_fits.size(), "FIBERMAP"));
  SPEXD_RETURN_IF_ERROR(CheckFibermapRows(meta.fibermap_fits, frame.specmin, frame.nspec));
  SPEXD_RETURN_IF_ERROR(in.MoveToHdu("FIBERMAP"));
  long nrows = 0;
  int status = 0;
  fits_get_num_rows(in.get(), &nrows, &status);
  if (status != 0) return in.Error(status, "reading FIBERMAP rows");
  // The whole table, then drop the rows of fibres not extracted (desispec slices the
  // fibermap to the frame's fibres).
  fits_copy_hdu(in.get(), out->get(), 0, &status);
  const long last = frame.specmin + frame.nspec;
  if (status == 0 && nrows > last) fits_delete_rows(out->get(), last + 1, nrows - last, &status);
  if (status == 0 && frame.specmin > 0) fits_delete_rows(out->get(), 1, frame.specmin, &status);
  // desispec writes the fibermap's header keys (an astropy Table's meta) before EXTNAME.
  char extname[FLEN_CARD];
  if (status == 0 && fits_read_card(out->get(), "EXTNAME", extname, &status) == 0) {
    fits_delete_key(out->get(), "EXTNAME", &status);
    fits_write_record(out->get(), extname, &status);
  }
  if (status != 0) return out->Error(status, "copying FIBERMAP");
  return NulPadTableStrings(out);
}

std::vector<FrameScore> ScoresToWrite(const Frame& frame, const FrameMetadata& meta,
                                      TaskPool* pool, int max_workers) {
  if (!meta.scores) return {};
  return meta.given_scores.has_value() ? *meta.given_scores : RawScores(frame, pool, max_workers);
}

}  // namespace spexd::core::internal
