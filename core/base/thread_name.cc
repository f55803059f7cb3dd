#include "core/base/thread_name.h"

#include <pthread.h>

#include <string>

namespace spexd::core {

void NameThisThread(absl::string_view name) {
#if defined(__linux__)
  const std::string cut(name.substr(0, 15));
  (void)pthread_setname_np(pthread_self(), cut.c_str());
#else
  (void)name;
#endif
}

}  // namespace spexd::core
