// O_DIRECT, which Glibc's Swift module does not expose without _GNU_SOURCE: a write through
// such a descriptor goes from the process's buffer to the disk without the page cache.
#ifndef CPOSIX_DIRECT_IO_H
#define CPOSIX_DIRECT_IO_H

/// Opens the file open as `fd` again, write-only, with O_DIRECT and O_CLOEXEC (through
/// /proc/self/fd: that very file, whatever its name now). -1 with errno (EINVAL where the file
/// system has no direct I/O).
int cposix_open_direct(int fd);

#include <stddef.h>
/// Copies `count` bytes into a buffer that a direct write will read, with stores that go past
/// the processor's caches (SSE2 non-temporal). Call cposix_streaming_fence() before the
/// buffer is handed to the thread that writes it.
void cposix_copy_streaming(void *destination, const void *source, size_t count);
/// Orders the streaming stores before every later store (SFENCE).
void cposix_streaming_fence(void);
#endif
