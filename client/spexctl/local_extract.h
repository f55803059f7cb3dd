// spexctl extract --local: the whole extraction in this process, no server.
#ifndef SPEXD_CLIENT_LOCAL_EXTRACT_H_
#define SPEXD_CLIENT_LOCAL_EXTRACT_H_

#include "absl/status/status.h"
#include "client/spexctl/extract_flags.h"

namespace spexd::client {

absl::Status RunLocalExtract(const ExtractCommand& cmd);

}  // namespace spexd::client

#endif  // SPEXD_CLIENT_LOCAL_EXTRACT_H_
