/// CCurl: typed, non-variadic entry points into libcurl for Swift.
///
/// Swift cannot call C variadic functions, and libcurl's configuration calls
/// (curl_easy_setopt, curl_easy_getinfo, curl_multi_setopt) are all variadic.
/// Each wrapper below fixes one argument type, so the Swift layer
/// (TransferEngine/Transport) can call them. Macros that Swift cannot import
/// (casts or expressions of other macros) are re-exported as constants.
///
/// Nothing here keeps state; every function may be called from any thread that
/// libcurl itself allows for the handle in question.
#ifndef CCURL_H
#define CCURL_H

#include <stddef.h>
#include "CurlABI.h"

#ifdef __cplusplus
extern "C" {
#endif

// MARK: - Constants Swift cannot import from macros

/// Return from a write callback to pause receiving (the same bytes come back after unpause).
static const size_t CCURL_WRITEFUNC_PAUSE = CURL_WRITEFUNC_PAUSE;
/// Return from a read callback to pause sending.
static const size_t CCURL_READFUNC_PAUSE = CURL_READFUNC_PAUSE;
/// Return from a read callback to abort the transfer (CURLE_ABORTED_BY_CALLBACK).
static const size_t CCURL_READFUNC_ABORT = CURL_READFUNC_ABORT;
/// Bits for curl_easy_pause.
static const int CCURL_PAUSE_RECV = CURLPAUSE_RECV;
static const int CCURL_PAUSE_SEND = CURLPAUSE_SEND;
static const int CCURL_PAUSE_ALL = CURLPAUSE_ALL;
static const int CCURL_PAUSE_CONT = CURLPAUSE_CONT;
/// Flags for curl_global_init.
static const long CCURL_GLOBAL_ALL = CURL_GLOBAL_ALL;
/// Bits of struct curl_waitfd .events / .revents.
static const short CCURL_WAIT_POLLIN = CURL_WAIT_POLLIN;
static const short CCURL_WAIT_POLLPRI = CURL_WAIT_POLLPRI;
static const short CCURL_WAIT_POLLOUT = CURL_WAIT_POLLOUT;
/// Return values of a seek callback.
static const int CCURL_SEEKFUNC_OK = CURL_SEEKFUNC_OK;
static const int CCURL_SEEKFUNC_FAIL = CURL_SEEKFUNC_FAIL;
static const int CCURL_SEEKFUNC_CANTSEEK = CURL_SEEKFUNC_CANTSEEK;
/// CURLOPT_HTTP_VERSION: HTTP/2 over TLS when ALPN offers it, else HTTP/1.1.
static const long CCURL_HTTP_VERSION_2TLS = CURL_HTTP_VERSION_2TLS;
/// CURLMOPT_PIPELINING: multiplex HTTP/2 streams over one connection.
static const long CCURL_PIPE_MULTIPLEX = CURLPIPE_MULTIPLEX;
/// Size CURLOPT_ERRORBUFFER must have.
static const size_t CCURL_ERROR_SIZE = CURL_ERROR_SIZE;

// MARK: - curl_easy_setopt, one function per argument type

CURLcode ccurl_easy_setopt_long(CURL *easy, CURLoption option, long value);
/// libcurl copies the string (except CURLOPT_POSTFIELDS, which this project never uses). NULL resets.
CURLcode ccurl_easy_setopt_string(CURL *easy, CURLoption option, const char *value);
CURLcode ccurl_easy_setopt_pointer(CURL *easy, CURLoption option, void *value);
CURLcode ccurl_easy_setopt_off_t(CURL *easy, CURLoption option, curl_off_t value);
/// CURLOPT_HTTPHEADER and other list options; the list must outlive its use by the handle.
CURLcode ccurl_easy_setopt_slist(CURL *easy, CURLoption option, struct curl_slist *list);
/// CURLOPT_CAINFO_BLOB and other blob options. `copy` nonzero: libcurl copies the bytes now;
/// zero: the bytes must outlive every use by the handle. NULL data resets the option.
CURLcode ccurl_easy_setopt_blob(CURL *easy, CURLoption option, const void *data, size_t length, int copy);

// Callbacks; their user pointer is set with ccurl_easy_setopt_pointer (WRITEDATA, READDATA, ...).
CURLcode ccurl_easy_setopt_write_callback(CURL *easy, curl_write_callback callback);
CURLcode ccurl_easy_setopt_header_callback(CURL *easy, curl_write_callback callback);
CURLcode ccurl_easy_setopt_read_callback(CURL *easy, curl_read_callback callback);
CURLcode ccurl_easy_setopt_seek_callback(CURL *easy, curl_seek_callback callback);
CURLcode ccurl_easy_setopt_xferinfo_callback(CURL *easy, curl_xferinfo_callback callback);

// MARK: - curl_easy_getinfo, one function per result type

CURLcode ccurl_easy_getinfo_long(CURL *easy, CURLINFO info, long *value);
CURLcode ccurl_easy_getinfo_off_t(CURL *easy, CURLINFO info, curl_off_t *value);
/// The string belongs to the handle and is valid until the next call on it; may be NULL.
CURLcode ccurl_easy_getinfo_string(CURL *easy, CURLINFO info, const char **value);
/// CURLINFO_CERTINFO: the number of certificates of the last connection (with CURLOPT_CERTINFO
/// on), and the `index`-th one's fields ("Subject:…", "Cert:-----BEGIN…") as a list that
/// belongs to the handle (valid until the next transfer). NULL when out of range.
int ccurl_easy_certificate_count(CURL *easy);
const struct curl_slist *ccurl_easy_certificate_fields(CURL *easy, int index);

// MARK: - Multi interface

CURLMcode ccurl_multi_setopt_long(CURLM *multi, CURLMoption option, long value);

/// Reads the next CURLMSG_DONE message from curl_multi_info_read, skipping any
/// other kind. Returns 1 and fills *easy and *result when one was found, 0 when
/// the queue is empty. (CURLMsg holds a union, which is awkward in Swift.)
int ccurl_multi_next_done(CURLM *multi, CURL **easy, CURLcode *result);

#ifdef __cplusplus
}
#endif

#endif /* CCURL_H */
