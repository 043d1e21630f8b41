"""pandas' expression language (DataFrame.query, DataFrame.eval, pandas.eval), evaluated by the sandbox.
SECURITY CORE.

pandas' own evaluator is an interpreter outside the gates: it resolves '@name' in whichever frame is
`level` frames up (a library's globals: '@inspect.os.system(...)'), and reads attributes and calls whatever
the text names. guards.py closes it while a cell runs and sends every call here instead: DataFrame.query
and DataFrame.eval reach pandas.core.computation.eval.eval, which guards.py replaces; pandas.eval is handed
out as the same router.

Here an expression line is
1. preparsed as pandas does it (backtick-quoted names, '@name', '&' and '|' read as 'and'/'or' by the
   pandas parser) with pandas' own tokenizer helpers, which are string functions;
2. parsed by the sandbox's parser (rewriter.parse_cell), bounded in size and depth, and checked against
   pandas' grammar: whatever defines code or binds a name (lambda, comprehensions, ':=', '*x', f-strings,
   statements) is a denial, and so is a name the rewriter refuses in a cell (__builtins__, __st_*);
3. walked node by node, never compiled (the audit hook refuses text turned into code while a cell runs,
   and nothing here needs it). Every operation on an object is the one the rewriter emits for the same
   expression in a cell: attribute reads are gates.getattr (__st_getattr__), '*', '**' are gates.binop,
   '%' gates.mod, 'x in it' gates.contains, calls and subscripts are plain calls and subscripts of values
   the cell could have reached itself.
Names resolve in the DataFrame's columns and index (pandas' resolvers), the caller's local_dict/global_dict/
resolvers, and otherwise in the innermost cell frame on the stack: never a library's frame.

The walk follows pandas' visitor and operators (pandas/core/computation/expr.py, ops.py, eval.py) with the
python engine: '==' against a list or a string is isin, chained comparisons are '&' of pairs, 'and'/'or'/
'not' are the elementwise '&', '|', '~' with the precedence of 'and'/'or', datetime columns compared with
scalars convert them to Timestamps, float32 columns downcast scalar constants, sin/log/... are numpy's.
engine='numexpr' is evaluated the same way (numexpr itself evaluates strings with eval()).
"""
from __future__ import annotations

import ast
import datetime
import operator
import sys
import tokenize
from keyword import iskeyword

from .denials import NameDenied, SandboxViolation, SizeDenied, ValidationDenied
from .rewriter import CELL_FILENAME_PREFIX, FORBIDDEN_NAMES, GATE_PREFIX, parse_cell

# Bounds on one expression (a query of 5,000 ids, f"id in {ids}", is ~40,000 characters and 5,000 nodes).
MAX_EXPRESSION_CHARS = 200_000
MAX_NODES = 50_000
MAX_DEPTH = 100   # the walk recurses per level; pandas expressions are rarely 20 deep

FILENAME = "<pandas expression>"   # never a cell file name: the audit hook must not take it for the cell's code
LOCAL_TAG = "__pd_eval_local_"     # pandas' spelling of '@name' after preparsing

MATH_FUNCTIONS = frozenset((
    "sin", "cos", "tan", "exp", "log", "expm1", "log1p", "sqrt", "sinh", "cosh", "tanh", "arcsin", "arccos",
    "arctan", "arccosh", "arcsinh", "arctanh", "abs", "log10", "floor", "ceil", "arctan2"))

CMP_OPS = (">", "<", ">=", "<=", "==", "!=", "in", "not in")
BOOL_OPS = ("&", "|")
_MEMBERSHIP = {"==": "in", "!=": "not in", "in": "in", "not in": "not in"}

_BINARY_NODES = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Pow: "**", ast.FloorDiv: "//",
                 ast.Mod: "%", ast.BitAnd: "&", ast.BitOr: "|"}
_COMPARE_NODES = {ast.Gt: ">", ast.Lt: "<", ast.GtE: ">=", ast.LtE: "<=", ast.Eq: "==", ast.NotEq: "!=",
                  ast.In: "in", ast.NotIn: "not in"}
_UNARY_NODES = {ast.UAdd: "+", ast.USub: "-", ast.Invert: "~", ast.Not: "not"}

