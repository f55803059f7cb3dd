// Fixture for core_include_boundary_catches_module: a module reaching into a room.
#include "core/io/preproc.h"
#include "core/io/internal/gzip.h"
