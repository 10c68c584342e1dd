/*
 * kernelgrader's sanitizer launcher: the program compute-sanitizer watches, without Python.
 *
 *   kg-sanitizer-launcher JOB_FIFO READY RESULT HELD GATE LOCK USERS
 *   kg-sanitizer-launcher --describe JOB_FILE        (what a job holds, as JSON; no GPU)
 *
 * It declares the few CUDA driver functions it calls and loads libcuda.so.1 when it runs, so it
 * builds with a C compiler alone (graders/sanitizer/launcher.py builds it; no CUDA headers).
 * Under a tool it: holds the GPU's lock shared (GATE, LOCK: graders/timing/lock.py's files;
 * its pid goes into USERS) while it makes its context and bounds the printf buffer; says it is
 * ready (the file READY); reads its job from JOB_FIFO (EOF without a job: it exits); loads the
 * submission's cubin (cuModuleLoadData); allocates the case's buffers in the job's order, each
 * after its spacer, exactly as the graded run does (graders/sanitizer/job.py writes the job
 * from the same plan as graders/run/buffers.py); takes the lock again (touching HELD once it
 * holds it), copies the data, launches the lab's launches, waits up to the job's limit, and
 * writes how it ended to RESULT as JSON: {"verdict": "ok" | "timeout" | "cuda_error",
 * "error": a CUresult's name, "where": ..., "load_s", "wait_s", "held_s", "cpu_s"}.
 *
 * It dies with the sanitizer's child: by a parent-death signal, and by the lifeline the child
 * names in KERNELGRADER_LIFELINE (graders/sandbox/lifeline.py: SIGKILL to this process group
 * from the kernel once the child's end of the FIFO closes).
 *
 * The job (little-endian, every field 8 bytes, every byte string padded to 8):
 *   "KGJOB001" timeout_ms printf_fifo_bytes
 *   cubin: len bytes
 *   kernels: n, then each: len bytes (a name)
 *   buffers: n, then each in allocation order: spacer_bytes nbytes fill(0 none, 1 data,
 *            2 a pattern repeated) len bytes
 *   launches: n, then each: kernel grid_x grid_y grid_z block_x block_y block_z shared n_args,
 *            then each argument: kind(0 a buffer's address, 1 a value) then index | len bytes
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef unsigned long long CUdeviceptr;

#define CUDA_SUCCESS 0
#define CUDA_ERROR_NOT_READY 600
#define CU_LIMIT_PRINTF_FIFO_SIZE 1
#define CU_EVENT_DISABLE_TIMING 2
#define JOB_LIMIT (1ULL << 32)
#define MAX_ITEMS 4096
#define SPARE_ARGS 16

static struct {
    CUresult (*Init)(unsigned int);
    CUresult (*DeviceGet)(CUdevice *, int);
    CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*CtxSetCurrent)(CUcontext);
    CUresult (*CtxSetLimit)(int, size_t);
    CUresult (*ModuleLoadData)(CUmodule *, const void *);
    CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
    CUresult (*MemAlloc)(CUdeviceptr *, size_t);
    CUresult (*MemcpyHtoD)(CUdeviceptr, const void *, size_t);
    CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, unsigned, CUstream, void **, void **);
    CUresult (*EventCreate)(CUevent *, unsigned int);
    CUresult (*EventRecord)(CUevent, CUstream);
    CUresult (*EventQuery)(CUevent);
    CUresult (*CtxSynchronize)(void);
    CUresult (*GetErrorName)(CUresult, const char **);
} cu;

/* --- the job ------------------------------------------------------------------------------ */

typedef struct {
    const uint8_t *data;
    uint64_t len;
} Bytes;

typedef struct {
    uint64_t spacer, nbytes, fill;
    Bytes bytes;
} Buffer;

typedef struct {
    uint64_t kind; /* 0: a buffer's address, 1: a value */
    uint64_t index;
    Bytes value;
} Arg;

typedef struct {
    uint64_t kernel, grid[3], block[3], shared, n_args;
    Arg *args;
} Launch;

typedef struct {
    uint64_t timeout_ms, printf_fifo;
    Bytes cubin;
    uint64_t n_kernels, n_buffers, n_launches;
    Bytes *kernels;
    Buffer *buffers;
    Launch *launches;
} Job;

typedef struct {
    const uint8_t *at, *end;
    int bad;
} Reader;

