/* The hottest gates, in C: a * b, a % b, x in c, and reading a plain attribute through an expression.
 *
 * Why C: a Python-level gate costs a frame and a handful of type checks (60-90 ns); in loops of
 * arithmetic that is most of the sandbox's overhead. These functions only ever take the *fast*
 * decision, the one that needs no policy: exact ints small enough that the result cannot be huge,
 * exact floats, a left operand that is a number (so '%' cannot be string formatting), an instance
 * of a class in the own-classes set. Everything else goes to the Python gate given at construction,
 * which stays the single place where sizes and attributes are decided. If this file does not
 * compile, sandbox_kernel.gates uses the same fast paths written in Python (slower, same answers).
 *
 * Also here: the gate on str.format and str.format_map for every caller in the process (the cell's own
 * calls already go through gates.py; these are a library's, such as pandas' Styler.format(template)).
 * A template with an attribute field ('{0.__globals__}') goes to a Python gate; any other is formatted
 * by the original methods at once.
 *
 * Also here: CachedGates, Gates.getattr's and Gates.write's cache hits in C (a read or write of a module's or
 * a type's instances' attribute already decided): the same steps as their Python, whose other paths they call.
 *
 * Also here: the tick (CellTick), the first thing every function body, loop step, except and finally
 * block of a cell does: a C call that refuses, through the budget, to run a cell's code on a thread that is
 * not confined.
 *
 * No state besides the references a FastGates and a CellTick hold and the three the format gate keeps.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>

/* Raised whenever FastGates' interface changes (gates.py refuses any other build). */
#define FASTGATES_VERSION 5

/* |x| < 2**31 for both operands: the product fits in 62 bits, far below any size cap. */
#define SMALL_LIMIT (1LL << 31)

typedef struct {
    PyObject_HEAD
    PyObject *slow_mul;      /* gates' mul(a, b): sizes checked in Python */
    PyObject *slow_mod;      /* gates' mod(a, b): %-format widths checked in Python */
    PyObject *slow_getattr;  /* gates' getattr(obj, name) */
    PyObject *own;           /* the set of the cell's own classes (shared, grows as cells define classes) */
    PyObject *slow_contains; /* gates' contains(container, item): charges what C would iterate */
    PyObject *slow_pow;      /* gates' pow(a, k): a ** k (k a small int constant), sizes checked in Python */
} FastGates;

static int
is_small_int(PyObject *x)
{
    int overflow = 0;
    long long v;
    if (!PyLong_CheckExact(x))
        return 0;
    v = PyLong_AsLongLongAndOverflow(x, &overflow);
    if (overflow)
        return 0;
    if (v == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return v > -SMALL_LIMIT && v < SMALL_LIMIT;
}

/* After tp_clear (a dying engine) the references are NULL: a call then fails cleanly. */
static int
check_call(FastGates *self, Py_ssize_t nargs, const char *what)
{
    if (self->slow_mul == NULL || self->slow_mod == NULL || self->slow_getattr == NULL || self->own == NULL
            || self->slow_contains == NULL || self->slow_pow == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "this engine's gates are gone");
        return 0;
    }
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "%s expects 2 arguments, got %zd", what, nargs);
        return 0;
    }
    return 1;
}

/* 'a * b': a float on either side cannot repeat a sequence or grow an int; two small ints cannot
   make a big one. */
static PyObject *
FastGates_mul(FastGates *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *a, *b;
    if (!check_call(self, nargs, "mul"))
        return NULL;
    a = args[0];
    b = args[1];
    if (PyFloat_CheckExact(a) || PyFloat_CheckExact(b) || (is_small_int(a) && is_small_int(b)))
        return PyNumber_Multiply(a, b);
    return PyObject_Vectorcall(self->slow_mul, args, 2, NULL);
}

/* 'a ** k' with a small int constant k (the rewriter's only use): a float, a complex or a small int cannot grow
   past any cap; a big int (at the cap, x ** 4 is four times it) goes to the gate. */
static PyObject *
FastGates_pow(FastGates *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *a;
    if (!check_call(self, nargs, "pow"))
        return NULL;
    a = args[0];
    if (PyFloat_CheckExact(a) || PyComplex_CheckExact(a) || is_small_int(a))
        return PyNumber_Power(a, args[1], Py_None);
    return PyObject_Vectorcall(self->slow_pow, args, 2, NULL);
}

