// powercutfs: a pass-through FUSE file system that can "cut the power".
//
// Every operation goes through to a backing directory at once (so processes see what they
// would see on a disk with a page cache), while a model of the disk keeps what a power cut
// would leave, as CrashMonkey and ALICE model it:
//
//   - a file's durable content is its content at its last fsync/fdatasync (at mount if it
//     was never synced since; empty if it was created after the mount and never synced);
//   - a directory's durable entries are its listing at its last fsync (of a descriptor from
//     opendir/open(O_DIRECTORY)), or at the mount.
//
// The tree at the mount counts as fully durable. Files have the file system's own identity
// (a node per backing inode, replaced whenever a new file is made), so that a backing inode
// reused by a new file does not inherit an old file's durable state; hard links share a node.
//
// SIGUSR1 cuts the power: atomically (between two operations) every later operation fails
// with EIO, the survivor tree (from the root, through durable entries only, with durable
// contents; hard links kept) is written into SURVIVORS, a list of what the cut threw away
// into MARKER.lost, and MARKER is created (its first line "ok ..." or "error ...").
//
// Usage: powercutfs BACKING SURVIVORS MARKER MOUNTPOINT [FUSE options]
//   runs in the foreground, single-threaded (-f -s are added). With POWERCUT_AT=OP:TEXT:N in
//   the environment it also cuts by itself right after the N-th such operation (see after()).
//   A file opened with O_DIRECT is taken: the kernel hands its writes over unbuffered, and they
//   are durable only at the next fsync, like any other (a disk's cache keeps direct writes
//   too). With POWERCUT_REFUSE_DIRECT=1 every direct write fails with EINVAL instead, as on
//   file systems that have no direct I/O.
// Build: gcc -O2 -Wall powercutfs.c $(pkg-config --cflags --libs fuse3) -o powercutfs
//
// Not a SwiftPM target: the power-cut test compiles it at run time, so that nobody else
// needs libfuse.

#define FUSE_USE_VERSION 31
#define _GNU_SOURCE
#include <fuse.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#define INF_OFF INT64_MAX

struct dent;

struct node {
    uint64_t id;
    ino_t ino;          // the backing inode while this node is the current file there
    mode_t mode;
    // regular files: durable content, and the range changed since the last sync
    unsigned char *dur;
    size_t dur_len, dur_cap;
    int64_t dirty_lo, dirty_hi; // dirty when lo < hi
    // directories: durable entries
    struct dent *dents;
    size_t ndents, cap_dents;
    // symbolic links
    char *target;
    // while dumping
    char *dumped;
    // the last name it was made, opened or renamed under (for POWERCUT_AT)
    char *path;
};

struct dent {
    char *name;
    struct node *node;
};

static int backing_fd = -1;
static const char *backing_path, *survivors_path, *marker_path;
static pthread_mutex_t big_lock = PTHREAD_MUTEX_INITIALIZER;
static int power_cut;
static uint64_t next_id = 1;
static struct node *root_node;
static int cut_pipe[2];
static struct {
    unsigned long writes, direct_writes, fsyncs, fsyncdirs, creates, renames, links, unlinks, mkdirs, fallocates;
    unsigned long long bytes_written, bytes_synced;
} stats;

// ---- backing inode -> current node --------------------------------------------------

#define MAP_BUCKETS 65536
struct map_entry { ino_t ino; struct node *node; struct map_entry *next; };
static struct map_entry *ino_map[MAP_BUCKETS];

static struct node *map_get(ino_t ino) {
    for (struct map_entry *e = ino_map[ino % MAP_BUCKETS]; e; e = e->next)
        if (e->ino == ino) return e->node;
    return NULL;
}

static void map_set(ino_t ino, struct node *node) {
    struct map_entry **head = &ino_map[ino % MAP_BUCKETS];
    for (struct map_entry *e = *head; e; e = e->next)
        if (e->ino == ino) { e->node = node; return; }
    struct map_entry *e = calloc(1, sizeof *e);
    e->ino = ino;
    e->node = node;
    e->next = *head;
    *head = e;
}

static void set_path(struct node *n, const char *path) {
    if (!n || !path) return;
    free(n->path);
    n->path = strdup(path);
}

