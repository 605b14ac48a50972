#include "util/log.h"

#include <unistd.h>

#include <cstdio>

#include "util/knobs.h"

namespace sv {

bool log_enabled(LogLevel level) { return static_cast<int>(level) <= knobs().log_level; }

void log_message(LogLevel level, const char* fmt, ...) {
  static const char* const kNames[] = {"error", "warn", "info", "debug", "trace"};
  char line[1024];
  int n = std::snprintf(line, sizeof line, "softverbs[%d] %s: ", static_cast<int>(getpid()),
                        kNames[static_cast<int>(level)]);
  va_list ap;
  va_start(ap, fmt);
  if (n >= 0 && n < static_cast<int>(sizeof line)) n += std::vsnprintf(line + n, sizeof line - n, fmt, ap);
  va_end(ap);
  if (n > static_cast<int>(sizeof line) - 2) n = sizeof line - 2;
  line[n++] = '\n';
  // One write() per line so that lines of concurrent processes do not interleave.
  ssize_t ignored = write(STDERR_FILENO, line, n);
  (void)ignored;
}

}  // namespace sv