# What a pandas expression may contain at all. Nodes pandas itself does not evaluate (IfExp, Dict, Set,
# Is, '<<' ...) raise pandas' NotImplementedError when the walk reaches them; nodes that define code or bind
# names are refused before anything runs.
_GRAMMAR = frozenset({
    ast.Module, ast.Expr, ast.Assign, ast.Name, ast.Constant, ast.List, ast.Tuple, ast.Attribute, ast.Call,
    ast.keyword, ast.Subscript, ast.Slice, ast.BinOp, ast.BoolOp, ast.UnaryOp, ast.Compare, ast.IfExp,
    ast.Dict, ast.Set, ast.Load, ast.Store,
}) | {cls for cls in vars(ast).values() if isinstance(cls, type) and issubclass(
    cls, (ast.operator, ast.cmpop, ast.boolop, ast.unaryop))}
_WHAT = {ast.Lambda: "a lambda", ast.ListComp: "a comprehension", ast.SetComp: "a comprehension",
         ast.DictComp: "a comprehension", ast.GeneratorExp: "a generator expression",
         ast.NamedExpr: "an assignment expression (:=)", ast.Starred: "a starred expression (*x)",
         ast.JoinedStr: "an f-string", ast.Await: "await", ast.Yield: "yield", ast.YieldFrom: "yield"}


# ------------------------------------------------------------------------------------------------
# Parsing and checking (pure; cached per line and parser)
# ------------------------------------------------------------------------------------------------

class _Refused(Exception):
    """A denial found while parsing: raised again through the gates, with the cell's line."""

    def __init__(self, denial):
        self.denial = denial


_PARSED: dict = {}
_PARSED_MAX = 512


def _preparse(source: str) -> str:
    """pandas' preparser for parser='pandas': backtick names cleaned, '@x' as LOCAL_TAG + 'x', '&'/'|'
    as 'and'/'or' (their precedence)."""
    from pandas.core.computation.parsing import clean_backtick_quoted_toks, tokenize_string

    def token(tok):
        num, val = clean_backtick_quoted_toks(tok)
        if num == tokenize.OP:
            if val == "&":
                return tokenize.NAME, "and"
            if val == "|":
                return tokenize.NAME, "or"
            if val == "@":
                return tokenize.OP, LOCAL_TAG
        return num, val
    return tokenize.untokenize(token(t) for t in tokenize_string(source))


def _check_name(name: str) -> None:
    """The rewriter's rule for names in a cell: the runtime's own names are never read."""
    if name.startswith(LOCAL_TAG):
        name = name[len(LOCAL_TAG):]
    if name.startswith(GATE_PREFIX) or name in FORBIDDEN_NAMES:
        raise _Refused(NameDenied(name, "names of the sandbox runtime cannot be used by cells"))


def _check_tree(tree: ast.AST) -> None:
    """Size, depth and grammar, without recursion (the walk that follows recurses per level)."""
    pending = [(tree, 0)]
    count = 0
    while pending:
        node, depth = pending.pop()
        count += 1
        if count > MAX_NODES:
            raise _Refused(SizeDenied(f"a pandas expression of more than {MAX_NODES:,} parts",
                                      f"pandas expressions have at most {MAX_NODES:,}"))
        if depth > MAX_DEPTH:
            raise _Refused(ValidationDenied(f"a pandas expression nested more than {MAX_DEPTH} deep",
                                            f"pandas expressions nest at most {MAX_DEPTH} levels"))
        t = type(node)
        if t not in _GRAMMAR:
            what = _WHAT.get(t) or (f"the statement '{t.__name__}'" if isinstance(node, ast.stmt)
                                    else f"the construct '{t.__name__}'")
            raise _Refused(ValidationDenied(f"{what} in a pandas expression",
                                            "pandas' expression language has operators, names, attributes, "
                                            "calls and subscripts; nothing that defines code or binds a name"))
        if t is ast.Name:
            _check_name(node.id)
        pending.extend((child, depth + 1) for child in ast.iter_child_nodes(node))


