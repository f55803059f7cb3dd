// Fixture for core_include_boundary_catches_public_header: a public header that
// would hand an internal one to every includer.
#include "core/io/internal/gzip.h"
