"""Source -> checked, rewritten AST -> code object. Pure: no runtime state. SECURITY CORE.

Every AST node type a cell may contain has a ``visit_*`` method here; ``generic_visit`` rejects the
rest, so a construct added to Python later is refused until someone decides what it means (fail closed).
Each docstring shows the rewrite. The gate functions named ``__st_*__`` live in gates.py; cells cannot
name them (or any other ``__st_`` name) at any binding or reading site.
"""
from __future__ import annotations

import ast
import sys

from .denials import NameDenied, ValidationDenied, genuine

GATE_PREFIX = "__st_"

# Names a cell may never read or bind, beyond the reserved gate prefix.
FORBIDDEN_NAMES = frozenset({
    "__builtins__", "__build_class__", "__import__", "__loader__", "__spec__", "__dict__",
    "__file__", "__cached__", "__path__", "__package__", "__debug__",
    # numpy builds arrays over any address an object's array interface names: a class that defines
    # one reads and writes the process's memory.
    "__array_interface__", "__array_struct__",
    # copy/deepcopy follow __reduce__ to any callable and then update the result's __dict__: a cell's
    # own __reduce__ could make them write into a module or a library class.
    "__reduce__", "__reduce_ex__",
})
# Bound only by Python itself; a cell may read them but not rebind them.
READ_ONLY_NAMES = frozenset({"__class__", "__name__", "__qualname__", "__module__"})

# Attribute names that are refused statically in `match` class patterns. The same names are refused
# at run time by the attribute gate; patterns read attributes without an Attribute node, so the
# rewriter must check them here.
FRAME_ATTRIBUTES = frozenset({
    "gi_frame", "gi_code", "gi_yieldfrom", "gi_suspended", "cr_frame", "cr_code", "cr_await", "cr_origin",
    "ag_frame", "ag_code", "ag_await", "f_back", "f_globals", "f_locals", "f_builtins", "f_code",
    "f_trace", "f_lasti", "tb_frame", "tb_next", "tb_lasti", "co_code", "func_globals", "func_code",
})

# Calls whose argument is consumed in C; the gate charges its length before the call starts.
SIZED_CALLS = frozenset({
    "list", "tuple", "set", "frozenset", "dict", "bytes", "bytearray", "sorted", "sum", "min", "max",
    "any", "all",
})   # not str: str(x) does not consume an iterable (and str(huge int) is refused by CPython itself)

# Methods of builtin data that the gates replace with stand-ins (format traversal, padding sizes, C
# consumers of iterables): the inline own-instance path never applies to these names.
DATA_METHODS_WITH_STAND_INS = frozenset({
    "format", "format_map", "ljust", "rjust", "center", "zfill", "expandtabs", "extend", "update",
    "extendleft", "union", "intersection", "difference", "symmetric_difference", "fromkeys", "join",
    "replace", "translate", "isdisjoint", "issubset", "issuperset", "count", "index", "intersection_update",
    "difference_update", "symmetric_difference_update",
})

# The largest constant exponent / multiplier that is left ungated (x**2, x*3.0 stay fast).
_SMALL_EXPONENT = 4

CELL_FILENAME_PREFIX = "<cell-"


def cell_filename(n: int | str) -> str:
    return f"{CELL_FILENAME_PREFIX}{n}>"


def _gate(name: str) -> ast.Name:
    return ast.Name(id=f"{GATE_PREFIX}{name}__", ctx=ast.Load())


def _call(gate: str, *args: ast.expr, keywords=()) -> ast.Call:
    return ast.Call(func=_gate(gate), args=list(args), keywords=list(keywords))


def _const(value) -> ast.Constant:
    return ast.Constant(value=value)


def _tick_stmt() -> ast.Expr:
    return ast.Expr(value=_call("tick"))


def _is_number_const(node: ast.expr, kinds=(float, complex)) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) in kinds


# The largest integer result of two constants the rewriter leaves ungated (bits): far below the size cap.
_CONSTANT_RESULT_BITS = 4096


def _small_constant_result(op, a, b) -> bool:
    """a op b of two number constants has at most _CONSTANT_RESULT_BITS bits (or is no integer at all)."""
    if type(a) is not int or type(b) is not int:
        return op is not ast.LShift   # a float or complex power or product is a float's size
    if op is ast.Pow:
        return b < 0 or abs(a) <= 1 or a.bit_length() * b <= _CONSTANT_RESULT_BITS
    if op is ast.LShift:
        return b <= 64 and a.bit_length() + b <= _CONSTANT_RESULT_BITS
    return a.bit_length() + b.bit_length() <= _CONSTANT_RESULT_BITS


