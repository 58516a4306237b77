// SHA-256 from the system's libcrypto (OpenSSL 3), through its EVP interface: the one the
// library keeps supported (SHA256_Init and the like are deprecated). libcurl already loads
// libcrypto into every process that transfers.
#ifndef CLIBCRYPTO_H
#define CLIBCRYPTO_H
#include <stddef.h>
#include <stdint.h>

/// A running SHA-256 digest; opaque, owned by whoever made it.
typedef struct clibcrypto_sha256 clibcrypto_sha256;

/// A new digest, started; NULL when libcrypto cannot allocate one.
clibcrypto_sha256 *clibcrypto_sha256_new(void);
/// A new digest that goes on from where `digest` is; NULL when libcrypto cannot allocate one.
clibcrypto_sha256 *clibcrypto_sha256_copy(const clibcrypto_sha256 *digest);
/// Adds `count` bytes; 0 when libcrypto refuses.
int clibcrypto_sha256_update(clibcrypto_sha256 *digest, const void *bytes, size_t count);
/// Writes the 32 bytes of the digest and starts it over; 0 when libcrypto refuses.
int clibcrypto_sha256_final(clibcrypto_sha256 *digest, uint8_t out[32]);
/// Frees the digest.
void clibcrypto_sha256_free(clibcrypto_sha256 *digest);
#endif
