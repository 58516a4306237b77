/// The part of libcurl's ABI this package uses, written here so that building needs no libcurl
/// headers: libcurl.so.4 is loaded at run time (LazyCurl.c). Each value is a fact of that ABI,
/// stable since libcurl 7.x gave it (curl keeps option and code numbers for ever); a name
/// missing here is one the package does not use. Linux on 64-bit targets (LP64) only.
#ifndef CURL_ABI_H
#define CURL_ABI_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

// MARK: - Handles and scalar types

typedef void CURL;
typedef void CURLM;
typedef struct Curl_URL CURLU;
typedef struct curl_version_info_data curl_version_info_data;
typedef long curl_off_t;
typedef int curl_socket_t;
typedef int CURLversion;

struct curl_slist {
    char *data;
    struct curl_slist *next;
};

struct curl_blob {
    void *data;
    size_t len;
    unsigned int flags;
};

struct curl_certinfo {
    int num_of_certs;
    struct curl_slist **certinfo;
};

struct curl_waitfd {
    curl_socket_t fd;
    short events;
    short revents;
};

typedef size_t (*curl_write_callback)(char *buffer, size_t size, size_t nitems, void *outstream);
typedef size_t (*curl_read_callback)(char *buffer, size_t size, size_t nitems, void *instream);
typedef int (*curl_seek_callback)(void *instream, curl_off_t offset, int origin);
typedef int (*curl_xferinfo_callback)(void *clientp, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                                      curl_off_t ulnow);

// MARK: - Result codes

typedef enum {
    CURLE_OK = 0,
    CURLE_UNSUPPORTED_PROTOCOL = 1,
    CURLE_FAILED_INIT = 2,
    CURLE_URL_MALFORMAT = 3,
    CURLE_COULDNT_RESOLVE_PROXY = 5,
    CURLE_COULDNT_RESOLVE_HOST = 6,
    CURLE_COULDNT_CONNECT = 7,
    CURLE_HTTP2 = 16,
    CURLE_PARTIAL_FILE = 18,
    CURLE_WRITE_ERROR = 23,
    CURLE_READ_ERROR = 26,
    CURLE_OUT_OF_MEMORY = 27,
    CURLE_OPERATION_TIMEDOUT = 28,
    CURLE_SSL_CONNECT_ERROR = 35,
    CURLE_ABORTED_BY_CALLBACK = 42,
    CURLE_BAD_FUNCTION_ARGUMENT = 43,
    CURLE_TOO_MANY_REDIRECTS = 47,
    CURLE_GOT_NOTHING = 52,
    CURLE_SSL_ENGINE_NOTFOUND = 53,
    CURLE_SSL_ENGINE_SETFAILED = 54,
    CURLE_SEND_ERROR = 55,
    CURLE_RECV_ERROR = 56,
    CURLE_SSL_CERTPROBLEM = 58,
    CURLE_SSL_CIPHER = 59,
    CURLE_PEER_FAILED_VERIFICATION = 60,
    CURLE_USE_SSL_FAILED = 64,
    CURLE_SEND_FAIL_REWIND = 65,
    CURLE_SSL_ENGINE_INITFAILED = 66,
    CURLE_SSL_CACERT_BADFILE = 77,
    CURLE_SSL_SHUTDOWN_FAILED = 80,
    CURLE_SSL_CRL_BADFILE = 82,
    CURLE_SSL_ISSUER_ERROR = 83,
    CURLE_SSL_PINNEDPUBKEYNOTMATCH = 90,
    CURLE_SSL_INVALIDCERTSTATUS = 91,
    CURLE_HTTP2_STREAM = 92,
    CURLE_HTTP3 = 95,
} CURLcode;

/// Signed, as libcurl's is (CURLM_CALL_MULTI_PERFORM is -1).
typedef enum {
    CURLM_CALL_MULTI_PERFORM = -1,
    CURLM_OK = 0,
    CURLM_OUT_OF_MEMORY = 3,
    CURLM_ADDED_ALREADY = 7,
    CURLM_RECURSIVE_API_CALL = 8,
} CURLMcode;

typedef enum {
    CURLUE_OK = 0,
    CURLUE_UNSUPPORTED_SCHEME = 5,
} CURLUcode;

typedef enum {
    CURLUPART_URL = 0,
    CURLUPART_SCHEME = 1,
} CURLUPart;

// MARK: - Options: a type's base plus the option's number (libcurl's CURLOPTTYPE_* rule)