def parse_line(line: str, parser: str):
    """(assigner or None, expression node) for one line, parsed and checked; raises SyntaxError as
    pandas does, or _Refused."""
    key = (line, parser)
    parsed = _PARSED.get(key)
    if parsed is not None:
        return parsed
    clean = _preparse(line) if parser == "pandas" else line
    try:
        tree = parse_cell(clean, FILENAME, "exec")
    except SyntaxError as exc:
        if any(iskeyword(word) for word in clean.split()):
            exc.msg = "Python keyword not valid identifier in numexpr query"
        raise
    _check_tree(tree)
    if len(tree.body) != 1:
        raise SyntaxError("only a single expression is allowed")
    statement = tree.body[0]
    if type(statement) is ast.Assign:
        if len(statement.targets) != 1:
            raise SyntaxError("can only assign a single expression")
        if type(statement.targets[0]) is not ast.Name:
            raise SyntaxError("left hand side of an assignment must be a single name")
        parsed = (statement.targets[0].id, statement.value)
    else:
        parsed = (None, statement.value)
    if len(_PARSED) >= _PARSED_MAX:
        _PARSED.pop(next(iter(_PARSED)))
    _PARSED[key] = parsed
    return parsed


# ------------------------------------------------------------------------------------------------
# pandas' terms and operators (ops.py), for the python engine
# ------------------------------------------------------------------------------------------------
# Values are read with fixed attribute names (dtype, values, tz, isin), as any pandas function reads the
# objects handed to it; names chosen by the expression's text are read through the gates only.

class _Term:
    """A value pandas holds as a term: a name, a constant, a list, or the result of an attribute read,
    a call, a subscript or an operator evaluated early."""
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    @property
    def type(self):
        from pandas.api.types import IntervalDtype, PeriodDtype

        value = self.value
        try:
            dtype = value.dtype
        except AttributeError:
            try:
                return value.values.dtype
            except AttributeError:
                return type(value)
        if isinstance(dtype, (PeriodDtype, IntervalDtype)):
            import numpy as np

            return np.dtype("object")
        return dtype

    return_type = type

    @property
    def is_scalar(self) -> bool:
        from pandas.api.types import is_scalar

        return is_scalar(self.value)

    @property
    def is_datetime(self) -> bool:
        return _is_datetime(self.type)


class _Op:
    """An operator whose operands are terms or operators, evaluated at the end (or early: _Walk.binop)."""
    __slots__ = ("op", "operands", "func")

    def __init__(self, op, operands, func):
        self.op, self.operands, self.func = op, operands, func

    @property
    def return_type(self):
        import numpy as np

        if self.op in CMP_OPS or self.op in BOOL_OPS:
            return np.bool_
        return _result_type(*(term.type for term in _leaves(self)))

    @property
    def operand_types(self):
        return frozenset(term.type for term in _leaves(self))

    @property
    def has_invalid_return_type(self):
        import numpy as np

        return self.return_type == object and self.operand_types - frozenset([np.dtype("object")])

    @property
    def is_scalar(self) -> bool:
        return all(operand.is_scalar for operand in self.operands)

    @property
    def is_datetime(self) -> bool:
        return _is_datetime(self.return_type)


class _UnaryOp(_Op):
    __slots__ = ()

    @property
    def return_type(self):
        import numpy as np

        operand = self.operands[0]
        if operand.return_type == np.dtype("bool"):
            return np.dtype("bool")
        if isinstance(operand, _Op) and (operand.op in CMP_OPS or operand.op in BOOL_OPS):
            return np.dtype("bool")
        return np.dtype("int")


class _MathFunction:
    """sin, log ... named in a call where no variable of that name exists: numpy's, through the gate."""
    __slots__ = ("name", "func")

    def __init__(self, name, func):
        self.name, self.func = name, func


def _leaves(node):
    if isinstance(node, _Term):
        yield node
        return
    for operand in node.operands:
        yield from _leaves(operand)


def _is_datetime(t) -> bool:
    try:
        t = t.type
    except AttributeError:
        pass
    return issubclass(t, (datetime.datetime, _numpy().datetime64))


def _numpy():
    import numpy as np

    return np


def _result_type(*types):
    from pandas.core.computation.common import result_type_many

    return result_type_many(*types)


def _is_string_dtype(t) -> bool:
    from pandas.api.types import is_string_dtype

    return is_string_dtype(t)


def _undefined(name, is_local):
    from pandas.errors import UndefinedVariableError

    return UndefinedVariableError(name, is_local)


def _default_globals() -> dict:
    import pandas as pd

    np = _numpy()
    return {"Timestamp": pd.Timestamp, "datetime": datetime.datetime, "True": True, "False": False,
            "list": list, "tuple": tuple, "inf": np.inf, "Inf": np.inf}


# ------------------------------------------------------------------------------------------------
# The walk (expr.py's BaseExprVisitor, with the gates)
# ------------------------------------------------------------------------------------------------

