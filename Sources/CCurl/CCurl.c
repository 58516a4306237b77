// Typed wrappers around libcurl's variadic calls; see include/CCurl.h.

#include "CCurl.h"

CURLcode ccurl_easy_setopt_long(CURL *easy, CURLoption option, long value) {
    return curl_easy_setopt(easy, option, value);
}

CURLcode ccurl_easy_setopt_string(CURL *easy, CURLoption option, const char *value) {
    return curl_easy_setopt(easy, option, value);
}

CURLcode ccurl_easy_setopt_pointer(CURL *easy, CURLoption option, void *value) {
    return curl_easy_setopt(easy, option, value);
}

CURLcode ccurl_easy_setopt_off_t(CURL *easy, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(easy, option, value);
}

CURLcode ccurl_easy_setopt_slist(CURL *easy, CURLoption option, struct curl_slist *list) {
    return curl_easy_setopt(easy, option, list);
}

CURLcode ccurl_easy_setopt_blob(CURL *easy, CURLoption option, const void *data, size_t length, int copy) {
    if (data == NULL) {
        return curl_easy_setopt(easy, option, (struct curl_blob *)NULL);
    }
    // libcurl reads the struct during the call only (the bytes are copied, or kept by pointer).
    struct curl_blob blob = { (void *)data, length, copy ? CURL_BLOB_COPY : CURL_BLOB_NOCOPY };
    return curl_easy_setopt(easy, option, &blob);
}

CURLcode ccurl_easy_setopt_write_callback(CURL *easy, curl_write_callback callback) {
    return curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, callback);
}

CURLcode ccurl_easy_setopt_header_callback(CURL *easy, curl_write_callback callback) {
    return curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, callback);
}

CURLcode ccurl_easy_setopt_read_callback(CURL *easy, curl_read_callback callback) {
    return curl_easy_setopt(easy, CURLOPT_READFUNCTION, callback);
}

CURLcode ccurl_easy_setopt_seek_callback(CURL *easy, curl_seek_callback callback) {
    return curl_easy_setopt(easy, CURLOPT_SEEKFUNCTION, callback);
}

CURLcode ccurl_easy_setopt_xferinfo_callback(CURL *easy, curl_xferinfo_callback callback) {
    return curl_easy_setopt(easy, CURLOPT_XFERINFOFUNCTION, callback);
}

CURLcode ccurl_easy_getinfo_long(CURL *easy, CURLINFO info, long *value) {
    return curl_easy_getinfo(easy, info, value);
}

CURLcode ccurl_easy_getinfo_off_t(CURL *easy, CURLINFO info, curl_off_t *value) {
    return curl_easy_getinfo(easy, info, value);
}

CURLcode ccurl_easy_getinfo_string(CURL *easy, CURLINFO info, const char **value) {
    // libcurl's getinfo takes char ** for string results.
    return curl_easy_getinfo(easy, info, (char **)value);
}

int ccurl_easy_certificate_count(CURL *easy) {
    struct curl_certinfo *info = NULL;
    if (curl_easy_getinfo(easy, CURLINFO_CERTINFO, &info) != CURLE_OK || info == NULL) {
        return 0;
    }
    return info->num_of_certs;
}

const struct curl_slist *ccurl_easy_certificate_fields(CURL *easy, int index) {
    struct curl_certinfo *info = NULL;
    if (curl_easy_getinfo(easy, CURLINFO_CERTINFO, &info) != CURLE_OK || info == NULL) {
        return NULL;
    }
    if (index < 0 || index >= info->num_of_certs) {
        return NULL;
    }
    return info->certinfo[index];
}

CURLMcode ccurl_multi_setopt_long(CURLM *multi, CURLMoption option, long value) {
    return curl_multi_setopt(multi, option, value);
}

int ccurl_multi_next_done(CURLM *multi, CURL **easy, CURLcode *result) {
    int queued = 0;
    CURLMsg *message;
    while ((message = curl_multi_info_read(multi, &queued)) != NULL) {
        if (message->msg == CURLMSG_DONE) {
            *easy = message->easy_handle;
            *result = message->data.result;
            return 1;
        }
    }
    return 0;
}