/* 'a % b': with an int or float on the left it is arithmetic, never string formatting. */
static PyObject *
FastGates_mod(FastGates *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *a;
    if (!check_call(self, nargs, "mod"))
        return NULL;
    a = args[0];
    if (PyLong_CheckExact(a) || PyFloat_CheckExact(a))
        return PyNumber_Remainder(a, args[1]);
    return PyObject_Vectorcall(self->slow_mod, args, 2, NULL);
}

/* 'expr.name' where the rewriter has already ruled out dunder, frame and stand-in names: on an
   instance of one of the cell's own classes it is the cell's attribute, read directly. */
static PyObject *
FastGates_getattr(FastGates *self, PyObject *const *args, Py_ssize_t nargs)
{
    int own;
    if (!check_call(self, nargs, "getattr"))
        return NULL;
    if (PyUnicode_CheckExact(args[1])) {
        own = PySet_Contains(self->own, (PyObject *)Py_TYPE(args[0]));
        if (own < 0)
            return NULL;
        if (own)
            return PyObject_GetAttr(args[0], args[1]);
    }
    return PyObject_Vectorcall(self->slow_getattr, args, 2, NULL);
}

/* 'item in container': for the builtin containers containment is a lookup or a scan of what is
   already in memory; anything else (an iterator, which C would consume) goes to the gate. */
static PyObject *
FastGates_contains(FastGates *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *container;
    PyTypeObject *t;
    int found;
    if (!check_call(self, nargs, "contains"))
        return NULL;
    container = args[0];
    t = Py_TYPE(container);
    /* a range answers an exact int in O(1) and walks itself for anything else (1.5 in range(10**18)) */
    if (t == &PyDict_Type || t == &PySet_Type || t == &PyFrozenSet_Type || t == &PyUnicode_Type
            || t == &PyList_Type || t == &PyTuple_Type || t == &PyBytes_Type
            || t == &PyDictKeys_Type || t == &PyDictItems_Type
            || (t == &PyRange_Type && (PyLong_CheckExact(args[1]) || PyBool_Check(args[1])))) {
        found = PySequence_Contains(container, args[1]);
        if (found < 0)
            return NULL;
        return PyBool_FromLong(found);
    }
    return PyObject_Vectorcall(self->slow_contains, args, 2, NULL);
}

static PyObject *
FastGates_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *mul, *mod, *getattr_, *own, *contains, *pow_;
    FastGates *self;
    static char *kwlist[] = {"mul", "mod", "getattr", "own", "contains", "pow", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOOO:FastGates", kwlist, &mul, &mod, &getattr_, &own,
                                     &contains, &pow_))
        return NULL;
    if (!PyCallable_Check(mul) || !PyCallable_Check(mod) || !PyCallable_Check(getattr_)
            || !PyCallable_Check(contains) || !PyCallable_Check(pow_)) {
        PyErr_SetString(PyExc_TypeError, "FastGates: the slow gates must be callable");
        return NULL;
    }
    if (!PyAnySet_Check(own)) {
        PyErr_SetString(PyExc_TypeError, "FastGates: own must be a set");
        return NULL;
    }
    self = (FastGates *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    Py_INCREF(mul);
    self->slow_mul = mul;
    Py_INCREF(mod);
    self->slow_mod = mod;
    Py_INCREF(getattr_);
    self->slow_getattr = getattr_;
    Py_INCREF(own);
    self->own = own;
    Py_INCREF(contains);
    self->slow_contains = contains;
    Py_INCREF(pow_);
    self->slow_pow = pow_;
    return (PyObject *)self;
}

static int
FastGates_traverse(FastGates *self, visitproc visit, void *arg)
{
    Py_VISIT(self->slow_mul);
    Py_VISIT(self->slow_mod);
    Py_VISIT(self->slow_getattr);
    Py_VISIT(self->own);
    Py_VISIT(self->slow_contains);
    Py_VISIT(self->slow_pow);
    return 0;
}

static int
FastGates_clear(FastGates *self)
{
    Py_CLEAR(self->slow_mul);
    Py_CLEAR(self->slow_mod);
    Py_CLEAR(self->slow_getattr);
    Py_CLEAR(self->own);
    Py_CLEAR(self->slow_contains);
    Py_CLEAR(self->slow_pow);
    return 0;
}

