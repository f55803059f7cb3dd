#include "server/platform/log.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace spexd::server {
namespace {

std::atomic<int> g_min_level{static_cast<int>(LogLevel::kInfo)};

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarning:
      return "warning";
    case LogLevel::kError:
      return "error";
  }
  return "info";
}

// RFC 3339 UTC time with milliseconds.
std::string Timestamp() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t secs = std::chrono::system_clock::to_time_t(now);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()) % 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  return absl::StrFormat("%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                         tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms.count()));
}

}  // namespace

std::string JsonQuote(const std::string& text) {
  std::string out;
  out.reserve(text.size() + 2);
  out.push_back('"');
  for (char c : text) {
    switch (c) {
      case '"':
        out.append("\\\"");
        break;
      case '\\':
        out.append("\\\\");
        break;
      case '\n':
        out.append("\\n");
        break;
      case '\t':
        out.append("\\t");
        break;
      case '\r':
        out.append("\\r");
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out.append(absl::StrFormat("\\u%04x", static_cast<unsigned>(c)));
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
  return out;
}

LogField::LogField(const char* key, const std::string& value) : key_(key), json_(JsonQuote(value)) {}
LogField::LogField(const char* key, const char* value)
    : key_(key), json_(JsonQuote(value != nullptr ? std::string(value) : std::string())) {}
LogField::LogField(const char* key, int64_t value) : key_(key), json_(absl::StrCat(value)) {}
LogField::LogField(const char* key, uint64_t value) : key_(key), json_(absl::StrCat(value)) {}
LogField::LogField(const char* key, double value) : key_(key) {
  // JSON has no NaN or infinity.
  if (std::isfinite(value)) {
    json_ = absl::StrFormat("%.6g", value);
  } else {
    json_.assign("null");
  }
}
LogField::LogField(const char* key, bool value) : key_(key) {
  json_.assign(value ? "true" : "false");
}

LogField::LogField(const char* key, const std::map<std::string, double>& values) : key_(key) {
  json_.assign("{");
  for (const auto& [name, value] : values) {
    if (json_.size() > 1) json_.push_back(',');
    absl::StrAppend(&json_, JsonQuote(name), ":", LogField("", value).json());
  }
  json_.push_back('}');
}

void SetMinLogLevel(LogLevel level) { g_min_level.store(static_cast<int>(level)); }

void Log(LogLevel level, const char* event, std::initializer_list<LogField> fields) {
  if (static_cast<int>(level) < g_min_level.load()) return;
  std::string line = absl::StrCat("{\"ts\":\"", Timestamp(), "\",\"level\":\"", LevelName(level),
                                  "\",\"event\":", JsonQuote(event));
  for (const LogField& f : fields) {
    absl::StrAppend(&line, ",", JsonQuote(f.key()), ":", f.json());
  }
  line.append("}\n");
  // A single write keeps concurrent lines whole (stderr is unbuffered anyway).
  const char* p = line.data();
  std::size_t left = line.size();
  while (left > 0) {
    ssize_t n = ::write(STDERR_FILENO, p, left);
    if (n <= 0) break;
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

}  // namespace spexd::server