static void *xrealloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (!q) { perror("powercutfs: realloc"); abort(); }
    return q;
}

static struct node *new_node(const struct stat *st) {
    struct node *n = calloc(1, sizeof *n);
    n->id = next_id++;
    n->ino = st->st_ino;
    n->mode = st->st_mode;
    n->dirty_lo = INF_OFF;
    n->dirty_hi = 0;
    map_set(st->st_ino, n);
    return n;
}

static void dur_reserve(struct node *n, size_t size) {
    if (size <= n->dur_cap) return;
    size_t cap = n->dur_cap ? n->dur_cap : 4096;
    while (cap < size) cap *= 2;
    n->dur = xrealloc(n->dur, cap);
    n->dur_cap = cap;
}

static void mark_dirty(struct node *n, int64_t lo, int64_t hi) {
    if (lo < n->dirty_lo) n->dirty_lo = lo;
    if (hi > n->dirty_hi) n->dirty_hi = hi;
}

static int read_fully(int fd, unsigned char *buf, size_t len, off_t off) {
    size_t done = 0;
    while (done < len) {
        ssize_t r = pread(fd, buf + done, len - done, off + (off_t)done);
        if (r < 0) { if (errno == EINTR) continue; return -errno; }
        if (r == 0) { memset(buf + done, 0, len - done); break; }
        done += (size_t)r;
    }
    return 0;
}

// The file's content as it is now becomes its durable content.
static int sync_file(struct node *n, int fd) {
    struct stat st;
    if (fstat(fd, &st) != 0) return -errno;
    size_t size = (size_t)st.st_size;
    // From the first byte changed (or the old durable end) to the end of the file.
    int64_t lo = n->dirty_lo;
    if ((int64_t)n->dur_len < lo) lo = (int64_t)n->dur_len;
    if (lo > (int64_t)size) lo = (int64_t)size;
    int64_t hi = (int64_t)size;
    dur_reserve(n, size);
    if (hi > lo) {
        // The descriptor may be write-only: read through a new one (works for unlinked files too).
        char self[64];
        snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
        int readable = open(self, O_RDONLY);
        if (readable < 0) return -errno;
        int r = read_fully(readable, n->dur + lo, (size_t)(hi - lo), lo);
        close(readable);
        if (r) return r;
        stats.bytes_synced += (unsigned long long)(hi - lo);
    }
    n->dur_len = size;
    n->dirty_lo = INF_OFF;
    n->dirty_hi = 0;
    return 0;
}

static struct node *node_for_stat(const struct stat *st);

// The node of a backing file (by its inode); one not seen before counts as made at the mount.
static struct node *node_for_fd(int fd) {
    struct stat st;
    if (fstat(fd, &st) != 0) return NULL;
    return node_for_stat(&st);
}

static struct node *node_for_stat(const struct stat *st) {
    struct node *n = map_get(st->st_ino);
    if (n) return n;
    fprintf(stderr, "powercutfs: inode %lu was not seen being made; taken as durable and empty\n", (unsigned long)st->st_ino);
    return new_node(st);
}

static const char *rel(const char *path) {
    while (*path == '/') path++;
    return *path ? path : ".";
}

static void add_dent(struct node *dir, const char *name, struct node *child) {
    if (dir->ndents == dir->cap_dents) {
        dir->cap_dents = dir->cap_dents ? dir->cap_dents * 2 : 16;
        dir->dents = xrealloc(dir->dents, dir->cap_dents * sizeof *dir->dents);
    }
    dir->dents[dir->ndents].name = strdup(name);
    dir->dents[dir->ndents].node = child;
    dir->ndents++;
}

static void clear_dents(struct node *dir) {
    for (size_t i = 0; i < dir->ndents; i++) free(dir->dents[i].name);
    dir->ndents = 0;
}

// The directory's listing as it is now becomes its durable listing.
static int sync_dir(struct node *dir, int dirfd) {
    int fd = dup(dirfd);
    if (fd < 0) return -errno;
    DIR *d = fdopendir(fd);
    if (!d) { int e = errno; close(fd); return -e; }
    rewinddir(d);
    clear_dents(dir);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        struct stat st;
        if (fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
        add_dent(dir, e->d_name, node_for_stat(&st));
    }
    closedir(d);
    return 0;
}