static void
FastGates_dealloc(FastGates *self)
{
    PyObject_GC_UnTrack(self);
    FastGates_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef FastGates_methods[] = {
    {"mul", (PyCFunction)(void (*)(void))FastGates_mul, METH_FASTCALL, "a * b, small ints and floats in C"},
    {"mod", (PyCFunction)(void (*)(void))FastGates_mod, METH_FASTCALL, "a % b, numeric left operand in C"},
    {"pow", (PyCFunction)(void (*)(void))FastGates_pow, METH_FASTCALL, "a ** k for a small constant k, in C"},
    {"contains", (PyCFunction)(void (*)(void))FastGates_contains, METH_FASTCALL,
     "item in container, for the builtin containers in C"},
    {"getattr", (PyCFunction)(void (*)(void))FastGates_getattr, METH_FASTCALL,
     "obj.name for instances of the cell's own classes in C"},
    {NULL, NULL, 0, NULL}
};

static PyTypeObject FastGatesType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "sandbox_kernel._fastgates.FastGates",
    .tp_basicsize = sizeof(FastGates),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The fast paths of the mul, mod and getattr gates; everything else goes to the Python gates.",
    .tp_new = FastGates_new,
    .tp_dealloc = (destructor)FastGates_dealloc,
    .tp_traverse = (traverseproc)FastGates_traverse,
    .tp_clear = (inquiry)FastGates_clear,
    .tp_methods = FastGates_methods,
};

/* -- the cache hits of Gates.getattr and Gates.write -----------------------------------------------------------
 * CachedGates(cache, allow, allow_pure, plain_types, slow, allowed_value, check_value, slow_write):
 * .getattr(obj, name) does what Gates.getattr does when (obj if a module else type(obj), name) is in the
 * cache: allow_pure reads; allow reads and hands out a value of a plain type as it is, a bound method to
 * allowed_value(obj, name, value) (Gates._allowed_value: its function checked), anything else to
 * check_value(value, obj, name) (each type hashed once, as in Python); a substitution is called with obj.
 * .write(obj, name) returns obj when ("w", type(obj), name) is cached as allowed (True).
 * Anything else (a miss, a non-str name, a key whose hash or comparison could run Python code: a metaclass's
 * own) goes to slow / slow_write (Gates.getattr / Gates.write) before anything is hashed. */
typedef struct {
    PyObject_HEAD
    PyObject *cache;          /* Gates._cache (a dict, cleared but never replaced) */
    PyObject *allow;          /* gates._ALLOW */
    PyObject *allow_pure;     /* gates._ALLOW_PURE */
    PyObject *plain;          /* gates._PLAIN_TYPES */
    PyObject *slow;           /* Gates.getattr */
    PyObject *allowed_value;  /* Gates._allowed_value */
    PyObject *check_value;    /* Gates._check_value */
    PyObject *slow_write;     /* Gates.write */
    PyObject *w;              /* "w", the write decisions' key prefix */
} CachedGates;

/* The cache's key part for obj's type may be hashed here: its metaclass hashes and compares as type does. */
static int
plain_key_type(PyTypeObject *t)
{
    PyTypeObject *meta = Py_TYPE(t);
    return meta->tp_hash == PyType_Type.tp_hash && meta->tp_richcompare == PyType_Type.tp_richcompare;
}

