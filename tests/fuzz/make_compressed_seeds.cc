// Writes the seeds and regression inputs of the `compressed` fuzz target (committed; run
// again only to change them):
//   build/tests/spexd_make_compressed_seeds tests/fuzz
// Made from the small preproc and PSF seeds (tests/fuzz/corpus/{preproc,psf}) with
// CFITSIO's compressor (tests/compressed_fits.h): good files in each codec CFITSIO writes,
// and the crash inputs of tests/compressed_fits.h.
#include <fitsio.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "tests/compressed_fits.h"
#include "tests/test_support.h"

namespace spexd::testing {
namespace {

int Run(const std::string& fuzz_dir) {
  const std::string preproc = ReadBytes(fuzz_dir + "/corpus/preproc/preproc-f32-fibermap.fits");
  const std::string psf = ReadBytes(fuzz_dir + "/corpus/psf/psf-r0-1fibre.fits");
  if (preproc.empty() || psf.empty()) {
    std::fprintf(stderr, "no preproc/psf seeds under %s/corpus\n", fuzz_dir.c_str());
    return 1;
  }
  struct Seed {
    const char* name;
    const std::string* base;
    std::map<std::string, TileCompression> hdus;
  };
  const Seed seeds[] = {
      {"preproc-rice-mask-rice-image.fits", &preproc,
       {{"MASK", {RICE_1, false, {}}}, {"IMAGE", {RICE_1, true, {5, 2}}}}},
      {"preproc-gzip1-mask-gzip2-image.fits", &preproc,
       {{"MASK", {GZIP_1, false, {}}}, {"IMAGE", {GZIP_2, true, {}}}, {"IVAR", {GZIP_1, true, {}}}}},
      {"preproc-hcompress-mask.fits", &preproc, {{"MASK", {HCOMPRESS_1, false, {}}}}},
      {"preproc-plio-mask.fits", &preproc, {{"MASK", {PLIO_1, false, {}}}}},
      {"psf-rice-xtrace-gzip2-ytrace.fits", &psf,
       {{"XTRACE", {RICE_1, true, {}}}, {"YTRACE", {GZIP_2, true, {}}}}},
  };
  for (const Seed& s : seeds) {
    auto bytes = RecompressHdus(*s.base, s.hdus);
    if (!bytes.ok() || !WriteBytes(fuzz_dir + "/corpus/compressed/" + s.name, *bytes)) {
      std::fprintf(stderr, "%s: %s\n", s.name, bytes.status().ToString().c_str());
      return 1;
    }
  }
  auto crashes = CrashInputs(preproc, psf);
  if (!crashes.ok()) {
    std::fprintf(stderr, "%s\n", crashes.status().ToString().c_str());
    return 1;
  }
  for (const CrashInput& c : *crashes) {
    if (!WriteBytes(fuzz_dir + "/regressions/compressed/" + c.name, c.bytes)) return 1;
  }
  return 0;
}

}  // namespace
}  // namespace spexd::testing

int main(int argc, char** argv) {
  const char* usage = "usage: %s <tests/fuzz>: writes the compressed-FITS seed corpora under it (no flags)\n";
  if (argc == 2 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
    std::printf(usage, argv[0]);
    return 0;
  }
  if (argc != 2) {
    std::fprintf(stderr, usage, argv[0]);
    return 2;
  }
  return spexd::testing::Run(argv[1]);
}
