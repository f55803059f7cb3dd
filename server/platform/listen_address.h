// The listening addresses of spexd (--listen, gRPC; --metrics_listen, /metrics): their form
// checked at startup, and why one cannot be taken, so that a port out of range or a port
// another process serves is refused with a message rather than silently wrapped (gRPC
// reads port 99999 as 34463) or shared (gRPC's default SO_REUSEPORT splits connections
// between two servers on one port).
#ifndef SPEXD_SERVER_PLATFORM_LISTEN_ADDRESS_H_
#define SPEXD_SERVER_PLATFORM_LISTEN_ADDRESS_H_

#include <string>

#include "absl/status/status.h"

namespace spexd::server {

// Splits "host:port" or "[v6]:port"; the port is decimal, 0..65535 (0: a free one).
// INVALID_ARGUMENT otherwise.
absl::Status SplitHostPort(const std::string& address, std::string* host, std::string* port);

// Whether `address` is a gRPC URI of a local socket ("unix:", "unix://", "unix-abstract:",
// "vsock:"), which has no port.
bool HasLocalSocketScheme(const std::string& address);

// --listen's form: a local socket URI (left to gRPC), else host:port as SplitHostPort.
// INVALID_ARGUMENT naming `flag`.
absl::Status CheckListenAddress(const char* flag, const std::string& address);

// A `unix:` path where a process answers connections already: FAILED_PRECONDITION (gRPC
// would remove the socket file and take the name over, leaving the other server serving
// no one). OK when nothing answers there.
absl::Status RefuseServedUnixSocket(const std::string& address);

// Why binding host:port fails (the kernel's reason, from a bind of our own made as gRPC
// makes it, without SO_REUSEPORT); "unknown reason" when it binds.
std::string WhyCannotBind(const std::string& address);

}  // namespace spexd::server

#endif  // SPEXD_SERVER_PLATFORM_LISTEN_ADDRESS_H_