#define CURLOPTTYPE_LONG 0
#define CURLOPTTYPE_OBJECTPOINT 10000
#define CURLOPTTYPE_FUNCTIONPOINT 20000
#define CURLOPTTYPE_OFF_T 30000
#define CURLOPTTYPE_BLOB 40000

typedef enum {
    CURLOPT_LOW_SPEED_LIMIT = 19,
    CURLOPT_LOW_SPEED_TIME = 20,
    CURLOPT_NOPROGRESS = 43,
    CURLOPT_NOBODY = 44,
    CURLOPT_UPLOAD = 46,
    CURLOPT_POST = 47,
    CURLOPT_FOLLOWLOCATION = 52,
    CURLOPT_SSL_VERIFYPEER = 64,
    CURLOPT_MAXREDIRS = 68,
    CURLOPT_HTTPGET = 80,
    CURLOPT_SSL_VERIFYHOST = 81,
    CURLOPT_HTTP_VERSION = 84,
    CURLOPT_BUFFERSIZE = 98,
    CURLOPT_NOSIGNAL = 99,
    CURLOPT_HTTPAUTH = 107,
    CURLOPT_PROXYAUTH = 111,
    CURLOPT_CONNECT_ONLY = 141,
    CURLOPT_CONNECTTIMEOUT_MS = 156,
    CURLOPT_HTTP_CONTENT_DECODING = 158,
    CURLOPT_CERTINFO = 172,
    CURLOPT_TCP_KEEPALIVE = 213,
    CURLOPT_PIPEWAIT = 237,
    CURLOPT_UPLOAD_BUFFERSIZE = 280,
    CURLOPT_WRITEDATA = 10001,
    CURLOPT_URL = 10002,
    CURLOPT_PROXY = 10004,
    CURLOPT_RANGE = 10007,
    CURLOPT_READDATA = 10009,
    CURLOPT_ERRORBUFFER = 10010,
    CURLOPT_POSTFIELDS = 10015,
    CURLOPT_HTTPHEADER = 10023,
    CURLOPT_HEADERDATA = 10029,
    CURLOPT_COOKIEFILE = 10031,
    CURLOPT_CUSTOMREQUEST = 10036,
    CURLOPT_XFERINFODATA = 10057,
    CURLOPT_CAINFO = 10065,
    CURLOPT_CAPATH = 10097,
    CURLOPT_PRIVATE = 10103,
    CURLOPT_COOKIELIST = 10135,
    CURLOPT_SEEKDATA = 10168,
    CURLOPT_USERNAME = 10173,
    CURLOPT_PASSWORD = 10174,
    CURLOPT_PROXYUSERNAME = 10175,
    CURLOPT_PROXYPASSWORD = 10176,
    CURLOPT_PINNEDPUBLICKEY = 10230,
    CURLOPT_PROTOCOLS_STR = 10318,
    CURLOPT_REDIR_PROTOCOLS_STR = 10319,
    CURLOPT_WRITEFUNCTION = 20011,
    CURLOPT_READFUNCTION = 20012,
    CURLOPT_HEADERFUNCTION = 20079,
    CURLOPT_SEEKFUNCTION = 20167,
    CURLOPT_XFERINFOFUNCTION = 20219,
    CURLOPT_INFILESIZE_LARGE = 30115,
    CURLOPT_POSTFIELDSIZE_LARGE = 30120,
    CURLOPT_CAINFO_BLOB = 40309,
} CURLoption;

typedef enum {
    CURLMOPT_PIPELINING = 3,
    CURLMOPT_MAX_HOST_CONNECTIONS = 7,
    CURLMOPT_MAX_TOTAL_CONNECTIONS = 13,
} CURLMoption;

// MARK: - Information: a type's bits plus the item's number

typedef enum {
    CURLINFO_EFFECTIVE_URL = 0x100000 + 1,
    CURLINFO_CONTENT_TYPE = 0x100000 + 18,
    CURLINFO_PRIVATE = 0x100000 + 21,
    CURLINFO_PRIMARY_IP = 0x100000 + 32,
    CURLINFO_RESPONSE_CODE = 0x200000 + 2,
    CURLINFO_SSL_VERIFYRESULT = 0x200000 + 13,
    CURLINFO_REDIRECT_COUNT = 0x200000 + 20,
    CURLINFO_HTTP_CONNECTCODE = 0x200000 + 22,
    CURLINFO_PRIMARY_PORT = 0x200000 + 40,
    CURLINFO_HTTP_VERSION = 0x200000 + 46,
    CURLINFO_CERTINFO = 0x400000 + 34,
    CURLINFO_SIZE_UPLOAD_T = 0x600000 + 7,
    CURLINFO_SIZE_DOWNLOAD_T = 0x600000 + 8,
    CURLINFO_CONTENT_LENGTH_DOWNLOAD_T = 0x600000 + 15,
} CURLINFO;

