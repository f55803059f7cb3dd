#include "server/platform/metrics_http.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "server/platform/listen_address.h"

namespace spexd::server {
namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kExpositionType = "text/plain; version=0.0.4; charset=utf-8";

// RFC 9110 token characters (methods and header names).
bool IsToken(absl::string_view s) {
  if (s.empty()) return false;
  for (char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (absl::ascii_isalnum(c)) continue;
    if (std::strchr("!#$%&'*+-.^_`|~", ch) == nullptr || ch == '\0') return false;
  }
  return true;
}

std::string Reason(int code) {
  switch (code) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 413:
      return "Content Too Large";
    case 414:
      return "URI Too Long";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Error";
  }
}

// A complete response; HEAD gets the headers (with the body's length) and no body.
std::string Response(int code, const std::string& body, bool head_only,
                     const char* content_type = "text/plain; charset=utf-8",
                     const char* extra_headers = "") {
  std::string out = absl::StrCat(
      "HTTP/1.1 ", code, " ", Reason(code), "\r\nContent-Type: ", content_type,
      "\r\nContent-Length: ", body.size(), "\r\n", extra_headers, "Connection: close\r\n\r\n");
  if (!head_only) out += body;
  return out;
}

std::string ErrorResponse(int code, bool head_only = false, const char* extra_headers = "") {
  return Response(code, absl::StrCat(code, " ", Reason(code), "\n"), head_only,
                  "text/plain; charset=utf-8", extra_headers);
}

absl::StatusOr<int> Listen(const std::string& address) {
  std::string host, port;
  if (absl::Status st = SplitHostPort(address, &host, &port); !st.ok()) return st;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot resolve ", host, ": ", gai_strerror(rc)));
  }
  std::string error = "no address";
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      error = absl::StrCat("socket: ", std::strerror(errno));
      continue;
    }
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, 128) != 0) {
      error = errno == EADDRINUSE ? "the port is in use: another process is serving it"
                                  : absl::StrCat("bind: ", std::strerror(errno));
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  if (fd < 0) return absl::UnavailableError(error);
  return fd;
}

int BoundPort(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return 0;
  if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  return 0;
}

}  // namespace

struct MetricsHttpServer::Conn {
  enum class State { kReading, kWriting, kLingering, kClosed };
  int fd = -1;
  State state = State::kReading;
  Clock::time_point deadline;
  std::string in;        // the request head so far
  std::string out;       // the response
  std::size_t sent = 0;  // bytes of `out` already written
  std::size_t drained = 0;

  void Close() {
    if (fd >= 0) ::close(fd);
    fd = -1;
    state = State::kClosed;
  }
};

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const std::string& address, Render render, Options options) {
  absl::StatusOr<int> fd = Listen(address);
  if (!fd.ok()) return fd.status();
  int wake[2];
  if (::pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) {
    ::close(*fd);
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  return std::unique_ptr<MetricsHttpServer>(
      new MetricsHttpServer(*fd, wake[0], wake[1], BoundPort(*fd), std::move(render), options));
}

MetricsHttpServer::MetricsHttpServer(int listen_fd, int wake_read, int wake_write, int port,
                                     Render render, Options options)
    : listen_fd_(listen_fd),
      wake_read_(wake_read),
      wake_write_(wake_write),
      port_(port),
      render_(std::move(render)),
      options_(options) {
  thread_ = std::thread([this] { Loop(); });
}

MetricsHttpServer::~MetricsHttpServer() { Stop(); }

void MetricsHttpServer::Stop() {
  if (stopped_.exchange(true)) return;
  const char byte = 0;
  while (::write(wake_write_, &byte, 1) < 0 && errno == EINTR) {
  }
  if (thread_.joinable()) thread_.join();
  ::close(listen_fd_);
  ::close(wake_read_);
  ::close(wake_write_);
}

void MetricsHttpServer::Loop() {
  std::vector<std::unique_ptr<Conn>> conns;
  std::vector<pollfd> fds;
  Clock::time_point listen_paused_until;  // after EMFILE: retry accept later, not at once
  for (;;) {
    Clock::time_point now = Clock::now();
    for (auto& c : conns) {
      if (now < c->deadline) continue;
      if (c->state == Conn::State::kReading && !c->in.empty()) {
        c->out = ErrorResponse(408);  // a head that never ended
        c->state = Conn::State::kWriting;
        c->deadline = now + options_.write_timeout;
        OnWritable(*c);
      } else {
        c->Close();  // silent, not reading, or done lingering
      }
    }
    conns.erase(std::remove_if(conns.begin(), conns.end(),
                               [](const auto& c) { return c->state == Conn::State::kClosed; }),
                conns.end());

    fds.clear();
    fds.push_back({wake_read_, POLLIN, 0});
    const bool listening = now >= listen_paused_until;
    fds.push_back({listening ? listen_fd_ : -1, POLLIN, 0});
    Clock::time_point next = now + std::chrono::seconds(1);
    if (!listening) next = std::min(next, listen_paused_until);
    for (auto& c : conns) {
      fds.push_back(
          {c->fd, static_cast<short>(c->state == Conn::State::kWriting ? POLLOUT : POLLIN), 0});
      next = std::min(next, c->deadline);
    }
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count();
    if (::poll(fds.data(), fds.size(), static_cast<int>(std::max<long long>(wait, 0) + 1)) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[0].revents != 0) break;  // Stop()

    for (std::size_t i = 0; i < conns.size(); ++i) {
      Conn& c = *conns[i];
      if (fds[i + 2].revents == 0) continue;
      if (c.state == Conn::State::kWriting) {
        OnWritable(c);
      } else {
        OnReadable(c);
      }
    }
    if (fds[1].revents != 0) {
      for (;;) {
        const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
          if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
            listen_paused_until = Clock::now() + std::chrono::milliseconds(100);
          }
          break;  // EAGAIN, or a connection that vanished before accept
        }
        if (conns.size() >= static_cast<std::size_t>(options_.max_connections)) {
          // Best effort, never waits. What the client already sent is read first: closing
          // with unread bytes would reset the connection and could discard the 503.
          char discard[4096];
          for (int i = 0; i < 16 && ::recv(fd, discard, sizeof(discard), 0) > 0; ++i) {
          }
          const std::string busy = ErrorResponse(503);
          [[maybe_unused]] ssize_t n = ::send(fd, busy.data(), busy.size(), MSG_NOSIGNAL);
          ::close(fd);
          continue;
        }
        auto c = std::make_unique<Conn>();
        c->fd = fd;
        c->deadline = Clock::now() + options_.read_timeout;
        conns.push_back(std::move(c));
      }
    }
  }
  for (auto& c : conns) c->Close();
}

