// Which of gpu_specter's two paths desi_extract_spectra would reproduce on this node, for
// `spexctl extract` without --reproduce (desispec's main_gpu_specter: `use_gpu =
// is_gpu_available() and not args.no_gpu`): its CPU path with --no-gpu (decided by the
// flag parser), with $DESI_NO_GPU set, or without a usable GPU; its GPU path otherwise.
// The same rule as the Python package's spexd.desi.gpu_semantics, less the probes only
// Python can make (desispec.gpu, cupy and numba.cuda): $SPEXD_DESI_GPU, then the NVIDIA
// driver's device nodes and library (without $CUDA_VISIBLE_DEVICES), else the CUDA driver's
// device count.
#ifndef SPEXD_CLIENT_SPEXCTL_DESISPEC_PATH_RULE_H_
#define SPEXD_CLIENT_SPEXCTL_DESISPEC_PATH_RULE_H_

#include <string>

#include "absl/status/statusor.h"
#include "client/spexctl/extract_flags.h"

namespace spexd::client {

// $DESI_NO_GPU set: the CPU path. $SPEXD_DESI_GPU=1 or 0 (tests, a site that knows
// better): as it says (INVALID_ARGUMENT for another value). Else the GPU path where the
// driver's device nodes and library (libcuda.so.1, opened here) are usable, or, under
// $CUDA_VISIBLE_DEVICES or without such nodes, where the CUDA driver sees a device. `why`
// says which, in the words spexd.desi logs.
absl::StatusOr<PathChoice> DesispecPathRule();

// The NVIDIA kernel driver's GPU device nodes in `dev` (/dev) this process may open for
// reading and writing (nvidia0, nvidia1 ...), 0 unless nvidiactl is usable too.
int UsableDeviceNodes(const std::string& dev);

}  // namespace spexd::client

#endif  // SPEXD_CLIENT_SPEXCTL_DESISPEC_PATH_RULE_H_
