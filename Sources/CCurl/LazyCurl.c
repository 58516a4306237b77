// libcurl, loaded when first called rather than when a process starts.
//
// Every executable links FoundationNetworking, which calls libcurl, and libcurl brings 28
// more shared libraries (GnuTLS, Kerberos, LDAP, libssh2, ...) whose loading, relocation and
// initialisers took about 3 ms of every start on the machine it was measured on, 5.5 ms
// against 0.7 ms for a C program that does nothing. An app extension
// that only hands a task to the daemon never transfers anything itself. So the libcurl
// functions this package and FoundationNetworking call are defined here: each loads
// libcurl.so.4 once (LazyLoad.h: dlopen, on first use, from any thread) and calls libcurl's
// own. Release executables are linked with --as-needed, so that libcurl is not among the
// libraries the loader maps at start (`readelf -d` on them names no libcurl). A debug build
// loads it with the toolchain's shared FoundationNetworking; these then call that copy, the
// same one.
//
// The three variadic setters and getter take exactly one more argument, whose type the
// option's number says (libcurl's own rule: CURLOPTTYPE_* ranges, CURLINFO_* type bits),
// and pass it on as that type. A process where libcurl cannot be loaded stops at the first
// call with dlerror()'s reason, as it stopped at start before.

#include "CurlABI.h"
#include <stdarg.h>
#include "LazyLoad.h"

static lazyload_library libcurl = {"libcurl.so.4", 0};

#define FORWARD(result, name, parameters, arguments) LAZYLOAD_FORWARD(libcurl, result, name, parameters, arguments)
#define FORWARD_VOID(name, parameters, arguments) LAZYLOAD_FORWARD_VOID(libcurl, name, parameters, arguments)
#define REAL(type, name) LAZYLOAD_REAL(libcurl, type, name)

FORWARD(CURLcode, curl_global_init, (long flags), (flags))
FORWARD(char *, curl_version, (void), ())
FORWARD(curl_version_info_data *, curl_version_info, (CURLversion age), (age))
FORWARD_VOID(curl_free, (void *pointer), (pointer))
FORWARD(struct curl_slist *, curl_slist_append, (struct curl_slist *list, const char *string), (list, string))
FORWARD_VOID(curl_slist_free_all, (struct curl_slist *list), (list))

FORWARD(CURL *, curl_easy_init, (void), ())
FORWARD_VOID(curl_easy_cleanup, (CURL *easy), (easy))
FORWARD(CURLcode, curl_easy_perform, (CURL *easy), (easy))
FORWARD(CURLcode, curl_easy_pause, (CURL *easy, int bitmask), (easy, bitmask))
FORWARD(const char *, curl_easy_strerror, (CURLcode code), (code))

FORWARD(CURLM *, curl_multi_init, (void), ())
FORWARD(CURLMcode, curl_multi_cleanup, (CURLM *multi), (multi))
FORWARD(CURLMcode, curl_multi_add_handle, (CURLM *multi, CURL *easy), (multi, easy))
FORWARD(CURLMcode, curl_multi_remove_handle, (CURLM *multi, CURL *easy), (multi, easy))
FORWARD(CURLMcode, curl_multi_perform, (CURLM *multi, int *running), (multi, running))
FORWARD(CURLMcode, curl_multi_poll, (CURLM *multi, struct curl_waitfd extra[], unsigned int count, int timeout, int *numfds),
        (multi, extra, count, timeout, numfds))
FORWARD(CURLMcode, curl_multi_wakeup, (CURLM *multi), (multi))
FORWARD(CURLMsg *, curl_multi_info_read, (CURLM *multi, int *queued), (multi, queued))
FORWARD(CURLMcode, curl_multi_assign, (CURLM *multi, curl_socket_t socket, void *pointer), (multi, socket, pointer))
FORWARD(CURLMcode, curl_multi_socket_action, (CURLM *multi, curl_socket_t socket, int mask, int *running), (multi, socket, mask, running))
FORWARD(const char *, curl_multi_strerror, (CURLMcode code), (code))

FORWARD(CURLU *, curl_url, (void), ())
FORWARD_VOID(curl_url_cleanup, (CURLU *url), (url))
FORWARD(CURLUcode, curl_url_get, (CURLU *url, CURLUPart part, char **value, unsigned int flags), (url, part, value, flags))
FORWARD(CURLUcode, curl_url_set, (CURLU *url, CURLUPart part, const char *value, unsigned int flags), (url, part, value, flags))
FORWARD(const char *, curl_url_strerror, (CURLUcode code), (code))

// Sets `code` to `real(handle, option, value)`, the one argument read from `arguments` as the
// type the option's number says (libcurl's rule for easy and multi options alike; no multi
// option is a blob).
#define CALL_WITH_OPTION_VALUE(code, real, handle, option, arguments) \
    if (option < CURLOPTTYPE_OBJECTPOINT) { /* CURLOPTTYPE_LONG */ \
        code = real(handle, option, va_arg(arguments, long)); \
    } else if (option < CURLOPTTYPE_OFF_T) { /* object and function pointers */ \
        code = real(handle, option, va_arg(arguments, void *)); \
    } else if (option < CURLOPTTYPE_BLOB) { \
        code = real(handle, option, va_arg(arguments, curl_off_t)); \
    } else { /* blobs, by pointer */ \
        code = real(handle, option, va_arg(arguments, void *)); \
    }

CURLcode curl_easy_setopt(CURL *easy, CURLoption option, ...) {
    typedef CURLcode (*function)(CURL *, CURLoption, ...);
    REAL(function, curl_easy_setopt)
    va_list arguments;
    va_start(arguments, option);
    CURLcode code;
    CALL_WITH_OPTION_VALUE(code, real, easy, option, arguments)
    va_end(arguments);
    return code;
}

CURLcode curl_easy_getinfo(CURL *easy, CURLINFO info, ...) {
    typedef CURLcode (*function)(CURL *, CURLINFO, ...);
    REAL(function, curl_easy_getinfo)
    va_list arguments;
    va_start(arguments, info);
    void *result = va_arg(arguments, void *); // every kind of information is written through a pointer
    va_end(arguments);
    return real(easy, info, result);
}

CURLMcode curl_multi_setopt(CURLM *multi, CURLMoption option, ...) {
    typedef CURLMcode (*function)(CURLM *, CURLMoption, ...);
    REAL(function, curl_multi_setopt)
    va_list arguments;
    va_start(arguments, option);
    CURLMcode code;
    CALL_WITH_OPTION_VALUE(code, real, multi, option, arguments)
    va_end(arguments);
    return code;
}
