#include "server/platform/listen_address.h"

#include <netdb.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace spexd::server {
namespace {

// The path of a "unix:PATH" or "unix://PATH" address; empty for any other.
std::string UnixPath(const std::string& address) {
  if (absl::StartsWith(address, "unix://")) return address.substr(7);
  if (absl::StartsWith(address, "unix:")) return address.substr(5);
  return "";
}

}  // namespace

absl::Status SplitHostPort(const std::string& address, std::string* host, std::string* port) {
  std::size_t colon;
  if (absl::StartsWith(address, "[")) {
    const std::size_t close = address.find(']');
    if (close == std::string::npos || close + 1 >= address.size() || address[close + 1] != ':') {
      return absl::InvalidArgumentError("expected host:port or [v6]:port");
    }
    *host = address.substr(1, close - 1);
    colon = close + 1;
  } else {
    colon = address.rfind(':');
    if (colon == std::string::npos) return absl::InvalidArgumentError("expected host:port");
    *host = address.substr(0, colon);
  }
  *port = address.substr(colon + 1);
  int number = 0;
  if (host->empty() || port->empty() || port->size() > 5 ||
      port->find_first_not_of("0123456789") != std::string::npos ||
      !absl::SimpleAtoi(*port, &number) || number > 65535) {
    return absl::InvalidArgumentError("expected host:port with a port in 0..65535");
  }
  return absl::OkStatus();
}

bool HasLocalSocketScheme(const std::string& address) {
  return absl::StartsWith(address, "unix:") || absl::StartsWith(address, "unix-abstract:") ||
         absl::StartsWith(address, "vsock:");
}

absl::Status CheckListenAddress(const char* flag, const std::string& address) {
  if (HasLocalSocketScheme(address)) return absl::OkStatus();
  std::string host, port;
  if (absl::Status st = SplitHostPort(address, &host, &port); !st.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, "=", address, ": ", st.message(), " (0: a free port)"));
  }
  return absl::OkStatus();
}

absl::Status RefuseServedUnixSocket(const std::string& address) {
  const std::string path = UnixPath(address);
  sockaddr_un addr{};
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) return absl::OkStatus();
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::OkStatus();
  const bool answered = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  if (!answered) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "cannot listen on ", address, ": another process is serving this socket (stop it first,"
      " or choose another path)"));
}

std::string WhyCannotBind(const std::string& address) {
  std::string host, port;
  if (!SplitHostPort(address, &host, &port).ok()) return "not host:port";
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return absl::StrCat("cannot resolve ", host, ": ", gai_strerror(rc));
  }
  std::string why = "unknown reason";
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));  // as gRPC's listener
    const bool bound = ::bind(fd, a->ai_addr, a->ai_addrlen) == 0;
    const int err = errno;
    ::close(fd);
    if (bound) continue;
    why = err == EADDRINUSE
              ? "the port is in use: another process is serving it (stop it first, or choose "
                "another port)"
              : absl::StrCat("bind: ", std::strerror(err));
    break;
  }
  ::freeaddrinfo(found);
  return why;
}

}  // namespace spexd::server
