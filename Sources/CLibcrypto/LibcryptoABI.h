// The part of libcrypto's (OpenSSL 3) ABI this package uses, written here so that building
// needs no OpenSSL headers: libcrypto.so.3 is loaded at run time (LazyCrypto.c). The types
// are opaque to us; the one constant is a fact of OpenSSL's ABI. The functions are defined in
// LazyCrypto.c, each calling libcrypto's own.
#ifndef LIBCRYPTO_ABI_H
#define LIBCRYPTO_ABI_H
#include <stddef.h>

typedef struct x509_st X509;
typedef struct x509_store_st X509_STORE;
typedef struct x509_store_ctx_st X509_STORE_CTX;
typedef struct X509_VERIFY_PARAM_st X509_VERIFY_PARAM;
typedef struct stack_st OPENSSL_STACK;
typedef struct evp_md_st EVP_MD;
typedef struct evp_md_ctx_st EVP_MD_CTX;
typedef struct engine_st ENGINE;
typedef struct ossl_lib_ctx_st OSSL_LIB_CTX;

/// X509_PURPOSE_SSL_SERVER: the chain must be good for a TLS server.
#define LIBCRYPTO_PURPOSE_SSL_SERVER 2

X509 *d2i_X509(X509 **certificate, const unsigned char **cursor, long length);
void X509_free(X509 *certificate);
X509_STORE *X509_STORE_new(void);
void X509_STORE_free(X509_STORE *store);
int X509_STORE_set_default_paths(X509_STORE *store);
int X509_STORE_add_cert(X509_STORE *store, X509 *certificate);
X509_STORE_CTX *X509_STORE_CTX_new(void);
void X509_STORE_CTX_free(X509_STORE_CTX *context);
/// `untrusted` is a STACK_OF(X509), which OpenSSL's macros cast to and from OPENSSL_STACK.
int X509_STORE_CTX_init(X509_STORE_CTX *context, X509_STORE *store, X509 *target, OPENSSL_STACK *untrusted);
X509_VERIFY_PARAM *X509_STORE_CTX_get0_param(const X509_STORE_CTX *context);
int X509_STORE_CTX_get_error(const X509_STORE_CTX *context);
int X509_VERIFY_PARAM_set_purpose(X509_VERIFY_PARAM *parameters, int purpose);
int X509_VERIFY_PARAM_set1_ip_asc(X509_VERIFY_PARAM *parameters, const char *address);
int X509_VERIFY_PARAM_set1_host(X509_VERIFY_PARAM *parameters, const char *name, size_t length);
int X509_verify_cert(X509_STORE_CTX *context);
const char *X509_verify_cert_error_string(long code);
OPENSSL_STACK *OPENSSL_sk_new_null(void);
int OPENSSL_sk_push(OPENSSL_STACK *stack, const void *element);
void OPENSSL_sk_pop_free(OPENSSL_STACK *stack, void (*free)(void *));

EVP_MD *EVP_MD_fetch(OSSL_LIB_CTX *context, const char *algorithm, const char *properties);
const EVP_MD *EVP_sha256(void);
EVP_MD_CTX *EVP_MD_CTX_new(void);
void EVP_MD_CTX_free(EVP_MD_CTX *context);
int EVP_MD_CTX_copy_ex(EVP_MD_CTX *to, const EVP_MD_CTX *from);
int EVP_DigestInit_ex(EVP_MD_CTX *context, const EVP_MD *digest, ENGINE *engine);
int EVP_DigestUpdate(EVP_MD_CTX *context, const void *bytes, size_t count);
int EVP_DigestFinal_ex(EVP_MD_CTX *context, unsigned char *digest, unsigned int *length);
#endif