class _Walk:
    """One line of an expression: pandas' visitor over a checked tree. Every object operation is a gate's."""

    def __init__(self, gates, parser, scope, resolvers, has_resolvers):
        self.gates = gates
        self.parser = parser
        self.scope = scope              # mappings searched for '@x' (and for names without resolvers)
        self.resolvers = resolvers      # mappings searched for bare names
        self.has_resolvers = has_resolvers
        self.binary = {
            ">": operator.gt, "<": operator.lt, ">=": operator.ge, "<=": operator.le, "==": operator.eq,
            "!=": operator.ne, "in": self._in, "not in": self._not_in, "&": operator.and_, "|": operator.or_,
            "+": operator.add, "-": operator.sub, "*": lambda a, b: gates.binop(a, "*", b),
            "/": operator.truediv, "**": lambda a, b: gates.binop(a, "**", b), "//": operator.floordiv,
            "%": gates.mod,
        }
        self.unary = {"+": operator.pos, "-": operator.neg, "~": operator.invert, "not": operator.invert}

    # -- values --------------------------------------------------------------------------------------

    def value(self, node):
        """A term's value, or an operator evaluated (pandas' python engine: left, then right)."""
        if isinstance(node, _Term):
            return node.value
        return node.func(*[self.value(operand) for operand in node.operands])

    def visit(self, node):
        method = getattr(self, "visit_" + type(node).__name__, None)
        if method is None:
            raise NotImplementedError(f"'{type(node).__name__}' nodes are not implemented")
        return method(node)

    # -- names -----------------------------------------------------------------------------------------

    def _scope_get(self, key):
        for mapping in self.scope:
            try:
                return mapping[key]
            except KeyError:
                pass
        raise KeyError(key)

    def _in_scope(self, key) -> bool:
        return any(key in mapping for mapping in self.scope)

    def _resolve(self, ident):
        """pandas' Term._resolve_name and Scope.resolve: '@x' in the scope; a bare name in the resolvers
        (the frame's columns and index) when there are any, else in the scope; a bare name of a class in
        the scope (list, Timestamp) is not looked up there."""
        _check_name(ident)
        local = ident.startswith(LOCAL_TAG)
        key = ident[len(LOCAL_TAG):] if local else ident
        is_local = local or key in ("Timestamp", "datetime", "True", "False", "list", "tuple", "inf", "Inf")
        if not local and self._in_scope(key) and isinstance(self._scope_get(key), type):
            is_local = False
        try:
            if is_local or not self.has_resolvers:
                value = self._scope_get(key)
            else:
                value = self._resolver_get(key)
        except KeyError:
            raise _undefined(key, is_local) from None
        ndim = getattr(value, "ndim", None)
        if isinstance(ndim, int) and ndim > 2:
            raise NotImplementedError("N-dimensional objects, where N > 2, are not supported with eval")
        return value

    def _resolver_get(self, key):
        for mapping in self.resolvers:
            try:
                return mapping[key]
            except KeyError:
                pass
        raise KeyError(key)

    def visit_Name(self, node):
        return _Term(self._resolve(node.id))

    def visit_Constant(self, node):
        return _Term(node.value)

    def visit_List(self, node):
        return _Term([self.value(self.visit(e)) for e in node.elts])

    visit_Tuple = visit_List

    # -- attributes, calls, subscripts ---------------------------------------------------------------

    def visit_Attribute(self, node):
        resolved = self.value(self.visit(node.value))
        try:
            return _Term(self.gates.getattr(resolved, node.attr))
        except SandboxViolation:
            raise
        except AttributeError:
            # pandas: 'datetime.datetime' where the name already is the class
            if type(node.value) is ast.Name and node.value.id == node.attr:
                return _Term(resolved)
            raise

    def visit_Call(self, node):
        func = node.func
        if type(func) is ast.Attribute and func.attr != "__call__":
            callee = self.visit_Attribute(func)
        elif type(func) is not ast.Name:
            raise TypeError("Only named functions are supported")
        else:
            from pandas.errors import UndefinedVariableError

            try:
                callee = self.visit_Name(func)
            except UndefinedVariableError as undefined:
                if func.id not in MATH_FUNCTIONS:
                    raise ValueError(f'"{func.id}" is not a supported function') from undefined
                callee = _MathFunction(func.id, self.gates.getattr(_numpy(), func.id))
        if isinstance(callee, _MathFunction):
            operands = tuple(self.visit(arg) for arg in node.args)
            if node.keywords:
                raise TypeError(f'Function "{callee.name}" does not support keyword arguments')
            return _Op(callee.name, operands, callee.func)
        function = callee.value
        args = [self.value(self.visit(arg)) for arg in node.args]
        kwargs = {k.arg: self.value(self.visit(k.value)) for k in node.keywords if k.arg}   # pandas skips **kw
        from .guards import charged   # list(x), tuple(x): C consumes x, charged like the cell's own list(x)

        return _Term(charged(function)(*args, **kwargs))

    def visit_Subscript(self, node):
        value = self.visit(node.value)
        if type(node.slice) is ast.Tuple:
            raise NotImplementedError("multi-dimensional subscripts are not supported")
        if type(node.slice) is ast.Slice:
            index = self.visit_Slice(node.slice)
        else:
            index = self.value(self.visit(node.slice))
        return _Term(self.value(value)[index])

    def visit_Slice(self, node):
        def bound(part):
            return None if part is None else self.value(self.visit(part))
        return slice(bound(node.lower), bound(node.upper), bound(node.step))

    # -- operators -------------------------------------------------------------------------------------

    def visit_BinOp(self, node):
        symbol = _BINARY_NODES.get(type(node.op))
        left, right = self.visit(node.left), self.visit(node.right)
        if symbol is None:
            raise NotImplementedError(f"'{type(node.op).__name__}' nodes are not implemented")
        return self.binop(symbol, left, right)

    def visit_UnaryOp(self, node):
        symbol = _UNARY_NODES[type(node.op)]
        if symbol == "not" and self.parser == "python":
            raise NotImplementedError("'Not' nodes are not implemented")
        operand = self.visit(node.operand)
        return _UnaryOp("~" if symbol == "not" else symbol, (operand,), self.unary[symbol])

    def visit_Compare(self, node):
        ops, comparators = node.ops, node.comparators
        if len(comparators) == 1:
            op, right = ops[0], comparators[0]
            if type(op) in (ast.In, ast.NotIn) and type(right) in (ast.Tuple, ast.List) \
                    and any(type(e) is ast.Name for e in right.elts):
                # pandas 3.1 (GH#65357): 'x in (a, 1)' with a variable inside is 'x == a or x == 1'
                compare, join = (ast.Eq, ast.Or) if type(op) is ast.In else (ast.NotEq, ast.And)
                return self.visit(ast.BoolOp(op=join(), values=[
                    ast.Compare(left=node.left, ops=[compare()], comparators=[e]) for e in right.elts]))
            symbol = _COMPARE_NODES.get(type(op))
            left, right = self.visit(node.left), self.visit(right)
            if symbol is None or (self.parser == "python" and symbol in ("in", "not in")):
                raise NotImplementedError(f"'{type(op).__name__}' nodes are not implemented")
            return self.binop(symbol, left, right)
        pairs, left = [], node.left
        for op, comparator in zip(ops, comparators):
            pairs.append(self.visit(ast.Compare(left=left, ops=[op], comparators=[comparator])))
            left = comparator
        return self._boolean("&", pairs)

    def visit_BoolOp(self, node):
        return self._boolean("&" if type(node.op) is ast.And else "|", node.values)

    def _boolean(self, symbol, values):
        if self.parser == "python":
            raise NotImplementedError("'BoolOp' nodes are not implemented")
        result = None
        for value in values:
            operand = value if isinstance(value, (_Term, _Op)) else self.visit(value)
            result = operand if result is None else self.evaluate_binop(symbol, result, operand)
        return result

    def binop(self, symbol, left, right):
        """visit_BinOp: '==' / '!=' between terms where one is a list or a string is membership (a string
        becomes a list of one); a scalar constant next to a float32 array becomes float32."""
        if symbol in _MEMBERSHIP and isinstance(left, _Term) and isinstance(right, _Term):
            if any(isinstance(t.value, (list, str)) for t in (left, right)):
                symbol = _MEMBERSHIP[symbol]
                if self.parser == "python":
                    raise NotImplementedError(f"'{'In' if symbol == 'in' else 'NotIn'}' nodes are not implemented")
            if isinstance(right.value, str):
                right = _Term([right.value])
            if isinstance(left.value, str):
                left = _Term([left.value])
        float32 = _numpy().dtype("float32")
        if isinstance(left, _Term) and left.is_scalar and not right.is_scalar and right.return_type == float32:
            left = _Term(_numpy().float32(left.value))
        if isinstance(right, _Term) and right.is_scalar and not left.is_scalar and left.return_type == float32:
            right = _Term(_numpy().float32(right.value))
        return self.evaluate_binop(symbol, left, right)

    def evaluate_binop(self, symbol, left, right):
        """ops.BinOp and _maybe_evaluate_binop: checks, datetime conversion, and what pandas evaluates at
        once (membership, datetimes, object and string operands) becomes a term."""
        _refuse_scalar_bool_op(symbol, left, right)
        _convert_datetimes(left, right)
        op = _Op(symbol, (left, right), self.binary[symbol])
        if op.has_invalid_return_type:
            raise TypeError(f"unsupported operand type(s) for {symbol}: "
                            f"'{_type_of(left)}' and '{_type_of(right)}'")
        if (symbol in CMP_OPS and left.is_datetime) or right.is_datetime or symbol in ("in", "not in") or any(
                t.return_type == object or _is_string_dtype(t.return_type) for t in (left, right)):
            return _Term(self.value(op))
        return op

    def _in(self, x, y):
        """ops._in: x.isin(y), else y.isin(x) for a list-like x, else 'x in y' (charged like a cell's)."""
        from pandas.api.types import is_list_like

        try:
            return x.isin(y)
        except AttributeError:
            if is_list_like(x):
                try:
                    return y.isin(x)
                except AttributeError:
                    pass
            return self.gates.contains(y, x)

    def _not_in(self, x, y):
        from pandas.api.types import is_list_like

        try:
            return ~x.isin(y)
        except AttributeError:
            if is_list_like(x):
                try:
                    return ~y.isin(x)
                except AttributeError:
                    pass
            return not self.gates.contains(y, x)

    # -- what pandas refuses itself ------------------------------------------------------------------

    def _not_implemented(self, node):
        raise NotImplementedError(f"'{type(node).__name__}' nodes are not implemented")

    visit_IfExp = visit_Dict = visit_Set = _not_implemented


