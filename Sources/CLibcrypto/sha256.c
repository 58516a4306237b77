#include "CLibcrypto.h"
#include "LibcryptoABI.h"
#include <pthread.h>

// OpenSSL 3 looks an algorithm up by name on every EVP_sha256() init ("implicit fetch");
// fetching it once saves that on every digest of a small buffer.
static EVP_MD *fetched;
static pthread_once_t fetch_once = PTHREAD_ONCE_INIT;

static void fetch_sha256(void) {
    fetched = EVP_MD_fetch(NULL, "SHA256", NULL);
}

static const EVP_MD *sha256(void) {
    pthread_once(&fetch_once, fetch_sha256);
    return fetched != NULL ? fetched : EVP_sha256();
}

// The EVP context is the digest: a cast keeps OpenSSL's headers out of Swift's view.
clibcrypto_sha256 *clibcrypto_sha256_new(void) {
    EVP_MD_CTX *context = EVP_MD_CTX_new();
    if (context == NULL) return NULL;
    if (EVP_DigestInit_ex(context, sha256(), NULL) != 1) {
        EVP_MD_CTX_free(context);
        return NULL;
    }
    return (clibcrypto_sha256 *)context;
}

clibcrypto_sha256 *clibcrypto_sha256_copy(const clibcrypto_sha256 *digest) {
    EVP_MD_CTX *context = EVP_MD_CTX_new();
    if (context == NULL) return NULL;
    if (EVP_MD_CTX_copy_ex(context, (const EVP_MD_CTX *)digest) != 1) {
        EVP_MD_CTX_free(context);
        return NULL;
    }
    return (clibcrypto_sha256 *)context;
}

int clibcrypto_sha256_update(clibcrypto_sha256 *digest, const void *bytes, size_t count) {
    return EVP_DigestUpdate((EVP_MD_CTX *)digest, bytes, count);
}

int clibcrypto_sha256_final(clibcrypto_sha256 *digest, uint8_t out[32]) {
    unsigned int length = 0;
    if (EVP_DigestFinal_ex((EVP_MD_CTX *)digest, out, &length) != 1 || length != 32) return 0;
    return EVP_DigestInit_ex((EVP_MD_CTX *)digest, sha256(), NULL);
}

void clibcrypto_sha256_free(clibcrypto_sha256 *digest) {
    EVP_MD_CTX_free((EVP_MD_CTX *)digest);
}
