// The few Linux/GNU interfaces that Glibc's Swift module does not expose without
// _GNU_SOURCE: SO_PEERCRED credentials, per-message credentials (SO_PASSCRED, SO_PASSPIDFD,
// recvmsg's SCM_CREDENTIALS and SCM_PIDFD), pidfds, accept4, O_PATH, renameat2,
// POSIX_SPAWN_SETSID, memmem; and ioctl, which is variadic and so not callable from Swift
// (TIOCGWINSZ, FIONREAD).
#ifndef CPOSIX_H
#define CPOSIX_H
#include <sys/types.h>
#include "CrashGuard.h"
#include "Beneath.h"
#include "Memory.h"
#include "DirectIO.h"

/// Fills pid, uid and gid of the peer of a Unix-domain socket; returns 0 or -1 (errno set).
int cposix_peer_credentials(int fd, pid_t *pid, uid_t *uid, gid_t *gid);
/// Asks the kernel to attach the writer's credentials to every read from the Unix-domain socket
/// `fd` (SO_PASSCRED) and, when `pidfds` is non-zero, a pidfd of the writer too (SO_PASSPIDFD,
/// Linux 6.5). Returns 0 when credentials are on; -1 (errno set) when not. A kernel without
/// SO_PASSPIDFD still gets credentials, and reads come without pidfds.
int cposix_pass_credentials(int fd, int pidfds);
/// recvmsg(fd, up to `length` bytes, MSG_DONTWAIT | MSG_CMSG_CLOEXEC) with the writer of those
/// bytes: the kernel never joins bytes of two writers in one read of a stream socket with
/// SO_PASSCRED on. `*pid` and `*uid` are the writer's (SCM_CREDENTIALS; pid 0 when the kernel
/// sent none), `*pidfd` a pidfd of the writer (SCM_PIDFD, close-on-exec) or -1; the caller
/// owns it. Returns the bytes read, 0 at end of stream, -1 with errno.
ssize_t cposix_receive_with_writer(int fd, void *buffer, size_t length, pid_t *pid, uid_t *uid, int *pidfd);
/// Bytes waiting to be read on the socket (ioctl FIONREAD), or -1.
int cposix_pending_input(int fd);
/// pidfd_open(pid, 0), close-on-exec: a handle on that very process, never on a later one
/// with the same number. -1 with errno.
int cposix_pidfd_open(pid_t pid);
/// Whether the process behind the pidfd is still running (not yet exited) after waiting up to
/// `milliseconds` for it to exit (0: not at all): 1, 0, or -1.
int cposix_pidfd_running_after(int pidfd, int milliseconds);
/// accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK).
int cposix_accept_nonblocking(int fd);
/// open(path, O_PATH | O_DIRECTORY | O_CLOEXEC).
int cposix_open_directory_path(const char *path);

// Starts writing back the file's dirty pages in [offset, offset + length) without waiting
// (sync_file_range with SYNC_FILE_RANGE_WRITE): a later fsync then has little left to do.
int cposix_start_writeback(int fd, long long offset, long long length);
/// Allocates the blocks of `length` bytes from `offset` without changing the file's size
/// (fallocate with FALLOC_FL_KEEP_SIZE); -1 and errno (EOPNOTSUPP where the file system cannot).
int cposix_reserve_blocks(int fd, long long offset, long long length);
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
