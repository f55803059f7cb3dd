// spexd-sim: simulates a DESI preproc frame by projecting spectra through a GaussHermite
// PSF (core/sim/simulator.h), and writes the truth spectra beside it.
//
//   spexd-sim --psf=psf-r0.fits --out=preproc.fits --truth=truth.fits
//             --fibers=0,500 --wavelength=5760.0,7620.0,0.8 --seed=1 --noise=poisson
// The CCD is the PSF's (NPIX_Y x NPIX_X: 4096 x 4096 for b, 4128 x 4114 for r and z);
// without --wavelength the grid is the DESI production grid of the PSF's arm.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/base/program_help.h"
#include "core/io/psf.h"
#include "core/plan/desi_cameras.h"
#include "core/sim/psf_stand_in.h"
#include "core/sim/simulator.h"
#include "core/base/status_macros.h"

ABSL_FLAG(std::string, psf, "", "GaussHermite PSF file (required)");
ABSL_FLAG(std::string, out, "", "output preproc FITS file (required)");
ABSL_FLAG(std::string, truth, "", "output truth FITS file (FLUX, WAVELENGTH, FIBERS); optional");
ABSL_FLAG(std::string, input, "",
          "input spectra FITS (FLUX [nfib][nwave] photons/A + WAVELENGTH), e.g. a truth "
          "file; default: built-in spectra chosen by --seed");
ABSL_FLAG(std::string, fibers, "0,500", "first fibre and fibre count");
ABSL_FLAG(std::string, wavelength, "",
          "output grid wmin,wmax,dw (Angstrom); default: the DESI production grid of the "
          "PSF's arm (b 3600.0,5800.0,0.8; r 5760.0,7620.0,0.8; z 7520.0,9824.0,0.8)");
ABSL_FLAG(uint64_t, seed, 0, "random seed (spectra, noise, defects)");
ABSL_FLAG(std::string, noise, "poisson", "poisson (Poisson + read noise) or none");
ABSL_FLAG(std::string, readnoise, "3.0", "read noise [e-]: one value or four (amps A,B,C,D)");
ABSL_FLAG(int, oversample, 1, "sub-bins per output bin in the projection");
ABSL_FLAG(int, hot_pixels, 0, "number of HOT pixels (flagged in MASK) to add");
ABSL_FLAG(int, threads, 0, "worker threads (0: all cores); results do not depend on it");
ABSL_FLAG(std::string, camera, "r0", "CAMERA keyword of the IMAGE header");
ABSL_FLAG(std::string, shift_traces, "",
          "dx,dy: simulate through a stand-in of --psf with every trace moved by (dx, dy) "
          "pixels, written to --psf_out (a distinct PSF per petal of an exposure)");
ABSL_FLAG(std::string, psf_out, "", "where --shift_traces writes its PSF (required with it)");

namespace {

using spexd::core::SimOptions;

absl::StatusOr<std::vector<double>> ParseNumbers(const std::string& flag,
                                                 const std::string& text) {
  std::vector<double> out;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    double v = 0;
    if (!absl::SimpleAtod(part, &v)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, "=", text, ": '", std::string(part), "' is not a number"));
    }
    out.push_back(v);
  }
  return out;
}

// The CCD size comes from the PSF (NPIX_X/NPIX_Y) and, without --wavelength, the grid
// from its arm (core/plan/desi_cameras.h): any camera simulates with the same flags.
absl::StatusOr<SimOptions> OptionsFromFlags(const spexd::core::Psf& psf) {
  SimOptions o;
  const std::string fibers = absl::GetFlag(FLAGS_fibers);
  std::vector<std::string> parts = absl::StrSplit(fibers, ',');
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &o.fiber_begin) ||
      !absl::SimpleAtoi(parts[1], &o.nfibers)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--fibers=", fibers, ": expected first,count (two integers)"));
  }
  std::string wave = absl::GetFlag(FLAGS_wavelength);
  if (wave.empty()) {
    SPEXD_ASSIGN_OR_RETURN(spexd::core::DesiArm arm, spexd::core::DesiArmForPsf(psf));
    wave = arm.GridText();
  }
  SPEXD_ASSIGN_OR_RETURN(std::vector<double> w, ParseNumbers("wavelength", wave));
  if (w.size() != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("--wavelength=", wave, ": expected wmin,wmax,dw"));
  }
  o.wmin = w[0];
  o.wmax = w[1];
  o.dw = w[2];
  SPEXD_ASSIGN_OR_RETURN(o.read_noise, ParseNumbers("readnoise", absl::GetFlag(FLAGS_readnoise)));
  const std::string noise = absl::GetFlag(FLAGS_noise);
  if (noise == "poisson") {
    o.noise = spexd::core::SimNoise::kPoisson;
  } else if (noise == "none") {
    o.noise = spexd::core::SimNoise::kNone;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--noise=", noise, ": expected poisson or none"));
  }
  o.seed = absl::GetFlag(FLAGS_seed);
  o.oversample = absl::GetFlag(FLAGS_oversample);
  o.num_hot_pixels = absl::GetFlag(FLAGS_hot_pixels);
  o.num_threads = absl::GetFlag(FLAGS_threads);
  o.camera = absl::GetFlag(FLAGS_camera);
  return o;
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

