// spexctl's LAPACK/BLAS, opened when a local extraction starts instead of at process start.
//
// Why: a remote `spexctl extract --server ...` (one process per frame in the pipeline)
// never calls LAPACK, yet linking liblapack.so.3/libblas.so.3 made every start map them
// (OpenBLAS: 36 MB, libgfortran, a thread per core started by its constructor) and
// relocate them: about a sixth of the start-up.
// client/spexctl/lapack_on_demand.cc defines the Fortran entry points the CPU backend calls
// (core/cpu/lapack_abi.h) in spexctl itself, each forwarding to the routine of the
// library opened here, so the linker drops the two libraries from spexctl's NEEDED.
#ifndef SPEXD_CLIENT_LAPACK_ON_DEMAND_H_
#define SPEXD_CLIENT_LAPACK_ON_DEMAND_H_

#include "absl/status/status.h"

namespace spexd::client {

// Opens liblapack.so.3 and libblas.so.3 (the generic sonames: OpenBLAS or the reference
// libraries, as the linked build would get) with RTLD_GLOBAL, so that the CPU backend's
// openblas_set_num_threads lookup finds OpenBLAS, and resolves every routine. Idempotent
// and thread-safe; FailedPrecondition with the loader's message when a library or a
// routine is missing. Call before creating a CPU backend.
absl::Status LoadLapackOnDemand();

}  // namespace spexd::client

#endif  // SPEXD_CLIENT_LAPACK_ON_DEMAND_H_
