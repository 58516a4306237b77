// SHA-256 (FIPS 180-4) in C: the one digest the project uses (downloads, uploads, tests).
// C because Swift's unoptimised debug builds hash at a few MB/s, C's at hundreds.
#ifndef CSHA256_H
#define CSHA256_H
#include <stddef.h>
#include <stdint.h>

/// The running state of one digest; a plain value (copying it forks the digest).
typedef struct {
    uint32_t state[8];
    uint64_t length;
    uint8_t pending[64];
    size_t pending_count;
} csha256_context;

/// Starts a digest.
void csha256_init(csha256_context *context);
/// Adds `count` bytes.
void csha256_update(csha256_context *context, const void *bytes, size_t count);
/// Ends the digest and writes its 32 bytes; the context must be initialised again before reuse.
void csha256_final(csha256_context *context, uint8_t digest[32]);
#endif
