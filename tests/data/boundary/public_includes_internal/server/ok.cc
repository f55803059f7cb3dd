// Fixture: a module using only the public header.
#include "core/io/preproc.h"
