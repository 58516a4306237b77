#include "CrashGuard.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static int guard_directory = -1;
static char guard_name[256];
static char guard_prefix[256];
static size_t guard_prefix_length;
static char guard_note[1024];
static volatile size_t guard_note_length;
static struct sigaction previous[NSIG];
static const int guarded[] = { SIGILL, SIGTRAP, SIGABRT, SIGSEGV, SIGBUS, SIGFPE };

static void crash_guard_handler(int signal) {
    size_t length = guard_note_length;
    if (length > 0) {
        // In the folder held open, not following a link planted in the note's place.
        int fd = openat(guard_directory, guard_name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd >= 0) {
            size_t written = 0;
            while (written < guard_prefix_length) {
                ssize_t n = write(fd, guard_prefix + written, guard_prefix_length - written);
                if (n <= 0) break;
                written += (size_t)n;
            }
            size_t done = 0;
            while (done < length) {
                ssize_t n = write(fd, guard_note + done, length - done);
                if (n <= 0) break;
                done += (size_t)n;
            }
            fsync(fd);
            close(fd);
        }
    }
    // Whatever was there before (the runtime's backtracer, or the default) takes over: a
    // fault recurs when the handler returns, a raised signal is raised again.
    sigaction(signal, &previous[signal], NULL);
    raise(signal);
}

int cposix_crash_guard_install(int directory, const char *name, const char *prefix) {
    size_t length = strlen(name);
    size_t prefix_length = strlen(prefix);
    if (length >= sizeof guard_name || prefix_length >= sizeof guard_prefix) { errno = ENAMETOOLONG; return -1; }
    guard_note_length = 0; // no note is written while the folder and name change
    if (guard_directory >= 0) close(guard_directory); // a daemon started again in this process
    guard_directory = directory;
    memcpy(guard_name, name, length + 1);
    memcpy(guard_prefix, prefix, prefix_length + 1);
    guard_prefix_length = prefix_length;
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = crash_guard_handler;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_NODEFER | SA_RESETHAND;
    for (size_t i = 0; i < sizeof guarded / sizeof guarded[0]; i++) {
        if (sigaction(guarded[i], &action, &previous[guarded[i]]) != 0) return -1;
    }
    return 0;
}

void cposix_crash_guard_note(const char *text, size_t length) {
    if (length >= sizeof guard_note) length = sizeof guard_note - 1;
    guard_note_length = 0;
    if (length > 0) memcpy(guard_note, text, length);
    guard_note_length = length;
}
