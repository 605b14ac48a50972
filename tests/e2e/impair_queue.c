/*
 * A stand-in for tc netem where the kernel has none (sch_netem is not in
 * every kernel: CI's is built without it): it takes the packets an
 * iptables NFQUEUE rule hands it and gives each a verdict, at once or later.
 *
 *   impair_queue QUEUE [--hold PERCENT MS] [--delay MS] [--drop PERCENT]
 *                      [--drop-data PERCENT] [--drop-naks PERCENT]
 *
 *   --hold   PERCENT % of the packets, at random, leave MS milliseconds after
 *            they were sent while the others pass: they arrive after packets
 *            sent later (reordering, as netem's "reorder 25% delay 1ms")
 *   --delay  every packet leaves MS milliseconds late (in order)
 *   --drop   PERCENT % are dropped, at random
 *   --drop-data  PERCENT % of the packets over 200 bytes (data, not ACKs)
 *   --drop-naks  PERCENT % of the RC sequence-error NAKs (BTH opcode 0x11,
 *            AETH syndrome 0x60)
 *
 * (Duplication needs no stand-in: nftables' "dup" statement copies packets.)
 * Runs until SIGTERM/SIGINT, then lets every held packet go and prints
 * "passed N held N dropped N" on stdout, so a test can check that the link
 * was really impaired. The kernel cuts GSO packets into their segments
 * before queueing them, so every verdict is for one packet on the wire:
 * an nftables rule sees a GSO send whole, and softverbs sends an ACK as the
 * last, shorter segment of the reply it was held for, so a rule dropping
 * "data" there drops that ACK too (and matches a NAK only when it leads).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <libnetfilter_queue/libnetfilter_queue.h>
#include <linux/netfilter.h>
#include <linux/netlink.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define MAX_HELD 65536
#define DATA_OVER_BYTES 200  // an IP packet longer is data (ACKs and NAKs are ~60 bytes)
#define COPY_BYTES 256       // enough of each packet for its length class and its BTH and AETH

struct held {
  uint32_t id;
  uint64_t due_ns;
};

static struct {
  int hold_percent, hold_ms, delay_ms, drop_percent, drop_data_percent, drop_naks_percent;
  struct nfq_q_handle *q;
  struct held held[MAX_HELD];  // in order of due time: every hold is as long
  size_t head, count;
  unsigned long passed, held_total, dropped;
} g;

static volatile sig_atomic_t stop;

static void on_signal(int sig) {
  (void)sig;
  stop = 1;
}

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

// A RoCEv2 sequence-error NAK: its UDP payload starts with a BTH of opcode
// RC ACKNOWLEDGE (0x11) and goes on with an AETH of syndrome 0x60.
static int is_sequence_nak(const uint8_t *ip, int len) {
  if (len < 1) return 0;
  const int ip_header = (ip[0] >> 4) == 4 ? (ip[0] & 0xf) * 4 : 40;
  const int bth = ip_header + 8, aeth = bth + 12;
  return len > aeth && ip[bth] == 0x11 && ip[aeth] == 0x60;
}

// Whether this packet is to be dropped, and counts it.
static int chosen_for_loss(struct nfq_data *nfa) {
  unsigned char *ip = NULL;
  const int len = nfq_get_payload(nfa, &ip);  // (at most COPY_BYTES of it)
  const int percent = g.drop_naks_percent && is_sequence_nak(ip, len)   ? g.drop_naks_percent
                      : g.drop_data_percent && len > DATA_OVER_BYTES ? g.drop_data_percent
                                                                       : g.drop_percent;
  if (!percent || rand() % 100 >= percent) return 0;
  g.dropped++;
  return 1;
}

static void accept_packet(uint32_t id) { nfq_set_verdict(g.q, id, NF_ACCEPT, 0, NULL); }

// The held packets whose time has come (all of them when `all`).
static void release_due(int all) {
  const uint64_t now = now_ns();
  while (g.count && (all || g.held[g.head].due_ns <= now)) {
    accept_packet(g.held[g.head].id);
    g.head = (g.head + 1) % MAX_HELD;
    g.count--;
  }
}

static void hold(uint32_t id, int ms) {
  if (g.count == MAX_HELD) {  // full: the oldest goes now
    accept_packet(g.held[g.head].id);
    g.head = (g.head + 1) % MAX_HELD;
    g.count--;
  }
  g.held[(g.head + g.count) % MAX_HELD] = (struct held){id, now_ns() + (uint64_t)ms * 1000000u};
  g.count++;
}

static int on_packet(struct nfq_q_handle *q, struct nfgenmsg *msg, struct nfq_data *nfa, void *data) {
  (void)msg;
  (void)data;
  struct nfqnl_msg_packet_hdr *ph = nfq_get_msg_packet_hdr(nfa);
  if (!ph) return 0;
  const uint32_t id = ntohl(ph->packet_id);
  if (chosen_for_loss(nfa)) return nfq_set_verdict(q, id, NF_DROP, 0, NULL);
  if (g.hold_percent && rand() % 100 < g.hold_percent) {
    g.held_total++;
    hold(id, g.hold_ms);
    return 0;
  }
  g.passed++;
  if (g.delay_ms) {
    hold(id, g.delay_ms);
    return 0;
  }
  accept_packet(id);
  return 0;
}

static int usage(void) {
  fprintf(stderr,
          "usage: impair_queue QUEUE [--hold PERCENT MS] [--delay MS] [--drop PERCENT] [--drop-data PERCENT]\n"
          "                    [--drop-naks PERCENT]\n");
  return 2;
}

int main(int argc, char **argv) {
  if (argc < 2) return usage();
  const int queue = atoi(argv[1]);
  for (int i = 2; i < argc; ++i) {
    if (!strcmp(argv[i], "--hold") && i + 2 < argc) {
      g.hold_percent = atoi(argv[++i]);
      g.hold_ms = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--delay") && i + 1 < argc) {
      g.delay_ms = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--drop") && i + 1 < argc) {
      g.drop_percent = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--drop-data") && i + 1 < argc) {
      g.drop_data_percent = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--drop-naks") && i + 1 < argc) {
      g.drop_naks_percent = atoi(argv[++i]);
    } else {
      return usage();
    }
  }
  if (g.delay_ms && g.hold_percent) {
    fprintf(stderr, "impair_queue: --hold and --delay together would release out of due order\n");
    return 2;
  }
  srand((unsigned)now_ns());
  struct nfq_handle *h = nfq_open();
  if (!h) {
    perror("nfq_open");
    return 77;
  }
  g.q = nfq_create_queue(h, (uint16_t)queue, on_packet, NULL);
  if (!g.q) {
    perror("nfq_create_queue");
    return 77;
  }
  // The packet's first bytes (its length and headers; no more copied to
  // us); when we fall behind, packets pass rather than being dropped (the
  // loss we add is the --drop options' alone).
  nfq_set_mode(g.q, NFQNL_COPY_PACKET, COPY_BYTES);
  nfq_set_queue_maxlen(g.q, 8192);
  nfq_set_queue_flags(g.q, NFQA_CFG_F_FAIL_OPEN, NFQA_CFG_F_FAIL_OPEN);
  signal(SIGTERM, on_signal);
  signal(SIGINT, on_signal);
  printf("ready\n");
  fflush(stdout);
  const int fd = nfq_fd(h);
  // A burst must not overrun the socket: a verdict message lost to ENOBUFS
  // would leave its packet queued in the kernel for good.
  nfnl_rcvbufsiz(nfq_nfnlh(h), 8 << 20);
  const int one = 1;
  setsockopt(fd, SOL_NETLINK, NETLINK_NO_ENOBUFS, &one, sizeof one);
  char buf[65536] __attribute__((aligned));
  while (!stop) {
    int timeout_ms = -1;
    if (g.count) {
      const uint64_t now = now_ns(), due = g.held[g.head].due_ns;
      timeout_ms = due <= now ? 0 : (int)((due - now + 999999) / 1000000);
    }
    struct pollfd p = {fd, POLLIN, 0};
    const int r = poll(&p, 1, timeout_ms);
    if (r < 0 && errno != EINTR) break;
    if (r > 0) {
      const ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
      if (n > 0) nfq_handle_packet(h, buf, (int)n);
    }
    release_due(0);
  }
  release_due(1);
  nfq_destroy_queue(g.q);
  nfq_close(h);
  printf("passed %lu held %lu dropped %lu\n", g.passed, g.held_total, g.dropped);
  return 0;
}