static PyObject *
CachedGates_getattr(CachedGates *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *obj, *name, *first, *key, *decision, *value, *result;
    int plain;
    if (self->cache == NULL || self->slow == NULL || self->allowed_value == NULL || self->plain == NULL
            || self->allow == NULL || self->allow_pure == NULL || self->check_value == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "this engine's gates are gone");
        return NULL;
    }
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "getattr expects 2 arguments, got %zd", nargs);
        return NULL;
    }
    obj = args[0];
    name = args[1];
    first = Py_IS_TYPE(obj, &PyModule_Type) ? obj : (PyObject *)Py_TYPE(obj);
    if (!PyUnicode_CheckExact(name) || (first != obj && !plain_key_type(Py_TYPE(obj))))
        return PyObject_Vectorcall(self->slow, args, 2, NULL);
    key = PyTuple_Pack(2, first, name);
    if (key == NULL)
        return NULL;
    decision = PyDict_GetItemWithError(self->cache, key);   /* borrowed */
    Py_DECREF(key);
    if (decision == NULL) {
        if (PyErr_Occurred())
            return NULL;
        return PyObject_Vectorcall(self->slow, args, 2, NULL);
    }
    if (decision == self->allow_pure)
        return PyObject_GetAttr(obj, name);
    if (decision != self->allow) {
        Py_INCREF(decision);   /* the call may clear the cache */
        result = PyObject_CallOneArg(decision, obj);
        Py_DECREF(decision);
        return result;
    }
    value = PyObject_GetAttr(obj, name);
    if (value == NULL)
        return NULL;
    if (Py_IS_TYPE(value, &PyMethod_Type)) {   /* a bound method: its function is checked in Python */
        PyObject *call_args[3] = {obj, name, value};
        result = PyObject_Vectorcall(self->allowed_value, call_args, 3, NULL);
        Py_DECREF(value);
        return result;
    }
    plain = PySet_Contains(self->plain, (PyObject *)Py_TYPE(value));
    if (plain < 0) {
        Py_DECREF(value);
        return NULL;
    }
    if (plain)
        return value;
    {
        PyObject *call_args[3] = {value, obj, name};
        result = PyObject_Vectorcall(self->check_value, call_args, 3, NULL);
    }
    Py_DECREF(value);
    return result;
}

/* write(obj, name): Gates.write's cache hit (the write is allowed: obj); anything else is Gates.write's. */
static PyObject *
CachedGates_write(CachedGates *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *key, *decision;
    if (self->cache == NULL || self->slow_write == NULL || self->w == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "this engine's gates are gone");
        return NULL;
    }
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "write expects 2 arguments, got %zd", nargs);
        return NULL;
    }
    if (!PyUnicode_CheckExact(args[1]) || !plain_key_type(Py_TYPE(args[0])))
        return PyObject_Vectorcall(self->slow_write, args, 2, NULL);
    key = PyTuple_Pack(3, self->w, (PyObject *)Py_TYPE(args[0]), args[1]);
    if (key == NULL)
        return NULL;
    decision = PyDict_GetItemWithError(self->cache, key);   /* borrowed */
    Py_DECREF(key);
    if (decision == Py_True)
        return Py_NewRef(args[0]);
    if (decision == NULL && PyErr_Occurred())
        return NULL;
    return PyObject_Vectorcall(self->slow_write, args, 2, NULL);
}

