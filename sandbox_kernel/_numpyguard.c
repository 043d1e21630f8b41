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
 *
 * 3. The buffer check. An object array exports its storage (PyObject pointers) through the buffer
 * protocol. A consumer that writes bytes into a buffer (io.BytesIO.readinto, a file's readinto) would
 * write the cell's bytes over those pointers: any address becomes an object. While a cell runs,
 * guard_array_buffer() makes ndarray's export refuse byte-level writable access to object storage
 * (typed consumers that ask for the item format, Cython's object memoryviews, still get it), and hand
 * out object storage read-only to consumers that did not ask to write (memoryview(a).cast('B')).
 *
 * 4. The raw-protocol sink. numpy asks any object it converts for __array_interface__ and
 * __array_struct__ with an ordinary attribute lookup and trusts the address in the answer. A dict a cell
 * filled must never answer, whatever the object is (a function's __dict__, a library instance's, a
 * class's, a module's). install_raw_protocol_sink() puts a data descriptor for both names on `object`
 * itself: every attribute lookup meets it before any instance __dict__. It answers "absent", except
 *   - for a class, what the class's own MRO holds (ndarray's descriptor, the "absent" property of the
 *     cell's classes): class dicts are not the cell's to fill;
 *   - for an instance of a listed provider (numpy's DummyArray, which as_strided and
 *     sliding_window_view build), its own __dict__.
 * Classes that define the protocols (ndarray, numpy's scalars) are found first in their own MRO and
 * never reach the descriptor. Setting the names on a class goes to the class dict as before; on an
 * instance, only a provider's.
 *
 * 5. The class-creation sink. A cell's class statement goes through the sandbox's __build_class__, but
 * library code makes classes from a namespace the cell chose without one (enum's functional API,
 * Enum('E', {'__del__': f}), namedtuple, TypedDict). Every class, whoever makes it and however
 * (type(name, bases, ns), a metaclass's super().__new__, a class statement), is made by type's tp_new:
 * guard_class_creation() replaces it (and the slot every metaclass made earlier copied) with one that,
 * while a cell runs, first calls a Python check on what the class is to be made from: a refused class
 * is never made, so no __init_subclass__ or __set_name__ can hold on to it.
 *
 * 6. The class-write sink. What a class binds under a special method name runs wherever Python, a library
 * or the host calls it, after the cell too; the class-creation sink decides the namespace, and
 * guard_class_writes() decides each later write of such a name (type's setattr slot, its copies in
 * metaclasses, and type.__setattr__'s wrapper) while a cell runs.
 *
 * 7. The class-assignment sink: obj.__class__ = C, whoever writes it (guard_class_assignment, below).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>
#endif

typedef struct {
    void *ctx;
    void *(*malloc)(void *Py_UNUSED(ctx), size_t size);
    void *(*calloc)(void *Py_UNUSED(ctx), size_t nelem, size_t elsize);
    void *(*realloc)(void *Py_UNUSED(ctx), void *ptr, size_t new_size);
    void (*free)(void *Py_UNUSED(ctx), void *ptr, size_t size);
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
#ifdef __linux__
static pthread_t cell_thread;          /* the thread set_limit was called from: the cell's */
#endif

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
bounded_malloc(void *Py_UNUSED(ctx), size_t size)
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
bounded_calloc(void *Py_UNUSED(ctx), size_t nelem, size_t elsize)
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
bounded_realloc(void *Py_UNUSED(ctx), void *ptr, size_t new_size)
{
    return refuse(new_size) ? NULL : inner.realloc(inner.ctx, ptr, new_size);
}

static void
bounded_free(void *Py_UNUSED(ctx), void *ptr, size_t size)
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
install(PyObject *Py_UNUSED(module), PyObject *capsule)
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

/* -- the interpreter's large allocations ------------------------------------------------------------
 * One C call of a library or of the interpreter can build gigabytes before the memory sampler looks
 * again: re.sub('', 'x' * 10**6, s), unicodedata.normalize, pandas' .str.pad(3e9) (pandas calls str's
 * methods from its own code, where no size gate looks), a join of huge parts (reviews 4 and 5: N4-13,
 * N5-4). Every allocation of 1 MB or more reaches the raw domain (pymalloc hands large requests to
 * PyMem_RawMalloc), so a hook there bounds them all, whatever code asks: while a cell runs, on the cell's
 * own thread, an allocation larger than what is left of the limit fails (MemoryError, reported as the
 * memory limit). The hook wraps the interpreter's allocator, as tracemalloc does. */
static void guard_tuple_hash(void);
static PyMemAllocatorEx raw_inner;
static int raw_hooked = 0;

static int
refuse_raw(size_t size)
{
#ifdef __linux__
    if (limit_bytes <= 0 || size < SMALL_ALLOCATION || !pthread_equal(pthread_self(), cell_thread))
        return 0;
    return refuse(size);
#else
    return 0;
#endif
}

static void *
raw_malloc(void *ctx, size_t size)
{
    return refuse_raw(size) ? NULL : raw_inner.malloc(raw_inner.ctx, size);
}

static void *
raw_calloc(void *ctx, size_t nelem, size_t elsize)
{
    if (elsize && nelem > SIZE_MAX / elsize)
        return NULL;
    return refuse_raw(nelem * elsize) ? NULL : raw_inner.calloc(raw_inner.ctx, nelem, elsize);
}

static void *
raw_realloc(void *ctx, void *ptr, size_t new_size)
{
    return refuse_raw(new_size) ? NULL : raw_inner.realloc(raw_inner.ctx, ptr, new_size);
}

static void
raw_free(void *ctx, void *ptr)
{
    raw_inner.free(raw_inner.ctx, ptr);
}

static void
hook_raw_allocator(void)
{
    PyMemAllocatorEx ours = {NULL, raw_malloc, raw_calloc, raw_realloc, raw_free};
    if (raw_hooked)
        return;
    PyMem_GetAllocator(PYMEM_DOMAIN_RAW, &raw_inner);
    PyMem_SetAllocator(PYMEM_DOMAIN_RAW, &ours);
    raw_hooked = 1;
}

/* set_limit(limit_bytes, baseline_bytes): the running cell's memory limit (0: none); clears refused.
   Called from the thread that runs the cell. */
static PyObject *
set_limit(PyObject *Py_UNUSED(module), PyObject *args)
{
    long long limit, baseline;
    if (!PyArg_ParseTuple(args, "LL:set_limit", &limit, &baseline))
        return NULL;
    if (limit > 0)
        hook_raw_allocator();
    guard_tuple_hash();   /* whether or not the cell imports numpy (the C recursion section below) */
#ifdef __linux__
    cell_thread = pthread_self();
#endif
    limit_bytes = limit;
    baseline_bytes = baseline;
    refused_bytes = 0;
    Py_RETURN_NONE;
}

/* refused(): size of the last allocation refused since set_limit (0: none). */
static PyObject *
refused(PyObject *Py_UNUSED(module), PyObject *Py_UNUSED(unused))
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

/* -- recursion in C without a check --------------------------------------------------------------------
 * Some C code recurses through an object's own contents with no recursion check, so a cell's object nested
 * deeply enough overflows the C stack and the process dies (review 4, N4-11): tuple's hash (hash() of a
 * tuple nested 10**6 deep, or using it as a dict key or set member), and numpy's object loops, which apply
 * the element's number slots to each element: an object array holding itself (a[0] = a; -a, abs(a), a + a,
 * float(a), bool(a)) calls ndarray's slot again, forever. Those slots are wrapped with CPython's own
 * recursion check: past the recursion limit they raise RecursionError. (Comparisons already check.) */
static hashfunc original_tuple_hash = NULL;

static Py_hash_t
checked_tuple_hash(PyObject *v)
{
    Py_hash_t h;
    if (Py_EnterRecursiveCall(" while hashing a tuple"))
        return -1;
    h = original_tuple_hash(v);
    Py_LeaveRecursiveCall();
    return h;
}

static void
guard_tuple_hash(void)
{
    if (PyTuple_Type.tp_hash != checked_tuple_hash) {
        original_tuple_hash = PyTuple_Type.tp_hash;
        PyTuple_Type.tp_hash = checked_tuple_hash;
        PyType_Modified(&PyTuple_Type);
    }
}

#define CHECKED_UNARY(slot)                                                                             \
    static unaryfunc original_##slot = NULL;                                                            \
    static PyObject *checked_##slot(PyObject *a)                                                       \
    {                                                                                                  \
        PyObject *r;                                                                                   \
        if (Py_EnterRecursiveCall(" in an array operation"))                                          \
            return NULL;                                                                               \
        r = original_##slot(a);                                                                        \
        Py_LeaveRecursiveCall();                                                                       \
        return r;                                                                                      \
    }
#define CHECKED_BINARY(slot)                                                                            \
    static binaryfunc original_##slot = NULL;                                                           \
    static PyObject *checked_##slot(PyObject *a, PyObject *b)                                          \
    {                                                                                                  \
        PyObject *r;                                                                                   \
        if (Py_EnterRecursiveCall(" in an array operation"))                                          \
            return NULL;                                                                               \
        r = original_##slot(a, b);                                                                     \
        Py_LeaveRecursiveCall();                                                                       \
        return r;                                                                                      \
    }
CHECKED_UNARY(nb_negative)
CHECKED_UNARY(nb_positive)
CHECKED_UNARY(nb_absolute)
CHECKED_UNARY(nb_invert)
CHECKED_UNARY(nb_int)
CHECKED_UNARY(nb_float)
CHECKED_BINARY(nb_add)
CHECKED_BINARY(nb_subtract)
CHECKED_BINARY(nb_multiply)
CHECKED_BINARY(nb_remainder)
CHECKED_BINARY(nb_floor_divide)
CHECKED_BINARY(nb_true_divide)
CHECKED_BINARY(nb_lshift)
CHECKED_BINARY(nb_rshift)
CHECKED_BINARY(nb_and)
CHECKED_BINARY(nb_or)
CHECKED_BINARY(nb_xor)
CHECKED_BINARY(nb_matrix_multiply)

static ternaryfunc original_nb_power = NULL;
static PyObject *
checked_nb_power(PyObject *a, PyObject *b, PyObject *c)
{
    PyObject *r;
    if (Py_EnterRecursiveCall(" in an array operation"))
        return NULL;
    r = original_nb_power(a, b, c);
    Py_LeaveRecursiveCall();
    return r;
}

static inquiry original_nb_bool = NULL;
static int
checked_nb_bool(PyObject *a)
{
    int r;
    if (Py_EnterRecursiveCall(" in an array operation"))
        return -1;
    r = original_nb_bool(a);
    Py_LeaveRecursiveCall();
    return r;
}

#define WRAP(numbers, slot)                                                                             \
    if (numbers->slot != NULL && numbers->slot != checked_##slot) {                                    \
        original_##slot = numbers->slot;                                                               \
        numbers->slot = checked_##slot;                                                                \
    }

/* Resuming a generator from C (next(), a for loop's FOR_ITER, `yield from`'s send) starts a new evaluation of its
   frame that CPython 3.11 does not count against the recursion limit: next() on 100,000 nested generator
   expressions overflowed the C stack (review 18, R18-10). Both ways in (tp_iternext, am_send) count it. */
static iternextfunc original_gen_iternext = NULL;
static sendfunc original_gen_send = NULL;

static PyObject *
checked_gen_iternext(PyObject *gen)
{
    PyObject *r;
    if (Py_EnterRecursiveCall(" while resuming a generator"))
        return NULL;
    r = original_gen_iternext(gen);
    Py_LeaveRecursiveCall();
    return r;
}

static PySendResult
checked_gen_send(PyObject *gen, PyObject *arg, PyObject **result)
{
    PySendResult r;
    if (Py_EnterRecursiveCall(" while resuming a generator")) {
        *result = NULL;
        return PYGEN_ERROR;
    }
    r = original_gen_send(gen, arg, result);
    Py_LeaveRecursiveCall();
    return r;
}

static PyObject *
guard_generator_resumption(PyObject *Py_UNUSED(module), PyObject *Py_UNUSED(unused))
{
    if (PyGen_Type.tp_iternext != NULL && PyGen_Type.tp_iternext != checked_gen_iternext) {
        original_gen_iternext = PyGen_Type.tp_iternext;
        PyGen_Type.tp_iternext = checked_gen_iternext;
    }
    if (PyGen_Type.tp_as_async != NULL && PyGen_Type.tp_as_async->am_send != NULL &&
            PyGen_Type.tp_as_async->am_send != checked_gen_send) {
        original_gen_send = PyGen_Type.tp_as_async->am_send;
        PyGen_Type.tp_as_async->am_send = checked_gen_send;
    }
    PyType_Modified(&PyGen_Type);
    Py_RETURN_NONE;
}

/* Freeing a chain of objects nested a million deep recurses once per object in C: CPython's own containers defer
   deep frees (the "trashcan"), but slice, staticmethod, classmethod, property, operator's getters, deque, super,
   generators and numpy's arrays free what they hold directly, and slice(slice(...)) a million deep overflowed the C stack when dropped
   (review 18, R18-11). guard_deallocation(types) gives those types a deallocator that frees at most
   DEALLOC_DEPTH_LIMIT nested objects on the C stack and parks deeper ones (unreachable already: their count is 0),
   freeing them one after another when the outermost free returns. A parked object that the garbage collector
   tracks is untracked while it waits (the collector must not see a dead object) and tracked again just before
   its own deallocator runs, which untracks it first thing. */
#define DEALLOC_DEPTH_LIMIT 500
#define GUARDED_DEALLOC_TYPES 16

static PyTypeObject *dealloc_types[GUARDED_DEALLOC_TYPES];
static destructor dealloc_originals[GUARDED_DEALLOC_TYPES];
static int dealloc_type_count = 0;
static int dealloc_depth = 0;

typedef struct {
    PyObject *op;
    PyTypeObject *heap_type;   /* a reference held while parked: the type may lose its last one meanwhile */
    int untracked;             /* untracked by park(): tracked again before its deallocator untracks it */
} Parked;

static Parked *parked = NULL;
static Py_ssize_t parked_count = 0, parked_capacity = 0;

static destructor
original_dealloc_of(PyTypeObject *type)
{
    int i;
    for (; type != NULL; type = type->tp_base)   /* a subclass's deallocator ends in its guarded base's */
        for (i = 0; i < dealloc_type_count; i++)
            if (dealloc_types[i] == type)
                return dealloc_originals[i];
    return NULL;
}

static void
free_now(PyObject *op)
{
    destructor original = original_dealloc_of(Py_TYPE(op));
    dealloc_depth++;
    original(op);
    dealloc_depth--;
}

static int
park(PyObject *op)
{
    Parked *grown;
    PyTypeObject *type = Py_TYPE(op);
    if (parked_count == parked_capacity) {
        Py_ssize_t capacity = parked_capacity ? parked_capacity * 2 : 1024;
        grown = PyMem_RawRealloc(parked, (size_t)capacity * sizeof(Parked));
        if (grown == NULL)
            return -1;
        parked = grown;
        parked_capacity = capacity;
    }
    parked[parked_count].op = op;
    parked[parked_count].heap_type = NULL;
    parked[parked_count].untracked = 0;
    if (type->tp_flags & Py_TPFLAGS_HEAPTYPE) {
        Py_INCREF(type);
        parked[parked_count].heap_type = type;
    }
    if (PyType_IS_GC(type) && PyObject_GC_IsTracked(op)) {
        PyObject_GC_UnTrack(op);
        parked[parked_count].untracked = 1;
    }
    parked_count++;
    return 0;
}

static void
deferring_dealloc(PyObject *op)
{
    Parked next;
    if (dealloc_depth >= DEALLOC_DEPTH_LIMIT && park(op) == 0)
        return;
    free_now(op);
    if (dealloc_depth > 0)
        return;
    while (parked_count > 0) {   /* the outermost free: what was parked, each at the bottom of the C stack again */
        next = parked[--parked_count];
        if (next.untracked)
            PyObject_GC_Track(next.op);
        free_now(next.op);
        Py_XDECREF(next.heap_type);
    }
}

/* guard_deallocation(types): each type (and its subclasses, through it) frees with deferring_dealloc. */
static PyObject *
guard_deallocation(PyObject *Py_UNUSED(module), PyObject *types)
{
    Py_ssize_t i;
    PyTypeObject *type;
    if (!PyTuple_Check(types)) {
        PyErr_SetString(PyExc_TypeError, "guard_deallocation: a tuple of types is needed");
        return NULL;
    }
    for (i = 0; i < PyTuple_GET_SIZE(types); i++) {
        if (!PyType_Check(PyTuple_GET_ITEM(types, i))) {
            PyErr_SetString(PyExc_TypeError, "guard_deallocation: a tuple of types is needed");
            return NULL;
        }
        type = (PyTypeObject *)PyTuple_GET_ITEM(types, i);
        if (type->tp_dealloc == deferring_dealloc || type->tp_dealloc == NULL)
            continue;
        if (dealloc_type_count == GUARDED_DEALLOC_TYPES) {
            PyErr_SetString(PyExc_OverflowError, "guard_deallocation: too many types");
            return NULL;
        }
        dealloc_types[dealloc_type_count] = type;
        dealloc_originals[dealloc_type_count++] = type->tp_dealloc;
        type->tp_dealloc = deferring_dealloc;
        PyType_Modified(type);
    }
    Py_RETURN_NONE;
}

/* guard_c_recursion(ndarray): tuple's hash and ndarray's number slots check the recursion depth. */
static PyObject *
guard_c_recursion(PyObject *Py_UNUSED(module), PyObject *cls)
{
    PyNumberMethods *numbers;
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "guard_c_recursion: expected ndarray");
        return NULL;
    }
    guard_tuple_hash();
    numbers = ((PyTypeObject *)cls)->tp_as_number;
    if (numbers != NULL && original_nb_add == NULL) {
        WRAP(numbers, nb_negative) WRAP(numbers, nb_positive) WRAP(numbers, nb_absolute)
        WRAP(numbers, nb_invert) WRAP(numbers, nb_int) WRAP(numbers, nb_float) WRAP(numbers, nb_bool)
        WRAP(numbers, nb_add) WRAP(numbers, nb_subtract) WRAP(numbers, nb_multiply)
        WRAP(numbers, nb_remainder) WRAP(numbers, nb_floor_divide) WRAP(numbers, nb_true_divide)
        WRAP(numbers, nb_lshift) WRAP(numbers, nb_rshift) WRAP(numbers, nb_and) WRAP(numbers, nb_or)
        WRAP(numbers, nb_xor) WRAP(numbers, nb_matrix_multiply) WRAP(numbers, nb_power)
        PyType_Modified((PyTypeObject *)cls);
    }
    Py_RETURN_NONE;
}

/* guard_array_new(ndarray, check): from now on ndarray's constructor calls check(new_array). */
static PyObject *
guard_array_new(PyObject *Py_UNUSED(module), PyObject *args)
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
guard_subclass_new(PyObject *Py_UNUSED(module), PyObject *cls)
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

/* -- the buffer check ------------------------------------------------------------------------------ */

static getbufferproc original_array_getbuffer = NULL;
static PyObject *buffer_refusal = NULL;   /* called with the array: raises the sandbox's refusal */
static PyObject *dtype_getter = NULL;     /* ndarray.dtype's own descriptor (a subclass may shadow it) */
static PyObject *hasobject_getter = NULL; /* numpy.dtype.hasobject's own descriptor */
static volatile int cell_running = 0;

/* 1 when the array's elements hold object pointers, 0 when not, -1 on error. */
static int
has_object_storage(PyObject *array)
{
    PyObject *dtype, *flag;
    int answer;
    dtype = Py_TYPE(dtype_getter)->tp_descr_get(dtype_getter, array, NULL);
    if (dtype == NULL)
        return -1;
    flag = Py_TYPE(hasobject_getter)->tp_descr_get(hasobject_getter, dtype, NULL);
    Py_DECREF(dtype);
    if (flag == NULL)
        return -1;
    answer = PyObject_IsTrue(flag);
    Py_DECREF(flag);
    return answer;
}

static int
checked_array_getbuffer(PyObject *array, Py_buffer *view, int flags)
{
    int objects;
    PyObject *verdict;
    if (!cell_running || buffer_refusal == NULL)
        return original_array_getbuffer(array, view, flags);
    objects = has_object_storage(array);
    if (objects < 0) {
        view->obj = NULL;
        return -1;
    }
    if (objects && (flags & PyBUF_WRITABLE) && !(flags & PyBUF_FORMAT)) {
        verdict = PyObject_CallOneArg(buffer_refusal, array);
        Py_XDECREF(verdict);
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_BufferError, "an object array's storage cannot be written as bytes");
        view->obj = NULL;
        return -1;
    }
    if (original_array_getbuffer(array, view, flags) < 0)
        return -1;
    if (objects && !(flags & PyBUF_WRITABLE))
        view->readonly = 1;
    return 0;
}

/* guard_array_buffer(ndarray, numpy_dtype, refuse): ndarray's buffer export is checked from now on. */
static PyObject *
guard_array_buffer(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *cls, *dtype_cls, *refuse, *getter, *hasobject;
    PyTypeObject *type;
    if (!PyArg_ParseTuple(args, "O!O!O:guard_array_buffer", &PyType_Type, &cls, &PyType_Type, &dtype_cls, &refuse))
        return NULL;
    type = (PyTypeObject *)cls;
    if (!PyCallable_Check(refuse) || type->tp_as_buffer == NULL || type->tp_as_buffer->bf_getbuffer == NULL) {
        PyErr_SetString(PyExc_TypeError, "guard_array_buffer: a buffer exporter and a callable are needed");
        return NULL;
    }
    getter = PyObject_GetAttrString(cls, "dtype");
    if (getter == NULL)
        return NULL;
    hasobject = PyObject_GetAttrString(dtype_cls, "hasobject");
    if (hasobject == NULL) {
        Py_DECREF(getter);
        return NULL;
    }
    if (Py_TYPE(getter)->tp_descr_get == NULL || Py_TYPE(hasobject)->tp_descr_get == NULL) {
        Py_DECREF(getter);
        Py_DECREF(hasobject);
        PyErr_SetString(PyExc_TypeError, "guard_array_buffer: dtype and hasobject must be descriptors");
        return NULL;
    }
    if (original_array_getbuffer == NULL)
        original_array_getbuffer = type->tp_as_buffer->bf_getbuffer;
    else if (type->tp_as_buffer->bf_getbuffer != original_array_getbuffer
             && type->tp_as_buffer->bf_getbuffer != checked_array_getbuffer) {
        Py_DECREF(getter);
        Py_DECREF(hasobject);
        PyErr_SetString(PyExc_TypeError, "guard_array_buffer: a different class is already guarded");
        return NULL;
    }
    Py_XSETREF(dtype_getter, getter);
    Py_XSETREF(hasobject_getter, hasobject);
    Py_INCREF(refuse);
    Py_XSETREF(buffer_refusal, refuse);
    type->tp_as_buffer->bf_getbuffer = checked_array_getbuffer;
    Py_RETURN_NONE;
}

/* guard_subclass_buffer(cls): a subclass made before the guard copied the original export. */
static PyObject *
guard_subclass_buffer(PyObject *Py_UNUSED(module), PyObject *cls)
{
    PyTypeObject *type;
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "guard_subclass_buffer: a class is needed");
        return NULL;
    }
    type = (PyTypeObject *)cls;
    if (original_array_getbuffer != NULL && type->tp_as_buffer != NULL
            && type->tp_as_buffer->bf_getbuffer == original_array_getbuffer) {
        type->tp_as_buffer->bf_getbuffer = checked_array_getbuffer;
        Py_RETURN_TRUE;
    }
    Py_RETURN_FALSE;
}

/* set_cell_running(flag): the buffer and class-creation checks apply while a cell runs. */
static PyObject *
set_cell_running(PyObject *Py_UNUSED(module), PyObject *flag)
{
    int value = PyObject_IsTrue(flag);
    if (value < 0)
        return NULL;
    cell_running = value;
    Py_RETURN_NONE;
}

/* -- the class-creation sink ------------------------------------------------------------------------- */

static newfunc original_type_new = NULL;
/* check(metatype, args, kwds) -> the args to make the class from (the same, or with the namespace's
   attribute hooks wrapped); raises to refuse. Called before type's constructor, so nothing (no
   __init_subclass__, no __set_name__ of the cell's) ever sees a refused class. */
static PyObject *class_check = NULL;

static PyObject *
checked_type_new(PyTypeObject *metatype, PyObject *args, PyObject *kwds)
{
    PyObject *checked, *cls;
    if (!cell_running || class_check == NULL)
        return original_type_new(metatype, args, kwds);
    checked = PyObject_CallFunctionObjArgs(class_check, (PyObject *)metatype, args, kwds ? kwds : Py_None, NULL);
    if (checked == NULL)
        return NULL;
    if (!PyTuple_Check(checked)) {
        Py_DECREF(checked);
        PyErr_SetString(PyExc_TypeError, "the class check must answer with a tuple of arguments");
        return NULL;
    }
    cls = original_type_new(metatype, checked, kwds);
    Py_DECREF(checked);
    return cls;
}

/* guard_class_creation(check): from now on type's constructor asks check(metatype, args, kwds) while a cell
   runs. */
static PyObject *
guard_class_creation(PyObject *Py_UNUSED(module), PyObject *check)
{
    if (!PyCallable_Check(check)) {
        PyErr_SetString(PyExc_TypeError, "guard_class_creation: check must be callable");
        return NULL;
    }
    if (original_type_new == NULL) {
        if (PyType_Type.tp_new == checked_type_new) {
            PyErr_SetString(PyExc_TypeError, "guard_class_creation: type is already guarded");
            return NULL;
        }
        original_type_new = PyType_Type.tp_new;
    }
    Py_INCREF(check);
    Py_XSETREF(class_check, check);
    PyType_Type.tp_new = checked_type_new;
    PyType_Modified(&PyType_Type);
    Py_RETURN_NONE;
}

static setattrofunc original_type_setattro = NULL;
static int checked_type_setattro(PyObject *cls, PyObject *name, PyObject *value);

/* guard_metaclass(cls): a metaclass made before the guards copied type's original constructor and
   attribute-write slots; point it at the checked ones (answers whether it had to). */
static PyObject *
guard_metaclass(PyObject *Py_UNUSED(module), PyObject *cls)
{
    PyTypeObject *type;
    int changed = 0;
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "guard_metaclass: a class is needed");
        return NULL;
    }
    type = (PyTypeObject *)cls;
    if (original_type_new != NULL && type->tp_new == original_type_new) {
        type->tp_new = checked_type_new;
        changed = 1;
    }
    if (original_type_setattro != NULL && type->tp_setattro == original_type_setattro) {
        type->tp_setattro = checked_type_setattro;
        changed = 1;
    }
    if (changed) {
        PyType_Modified(type);
        Py_RETURN_TRUE;
    }
    Py_RETURN_FALSE;
}