static uint64_t u64(Reader *r) {
    uint64_t v = 0;
    if (r->bad || r->end - r->at < 8) {
        r->bad = 1;
        return 0;
    }
    for (int i = 7; i >= 0; i--) v = (v << 8) | r->at[i];
    r->at += 8;
    return v;
}

static Bytes bytes(Reader *r) {
    Bytes b = {0, 0};
    uint64_t len = u64(r), padded = (len + 7) & ~7ULL;
    if (r->bad || len > JOB_LIMIT || (uint64_t)(r->end - r->at) < padded) {
        r->bad = 1;
        return b;
    }
    b.data = r->at;
    b.len = len;
    r->at += padded;
    return b;
}

static uint64_t count(Reader *r) {
    uint64_t n = u64(r);
    if (n > MAX_ITEMS) r->bad = 1;
    return r->bad ? 0 : n;
}

static int parse(const uint8_t *data, size_t size, Job *job) {
    Reader r = {data, data + size, 0};
    memset(job, 0, sizeof *job);
    if (size < 8 || memcmp(data, "KGJOB001", 8) != 0) return -1;
    r.at += 8;
    job->timeout_ms = u64(&r);
    job->printf_fifo = u64(&r);
    job->cubin = bytes(&r);
    job->n_kernels = count(&r);
    job->kernels = calloc(job->n_kernels + 1, sizeof(Bytes));
    for (uint64_t i = 0; i < job->n_kernels; i++) job->kernels[i] = bytes(&r);
    job->n_buffers = count(&r);
    job->buffers = calloc(job->n_buffers + 1, sizeof(Buffer));
    for (uint64_t i = 0; i < job->n_buffers; i++) {
        Buffer *b = &job->buffers[i];
        b->spacer = u64(&r);
        b->nbytes = u64(&r);
        b->fill = u64(&r);
        b->bytes = bytes(&r);
        if (b->fill > 2 || (b->fill == 1 && b->bytes.len != b->nbytes) ||
            (b->fill == 2 && (b->bytes.len == 0 || b->nbytes % b->bytes.len)))
            r.bad = 1;
    }
    job->n_launches = count(&r);
    job->launches = calloc(job->n_launches + 1, sizeof(Launch));
    for (uint64_t i = 0; i < job->n_launches && !r.bad; i++) {
        Launch *l = &job->launches[i];
        l->kernel = u64(&r);
        for (int k = 0; k < 3; k++) l->grid[k] = u64(&r);
        for (int k = 0; k < 3; k++) l->block[k] = u64(&r);
        l->shared = u64(&r);
        l->n_args = count(&r);
        l->args = calloc(l->n_args + 1, sizeof(Arg));
        for (uint64_t a = 0; a < l->n_args; a++) {
            Arg *arg = &l->args[a];
            arg->kind = u64(&r);
            if (arg->kind == 0) {
                arg->index = u64(&r);
                if (arg->index >= job->n_buffers) r.bad = 1;
            } else if (arg->kind == 1) {
                arg->value = bytes(&r);
            } else {
                r.bad = 1;
            }
        }
        if (l->kernel >= job->n_kernels) r.bad = 1;
    }
    if (r.at != r.end) r.bad = 1;
    return r.bad ? -1 : 0;
}

static uint8_t *read_all(int fd, size_t *size) {
    size_t cap = 1 << 16, len = 0;
    uint8_t *buf = malloc(cap);
    while (buf) {
        if (len == cap) {
            if (cap >= JOB_LIMIT) break;
            uint8_t *more = realloc(buf, cap * 2);
            if (!more) break;
            buf = more;
            cap *= 2;
        }
        ssize_t got = read(fd, buf + len, cap - len);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) {
            *size = len;
            return buf;
        }
        len += (size_t)got;
    }
    free(buf);
    *size = 0;
    return NULL;
}

/* FNV-1a, so a test can tell the data it encoded from what was parsed. */
static uint64_t digest(Bytes b) {
    uint64_t h = 1469598103934665603ULL;
    for (uint64_t i = 0; i < b.len; i++) h = (h ^ b.data[i]) * 1099511628211ULL;
    return h;
}

static void print_hex(FILE *f, Bytes b) {
    for (uint64_t i = 0; i < b.len; i++) fprintf(f, "%02x", b.data[i]);
}

