// Tile-compressed FITS inputs for tests and fuzz seeds: HDUs of a file re-written with
// CFITSIO's own compressor (RICE_1, GZIP_1, GZIP_2, HCOMPRESS_1, PLIO_1), then header
// cards or stream bytes patched in place, as a hostile client would send them. The crash
// inputs (each crashed spexd inside CFITSIO 4.2.0, or was accepted when it
// should not be) are built here, once, for the unit, integration and fuzz tests.
#ifndef SPEXD_TESTS_COMPRESSED_FITS_H_
#define SPEXD_TESTS_COMPRESSED_FITS_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace spexd::testing {

struct TileCompression {
  int codec = 11;           // CFITSIO's RICE_1 (11), GZIP_1 (21), GZIP_2 (22), PLIO_1 (31), HCOMPRESS_1 (41)
  bool quantize = false;    // float images: quantized with SUBTRACTIVE_DITHER_1 (else lossless)
  std::vector<long> tile;   // tile shape; empty: CFITSIO's default (HCOMPRESS: the whole image)
};

// `fits` with the image HDUs whose EXTNAME is a key of `hdus` tile-compressed as given
// (CFITSIO's fits_img_compress; a primary image becomes an empty primary HDU followed by
// the compressed image, keeping its EXTNAME), every other HDU copied as it is.
absl::StatusOr<std::string> RecompressHdus(const std::string& fits,
                                           const std::map<std::string, TileCompression>& hdus);

// `fits` with the value of header card `key` of the HDU named `extname` replaced by
// `value` (as written in the card: "0", "'PLIO_1'", "-100000"). The card must exist.
absl::StatusOr<std::string> WithHduCard(const std::string& fits, const std::string& extname,
                                        const std::string& key, const std::string& value);

// `fits` with the stream header of the first HCOMPRESS_1 tile of HDU `extname` claiming
// an image of nx x ny pixels.
absl::StatusOr<std::string> WithHcompressTileShape(const std::string& fits,
                                                   const std::string& extname, int nx, int ny);

// The file offset and length of the first tile's stream of compressed image `extname`.
absl::StatusOr<std::pair<long long, long long>> FirstTile(const std::string& fits,
                                                          const std::string& extname);

struct CrashInput {
  std::string name;   // a file name: what it is
  bool psf = false;   // a PSF (LoadPsf), else a preproc frame (ExtractFrame)
  std::string bytes;
};

// The crash inputs (tile-compressed HDUs, PLIO and PSFERROR lines) made from a good
// preproc file (IMAGE float, MASK integer) and a good PSF: each must be refused with
// INVALID_ARGUMENT. `preproc` and `psf` are the bytes of the files to start from.
absl::StatusOr<std::vector<CrashInput>> CrashInputs(const std::string& preproc,
                                                    const std::string& psf);

}  // namespace spexd::testing

#endif  // SPEXD_TESTS_COMPRESSED_FITS_H_