/* replace_class_attribute(cls, name, value) -> the previous value: a method of a C class (ndarray.setflags)
   becomes a checked one for every caller that looks it up on the class, C code included (numpy's flags
   object sets writeable through a method call on the array). */
static PyObject *namespace_of(PyTypeObject *type);

static PyObject *
replace_class_attribute(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *cls, *name, *value, *ns, *previous;
    if (!PyArg_ParseTuple(args, "O!UO:replace_class_attribute", &PyType_Type, &cls, &name, &value))
        return NULL;
    ns = namespace_of((PyTypeObject *)cls);
    if (ns == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "replace_class_attribute: the class has no namespace");
        return NULL;
    }
    previous = PyDict_GetItemWithError(ns, name);
    if (previous == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetObject(PyExc_AttributeError, name);
        Py_DECREF(ns);
        return NULL;
    }
    Py_INCREF(previous);
    if (PyDict_SetItem(ns, name, value) < 0) {
        Py_DECREF(previous);
        Py_DECREF(ns);
        return NULL;
    }
    Py_DECREF(ns);
    PyType_Modified((PyTypeObject *)cls);
    return previous;
}

/* -- the raw-protocol sink --------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    PyObject *name;
} AbsentProtocol;

static PyObject *instance_providers = NULL;   /* classes whose instances' own __dict__ may answer */

