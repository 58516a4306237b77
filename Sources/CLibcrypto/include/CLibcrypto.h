// SHA-256 from the system's libcrypto (OpenSSL 3), through its EVP interface: the one the
// library keeps supported (SHA256_Init and the like are deprecated). libcrypto is loaded when
// one of these is first called (LazyCrypto.c), not when a process starts.
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

/// Verifies a server's chain offline, as a TLS client would (purpose "SSL server", the time
/// now): `certificates` (DER, leaf first, the rest untrusted intermediates) against
/// `anchors` (DER) and, when `use_system_store` is non-zero, the system's store; `host`
/// (a name or an IP address) must match the leaf when not NULL. Returns 1 when the chain
/// verifies, 0 when it does not (`*verify_error` is OpenSSL's X509_V_ERR_* code), -1 when a
/// certificate does not parse or libcrypto fails (`*verify_error` is then -1). Any thread.
int clibcrypto_verify_server_chain(const uint8_t *const *certificates, const size_t *lengths, size_t count,
                                   const uint8_t *const *anchors, const size_t *anchor_lengths, size_t anchor_count,
                                   int use_system_store, const char *host, long *verify_error);
/// OpenSSL's words for an X509_V_ERR_* code ("certificate has expired").
const char *clibcrypto_verify_error_string(long verify_error);
#endif
