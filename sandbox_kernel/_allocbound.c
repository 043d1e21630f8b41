/* A numpy data allocator (NEP 49) that refuses an array the memory limit cannot hold.
 *
 * Why: numpy fills a new array in C (np.ones(3e9, np.uint8) writes 3 GB) without returning to the
 * interpreter, so the memory sampler sees it only when it is done, and at isolation level `none` there
 * is no RLIMIT_AS to stop it (it would be process-wide). numpy asks its current allocator for every
 * array's data; numpy keeps that allocator in a ContextVar, so installing this one in the engine's own
 * contextvars.Context bounds the arrays cells make, and nothing else in the process. An allocation
 * larger than what is left of the cell's memory limit gets NULL: numpy raises MemoryError and nothing
 * was allocated. Everything else is passed to the allocator that was current before (numpy's own:
 * its small-block cache and huge pages stay), which also frees what it gave.
 *
 * numpy's C API is a table of function pointers published as a capsule; the two entries used here
 * (PyDataMem_SetHandler 304, PyDataMem_GetHandler 305, numpy >= 1.22) are checked before use: the
 * feature version, and that GetHandler answers with a "mem_handler" capsule. Anything unexpected
 * and install() answers False, leaving numpy as it was.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <fcntl.h>
#include <unistd.h>
#endif

typedef struct {
    void *ctx;
    void *(*malloc)(void *ctx, size_t size);
    void *(*calloc)(void *ctx, size_t nelem, size_t elsize);
    void *(*realloc)(void *ctx, void *ptr, size_t new_size);
    void (*free)(void *ctx, void *ptr, size_t size);
} DataAllocator;          /* numpy's PyDataMemAllocator, version 1 */

typedef struct {
    char name[127];
    uint8_t version;
    DataAllocator allocator;
} DataHandler;            /* numpy's PyDataMem_Handler */

#define API_FEATURE_VERSION 211
#define API_SET_HANDLER 304
#define API_GET_HANDLER 305
#define FEATURE_1_22 0x0000000f
#define SMALL_ALLOCATION (1 << 20)   /* below this the memory sampler is enough */

/* Set for the running cell (set_limit); 0 = no limit. Read by the allocator with or without the GIL:
   written only between cells, from the thread that runs them. */
static volatile long long limit_bytes = 0;
static volatile long long baseline_bytes = 0;
static volatile long long refused_bytes = 0;

static long long
resident_bytes(void)
{
#ifdef __linux__
    static int statm = -2;
    char buf[128];
    long long pages_total = 0, pages_resident = 0;
    ssize_t n;
    if (statm == -2)
        statm = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (statm < 0)
        return 0;
    n = pread(statm, buf, sizeof(buf) - 1, 0);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    if (sscanf(buf, "%lld %lld", &pages_total, &pages_resident) != 2)
        return 0;
    return pages_resident * (long long)sysconf(_SC_PAGESIZE);
#else
    return 0;
#endif
}

static int
refuse(size_t size)
{
    long long limit = limit_bytes, left;
    if (limit <= 0 || size < SMALL_ALLOCATION)
        return 0;
    left = limit - (resident_bytes() - baseline_bytes);
    if ((unsigned long long)size > (unsigned long long)(left > 0 ? left : 0)) {
        refused_bytes = (long long)(size > (size_t)LLONG_MAX ? LLONG_MAX : size);
        return 1;
    }
    return 0;
}

/* The allocator that was current when install() first ran (numpy's default), which does the work. */
static DataAllocator inner;

static void *
bounded_malloc(void *ctx, size_t size)
{
    return refuse(size) ? NULL : inner.malloc(inner.ctx, size);
}

static void *
bounded_calloc(void *ctx, size_t nelem, size_t elsize)
{
    if (elsize && nelem > SIZE_MAX / elsize)
        return NULL;
    return refuse(nelem * elsize) ? NULL : inner.calloc(inner.ctx, nelem, elsize);
}

static void *
bounded_realloc(void *ctx, void *ptr, size_t new_size)
{
    return refuse(new_size) ? NULL : inner.realloc(inner.ctx, ptr, new_size);
}

