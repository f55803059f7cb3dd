// File side of the simulator (core/sim/simulator.h): input spectra, preproc and truth files.
#include <fitsio.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/io/fits_file.h"
#include "core/sim/simulator.h"
#include "core/base/status_macros.h"

namespace spexd::core {
namespace {

// One binary-table column: numeric `data` of CFITSIO `type`, or for TSTRING a
// `const std::vector<std::string>*`.
struct Column {
  const char* name;
  const char* tform;
  int type;
  const void* data;
};

absl::Status AppendTable(FitsFile& file, const char* extname, long nrows,
                         const std::vector<Column>& cols) {
  std::vector<char*> ttype, tform;
  for (const Column& c : cols) {
    ttype.push_back(const_cast<char*>(c.name));
    tform.push_back(const_cast<char*>(c.tform));
  }
  int status = 0;
  fits_create_tbl(file.get(), BINARY_TBL, nrows, static_cast<int>(cols.size()), ttype.data(),
                  tform.data(), nullptr, extname, &status);
  for (std::size_t i = 0; i < cols.size() && status == 0 && nrows > 0; ++i) {
    const int colnum = static_cast<int>(i) + 1;
    if (cols[i].type == TSTRING) {
      const auto& strings = *static_cast<const std::vector<std::string>*>(cols[i].data);
      std::vector<char*> ptrs;
      for (const std::string& s : strings) ptrs.push_back(const_cast<char*>(s.c_str()));
      fits_write_col(file.get(), TSTRING, colnum, 1, 1, nrows, ptrs.data(), &status);
    } else {
      fits_write_col(file.get(), cols[i].type, colnum, 1, 1, nrows,
                     const_cast<void*>(cols[i].data), &status);
    }
  }
  if (status != 0) return file.Error(status, absl::StrCat("writing table ", extname));
  return absl::OkStatus();
}

// Writes through `body` into "<path>.tmp-<pid>" and renames it over `path` only when
// everything (including the final flush) succeeded, so readers never see a partial file.
absl::Status WriteAtomically(const std::string& path,
                             const std::function<absl::Status(FitsFile&)>& body) {
  const std::string tmp = absl::StrCat(path, ".tmp-", static_cast<long>(getpid()));
  absl::Status st;
  {
    absl::StatusOr<FitsFile> file = FitsFile::Create(tmp);
    if (!file.ok()) return file.status();
    st = body(*file);
    absl::Status closed = file->Close();
    if (st.ok()) st = closed;
  }
  if (st.ok() && std::rename(tmp.c_str(), path.c_str()) != 0) {
    st = absl::InternalError(
        absl::StrCat("cannot rename ", tmp, " to ", path, ": ", std::strerror(errno)));
  }
  if (!st.ok()) std::remove(tmp.c_str());
  return st;
}

std::string GridText(const SimOptions& o) {
  return absl::StrFormat("%.10g,%.10g,%.10g", o.wmin, o.wmax, o.dw);
}

absl::Status WriteSimKeys(FitsFile& f, const SimOptions& o) {
  SPEXD_RETURN_IF_ERROR(f.WriteKey("SIMWAVE", GridText(o), "output grid wmin,wmax,dw"));
  if (o.seed <= static_cast<uint64_t>(std::numeric_limits<long>::max())) {
    SPEXD_RETURN_IF_ERROR(f.WriteKey("SIMSEED", static_cast<long>(o.seed), "random seed"));
  } else {
    SPEXD_RETURN_IF_ERROR(f.WriteKey("SIMSEED", std::to_string(o.seed), "random seed"));
  }
  SPEXD_RETURN_IF_ERROR(f.WriteKey("SIMOVERS", long{o.oversample}, "sub-bins per output bin"));
  SPEXD_RETURN_IF_ERROR(f.WriteKey("SIMFIBMN", long{o.fiber_begin}, "first lit fiber"));
  SPEXD_RETURN_IF_ERROR(
      f.WriteKey("SIMFIBMX", long{o.fiber_begin + o.nfibers - 1}, "last lit fiber"));
  return f.WriteKey("SIMCODE", std::string("spexd-sim"), "simulator");
}

// OBJTYPE of a FIBERS table (a truth file), so that sky fibres stay sky fibres.
void ReadObjTypes(FitsFile& in, SimSpectra* s) {
  if (!in.MoveToHdu("FIBERS").ok() || !in.CheckHduComplete().ok()) return;
  int status = 0, col = 0, type = 0;
  long nrows = 0, repeat = 0, width = 0;
  fits_get_num_rows(in.get(), &nrows, &status);
  fits_get_colnum(in.get(), CASEINSEN, const_cast<char*>("OBJTYPE"), &col, &status);
  if (status == 0) fits_get_coltype(in.get(), col, &type, &repeat, &width, &status);
  if (status != 0 || nrows != s->nfibers || type != TSTRING || width > 64) {
    fits_clear_errmsg();
    return;
  }
  char buf[80];
  for (long r = 0; r < nrows && status == 0; ++r) {
    char* p = buf;
    fits_read_col_str(in.get(), col, r + 1, 1, 1, nullptr, &p, nullptr, &status);
    if (status == 0) {
      s->objtype[static_cast<std::size_t>(r)] = std::string(absl::StripAsciiWhitespace(buf));
    }
  }
  fits_clear_errmsg();
}

}  // namespace

absl::StatusOr<SimSpectra> ReadSpectra(const std::string& path, const SimOptions& o) {
  SPEXD_ASSIGN_OR_RETURN(SimSpectra s, MakeSimSpectra(o));
  SPEXD_ASSIGN_OR_RETURN(FitsFile in, FitsFile::OpenRead(path));
  auto move = [&](const char* hdu) -> absl::Status {
    absl::Status st = in.MoveToHdu(hdu);
    if (absl::IsNotFound(st)) return absl::InvalidArgumentError(st.message());
    if (st.ok()) st = in.CheckHduComplete();
    return st;
  };
  SPEXD_RETURN_IF_ERROR(move("WAVELENGTH"));
  SPEXD_ASSIGN_OR_RETURN(FitsFile::ImageInfo winfo, in.GetImageInfo());
  SPEXD_ASSIGN_OR_RETURN(std::vector<double> wave, in.ReadImage<double>());
  if (winfo.naxes.size() != 1 || wave.size() < 2) return in.Invalid("expected a 1-D grid");
  for (std::size_t i = 0; i < wave.size(); ++i) {
    if (!std::isfinite(wave[i]) || (i > 0 && !(wave[i] > wave[i - 1]))) {
      return in.Invalid("wavelengths must be finite and increasing");
    }
  }
  SPEXD_RETURN_IF_ERROR(move("FLUX"));
  SPEXD_ASSIGN_OR_RETURN(FitsFile::ImageInfo info, in.GetImageInfo());
  if (info.naxes.size() != 2 || static_cast<std::size_t>(info.naxes[0]) != wave.size() ||
      info.naxes[1] != o.nfibers) {
    return in.Invalid(absl::StrCat("expected FLUX [", o.nfibers, "][", wave.size(),
                                   "] (nfibers x WAVELENGTH)"));
  }
  if (std::optional<double> specmin = in.ReadOptionalDouble("SPECMIN");
      specmin.has_value() && *specmin != o.fiber_begin) {
    return in.Invalid(absl::StrCat("SPECMIN = ", *specmin, " but fibres start at ",
                                   o.fiber_begin));
  }
  SPEXD_ASSIGN_OR_RETURN(std::vector<double> flux, in.ReadImage<double>());
  for (double v : flux) {
    if (!std::isfinite(v)) return in.Invalid("non-finite FLUX value");
  }
  // Linear interpolation; a fine point equal to a node takes the node value exactly.
  const std::size_t nf = s.fine_wave.size();
  for (int f = 0; f < o.nfibers; ++f) {
    const double* src = flux.data() + static_cast<std::size_t>(f) * wave.size();
    for (std::size_t k = 0; k < nf; ++k) {
      const double x = s.fine_wave[k];
      if (x < wave.front() || x > wave.back()) continue;
      const std::size_t j = static_cast<std::size_t>(
          std::upper_bound(wave.begin(), wave.end(), x) - wave.begin() - 1);
      double& out = s.fine_flux[static_cast<std::size_t>(f) * nf + k];
      if (x == wave[j]) {
        out = src[j];
      } else {
        const double t = (x - wave[j]) / (wave[j + 1] - wave[j]);
        out = src[j] + t * (src[j + 1] - src[j]);
      }
    }
  }
  ReadObjTypes(in, &s);
  FillTruthFlux(&s);
  return s;
}


absl::Status WritePreproc(const std::string& path, const Psf& psf, const SimSpectra& spectra,
                          const SimFrame& frame, const SimOptions& o) {
  SPEXD_RETURN_IF_ERROR(ValidateSimOptions(psf, o));
  const std::size_t npix = static_cast<std::size_t>(frame.height) * frame.width;
  if (frame.image.size() != npix || frame.ivar.size() != npix || frame.mask.size() != npix ||
      spectra.nfibers != o.nfibers) {
    return absl::InvalidArgumentError("WritePreproc: frame or spectra inconsistent");
  }
  return WriteAtomically(path, [&](FitsFile& f) -> absl::Status {
    const std::vector<long> naxes = {frame.width, frame.height};
    // IMAGE is the primary HDU, with EXTNAME, as desispec writes it (spec §5.1).
    SPEXD_RETURN_IF_ERROR(f.WriteImage<float>("IMAGE", naxes, frame.image.data()));
    SPEXD_RETURN_IF_ERROR(f.WriteKey("CAMERA", o.camera, "Spectrograph Camera"));
    const char digit = o.camera.back();
    if (digit >= '0' && digit <= '9') {
      SPEXD_RETURN_IF_ERROR(f.WriteKey("SPECGRPH", long{digit - '0'}, "Spectrograph number"));
    }
    SPEXD_RETURN_IF_ERROR(f.WriteKey("EXPID", 0L, "Exposure number (simulated)"));
    SPEXD_RETURN_IF_ERROR(f.WriteKey("EXPTIME", 900.0, "Exposure time [s] (nominal)"));
    SPEXD_RETURN_IF_ERROR(f.WriteKey("OBSTYPE", std::string("SCIENCE"), nullptr));
    SPEXD_RETURN_IF_ERROR(f.WriteKey("FLAVOR", std::string("science"), nullptr));
    SPEXD_RETURN_IF_ERROR(f.WriteKey("BUNIT", std::string("electron"), "Units of IMAGE"));
    SPEXD_RETURN_IF_ERROR(f.WriteKey("DETECTOR", std::string("SIMULATED"), "spexd-sim"));
    const char* amps[4] = {"RDNOISEA", "RDNOISEB", "RDNOISEC", "RDNOISED"};
    for (std::size_t a = 0; a < 4; ++a) {
      const double rn = o.read_noise[o.read_noise.size() == 1 ? 0 : a];
      SPEXD_RETURN_IF_ERROR(f.WriteKey(amps[a], rn, "read noise [e-]"));
    }
    // desispec.io.read_image needs an RDNOISE key or a READNOISE HDU (written below).
    if (o.read_noise.size() == 1) {
      SPEXD_RETURN_IF_ERROR(f.WriteKey("RDNOISE", o.read_noise[0], "Read noise [RMS electrons/pixel]"));
    }
    const std::string psf_name = psf.source_name().substr(psf.source_name().rfind('/') + 1);
    SPEXD_RETURN_IF_ERROR(f.WriteKey("SIMPSF", psf_name, "PSF used for the simulation"));
    SPEXD_RETURN_IF_ERROR(f.WriteKey(
        "SIMNOISE", std::string(o.noise == SimNoise::kPoisson ? "poisson" : "none"), nullptr));
    SPEXD_RETURN_IF_ERROR(
        f.WriteKey("SIMIVAR", std::string("model"), "IVAR = 1/(max(model,0) + rn^2)"));
    SPEXD_RETURN_IF_ERROR(f.WriteKey("SIMPHOT", frame.photons_in, "photons projected"));
    SPEXD_RETURN_IF_ERROR(WriteSimKeys(f, o));
    SPEXD_RETURN_IF_ERROR(f.WriteImage<float>("IVAR", naxes, frame.ivar.data()));
    // MASK tile-compressed like desispec's (spec §5.1); CFITSIO compresses on write.
    int status = 0;
    fits_set_compression_type(f.get(), RICE_1, &status);
    if (status != 0) return f.Error(status, "enabling compression");
    SPEXD_RETURN_IF_ERROR(f.WriteImage<int16_t>("MASK", naxes, frame.mask.data()));
    fits_set_compression_type(f.get(), NOCOMPRESS, &status);
    // READNOISE: per-pixel read noise, the HDU desispec.io.write_image adds before FIBERMAP.
    // Uncompressed: CFITSIO takes any nonzero request (NOCOMPRESS too) as tile compression.
    fits_set_compression_type(f.get(), 0, &status);
    if (status != 0) return f.Error(status, "disabling compression");
    std::vector<float> readnoise(static_cast<std::size_t>(frame.width) * frame.height);
    for (int y = 0; y < frame.height; ++y) {
      for (int x = 0; x < frame.width; ++x) {
        readnoise[static_cast<std::size_t>(y) * frame.width + x] =
            static_cast<float>(SimReadNoise(o, psf.npix_y(), psf.npix_x(), y, x));
      }
    }
    SPEXD_RETURN_IF_ERROR(f.WriteImage<float>("READNOISE", naxes, readnoise.data()));
    SPEXD_RETURN_IF_ERROR(f.WriteKey("BUNIT", std::string("electron"), "read noise per pixel"));
    // FIBERMAP: one row per PSF fibre; fibres not simulated are unassigned (NON, bit 0).
    const int nspec = psf.nspec();
    std::vector<int32_t> fiber(static_cast<std::size_t>(nspec)), status_bits(fiber.size(), 1);
    std::vector<int64_t> targetid(fiber.size(), -1);
    std::vector<std::string> objtype(fiber.size(), "NON");
    for (int i = 0; i < nspec; ++i) {
      const std::size_t k = static_cast<std::size_t>(i);
      fiber[k] = i;
      const int f_local = i - o.fiber_begin;
      if (f_local >= 0 && f_local < o.nfibers) {
        status_bits[k] = 0;
        targetid[k] = spectra.targetid[static_cast<std::size_t>(f_local)];
        objtype[k] = spectra.objtype[static_cast<std::size_t>(f_local)];
      }
    }
    return AppendTable(f, "FIBERMAP", nspec,
                       {{"FIBER", "J", TINT, fiber.data()},
                        {"TARGETID", "K", TLONGLONG, targetid.data()},
                        {"OBJTYPE", "3A", TSTRING, &objtype},
                        {"FIBERSTATUS", "J", TINT, status_bits.data()}});
  });
}

absl::Status WriteTruth(const std::string& path, const SimSpectra& spectra,
                        const SimFrame& frame, const SimOptions& o) {
  const std::size_t nwave = spectra.wave.size();
  if (spectra.flux.size() != nwave * static_cast<std::size_t>(spectra.nfibers)) {
    return absl::InvalidArgumentError("WriteTruth: FLUX not filled (see FillTruthFlux)");
  }
  return WriteAtomically(path, [&](FitsFile& f) -> absl::Status {
    SPEXD_RETURN_IF_ERROR(f.WriteImage<double>(
        "FLUX", {static_cast<long>(nwave), spectra.nfibers}, spectra.flux.data()));
    SPEXD_RETURN_IF_ERROR(f.WriteKey("BUNIT", std::string("photon/Angstrom"),
                                     "bin-averaged input density, before resolution"));
    SPEXD_RETURN_IF_ERROR(f.WriteKey("SPECMIN", long{spectra.fiber_begin}, nullptr));
    SPEXD_RETURN_IF_ERROR(f.WriteKey("NSPEC", long{spectra.nfibers}, nullptr));
    SPEXD_RETURN_IF_ERROR(f.WriteKey("SIMPHOT", frame.photons_in, "photons projected"));
    SPEXD_RETURN_IF_ERROR(WriteSimKeys(f, o));
    SPEXD_RETURN_IF_ERROR(
        f.WriteImage<double>("WAVELENGTH", {static_cast<long>(nwave)}, spectra.wave.data()));
    SPEXD_RETURN_IF_ERROR(f.WriteKey("BUNIT", std::string("Angstrom"), nullptr));
    std::vector<int32_t> fiber;
    for (int i = 0; i < spectra.nfibers; ++i) fiber.push_back(spectra.fiber_begin + i);
    SPEXD_RETURN_IF_ERROR(AppendTable(f, "FIBERS", spectra.nfibers,
                                      {{"FIBER", "J", TINT, fiber.data()},
                                       {"TARGETID", "K", TLONGLONG, spectra.targetid.data()},
                                       {"OBJTYPE", "3A", TSTRING, &spectra.objtype},
                                       {"SIMTYPE", "5A", TSTRING, &spectra.simtype}}));
    if (frame.defects.empty()) return absl::OkStatus();
    std::vector<int32_t> x, y;
    std::vector<double> electrons;
    std::vector<int16_t> mask;
    for (const SimDefect& d : frame.defects) {
      x.push_back(d.x);
      y.push_back(d.y);
      electrons.push_back(d.electrons);
      mask.push_back(d.mask);
    }
    return AppendTable(f, "DEFECTS", static_cast<long>(x.size()),
                       {{"X", "J", TINT, x.data()},
                        {"Y", "J", TINT, y.data()},
                        {"ELECTRONS", "D", TDOUBLE, electrons.data()},
                        {"MASK", "I", TSHORT, mask.data()}});
  });
}

}  // namespace spexd::core
