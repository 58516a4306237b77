// The daemon's crash guard: what the daemon is working on (a task), written to a file from a
// signal handler when the process dies of a fault (a Swift trap is SIGILL or SIGTRAP), so that
// the next daemon knows which task it crashed on. Async-signal-safe: the handler only calls
// openat, write, fsync, close and sigaction.
#ifndef CPOSIX_CRASH_GUARD_H
#define CPOSIX_CRASH_GUARD_H
#include <stddef.h>

/// Installs the handler for SIGILL, SIGTRAP, SIGABRT, SIGSEGV, SIGBUS and SIGFPE; on such a
/// signal, a non-empty note is written to the file `name` (copied; one component, not followed
/// if it is a symlink) in the folder open as `directory` (kept open and owned from then on),
/// after `prefix` (copied; at most 255 bytes: which process wrote it), then the signal's
/// previous action runs. Returns 0, or -1 (errno set).
int cposix_crash_guard_install(int directory, const char *name, const char *prefix);
/// Sets the note (truncated to 1023 bytes); length 0 clears it. Not thread-safe: the loop
/// thread alone sets it.
void cposix_crash_guard_note(const char *text, size_t length);
#endif
