#define _GNU_SOURCE
#include "DirectIO.h"
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#if defined(__x86_64__)
#include <emmintrin.h>
#endif

int cposix_open_direct(int fd) {
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    int opened;
    do {
        opened = open(path, O_WRONLY | O_DIRECT | O_CLOEXEC);
    } while (opened < 0 && errno == EINTR);
    return opened;
}

// An ordinary copy first reads each of the buffer's lines into the cache, from wherever the
// last direct write of that buffer left them, only to overwrite them: in the daemon it took
// 1.3 to 8 times as long as this one, varying from run to run (Benchmarks/README.md).
#if defined(__x86_64__)
void cposix_copy_streaming(void *destination, const void *source, size_t count) {
    unsigned char *to = destination;
    const unsigned char *from = source;
    size_t head = (16 - ((uintptr_t)to & 15)) & 15;
    if (head > count) head = count;
    memcpy(to, from, head);
    to += head, from += head, count -= head;
    for (; count >= 64; count -= 64, to += 64, from += 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)from), b = _mm_loadu_si128((const __m128i *)(from + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(from + 32)), d = _mm_loadu_si128((const __m128i *)(from + 48));
        _mm_stream_si128((__m128i *)to, a);
        _mm_stream_si128((__m128i *)(to + 16), b);
        _mm_stream_si128((__m128i *)(to + 32), c);
        _mm_stream_si128((__m128i *)(to + 48), d);
    }
    memcpy(to, from, count);
}

void cposix_streaming_fence(void) { _mm_sfence(); }
#else
void cposix_copy_streaming(void *destination, const void *source, size_t count) { memcpy(destination, source, count); }
void cposix_streaming_fence(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
#endif
