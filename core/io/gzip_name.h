// Which FITS files are stored gzip-compressed, decided from their names alone, by one rule
// that every writer here follows (the server's frame and model files, spexctl's, core's
// frame writer) and the Python client's spexd.frame_file.is_gzip_name states again: a
// name ending in ".gz" (as CFITSIO, astropy and desispec read such names). The suffix is
// compared as written, on the whole name: "frame.fits.GZ", "frame.tgz" and
// "out.gz/frame.fits" are plain. tests/data/gzip_names.tsv holds both implementations to it.
#ifndef SPEXD_CORE_IO_GZIP_NAME_H_
#define SPEXD_CORE_IO_GZIP_NAME_H_

#include "absl/strings/string_view.h"

namespace spexd::core {

bool IsGzipName(absl::string_view name);

}  // namespace spexd::core

#endif  // SPEXD_CORE_IO_GZIP_NAME_H_
