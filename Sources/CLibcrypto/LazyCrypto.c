// libcrypto, loaded when this package first digests or verifies something, not at every start.
//
// Loading libcrypto (4.5 MB, with its relocations and initialisers) took about 0.6 ms of
// each process's start. An app extension that hands a task to the daemon never digests; the
// daemon and a default session load libcrypto anyway, with libcurl's TLS, when they first
// transfer over HTTPS. So the libcrypto functions `chain.c` and `sha256.c` call are defined
// here, each calling libcrypto's own (LazyLoad.h), and nothing in the executable names
// libcrypto.
//
// The forwarders are hidden: libssl, and libcurl, call libcrypto too, and a function of the
// same name exported from the executable would stand between them and libcrypto.
#pragma GCC visibility push(hidden)
#include "LibcryptoABI.h"
#include "LazyLoad.h"

static lazyload_library libcrypto = {"libcrypto.so.3", 0};

// chain.c
LAZYLOAD_FORWARD(libcrypto, X509 *, d2i_X509, (X509 **certificate, const unsigned char **cursor, long length), (certificate, cursor, length))
LAZYLOAD_FORWARD_VOID(libcrypto, X509_free, (X509 *certificate), (certificate))
LAZYLOAD_FORWARD(libcrypto, X509_STORE *, X509_STORE_new, (void), ())
LAZYLOAD_FORWARD_VOID(libcrypto, X509_STORE_free, (X509_STORE *store), (store))
LAZYLOAD_FORWARD(libcrypto, int, X509_STORE_set_default_paths, (X509_STORE *store), (store))
LAZYLOAD_FORWARD(libcrypto, int, X509_STORE_add_cert, (X509_STORE *store, X509 *certificate), (store, certificate))
LAZYLOAD_FORWARD(libcrypto, X509_STORE_CTX *, X509_STORE_CTX_new, (void), ())
LAZYLOAD_FORWARD_VOID(libcrypto, X509_STORE_CTX_free, (X509_STORE_CTX *context), (context))
LAZYLOAD_FORWARD(libcrypto, int, X509_STORE_CTX_init,
                 (X509_STORE_CTX *context, X509_STORE *store, X509 *target, OPENSSL_STACK *untrusted),
                 (context, store, target, untrusted))
LAZYLOAD_FORWARD(libcrypto, X509_VERIFY_PARAM *, X509_STORE_CTX_get0_param, (const X509_STORE_CTX *context), (context))
LAZYLOAD_FORWARD(libcrypto, int, X509_STORE_CTX_get_error, (const X509_STORE_CTX *context), (context))
LAZYLOAD_FORWARD(libcrypto, int, X509_VERIFY_PARAM_set_purpose, (X509_VERIFY_PARAM *parameters, int purpose), (parameters, purpose))
LAZYLOAD_FORWARD(libcrypto, int, X509_VERIFY_PARAM_set1_ip_asc, (X509_VERIFY_PARAM *parameters, const char *address), (parameters, address))
LAZYLOAD_FORWARD(libcrypto, int, X509_VERIFY_PARAM_set1_host, (X509_VERIFY_PARAM *parameters, const char *name, size_t length), (parameters, name, length))
LAZYLOAD_FORWARD(libcrypto, int, X509_verify_cert, (X509_STORE_CTX *context), (context))
LAZYLOAD_FORWARD(libcrypto, const char *, X509_verify_cert_error_string, (long code), (code))
LAZYLOAD_FORWARD(libcrypto, OPENSSL_STACK *, OPENSSL_sk_new_null, (void), ())
LAZYLOAD_FORWARD(libcrypto, int, OPENSSL_sk_push, (OPENSSL_STACK *stack, const void *element), (stack, element))
LAZYLOAD_FORWARD_VOID(libcrypto, OPENSSL_sk_pop_free, (OPENSSL_STACK *stack, void (*free)(void *)), (stack, free))

// sha256.c
LAZYLOAD_FORWARD(libcrypto, EVP_MD *, EVP_MD_fetch, (OSSL_LIB_CTX *context, const char *algorithm, const char *properties), (context, algorithm, properties))
LAZYLOAD_FORWARD(libcrypto, const EVP_MD *, EVP_sha256, (void), ())
LAZYLOAD_FORWARD(libcrypto, EVP_MD_CTX *, EVP_MD_CTX_new, (void), ())
LAZYLOAD_FORWARD_VOID(libcrypto, EVP_MD_CTX_free, (EVP_MD_CTX *context), (context))
LAZYLOAD_FORWARD(libcrypto, int, EVP_MD_CTX_copy_ex, (EVP_MD_CTX *to, const EVP_MD_CTX *from), (to, from))
LAZYLOAD_FORWARD(libcrypto, int, EVP_DigestInit_ex, (EVP_MD_CTX *context, const EVP_MD *digest, ENGINE *engine), (context, digest, engine))
LAZYLOAD_FORWARD(libcrypto, int, EVP_DigestUpdate, (EVP_MD_CTX *context, const void *bytes, size_t count), (context, bytes, count))
LAZYLOAD_FORWARD(libcrypto, int, EVP_DigestFinal_ex, (EVP_MD_CTX *context, unsigned char *digest, unsigned int *length), (context, digest, length))

#pragma GCC visibility pop