/* The namespace of a class (a new reference): static builtin types keep theirs elsewhere on 3.12+. */
static PyObject *
namespace_of(PyTypeObject *type)
{
#if PY_VERSION_HEX >= 0x030C0000
    return PyType_GetDict(type);
#else
    Py_XINCREF(type->tp_dict);
    return type->tp_dict;
#endif
}

/* No message is formatted: numpy asks every object it converts, and clears the error at once. */
static PyObject *
absent(AbsentProtocol *self, PyObject *obj)
{
    (void)obj;
    PyErr_SetObject(PyExc_AttributeError, self->name);
    return NULL;
}

/* What cls.name is without this descriptor: the first entry in cls's own MRO (bound as a class
   attribute), this descriptor's own entry on object meaning "absent". */
static PyObject *
class_attribute(AbsentProtocol *self, PyObject *cls)
{
    PyObject *mro, *namespace, *found, *result = NULL;
    descrgetfunc get;
    Py_ssize_t i;
    mro = PyObject_GetAttrString(cls, "__mro__");
    if (mro == NULL)
        return NULL;
    if (!PyTuple_Check(mro)) {
        Py_DECREF(mro);
        return absent(self, cls);
    }
    for (i = 0; i < PyTuple_GET_SIZE(mro); i++) {
        if (!PyType_Check(PyTuple_GET_ITEM(mro, i)))
            continue;
        namespace = namespace_of((PyTypeObject *)PyTuple_GET_ITEM(mro, i));
        if (namespace == NULL)
            continue;
        found = PyDict_GetItemWithError(namespace, self->name);
        Py_XINCREF(found);
        Py_DECREF(namespace);
        if (found == NULL) {
            if (PyErr_Occurred()) {
                Py_DECREF(mro);
                return NULL;
            }
            continue;
        }
        if (found == (PyObject *)self) {
            Py_DECREF(found);
            break;
        }
        get = Py_TYPE(found)->tp_descr_get;
        if (get != NULL) {
            result = get(found, NULL, cls);
            Py_DECREF(found);
        }
        else
            result = found;
        Py_DECREF(mro);
        return result;
    }
    Py_DECREF(mro);
    return absent(self, cls);
}