static PyObject *
CachedGates_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *cache, *allow, *allow_pure, *plain, *slow, *allowed_value, *check_value, *slow_write;
    CachedGates *self;
    static char *kwlist[] = {"cache", "allow", "allow_pure", "plain", "slow", "allowed_value", "check_value",
                             "slow_write", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!OOOOOOO:CachedGates", kwlist, &PyDict_Type, &cache, &allow,
                                     &allow_pure, &plain, &slow, &allowed_value, &check_value, &slow_write))
        return NULL;
    if (!PyAnySet_Check(plain) || !PyCallable_Check(slow) || !PyCallable_Check(allowed_value)
            || !PyCallable_Check(check_value) || !PyCallable_Check(slow_write)) {
        PyErr_SetString(PyExc_TypeError, "CachedGates: plain must be a set, the gates callable");
        return NULL;
    }
    self = (CachedGates *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    Py_INCREF(cache);
    self->cache = cache;
    Py_INCREF(allow);
    self->allow = allow;
    Py_INCREF(allow_pure);
    self->allow_pure = allow_pure;
    Py_INCREF(plain);
    self->plain = plain;
    Py_INCREF(slow);
    self->slow = slow;
    Py_INCREF(allowed_value);
    self->allowed_value = allowed_value;
    Py_INCREF(check_value);
    self->check_value = check_value;
    Py_INCREF(slow_write);
    self->slow_write = slow_write;
    self->w = PyUnicode_InternFromString("w");
    if (self->w == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static int
CachedGates_traverse(CachedGates *self, visitproc visit, void *arg)
{
    Py_VISIT(self->cache);
    Py_VISIT(self->allow);
    Py_VISIT(self->allow_pure);
    Py_VISIT(self->plain);
    Py_VISIT(self->slow);
    Py_VISIT(self->allowed_value);
    Py_VISIT(self->check_value);
    Py_VISIT(self->slow_write);
    return 0;
}

static int
CachedGates_clear(CachedGates *self)
{
    Py_CLEAR(self->cache);
    Py_CLEAR(self->allow);
    Py_CLEAR(self->allow_pure);
    Py_CLEAR(self->plain);
    Py_CLEAR(self->slow);
    Py_CLEAR(self->allowed_value);
    Py_CLEAR(self->check_value);
    Py_CLEAR(self->slow_write);
    Py_CLEAR(self->w);
    return 0;
}

static void
CachedGates_dealloc(CachedGates *self)
{
    PyObject_GC_UnTrack(self);
    CachedGates_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef CachedGates_methods[] = {
    {"getattr", (PyCFunction)(void (*)(void))CachedGates_getattr, METH_FASTCALL,
     "Gates.getattr(obj, name), its cache hits in C"},
    {"write", (PyCFunction)(void (*)(void))CachedGates_write, METH_FASTCALL,
     "Gates.write(obj, name), its cache hits in C"},
    {NULL, NULL, 0, NULL}
};

static PyTypeObject CachedGatesType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "sandbox_kernel._fastgates.CachedGates",
    .tp_basicsize = sizeof(CachedGates),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Gates.getattr with its cache hits in C; everything else goes to the Python gate.",
    .tp_new = CachedGates_new,
    .tp_dealloc = (destructor)CachedGates_dealloc,
    .tp_traverse = (traverseproc)CachedGates_traverse,
    .tp_clear = (inquiry)CachedGates_clear,
    .tp_methods = CachedGates_methods,
};

/* -- the tick ------------------------------------------------------------------------------------------------ */

/* CellTick(source, cell_thread, elsewhere): what a cell's code calls at every function entry, loop step,
   except and finally block (limits.Budget installs it as __st_tick__). On the cell's own thread it is the
   tick: the next item of `source` (the budget's chain, called in C without a method wrapper) or, when
   `source` is a function (a tripped limit's re-raiser), its call. On any other thread it calls `elsewhere`,
   which decides in Python: a cell's code may run on a thread the cell started, never on the kernel's own
   (the garbage collector runs a cell's __del__ on whichever thread collects). */
typedef struct {
    PyObject_HEAD
    PyObject *source;
    iternextfunc next;        /* source's tp_iternext, or NULL: source is called */
    unsigned long thread;     /* the cell's thread (PyThread_get_thread_ident) */
    PyObject *elsewhere;
    vectorcallfunc vectorcall;
} CellTick;

static PyObject *
CellTick_vectorcall(PyObject *op, PyObject *const *Py_UNUSED(args), size_t nargsf, PyObject *kwnames)
{
    CellTick *self = (CellTick *)op;
    PyObject *item;
    if (PyVectorcall_NARGS(nargsf) != 0 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames) != 0)) {
        PyErr_SetString(PyExc_TypeError, "the tick takes no arguments");
        return NULL;
    }
    if (self->source == NULL || self->elsewhere == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "this engine's tick is gone");
        return NULL;
    }
    if (PyThread_get_thread_ident() != self->thread)
        return PyObject_CallNoArgs(self->elsewhere);
    if (self->next == NULL)
        return PyObject_CallNoArgs(self->source);
    item = self->next(self->source);
    if (item == NULL && !PyErr_Occurred())
        PyErr_SetNone(PyExc_StopIteration);   /* as chain.__next__ would: the budget checks for it */
    return item;
}

