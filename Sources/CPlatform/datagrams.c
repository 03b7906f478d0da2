// See include/rlk_platform.h (datagrams). _GNU_SOURCE for recvmmsg, sendmmsg and struct mmsghdr,
// which Swift's Glibc module does not import.
#define _GNU_SOURCE
#include "rlk_platform.h"

#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <string.h>

int rlk_datagram_socket(int family) {
    return socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
}

int rlk_receive_datagrams(int fd, unsigned char *buffer, size_t size, struct rlk_received *received,
                          unsigned int count) {
    if (count > RLK_DATAGRAM_BATCH) count = RLK_DATAGRAM_BATCH;
    struct mmsghdr messages[RLK_DATAGRAM_BATCH];
    struct iovec vectors[RLK_DATAGRAM_BATCH];
    for (unsigned int i = 0; i < count; i++) {
        vectors[i].iov_base = buffer + i * size;
        vectors[i].iov_len = size;
        memset(&messages[i], 0, sizeof messages[i]);
        messages[i].msg_hdr.msg_name = &received[i].address;
        messages[i].msg_hdr.msg_namelen = sizeof received[i].address;
        messages[i].msg_hdr.msg_iov = &vectors[i];
        messages[i].msg_hdr.msg_iovlen = 1;
    }
    // MSG_TRUNC: msg_len is the datagram's real length even when it did not fit.
    int got = recvmmsg(fd, messages, count, MSG_DONTWAIT | MSG_TRUNC, NULL);
    for (int i = 0; i < got; i++) {
        received[i].address_length = messages[i].msg_hdr.msg_namelen;
        received[i].length = messages[i].msg_len;
        received[i].truncated = (messages[i].msg_hdr.msg_flags & MSG_TRUNC) != 0 || messages[i].msg_len > size;
    }
    return got;
}

int rlk_send_datagrams(int fd, const struct rlk_outgoing *outgoing, unsigned int count) {
    if (count == 0) return 0;
    if (count == 1) {
        const struct rlk_outgoing *one = &outgoing[0];
        const struct sockaddr *to = one->address_length ? (const struct sockaddr *)&one->address : NULL;
        ssize_t sent = sendto(fd, one->bytes, one->length, MSG_DONTWAIT | MSG_NOSIGNAL, to, one->address_length);
        return sent < 0 ? -1 : 1;
    }
    if (count > RLK_DATAGRAM_BATCH) count = RLK_DATAGRAM_BATCH;
    struct mmsghdr messages[RLK_DATAGRAM_BATCH];
    struct iovec vectors[RLK_DATAGRAM_BATCH];
    for (unsigned int i = 0; i < count; i++) {
        vectors[i].iov_base = (void *)outgoing[i].bytes;
        vectors[i].iov_len = outgoing[i].length;
        memset(&messages[i], 0, sizeof messages[i]);
        if (outgoing[i].address_length) {
            messages[i].msg_hdr.msg_name = (void *)&outgoing[i].address;
            messages[i].msg_hdr.msg_namelen = outgoing[i].address_length;
        }
        messages[i].msg_hdr.msg_iov = &vectors[i];
        messages[i].msg_hdr.msg_iovlen = 1;
    }
    return sendmmsg(fd, messages, count, MSG_DONTWAIT | MSG_NOSIGNAL);
}

int rlk_join_ipv4_group(int fd, const struct sockaddr_in *group, const struct sockaddr_in *interface, int join) {
    struct ip_mreq request;
    memset(&request, 0, sizeof request);
    request.imr_multiaddr = group->sin_addr;
    request.imr_interface.s_addr = interface ? interface->sin_addr.s_addr : htonl(INADDR_ANY);
    return setsockopt(fd, IPPROTO_IP, join ? IP_ADD_MEMBERSHIP : IP_DROP_MEMBERSHIP, &request, sizeof request);
}

int rlk_join_ipv6_group(int fd, const struct sockaddr_in6 *group, unsigned int interface_index, int join) {
    struct ipv6_mreq request;
    memset(&request, 0, sizeof request);
    request.ipv6mr_multiaddr = group->sin6_addr;
    request.ipv6mr_interface = interface_index;
    return setsockopt(fd, IPPROTO_IPV6, join ? IPV6_ADD_MEMBERSHIP : IPV6_DROP_MEMBERSHIP, &request, sizeof request);
}

int rlk_set_ipv4_multicast_interface(int fd, const struct sockaddr_in *interface) {
    struct in_addr address = interface->sin_addr;
    return setsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &address, sizeof address);
}

int rlk_set_ipv6_multicast_interface(int fd, unsigned int interface_index) {
    return setsockopt(fd, IPPROTO_IPV6, IPV6_MULTICAST_IF, &interface_index, sizeof interface_index);
}

int rlk_set_multicast_hops(int fd, int family, int hops) {
    if (family == AF_INET6) return setsockopt(fd, IPPROTO_IPV6, IPV6_MULTICAST_HOPS, &hops, sizeof hops);
    unsigned char ttl = (unsigned char)hops;
    return setsockopt(fd, IPPROTO_IP, IP_MULTICAST_TTL, &ttl, sizeof ttl);
}

int rlk_set_multicast_loop(int fd, int family, int enabled) {
    if (family == AF_INET6) return setsockopt(fd, IPPROTO_IPV6, IPV6_MULTICAST_LOOP, &enabled, sizeof enabled);
    unsigned char loop = enabled ? 1 : 0;
    return setsockopt(fd, IPPROTO_IP, IP_MULTICAST_LOOP, &loop, sizeof loop);
}

int rlk_interface_index(const struct sockaddr_in6 *address) {
    struct ifaddrs *list;
    if (getifaddrs(&list) != 0) return -1;
    int found = 0;
    for (struct ifaddrs *entry = list; entry; entry = entry->ifa_next) {
        if (!entry->ifa_addr || entry->ifa_addr->sa_family != AF_INET6) continue;
        const struct sockaddr_in6 *candidate = (const struct sockaddr_in6 *)entry->ifa_addr;
        if (memcmp(&candidate->sin6_addr, &address->sin6_addr, sizeof address->sin6_addr) == 0) {
            found = (int)if_nametoindex(entry->ifa_name);
            break;
        }
    }
    freeifaddrs(list);
    if (found == 0) errno = EADDRNOTAVAIL;
    return found == 0 ? -1 : found;
}
