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
 * Only the stable C API; no state besides the four references a FastGates holds.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* Raised whenever FastGates' interface changes (gates.py refuses any other build). */
#define FASTGATES_VERSION 2

/* |x| < 2**31 for both operands: the product fits in 62 bits, far below any size cap. */
#define SMALL_LIMIT (1LL << 31)

typedef struct {
    PyObject_HEAD
    PyObject *slow_mul;      /* gates' mul(a, b): sizes checked in Python */
    PyObject *slow_mod;      /* gates' mod(a, b): %-format widths checked in Python */
    PyObject *slow_getattr;  /* gates' getattr(obj, name) */
    PyObject *own;           /* the set of the cell's own classes (shared, grows as cells define classes) */
    PyObject *slow_contains; /* gates' contains(container, item): charges what C would iterate */
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
            || self->slow_contains == NULL) {
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
    PyObject *mul, *mod, *getattr_, *own, *contains;
    FastGates *self;
    static char *kwlist[] = {"mul", "mod", "getattr", "own", "contains", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOO:FastGates", kwlist, &mul, &mod, &getattr_, &own,
                                     &contains))
        return NULL;
    if (!PyCallable_Check(mul) || !PyCallable_Check(mod) || !PyCallable_Check(getattr_)
            || !PyCallable_Check(contains)) {
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

static struct PyModuleDef fastgates_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "sandbox_kernel._fastgates",
    .m_doc = "C fast paths of three sandbox gates (see gates.make_fast_gates).",
    .m_size = -1,
};

PyMODINIT_FUNC
PyInit__fastgates(void)
{
    PyObject *m;
    if (PyType_Ready(&FastGatesType) < 0)
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
    return m;
}