static PyObject *
CellTick_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *source, *elsewhere;
    unsigned long thread;
    CellTick *self;
    static char *kwlist[] = {"source", "cell_thread", "elsewhere", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OkO:CellTick", kwlist, &source, &thread, &elsewhere))
        return NULL;
    if (!PyCallable_Check(elsewhere) || !(PyIter_Check(source) || PyCallable_Check(source))) {
        PyErr_SetString(PyExc_TypeError, "CellTick: source must be an iterator or callable, elsewhere callable");
        return NULL;
    }
    self = (CellTick *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    Py_INCREF(source);
    self->source = source;
    self->next = PyIter_Check(source) ? Py_TYPE(source)->tp_iternext : NULL;
    self->thread = thread;
    Py_INCREF(elsewhere);
    self->elsewhere = elsewhere;
    self->vectorcall = CellTick_vectorcall;
    return (PyObject *)self;
}

static int
CellTick_traverse(CellTick *self, visitproc visit, void *arg)
{
    Py_VISIT(self->source);
    Py_VISIT(self->elsewhere);
    return 0;
}

static int
CellTick_clear(CellTick *self)
{
    Py_CLEAR(self->source);
    Py_CLEAR(self->elsewhere);
    return 0;
}

static void
CellTick_dealloc(CellTick *self)
{
    PyObject_GC_UnTrack(self);
    CellTick_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject CellTickType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "sandbox_kernel._fastgates.CellTick",
    .tp_basicsize = sizeof(CellTick),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A cell's tick: the budget's next step on the cell's thread, a decision in Python elsewhere.",
    .tp_new = CellTick_new,
    .tp_dealloc = (destructor)CellTick_dealloc,
    .tp_traverse = (traverseproc)CellTick_traverse,
    .tp_clear = (inquiry)CellTick_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(CellTick, vectorcall),
};

/* -- the format gate ------------------------------------------------------------------------------------ */

static PyObject *original_format = NULL;      /* str.format as the str type held it */
static PyObject *original_format_map = NULL;  /* str.format_map */
static PyObject *format_gate = NULL;          /* gate(original, template, *args, **kwargs) */

/* 1 when some field of the template may read an attribute or an item ('{0.x}', '{0[k]}', nested in a
   spec or not). Conservative: every '{' starts a candidate field name, which ends at '}', ':', '!' or
   the next '{' (so escaped braces only cost a trip through the gate). Linear: the scans never overlap. */
static int
has_lookup_field(PyObject *template)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(template), i, j;
    int kind = PyUnicode_KIND(template);
    const void *data = PyUnicode_DATA(template);
    Py_UCS4 c;
    for (i = 0; i < n; i++) {
        if (PyUnicode_READ(kind, data, i) != '{')
            continue;
        for (j = i + 1; j < n; j++) {
            c = PyUnicode_READ(kind, data, j);
            if (c == '.' || c == '[')
                return 1;
            if (c == '}' || c == ':' || c == '!' || c == '{')
                break;
        }
        i = j - 1;
    }
    return 0;
}

/* original(self, *args, **kwargs) or gate(original, self, *args, **kwargs), args in vectorcall form. */
static PyObject *
call_with_prefix(PyObject *callable, PyObject *const *prefix, Py_ssize_t nprefix, PyObject *const *args,
                 Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *small[8], **stack, *result;
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames), total = nprefix + nargs + nkw, i;
    stack = total <= 8 ? small : PyMem_Malloc(total * sizeof(PyObject *));
    if (stack == NULL)
        return PyErr_NoMemory();
    for (i = 0; i < nprefix; i++)
        stack[i] = prefix[i];
    for (i = 0; i < nargs + nkw; i++)
        stack[nprefix + i] = args[i];
    result = PyObject_Vectorcall(callable, stack, nprefix + nargs, kwnames);
    if (stack != small)
        PyMem_Free(stack);
    return result;
}

static PyObject *
gated_call(PyObject *original, PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *prefix[2];
    if (original == NULL || format_gate == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "the format gate is not installed");
        return NULL;
    }
    if (!PyUnicode_Check(self) || !has_lookup_field(self)) {
        prefix[0] = self;
        return call_with_prefix(original, prefix, 1, args, nargs, kwnames);
    }
    prefix[0] = original;
    prefix[1] = self;
    return call_with_prefix(format_gate, prefix, 2, args, nargs, kwnames);
}

static PyObject *
gated_format(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    return gated_call(original_format, self, args, nargs, kwnames);
}

static PyObject *
gated_format_map(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    return gated_call(original_format_map, self, args, nargs, kwnames);
}

static PyMethodDef gated_format_def = {
    "format", (PyCFunction)(void (*)(void))gated_format, METH_FASTCALL | METH_KEYWORDS,
    "S.format(*args, **kwargs) -> str (a template whose fields read attributes or items goes through the "
    "sandbox's format gate while a cell runs)"};
