#include "CLibcrypto.h"
#include <arpa/inet.h>
#include "LibcryptoABI.h"
#include <limits.h>

static X509 *parse(const uint8_t *bytes, size_t length) {
    const unsigned char *cursor = bytes;
    if (bytes == NULL || length == 0 || length > (size_t)LONG_MAX) return NULL;
    X509 *certificate = d2i_X509(NULL, &cursor, (long)length);
    // The whole buffer must be one certificate: trailing bytes mean it was not what it claimed.
    if (certificate != NULL && cursor != bytes + length) {
        X509_free(certificate);
        return NULL;
    }
    return certificate;
}

static int is_ip_address(const char *host) {
    unsigned char address[16];
    return inet_pton(AF_INET, host, address) == 1 || inet_pton(AF_INET6, host, address) == 1;
}

int clibcrypto_verify_server_chain(const uint8_t *const *certificates, const size_t *lengths, size_t count,
                                   const uint8_t *const *anchors, const size_t *anchor_lengths, size_t anchor_count,
                                   int use_system_store, const char *host, long *verify_error) {
    *verify_error = -1;
    if (count == 0) return -1;
    int result = -1;
    X509_STORE *store = X509_STORE_new();
    OPENSSL_STACK *untrusted = OPENSSL_sk_new_null();
    X509_STORE_CTX *context = X509_STORE_CTX_new();
    X509 *leaf = parse(certificates[0], lengths[0]);
    if (store == NULL || untrusted == NULL || context == NULL || leaf == NULL) goto done;
    if (use_system_store && X509_STORE_set_default_paths(store) != 1) goto done;
    for (size_t i = 0; i < anchor_count; i++) {
        X509 *anchor = parse(anchors[i], anchor_lengths[i]);
        if (anchor == NULL) goto done;
        int added = X509_STORE_add_cert(store, anchor);
        X509_free(anchor); // the store holds its own reference
        if (added != 1) goto done;
    }
    for (size_t i = 1; i < count; i++) {
        X509 *intermediate = parse(certificates[i], lengths[i]);
        if (intermediate == NULL) goto done;
        if (OPENSSL_sk_push(untrusted, intermediate) == 0) {
            X509_free(intermediate);
            goto done;
        }
    }
    if (X509_STORE_CTX_init(context, store, leaf, untrusted) != 1) goto done;
    X509_VERIFY_PARAM *parameters = X509_STORE_CTX_get0_param(context);
    X509_VERIFY_PARAM_set_purpose(parameters, LIBCRYPTO_PURPOSE_SSL_SERVER);
    if (host != NULL) {
        int set = is_ip_address(host) ? X509_VERIFY_PARAM_set1_ip_asc(parameters, host) : X509_VERIFY_PARAM_set1_host(parameters, host, 0);
        if (set != 1) goto done;
    }
    int verified = X509_verify_cert(context);
    if (verified < 0) goto done;
    *verify_error = X509_STORE_CTX_get_error(context);
    result = verified == 1 ? 1 : 0;
done:
    if (context != NULL) X509_STORE_CTX_free(context);
    if (untrusted != NULL) OPENSSL_sk_pop_free(untrusted, (void (*)(void *))X509_free);
    if (leaf != NULL) X509_free(leaf);
    if (store != NULL) X509_STORE_free(store);
    return result;
}

const char *clibcrypto_verify_error_string(long verify_error) {
    return X509_verify_cert_error_string(verify_error);
}
