#include "verbs/sysfs_view.h"

#include <dirent.h>
#include <endian.h>
#include <fcntl.h>
#include <ftw.h>
#include <net/if.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "core/device_attr.h"
#include "core/device_profile.h"
#include "core/gid_table.h"
#include "core/limits.h"
#include "shm/idle_namespaces.h"
#include "shm/registry.h"
#include "shm/runtime_dir.h"
#include "util/knobs.h"
#include "util/log.h"
#include "util/namespaces_in_use.h"
#include "util/small_file.h"
#include "util/unix_socket_address.h"

namespace sv::abi {
namespace {

// The files of one device, by path relative to the view's root, as the
// kernel's ib_core shows them (drivers/infiniband/core/sysfs.c).
using Files = std::map<std::string, std::string>;
using Links = std::map<std::string, std::string>;

std::string format(const char* fmt, auto... args) {
  char buf[256];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

std::string guid_text(uint64_t guid) {
  return format("%04x:%04x:%04x:%04x\n", unsigned(guid >> 48) & 0xffff, unsigned(guid >> 32) & 0xffff,
                unsigned(guid >> 16) & 0xffff, unsigned(guid) & 0xffff);
}

std::string gid_text(const ibv_gid& gid) {
  std::string out;
  for (int i = 0; i < 16; i += 2) out += format(i ? ":%02x%02x" : "%02x%02x", gid.raw[i], gid.raw[i + 1]);
  return out + "\n";
}

// ib_core's rate_show: "<Gb/s> Gb/sec (<width>X <speed name>)".
std::string rate_text(const ibv_port_attr& p) {
  struct Speed {
    uint8_t code;
    double gbps;  // per lane
    const char* name;
  };
  static const Speed kSpeeds[] = {{1, 2.5, "SDR"},  {2, 5, "DDR"},    {4, 10, "QDR"},  {8, 10, "FDR10"},
                                  {16, 14, "FDR"},  {32, 25, "EDR"},  {64, 50, "HDR"}, {128, 100, "NDR"}};
  int lanes = p.active_width == 1 ? 1 : p.active_width == 2 ? 4 : p.active_width == 4 ? 8 : p.active_width == 8 ? 12 : 2;
  for (const Speed& s : kSpeeds)
    if (s.code == p.active_speed) return format("%g Gb/sec (%dX %s)\n", s.gbps * lanes, lanes, s.name);
  return "0 Gb/sec\n";
}

// Every CPU is "local" to a device that is a memory copy: the kernel's
// cpumask format (32-bit hex groups, most significant first, commas).
std::string all_cpus_mask(long cpus) {
  std::string out;
  for (long group = (cpus - 1) / 32; group >= 0; --group) {
    long in_group = std::min<long>(32, cpus - group * 32);
    uint32_t bits = in_group >= 32 ? 0xffffffffu : ((1u << in_group) - 1);
    out += format(out.empty() ? "%x" : ",%08x", bits);
  }
  return out + "\n";
}

bool is_loopback_netdev(const std::string& ifname) {
  const unsigned long flags = std::strtoul(read_small_file("/sys/class/net/" + ifname + "/flags").value_or("").c_str(), nullptr, 16);
  return ifname == "lo" || (flags & IFF_LOOPBACK);
}

// False when the host's addresses cannot be read (the view is left as it is).
bool describe_device(const std::string& name, Files* files, Links* links) {
  const std::string dev = "class/infiniband/" + name + "/";
  ibv_device_attr attr{};
  fill_device_attr(&attr);
  const std::optional<PrivateVector<GidEntry>> read = try_read_gid_table();
  if (!read) return false;
  const PrivateVector<GidEntry>& gids = *read;
  const int gid_count = std::min<int>(static_cast<int>(gids.size()), limits::kGidTableLen);
  ibv_port_attr port{};
  fill_port_attr(&port, gids);

  char host[256] = "localhost";
  gethostname(host, sizeof host - 1);
  (*files)[dev + "node_type"] = "1: CA\n";
  (*files)[dev + "node_guid"] = guid_text(be64toh(attr.node_guid));
  (*files)[dev + "sys_image_guid"] = guid_text(be64toh(attr.sys_image_guid));
  (*files)[dev + "fw_ver"] = std::string(attr.fw_ver) + "\n";
  (*files)[dev + "hca_type"] = "softverbs\n";
  (*files)[dev + "hw_rev"] = format("0x%x\n", attr.hw_ver);
  (*files)[dev + "board_id"] = device_profile().board_id + "\n";
  (*files)[dev + "node_desc"] = std::string(host) + " " + name + "\n";

  const long cpus = std::max(1L, sysconf(_SC_NPROCESSORS_CONF));
  (*files)[dev + "device/numa_node"] = "-1\n";
  (*files)[dev + "device/local_cpus"] = all_cpus_mask(cpus);
  (*files)[dev + "device/local_cpulist"] = cpus > 1 ? format("0-%ld\n", cpus - 1) : "0\n";
  // device/net holds the device's own interfaces: those of its GIDs, but
  // not the loopback unless there is nothing else. A NIC's PCI device has
  // no lo (GIDs of other netdevs, VLANs or bonds, are not under it either),
  // and programs take the first entry for "the" netdev: rdma-core's tests
  // took lo in a namespace (a veth sorts after it) and bound 127.0.0.1.
  std::set<std::string> netdevs, loopbacks;
  for (int i = 0; i < gid_count; ++i) (is_loopback_netdev(gids[i].ifname) ? loopbacks : netdevs).insert(gids[i].ifname);
  if (netdevs.empty()) netdevs = loopbacks;
  for (const std::string& ifname : netdevs) (*links)[dev + "device/net/" + ifname] = "/sys/class/net/" + ifname;

  const std::string p = dev + "ports/1/";
  const bool active = port.state == IBV_PORT_ACTIVE;
  (*files)[p + "state"] = active ? "4: ACTIVE\n" : "1: DOWN\n";
  (*files)[p + "phys_state"] = active ? "5: LinkUp\n" : "3: Disabled\n";
  const bool ib = port.link_layer == IBV_LINK_LAYER_INFINIBAND;
  (*files)[p + "link_layer"] = ib ? "InfiniBand\n" : "Ethernet\n";
  (*files)[p + "rate"] = rate_text(port);
  (*files)[p + "lid"] = format("0x%x\n", port.lid);
  (*files)[p + "sm_lid"] = format("0x%x\n", port.sm_lid);
  (*files)[p + "lid_mask_count"] = "0\n";
  (*files)[p + "sm_sl"] = "0\n";
  (*files)[p + "cap_mask"] = format("0x%08x\n", port.port_cap_flags);
  for (int i = 0; i < limits::kGidTableLen; ++i) {
    const bool used = i < gid_count;
    (*files)[p + "gids/" + std::to_string(i)] = gid_text(used ? gids[i].gid : ibv_gid{});
    // An empty entry has no type or netdev: reading them fails in the
    // kernel's sysfs (EINVAL); here the file is absent.
    if (!used) continue;
    (*files)[p + "gid_attrs/types/" + std::to_string(i)] = ib ? "IB/RoCE v1\n" : "RoCE v2\n";
    (*files)[p + "gid_attrs/ndevs/" + std::to_string(i)] = gids[i].ifname + "\n";
  }
  for (uint32_t i = 0; i < limits::kMaxPkeys; ++i)
    (*files)[p + "pkeys/" + std::to_string(i)] = format("0x%04x\n", i == 0 ? limits::kDefaultPkey : 0);

  const std::string verbs = "class/infiniband_verbs/uverbs0/";
  (*files)["class/infiniband_verbs/abi_version"] = "6\n";
  (*files)[verbs + "ibdev"] = name + "\n";
  (*files)[verbs + "abi_version"] = "1\n";
  (*files)[verbs + "dev"] = "231:192\n";
  (*links)[verbs + "device"] = "../../infiniband/" + name + "/device";
  return true;
}

// The rest of /sys, reached through symbolic links, so that the view can
// be a program's whole sysfs root.
void link_the_rest(Links* links) {
  auto link_entries = [links](const std::string& real, const std::string& in_view, const std::set<std::string>& own) {
    DIR* d = opendir(real.c_str());
    if (!d) return;
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n == "." || n == ".." || own.count(n)) continue;
      (*links)[in_view + n] = real + "/" + n;
    }
    closedir(d);
  };
  link_entries("/sys", "", {"class"});
  link_entries("/sys/class", "class/", {"infiniband", "infiniband_verbs"});
}

bool make_parents(const std::string& root, const std::string& rel) {
  for (size_t slash = rel.find('/'); slash != std::string::npos; slash = rel.find('/', slash + 1)) {
    std::string dir = root + "/" + rel.substr(0, slash);
    if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return false;
  }
  return true;
}

std::string read_all(const std::string& path) { return read_small_file(path, O_NOFOLLOW).value_or(""); }

// Files are replaced by rename, so a reader never sees half a file and
// processes writing the same view at once do not disturb each other.
bool put_file(const std::string& root, const std::string& rel, const std::string& content) {
  const std::string path = root + "/" + rel;
  if (read_all(path) == content) return true;
  if (!make_parents(root, rel)) return false;
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return false;
  bool ok = write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size());
  close(fd);
  if (ok && rename(tmp.c_str(), path.c_str()) == 0) return true;
  unlink(tmp.c_str());
  return false;
}