// ---- the tree at the mount ------------------------------------------------------------

static int load_tree(int dirfd, struct node *dir) {
    int fd = dup(dirfd);
    DIR *d = fdopendir(fd);
    if (!d) return -errno;
    rewinddir(d); // a duplicate shares its offset with the original
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        struct stat st;
        if (fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
        struct node *child = map_get(st.st_ino);
        if (!child) {
            child = new_node(&st);
            if (S_ISREG(st.st_mode)) {
                int f = openat(dirfd, e->d_name, O_RDONLY);
                if (f < 0) { closedir(d); return -errno; }
                dur_reserve(child, (size_t)st.st_size);
                read_fully(f, child->dur, (size_t)st.st_size, 0);
                child->dur_len = (size_t)st.st_size;
                close(f);
            } else if (S_ISDIR(st.st_mode)) {
                int sub = openat(dirfd, e->d_name, O_RDONLY | O_DIRECTORY);
                if (sub < 0) { closedir(d); return -errno; }
                int r = load_tree(sub, child);
                close(sub);
                if (r) { closedir(d); return r; }
            } else if (S_ISLNK(st.st_mode)) {
                char buf[PATH_MAX];
                ssize_t len = readlinkat(dirfd, e->d_name, buf, sizeof buf - 1);
                buf[len < 0 ? 0 : len] = 0;
                child->target = strdup(buf);
            }
        }
        add_dent(dir, e->d_name, child);
    }
    closedir(d);
    return 0;
}

// ---- the cut ----------------------------------------------------------------------------

static unsigned long dumped_files, dumped_dirs, dumped_links, torn_files;

// POWERCUT_TORN=prefix|zeros (default off: nothing unsynced survives). Some disks keep part
// of what was appended since the last sync: "prefix" keeps a random part of it (a torn
// tail), "zeros" keeps the new size but not the data (ext4 data=writeback, XFS). Only for
// files appended to since their last sync, still open under their last name.
static const char *torn_mode;
static uint64_t torn_state = 0x9E3779B97F4A7C15ull;

static uint64_t torn_random(void) {
    torn_state ^= torn_state >> 12; torn_state ^= torn_state << 25; torn_state ^= torn_state >> 27;
    return torn_state * 2685821657736338717ull;
}

static void tear(struct node *n, int out) {
    if (!torn_mode || n->dirty_lo >= n->dirty_hi || n->dirty_lo < (int64_t)n->dur_len || !n->path) return;
    struct stat st;
    if (fstatat(backing_fd, rel(n->path), &st, AT_SYMLINK_NOFOLLOW) != 0 || st.st_ino != n->ino || map_get(st.st_ino) != n) return;
    if ((size_t)st.st_size <= n->dur_len || torn_random() % 2) return;
    size_t keep = n->dur_len + 1 + (size_t)(torn_random() % ((size_t)st.st_size - n->dur_len));
    unsigned char *extra = calloc(1, keep - n->dur_len);
    if (!extra) return;
    if (!strcmp(torn_mode, "prefix")) {
        int in = openat(backing_fd, rel(n->path), O_RDONLY);
        if (in < 0) { free(extra); return; }
        read_fully(in, extra, keep - n->dur_len, (off_t)n->dur_len);
        close(in);
    }
    if (pwrite(out, extra, keep - n->dur_len, (off_t)n->dur_len) > 0) torn_files++;
    free(extra);
}

