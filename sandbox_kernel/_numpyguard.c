/* numpy's two C-level guards: a data allocator (NEP 49) that refuses an array the memory limit cannot
 * hold, and a check on every array numpy's ndarray constructor makes.
 *
 * 1. The allocator.
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
 *
 * 2. The constructor check. np.ndarray(shape, dtype, buffer=...) lays an array over any buffer: with
 * object fields over bytes a cell wrote, every address becomes an object. The sandbox hands cells a
 * checking stand-in for np.ndarray, but the real class leaks through library results (typing.get_origin
 * of np.typing.NDArray, generic aliases, annotations). So the check sits in the class itself:
 * guard_array_new() replaces ndarray's tp_new (and that of every subclass which copied it) with one
 * that calls the original and then a Python check on the new array, which refuses arrays laid over
 * raw memory while a cell runs. Every route to the constructor (the class, ndarray.__new__, aliases,
 * subclasses made later, which inherit the slot) passes through it.
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

/* Bytes handed out by this allocator and not yet freed: np.zeros' pages are not resident until written
   (calloc), so the resident size alone would let a cell hold far more than its limit and then fill it
   in one C call. A realloc is not counted (its old size is unknown); free subtracts what numpy says,
   never below zero. */
static long long live_bytes = 0;

static void
count(long long delta)
{
    long long now = __atomic_add_fetch(&live_bytes, delta, __ATOMIC_RELAXED);
    if (now < 0)
        __atomic_store_n(&live_bytes, 0, __ATOMIC_RELAXED);
}

static int
refuse(size_t size)
{
    long long limit = limit_bytes, used, live, left;
    if (limit <= 0 || size < SMALL_ALLOCATION)
        return 0;
    used = resident_bytes() - baseline_bytes;
    live = __atomic_load_n(&live_bytes, __ATOMIC_RELAXED);
    left = limit - (live > used ? live : used);
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
    void *p;
    if (refuse(size))
        return NULL;
    p = inner.malloc(inner.ctx, size);
    if (p != NULL)
        count((long long)size);
    return p;
}

static void *
bounded_calloc(void *ctx, size_t nelem, size_t elsize)
{
    void *p;
    if (elsize && nelem > SIZE_MAX / elsize)
        return NULL;
    if (refuse(nelem * elsize))
        return NULL;
    p = inner.calloc(inner.ctx, nelem, elsize);
    if (p != NULL)
        count((long long)(nelem * elsize));
    return p;
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
    if (ptr != NULL)
        count(-(long long)size);
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

/* -- the constructor check ----------------------------------------------------------------------- */

static newfunc original_array_new = NULL;
static PyObject *array_check = NULL;      /* called with each new array; raises to refuse it */

static PyObject *
checked_array_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *array, *verdict;
    array = original_array_new(type, args, kwds);
    if (array == NULL || array_check == NULL)
        return array;
    verdict = PyObject_CallOneArg(array_check, array);
    if (verdict == NULL) {
        Py_DECREF(array);
        return NULL;
    }
    Py_DECREF(verdict);
    return array;
}

/* guard_array_new(ndarray, check): from now on ndarray's constructor calls check(new_array). */
static PyObject *
guard_array_new(PyObject *module, PyObject *args)
{
    PyObject *cls, *check;
    PyTypeObject *type;
    if (!PyArg_ParseTuple(args, "O!O:guard_array_new", &PyType_Type, &cls, &check))
        return NULL;
    if (!PyCallable_Check(check)) {
        PyErr_SetString(PyExc_TypeError, "guard_array_new: check must be callable");
        return NULL;
    }
    type = (PyTypeObject *)cls;
    if (original_array_new == NULL) {
        if (type->tp_new == NULL || type->tp_new == checked_array_new) {
            PyErr_SetString(PyExc_TypeError, "guard_array_new: this class has no constructor of its own");
            return NULL;
        }
        original_array_new = type->tp_new;
    }
    else if (type->tp_new != original_array_new && type->tp_new != checked_array_new) {
        PyErr_SetString(PyExc_TypeError, "guard_array_new: a different class is already guarded");
        return NULL;
    }
    Py_INCREF(check);
    Py_XSETREF(array_check, check);
    type->tp_new = checked_array_new;
    PyType_Modified(type);
    Py_RETURN_NONE;
}

/* guard_subclass_new(cls): a subclass made before the guard copied the original slot; point it at the
   checked one (answers whether it had to). */
static PyObject *
guard_subclass_new(PyObject *module, PyObject *cls)
{
    PyTypeObject *type;
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "guard_subclass_new: a class is needed");
        return NULL;
    }
    type = (PyTypeObject *)cls;
    if (original_array_new != NULL && type->tp_new == original_array_new) {
        type->tp_new = checked_array_new;
        PyType_Modified(type);
        Py_RETURN_TRUE;
    }
    Py_RETURN_FALSE;
}

static PyMethodDef methods[] = {
    {"guard_array_new", guard_array_new, METH_VARARGS,
     "guard_array_new(ndarray, check): ndarray's constructor calls check(new_array) from now on"},
    {"guard_subclass_new", guard_subclass_new, METH_O,
     "guard_subclass_new(cls): a subclass that copied the original constructor slot gets the checked one"},
    {"install", install, METH_O, "install(numpy_api_capsule) -> bool: bound numpy allocations in this context"},
    {"set_limit", set_limit, METH_VARARGS, "set_limit(limit_bytes, baseline_bytes): 0 turns the bound off"},
    {"refused", refused, METH_NOARGS, "refused() -> bytes of the last refused allocation since set_limit"},
    {NULL, NULL, 0, NULL}
};

static struct PyModuleDef allocbound_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "sandbox_kernel._numpyguard",
    .m_doc = "numpy's C-level guards: a bounded data allocator, a checked array constructor.",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__numpyguard(void)
{
    return PyModule_Create(&allocbound_module);
}
