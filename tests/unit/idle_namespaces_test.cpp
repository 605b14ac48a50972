// The state of a network namespace that is gone is removed only when no
// process holds a slot of its registry: a namespace whose processes are
// hidden from the sweeper (another pid namespace) keeps its registry while
// they live (shm/idle_namespaces.h).
#include "shm/idle_namespaces.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <atomic>
#include <thread>

#include "shm/layout.h"
#include "shm/robust_mutex.h"
#include "util/unix_socket_address.h"

namespace sv::shm {
namespace {

namespace fs = std::filesystem;

// An inode no network namespace has (nsfs inodes are large numbers).
constexpr uint64_t kGoneNamespace = 7;

class IdleNamespaces : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/sv-idle-ns-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
  }
  void TearDown() override {
    if (hdr_) munmap(hdr_, sizeof(RegistryHeader));
    fs::remove_all(dir_);
  }
  std::string registry_of(uint64_t netns) const {
    return dir_ + "/registry.v" + std::to_string(kLayoutVersion) + ".net" + std::to_string(netns);
  }
  // A registry of `netns` as its processes leave it: slot 3 claimed.
  RegistryHeader* make_registry(uint64_t netns) {
    const int fd = open(registry_of(netns).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(ftruncate(fd, sizeof(RegistryHeader)), 0);
    void* p = mmap(nullptr, sizeof(RegistryHeader), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    EXPECT_NE(p, MAP_FAILED);
    auto* hdr = static_cast<RegistryHeader*>(p);
    hdr->magic = kRegistryMagic;
    hdr->version = kLayoutVersion;
    hdr->header_size = sizeof(RegistryHeader);
    robust_mutex_init(&hdr->claims);
    robust_mutex_init(&hdr->procs[3].alive);
    hdr->procs[3].state.store(kProcLive);
    hdr->slots_used.store(4);  // (as a claim of slot 3 leaves it)
    return hdr;
  }
  void touch(const std::string& name) const { close(open((dir_ + "/" + name).c_str(), O_CREAT | O_WRONLY, 0600)); }
  bool exists(const std::string& path) const { return fs::exists(path); }

  std::string dir_;
  RegistryHeader* hdr_ = nullptr;
};

TEST_F(IdleNamespaces, ALiveSlotKeepsTheRegistryAndItsSocketsADeadOneLetsThemGo) {
  hdr_ = make_registry(kGoneNamespace);
  const std::string roce = "roce-" + std::to_string(kGoneNamespace) + "-3";
  const std::string gsi = "gsi-" + std::to_string(kGoneNamespace) + "-softverbs-uid0-gsi-tcp-0.0.0.0:7471";
  const std::string other = "roce-" + std::to_string(kGoneNamespace) + "0-3";  // namespace 70's
  touch(roce), touch(gsi), touch(other);

  // The slot's owner lives (its keeper holds the liveness lock), hidden
  // from the sweeper's /proc: all stays.
  std::atomic<bool> release{false}, held{false};
  std::thread keeper([&] {
    pthread_mutex_lock(&hdr_->procs[3].alive);
    held = true;
    while (!release) usleep(1000);
    pthread_mutex_unlock(&hdr_->procs[3].alive);
  });
  while (!held) usleep(1000);
  ASSERT_TRUE(proc_alive(hdr_->procs[3]));
  remove_state_of_idle_namespaces(dir_);
  EXPECT_TRUE(exists(registry_of(kGoneNamespace)));
  EXPECT_TRUE(exists(dir_ + "/" + roce));
  EXPECT_TRUE(exists(dir_ + "/" + gsi));
  EXPECT_FALSE(namespace_registry_idle(dir_, kGoneNamespace));

  // Its owner gone (killed: a thread that exits holding the lock leaves it
  // to the kernel, which marks its owner dead): the registry and the
  // namespace's socket files go, another namespace's stay.
  release = true;
  keeper.join();
  std::thread killed([&] { pthread_mutex_lock(&hdr_->procs[3].alive); });
  killed.join();
  ASSERT_FALSE(proc_alive(hdr_->procs[3]));
  EXPECT_TRUE(namespace_registry_idle(dir_, kGoneNamespace));
  remove_state_of_idle_namespaces(dir_);
  EXPECT_FALSE(exists(registry_of(kGoneNamespace)));
  EXPECT_FALSE(exists(dir_ + "/" + roce));
  EXPECT_FALSE(exists(dir_ + "/" + gsi));
  EXPECT_TRUE(exists(dir_ + "/" + other));
  EXPECT_TRUE(namespace_registry_idle(dir_, kGoneNamespace)) << "no registry: idle";
}

// A process of that namespace claiming a slot right now (its claims lock
// held) keeps the registry: it would claim in a registry no one else finds.
TEST_F(IdleNamespaces, AClaimUnderWayKeepsTheRegistry) {
  hdr_ = make_registry(kGoneNamespace);
  hdr_->procs[3].state.store(kProcFree);
  ASSERT_EQ(pthread_mutex_lock(&hdr_->claims), 0);
  remove_state_of_idle_namespaces(dir_);
  EXPECT_TRUE(exists(registry_of(kGoneNamespace)));
  pthread_mutex_unlock(&hdr_->claims);
  remove_state_of_idle_namespaces(dir_);
  EXPECT_FALSE(exists(registry_of(kGoneNamespace)));
}

TEST_F(IdleNamespaces, OurOwnNamespaceAndOnesInUseKeepTheirsIdleOrNot) {
  const uint64_t own = own_netns_inode();
  ASSERT_NE(own, 0u);
  hdr_ = make_registry(own);
  hdr_->procs[3].state.store(kProcFree);  // idle: nobody in it
  touch("roce-" + std::to_string(own) + "-3");
  remove_state_of_idle_namespaces(dir_);
  EXPECT_TRUE(exists(registry_of(own)));
  EXPECT_TRUE(exists(dir_ + "/roce-" + std::to_string(own) + "-3"));
}

}  // namespace
}  // namespace sv::shm
