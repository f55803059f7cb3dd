#include "core/cpu/internal/lapack.h"

#include <dlfcn.h>

namespace spexd::core {

void UseSingleThreadedBlas() {
  using SetThreads = void (*)(int);
  void* sym = dlsym(RTLD_DEFAULT, "openblas_set_num_threads");
  if (sym != nullptr) reinterpret_cast<SetThreads>(sym)(1);
}

}  // namespace spexd::core
