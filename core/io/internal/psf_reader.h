// The reader of a specex PSF file (psf_reader.cc), for Psf::Load and Psf::LoadFromMemory.
#ifndef SPEXD_CORE_IO_INTERNAL_PSF_READER_H_
#define SPEXD_CORE_IO_INTERNAL_PSF_READER_H_

#include "absl/status/statusor.h"
#include "core/io/fits_file.h"
#include "core/io/fits_gunzip.h"
#include "core/io/psf.h"

namespace spexd::core {

// What a PSF reader needs of a .fits.gz's HDUs, judged from each header before its data
// inflate (InflateFits): a file that cannot be a PSF costs its headers.
HduHeaderCheck PsfHduCheck();

// The three HDUs of a specex PSF (extraction-spec §1.1-1.2) read from an open file and
// checked; INVALID_ARGUMENT naming the file for a malformed one.
absl::StatusOr<Psf> ReadPsf(FitsFile* file);

}  // namespace spexd::core

#endif  // SPEXD_CORE_IO_INTERNAL_PSF_READER_H_
