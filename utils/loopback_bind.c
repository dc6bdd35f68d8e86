/* Preloaded into TFF's worker_binary (LD_PRELOAD) so that its gRPC server listens on loopback only.

   TFF 0.87's worker takes only --port and binds the wildcard address ([::] or 0.0.0.0) with no TLS and no
   authentication: anyone who reaches the port can run code as the worker's user. This library replaces the C
   library's bind(): a bind to a wildcard address binds the loopback address of the same family instead
   (0.0.0.0 -> 127.0.0.1; [::] -> [::ffff:127.0.0.1] on a dual-stack socket, which accepts what 127.0.0.1 and
   "localhost" reach, or [::1] on an IPv6-only one). Binds to any other address are passed through unchanged.
   utils/loopback.py builds and checks it (docs/operations.md, "Several machines"). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

typedef int (*bind_fn)(int, const struct sockaddr *, socklen_t);

static int ipv6_only(int fd) {
  int value = 0;
  socklen_t size = sizeof(value);
  return getsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &value, &size) == 0 && value;
}

int bind(int fd, const struct sockaddr *address, socklen_t size) {
  static bind_fn real_bind = NULL;
  if (real_bind == NULL) {
    real_bind = (bind_fn)dlsym(RTLD_NEXT, "bind");
    if (real_bind == NULL) {
      errno = ENOSYS;
      return -1;
    }
  }
  if (address != NULL && address->sa_family == AF_INET && size >= sizeof(struct sockaddr_in)) {
    struct sockaddr_in ipv4;
    memcpy(&ipv4, address, sizeof(ipv4));
    if (ipv4.sin_addr.s_addr == htonl(INADDR_ANY)) {
      ipv4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      return real_bind(fd, (const struct sockaddr *)&ipv4, sizeof(ipv4));
    }
  } else if (address != NULL && address->sa_family == AF_INET6 && size >= sizeof(struct sockaddr_in6)) {
    struct sockaddr_in6 ipv6;
    memcpy(&ipv6, address, sizeof(ipv6));
    if (IN6_IS_ADDR_UNSPECIFIED(&ipv6.sin6_addr)) {
      if (ipv6_only(fd)) {
        ipv6.sin6_addr = in6addr_loopback;
      } else {
        static const unsigned char mapped_loopback[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1};
        memcpy(&ipv6.sin6_addr, mapped_loopback, sizeof(mapped_loopback));
      }
      return real_bind(fd, (const struct sockaddr *)&ipv6, sizeof(ipv6));
    }
  }
  return real_bind(fd, address, size);
}