def _type_of(node):
    return node.type if isinstance(node, _Term) else node.return_type


def _refuse_scalar_bool_op(symbol, left, right) -> None:
    if symbol not in BOOL_OPS or not (left.is_scalar or right.is_scalar):
        return
    np = _numpy()
    types = [getattr(t.return_type, "type", t.return_type) for t in (left, right)]
    if not all(issubclass(t, (bool, np.bool_)) for t in types):
        raise NotImplementedError("cannot evaluate scalar only bool ops")


def _convert_datetimes(left, right) -> None:
    """BinOp.convert_values: a scalar term next to a datetime term becomes a Timestamp (UTC if aware)."""
    for dated, other in ((left, right), (right, left)):
        if isinstance(dated, _Term) and isinstance(other, _Term) and dated.is_datetime and other.is_scalar:
            import pandas as pd

            v = other.value
            if isinstance(v, (int, float)):
                v = str(v)
            if isinstance(v, (bytes, _numpy().bytes_)):
                v = v.decode("utf-8")
            v = pd.Timestamp(v)
            if v.tz is not None:
                v = v.tz_convert("UTC")
            other.value = v


# ------------------------------------------------------------------------------------------------
# pandas.eval, as DataFrame.query / DataFrame.eval / pandas.eval call it
# ------------------------------------------------------------------------------------------------