static int
is_provider(PyObject *obj)
{
    if (instance_providers == NULL)
        return 0;
    return PySet_Contains(instance_providers, (PyObject *)Py_TYPE(obj));
}

static PyObject *
AbsentProtocol_get(PyObject *op, PyObject *obj, PyObject *type)
{
    AbsentProtocol *self = (AbsentProtocol *)op;
    PyObject *dict, *found;
    int provider;
    (void)type;
    if (obj == NULL || obj == Py_None)
        return absent(self, op);
    if (PyType_Check(obj))
        return class_attribute(self, obj);
    provider = is_provider(obj);
    if (provider < 0)
        return NULL;
    if (provider) {
        dict = PyObject_GenericGetDict(obj, NULL);
        if (dict == NULL)
            return NULL;
        found = PyDict_GetItemWithError(dict, self->name);
        Py_XINCREF(found);
        Py_DECREF(dict);
        if (found != NULL || PyErr_Occurred())
            return found;
    }
    return absent(self, obj);
}

static int
set_in(PyObject *dict, PyObject *name, PyObject *value)
{
    if (value != NULL)
        return PyDict_SetItem(dict, name, value);
    if (PyDict_DelItem(dict, name) < 0) {
        if (PyErr_ExceptionMatches(PyExc_KeyError)) {
            PyErr_Clear();
            PyErr_SetObject(PyExc_AttributeError, name);
        }
        return -1;
    }
    return 0;
}

