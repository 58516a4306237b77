// O_DIRECT, which Glibc's Swift module does not expose without _GNU_SOURCE: a write through
// such a descriptor goes from the process's buffer to the disk without the page cache.
#ifndef CPOSIX_DIRECT_IO_H
#define CPOSIX_DIRECT_IO_H

/// Opens the file open as `fd` again, write-only, with O_DIRECT and O_CLOEXEC (through
/// /proc/self/fd: that very file, whatever its name now). -1 with errno (EINVAL where the file
/// system has no direct I/O).
int cposix_open_direct(int fd);
#endif