static int dump(struct node *dir, const char *out) {
    for (size_t i = 0; i < dir->ndents; i++) {
        struct node *n = dir->dents[i].node;
        char *path;
        if (asprintf(&path, "%s/%s", out, dir->dents[i].name) < 0) return -ENOMEM;
        if (S_ISDIR(n->mode)) {
            if (n->dumped) { free(path); continue; } // a directory renamed without syncing its old parent: once
            if (mkdir(path, n->mode & 07777) != 0) { int e = errno; free(path); return -e; }
            n->dumped = path;
            dumped_dirs++;
            int r = dump(n, path);
            if (r) return r;
            continue;
        }
        if (S_ISREG(n->mode)) {
            if (n->dumped) {
                if (link(n->dumped, path) != 0) { int e = errno; free(path); return -e; }
                dumped_links++;
                free(path);
                continue;
            }
            int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, n->mode & 07777);
            if (fd < 0) { int e = errno; free(path); return -e; }
            size_t done = 0;
            while (done < n->dur_len) {
                ssize_t w = write(fd, n->dur + done, n->dur_len - done);
                if (w < 0) { int e = errno; close(fd); free(path); return -e; }
                done += (size_t)w;
            }
            tear(n, fd);
            close(fd);
            n->dumped = path;
            dumped_files++;
            continue;
        }
        if (S_ISLNK(n->mode) && n->target) {
            if (symlink(n->target, path) != 0) { int e = errno; free(path); return -e; }
        }
        // sockets and FIFOs do not outlive a power cut in any way that matters here
        free(path);
    }
    return 0;
}