static int
AbsentProtocol_set(PyObject *op, PyObject *obj, PyObject *value)
{
    AbsentProtocol *self = (AbsentProtocol *)op;
    PyObject *dict;
    PyTypeObject *cls;
    int provider, status;
    if (PyType_Check(obj)) {
        /* cls.__array_interface__ = ... (the sandbox's own "absent" property on a cell class) */
        cls = (PyTypeObject *)obj;
        if (!(cls->tp_flags & Py_TPFLAGS_HEAPTYPE) || (cls->tp_flags & Py_TPFLAGS_IMMUTABLETYPE)) {
            PyErr_Format(PyExc_TypeError, "cannot set '%U' attribute of immutable type '%s'", self->name,
                         cls->tp_name);
            return -1;
        }
        /* a plain value in a class dict would be found before this descriptor and read by numpy for
           every instance: while a cell runs, only a data descriptor (the sandbox's "absent") may go there */
        if (cell_running && value != NULL && Py_TYPE(value)->tp_descr_set == NULL) {
            PyErr_Format(PyExc_AttributeError, "'%U' of a class can only be a data descriptor in the sandbox",
                         self->name);
            return -1;
        }
        dict = namespace_of(cls);
        if (dict == NULL)
            return -1;
        status = set_in(dict, self->name, value);
        Py_DECREF(dict);
        PyType_Modified(cls);
        return status;
    }
    provider = is_provider(obj);
    if (provider < 0)
        return -1;
    if (!provider) {
        PyErr_Format(PyExc_AttributeError, "'%.100s' object attribute '%U' is read-only (numpy's raw array "
                     "protocols)", Py_TYPE(obj)->tp_name, self->name);
        return -1;
    }
    dict = PyObject_GenericGetDict(obj, NULL);
    if (dict == NULL)
        return -1;
    status = set_in(dict, self->name, value);
    Py_DECREF(dict);
    return status;
}