static PyMethodDef gated_format_map_def = {
    "format_map", (PyCFunction)(void (*)(void))gated_format_map, METH_FASTCALL | METH_KEYWORDS,
    "S.format_map(mapping) -> str (gated like S.format)"};

static PyObject *
str_namespace(void)
{
#if PY_VERSION_HEX >= 0x030C0000
    return PyType_GetDict(&PyUnicode_Type);
#else
    Py_XINCREF(PyUnicode_Type.tp_dict);
    return PyUnicode_Type.tp_dict;
#endif
}

/* install_format_gate(gate): str.format and str.format_map become the gated methods (once per process);
   returns (original format, original format_map). */
static PyObject *
install_format_gate(PyObject *Py_UNUSED(module), PyObject *gate)
{
    PyObject *namespace, *descr;
    if (!PyCallable_Check(gate)) {
        PyErr_SetString(PyExc_TypeError, "install_format_gate: the gate must be callable");
        return NULL;
    }
    namespace = str_namespace();
    if (namespace == NULL)
        return NULL;
    if (original_format == NULL) {
        original_format = PyDict_GetItemString(namespace, "format");
        original_format_map = PyDict_GetItemString(namespace, "format_map");
        if (original_format == NULL || original_format_map == NULL) {
            original_format = original_format_map = NULL;
            Py_DECREF(namespace);
            PyErr_SetString(PyExc_RuntimeError, "install_format_gate: str has no format method");
            return NULL;
        }
        Py_INCREF(original_format);
        Py_INCREF(original_format_map);
        descr = PyDescr_NewMethod(&PyUnicode_Type, &gated_format_def);
        if (descr == NULL || PyDict_SetItemString(namespace, "format", descr) < 0) {
            Py_XDECREF(descr);
            Py_DECREF(namespace);
            return NULL;
        }
        Py_DECREF(descr);
        descr = PyDescr_NewMethod(&PyUnicode_Type, &gated_format_map_def);
        if (descr == NULL || PyDict_SetItemString(namespace, "format_map", descr) < 0) {
            Py_XDECREF(descr);
            Py_DECREF(namespace);
            return NULL;
        }
        Py_DECREF(descr);
        PyType_Modified(&PyUnicode_Type);
    }
    Py_DECREF(namespace);
    Py_INCREF(gate);
    Py_XSETREF(format_gate, gate);
    return Py_BuildValue("(OO)", original_format, original_format_map);
}

static PyObject *
lookup_fields(PyObject *Py_UNUSED(module), PyObject *template)
{
    if (!PyUnicode_Check(template)) {
        PyErr_SetString(PyExc_TypeError, "lookup_fields: a str is needed");
        return NULL;
    }
    return PyBool_FromLong(has_lookup_field(template));
}

static PyMethodDef module_methods[] = {
    {"install_format_gate", install_format_gate, METH_O,
     "str.format and str.format_map through the gate for templates with lookup fields; returns the originals"},
    {"lookup_fields", lookup_fields, METH_O, "whether a template has a field that may read an attribute or item"},
    {NULL, NULL, 0, NULL}
};

static struct PyModuleDef fastgates_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "sandbox_kernel._fastgates",
    .m_doc = "C fast paths of three sandbox gates (see gates.make_fast_gates) and the format gate.",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC
PyInit__fastgates(void)
{
    PyObject *m;
    if (PyType_Ready(&FastGatesType) < 0 || PyType_Ready(&CellTickType) < 0 || PyType_Ready(&CachedGatesType) < 0)
        return NULL;
    m = PyModule_Create(&fastgates_module);
    if (m == NULL)
        return NULL;
    /* the Python side checks it: a stale build of an older source is not used (gates._fastgates) */
    if (PyModule_AddIntConstant(m, "VERSION", FASTGATES_VERSION) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&FastGatesType);
    if (PyModule_AddObject(m, "FastGates", (PyObject *)&FastGatesType) < 0) {
        Py_DECREF(&FastGatesType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&CellTickType);
    if (PyModule_AddObject(m, "CellTick", (PyObject *)&CellTickType) < 0) {
        Py_DECREF(&CellTickType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&CachedGatesType);
    if (PyModule_AddObject(m, "CachedGates", (PyObject *)&CachedGatesType) < 0) {
        Py_DECREF(&CachedGatesType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
