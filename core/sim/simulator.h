// Frame simulator: projects spectra through a GaussHermite PSF onto a full-CCD DESI
// preproc image (extraction-spec §1.4 spots, §2.3 grid, §5.1 layout) and writes the truth.
//
// Projection model (the one the extraction fits, spec §2.7): for fibre f and input bin
// (i, s) (output bin i, sub-bin s of `oversample`), photons = density(λ_is) · dwave_i /
// oversample, deposited as photons × spot(f, λ_is) at the spot's corner; stamp pixels
// off the CCD are dropped. With oversample = 1, λ_i0 is the grid point itself and
// dwave = numpy.gradient of the grid (spec §2.13), so a noiseless frame extracts to the
// truth exactly (up to the resolution convolution).
//
// Determinism: every random number comes from std::mt19937_64 (fully specified by the
// C++ standard) through our own uniform / Box-Muller / Poisson code, seeded per fibre
// (spectra) and per CCD row (noise); pixel sums run in (fibre, wavelength) order whatever
// the thread count. The same options therefore give byte-identical files.
#ifndef SPEXD_CORE_SIMULATOR_H_
#define SPEXD_CORE_SIMULATOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/io/preproc.h"
#include "core/io/psf.h"

namespace spexd::core {

class TaskPool;

enum class SimNoise { kNone, kPoisson };

struct SimOptions {
  int fiber_begin = 0;
  int nfibers = 500;
  double wmin = 5760.0, wmax = 7620.0, dw = 0.8;  // output grid (spec §2.3)
  int oversample = 1;                              // sub-bins per output bin, 1..16
  uint64_t seed = 0;
  SimNoise noise = SimNoise::kPoisson;
  // Read noise in electrons: one value for all amplifiers, or four for amps A, B, C, D
  // (A: lower-left, B: lower-right, C: upper-left, D: upper-right quadrant).
  std::vector<double> read_noise = {3.0};
  int num_hot_pixels = 0;  // HOT (MASK bit 1) pixels added in the lit band
  // A cut-out of the CCD: its first `height` rows and `width` columns (0: the PSF's
  // NPIX_Y / NPIX_X). Core extracts cut-outs; tests use them to stay small.
  int height = 0, width = 0;
  // Accept spectra whose grid reaches past the PSF's wavelength domain: the PSF is then
  // extrapolated, as an extraction's patch padding is (spec §2.4). For tests that light a
  // plan's whole padded grid; off, such a grid is a configuration error.
  bool allow_extrapolation = false;
  int num_threads = 0;     // 0: std::thread::hardware_concurrency()
  // Runs on the caller and up to num_threads - 1 of this pool's threads (not owned);
  // null: a pool of num_threads - 1 threads for the call.
  TaskPool* pool = nullptr;
  std::string camera = "r0";
};

// INVALID_ARGUMENT naming the problem: fibre range outside the PSF, bad grid, grid
// outside the PSF domain, oversample outside [1, 16], read noise not 1 or 4 positive values,
// PSF without NPIX_X/NPIX_Y, etc.
absl::Status ValidateSimOptions(const Psf& psf, const SimOptions& options);

// Input spectra of fibres [fiber_begin, fiber_begin + nfibers).
struct SimSpectra {
  int fiber_begin = 0;
  int nfibers = 0;
  std::vector<double> wave;       // [nwave] output grid (numpy arange, spec §2.3)
  std::vector<double> dwave;      // [nwave] numpy.gradient(wave)
  int oversample = 1;
  std::vector<double> fine_wave;  // [nwave * oversample] sub-bin centres
  std::vector<double> fine_flux;  // [nfibers][nwave * oversample] photons/Å at fine_wave
  std::vector<double> flux;       // [nfibers][nwave] truth: bin-averaged photons/Å
  std::vector<std::string> objtype;  // [nfibers] FIBERMAP OBJTYPE: "TGT" or "SKY"
  std::vector<std::string> simtype;  // [nfibers] "SKY", "GAL", "STAR", "QSO" or "INPUT"
  std::vector<int64_t> targetid;     // [nfibers]
};

// Spectra of options' fibres on options' grid (wave, dwave, fine_wave, and default
// objtype/simtype/targetid) with zero flux: the starting point for any source of spectra.
// Errors as MakeOutputGrid.
absl::StatusOr<SimSpectra> MakeSimSpectra(const SimOptions& options);
// The same on another grid `wave` (ascending; e.g. a plan's padded fullwave): dwave is its
// numpy.gradient. INVALID_ARGUMENT for fewer than 2 points or a grid not ascending.
absl::StatusOr<SimSpectra> MakeSimSpectraOnGrid(const SimOptions& options, std::vector<double> wave);
// Sets `flux` (the truth) to the bin average of `fine_flux` over each bin's sub-bins.
void FillTruthFlux(SimSpectra* spectra);

// Built-in deterministic spectra chosen by options.seed: smooth continua, emission and
// absorption lines, sky lines common to all fibres (with per-fibre throughput) and ~10 %
// sky fibres. A fibre's spectrum depends only on (seed, fibre, grid).
absl::StatusOr<SimSpectra> GenerateSpectra(const SimOptions& options);

// Spectra from a FITS file with FLUX [nfib][nwave] (photons/Å) and WAVELENGTH [nwave]
// (e.g. a truth file written by WriteTruth), linearly interpolated onto the fine grid
// (zero outside the file's wavelength range). FLUX must have options.nfibers rows; a
// FIBERS table with OBJTYPE (a truth file) carries the sky fibres over.
absl::StatusOr<SimSpectra> ReadSpectra(const std::string& path, const SimOptions& options);

struct SimDefect {
  int x = 0, y = 0;
  double electrons = 0;
  int16_t mask = 0;
};

struct SimFrame {
  int height = 0, width = 0;
  std::vector<double> model;   // [height][width] noiseless electrons
  std::vector<float> image;    // [height][width] model (+ noise) (+ defects)
  std::vector<float> ivar;     // 1 / (max(model, 0) + rn²): from the model, not the data
  std::vector<int16_t> mask;   // 0, or HOT (2) at defects
  std::vector<SimDefect> defects;
  double photons_in = 0;       // photons of all input bins
  double photons_on_ccd = 0;   // sum of the noiseless model
};

// Read noise [e-] of pixel (y, x) of a CCD of `frame_height` x `frame_width` (the PSF's): one
// value, or the amplifier quadrants A (low y, low x), B, C, D.
double SimReadNoise(const SimOptions& options, int frame_height, int frame_width, int y, int x);

// Projects `spectra` through `psf` and adds noise as `options` say. Runs on
// options.num_threads threads (the result does not depend on it) and holds the full CCD
// in memory (model float64 + image, ivar float32 + mask: ~300 MB for an r frame).
absl::StatusOr<SimFrame> SimulateFrame(const Psf& psf, const SimSpectra& spectra,
                                       const SimOptions& options);

// The frame as the extraction's input: image and ivar as float64 (the float32 values
// WritePreproc stores) and the mask applied with `policy` (core/io/preproc.h ApplyPixelRules),
// as ReadPreproc decodes the written file, minus its header cards and FIBERMAP.
PreprocImage ToPreprocImage(const SimFrame& frame, MaskPolicy policy = MaskPolicy::kDesispec);

// Checks `options` (ValidateSimOptions), then writes the DESI preproc file (IMAGE
// primary, IVAR, MASK tile-compressed, FIBERMAP with one row per PSF fibre) atomically
// (<path>.tmp-<pid>, then rename).
absl::Status WritePreproc(const std::string& path, const Psf& psf, const SimSpectra& spectra,
                          const SimFrame& frame, const SimOptions& options);

// Writes the truth file (FLUX float64 [nfib][nwave], WAVELENGTH, FIBERS table, and
// DEFECTS when there are any) atomically.
absl::Status WriteTruth(const std::string& path, const SimSpectra& spectra,
                        const SimFrame& frame, const SimOptions& options);

}  // namespace spexd::core

#endif  // SPEXD_CORE_SIMULATOR_H_
