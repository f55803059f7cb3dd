// desispec's conventions for what an extraction writes beside the numbers: shortened input
// paths (IN_PSF, IN_IMG), the environment provenance desiutil.depend records, and FIBERMAP
// strings padded with NULs as astropy/fitsio write them. Kept apart from frame_writer.cc so
// that the layout and the conventions can change independently.
#ifndef SPEXD_CORE_FRAME_DESI_CONVENTIONS_H_
#define SPEXD_CORE_FRAME_DESI_CONVENTIONS_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "core/io/fits_file.h"

namespace spexd::core {

// desispec.io.meta.shorten_filename: a path under $DESI_SPECTRO_CALIB becomes
// "SPCALIB/...", one under the production ($DESI_SPECTRO_REDUX/$SPECPROD, else
// $DESI_ROOT/spectro/redux/$SPECPROD, or its $DESI_ROOT_READONLY twin) "SPECPROD/...";
// anything else is returned unchanged. Plain prefix tests, as desispec does.
std::string ShortenDesiPath(const std::string& path);

// The environment entries desiutil.depend.add_dependencies records (DESI_ROOT,
// DESI_SPECTRO_DATA, ...), each with its value or "NOT_SET", in desiutil's order.
std::vector<std::pair<std::string, std::string>> DesiEnvironmentDependencies();

// Rewrites the character columns of the current (binary table) HDU so that each value's
// trailing blanks become NULs: astropy and fitsio write strings NUL-padded, and fitsio
// reads 'GAL   ' (blank-padded) back with its blanks.
absl::Status NulPadTableStrings(FitsFile* table);

}  // namespace spexd::core

#endif  // SPEXD_CORE_FRAME_DESI_CONVENTIONS_H_