static void
AbsentProtocol_dealloc(PyObject *op)
{
    Py_XDECREF(((AbsentProtocol *)op)->name);
    Py_TYPE(op)->tp_free(op);
}

static PyObject *
AbsentProtocol_repr(PyObject *op)
{
    return PyUnicode_FromFormat("<absent raw array protocol '%U'>", ((AbsentProtocol *)op)->name);
}

static PyTypeObject AbsentProtocolType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "sandbox_kernel._numpyguard.AbsentProtocol",
    .tp_basicsize = sizeof(AbsentProtocol),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "numpy's raw array protocol, answered as absent for every object that does not define it.",
    .tp_dealloc = AbsentProtocol_dealloc,
    .tp_repr = AbsentProtocol_repr,
    .tp_descr_get = AbsentProtocol_get,
    .tp_descr_set = AbsentProtocol_set,
};

/* install_raw_protocol_sink(names): the descriptor for each name on object (once). */
static PyObject *
install_raw_protocol_sink(PyObject *Py_UNUSED(module), PyObject *names)
{
    PyObject *namespace, *name, *current;
    AbsentProtocol *descriptor;
    Py_ssize_t i;
    if (!PyTuple_Check(names)) {
        PyErr_SetString(PyExc_TypeError, "install_raw_protocol_sink: a tuple of names is needed");
        return NULL;
    }
    namespace = namespace_of(&PyBaseObject_Type);
    if (namespace == NULL)
        return NULL;
    for (i = 0; i < PyTuple_GET_SIZE(names); i++) {
        name = PyTuple_GET_ITEM(names, i);
        if (!PyUnicode_CheckExact(name)) {
            Py_DECREF(namespace);
            PyErr_SetString(PyExc_TypeError, "install_raw_protocol_sink: names must be str");
            return NULL;
        }
        current = PyDict_GetItemWithError(namespace, name);
        if (current != NULL && Py_TYPE(current) == &AbsentProtocolType)
            continue;
        if (current == NULL && PyErr_Occurred()) {
            Py_DECREF(namespace);
            return NULL;
        }
        descriptor = PyObject_New(AbsentProtocol, &AbsentProtocolType);
        if (descriptor == NULL) {
            Py_DECREF(namespace);
            return NULL;
        }
        Py_INCREF(name);
        descriptor->name = name;
        if (PyDict_SetItem(namespace, name, (PyObject *)descriptor) < 0) {
            Py_DECREF(descriptor);
            Py_DECREF(namespace);
            return NULL;
        }
        Py_DECREF(descriptor);
    }
    Py_DECREF(namespace);
    PyType_Modified(&PyBaseObject_Type);
    Py_RETURN_NONE;
}

/* -- the class-write sink ---------------------------------------------------------------------------- */

/* check(cls, name, value) for a listed name written on a class while a cell runs; raises to refuse. */
static PyObject *class_write_check = NULL;
static PyObject *class_write_names = NULL;   /* a frozenset of exact str */

static int
checked_type_setattro(PyObject *cls, PyObject *name, PyObject *value)
{
    PyObject *exact, *verdict;
    int listed, status;
    if (!cell_running || class_write_check == NULL || value == NULL || !PyUnicode_Check(name))
        return original_type_setattro(cls, name, value);
    /* the name's characters, as type's own setattr uses them: a str subclass's __eq__ or __hash__ could
       otherwise hide a listed name from the set */
    exact = PyUnicode_FromObject(name);
    if (exact == NULL)
        return -1;
    listed = PySet_Contains(class_write_names, exact);
    if (listed < 0) {
        Py_DECREF(exact);
        return -1;
    }
    if (listed) {
        verdict = PyObject_CallFunctionObjArgs(class_write_check, cls, exact, value, NULL);
        if (verdict == NULL) {
            Py_DECREF(exact);
            return -1;
        }
        Py_DECREF(verdict);
    }
    status = original_type_setattro(cls, exact, value);
    Py_DECREF(exact);
    return status;
}

