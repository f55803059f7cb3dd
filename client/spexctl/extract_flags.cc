#include "client/spexctl/extract_flags.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/base/status_macros.h"

namespace spexd::client {

// Over 100 lines: one table row per flag (name, short name, value, help), so the whole
// command line reads in one place, in --help order.
const std::vector<FlagSpec>& ExtractFlagSpecs() {
  static const std::vector<FlagSpec> specs = {
      {"input", 'i', true, "input preproc image (FITS)"},
      {"psf", 'p', true, "input PSF (GaussHermite, specex PSFVER 3)"},
      {"output", 'o', true, "output frame file (desispec layout)"},
      {"model", 'm', true, "output model image file"},
      {"wavelength", 'w', true, "wmin,wmax,dw (default: PSF domain, 0.8)"},
      {"specmin", 's', true, "first spectrum (default 0)"},
      {"nspec", 'n', true, "number of spectra (default 500)"},
      {"bundlesize", 0, true, "spectra per bundle (default 25)"},
      {"nsubbundles", 0, true, "sub-bundles per bundle (default 5)"},
      {"nwavestep", 0, true, "wavelength bins per patch (default 50)"},
      {"wavepad", 0, true, "wavelength padding bins (default 10)"},
      {"psferr", 0, true, "PSF model error for chi2pix (default: PSF PSFERR, else 0.01)"},
      {"regularize", 'r', true, "regularisation (default 0)"},
      {"reproduce", 0, true,
       "gpu_specter_gpu|gpu_specter_cpu: which gpu_specter path's results to reproduce where "
       "they differ, extraction-spec §2.17 (default: desispec's choice on this node, the GPU "
       "path where the CUDA driver sees a device and neither --no-gpu nor $DESI_NO_GPU says "
       "otherwise; not where the work runs: that is --backend)"},
      {"compat", 0, true, "", "reproduce"},
      {"mask-policy", 0, true, "desispec|desispec-exact|any: MASK bits that zero ivar; desispec-exact also uses desispec's ALLBADPIX == 1 rule (default desispec)"},
      {"cpu-threads", 0, true, "local CPU threads (default: all cores)"},
      {"threads", 0, true, "", "cpu-threads"},
      {"backend", 0, true, "local backend: cpu|cuda (default cpu)"},
      {"local", 0, false, "extract in this process (no server)"},
      {"server", 0, true, "server address host:port or dns:///host:port"},
      {"deadline", 0, true, "remote deadline in seconds"},
      {"quiet", 'q', false, "no progress bar"},
      // desi_extract_spectra's remaining options, with its names and meaning.
      {"fibermap", 'f', true, "input fibermap file (default: the input image's FIBERMAP)"},
      {"barycentric-correction", 0, false,
       "extract on wavelength / HELIOCOR (barycentric factor from RA/TARGTRA, DEC, MJD-OBS, "
       "EXPTIME of the image or fibermap header); the frame keeps the requested grid"},
      {"no-scores", 0, false, "do not compute scores (no SCORES HDU)"},
      {"pixpad-frac", 0, true, "fraction of a PSF spotsize to pad in pixels (default 0.8)"},
      {"wavepad-frac", 0, true, "fraction of a PSF spotsize to pad in wavelengths (default 0.2)"},
      {"no-gpu", 0, false, "do not use a GPU: the CPU backend (local) and --reproduce gpu_specter_cpu"},
      {"use-specter", 0, false,
       "classic specter's extraction (desi_extract_spectra --use-specter): refused, spexd "
       "reproduces gpu_specter only"},
      {"verbose", 'v', false, "print the extraction parameters"},
      {"help", 'h', false, "show this help"},
  };
  return specs;
}

absl::Status ParseWavelength(const std::string& text, core::ExtractionParams* params) {
  std::vector<std::string> parts = absl::StrSplit(text, ',');
  double v[3];
  if (parts.size() != 3 || !absl::SimpleAtod(parts[0], &v[0]) ||
      !absl::SimpleAtod(parts[1], &v[1]) || !absl::SimpleAtod(parts[2], &v[2])) {
    return absl::InvalidArgumentError(
        absl::StrCat("--wavelength must be wmin,wmax,dw (got '", text, "')"));
  }
  params->has_wavelength = true;
  params->wmin = v[0];
  params->wmax = v[1];
  params->dw = v[2];
  return absl::OkStatus();
}

absl::StatusOr<ExtractCommand> ParseExtractCommand(const ParsedArgs& args,
                                                   const DefaultPath& default_path) {
  ExtractCommand cmd;
  cmd.input = args.GetOr("input", "");
  cmd.psf = args.GetOr("psf", "");
  cmd.output = args.GetOr("output", "");
  cmd.model = args.GetOr("model", "");
  if (cmd.input.empty()) return absl::InvalidArgumentError("missing -i/--input");
  if (cmd.psf.empty()) return absl::InvalidArgumentError("missing -p/--psf");
  // Without -o, the server writes the frame (--server-output): nothing is streamed back.
  if (cmd.output.empty() && (args.Has("local") || !args.Has("server-output-path"))) {
    return absl::InvalidArgumentError(
        "missing -o/--output (or, with --server, --server-output for a server-written frame)");
  }
  core::ExtractionParams& p = cmd.params;
  p.has_wavelength = false;
  if (auto w = args.Get("wavelength")) SPEXD_RETURN_IF_ERROR(ParseWavelength(*w, &p));
  SPEXD_ASSIGN_OR_RETURN(p.specmin, args.GetInt("specmin", 0));
  SPEXD_ASSIGN_OR_RETURN(p.nspec, args.GetInt("nspec", 500));
  SPEXD_ASSIGN_OR_RETURN(p.bundlesize, args.GetInt("bundlesize", 25));
  SPEXD_ASSIGN_OR_RETURN(p.nsubbundles, args.GetInt("nsubbundles", 5));
  SPEXD_ASSIGN_OR_RETURN(p.nwavestep, args.GetInt("nwavestep", 50));
  SPEXD_ASSIGN_OR_RETURN(p.wavepad, args.GetInt("wavepad", 10));
  SPEXD_ASSIGN_OR_RETURN(p.regularize, args.GetDouble("regularize", 0.0));
  SPEXD_ASSIGN_OR_RETURN(p.pixpad_frac, args.GetDouble("pixpad-frac", 0.8));
  SPEXD_ASSIGN_OR_RETURN(p.wavepad_frac, args.GetDouble("wavepad-frac", 0.2));
  p.barycentric_correction = args.Has("barycentric-correction");
  p.scores = !args.Has("no-scores");
  cmd.fibermap = args.GetOr("fibermap", "");
  cmd.verbose = args.Has("verbose");
  if (args.Has("psferr")) {
    SPEXD_ASSIGN_OR_RETURN(double e, args.GetDouble("psferr", 0.01));
    p.psferr = e;
  }
  std::string compat = args.GetOr("reproduce", "gpu_specter_gpu");
  if (!core::ParseCompat(compat, &p.compat)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--reproduce (deprecated spelling: --compat) must be gpu_specter_gpu or gpu_specter_cpu "
        "(deprecated: gpu, cpu; got '",
        compat, "')"));
  }
  std::string policy = args.GetOr("mask-policy", "desispec");
  if (policy == "desispec") {
    p.mask_policy = core::MaskPolicy::kDesispec;
  } else if (policy == "any") {
    p.mask_policy = core::MaskPolicy::kAnyBit;
  } else if (policy == "desispec-exact") {
    p.mask_policy = core::MaskPolicy::kDesispecExact;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "--mask-policy must be desispec, desispec-exact or any (got '", policy, "')"));
  }
  p.want_model = !cmd.model.empty();
  SPEXD_ASSIGN_OR_RETURN(cmd.threads, args.GetInt("cpu-threads", 0));
  SPEXD_ASSIGN_OR_RETURN(cmd.backend, core::ParseBackendKind(args.GetOr("backend", "cpu")));
  // --use-specter: desispec then runs classic specter, a different extraction (its FLUX
  // differs from gpu_specter's by up to 0.115 sigma); accepting it would give gpu_specter's
  // numbers under specter's name.
  if (args.Has("use-specter")) {
    return absl::InvalidArgumentError(
        "--use-specter asks for classic specter's extraction, which spexd does not reproduce: "
        "specter extracts differently from gpu_specter (its FLUX differs by up to 0.115 sigma "
        "on DESI data); without --use-specter the numbers are gpu_specter's");
  }
  // --no-gpu: desi_extract_spectra's way to ask for a CPU extraction: the CPU backend
  // locally, and gpu_specter's CPU path (--reproduce gpu_specter_cpu) unless --reproduce
  // says otherwise, so that the numbers are those desispec computes with --no-gpu.
  if (args.Has("no-gpu")) {
    if (cmd.backend != core::BackendKind::kCpu) {
      return absl::InvalidArgumentError(
          "--no-gpu asks for the CPU backend; --backend says otherwise");
    }
    if (!args.Has("reproduce")) p.compat = core::Compat::kCpu;
  }
  if (args.Has("reproduce")) {
    cmd.reproduce_why = "--reproduce";
  } else if (args.Has("no-gpu")) {
    cmd.reproduce_why = "--no-gpu";
  } else if (default_path) {
    SPEXD_ASSIGN_OR_RETURN(PathChoice choice, default_path());
    p.compat = choice.compat;
    cmd.reproduce_why = std::move(choice.why);
  }
  cmd.local = args.Has("local");
  cmd.server = args.GetOr("server", "");
  SPEXD_ASSIGN_OR_RETURN(cmd.deadline_seconds, args.GetDouble("deadline", 0.0));
  cmd.quiet = args.Has("quiet");
  if (!cmd.local && cmd.server.empty()) cmd.local = true;  // no server named: local
  if (cmd.local && !cmd.server.empty()) {
    return absl::InvalidArgumentError("--local and --server are exclusive");
  }
  return cmd;
}

core::FitsWriteOptions FileWriteOptions(const ExtractCommand& cmd) {
  core::FitsWriteOptions options;
  options.threads = cmd.threads > 0 ? std::min(cmd.threads, core::DefaultFitsWriteThreads()) : 0;
  return options;
}

}  // namespace spexd::client