static int describe(const char *path) {
    int fd = open(path, O_RDONLY);
    size_t size = 0;
    uint8_t *data = fd >= 0 ? read_all(fd, &size) : NULL;
    Job job;
    if (!data || parse(data, size, &job) != 0) {
        printf("{\"error\": \"not a job\"}\n");
        return 1;
    }
    printf("{\"timeout_ms\": %llu, \"printf_fifo\": %llu, \"cubin_bytes\": %llu, ",
           (unsigned long long)job.timeout_ms, (unsigned long long)job.printf_fifo,
           (unsigned long long)job.cubin.len);
    printf("\"cubin_digest\": \"%016llx\", \"kernels\": [", (unsigned long long)digest(job.cubin));
    for (uint64_t i = 0; i < job.n_kernels; i++)
        printf("%s\"%.*s\"", i ? ", " : "", (int)job.kernels[i].len, job.kernels[i].data);
    printf("], \"buffers\": [");
    for (uint64_t i = 0; i < job.n_buffers; i++) {
        Buffer *b = &job.buffers[i];
        printf("%s{\"spacer\": %llu, \"bytes\": %llu, \"fill\": %llu, \"digest\": \"%016llx\"}",
               i ? ", " : "", (unsigned long long)b->spacer, (unsigned long long)b->nbytes,
               (unsigned long long)b->fill, (unsigned long long)digest(b->bytes));
    }
    printf("], \"launches\": [");
    for (uint64_t i = 0; i < job.n_launches; i++) {
        Launch *l = &job.launches[i];
        printf("%s{\"kernel\": %llu, \"grid\": [%llu, %llu, %llu], \"block\": [%llu, %llu, %llu], "
               "\"shared\": %llu, \"args\": [",
               i ? ", " : "", (unsigned long long)l->kernel, (unsigned long long)l->grid[0],
               (unsigned long long)l->grid[1], (unsigned long long)l->grid[2],
               (unsigned long long)l->block[0], (unsigned long long)l->block[1],
               (unsigned long long)l->block[2], (unsigned long long)l->shared);
        for (uint64_t a = 0; a < l->n_args; a++) {
            Arg *arg = &l->args[a];
            if (arg->kind == 0) {
                printf("%s{\"buffer\": %llu}", a ? ", " : "", (unsigned long long)arg->index);
            } else {
                printf("%s{\"value\": \"", a ? ", " : "");
                print_hex(stdout, arg->value);
                printf("\"}");
            }
        }
        printf("]}");
    }
    printf("]}\n");
    return 0;
}

/* --- the process ---------------------------------------------------------------------------- */

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static double cpu_s(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_utime.tv_sec + (double)u.ru_utime.tv_usec / 1e6 +
           (double)u.ru_stime.tv_sec + (double)u.ru_stime.tv_usec / 1e6;
}

static void hold_lifeline(void) {
    const char *named = getenv("KERNELGRADER_LIFELINE");
    if (!named || !*named) return;
    int fd = open(named, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return;
    fcntl(fd, F_SETOWN, -getpgrp());
    fcntl(fd, F_SETSIG, SIGKILL);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_ASYNC | O_NONBLOCK);
    char c;
    if (read(fd, &c, 1) == 0) killpg(getpgrp(), SIGKILL); /* its holder is gone already */
}

static void touch(const char *path) {
    int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0666);
    if (fd >= 0) close(fd);
}

/* graders/timing/lock.py's shared hold: through the gate, then the lock shared; this pid among
 * the lock's users. Returns the lock's descriptor (-1: no lock files; it goes on without). */
static int lock_shared(const char *gate, const char *lock, const char *users) {
    int g = open(gate, O_RDONLY | O_CLOEXEC), l = open(lock, O_RDONLY | O_CLOEXEC);
    if (g < 0 || l < 0) {
        if (g >= 0) close(g);
        if (l >= 0) close(l);
        return -1;
    }
    while (flock(g, LOCK_EX) != 0 && errno == EINTR) {
    }
    while (flock(l, LOCK_SH) != 0 && errno == EINTR) {
    }
    flock(g, LOCK_UN);
    close(g);
    char mine[4096];
    mkdir(users, 01777);
    snprintf(mine, sizeof mine, "%s/%d", users, (int)getpid());
    touch(mine);
    return l;
}

static void unlock(int fd) {
    if (fd >= 0) {
        flock(fd, LOCK_UN);
        close(fd);
    }
}

