// Leveled logging to stderr, controlled by SOFTVERBS_LOG (see knobs.h).
// Errors that an application sees as an errno are logged at "info" so that
// `SOFTVERBS_LOG=info` explains every refusal without changing behaviour.
#pragma once

#include <cstdarg>

namespace sv {

enum class LogLevel { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3, kTrace = 4 };

bool log_enabled(LogLevel level);
[[gnu::format(printf, 2, 3)]] void log_message(LogLevel level, const char* fmt, ...);

}  // namespace sv

#define SV_LOG(level, ...)                                   \
  do {                                                       \
    if (::sv::log_enabled(level)) ::sv::log_message(level, __VA_ARGS__); \
  } while (0)
#define SV_ERROR(...) SV_LOG(::sv::LogLevel::kError, __VA_ARGS__)
#define SV_WARN(...) SV_LOG(::sv::LogLevel::kWarn, __VA_ARGS__)
#define SV_INFO(...) SV_LOG(::sv::LogLevel::kInfo, __VA_ARGS__)
#define SV_DEBUG(...) SV_LOG(::sv::LogLevel::kDebug, __VA_ARGS__)
#define SV_TRACE(...) SV_LOG(::sv::LogLevel::kTrace, __VA_ARGS__)
