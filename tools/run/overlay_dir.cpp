#include "overlay_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>

namespace sv::run {
namespace {

bool fail(std::string* error, const std::string& what) {
  *error = what + ": " + std::strerror(errno);
  return false;
}

// A mount point for `source`: a directory for a directory, an empty file
// for anything else (a bind mount needs a point of the same kind).
bool make_point(const std::string& point, bool directory) {
  if (directory) return mkdir(point.c_str(), 0755) == 0 || errno == EEXIST;
  int fd = open(point.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  close(fd);
  return true;
}

bool bind(const std::string& source, const std::string& point, std::string* error) {
  struct stat st;
  if (stat(source.c_str(), &st) != 0) return fail(error, "stat " + source);
  if (!make_point(point, S_ISDIR(st.st_mode))) return fail(error, "create " + point);
  if (mount(source.c_str(), point.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0)
    return fail(error, "bind " + source + " on " + point);
  return true;
}

bool make_dirs(const std::string& root, const std::string& rel) {
  std::string dir = root;
  for (size_t start = 0, slash; (slash = rel.find('/', start)) != std::string::npos; start = slash + 1) {
    dir += "/" + rel.substr(start, slash - start);
    if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return false;
  }
  return true;
}

}  // namespace

bool overlay_dir(const std::string& dir, const std::vector<Extra>& extras, std::string* error) {
  // The original stays reachable through this descriptor once covered.
  int original = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (original < 0) return fail(error, "open " + dir);
  const std::string through = "/proc/self/fd/" + std::to_string(original) + "/";

  // Extras grouped by their first component: one that names an existing
  // directory is overlaid inside it (recursively), the others go in here.
  std::map<std::string, std::vector<Extra>> nested;
  std::vector<Extra> here;
  for (const Extra& e : extras) {
    const size_t slash = e.path.find('/');
    struct stat st;
    const std::string first = e.path.substr(0, slash);
    if (slash != std::string::npos && fstatat(original, first.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISDIR(st.st_mode))
      nested[first].push_back(Extra{e.path.substr(slash + 1), e.source});
    else
      here.push_back(e);
  }

  if (mount("softverbs", dir.c_str(), "tmpfs", MS_NOSUID, "mode=0755") != 0) {
    close(original);
    return fail(error, "mount a tmpfs on " + dir);
  }
  bool ok = true;
  DIR* d = fdopendir(dup(original));
  if (!d) ok = fail(error, "read " + dir);
  while (ok && d) {
    dirent* entry = readdir(d);
    if (!entry) break;
    const std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    const std::string point = dir + "/" + name;
    struct stat st;
    if (fstatat(original, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;  // gone meanwhile
    if (S_ISLNK(st.st_mode)) {
      char target[4096];
      ssize_t n = readlinkat(original, name.c_str(), target, sizeof target - 1);
      if (n < 0) continue;
      target[n] = '\0';
      if (symlink(target, point.c_str()) != 0) ok = fail(error, "symlink " + point);
      continue;
    }
    ok = bind(through + name, point, error);
    if (ok && nested.count(name)) ok = overlay_dir(point, nested[name], error);
  }
  if (d) closedir(d);
  for (size_t i = 0; ok && i < here.size(); ++i) {
    ok = make_dirs(dir, here[i].path) && bind(here[i].source, dir + "/" + here[i].path, error);
    if (!ok && error->empty()) fail(error, "create the parents of " + dir + "/" + here[i].path);
  }
  close(original);
  return ok;
}

}  // namespace sv::run
