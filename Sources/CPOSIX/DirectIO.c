#define _GNU_SOURCE
#include "DirectIO.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>

int cposix_open_direct(int fd) {
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    int opened;
    do {
        opened = open(path, O_WRONLY | O_DIRECT | O_CLOEXEC);
    } while (opened < 0 && errno == EINTR);
    return opened;
}