def _cell_frame():
    """The innermost frame of the cell's own code on the stack: '@x' means the cell's x there."""
    frame = sys._getframe(2)
    while frame is not None and not frame.f_code.co_filename.startswith(CELL_FILENAME_PREFIX):
        frame = frame.f_back
    return frame


def _refuse(gates, exc):
    gates.deny(exc)   # raises, with the cell's line, on the record


def evaluate(gates, expr, parser="pandas", engine=None, local_dict=None, global_dict=None, resolvers=(),
             level=0, target=None, inplace=False):
    """pandas.eval's contract (pandas/core/computation/eval.py) with the sandbox's walk as the engine."""
    from pandas.core.generic import NDFrame
    from pandas.util._validators import validate_bool_kwarg

    inplace = validate_bool_kwarg(inplace, "inplace")
    if isinstance(expr, str):
        expr = str.__str__(expr)   # the characters themselves: a str subclass's len() or splitlines() could lie
        if not expr:
            raise ValueError("expr cannot be an empty string")
        if len(expr) > MAX_EXPRESSION_CHARS:
            _refuse(gates, SizeDenied(f"a pandas expression of {len(expr):,} characters",
                                      f"pandas expressions have at most {MAX_EXPRESSION_CHARS:,} characters"))
        lines = [line.strip() for line in expr.splitlines() if line.strip() != ""]
    elif isinstance(expr, NDFrame):
        raise ValueError(f"expr must be a string to be evaluated, {type(expr)} given")
    else:   # pandas evaluates the text of anything else (pd.eval(5) is 5)
        from pandas.io.formats.printing import pprint_thing

        return evaluate(gates, pprint_thing(expr), parser, engine, local_dict, global_dict, resolvers, level,
                        target, inplace)
    multi_line = len(lines) > 1
    if multi_line and target is None:
        raise ValueError("multi-line expressions are only valid in the context of data, use DataFrame.eval")
    _check_engine(engine)
    if parser not in ("pandas", "python"):
        raise KeyError(f"Invalid parser '{parser}' passed, valid parsers are {('python', 'pandas')}")
    resolvers = tuple(resolvers) if resolvers is not None else ()
    for resolver in resolvers:
        if not hasattr(resolver, "__getitem__"):
            raise TypeError(f"Resolver of type '{type(resolver).__name__}' does not implement the __getitem__ method")
    frame = _cell_frame()
    scope = (local_dict if local_dict is not None else frame.f_locals if frame is not None else {},
             global_dict if global_dict is not None else frame.f_globals if frame is not None else {},
             _default_globals())
    del frame

    ret = None
    first = True
    modified = False
    for line in lines:
        _check_for_locals(line, level, parser)
        try:
            assigner, tree = parse_line(line, parser)
        except _Refused as refused:
            _refuse(gates, refused.denial)
        if assigner is not None and target is None:
            raise ValueError("cannot assign without a target object")
        gates.charge_consumed(resolvers)   # a resolver that is a range(10**18) is counted before C walks it
        walk = _Walk(gates, parser, scope, resolvers, has_resolvers=bool(len(set().union(*resolvers))))
        try:
            ret = walk.value(walk.visit(tree))
        except _Refused as refused:
            _refuse(gates, refused.denial)
        if assigner is None:
            if multi_line:
                raise ValueError("Multi-line expressions are only valid if all expressions contain an assignment")
            if inplace:
                raise ValueError("Cannot operate inplace if there is no assignment")
            continue
        if target is None:
            continue
        modified = True
        if not inplace and first:
            target = _copy(gates, target, NDFrame)
        try:
            if inplace and isinstance(target, NDFrame):
                target.loc[:, assigner] = ret
            else:
                target[assigner] = ret
        except (TypeError, IndexError) as err:
            raise ValueError("Cannot assign expression output to target") from err
        for resolver in resolvers:
            if assigner in resolver:
                resolver[assigner] = ret
                break
        else:
            resolvers += ({assigner: ret},)
        ret = None
        first = False
    if inplace is False:
        return target if modified else ret
    return None


