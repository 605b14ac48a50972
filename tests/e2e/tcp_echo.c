/* An ordinary TCP echo server and client, for running under librspreload
 * (LD_PRELOAD=librspreload.so): it uses only calls that librspreload turns
 * into rsockets calls (socket, setsockopt, bind, listen, accept, connect,
 * send, recv, poll, getsockname, getpeername, shutdown, close).
 *
 *   tcp_echo server PORT          serves one client, echoes until EOF
 *   tcp_echo client HOST PORT N   sends N messages of growing size, checks
 *                                 every echo byte, exits 0 when all match
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_MSG 65536

static int wait_for(int fd, short events) {
  struct pollfd p = {fd, events, 0};
  int rc = poll(&p, 1, 10000);
  if (rc <= 0) {
    fprintf(stderr, "poll: %s\n", rc == 0 ? "timeout" : strerror(errno));
    return -1;
  }
  if (p.revents & (POLLERR | POLLNVAL)) {
    fprintf(stderr, "poll: revents 0x%x\n", p.revents);
    return -1;
  }
  return 0;
}

static int send_all(int fd, const char *buf, size_t len) {
  while (len) {
    ssize_t n = send(fd, buf, len, 0);
    if (n < 0) {
      perror("send");
      return -1;
    }
    buf += n;
    len -= (size_t)n;
  }
  return 0;
}

static int recv_all(int fd, char *buf, size_t len) {
  while (len) {
    if (wait_for(fd, POLLIN)) return -1;
    ssize_t n = recv(fd, buf, len, 0);
    if (n <= 0) {
      fprintf(stderr, "recv: %s\n", n == 0 ? "unexpected end of stream" : strerror(errno));
      return -1;
    }
    buf += n;
    len -= (size_t)n;
  }
  return 0;
}

static int server(int port) {
  int one = 1;
  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  if (lfd < 0) return perror("socket"), 1;
  if (setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one)) perror("setsockopt");
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port)};
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  if (bind(lfd, (struct sockaddr *)&addr, sizeof addr)) return perror("bind"), 1;
  if (listen(lfd, 4)) return perror("listen"), 1;
  printf("listening on %d\n", port);
  fflush(stdout);
  struct sockaddr_in peer;
  socklen_t len = sizeof peer;
  int fd = accept(lfd, (struct sockaddr *)&peer, &len);
  if (fd < 0) return perror("accept"), 1;
  char name[64];
  printf("accepted %s\n", inet_ntop(AF_INET, &peer.sin_addr, name, sizeof name));
  static char buf[MAX_MSG];
  long total = 0;
  for (;;) {
    if (wait_for(fd, POLLIN)) return 1;
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n < 0) return perror("recv"), 1;
    if (n == 0) break; /* the client is done */
    if (send_all(fd, buf, (size_t)n)) return 1;
    total += n;
  }
  printf("echoed %ld bytes\n", total);
  close(fd);
  close(lfd);
  return 0;
}

static int client(const char *host, int port, int count) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return perror("socket"), 1;
  int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one)) perror("setsockopt");
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port)};
  if (inet_pton(AF_INET, host, &addr.sin_addr) != 1) return fprintf(stderr, "bad host\n"), 1;
  if (connect(fd, (struct sockaddr *)&addr, sizeof addr)) return perror("connect"), 1;
  struct sockaddr_in local, peer;
  socklen_t llen = sizeof local, plen = sizeof peer;
  if (getsockname(fd, (struct sockaddr *)&local, &llen) || getpeername(fd, (struct sockaddr *)&peer, &plen))
    return perror("getsockname/getpeername"), 1;
  if (ntohs(peer.sin_port) != port) return fprintf(stderr, "getpeername: port %d\n", ntohs(peer.sin_port)), 1;
  static char out[MAX_MSG], in[MAX_MSG];
  long total = 0;
  for (int i = 0; i < count; i++) {
    size_t len = 1 + ((size_t)i * 977) % MAX_MSG;
    for (size_t k = 0; k < len; k++) out[k] = (char)(i + k * 7);
    if (send_all(fd, out, len) || recv_all(fd, in, len)) return 1;
    if (memcmp(in, out, len)) return fprintf(stderr, "message %d: echo differs\n", i), 1;
    total += (long)len;
  }
  if (shutdown(fd, SHUT_WR)) return perror("shutdown"), 1;
  /* The server closes after our end of stream: we read end of stream too. */
  if (wait_for(fd, POLLIN)) return 1;
  char extra;
  ssize_t n = recv(fd, &extra, 1, 0);
  if (n != 0) return fprintf(stderr, "expected end of stream, got %zd\n", n), 1;
  close(fd);
  printf("%d messages, %ld bytes echoed and verified\n", count, total);
  return 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc == 3 && !strcmp(argv[1], "server")) return server(atoi(argv[2]));
  if (argc == 5 && !strcmp(argv[1], "client")) return client(argv[2], atoi(argv[3]), atoi(argv[4]));
  fprintf(stderr, "usage: %s server PORT | client HOST PORT COUNT\n", argv[0]);
  return 2;
}
