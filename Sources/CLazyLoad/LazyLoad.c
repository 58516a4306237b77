// Loads a shared library the first time one of its functions is called (see LazyLoad.h).
//
// dlopen may be called from several threads at once and gives each the same handle (the
// library is loaded once, its count raised); the handle is kept, so a race costs one extra
// count, never a second copy.
#include "LazyLoad.h"
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

static void *loaded(lazyload_library *library) {
    void *handle = __atomic_load_n(&library->handle, __ATOMIC_ACQUIRE);
    if (handle != NULL) return handle;
    handle = dlopen(library->file, RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        fprintf(stderr, "%s cannot be loaded: %s\n", library->file, dlerror());
        abort();
    }
    __atomic_store_n(&library->handle, handle, __ATOMIC_RELEASE);
    return handle;
}

void *lazyload_function(lazyload_library *library, const char *name, const void *self) {
    void *function = dlsym(loaded(library), name);
    if (function == NULL || function == self) {
        fprintf(stderr, "%s has no %s: %s\n", library->file, name, function == NULL ? dlerror() : "found this forwarder itself");
        abort();
    }
    return function;
}