def _copy(gates, target, NDFrame):
    if isinstance(target, NDFrame):
        import pandas as pd

        return target.copy(deep=False if int(pd.__version__.split(".")[0]) >= 3 else None)
    try:
        return gates.getattr(target, "copy")()
    except SandboxViolation:
        raise
    except AttributeError as err:
        raise ValueError("Cannot return a copy of the target") from err


def _check_engine(engine) -> None:
    from pandas.core.computation.check import NUMEXPR_INSTALLED

    if engine is None:
        return
    if engine not in ("numexpr", "python"):
        raise KeyError(f"Invalid engine '{engine}' passed, valid engines are ['numexpr', 'python']")
    if engine == "numexpr" and not NUMEXPR_INSTALLED:
        raise ImportError("'numexpr' is not installed or an unsupported version. Cannot use engine='numexpr' "
                          "for query/eval if 'numexpr' is not installed")


def _check_for_locals(line: str, level, parser: str) -> None:
    if parser != "pandas":
        message = "The '@' prefix is only supported by the pandas parser"
    elif level == 0:
        message = ("The '@' prefix is not allowed in top-level eval calls.\n"
                   "please refer to your variables by name without the '@' prefix.")
    else:
        return
    if "@" not in line:
        return
    from pandas.core.computation.parsing import tokenize_string

    for num, val in tokenize_string(line):
        if num == tokenize.OP and val == "@":
            raise SyntaxError(message)
