// Structured logs: one JSON object per line on stderr, so that log shippers can parse
// them without a grammar (Debian's Abseil has no absl::log).
#ifndef SPEXD_SERVER_LOG_H_
#define SPEXD_SERVER_LOG_H_

#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>

namespace spexd::server {

enum class LogLevel { kDebug, kInfo, kWarning, kError };

// One key and its value, already rendered as JSON (a quoted string or a number).
class LogField {
 public:
  LogField(const char* key, const std::string& value);
  LogField(const char* key, const char* value);
  LogField(const char* key, int64_t value);
  LogField(const char* key, int value) : LogField(key, static_cast<int64_t>(value)) {}
  LogField(const char* key, uint64_t value);
  LogField(const char* key, double value);
  LogField(const char* key, bool value);
  // A JSON object of named numbers (e.g. a request's stage seconds), keys in map order.
  LogField(const char* key, const std::map<std::string, double>& values);

  const char* key() const { return key_; }
  const std::string& json() const { return json_; }

 private:
  const char* key_;
  std::string json_;
};

// Writes {"ts":...,"level":...,"event":...,<fields>} as one line. Thread-safe: each line
// is written with a single write() so that lines from different threads never interleave.
void Log(LogLevel level, const char* event, std::initializer_list<LogField> fields = {});

// Messages below this level are dropped (default kInfo).
void SetMinLogLevel(LogLevel level);

// JSON string literal of `text` (quotes included), escaping control characters.
std::string JsonQuote(const std::string& text);

}  // namespace spexd::server

#endif  // SPEXD_SERVER_LOG_H_