// MARK: - Other constants

enum {
    CURL_HTTP_VERSION_1_0 = 1,
    CURL_HTTP_VERSION_1_1 = 2,
    CURL_HTTP_VERSION_2_0 = 3,
    CURL_HTTP_VERSION_2TLS = 4,
    CURL_HTTP_VERSION_3 = 30,
};

#define CURLPIPE_MULTIPLEX 2L
#define CURL_GLOBAL_ALL 3L
#define CURL_ERROR_SIZE 256
#define CURL_WRITEFUNC_PAUSE 0x10000001
#define CURL_READFUNC_ABORT 0x10000000
#define CURL_READFUNC_PAUSE 0x10000001
#define CURLPAUSE_RECV 1
#define CURLPAUSE_SEND 4
#define CURLPAUSE_ALL (CURLPAUSE_RECV | CURLPAUSE_SEND)
#define CURLPAUSE_CONT 0
#define CURL_WAIT_POLLIN 0x0001
#define CURL_WAIT_POLLPRI 0x0002
#define CURL_WAIT_POLLOUT 0x0004
#define CURL_SEEKFUNC_OK 0
#define CURL_SEEKFUNC_FAIL 1
#define CURL_SEEKFUNC_CANTSEEK 2
#define CURL_BLOB_NOCOPY 0
#define CURL_BLOB_COPY 1

typedef enum {
    CURLMSG_NONE = 0,
    CURLMSG_DONE = 1,
} CURLMSG;

typedef struct CURLMsg {
    CURLMSG msg;
    CURL *easy_handle;
    union {
        void *whatever;
        CURLcode result;
    } data;
} CURLMsg;

// MARK: - Functions (defined in LazyCurl.c, which calls libcurl's own)

CURLcode curl_global_init(long flags);
char *curl_version(void);
curl_version_info_data *curl_version_info(CURLversion age);
void curl_free(void *pointer);
struct curl_slist *curl_slist_append(struct curl_slist *list, const char *string);
void curl_slist_free_all(struct curl_slist *list);

CURL *curl_easy_init(void);
void curl_easy_cleanup(CURL *easy);
CURLcode curl_easy_perform(CURL *easy);
CURLcode curl_easy_pause(CURL *easy, int bitmask);
const char *curl_easy_strerror(CURLcode code);
CURLcode curl_easy_setopt(CURL *easy, CURLoption option, ...);
CURLcode curl_easy_getinfo(CURL *easy, CURLINFO info, ...);

CURLM *curl_multi_init(void);
CURLMcode curl_multi_cleanup(CURLM *multi);
CURLMcode curl_multi_add_handle(CURLM *multi, CURL *easy);
CURLMcode curl_multi_remove_handle(CURLM *multi, CURL *easy);
CURLMcode curl_multi_perform(CURLM *multi, int *running);
CURLMcode curl_multi_poll(CURLM *multi, struct curl_waitfd extra[], unsigned int count, int timeout, int *numfds);
CURLMcode curl_multi_wakeup(CURLM *multi);
CURLMsg *curl_multi_info_read(CURLM *multi, int *queued);
CURLMcode curl_multi_assign(CURLM *multi, curl_socket_t socket, void *pointer);
CURLMcode curl_multi_socket_action(CURLM *multi, curl_socket_t socket, int mask, int *running);
const char *curl_multi_strerror(CURLMcode code);
CURLMcode curl_multi_setopt(CURLM *multi, CURLMoption option, ...);

CURLU *curl_url(void);
void curl_url_cleanup(CURLU *url);
CURLUcode curl_url_get(CURLU *url, CURLUPart part, char **value, unsigned int flags);
CURLUcode curl_url_set(CURLU *url, CURLUPart part, const char *value, unsigned int flags);
const char *curl_url_strerror(CURLUcode code);

#ifdef __cplusplus
}
#endif

#endif /* CURL_ABI_H */