bool put_link(const std::string& root, const std::string& rel, const std::string& target) {
  const std::string path = root + "/" + rel;
  char buf[4096];
  ssize_t n = readlink(path.c_str(), buf, sizeof buf);
  if (n >= 0 && std::string(buf, static_cast<size_t>(n)) == target) return true;
  if (!make_parents(root, rel)) return false;
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  unlink(tmp.c_str());
  if (symlink(target.c_str(), tmp.c_str()) == 0 && rename(tmp.c_str(), path.c_str()) == 0) return true;
  unlink(tmp.c_str());
  return false;
}

// Entries a previous refresh wrote that no longer exist (a GID gone with
// its address, an interface gone from device/net).
void remove_stale(const std::string& root, const std::string& rel_dir, const Files& files, const Links& links) {
  DIR* d = opendir((root + "/" + rel_dir).c_str());
  if (!d) return;
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n == "." || n == "..") continue;
    std::string rel = rel_dir + n;
    if (!files.count(rel) && !links.count(rel)) unlinkat(dirfd(d), n.c_str(), 0);
  }
  closedir(d);
}

// A directory of our own: created by us, or already ours and writable by
// us alone (another user may not plant files in it, or a link in its place).
bool own_directory(const std::string& dir) {
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return false;
  struct stat st;
  return lstat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() &&
         (st.st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

// The view's own files, in its root. (Hidden names: no sysfs reader lists
// them, and a program whose sysfs root is the view sees only what /sys
// would show.)
constexpr const char* kStampName = ".softverbs-view-stamp";
constexpr const char* kLockName = ".softverbs-view-lock";

int remove_entry(const char* path, const struct stat*, int type, FTW*) {
  if (type == FTW_DP)
    rmdir(path);
  else
    unlink(path);
  return 0;
}

// The views of namespaces that are gone (a test's `ip netns del`), ~0.6 MB
// of tmpfs each, which no process of theirs comes back to use. A view in
// use is a namespace in use: its processes are in it (softverbs-run's
// session too, whose mount of the view is held by its processes); and
// where those are hidden from us (a pid namespace of their own), those
// holding the device still hold slots in its registry.
void remove_views_of_gone_namespaces(const std::string& base, uint64_t own) {
  std::vector<std::string> gone;
  DIR* d = opendir(base.c_str());
  if (!d) return;
  const auto in_use = network_namespaces_in_use();
  while (dirent* e = readdir(d)) {
    if (std::strncmp(e->d_name, "net", 3) != 0) continue;
    char* end = nullptr;
    const uint64_t netns = std::strtoull(e->d_name + 3, &end, 10);
    if (netns && netns != own && *end == '\0' && !in_use.count(netns) &&
        shm::namespace_registry_idle(shm::runtime_dir(), netns))
      gone.push_back(base + "/" + e->d_name);
  }
  closedir(d);
  for (const std::string& dir : gone) {
    // (Under its lock, taken without waiting: a process of a new namespace
    // with the same inode may be writing it. It finds the lock's file
    // unlinked when it gets the lock, and makes the view again: ViewLock.)
    const int lock = open((dir + "/" + kLockName).c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (lock < 0 || flock(lock, LOCK_EX | LOCK_NB) == 0) nftw(dir.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    if (lock >= 0) close(lock);
  }
  if (!gone.empty()) SV_DEBUG("removed the sysfs views of %zu network namespaces that are gone", gone.size());
}

std::string choose_view_dir() {
  const uint64_t netns = own_netns_inode();
  std::string base = "/dev/shm/softverbs-uid" + std::to_string(geteuid()) + ".sysfs";
  if (own_directory(base)) {
    std::string dir = base + "/net" + std::to_string(netns);
    struct stat st;
    const bool first_of_namespace = lstat(dir.c_str(), &st) != 0;
    if (own_directory(dir)) {
      // (Once per namespace: a machine that runs namespace tests makes hundreds.)
      if (first_of_namespace && netns) remove_views_of_gone_namespaces(base, netns);
      return dir;
    }
  }
  // /dev/shm missing, or the name taken by someone else: a private one.
  const char* tmpdir = std::getenv("TMPDIR");
  std::string pattern = std::string(tmpdir && *tmpdir ? tmpdir : "/tmp") + "/softverbs-sysfs-XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  if (mkdtemp(buf.data())) {
    SV_WARN("sysfs view: %s is not ours; using %s", base.c_str(), buf.data());
    return buf.data();
  }
  return "";
}

std::mutex refresh_mu;

// An exclusive flock of the view's lock file while it lives (none if the
// file cannot be opened: refreshing unlocked is what was done before).
class ViewLock {
 public:
  explicit ViewLock(const std::string& dir) {
    // The view may have been swept away as a gone namespace's while we
    // waited (the namespace's inode was reused: remove_views_of_gone_namespaces):
    // then it is made again.
    for (int tries = 0; tries < 3; ++tries) {
      fd_ = open((dir + "/" + kLockName).c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
      if (fd_ < 0 && errno == ENOENT && own_directory(dir)) continue;
      if (fd_ < 0) return;
      flock(fd_, LOCK_EX);
      struct stat st;
      if (fstat(fd_, &st) != 0 || st.st_nlink > 0) return;
      close(fd_);
      fd_ = -1;
      own_directory(dir);
    }
  }
  ~ViewLock() {
    if (fd_ >= 0) close(fd_);  // (closing releases the lock)
  }
  ViewLock(const ViewLock&) = delete;
  ViewLock& operator=(const ViewLock&) = delete;

 private:
  int fd_ = -1;
};

// The view's contents, as a line of text: FNV-1a over every entry's path
// and contents (files) or target (links), in path order.
std::string view_stamp(const Files& files, const Links& links) {
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&h](const std::string& s) {
    for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
    h = (h ^ 0xff) * 0x100000001b3ull;  // (a separator: "ab"+"c" is not "a"+"bc")
  };
  for (const auto& [rel, content] : files) mix(rel), mix(content);
  mix("links");
  for (const auto& [rel, target] : links) mix(rel), mix(target);
  return format("%016llx %zu %zu\n", static_cast<unsigned long long>(h), files.size(), links.size());
}

}  // namespace

std::string refresh_sysfs_view() {
  std::lock_guard lock(refresh_mu);
  static const std::string dir = choose_view_dir();
  if (dir.empty()) {
    SV_WARN("sysfs view: no directory to write it in");
    return dir;
  }
  Files files;
  Links links;
  if (!describe_device(knobs().device_name, &files, &links)) return dir;
  link_the_rest(&links);
  // Every process that opens the device refreshes the view; the view is
  // almost always as the last one left it. A stamp of what it holds,
  // written after a complete refresh, saves comparing each of its ~350
  // entries (256 GID files): that was a third of a process's start-up.
  // (Under the view's lock: a process that wrote part of a new view and
  // then another's stamp of the old one would leave a mix that no later
  // process repairs. The lock is held ~0.1 ms when the stamp holds.)
  const std::string stamp = view_stamp(files, links);
  ViewLock view_lock(dir);
  if (read_all(dir + "/" + kStampName) == stamp) return dir;
  bool ok = true;
  for (const auto& [rel, content] : files) ok &= put_file(dir, rel, content);
  for (const auto& [rel, target] : links) ok &= put_link(dir, rel, target);
  const std::string port = "class/infiniband/" + knobs().device_name + "/ports/1/";
  remove_stale(dir, port + "gid_attrs/types/", files, links);
  remove_stale(dir, port + "gid_attrs/ndevs/", files, links);
  remove_stale(dir, "class/infiniband/" + knobs().device_name + "/device/net/", files, links);
  if (ok)
    put_file(dir, kStampName, stamp);
  else
    SV_WARN("sysfs view: could not write every file under %s (%s)", dir.c_str(), strerror(errno));
  return dir;
}

const std::string& sysfs_root() {
  static const std::string root = [] {
    const char* env = std::getenv("SYSFS_PATH");
    if (env && *env) {
      std::string r = env;
      while (r.size() > 1 && r.back() == '/') r.pop_back();
      return r;
    }
    struct stat st;
    const std::string mounted = "/sys/class/infiniband/" + knobs().device_name;
    if (stat(mounted.c_str(), &st) == 0) return std::string("/sys");
    std::string view = refresh_sysfs_view();
    return view.empty() ? std::string("/sys") : view;
  }();
  return root;
}

}  // namespace sv::abi