def _small_int_const(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int and abs(node.value) <= _SMALL_EXPONENT


_OP_NAMES = {ast.Mult: "*", ast.Pow: "**", ast.LShift: "<<", ast.MatMult: "@"}


def _has_starred(target) -> bool:
    return any(isinstance(n, ast.Starred) for n in ast.walk(target))


def _unpack_shape(target) -> ast.expr:
    """What the starred gate must materialise for a target, as a constant: None where nothing below
    is starred, else (index of the star at this level or -1, child shapes)."""
    if isinstance(target, ast.Starred):
        return _unpack_shape(target.value)
    if not isinstance(target, (ast.Tuple, ast.List)) or not _has_starred(target):
        return _const(None)
    star = next((i for i, e in enumerate(target.elts) if isinstance(e, ast.Starred)), -1)
    return ast.Tuple(elts=[_const(star), ast.Tuple(elts=[_unpack_shape(e) for e in target.elts], ctx=ast.Load())],
                     ctx=ast.Load())


def _private_mangled(name: str, class_name: str | None) -> str:
    """The variable Python means by name inside class class_name: '__m' is '_K__m' there, and a
    body may name it either way."""
    if class_name and name.startswith("__") and not name.endswith("__"):
        stripped = class_name.lstrip("_")
        if stripped:
            return f"_{stripped}{name}"
    return name


def _never_rebound_parameters(func, class_name: str | None = None) -> list[str]:
    """The function's named parameters that nothing in it (nested scopes included) binds again:
    assignment of any kind, del, for/with/except/import/match targets, def/class names, global and
    nonlocal. Conservative: a nested scope's own binding of the name counts too. Names are compared
    as Python resolves them, after private-name mangling (class_name: the innermost enclosing class);
    a parameter with a private name is left out altogether."""
    a = func.args
    params = [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs
              if not (p.arg.startswith("__") and not p.arg.endswith("__"))]
    if not params:
        return []
    bound = set()
    classes = {class_name} if class_name else set()
    for n in ast.walk(ast.Module(body=func.body, type_ignores=[])):
        if isinstance(n, ast.ClassDef):
            classes.add(n.name)   # names inside a nested class mangle with its name
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            bound.add(n.id)
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            bound.update(n.names)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(n.name)
        elif isinstance(n, ast.ExceptHandler) and n.name:
            bound.add(n.name)
        elif isinstance(n, ast.alias):
            bound.add((n.asname or n.name).split(".")[0])
        elif isinstance(n, (ast.MatchAs, ast.MatchStar)) and n.name:
            bound.add(n.name)
        elif isinstance(n, ast.MatchMapping) and n.rest:
            bound.add(n.rest)
        elif isinstance(n, ast.arg):
            bound.add(n.arg)   # a nested function's parameter of the same name
    bound |= {_private_mangled(b, c) for b in bound for c in classes}
    return [p for p in params if p not in bound and _private_mangled(p, class_name) not in bound]


class Rewriter(ast.NodeTransformer):
    """Validates and rewrites one cell. Raises ValidationDenied / NameDenied on the first problem."""

    def __init__(self):
        self._class_names: list[str] = []   # for private-name mangling
        self._function_depth = 0
        self._hoisted: list[list] = []       # class-pattern stand-ins, per enclosing match
        self._match_classes = 0
        # parameters of the function being rewritten whose own-instance check is made once, at entry:
        # name -> [flag name, uses]; empty in nested scopes (lambdas, comprehensions, classes)
        self._entry_checked: dict = {}
        self._module_names: set[str] = set()  # names the cell binds by import (np, pd): never own instances

    # -- helpers -------------------------------------------------------------------------------

    def _deny(self, node, what: str, rule: str):
        exc = genuine(ValidationDenied(what, rule))
        exc.set_line(getattr(node, "lineno", None))
        raise exc

    def _check_name(self, name: str | None, node, *, binding: bool) -> None:
        if name is None:
            return
        if name.startswith(GATE_PREFIX) or name in FORBIDDEN_NAMES or (binding and name in READ_ONLY_NAMES):
            exc = genuine(NameDenied(name, "names of the sandbox runtime cannot be used by cells"))
            exc.set_line(getattr(node, "lineno", None))
            raise exc

    def _mangle(self, attr: str) -> str:
        """Python mangles ``self.__x`` inside ``class C`` to ``_C__x``; gate strings must match."""
        if self._class_names and attr.startswith("__") and not attr.endswith("__"):
            cls = self._class_names[-1].lstrip("_")
            if cls:
                return f"_{cls}{attr}"
        return attr

    def generic_visit(self, node):
        self._deny(node, f"the construct '{type(node).__name__}'", "it has no rule in the sandbox rewriter")

    def _visit_children(self, node):
        return ast.NodeTransformer.generic_visit(self, node)

    def _visit_body(self, stmts):
        out = []
        for s in stmts:
            r = self.visit(s)
            if r is None:
                continue
            out.extend(r if isinstance(r, list) else [r])
        return out

    # -- modules -------------------------------------------------------------------------------

    def visit_Module(self, node):
        """The cell itself: its statements are visited in order."""
        node.body = self._visit_body(node.body)
        return node

    def visit_Expression(self, node):
        """A single expression (user_expressions): visited as is."""
        node.body = self.visit(node.body)
        return node

    # -- definitions ---------------------------------------------------------------------------

    def _check_arguments(self, args: ast.arguments):
        for a in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg]:
            if a is not None:
                self._check_name(a.arg, a, binding=True)

    def _function(self, node):
        """'def f(a): body' becomes 'def f(a): __st_tick__(); body'; decorators, defaults and
        annotations are rewritten like any expression."""
        self._check_name(node.name, node, binding=True)
        self._check_arguments(node.args)
        node.decorator_list = [self.visit(d) for d in node.decorator_list]
        node.args = self.visit(node.args)
        if node.returns is not None:
            node.returns = self.visit(node.returns)
        for tp in getattr(node, "type_params", None) or []:
            self.visit(tp)
        self._function_depth += 1
        outer, self._entry_checked = self._entry_checked, {
            name: [f"{GATE_PREFIX}own_{name}__", 0]
            for name in _never_rebound_parameters(node, self._class_names[-1] if self._class_names else None)}
        try:
            body = self._visit_body(node.body)
            checked = self._entry_checked
        finally:
            self._function_depth -= 1
            self._entry_checked = outer
        doc = []
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            doc, body = body[:1], body[1:]
        tick = ast.copy_location(_tick_stmt(), node)
        flags = [ast.copy_location(ast.Assign(targets=[ast.Name(id=flag, ctx=ast.Store())],
                                              value=self._is_own_instance(name, at_entry=True)), node)
                 for name, (flag, uses) in checked.items() if uses]
        node.body = doc + [tick] + flags + (body or [ast.copy_location(ast.Pass(), node)])
        return node

    visit_FunctionDef = _function
    visit_AsyncFunctionDef = _function

    def visit_Lambda(self, node):
        """'lambda x: e' becomes 'lambda x: __st_tick__() or e' (the tick returns None)."""
        self._check_arguments(node.args)
        node.args = self.visit(node.args)
        outer, self._entry_checked = self._entry_checked, {}
        try:
            body = self.visit(node.body)
        finally:
            self._entry_checked = outer
        node.body = ast.copy_location(ast.BoolOp(op=ast.Or(), values=[_call("tick"), body]), body)
        return node

    def visit_arguments(self, node):
        """Parameters: names are checked by the caller; defaults and annotations are rewritten."""
        for a in node.posonlyargs + node.args + node.kwonlyargs + [node.vararg, node.kwarg]:
            if a is not None and a.annotation is not None:
                a.annotation = self.visit(a.annotation)
        node.defaults = [self.visit(d) for d in node.defaults]
        node.kw_defaults = [self.visit(d) if d is not None else None for d in node.kw_defaults]
        return node

    def visit_ClassDef(self, node):
        """'class C(B): body' stays a class statement; the sandbox's ``__build_class__`` (gates.py)
        checks the bases and metaclass and records C as sandbox-defined."""
        self._check_name(node.name, node, binding=True)
        node.decorator_list = [self.visit(d) for d in node.decorator_list]
        node.bases = [self.visit(b) for b in node.bases]
        node.keywords = [self.visit(k) for k in node.keywords]
        for tp in getattr(node, "type_params", None) or []:
            self.visit(tp)
        self._class_names.append(node.name)
        outer, self._entry_checked = self._entry_checked, {}
        try:
            node.body = self._visit_body(node.body) or [ast.copy_location(ast.Pass(), node)]
        finally:
            self._class_names.pop()
            self._entry_checked = outer
        return node

    def visit_TypeVar(self, node):
        """'class C[T: int]': the type parameter's name is checked; its bound is rewritten."""
        self._check_name(node.name, node, binding=True)
        if getattr(node, "bound", None) is not None:
            node.bound = self.visit(node.bound)
        if getattr(node, "default_value", None) is not None:
            node.default_value = self.visit(node.default_value)
        return node

    def visit_ParamSpec(self, node):
        """'def f[**P]()': the name is checked."""
        self._check_name(node.name, node, binding=True)
        if getattr(node, "default_value", None) is not None:
            node.default_value = self.visit(node.default_value)
        return node

    visit_TypeVarTuple = visit_ParamSpec

    def visit_TypeAlias(self, node):
        """'type X = int': the alias name is checked; the value is rewritten."""
        self._visit_children(node)
        return node

    # -- names and attributes ------------------------------------------------------------------

    def visit_Name(self, node):
        """A name is checked against the reserved namespace; it is otherwise unchanged."""
        self._check_name(node.id, node, binding=not isinstance(node.ctx, ast.Load))
        return node

    @staticmethod
    def _own_attribute_name(attr) -> bool:
        """A name that, on an instance of the cell's own classes, is the cell's own business: not a
        dunder, not a frame attribute, not a method the gates replace with a stand-in."""
        return (not attr.startswith("__") and attr not in FRAME_ATTRIBUTES and attr != "mro"
                and attr not in DATA_METHODS_WITH_STAND_INS)

    def _receiver_fast_path(self, value, attr) -> bool:
        """name.x (self.x, p.x): worth an inline own-instance check (see visit_Attribute); names the cell
        bound by import are modules, never own instances."""
        return isinstance(value, ast.Name) and value.id not in self._module_names and self._own_attribute_name(attr)

    def _is_own_instance(self, name: str, at_entry: bool = False) -> ast.expr:
        """'__st_type__(self) in __st_own__': self's class is one the cell defined from its own classes
        and object only; every non-dunder attribute of such an instance is the cell's to read and write.
        For a parameter the function never rebinds, the answer cannot change while the function runs
        (classes join the set once and never leave it; __class__ is not writable): it is computed at
        entry into '__st_own_self__', and each use reads that local."""
        entry = None if at_entry else self._entry_checked.get(name)
        if entry is not None:
            entry[1] += 1
            return ast.Name(id=entry[0], ctx=ast.Load())
        return ast.Compare(left=_call("type", ast.Name(id=name, ctx=ast.Load())), ops=[ast.In()],
                           comparators=[_gate("own")])

    def visit_Attribute(self, node):
        """'a.b' becomes '__st_getattr__(a, "b")'; as a store or delete target,
        'a.b = v' becomes '__st_write__(a, "b").b = v' (the gate returns a only if the write is allowed).
        For a name, 'p.b' becomes 'p.b if __st_type__(p) in __st_own__ else __st_getattr__(p, "b")'
        (and likewise for stores): the instance of a class the cell wholly defined needs no gate for a
        non-dunder name, and OOP code spends its time there. Any other receiver, 'f().b', becomes
        '__st_ownattr__(f(), "b")', the same check in one call (C when compiled) before the gate."""
        attr = self._mangle(node.attr)
        value = self.visit(node.value)
        fast = self._receiver_fast_path(value, attr)
        if isinstance(node.ctx, ast.Load):
            if not fast:
                gate = "ownattr" if self._own_attribute_name(attr) and not isinstance(value, ast.Name) else "getattr"
                return ast.copy_location(_call(gate, value, _const(attr)), node)
            gated = ast.copy_location(_call("getattr", value, _const(attr)), node)
            raw = ast.Attribute(value=ast.Name(id=value.id, ctx=ast.Load()), attr=attr, ctx=ast.Load())
            return ast.copy_location(ast.IfExp(test=self._is_own_instance(value.id), body=raw, orelse=gated), node)
        checked = ast.copy_location(_call("write", value, _const(attr)), node)
        if fast:
            checked = ast.copy_location(ast.IfExp(test=self._is_own_instance(value.id),
                                                  body=ast.Name(id=value.id, ctx=ast.Load()), orelse=checked), node)
        return ast.copy_location(ast.Attribute(value=checked, attr=attr, ctx=node.ctx), node)

    def visit_Subscript(self, node):
        """'a[i]' is unchanged (items are data, not attributes)."""
        return self._visit_children(node)

    def visit_Starred(self, node):
        """'f(*a)', '[*a]' become 'f(*__st_starred__(a))', '[*__st_starred__(a)]': C would consume a
        whole iterator there, so its length is charged (and a list or tuple passes as it is). A
        starred target ('a, *b = ...') is unchanged; the value it unpacks is charged (visit_Assign)."""
        node = self._visit_children(node)
        if isinstance(node.ctx, ast.Load):
            node.value = ast.copy_location(_call("starred", node.value), node.value)
        return node

    # -- statements ----------------------------------------------------------------------------

    def visit_Expr(self, node):
        """An expression statement is rewritten inside."""
        return self._visit_children(node)

    def visit_Assign(self, node):
        """'a = b': targets and value are rewritten; 'a, *b = it' becomes 'a, *b = __st_starred__(it)'."""
        node = self._visit_children(node)
        if len(node.targets) == 1 and _has_starred(node.targets[0]):
            node.value = ast.copy_location(_call("unpacked", node.value, _unpack_shape(node.targets[0])), node.value)
        elif any(_has_starred(t) for t in node.targets):
            node.value = ast.copy_location(_call("starred", node.value), node.value)
        return node

    def visit_AnnAssign(self, node):
        """'a: T = b': target, annotation and value are rewritten."""
        return self._visit_children(node)

    def visit_AugAssign(self, node):
        """'a.b += v' becomes '__st_augattr__(a, "b", "+=", v)' (read and write both gated);
        'x *= n' becomes 'x = __st_aug__(x, "*=", n)' (size-checked; 'x %= y' too, for %-formats);
        'a[i] **= n' becomes
        '__st_augitem__(a, i, "**=", n)'. Other augmented assignments are unchanged."""
        op = type(node.op)
        value = self.visit(node.value)
        sized = op in _OP_NAMES and not self._cheap_binop(op, node.target, node.value) or op is ast.Mod
        symbol = (_OP_NAMES.get(op) or _AUG_SYMBOLS[op]) + "="
        target = node.target
        if isinstance(target, ast.Attribute):
            obj = self.visit(target.value)
            attr = self._mangle(target.attr)
            call = ast.copy_location(ast.Expr(value=_call("augattr", obj, _const(attr), _const(symbol), value)), node)
            if self._receiver_fast_path(obj, attr) and not sized:
                # 'self.n += 1' in a method: 'if __st_type__(self) in __st_own__: self.n += 1 / else: gate'
                raw = ast.AugAssign(target=ast.Attribute(value=ast.Name(id=obj.id, ctx=ast.Load()), attr=attr,
                                                         ctx=ast.Store()), op=node.op, value=value)
                return ast.copy_location(ast.If(test=self._is_own_instance(obj.id),
                                                body=[ast.copy_location(raw, node)], orelse=[call]), node)
            return call
        if isinstance(target, ast.Name):
            self._check_name(target.id, target, binding=True)
            if sized:
                load = ast.Name(id=target.id, ctx=ast.Load())
                call = _call("aug", load, _const(symbol), value)
                return ast.copy_location(ast.Assign(targets=[target], value=call), node)
            node.value = value
            return node
        if isinstance(target, ast.Subscript):
            if sized:
                call = _call("augitem", self.visit(target.value), self.visit(target.slice), _const(symbol), value)
                return ast.copy_location(ast.Expr(value=call), node)
            node.target = self.visit(target)
            node.value = value
            return node
        self._deny(node, "this augmented assignment target", "only names, attributes and items can be targets")

    def visit_Delete(self, node):
        """'del a.b' becomes 'del __st_write__(a, "b").b'."""
        return self._visit_children(node)

    def visit_Return(self, node):
        """'return e': e is rewritten."""
        return self._visit_children(node)

    def visit_Pass(self, node):
        """'pass' is unchanged."""
        return node

    def visit_Break(self, node):
        """'break' is unchanged."""
        return node

    def visit_Continue(self, node):
        """'continue' is unchanged."""
        return node

    def visit_Global(self, node):
        """'global x': x is checked against the reserved namespace."""
        for n in node.names:
            self._check_name(n, node, binding=True)
        return node

    visit_Nonlocal = visit_Global

    def visit_If(self, node):
        """'if': condition and branches are rewritten."""
        node.test = self.visit(node.test)
        node.body = self._visit_body(node.body)
        node.orelse = self._visit_body(node.orelse)
        return node

    def _loop(self, node):
        """'for x in it: body' becomes 'for x in it: __st_tick__(); body' (likewise while, async for)."""
        if hasattr(node, "target"):
            node.target = self.visit(node.target)
            node.iter = self.visit(node.iter)
            if _has_starred(node.target) and not isinstance(node, ast.AsyncFor):
                # 'for a, *b in rows': each row is charged like 'a, *b = row'
                node.iter = ast.copy_location(_call("starred_rows", node.iter, _unpack_shape(node.target)),
                                              node.iter)
        else:
            node.test = self.visit(node.test)
        node.body = [ast.copy_location(_tick_stmt(), node)] + self._visit_body(node.body)
        node.orelse = self._visit_body(node.orelse)
        return node

    visit_For = _loop
    visit_AsyncFor = _loop
    visit_While = _loop

    def _with(self, node):
        """'with a as b': items and body are rewritten, and 'a' becomes '__st_entered__(a)' (limits.py:
        the manager's exit runs only where the cell's code may run). A starred target,
        'with m as ((a, *b), c)', becomes 'with m as __st_with0__' and
        '((a, *b), c) = __st_unpacked__(__st_with0__, shape)' first in the body, so the unpacking is
        charged like an assignment's."""
        node.items = [self.visit(i) for i in node.items]
        gate = "entered_async" if isinstance(node, ast.AsyncWith) else "entered"
        for item in node.items:
            item.context_expr = ast.copy_location(_call(gate, item.context_expr), item.context_expr)
        unpack = []
        for i, item in enumerate(node.items):
            if item.optional_vars is not None and _has_starred(item.optional_vars):
                temp = f"{GATE_PREFIX}with{i}__"
                value = _call("unpacked", ast.Name(id=temp, ctx=ast.Load()), _unpack_shape(item.optional_vars))
                unpack.append(ast.copy_location(ast.Assign(targets=[item.optional_vars], value=value), item.optional_vars))
                item.optional_vars = ast.Name(id=temp, ctx=ast.Store())
        node.body = unpack + self._visit_body(node.body)
        return node

    visit_With = _with
    visit_AsyncWith = _with

    def visit_withitem(self, node):
        """'a as b' inside with: both are rewritten."""
        return self._visit_children(node)

    def visit_Raise(self, node):
        """'raise e from c' is rewritten inside."""
        return self._visit_children(node)

    def _try(self, node):
        """try/except/else/finally: bodies are rewritten; 'finally: body' becomes
        'finally: __st_tick__(); body', so a suspended generator closed after its cell (by the
        garbage collector) cannot run its finally block outside the cell's confinement."""
        node.body = self._visit_body(node.body)
        node.handlers = [self.visit(h) for h in node.handlers]
        node.orelse = self._visit_body(node.orelse)
        if node.finalbody:
            node.finalbody = [ast.copy_location(_tick_stmt(), node)] + self._visit_body(node.finalbody)
        return node

    visit_Try = _try
    visit_TryStar = _try

    def visit_ExceptHandler(self, node):
        """A bare 'except:' becomes 'except Exception:', so that the sandbox's limit exceptions
        (BaseException subclasses) cannot be swallowed; the bound name is checked; the handler
        starts with '__st_tick__()' (no handler runs outside a cell, and a re-caught limit re-raises)."""
        self._check_name(node.name, node, binding=True)
        if node.type is None:
            node.type = ast.copy_location(ast.Name(id="Exception", ctx=ast.Load()), node)
        else:
            node.type = self.visit(node.type)
        node.body = [ast.copy_location(_tick_stmt(), node)] + self._visit_body(node.body)
        return node

    def visit_Assert(self, node):
        """'assert t, msg' is rewritten inside."""
        return self._visit_children(node)

    # -- imports -------------------------------------------------------------------------------

    def visit_Import(self, node):
        """'import a.b' becomes 'a = __st_import__("a.b", False)';
        'import a.b as c' becomes 'c = __st_import__("a.b", True)'."""
        out = []
        for alias in node.names:
            bound = alias.asname or alias.name.split(".")[0]
            self._check_name(bound, node, binding=True)
            self._module_names.add(bound)
            call = _call("import", _const(alias.name), _const(alias.asname is not None))
            out.append(ast.copy_location(
                ast.Assign(targets=[ast.Name(id=bound, ctx=ast.Store())], value=call), node))
        return out

    def visit_ImportFrom(self, node):
        """'from a import b, c as d' becomes 'b, d = __st_importfrom__("a", ("b", "c"))';
        'from a import *' becomes '__st_importstar__("a")' (top level only). Relative imports are refused."""
        if node.level:
            self._deny(node, "relative import", "cells are not packages")
        if len(node.names) == 1 and node.names[0].name == "*":
            if self._function_depth or self._class_names:
                self._deny(node, "'import *' inside a function or class", "Python forbids it there")
            return ast.copy_location(ast.Expr(value=_call("importstar", _const(node.module))), node)
        targets = []
        for alias in node.names:
            bound = alias.asname or alias.name
            self._check_name(bound, node, binding=True)
            targets.append(ast.Name(id=bound, ctx=ast.Store()))
        call = _call("importfrom", _const(node.module), _const(tuple(a.name for a in node.names)))
        return ast.copy_location(
            ast.Assign(targets=[ast.Tuple(elts=targets, ctx=ast.Store())], value=call), node)

    # -- expressions ---------------------------------------------------------------------------

    def _cheap_binop(self, op, left, right) -> bool:
        """True where a *, ** or << cannot build a huge value: a float operand, a small constant
        exponent, or two constants whose result is small. (The compiler folds only small results: larger ones
        are computed when the cell runs, so 2 ** 100_000_000 and 7 ** 10**9 of constants go through the gate.)"""
        if isinstance(left, ast.Constant) and isinstance(right, ast.Constant) and \
                type(left.value) in (int, float, complex) and type(right.value) in (int, float, complex):
            return _small_constant_result(op, left.value, right.value)
        if op is ast.Mult:
            return _is_number_const(left) or _is_number_const(right)
        if op is ast.Pow:
            return _is_number_const(right)   # a small int exponent goes to the pow gate (visit_BinOp)
        return False

    def visit_BinOp(self, node):
        """'a * b' becomes '__st_mul__(a, b)', 'a ** 2' '__st_pow__(a, 2)' (a small int exponent) and 'a ** b'
        '__st_binop__(a, "**", b)' (likewise << and @, whose matrix products are charged first),
        which refuse results that would be too large; 'a % b' becomes '__st_mod__(a, b)' and
        '"%10d" % x' (a literal format) '__st_percent__("%10d", x)', which bound %-format field widths.
        Other operators are unchanged."""
        op = type(node.op)
        left = self.visit(node.left)
        right = self.visit(node.right)
        if op is ast.Mod:
            if isinstance(node.left, ast.JoinedStr) or isinstance(node.left, ast.Constant) \
                    and isinstance(node.left.value, (str, bytes)):
                return ast.copy_location(_call("percent", left, right), node)
            if not _is_number_const(node.left, (int, float, complex)):
                return ast.copy_location(_call("mod", left, right), node)
        if op in _OP_NAMES and not self._cheap_binop(op, node.left, node.right):
            if op is ast.Mult:
                return ast.copy_location(_call("mul", left, right), node)
            if op is ast.Pow and _small_int_const(node.right):
                return ast.copy_location(_call("pow", left, right), node)
            return ast.copy_location(_call("binop", left, _const(_OP_NAMES[op]), right), node)
        node.left, node.right = left, right
        return node

    def visit_Call(self, node):
        """'f(x)' is unchanged, except that 'list(x)' (and the other calls in SIZED_CALLS) becomes
        '__st_sized__(list, x)', which charges the length of x before the call runs in C."""
        node = self._visit_children(node)
        if isinstance(node.func, ast.Name) and node.func.id in SIZED_CALLS and node.args \
                and not any(isinstance(a, ast.Starred) for a in node.args[:1]):
            return ast.copy_location(
                ast.Call(func=_gate("sized"), args=[node.func] + node.args, keywords=node.keywords), node)
        return node

    def visit_keyword(self, node):
        """'f(k=v)': v is rewritten."""
        return self._visit_children(node)

    def visit_NamedExpr(self, node):
        """'(x := e)': x is checked, e is rewritten."""
        return self._visit_children(node)

    def _comprehension_owner(self, node):
        """Comprehensions: each 'for x in it' gains a first condition '__st_tick__() is None',
        a checkpoint per iteration."""
        outer, self._entry_checked = self._entry_checked, {}
        try:
            return self._visit_children(node)
        finally:
            self._entry_checked = outer

    visit_ListComp = _comprehension_owner
    visit_SetComp = _comprehension_owner
    visit_DictComp = _comprehension_owner
    visit_GeneratorExp = _comprehension_owner

    def visit_comprehension(self, node):
        """'for x in it if c' becomes 'for x in it if __st_tick__() is None if c'."""
        node.target = self.visit(node.target)
        node.iter = self.visit(node.iter)
        if _has_starred(node.target) and not node.is_async:
            node.iter = ast.copy_location(_call("starred_rows", node.iter, _unpack_shape(node.target)), node.iter)
        node.ifs = [ast.Compare(left=_call("tick"), ops=[ast.Is()], comparators=[_const(None)])] + \
            [self.visit(i) for i in node.ifs]
        return node

    def _unchanged_expr(self, node):
        """Operators, literals and control expressions are rewritten inside only."""
        return self._visit_children(node)

    visit_BoolOp = _unchanged_expr
    visit_UnaryOp = _unchanged_expr
    visit_IfExp = _unchanged_expr
    visit_Dict = _unchanged_expr
    visit_Set = _unchanged_expr
    visit_List = _unchanged_expr
    visit_Tuple = _unchanged_expr
    def visit_Compare(self, node):
        """'x in c' becomes '__st_contains__(c, x)' and 'x not in c' 'not __st_contains__(c, x)': the
        builtin containers are looked up in C as before, an iterator is charged for what C would
        consume. Other comparisons are unchanged; a chain that mixes 'in' with others is refused
        (its operands would have to be evaluated once each, around the gate)."""
        node = self._visit_children(node)
        if not any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops):
            return node
        if len(node.ops) != 1:
            self._deny(node, "a chained comparison with 'in'", "write it as two comparisons joined by 'and'")
        test = _call("contains", node.comparators[0], node.left)
        if isinstance(node.ops[0], ast.NotIn):
            test = ast.UnaryOp(op=ast.Not(), operand=test)
        return ast.copy_location(test, node)
    visit_Await = _unchanged_expr
    visit_Yield = _unchanged_expr
    visit_YieldFrom = _unchanged_expr
    visit_Slice = _unchanged_expr
    visit_JoinedStr = _unchanged_expr

    def visit_FormattedValue(self, node):
        """'f"{x!r:>{w}}"' becomes 'f"{__st_format__(x, "r", f"{w}")}"': a format spec can ask for a
        width or precision of billions, so the gate checks it before formatting. Without a spec the
        field is unchanged."""
        node = self._visit_children(node)
        if node.format_spec is None:
            return node
        conversion = chr(node.conversion) if node.conversion and node.conversion > 0 else ""
        call = _call("format", node.value, _const(conversion), node.format_spec)
        return ast.copy_location(ast.FormattedValue(value=call, conversion=-1, format_spec=None), node)

    def visit_Constant(self, node):
        """A literal is unchanged."""
        return node

    # Contexts and operators carry no code.
    def _leaf(self, node):
        return node

    for _n in ("Load", "Store", "Del", "And", "Or", "Add", "Sub", "Mult", "MatMult", "Div", "Mod", "Pow",
               "LShift", "RShift", "BitOr", "BitXor", "BitAnd", "FloorDiv", "Invert", "Not", "UAdd",
               "USub", "Eq", "NotEq", "Lt", "LtE", "Gt", "GtE", "Is", "IsNot", "In", "NotIn"):
        locals()[f"visit_{_n}"] = _leaf
    del _n

    # -- match ---------------------------------------------------------------------------------

    def visit_Match(self, node):
        """'match s: case C(x, k=y): ...' becomes
        '__st_mc1__ = __st_matchclass__(C, ("k",))' followed by 'match s: case __st_mc1__(x, k=y): ...'.
        A class pattern reads attributes of the subject without an Attribute node (the names come from
        the pattern and from C.__match_args__), so the gate hands back a stand-in class whose
        isinstance check first reads each of those names through the attribute gate: a refused
        name stops the match before anything is bound. Class expressions are therefore evaluated
        once, before the match, rather than when their case is tried."""
        node.subject = self.visit(node.subject)
        self._hoisted.append([])
        try:
            node.cases = [self.visit(c) for c in node.cases]
            hoisted = self._hoisted[-1]
        finally:
            self._hoisted.pop()
        return hoisted + [node]

    def visit_match_case(self, node):
        """A case whose pattern reads attributes ('case P(x=a)') gains the guard
        '__st_matched__(a, ...) and (guard)': class patterns read attributes without an Attribute
        node, so the gate checks every value they bind before the case body can use it. A star capture
        ('case [a, *rest]') adds '__st_starcaptured__(rest)' in front (see visit_MatchStar)."""
        self._captures: list[str] = []
        self._star_captures: list[str] = []
        self._in_class_pattern = 0
        node.pattern = self.visit(node.pattern)
        guard = self.visit(node.guard) if node.guard is not None else None
        for gate, names in (("matched", self._captures), ("starcaptured", self._star_captures)):
            if names:
                check = _call(gate, *[ast.Name(id=n, ctx=ast.Load()) for n in names])
                guard = check if guard is None else ast.BoolOp(op=ast.And(), values=[check, guard])
                ast.copy_location(guard, node.pattern)
        node.guard = guard
        node.body = self._visit_body(node.body)
        return node

    def _capture(self, name, node):
        if name is not None:
            self._check_name(name, node, binding=True)
            if self._in_class_pattern:
                self._captures.append(name)

    def visit_MatchValue(self, node):
        """'case a.B:' (a dotted name, whose reads must be gated, but a pattern must stay a dotted
        name) becomes '__st_mv1__ = __st_matchvalue__(__st_getattr__(a, "B"))' before the match and
        'case __st_mv1__.v:'. Literal values are unchanged."""
        if not isinstance(node.value, ast.Attribute):
            node.value = self.visit(node.value)
            return node
        self._match_classes += 1
        temp = f"{GATE_PREFIX}mv{self._match_classes}__"
        box = _call("matchvalue", self.visit(node.value))
        self._hoisted[-1].append(ast.copy_location(
            ast.Assign(targets=[ast.Name(id=temp, ctx=ast.Store())], value=box), node))
        node.value = ast.copy_location(
            ast.Attribute(value=ast.Name(id=temp, ctx=ast.Load()), attr="v", ctx=ast.Load()), node.value)
        return node

    def visit_MatchSingleton(self, node):
        """'case None:' is unchanged."""
        return node

    def visit_MatchSequence(self, node):
        """'case [a, b]:' sub-patterns are visited."""
        node.patterns = [self.visit(p) for p in node.patterns]
        return node

    def visit_MatchMapping(self, node):
        """'case {"k": v, **rest}:' keys are rewritten, the rest name checked."""
        node.keys = [self.visit(k) for k in node.keys]
        node.patterns = [self.visit(p) for p in node.patterns]
        self._capture(node.rest, node)
        return node

    def visit_MatchClass(self, node):
        """'case C(a, k=b):' C is replaced by the gate's stand-in (see visit_Match); keyword
        attribute names are also refused statically where they are private or frame attributes,
        and values bound inside are checked again by the case guard."""
        self._match_classes += 1
        temp = f"{GATE_PREFIX}mc{self._match_classes}__"
        gate = _call("matchclass", self.visit(node.cls), _const(tuple(node.kwd_attrs)))
        self._hoisted[-1].append(ast.copy_location(
            ast.Assign(targets=[ast.Name(id=temp, ctx=ast.Store())], value=gate), node))
        node.cls = ast.copy_location(ast.Name(id=temp, ctx=ast.Load()), node.cls)
        for attr in node.kwd_attrs:
            if attr.startswith("_") or attr in FRAME_ATTRIBUTES:
                self._deny(node, f"the class pattern attribute '{attr}'",
                           "private, dunder and frame attributes cannot be matched")
        self._in_class_pattern += 1
        try:
            node.patterns = [self.visit(p) for p in node.patterns]
            node.kwd_patterns = [self.visit(p) for p in node.kwd_patterns]
        finally:
            self._in_class_pattern -= 1
        return node

    def visit_MatchStar(self, node):
        """'case [a, *rest]:' the name is checked, and the case gains the guard '__st_starcaptured__(rest)':
        C built rest from the subject in one step, so its length is charged (as ticks) before the case runs."""
        self._capture(node.name, node)
        if node.name is not None:
            self._star_captures.append(node.name)
        return node

    def visit_MatchAs(self, node):
        """'case p as x:' the name is checked, the pattern visited."""
        if node.pattern is not None:
            node.pattern = self.visit(node.pattern)
        self._capture(node.name, node)
        return node

    def visit_MatchOr(self, node):
        """'case a | b:' alternatives are visited."""
        node.patterns = [self.visit(p) for p in node.patterns]
        return node


_AUG_SYMBOLS = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.MatMult: "@", ast.Div: "/", ast.Mod: "%", ast.Pow: "**",
    ast.LShift: "<<", ast.RShift: ">>", ast.BitOr: "|", ast.BitXor: "^", ast.BitAnd: "&", ast.FloorDiv: "//",
}


def parse_cell(source: str, filename: str, mode: str = "exec") -> ast.AST:
    """Parse with Python's own parser; a syntax error is reported with the cell's line."""
    return ast.parse(source, filename=filename, mode=mode)


def rewrite(tree: ast.AST) -> ast.AST:
    tree = Rewriter().visit(tree)
    return ast.fix_missing_locations(tree)


COMPILE_FLAGS = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT


def compile_cell(source: str, filename: str, mode: str = "exec"):
    """Parse, validate, rewrite and compile a cell. Returns (code, tree) or raises SyntaxError /
    ValidationDenied. The last expression statement is split off by the engine before this call."""
    tree = rewrite(parse_cell(source, filename, mode))
    return compile(tree, filename, mode, flags=COMPILE_FLAGS, dont_inherit=True), tree


if sys.version_info < (3, 10):  # pragma: no cover
    raise ImportError("sandbox_kernel needs Python 3.10 or newer")
