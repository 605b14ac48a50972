// softverbs-run: runs a command with softverbs as its RDMA device, visible
// the way hardware is to middleware that looks beyond the verbs API.
//
//   softverbs-run COMMAND [ARGS...]   e.g. softverbs-run ucx_info -d
//   softverbs-run --install           root, once: /dev/infiniband for every process
//   softverbs-run --uninstall
//
// For COMMAND and its children:
// - LD_LIBRARY_PATH starts with softverbs' library directory, so libibverbs
//   and librdmacm are ours;
// - /dev/infiniband/uverbs0 (and rdma_cm) exist: UCX offers only devices
//   whose node it may open read-write (it stat()s and access()es it, never
//   opens it); they are bind mounts of /dev/null;
// - /sys/class/infiniband/<dev> and /sys/class/infiniband_verbs show the
//   device: the library's sysfs view (src/verbs/sysfs_view.h) mounted there.
// Both live in a private mount namespace. A plain user gets it inside a new
// user namespace that maps only their own uid and gid (so files, processes
// and shared memory stay theirs, and peers outside are reached as before);
// root needs no user namespace. Nothing changes for other processes.
// Where the host refuses those namespaces (user namespaces disabled or
// restricted by AppArmor, a chroot, a container without CAP_SYS_ADMIN) but
// root ran --install, the command runs with LD_LIBRARY_PATH alone; without
// --install softverbs-run says so and stops.
// Put softverbs-run after `ip netns exec`, which remounts /sys.
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "overlay_dir.h"

using sv::run::Extra;
using sv::run::overlay_dir;

namespace {

[[noreturn]] void die(const std::string& message) {
  std::fprintf(stderr, "softverbs-run: %s\n", message.c_str());
  std::exit(127);
}

std::string dir_of(const std::string& path) { return path.substr(0, path.rfind('/')); }

bool exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

// Where libibverbs.so.1 is: beside the build tree's bin/ (build/lib), or in
// the installed layout (<prefix>/<libdir>/softverbs).
std::string library_dir() {
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n < 0) die("cannot find my own path");
  self[n] = '\0';
  const std::string prefix = dir_of(dir_of(self));
  for (const std::string& dir : {prefix + "/lib", prefix + "/" SOFTVERBS_INSTALL_LIBDIR "/softverbs"})
    if (exists(dir + "/libibverbs.so.1")) return dir;
  die("no libibverbs.so.1 beside " + std::string(self));
}

void prepend_library_path(const std::string& dir) {
  const char* old = std::getenv("LD_LIBRARY_PATH");
  std::string value = old && *old ? dir + ":" + old : dir;
  setenv("LD_LIBRARY_PATH", value.c_str(), 1);
}

void write_file(const char* path, const std::string& text) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0 || write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size()))
    die(std::string("cannot write ") + path + ": " + std::strerror(errno));
  close(fd);
}

// A private mount namespace; for a plain user inside a user namespace of
// their own (identity-mapped: getuid() and file ownership are unchanged).
// False, with the reason, where the host refuses them (user namespaces
// disabled or restricted by AppArmor, a chroot, a container without
// CAP_SYS_ADMIN).
bool enter_namespaces(std::string* why) {
  const uid_t uid = geteuid();
  const gid_t gid = getegid();
  if (uid == 0) {
    if (unshare(CLONE_NEWNS) != 0) {
      *why = std::string("cannot create a mount namespace (unshare: ") + std::strerror(errno) + ")";
      return false;
    }
  } else {
    if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) {
      *why = std::string("cannot create a user namespace (") + std::strerror(errno) +
             "): this host refuses them to unprivileged users (disabled, restricted by AppArmor, or a chroot)";
      return false;
    }
    write_file("/proc/self/setgroups", "deny");
    write_file("/proc/self/uid_map", std::to_string(uid) + " " + std::to_string(uid) + " 1");
    write_file("/proc/self/gid_map", std::to_string(gid) + " " + std::to_string(gid) + " 1");
  }
  // Our mounts stay ours; the host's later mounts still reach us. In a
  // chroot whose root is no mount point (a debootstrap directory) this
  // fails (EINVAL), and mounting there could reach the host's mounts: as
  // refused.
  if (mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0) {
    *why = std::string("cannot keep mounts private here (") + std::strerror(errno) + "; a chroot?)";
    return false;
  }
  return true;
}

// The library writes the view (and says where) when asked for the sysfs
// root; asking it here keeps one writer of those files. (Neither call
// starts a thread: unshare(CLONE_NEWUSER), next, needs a single-threaded
// process.)
std::string sysfs_view(const std::string& libdir) {
  void* lib = dlopen((libdir + "/libibverbs.so.1").c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) die(std::string("dlopen: ") + dlerror());
  auto sysfs_path = reinterpret_cast<const char* (*)()>(dlsym(lib, "ibv_get_sysfs_path"));
  auto get_list = reinterpret_cast<void** (*)(int*)>(dlsym(lib, "ibv_get_device_list"));
  auto free_list = reinterpret_cast<void (*)(void**)>(dlsym(lib, "ibv_free_device_list"));
  if (!sysfs_path || !get_list || !free_list) die("libibverbs.so.1 lacks ibv_get_sysfs_path");
  std::string root = sysfs_path();
  free_list(get_list(nullptr));  // brings the view's GID files up to date
  return root;
}

