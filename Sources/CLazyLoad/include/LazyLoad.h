// A shared library loaded when one of its functions is first called, not when the process
// starts (see `LazyLoad.c`): the forwarders of CCurl's `LazyCurl.c` and CLibcrypto's
// `LazyCrypto.c` are written with the macros below.
#ifndef LAZYLOAD_H
#define LAZYLOAD_H

/// One library to load on first use: its file name, and its handle once loaded.
typedef struct lazyload_library {
    const char *file;
    void *handle;
} lazyload_library;

/// The library's own `name`, from `library` (loaded now if it is not yet; any thread).
/// `self` is the caller's forwarder of that name: a lookup that found it again would call
/// itself. A library or a function that cannot be found stops the process with dlerror()'s
/// reason, as a missing library stopped it at start before.
void *lazyload_function(lazyload_library *library, const char *name, const void *self);

/// `real`, a `type`, is `library`'s `name`, looked up at the first call and kept (two first
/// calls at once store the same pointer twice).
#define LAZYLOAD_REAL(library, type, name) \
    static type stored; \
    type real = __atomic_load_n(&stored, __ATOMIC_ACQUIRE); \
    if (real == 0) { \
        real = (type)lazyload_function(&(library), #name, (const void *)name); \
        __atomic_store_n(&stored, real, __ATOMIC_RELEASE); \
    }

/// Defines `name`, which calls `library`'s function of that name.
#define LAZYLOAD_FORWARD(library, result, name, parameters, arguments) \
    typedef result (*name##_function) parameters; \
    result name parameters { \
        LAZYLOAD_REAL(library, name##_function, name) \
        return real arguments; \
    }

/// `LAZYLOAD_FORWARD` for a function that returns nothing.
#define LAZYLOAD_FORWARD_VOID(library, name, parameters, arguments) \
    typedef void (*name##_function) parameters; \
    void name parameters { \
        LAZYLOAD_REAL(library, name##_function, name) \
        real arguments; \
    }

#endif