// What the cut throws away: walks the tree as processes saw it and lists entries that are
// not durable and files whose content is not.
static void list_lost(FILE *out, int dirfd, struct node *dir, const char *prefix) {
    int fd = dup(dirfd);
    DIR *d = fdopendir(fd);
    if (!d) return;
    rewinddir(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        struct stat st;
        if (fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
        struct node *n = map_get(st.st_ino);
        int durable_entry = 0;
        if (dir) for (size_t i = 0; i < dir->ndents; i++)
            if (dir->dents[i].node == n && !strcmp(dir->dents[i].name, e->d_name)) { durable_entry = 1; break; }
        if (!durable_entry) fprintf(out, "entry %s%s\n", prefix, e->d_name);
        if (n && S_ISREG(st.st_mode) && (n->dirty_lo < n->dirty_hi || (size_t)st.st_size != n->dur_len))
            fprintf(out, "data %s%s size %lld durable %zu\n", prefix, e->d_name, (long long)st.st_size, n->dur_len);
        if (S_ISDIR(st.st_mode)) {
            int sub = openat(dirfd, e->d_name, O_RDONLY | O_DIRECTORY);
            if (sub < 0) continue;
            char *p;
            if (asprintf(&p, "%s%s/", prefix, e->d_name) >= 0) {
                list_lost(out, sub, durable_entry ? n : NULL, p);
                free(p);
            }
            close(sub);
        }
    }
    closedir(d);
}

static void write_marker(const char *text) {
    char *tmp;
    if (asprintf(&tmp, "%s.tmp", marker_path) < 0) return;
    FILE *f = fopen(tmp, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
        rename(tmp, marker_path);
    }
    free(tmp);
}

// The cut itself; the caller holds big_lock. `cause` says what set it off.
static void cut_locked(const char *cause) {
    if (power_cut) return;
    power_cut = 1; // from here on every operation fails with EIO
    char *lost_path;
    if (asprintf(&lost_path, "%s.lost", marker_path) >= 0) {
        FILE *lost = fopen(lost_path, "w");
        if (lost) {
            list_lost(lost, backing_fd, root_node, "");
            fclose(lost);
        }
        free(lost_path);
    }
    char text[1024];
    int r = mkdir(survivors_path, 0700);
    if (r != 0 && errno != EEXIST) r = -errno; else r = dump(root_node, survivors_path);
    if (r) {
        snprintf(text, sizeof text, "error writing the survivors: %s\n", strerror(-r));
    } else {
        snprintf(text, sizeof text, "ok files %lu directories %lu links %lu torn %lu; since mount: writes %lu (%llu bytes), direct writes %lu, fsyncs %lu (%llu bytes made durable), directory fsyncs %lu, creates %lu, mkdirs %lu, renames %lu, links %lu, unlinks %lu, fallocates %lu; cut by %s\n",
                 dumped_files, dumped_dirs, dumped_links, torn_files, stats.writes, stats.bytes_written, stats.direct_writes, stats.fsyncs, stats.bytes_synced, stats.fsyncdirs,
                 stats.creates, stats.mkdirs, stats.renames, stats.links, stats.unlinks, stats.fallocates, cause);
    }
    write_marker(text);
    fputs(text, stderr);
}

static void cut_power(void) {
    pthread_mutex_lock(&big_lock);
    cut_locked("a signal");
    pthread_mutex_unlock(&big_lock);
}

// POWERCUT_AT="OP:TEXT:N": cut right after the N-th successful OP (create, mkdir, write,
// truncate, fsync, fsyncdir, rename, link, unlink) on a path containing TEXT (for rename
// and link, the new name). A cut at a chosen instant, where a random one rarely lands.
static char trigger_op[32], trigger_text[256];
static int trigger_n, trigger_count;

static void parse_trigger(void) {
    const char *spec = getenv("POWERCUT_AT");
    if (!spec || !*spec) return;
    const char *a = strchr(spec, ':'), *b = a ? strrchr(spec, ':') : NULL;
    if (!a || b == a) { fprintf(stderr, "powercutfs: POWERCUT_AT must be OP:TEXT:N\n"); exit(64); }
    snprintf(trigger_op, sizeof trigger_op, "%.*s", (int)(a - spec), spec);
    snprintf(trigger_text, sizeof trigger_text, "%.*s", (int)(b - a - 1), a + 1);
    trigger_n = atoi(b + 1);
    if (trigger_n < 1) trigger_n = 1;
}

static void after(const char *op, const char *path) {
    if (!trigger_op[0] || power_cut || !path || strcmp(op, trigger_op) || !strstr(path, trigger_text)) return;
    if (++trigger_count < trigger_n) return;
    char cause[512];
    snprintf(cause, sizeof cause, "%s %s", op, path);
    cut_locked(cause);
}

static void on_sigusr1(int sig) {
    (void)sig;
    char c = 'c';
    ssize_t ignored = write(cut_pipe[1], &c, 1);
    (void)ignored;
}

static void *cut_thread(void *arg) {
    (void)arg;
    char c;
    for (;;) {
        ssize_t r = read(cut_pipe[0], &c, 1);
        if (r == 1) cut_power();
        else if (r < 0 && errno == EINTR) continue;
        else return NULL;
    }
}

// ---- operations -------------------------------------------------------------------------

#define ENTER() pthread_mutex_lock(&big_lock); if (power_cut) { pthread_mutex_unlock(&big_lock); return -EIO; }
#define LEAVE(value) do { int leave_value = (value); pthread_mutex_unlock(&big_lock); return leave_value; } while (0)

// After a name was made: a new node for the new file.
static void made(const char *path) {
    struct stat st;
    if (fstatat(backing_fd, rel(path), &st, AT_SYMLINK_NOFOLLOW) == 0) set_path(new_node(&st), path);
}

static void *pc_init(struct fuse_conn_info *conn, struct fuse_config *cfg) {
    (void)conn;
    cfg->use_ino = 1;
    cfg->hard_remove = 1;
    cfg->nullpath_ok = 1;
    cfg->kernel_cache = 0;
    pthread_t thread;
    pthread_create(&thread, NULL, cut_thread, NULL);
    pthread_detach(thread);
    return NULL;
}

static int pc_getattr(const char *path, struct stat *st, struct fuse_file_info *fi) {
    ENTER();
    int r = fi ? fstat((int)fi->fh, st) : fstatat(backing_fd, rel(path), st, AT_SYMLINK_NOFOLLOW);
    LEAVE(r ? -errno : 0);
}

static int pc_access(const char *path, int mask) {
    ENTER();
    LEAVE(faccessat(backing_fd, rel(path), mask, AT_SYMLINK_NOFOLLOW) ? -errno : 0);
}

static int pc_readlink(const char *path, char *buf, size_t size) {
    ENTER();
    ssize_t len = readlinkat(backing_fd, rel(path), buf, size - 1);
    if (len < 0) LEAVE(-errno);
    buf[len] = 0;
    LEAVE(0);
}

static int pc_mknod(const char *path, mode_t mode, dev_t rdev) {
    ENTER();
    if (mknodat(backing_fd, rel(path), mode, rdev) != 0) LEAVE(-errno);
    made(path);
    stats.creates++;
    after("create", path);
    LEAVE(0);
}

static int pc_mkdir(const char *path, mode_t mode) {
    ENTER();
    if (mkdirat(backing_fd, rel(path), mode) != 0) LEAVE(-errno);
    made(path);
    stats.mkdirs++;
    after("mkdir", path);
    LEAVE(0);
}

static int pc_symlink(const char *target, const char *path) {
    ENTER();
    if (symlinkat(target, backing_fd, rel(path)) != 0) LEAVE(-errno);
    struct stat st;
    if (fstatat(backing_fd, rel(path), &st, AT_SYMLINK_NOFOLLOW) == 0) new_node(&st)->target = strdup(target);
    stats.creates++;
    LEAVE(0);
}

static int pc_unlink(const char *path) {
    ENTER();
    stats.unlinks++;
    if (unlinkat(backing_fd, rel(path), 0) != 0) LEAVE(-errno);
    after("unlink", path);
    LEAVE(0);
}

static int pc_rmdir(const char *path) {
    ENTER();
    LEAVE(unlinkat(backing_fd, rel(path), AT_REMOVEDIR) ? -errno : 0);
}

static int pc_rename(const char *from, const char *to, unsigned int flags) {
    ENTER();
    stats.renames++;
    if (syscall(SYS_renameat2, backing_fd, rel(from), backing_fd, rel(to), flags) != 0) LEAVE(-errno);
    struct stat st;
    if (fstatat(backing_fd, rel(to), &st, AT_SYMLINK_NOFOLLOW) == 0) set_path(map_get(st.st_ino), to);
    after("rename", to);
    LEAVE(0);
}

static int pc_link(const char *from, const char *to) {
    ENTER();
    stats.links++;
    if (linkat(backing_fd, rel(from), backing_fd, rel(to), 0) != 0) LEAVE(-errno);
    after("link", to);
    LEAVE(0);
}

static int pc_chmod(const char *path, mode_t mode, struct fuse_file_info *fi) {
    ENTER();
    int r = fi ? fchmod((int)fi->fh, mode) : fchmodat(backing_fd, rel(path), mode, 0);
    if (r) LEAVE(-errno);
    struct stat st;
    if ((fi ? fstat((int)fi->fh, &st) : fstatat(backing_fd, rel(path), &st, AT_SYMLINK_NOFOLLOW)) == 0)
        node_for_stat(&st)->mode = st.st_mode;
    LEAVE(0);
}

static int pc_chown(const char *path, uid_t uid, gid_t gid, struct fuse_file_info *fi) {
    ENTER();
    int r = fi ? fchown((int)fi->fh, uid, gid) : fchownat(backing_fd, rel(path), uid, gid, AT_SYMLINK_NOFOLLOW);
    LEAVE(r ? -errno : 0);
}

static int pc_truncate(const char *path, off_t size, struct fuse_file_info *fi) {
    ENTER();
    int fd = fi ? (int)fi->fh : openat(backing_fd, rel(path), O_WRONLY);
    if (fd < 0) LEAVE(-errno);
    int r = ftruncate(fd, size) ? -errno : 0;
    struct node *n = r ? NULL : node_for_fd(fd);
    if (n) mark_dirty(n, size, INF_OFF);
    if (!fi) close(fd);
    if (n) after("truncate", n->path);
    LEAVE(r);
}

static int pc_utimens(const char *path, const struct timespec tv[2], struct fuse_file_info *fi) {
    ENTER();
    int r = fi ? futimens((int)fi->fh, tv) : utimensat(backing_fd, rel(path), tv, AT_SYMLINK_NOFOLLOW);
    LEAVE(r ? -errno : 0);
}

static int open_common(const char *path, struct fuse_file_info *fi, int creating, mode_t mode) {
    int existed = 1;
    struct stat before;
    if (creating) existed = fstatat(backing_fd, rel(path), &before, AT_SYMLINK_NOFOLLOW) == 0;
    // The backing file is written through its page cache: the FUSE buffers a direct write
    // arrives in are not aligned for O_DIRECT, and the model, not the backing disk, says what
    // a cut keeps.
    int flags = fi->flags & ~O_DIRECT;
    int fd = creating ? openat(backing_fd, rel(path), flags | O_CREAT, mode) : openat(backing_fd, rel(path), flags);
    if (fd < 0) return -errno;
    fi->fh = (uint64_t)fd;
    if (creating && !existed) {
        struct stat st;
        if (fstat(fd, &st) == 0) set_path(new_node(&st), path);
        stats.creates++;
        after("create", path);
    } else {
        struct node *n = node_for_fd(fd);
        set_path(n, path);
        if (n && (fi->flags & O_TRUNC)) mark_dirty(n, 0, INF_OFF);
    }
    return 0;
}

static int pc_open(const char *path, struct fuse_file_info *fi) {
    ENTER();
    LEAVE(open_common(path, fi, 0, 0));
}

static int pc_create(const char *path, mode_t mode, struct fuse_file_info *fi) {
    ENTER();
    LEAVE(open_common(path, fi, 1, mode));
}

static int pc_read(const char *path, char *buf, size_t size, off_t off, struct fuse_file_info *fi) {
    (void)path;
    ENTER();
    ssize_t r = pread((int)fi->fh, buf, size, off);
    LEAVE(r < 0 ? -errno : (int)r);
}

static int refuse_direct; // POWERCUT_REFUSE_DIRECT=1

static int pc_write(const char *path, const char *buf, size_t size, off_t off, struct fuse_file_info *fi) {
    (void)path;
    ENTER();
    int fd = (int)fi->fh;
    if ((fi->flags & O_DIRECT) && refuse_direct) LEAVE(-EINVAL);
    if (fi->flags & O_DIRECT) stats.direct_writes++;
    if (fi->flags & O_APPEND) { // the backing descriptor appends wherever the kernel thought the end was
        struct stat st;
        if (fstat(fd, &st) != 0) LEAVE(-errno);
        off = st.st_size;
    }
    ssize_t r = pwrite(fd, buf, size, off);
    if (r < 0) LEAVE(-errno);
    struct node *n = node_for_fd(fd);
    if (n) mark_dirty(n, off, off + r);
    stats.writes++;
    stats.bytes_written += (unsigned long long)r;
    if (n) after("write", n->path);
    LEAVE((int)r);
}

static int pc_fallocate(const char *path, int mode, off_t off, off_t len, struct fuse_file_info *fi) {
    (void)path;
    ENTER();
    if (fallocate((int)fi->fh, mode, off, len) != 0) LEAVE(-errno);
    stats.fallocates++;
    struct node *n = node_for_fd((int)fi->fh);
    if (n) mark_dirty(n, off, INF_OFF);
    LEAVE(0);
}

static int pc_statfs(const char *path, struct statvfs *st) {
    (void)path;
    ENTER();
    LEAVE(fstatvfs(backing_fd, st) ? -errno : 0);
}

static int pc_flush(const char *path, struct fuse_file_info *fi) {
    (void)path; (void)fi;
    ENTER();
    LEAVE(0);
}

static int pc_release(const char *path, struct fuse_file_info *fi) {
    (void)path;
    close((int)fi->fh); // even after the cut: descriptors must not leak
    return 0;
}

static int pc_fsync(const char *path, int datasync, struct fuse_file_info *fi) {
    (void)path;
    ENTER();
    int fd = (int)fi->fh;
    (void)datasync; // the model is the disk: the backing file system need not sync
    struct node *n = node_for_fd(fd);
    if (!n) LEAVE(-EIO);
    stats.fsyncs++;
    int r = S_ISDIR(n->mode) ? sync_dir(n, fd) : sync_file(n, fd); // a directory opened with open(2) too
    if (!r) after(S_ISDIR(n->mode) ? "fsyncdir" : "fsync", n->path);
    LEAVE(r);
}

static int pc_opendir(const char *path, struct fuse_file_info *fi) {
    ENTER();
    int fd = openat(backing_fd, rel(path), O_RDONLY | O_DIRECTORY);
    if (fd < 0) LEAVE(-errno);
    fi->fh = (uint64_t)fd;
    set_path(node_for_fd(fd), path);
    LEAVE(0);
}

static int pc_readdir(const char *path, void *buf, fuse_fill_dir_t filler, off_t off, struct fuse_file_info *fi, enum fuse_readdir_flags flags) {
    (void)path; (void)off; (void)flags;
    ENTER();
    int fd = dup((int)fi->fh);
    if (fd < 0) LEAVE(-errno);
    DIR *d = fdopendir(fd);
    if (!d) { int e = errno; close(fd); LEAVE(-e); }
    rewinddir(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        struct stat st;
        memset(&st, 0, sizeof st);
        st.st_ino = e->d_ino;
        st.st_mode = (mode_t)(e->d_type << 12);
        if (filler(buf, e->d_name, &st, 0, 0)) break;
    }
    closedir(d);
    LEAVE(0);
}

static int pc_releasedir(const char *path, struct fuse_file_info *fi) {
    (void)path;
    close((int)fi->fh);
    return 0;
}

static int pc_fsyncdir(const char *path, int datasync, struct fuse_file_info *fi) {
    (void)path; (void)datasync;
    ENTER();
    int fd = (int)fi->fh;
    struct node *n = node_for_fd(fd);
    if (!n) LEAVE(-EIO);
    stats.fsyncdirs++;
    int r = sync_dir(n, fd);
    if (!r) after("fsyncdir", n->path);
    LEAVE(r);
}

static const struct fuse_operations operations = {
    .init = pc_init,
    .getattr = pc_getattr,
    .access = pc_access,
    .readlink = pc_readlink,
    .mknod = pc_mknod,
    .mkdir = pc_mkdir,
    .symlink = pc_symlink,
    .unlink = pc_unlink,
    .rmdir = pc_rmdir,
    .rename = pc_rename,
    .link = pc_link,
    .chmod = pc_chmod,
    .chown = pc_chown,
    .truncate = pc_truncate,
    .utimens = pc_utimens,
    .open = pc_open,
    .create = pc_create,
    .read = pc_read,
    .write = pc_write,
    .fallocate = pc_fallocate,
    .statfs = pc_statfs,
    .flush = pc_flush,
    .release = pc_release,
    .fsync = pc_fsync,
    .opendir = pc_opendir,
    .readdir = pc_readdir,
    .releasedir = pc_releasedir,
    .fsyncdir = pc_fsyncdir,
    // no .flock / .lock: the kernel keeps locks locally, which is all one machine needs
};

int main(int argc, char *argv[]) {
    if (argc < 5) {
        fprintf(stderr, "usage: powercutfs BACKING SURVIVORS MARKER MOUNTPOINT [FUSE options]\n");
        return 64;
    }
    backing_path = argv[1];
    survivors_path = argv[2];
    marker_path = argv[3];
    parse_trigger();
    torn_mode = getenv("POWERCUT_TORN");
    refuse_direct = getenv("POWERCUT_REFUSE_DIRECT") && strcmp(getenv("POWERCUT_REFUSE_DIRECT"), "1") == 0;
    if (torn_mode && !*torn_mode) torn_mode = NULL;
    if (getenv("POWERCUT_SEED")) torn_state ^= strtoull(getenv("POWERCUT_SEED"), NULL, 10) * 0x100000001b3ull;
    backing_fd = open(backing_path, O_RDONLY | O_DIRECTORY);
    if (backing_fd < 0) { perror(backing_path); return 66; }
    struct stat st;
    fstat(backing_fd, &st);
    root_node = new_node(&st);
    int r = load_tree(backing_fd, root_node);
    if (r) { fprintf(stderr, "powercutfs: cannot read %s: %s\n", backing_path, strerror(-r)); return 66; }
    umask(0);
    // A parent may have spawned us with signals blocked (a thread's mask is inherited):
    // SIGUSR1 (the cut) and SIGTERM (the end) must get through.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    if (pipe(cut_pipe) != 0) { perror("pipe"); return 71; }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigusr1;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, NULL);

    // fuse_main(mountpoint, -f, -s, the caller's options)
    char **args = calloc((size_t)argc + 4, sizeof *args);
    int n = 0;
    args[n++] = argv[0];
    args[n++] = argv[4];
    args[n++] = "-f";
    args[n++] = "-s";
    for (int i = 5; i < argc; i++) args[n++] = argv[i];
    args[n] = NULL;
    return fuse_main(n, args, &operations, NULL);
}