/* guard_class_writes(check, names): from now on, while a cell runs, writing one of names on a class asks
   check(cls, name, value) first, whatever the route: `C.name = v` and setattr (type's slot, and the copy
   of it every metaclass made earlier: guard_metaclass), and type.__setattr__ (its wrapper calls the
   function it was made with, not the slot), which metaclasses written in Python end in (enum's). */
static PyObject *
guard_class_writes(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *check, *names, *namespace, *wrappers[2];
    int i;
    if (!PyArg_ParseTuple(args, "OO!:guard_class_writes", &check, &PyFrozenSet_Type, &names))
        return NULL;
    if (!PyCallable_Check(check)) {
        PyErr_SetString(PyExc_TypeError, "guard_class_writes: check must be callable");
        return NULL;
    }
    if (original_type_setattro == NULL) {
        if (PyType_Type.tp_setattro == checked_type_setattro) {
            PyErr_SetString(PyExc_TypeError, "guard_class_writes: type is already guarded");
            return NULL;
        }
        original_type_setattro = PyType_Type.tp_setattro;
    }
    namespace = namespace_of(&PyType_Type);
    if (namespace == NULL)
        return NULL;
    wrappers[0] = PyDict_GetItemString(namespace, "__setattr__");
    wrappers[1] = PyDict_GetItemString(namespace, "__delattr__");
    Py_DECREF(namespace);
    for (i = 0; i < 2; i++) {
        if (wrappers[i] == NULL || !Py_IS_TYPE(wrappers[i], &PyWrapperDescr_Type)) {
            PyErr_SetString(PyExc_TypeError, "guard_class_writes: type's __setattr__/__delattr__ are not its own");
            return NULL;
        }
    }
    Py_INCREF(check);
    Py_XSETREF(class_write_check, check);
    Py_INCREF(names);
    Py_XSETREF(class_write_names, names);
    /* both wrappers: each must call the function in type's slot, or CPython's check that no C-level
       setattr is skipped (hackcheck) refuses every super().__setattr__ / __delattr__ of a metaclass */
    for (i = 0; i < 2; i++)
        if (((PyWrapperDescrObject *)wrappers[i])->d_wrapped == (void *)original_type_setattro)
            ((PyWrapperDescrObject *)wrappers[i])->d_wrapped = (void *)checked_type_setattro;
    PyType_Type.tp_setattro = checked_type_setattro;
    PyType_Modified(&PyType_Type);
    Py_RETURN_NONE;
}

/* -- the class-assignment sink -------------------------------------------------------------------------
 * `obj.__class__ = C` keeps the object's state and gives it C's methods: C's constructor never checked that
 * state. Library code assigns it on the cell's behalf (a dataclass's generated __init__ with a '__class__'
 * field, copy's slot state restored with setattr: review 17), where no gate of the cell's code looks, and a
 * cell object became a scipy csr_matrix over indices it chose. Every assignment, however it is written
 * (obj.__class__ = C, setattr, object.__setattr__), ends in the setter of object's '__class__' descriptor:
 * guard_class_assignment() replaces that setter with one that, while a cell runs, first asks a Python
 * check(obj, new_class), which raises to refuse. */

static setter original_set_class = NULL;
static PyObject *class_assignment_check = NULL;

static int
checked_set_class(PyObject *obj, PyObject *value, void *closure)
{
    PyObject *answer;
    if (cell_running && class_assignment_check != NULL && value != NULL) {
        answer = PyObject_CallFunctionObjArgs(class_assignment_check, obj, value, NULL);
        if (answer == NULL)
            return -1;
        Py_DECREF(answer);
    }
    return original_set_class(obj, value, closure);
}

/* guard_class_assignment(check): from now on assigning __class__ asks check(obj, new_class) while a cell runs. */
static PyObject *
guard_class_assignment(PyObject *Py_UNUSED(module), PyObject *check)
{
    PyObject *namespace, *descriptor;
    PyGetSetDef *def;
    if (!PyCallable_Check(check)) {
        PyErr_SetString(PyExc_TypeError, "guard_class_assignment: check must be callable");
        return NULL;
    }
    namespace = namespace_of(&PyBaseObject_Type);
    if (namespace == NULL)
        return NULL;
    descriptor = PyDict_GetItemString(namespace, "__class__");
    Py_DECREF(namespace);
    if (descriptor == NULL || !Py_IS_TYPE(descriptor, &PyGetSetDescr_Type)) {
        PyErr_SetString(PyExc_TypeError, "guard_class_assignment: object's __class__ is not its own descriptor");
        return NULL;
    }
    def = ((PyGetSetDescrObject *)descriptor)->d_getset;
    if (original_set_class == NULL) {
        if (def->set == NULL || def->set == checked_set_class) {
            PyErr_SetString(PyExc_TypeError, "guard_class_assignment: object's __class__ has no setter to guard");
            return NULL;
        }
        original_set_class = def->set;
    }
    Py_INCREF(check);
    Py_XSETREF(class_assignment_check, check);
    def->set = checked_set_class;   /* object's getset table is static, writable data of the interpreter */
    Py_RETURN_NONE;
}

/* -- in-place concatenation of a bounded container --------------------------------------------------------
 * `d += iterator` on a deque with a maxlen consumes the iterator in C and keeps nothing: neither the tick nor
 * the allocation bound sees it, and no signal is handled (review 11, R11-6). The rewriter leaves `+=` alone (a
 * gate on every augmented assignment costs too much), so the decision is made in the type's slot, which every
 * route reaches (`+=`, operator.iadd, operator.iconcat): while a cell runs, check(other) gives what to consume,
 * charged (gates: a range charged, an iterator made a list through the sized gate). */
static binaryfunc original_deque_iconcat = NULL;
static PyObject *iconcat_check = NULL;

static PyObject *
checked_deque_iconcat(PyObject *self, PyObject *other)
{
    PyObject *given, *result;
    if (!cell_running || iconcat_check == NULL)
        return original_deque_iconcat(self, other);
    given = PyObject_CallOneArg(iconcat_check, other);
    if (given == NULL)
        return NULL;
    result = original_deque_iconcat(self, given);
    Py_DECREF(given);
    return result;
}

