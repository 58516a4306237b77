#define _GNU_SOURCE
#include "Beneath.h"
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

// Newer than the C library's headers may be (Linux 5.6).
#ifndef SYS_openat2
#define SYS_openat2 437
#endif
#ifndef RESOLVE_NO_SYMLINKS
#define RESOLVE_NO_SYMLINKS 0x04
#endif
#ifndef RESOLVE_BENEATH
#define RESOLVE_BENEATH 0x08
#endif

struct cposix_open_how {
    uint64_t flags;
    uint64_t mode;
    uint64_t resolve;
};

/// A folder asked for that is a symlink fails with ENOTDIR (O_DIRECTORY | O_NOFOLLOW): said
/// as ELOOP, like every other symlink refused.
static int as_symlink_refusal(int folder, const char *name) {
    int saved = errno;
    struct stat st;
    if (saved == ENOTDIR && fstatat(folder, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) saved = ELOOP;
    errno = saved;
    return -1;
}

/// The walk of a kernel without openat2: one component at a time, never through a link.
int cposix_open_beneath_walking(int root, const char *path, int flags, mode_t mode) {
    if (path[0] == '/') { errno = EXDEV; return -1; }
    char copy[4096];
    size_t length = strlen(path);
    if (length >= sizeof copy) { errno = ENAMETOOLONG; return -1; }
    memcpy(copy, path, length + 1);
    int folder = root;
    char *rest = copy;
    for (;;) {
        char *slash = strchr(rest, '/');
        if (slash) *slash = '\0';
        int last = slash == NULL;
        int fd;
        if (strcmp(rest, "..") == 0) {
            errno = EXDEV; // a way out of root
            fd = -1;
        } else if (rest[0] == '\0' || strcmp(rest, ".") == 0) {
            fd = last ? openat(folder, ".", flags | O_CLOEXEC, mode) : fcntl(folder, F_DUPFD_CLOEXEC, 0);
        } else {
            fd = last ? openat(folder, rest, flags | O_CLOEXEC | O_NOFOLLOW, mode)
                      : openat(folder, rest, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (fd < 0) as_symlink_refusal(folder, rest);
        }
        int saved = errno;
        if (folder != root) close(folder);
        errno = saved;
        if (fd < 0 || last) return fd;
        folder = fd;
        rest = slash + 1;
    }
}

int cposix_open_beneath(int root, const char *path, int flags, mode_t mode) {
    if (path[0] == '/') { errno = EXDEV; return -1; }
    struct cposix_open_how how = {
        .flags = (uint64_t)(flags | O_CLOEXEC | O_NOFOLLOW),
        // openat2 refuses a mode without a file to make (O_TMPFILE shares a bit with O_DIRECTORY).
        .mode = ((flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE) ? (uint64_t)mode : 0,
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS,
    };
    for (int attempt = 0; attempt < 8; attempt++) {
        long fd = syscall(SYS_openat2, root, path, &how, sizeof how);
        if (fd >= 0) return (int)fd;
        if (errno == EINTR) continue;
        if (errno == EAGAIN) continue; // a rename raced the check for a way out: look again
        if (errno == ENOSYS) return cposix_open_beneath_walking(root, path, flags, mode);
        return as_symlink_refusal(root, path);
    }
    return -1;
}
