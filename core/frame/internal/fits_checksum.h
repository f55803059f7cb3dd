// FITS checksums computed outside CFITSIO, so that the data of large HDUs can be summed in
// parallel chunks while they are encoded, and CHECKSUM/DATASUM cards
// that come out exactly as fits_write_chksum (CFITSIO's ffpcks) writes them.
//
// The sum is the 32-bit ones' complement sum of the HDU's big-endian 32-bit words (FITS
// 4.0 Appendix J). Ones' complement addition is associative and commutative, and its
// result is 0 only when every word is 0 (else it lies in [1, 2^32 - 1]): a sum taken
// chunk by chunk in any order and folded equals CFITSIO's sequential one bit for bit.
#ifndef SPEXD_CORE_FRAME_INTERNAL_FITS_CHECKSUM_H_
#define SPEXD_CORE_FRAME_INTERNAL_FITS_CHECKSUM_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/io/fits_file.h"

namespace spexd::core::internal {

// a + b in 32-bit ones' complement (end-around carry).
uint32_t OnesComplementAdd(uint32_t a, uint32_t b);
// `start` plus the big-endian 32-bit words of bytes[0, n); n is a multiple of 4.
uint32_t OnesComplementSum(const char* bytes, std::size_t n, uint32_t start = 0);
// An exact sum of big-endian 32-bit words (core::BigEndianWordSum's) as the ones'
// complement sum OnesComplementSum gives for the same words.
uint32_t FoldWordSum(uint64_t sum);

// Encoders of FITS data units (big-endian, FITS 4.0 §5.3) that return the ones'
// complement sum of what they wrote. `out` holds 4 (8 for float64) bytes per value.
// float64 -> float32 (round to nearest, as a C++ cast and CFITSIO's TFLOAT path).
uint32_t EncodeFloat32(const double* values, std::size_t n, char* out);
// float32 given as little-endian bytes (a float32 stream's), written as they are.
uint32_t EncodeFloat32Bytes(const char* little_endian, std::size_t n, char* out);
// uint32 stored as int32 with BZERO = 2^31 (CFITSIO's TUINT into a ULONG_IMG).
uint32_t EncodeUint32WithZero(const uint32_t* values, std::size_t n, char* out);
// float64 as is.
uint32_t EncodeFloat64(const double* values, std::size_t n, char* out);

// The time fits_write_chksum records in the cards' comments: now, UTC,
// "YYYY-MM-DDThh:mm:ss".
std::string ChecksumTimeNow();

// fits_write_chksum on the current HDU of a memory file being written, split in two around
// its data pass, for a data unit that is not in the file (or is, and was summed apart):
//   Begin: adds the CHECKSUM/DATASUM cards where missing (the header's final size is then
//          known) and closes the header;
//   Finish: given the data unit's sum, sets DATASUM and CHECKSUM as ffpcks would (an
//          existing, still valid CHECKSUM, e.g. of a copied table, is kept as it keeps it)
//          and returns the header's bytes.
// `time` goes in the comments ("HDU checksum updated <time>").
class ChecksumCards {
 public:
  // The header bytes Finish sums and returns have `card` (80 characters) in place of the
  // card of the same keyword in `f`: the assembly keeps NAXIS1 at 0 in its scratch files
  // (fits_hdu_assembly.cc) and puts the real one back here.
  void ReplaceCard(std::string card) { replacement_ = std::move(card); }
  absl::Status Begin(FitsFile& f, const std::string& time);
  absl::StatusOr<std::string> Finish(FitsFile& f, uint32_t datasum);
  // Between Begin and Finish: `time` in place of Begin's, in the comments Begin wrote and
  // in those Finish will write, as if Begin had run at `time` (same card sizes). The
  // progressive writer builds its headers before the extraction, finishes them after.
  absl::Status Restamp(FitsFile& f, const std::string& time);

 private:
  absl::StatusOr<std::string> HeaderBytes(FitsFile& f);
  absl::Status SetChecksum(FitsFile& f, const char* value, const char* comment);

  std::string replacement_;
  std::string chkcomm_, datacomm_;
  std::string checksum_;         // the CHECKSUM value in the header now
  uint64_t old_datasum_ = 0;     // DATASUM's value before (never equal to a sum if invalid)
  bool wrote_chkcomm_ = false, wrote_datacomm_ = false;  // Begin wrote those comments
};

}  // namespace spexd::core::internal

#endif  // SPEXD_CORE_FRAME_INTERNAL_FITS_CHECKSUM_H_