std::string device_name() {
  const char* name = std::getenv("SOFTVERBS_DEVICE_NAME");
  return name && *name ? name : "softverbs0";
}

void show_device(const std::string& libdir) {
  const std::string dev = device_name();
  const bool node = exists("/dev/infiniband/uverbs0");
  const bool sysfs = exists("/sys/class/infiniband/" + dev);
  if (node && sysfs) return;  // a host set up system-wide, or softverbs-run inside softverbs-run
  // Read before the namespaces change: which sysfs root the library uses here.
  const std::string view = sysfs ? "" : sysfs_view(libdir);
  std::string why;
  if (!enter_namespaces(&why)) {
    // Root set the host up (--install): the device nodes are there, and
    // the library reports its sysfs view as ibv_get_sysfs_path(), which is
    // what UCX, libfabric and the MPIs read. Only a program that walks
    // /sys/class/infiniband itself misses the device.
    if (node) return;
    die(why + ". Ask root to run `softverbs-run --install` once (then softverbs-run, or LD_LIBRARY_PATH "
              "alone, is enough), or allow them (docs/ci.md)");
  }
  std::string error;
  if (!node && !overlay_dir("/dev", {{"infiniband/uverbs0", "/dev/null"}, {"infiniband/rdma_cm", "/dev/null"}}, &error))
    die("cannot add /dev/infiniband: " + error);
  if (!sysfs && view != "/sys" &&
      !overlay_dir("/sys/class",
                   {{"infiniband/" + dev, view + "/class/infiniband/" + dev},
                    {"infiniband_verbs", view + "/class/infiniband_verbs"}},
                   &error))
    die("cannot add /sys/class/infiniband: " + error);
}

// Root, once per boot: device nodes every process sees. The kernel's own
// numbers for the verbs device (231:192) and the RDMA CM (10:<dynamic>; the
// misc minor is not fixed, 59 here) are used; nothing opens them (no driver
// is loaded), they only tell middleware that an RDMA device is present.
// sysfs cannot be changed system-wide: softverbs-run adds that view per
// command, and the library reports its own view as ibv_get_sysfs_path().
int install(bool remove) {
  if (geteuid() != 0) die("--install and --uninstall need root");
  const char* nodes[] = {"/dev/infiniband/uverbs0", "/dev/infiniband/rdma_cm"};
  const char* tmpfiles = "/etc/tmpfiles.d/softverbs.conf";
  if (remove) {
    for (const char* n : nodes) unlink(n);
    rmdir("/dev/infiniband");
    unlink(tmpfiles);
    std::printf("removed /dev/infiniband/{uverbs0,rdma_cm} and %s\n", tmpfiles);
    return 0;
  }
  if (mkdir("/dev/infiniband", 0755) != 0 && errno != EEXIST) die(std::string("mkdir /dev/infiniband: ") + std::strerror(errno));
  const dev_t numbers[] = {makedev(231, 192), makedev(10, 59)};
  for (int i = 0; i < 2; ++i) {
    if (exists(nodes[i])) continue;
    if (mknod(nodes[i], S_IFCHR | 0666, numbers[i]) != 0 || chmod(nodes[i], 0666) != 0)
      die(std::string("mknod ") + nodes[i] + ": " + std::strerror(errno));
  }
  std::printf("created /dev/infiniband/uverbs0 and rdma_cm (mode 0666)\n");
  if (exists("/etc/tmpfiles.d")) {
    FILE* f = std::fopen(tmpfiles, "w");
    if (f) {
      std::fprintf(f, "# softverbs: RDMA device nodes for middleware (softverbs-run --install)\n"
                      "d /dev/infiniband 0755 - - -\n"
                      "c /dev/infiniband/uverbs0 0666 - - - 231:192\n"
                      "c /dev/infiniband/rdma_cm 0666 - - - 10:59\n");
      std::fclose(f);
      std::printf("wrote %s (systemd recreates them at boot)\n", tmpfiles);
    }
  }
  return 0;
}

void usage() {
  std::fprintf(stderr,
               "usage: softverbs-run [--] COMMAND [ARGS...]\n"
               "       softverbs-run --install | --uninstall   (root)\n");
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  int first = 1;
  if (argc > 1 && std::strcmp(argv[1], "--install") == 0) return install(false);
  if (argc > 1 && std::strcmp(argv[1], "--uninstall") == 0) return install(true);
  if (argc > 1 && (std::strcmp(argv[1], "-h") == 0 || std::strcmp(argv[1], "--help") == 0)) usage();
  if (argc > 1 && std::strcmp(argv[1], "--") == 0) first = 2;
  if (first >= argc) usage();

  const std::string libdir = library_dir();
  show_device(libdir);
  prepend_library_path(libdir);
  execvp(argv[first], argv + first);
  die(std::string(argv[first]) + ": " + std::strerror(errno));
}
