// Opening a file beneath a directory without following any symlink on the way
// (openat2 with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, Linux 5.6), which Glibc's Swift
// module has no wrapper for.
#ifndef CPOSIX_BENEATH_H
#define CPOSIX_BENEATH_H
#include <sys/types.h>

/// Opens `path`, relative and without a leading '/', beneath the directory open as `root`:
/// no component may be a symlink (ELOOP) and none may lead out of `root` ("..": EXDEV).
/// openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS); where the kernel has no openat2 (ENOSYS),
/// each folder on the way is opened in turn with O_NOFOLLOW | O_DIRECTORY, and the last
/// component with O_NOFOLLOW. `flags` gets O_CLOEXEC | O_NOFOLLOW added. Returns a descriptor,
/// or -1 with errno.
int cposix_open_beneath(int root, const char *path, int flags, mode_t mode);
/// The same by walking alone, as on a kernel without openat2 (exposed so that it is tested
/// on kernels with one).
int cposix_open_beneath_walking(int root, const char *path, int flags, mode_t mode);
#endif