/* The type and its subclasses made so far (later ones copy the slot from their base). */
static int
patch_iconcat(PyTypeObject *type)
{
    PyObject *subclasses;
    Py_ssize_t i;
    if (type->tp_as_sequence != NULL && type->tp_as_sequence->sq_inplace_concat == original_deque_iconcat) {
        type->tp_as_sequence->sq_inplace_concat = checked_deque_iconcat;
        PyType_Modified(type);
    }
    subclasses = PyObject_CallMethod((PyObject *)type, "__subclasses__", NULL);
    if (subclasses == NULL)
        return -1;
    for (i = 0; i < PyList_GET_SIZE(subclasses); i++) {
        if (patch_iconcat((PyTypeObject *)PyList_GET_ITEM(subclasses, i)) < 0) {
            Py_DECREF(subclasses);
            return -1;
        }
    }
    Py_DECREF(subclasses);
    return 0;
}

/* guard_deque_iconcat(deque, check): `d += x` asks check(x) for what to consume while a cell runs. */
static PyObject *
guard_deque_iconcat(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *cls, *check, *wrapper;
    PyTypeObject *type;
    if (!PyArg_ParseTuple(args, "O!O:guard_deque_iconcat", &PyType_Type, &cls, &check))
        return NULL;
    type = (PyTypeObject *)cls;
    if (!PyCallable_Check(check) || type->tp_as_sequence == NULL || type->tp_as_sequence->sq_inplace_concat == NULL) {
        PyErr_SetString(PyExc_TypeError, "guard_deque_iconcat: a sequence type with in-place concatenation and a check");
        return NULL;
    }
    Py_INCREF(check);
    Py_XSETREF(iconcat_check, check);
    if (original_deque_iconcat == NULL)
        original_deque_iconcat = type->tp_as_sequence->sq_inplace_concat;
    /* a class made later takes its slot from the wrapper in deque's dict, not from deque's slot */
    wrapper = PyDict_GetItemString(type->tp_dict, "__iadd__");
    if (wrapper != NULL && Py_IS_TYPE(wrapper, &PyWrapperDescr_Type)
            && ((PyWrapperDescrObject *)wrapper)->d_wrapped == (void *)original_deque_iconcat)
        ((PyWrapperDescrObject *)wrapper)->d_wrapped = (void *)checked_deque_iconcat;
    if (patch_iconcat(type) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* add_raw_protocol_provider(cls): instances of exactly cls answer from their own __dict__. */
static PyObject *
add_raw_protocol_provider(PyObject *Py_UNUSED(module), PyObject *cls)
{
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "add_raw_protocol_provider: a class is needed");
        return NULL;
    }
    if (instance_providers == NULL) {
        instance_providers = PySet_New(NULL);
        if (instance_providers == NULL)
            return NULL;
    }
    if (PySet_Add(instance_providers, cls) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"guard_array_buffer", guard_array_buffer, METH_VARARGS,
     "guard_array_buffer(ndarray, dtype, refuse): object storage is never exported as writable bytes in a cell"},
    {"guard_subclass_buffer", guard_subclass_buffer, METH_O,
     "guard_subclass_buffer(cls): a subclass that copied the original buffer export gets the checked one"},
    {"set_cell_running", set_cell_running, METH_O, "set_cell_running(flag): the buffer and class checks apply while True"},
    {"install_raw_protocol_sink", install_raw_protocol_sink, METH_O,
     "install_raw_protocol_sink(names): an 'absent' data descriptor for each name on object"},
    {"add_raw_protocol_provider", add_raw_protocol_provider, METH_O,
     "add_raw_protocol_provider(cls): instances of exactly cls answer the protocols from their own __dict__"},
    {"guard_array_new", guard_array_new, METH_VARARGS,
     "guard_array_new(ndarray, check): ndarray's constructor calls check(new_array) from now on"},
    {"guard_subclass_new", guard_subclass_new, METH_O,
     "guard_subclass_new(cls): a subclass that copied the original constructor slot gets the checked one"},
    {"guard_class_creation", guard_class_creation, METH_O,
     "guard_class_creation(check): type's constructor asks check(metatype, args, kwds) while a cell runs"},
    {"guard_metaclass", guard_metaclass, METH_O,
     "guard_metaclass(cls): a metaclass that copied type's original constructor or setattr slot gets the checked one"},
    {"guard_class_writes", guard_class_writes, METH_VARARGS,
     "guard_class_writes(check, names): writing one of names on a class asks check(cls, name, value) while a cell runs"},
    {"guard_deallocation", guard_deallocation, METH_O,
     "guard_deallocation(types): freeing deeply nested objects of these types never recurses past a bound"},
    {"guard_generator_resumption", guard_generator_resumption, METH_NOARGS,
     "guard_generator_resumption(): resuming a generator from C counts against the recursion limit"},
    {"guard_class_assignment", guard_class_assignment, METH_O,
     "guard_class_assignment(check): assigning __class__ asks check(obj, new_class) while a cell runs"},
    {"install", install, METH_O, "install(numpy_api_capsule) -> bool: bound numpy allocations in this context"},
    {"replace_class_attribute", replace_class_attribute, METH_VARARGS,
     "replace_class_attribute(cls, name, value) -> previous: a C class's attribute replaced"},
    {"guard_deque_iconcat", guard_deque_iconcat, METH_VARARGS,
     "guard_deque_iconcat(deque, check): d += x consumes check(x) while a cell runs"},
    {"guard_c_recursion", guard_c_recursion, METH_O,
     "guard_c_recursion(ndarray): tuple's hash and ndarray's number slots check the recursion depth"},
    {"set_limit", set_limit, METH_VARARGS, "set_limit(limit_bytes, baseline_bytes): 0 turns the bound off"},
    {"refused", refused, METH_NOARGS, "refused() -> bytes of the last refused allocation since set_limit"},
    {NULL, NULL, 0, NULL}
};

static struct PyModuleDef allocbound_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "sandbox_kernel._numpyguard",
    .m_doc = "numpy's C-level guards: a bounded allocator, checked construction and buffer export, the raw-protocol sink; the class-creation and class-write sinks.",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__numpyguard(void)
{
    PyObject *m;
    if (PyType_Ready(&AbsentProtocolType) < 0)
        return NULL;
    m = PyModule_Create(&allocbound_module);
    if (m == NULL)
        return NULL;
    /* guards.py takes a build only when its VERSION is the source's: a stale build is refused (fail closed) */
    if (PyModule_AddIntConstant(m, "VERSION", 3) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&AbsentProtocolType);
    if (PyModule_AddObject(m, "AbsentProtocol", (PyObject *)&AbsentProtocolType) < 0) {
        Py_DECREF(&AbsentProtocolType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
