#define _GNU_SOURCE
#include "CPOSIX.h"
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

int cposix_peer_credentials(int fd, pid_t *pid, uid_t *uid, gid_t *gid) {
    struct ucred credentials;
    socklen_t length = sizeof(credentials);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) return -1;
    *pid = credentials.pid;
    *uid = credentials.uid;
    *gid = credentials.gid;
    return 0;
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

int cposix_open_unnamed(const char *directory) {
    return open(directory, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
}

int cposix_link_unnamed(int fd, const char *path) {
    // linkat(fd, "", AT_EMPTY_PATH) needs CAP_DAC_READ_SEARCH; the /proc link does not.
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    return linkat(AT_FDCWD, link, AT_FDCWD, path, AT_SYMLINK_FOLLOW);
}
