#define _GNU_SOURCE
#include "CPOSIX.h"
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <errno.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

// Newer than the C library's headers may be (Linux 6.5).
#ifndef SO_PASSPIDFD
#define SO_PASSPIDFD 76
#endif
#ifndef SCM_PIDFD
#define SCM_PIDFD 0x04
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

int cposix_peer_credentials(int fd, pid_t *pid, uid_t *uid, gid_t *gid) {
    struct ucred credentials;
    socklen_t length = sizeof(credentials);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) return -1;
    *pid = credentials.pid;
    *uid = credentials.uid;
    *gid = credentials.gid;
    return 0;
}

int cposix_pass_credentials(int fd, int pidfds) {
    int on = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &on, sizeof(on)) != 0) return -1;
    int wanted = pidfds ? 1 : 0;
    (void)setsockopt(fd, SOL_SOCKET, SO_PASSPIDFD, &wanted, sizeof(wanted)); // absent before Linux 6.5
    return 0;
}

ssize_t cposix_receive_with_writer(int fd, void *buffer, size_t length, pid_t *pid, uid_t *uid, int *pidfd) {
    union {
        struct cmsghdr align;
        char bytes[CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(sizeof(int))];
    } control;
    struct iovec vector = { .iov_base = buffer, .iov_len = length };
    struct msghdr message = { 0 };
    message.msg_iov = &vector;
    message.msg_iovlen = 1;
    message.msg_control = control.bytes;
    message.msg_controllen = sizeof(control.bytes);
    *pid = 0;
    *uid = (uid_t)-1;
    *pidfd = -1;
    ssize_t n = recvmsg(fd, &message, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n <= 0) return n;
    for (struct cmsghdr *header = CMSG_FIRSTHDR(&message); header != NULL; header = CMSG_NXTHDR(&message, header)) {
        if (header->cmsg_level != SOL_SOCKET) continue;
        if (header->cmsg_type == SCM_CREDENTIALS && header->cmsg_len >= CMSG_LEN(sizeof(struct ucred))) {
            struct ucred credentials;
            memcpy(&credentials, CMSG_DATA(header), sizeof(credentials));
            *pid = credentials.pid;
            *uid = credentials.uid;
        } else if (header->cmsg_type == SCM_PIDFD && header->cmsg_len >= CMSG_LEN(sizeof(int))) {
            memcpy(pidfd, CMSG_DATA(header), sizeof(int));
        } else if (header->cmsg_type == SCM_RIGHTS) {
            // Descriptors nobody asked for: close them rather than leak them.
            size_t count = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t i = 0; i < count; i++) {
                int passed;
                memcpy(&passed, CMSG_DATA(header) + i * sizeof(int), sizeof(int));
                close(passed);
            }
        }
    }
    // MSG_CTRUNC (descriptors passed that did not fit, or no descriptor left for the pidfd)
    // leaves the credentials, which come first, as the kernel set them.
    return n;
}

int cposix_pending_input(int fd) {
    int count = 0;
    if (ioctl(fd, FIONREAD, &count) != 0) return -1;
    return count;
}

int cposix_pidfd_open(pid_t pid) {
    return (int)syscall(SYS_pidfd_open, pid, 0);
}

int cposix_pidfd_running_after(int pidfd, int milliseconds) {
    struct pollfd entry = { .fd = pidfd, .events = POLLIN };
    int ready;
    // An interrupted wait starts again with the whole time: the caller's deadline is coarser.
    do { ready = poll(&entry, 1, milliseconds); } while (ready < 0 && errno == EINTR);
    if (ready < 0) return -1;
    return ready == 0 ? 1 : 0; // a pidfd becomes readable when its process exits
}

int cposix_accept_nonblocking(int fd) {
    return accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
}

int cposix_open_directory_path(const char *path) {
    return open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
}

short cposix_spawn_setsid_flag(void) {
    return POSIX_SPAWN_SETSID;
}

const void *cposix_memmem(const void *haystack, size_t haystack_length, const void *needle, size_t needle_length) {
    return memmem(haystack, haystack_length, needle, needle_length);
}

int cposix_terminal_size(int fd, int *rows, int *columns) {
    struct winsize size;
    if (ioctl(fd, TIOCGWINSZ, &size) != 0) return -1;
    *rows = size.ws_row;
    *columns = size.ws_col;
    return 0;
}

int cposix_start_writeback(int fd, long long offset, long long length) {
    return sync_file_range(fd, (off64_t)offset, (off64_t)length, SYNC_FILE_RANGE_WRITE);
}

int cposix_reserve_blocks(int fd, long long offset, long long length) {
    // Not posix_fallocate: where the file system has no fallocate, glibc would write zeros.
    return fallocate(fd, FALLOC_FL_KEEP_SIZE, (off_t)offset, (off_t)length);
}

int cposix_open_unnamed(const char *directory) {
    return open(directory, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
}

int cposix_link_unnamed(int fd, const char *path) {
    // linkat(fd, "", AT_EMPTY_PATH) needs CAP_DAC_READ_SEARCH; the /proc link does not.
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    return linkat(AT_FDCWD, link, AT_FDCWD, path, AT_SYMLINK_FOLLOW);
}