static const char *error_name(CUresult status) {
    const char *name = NULL;
    if (cu.GetErrorName && cu.GetErrorName(status, &name) == CUDA_SUCCESS && name) return name;
    return "CUDA_ERROR_UNKNOWN";
}

static double marks[4]; /* start, loaded, lock held, done */
static int held_lock = -1; /* the job's shared hold of the GPU's lock, let go when it ends */

static void finish(const char *result, const char *verdict, const char *error, const char *where) {
    /* Let go first: a kernel left hung past its limit holds no timed section up while the
     * tool is stopped (the Python program let go the same way). */
    unlock(held_lock);
    held_lock = -1;
    FILE *f = fopen(result, "w");
    if (!f) return;
    double end = now_s();
    double loaded = marks[1] ? marks[1] : end, held = marks[2] ? marks[2] : end;
    fprintf(f,
            "{\"verdict\": \"%s\", \"error\": \"%s\", \"where\": \"%s\", \"load_s\": %.3f, "
            "\"wait_s\": %.3f, \"held_s\": %.3f, \"cpu_s\": %.3f}\n",
            verdict, error, where, loaded - marks[0], held - loaded, end - held, cpu_s());
    fclose(f);
}

static int load_driver(void) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib) return -1;
#define SYM(field, name)                                  \
    *(void **)(&cu.field) = dlsym(lib, name);             \
    if (!cu.field) return -1;
    SYM(Init, "cuInit")
    SYM(DeviceGet, "cuDeviceGet")
    SYM(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain")
    SYM(CtxSetCurrent, "cuCtxSetCurrent")
    SYM(CtxSetLimit, "cuCtxSetLimit")
    SYM(ModuleLoadData, "cuModuleLoadData")
    SYM(ModuleGetFunction, "cuModuleGetFunction")
    SYM(MemAlloc, "cuMemAlloc_v2")
    SYM(MemcpyHtoD, "cuMemcpyHtoD_v2")
    SYM(LaunchKernel, "cuLaunchKernel")
    SYM(EventCreate, "cuEventCreate")
    SYM(EventRecord, "cuEventRecord")
    SYM(EventQuery, "cuEventQuery")
    SYM(CtxSynchronize, "cuCtxSynchronize")
    SYM(GetErrorName, "cuGetErrorName")
#undef SYM
    return 0;
}

#define CHECK(call, where)                                              \
    do {                                                                \
        CUresult status_ = (call);                                      \
        if (status_ != CUDA_SUCCESS) {                                  \
            finish(result, "cuda_error", error_name(status_), where);   \
            return 0;                                                   \
        }                                                               \
    } while (0)