void MetricsHttpServer::OnReadable(Conn& c) {
  char buf[4096];
  for (;;) {
    const ssize_t n = ::recv(c.fd, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {  // the client closed (or reset) before its request was whole
      c.Close();
      return;
    }
    if (c.state == Conn::State::kLingering) {
      c.drained += static_cast<std::size_t>(n);
      if (c.drained > options_.max_head_bytes + options_.max_body_bytes) c.Close();
      if (c.state == Conn::State::kClosed) return;
      continue;
    }
    c.in.append(buf, static_cast<std::size_t>(n));
    if (c.in.find("\n\r\n") != std::string::npos || c.in.find("\n\n") != std::string::npos ||
        c.in.size() > options_.max_head_bytes) {
      Answer(c);
      return;
    }
  }
}

void MetricsHttpServer::OnWritable(Conn& c) {
  while (c.sent < c.out.size()) {
    const ssize_t n = ::send(c.fd, c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {
      c.Close();
      return;
    }
    c.sent += static_cast<std::size_t>(n);
  }
  // Answered: close our side, then read what the client still sends until it closes or
  // the linger ends, so that unread request bytes do not turn the close into a reset.
  ::shutdown(c.fd, SHUT_WR);
  c.out.clear();
  c.state = Conn::State::kLingering;
  c.deadline = Clock::now() + options_.linger;
}

void MetricsHttpServer::Answer(Conn& c) {
  c.state = Conn::State::kWriting;
  c.deadline = Clock::now() + options_.write_timeout;
  c.out = [&]() -> std::string {
    std::size_t end = c.in.find("\n\r\n");
    end = std::min(end, c.in.find("\n\n"));
    if (end == std::string::npos || end > options_.max_head_bytes) {
      // No end within the limit: a request line that long is a long URI.
      const std::size_t line_end = c.in.find('\n');
      return ErrorResponse(
          line_end == std::string::npos || line_end > options_.max_head_bytes ? 414 : 431);
    }
    std::vector<absl::string_view> lines =
        absl::StrSplit(absl::string_view(c.in).substr(0, end), '\n');
    for (auto& line : lines) absl::ConsumeSuffix(&line, "\r");
    const std::vector<absl::string_view> request = absl::StrSplit(lines[0], ' ');
    if (request.size() != 3 || !IsToken(request[0]) || request[1].empty()) {
      return ErrorResponse(400);
    }
    const absl::string_view method = request[0], version = request[2];
    if (version != "HTTP/1.1" && version != "HTTP/1.0") {
      return ErrorResponse(absl::StartsWith(version, "HTTP/") ? 505 : 400);
    }
    bool has_length = false, chunked = false;
    std::size_t length = 0;
    for (std::size_t i = 1; i < lines.size(); ++i) {
      const std::size_t colon = lines[i].find(':');
      if (colon == absl::string_view::npos || !IsToken(lines[i].substr(0, colon))) {
        return ErrorResponse(400);  // also obsolete line folding (a leading space)
      }
      const absl::string_view name = lines[i].substr(0, colon);
      const absl::string_view value = absl::StripAsciiWhitespace(lines[i].substr(colon + 1));
      if (absl::EqualsIgnoreCase(name, "Content-Length")) {
        std::size_t n = 0;
        if (value.empty() || value.find_first_not_of("0123456789") != absl::string_view::npos ||
            !absl::SimpleAtoi(value, &n) || (has_length && n != length)) {
          return ErrorResponse(400);
        }
        has_length = true;
        length = n;
      } else if (absl::EqualsIgnoreCase(name, "Transfer-Encoding")) {
        chunked = true;
      }
    }
    if (has_length && chunked) return ErrorResponse(400);  // ambiguous framing
    if (length > options_.max_body_bytes) return ErrorResponse(413);
    absl::string_view target = request[1];
    // Absolute form (RFC 9112 §3.2.2): keep only the path.
    for (const char* scheme : {"http://", "https://"}) {
      if (absl::ConsumePrefix(&target, scheme)) {
        const std::size_t slash = target.find('/');
        target = slash == absl::string_view::npos ? "/" : target.substr(slash);
      }
    }
    const absl::string_view path = target.substr(0, target.find('?'));
    if (path != "/metrics") return ErrorResponse(404, method == "HEAD");
    if (method != "GET" && method != "HEAD") {
      return ErrorResponse(405, false, "Allow: GET, HEAD\r\n");
    }
    try {
      return Response(200, render_(), method == "HEAD", kExpositionType);
    } catch (const std::exception&) {
      return ErrorResponse(500, method == "HEAD");
    }
  }();
  c.in.clear();
  OnWritable(c);
}

}  // namespace spexd::server
