/*
 * An fsync fault shim for the fault tests (crates/fermata/tests/it/faults.rs), loaded with
 * LD_PRELOAD into the process under test: fermata itself (SQLite runs inside it) or a
 * PostgreSQL server.
 *
 * While the file named by FERMATA_FSYNC_CONTROL holds "fail", fsync, fdatasync and
 * sync_file_range fail with EIO without syncing, as a disk that lost a write reports it; while
 * it holds "slow N", each sleeps N milliseconds and then syncs; otherwise (no variable, no file,
 * anything else) they pass straight through. The file is read on every call, so the test
 * switches the fault on and off while the process runs. Each call it failed or slowed appends a
 * line ("fail" or "slow") to the file named by FERMATA_FSYNC_HITS, if set, so the test can tell
 * that the fault reached the process rather than pass because the shim was never called.
 *
 * Built by the tests with `gcc -shared -fPIC -o fsync_shim.so fsync_shim.c -ldl`.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

enum verdict { PASS, FAIL, SLOW };

/* Appends `what` to the hits file; errors are ignored, the shim must not fail on its own. */
static void record(const char *what)
{
    const char *path = getenv("FERMATA_FSYNC_HITS");
    if (path == NULL)
        return;
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0)
        return;
    ssize_t ignored = write(fd, what, strlen(what));
    (void)ignored;
    close(fd);
}

/* Reads the control file; sleeps here when it says "slow N". Keeps the caller's errno. */
static enum verdict decide(void)
{
    int saved = errno;
    enum verdict verdict = PASS;
    const char *path = getenv("FERMATA_FSYNC_CONTROL");
    int fd = path == NULL ? -1 : open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        char text[64];
        ssize_t count = read(fd, text, sizeof text - 1);
        close(fd);
        if (count > 0) {
            text[count] = '\0';
            if (strncmp(text, "fail", 4) == 0) {
                verdict = FAIL;
                record("fail\n");
            } else if (strncmp(text, "slow", 4) == 0) {
                long ms = strtol(text + 4, NULL, 10);
                struct timespec wait = { ms / 1000, (ms % 1000) * 1000000L };
                while (nanosleep(&wait, &wait) == -1 && errno == EINTR)
                    ;
                verdict = SLOW;
                record("slow\n");
            }
        }
    }
    errno = saved;
    return verdict;
}

int fsync(int fd)
{
    static int (*real)(int);
    if (real == NULL)
        real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    if (decide() == FAIL) {
        errno = EIO;
        return -1;
    }
    return real(fd);
}

int fdatasync(int fd)
{
    static int (*real)(int);
    if (real == NULL)
        real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    if (decide() == FAIL) {
        errno = EIO;
        return -1;
    }
    return real(fd);
}

/* PostgreSQL asks the kernel to start writing back with it, and treats its failure as a
 * failed fsync. */
int sync_file_range(int fd, off64_t offset, off64_t nbytes, unsigned int flags)
{
    static int (*real)(int, off64_t, off64_t, unsigned int);
    if (real == NULL)
        real = (int (*)(int, off64_t, off64_t, unsigned int))dlsym(RTLD_NEXT, "sync_file_range");
    if (decide() == FAIL) {
        errno = EIO;
        return -1;
    }
    return real(fd, offset, nbytes, flags);
}