static int run(const Job *job, const char *result, const char *held, const char *gate,
               const char *lockfile, const char *users) {
    CUmodule module;
    CHECK(cu.ModuleLoadData(&module, job->cubin.data), "load");
    CUfunction *funcs = calloc(job->n_kernels + 1, sizeof(CUfunction));
    for (uint64_t i = 0; i < job->n_kernels; i++) {
        char name[1024];
        snprintf(name, sizeof name, "%.*s", (int)job->kernels[i].len, job->kernels[i].data);
        CHECK(cu.ModuleGetFunction(&funcs[i], module, name), "load");
    }
    CUdeviceptr *ptrs = calloc(job->n_buffers + 1, sizeof(CUdeviceptr));
    for (uint64_t i = 0; i < job->n_buffers; i++) {
        CUdeviceptr spacer = 0;
        if (job->buffers[i].spacer) CHECK(cu.MemAlloc(&spacer, job->buffers[i].spacer), "alloc");
        if (job->buffers[i].nbytes) CHECK(cu.MemAlloc(&ptrs[i], job->buffers[i].nbytes), "alloc");
    }
    marks[1] = now_s();
    held_lock = lock_shared(gate, lockfile, users);
    marks[2] = now_s();
    touch(held);
    for (uint64_t i = 0; i < job->n_buffers; i++) {
        const Buffer *b = &job->buffers[i];
        if (b->fill == 1) {
            CHECK(cu.MemcpyHtoD(ptrs[i], b->bytes.data, b->nbytes), "copy");
        } else if (b->fill == 2) {
            /* The sentinel, made on the host and copied: no kernel runs before the launch. */
            uint8_t *filled = malloc(b->nbytes);
            if (!filled) {
                finish(result, "cuda_error", "CUDA_ERROR_OUT_OF_MEMORY", "copy");
                return 0;
            }
            for (uint64_t at = 0; at < b->nbytes; at += b->bytes.len)
                memcpy(filled + at, b->bytes.data, b->bytes.len);
            CHECK(cu.MemcpyHtoD(ptrs[i], filled, b->nbytes), "copy");
            free(filled);
        }
    }
    static uint8_t zeros[64];
    for (uint64_t i = 0; i < job->n_launches; i++) {
        const Launch *l = &job->launches[i];
        void **params = calloc(l->n_args + SPARE_ARGS, sizeof(void *));
        uint8_t **values = calloc(l->n_args + 1, sizeof(uint8_t *));
        for (uint64_t a = 0; a < l->n_args + SPARE_ARGS; a++) params[a] = zeros;
        for (uint64_t a = 0; a < l->n_args; a++) {
            const Arg *arg = &l->args[a];
            uint64_t len = arg->kind == 0 ? sizeof(CUdeviceptr) : arg->value.len;
            /* Room past the value: a kernel that declares a wider parameter reads zeros. */
            values[a] = calloc(1, len + 64);
            if (arg->kind == 0)
                memcpy(values[a], &ptrs[arg->index], sizeof(CUdeviceptr));
            else
                memcpy(values[a], arg->value.data, len);
            params[a] = values[a];
        }
        CHECK(cu.LaunchKernel(funcs[l->kernel], (unsigned)l->grid[0], (unsigned)l->grid[1],
                              (unsigned)l->grid[2], (unsigned)l->block[0], (unsigned)l->block[1],
                              (unsigned)l->block[2], (unsigned)l->shared, NULL, params, NULL),
              "launch");
    }
    CUevent done;
    CHECK(cu.EventCreate(&done, CU_EVENT_DISABLE_TIMING), "wait");
    CHECK(cu.EventRecord(done, NULL), "wait");
    double deadline = now_s() + (double)job->timeout_ms / 1000.0;
    for (;;) {
        CUresult status = cu.EventQuery(done);
        if (status == CUDA_SUCCESS) break;
        if (status != CUDA_ERROR_NOT_READY) {
            finish(result, "cuda_error", error_name(status), "wait");
            return 0;
        }
        if (now_s() > deadline) {
            finish(result, "timeout", "", "wait");
            return 0; /* the kernel still runs: the tool ends with the process, or is killed */
        }
        struct timespec pause = {0, 200000};
        nanosleep(&pause, NULL);
    }
    CHECK(cu.CtxSynchronize(), "wait");
    finish(result, "ok", "", "");
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--describe") == 0) return describe(argv[2]);
    if (argc != 8) {
        fprintf(stderr, "usage: %s JOB_FIFO READY RESULT HELD GATE LOCK USERS\n", argv[0]);
        return 2;
    }
    const char *fifo = argv[1], *ready = argv[2], *result = argv[3], *held = argv[4];
    const char *gate = argv[5], *lockfile = argv[6], *users = argv[7];
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    hold_lifeline();
    if (load_driver() != 0) {
        finish(result, "cuda_error", "CUDA_ERROR_NO_DEVICE", "driver");
        return 0;
    }
    /* The context shows on the GPU: made under the lock, shared, never beside a timed
     * section. */
    int lock = lock_shared(gate, lockfile, users);
    CUdevice device;
    CUcontext context;
    CUresult status = cu.Init(0);
    if (status == CUDA_SUCCESS) status = cu.DeviceGet(&device, 0);
    if (status == CUDA_SUCCESS) status = cu.DevicePrimaryCtxRetain(&context, device);
    if (status == CUDA_SUCCESS) status = cu.CtxSetCurrent(context);
    unlock(lock);
    touch(ready);
    int fd = open(fifo, O_RDONLY | O_CLOEXEC);
    size_t size = 0;
    uint8_t *data = fd >= 0 ? read_all(fd, &size) : NULL;
    if (fd >= 0) close(fd);
    if (!data || size == 0) return 0; /* released without a job */
    marks[0] = now_s();
    if (status != CUDA_SUCCESS) {
        finish(result, "cuda_error", error_name(status), "context");
        return 0;
    }
    Job job;
    if (parse(data, size, &job) != 0) {
        finish(result, "error", "", "job");
        return 0;
    }
    if (job.printf_fifo) cu.CtxSetLimit(CU_LIMIT_PRINTF_FIFO_SIZE, (size_t)job.printf_fifo);
    return run(&job, result, held, gate, lockfile, users);
}