absl::Status Run() {
  const std::string psf_path = absl::GetFlag(FLAGS_psf), out = absl::GetFlag(FLAGS_out);
  if (psf_path.empty() || out.empty()) {
    return absl::InvalidArgumentError("--psf and --out are required (see --help)");
  }
  const auto start = std::chrono::steady_clock::now();
  std::string sim_psf = psf_path;
  if (const std::string shift = absl::GetFlag(FLAGS_shift_traces); !shift.empty()) {
    SPEXD_ASSIGN_OR_RETURN(std::vector<double> d, ParseNumbers("shift_traces", shift));
    sim_psf = absl::GetFlag(FLAGS_psf_out);
    if (d.size() != 2 || sim_psf.empty()) {
      return absl::InvalidArgumentError("--shift_traces=dx,dy needs two numbers and --psf_out");
    }
    SPEXD_RETURN_IF_ERROR(spexd::core::WriteShiftedPsf(psf_path, sim_psf, d[0], d[1]));
  } else if (!absl::GetFlag(FLAGS_psf_out).empty()) {
    return absl::InvalidArgumentError("--psf_out is written only with --shift_traces");
  }
  SPEXD_ASSIGN_OR_RETURN(spexd::core::Psf psf, spexd::core::Psf::Load(sim_psf));
  SPEXD_ASSIGN_OR_RETURN(SimOptions options, OptionsFromFlags(psf));
  SPEXD_RETURN_IF_ERROR(spexd::core::ValidateSimOptions(psf, options));
  const std::string input = absl::GetFlag(FLAGS_input);
  SPEXD_ASSIGN_OR_RETURN(spexd::core::SimSpectra spectra,
                         input.empty() ? spexd::core::GenerateSpectra(options)
                                       : spexd::core::ReadSpectra(input, options));
  const double t_spectra = Seconds(start);
  SPEXD_ASSIGN_OR_RETURN(spexd::core::SimFrame frame,
                         spexd::core::SimulateFrame(psf, spectra, options));
  const double t_frame = Seconds(start);
  SPEXD_RETURN_IF_ERROR(spexd::core::WritePreproc(out, psf, spectra, frame, options));
  const std::string truth = absl::GetFlag(FLAGS_truth);
  if (!truth.empty()) {
    SPEXD_RETURN_IF_ERROR(spexd::core::WriteTruth(truth, spectra, frame, options));
  }
  const double t_total = Seconds(start);
  const double max_model = *std::max_element(frame.model.begin(), frame.model.end());
  std::printf(
      "spexd-sim: fibres %d..%d, %zu wavelengths %.10g..%.10g (x%d), %dx%d CCD\n"
      "  photons in %.6g, on CCD %.6g, brightest model pixel %.6g e-\n"
      "  spectra %.2f s, projection+noise %.2f s, writing %.2f s, total %.2f s\n"
      "  wrote %s%s%s\n",
      options.fiber_begin, options.fiber_begin + options.nfibers - 1, spectra.wave.size(),
      spectra.wave.front(), spectra.wave.back(), options.oversample, frame.height, frame.width, frame.photons_in, frame.photons_on_ccd,
      max_model, t_spectra, t_frame - t_spectra, t_total - t_frame, t_total, out.c_str(),
      truth.empty() ? "" : " and ", truth.c_str());
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Simulates a DESI preproc frame through a GaussHermite PSF.\n"
      "  spexd-sim --psf=PSF.fits --out=preproc.fits [--truth=truth.fits] [--fibers=0,500]\n"
      "            [--wavelength=wmin,wmax,dw (default: the PSF arm's DESI grid)] [--seed=N]\n"
      "            [--noise=poisson|none]");
  // The flags are this file's (the file name does not match the program's, which is all
  // that Abseil's own --help lists).
  const auto own = [](absl::string_view file) { return absl::StrContains(file, "spexd_sim_main"); };
  if (spexd::core::PrintHelpIfAsked(argc, argv, own)) return 0;
  std::vector<char*> rest = absl::ParseCommandLine(argc, argv);
  if (rest.size() > 1) {
    std::fprintf(stderr, "spexd-sim: unexpected argument '%s' (see --help)\n", rest[1]);
    return 2;
  }
  absl::Status status = Run();
  if (!status.ok()) {
    std::fprintf(stderr, "spexd-sim: %s\n", status.ToString().c_str());
    return absl::IsInvalidArgument(status) ? 2 : 1;
  }
  return 0;
}
