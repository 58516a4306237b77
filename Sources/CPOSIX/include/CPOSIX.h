// The few Linux/GNU interfaces that Glibc's Swift module does not expose without
// _GNU_SOURCE: SO_PEERCRED credentials, accept4, O_PATH, renameat2, POSIX_SPAWN_SETSID, memmem; and ioctl,
// which is variadic and so not callable from Swift (TIOCGWINSZ).
#ifndef CPOSIX_H
#define CPOSIX_H
#include <sys/types.h>
#include "CrashGuard.h"

/// Fills pid, uid and gid of the peer of a Unix-domain socket; returns 0 or -1 (errno set).
int cposix_peer_credentials(int fd, pid_t *pid, uid_t *uid, gid_t *gid);
/// accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK).
int cposix_accept_nonblocking(int fd);
/// open(path, O_PATH | O_DIRECTORY | O_CLOEXEC).
int cposix_open_directory_path(const char *path);

// Starts writing back the file's dirty pages in [offset, offset + length) without waiting
// (sync_file_range with SYNC_FILE_RANGE_WRITE): a later fsync then has little left to do.
int cposix_start_writeback(int fd, long long offset, long long length);
/// Opens a new file with no name in `directory` (O_TMPFILE), for writing; -1 and errno when the
/// file system cannot.
int cposix_open_unnamed(const char *directory);
/// Gives the unnamed file open as `fd` the name `path`; fails with EEXIST rather than replace
/// a file.
int cposix_link_unnamed(int fd, const char *path);
/// The POSIX_SPAWN_SETSID flag.
short cposix_spawn_setsid_flag(void);
/// memmem(haystack, haystack_length, needle, needle_length).
const void *cposix_memmem(const void *haystack, size_t haystack_length, const void *needle, size_t needle_length);
/// The size of the terminal behind fd (ioctl TIOCGWINSZ); returns 0, or -1 (errno set) if it is none.
int cposix_terminal_size(int fd, int *rows, int *columns);
#endif