static void
bounded_free(void *ctx, void *ptr, size_t size)
{
    inner.free(inner.ctx, ptr, size);
}

static DataHandler handler = {
    "sandbox_kernel_bounded", 1, {NULL, bounded_malloc, bounded_calloc, bounded_realloc, bounded_free}
};

/* install(api_capsule): make the bounded allocator numpy's current one in the calling context. */
static PyObject *
install(PyObject *module, PyObject *capsule)
{
    void **api;
    unsigned int (*feature_version)(void);
    PyObject *(*set_handler)(PyObject *);
    PyObject *(*get_handler)(void);
    PyObject *current, *ours, *previous;
    if (!PyCapsule_CheckExact(capsule))
        Py_RETURN_FALSE;
    api = (void **)PyCapsule_GetPointer(capsule, NULL);
    if (api == NULL) {
        PyErr_Clear();
        Py_RETURN_FALSE;
    }
    feature_version = (unsigned int (*)(void))api[API_FEATURE_VERSION];
    if (feature_version == NULL || feature_version() < FEATURE_1_22)
        Py_RETURN_FALSE;
    get_handler = (PyObject *(*)(void))api[API_GET_HANDLER];
    set_handler = (PyObject *(*)(PyObject *))api[API_SET_HANDLER];
    current = get_handler();
    if (current == NULL) {
        PyErr_Clear();
        Py_RETURN_FALSE;
    }
    if (!PyCapsule_IsValid(current, "mem_handler")) {
        Py_DECREF(current);
        Py_RETURN_FALSE;
    }
    if (inner.malloc == NULL) {
        DataHandler *previous_handler = (DataHandler *)PyCapsule_GetPointer(current, "mem_handler");
        if (previous_handler == NULL || previous_handler->version != 1 || previous_handler == &handler
                || previous_handler->allocator.malloc == NULL || previous_handler->allocator.calloc == NULL
                || previous_handler->allocator.realloc == NULL || previous_handler->allocator.free == NULL) {
            PyErr_Clear();
            Py_DECREF(current);
            Py_RETURN_FALSE;
        }
        /* numpy's default handler is static; a capsule kept forever keeps any other alive too */
        inner = previous_handler->allocator;
        Py_INCREF(current);
    }
    Py_DECREF(current);
    ours = PyCapsule_New(&handler, "mem_handler", NULL);
    if (ours == NULL)
        return NULL;
    previous = set_handler(ours);
    Py_DECREF(ours);
    if (previous == NULL)
        return NULL;
    Py_DECREF(previous);
    Py_RETURN_TRUE;
}

/* set_limit(limit_bytes, baseline_bytes): the running cell's memory limit (0: none); clears refused. */
static PyObject *
set_limit(PyObject *module, PyObject *args)
{
    long long limit, baseline;
    if (!PyArg_ParseTuple(args, "LL:set_limit", &limit, &baseline))
        return NULL;
    limit_bytes = limit;
    baseline_bytes = baseline;
    refused_bytes = 0;
    Py_RETURN_NONE;
}

/* refused(): size of the last allocation refused since set_limit (0: none). */
static PyObject *
refused(PyObject *module, PyObject *unused)
{
    return PyLong_FromLongLong(refused_bytes);
}

static PyMethodDef methods[] = {
    {"install", install, METH_O, "install(numpy_api_capsule) -> bool: bound numpy allocations in this context"},
    {"set_limit", set_limit, METH_VARARGS, "set_limit(limit_bytes, baseline_bytes): 0 turns the bound off"},
    {"refused", refused, METH_NOARGS, "refused() -> bytes of the last refused allocation since set_limit"},
    {NULL, NULL, 0, NULL}
};

static struct PyModuleDef allocbound_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "sandbox_kernel._allocbound",
    .m_doc = "A numpy data allocator that refuses arrays the cell's memory limit cannot hold.",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__allocbound(void)
{
    return PyModule_Create(&allocbound_module);
}
