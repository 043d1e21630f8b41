"""What the sandbox refuses, one class per kind of refusal.

Every refusal is an exception that carries a structured record (kind, target, rule, line, policy) and a
sentence a person understands. Refusals of an *operation* (an import, an attribute, a file) subclass the
ordinary Python exception a program would expect there (ImportError, AttributeError, PermissionError),
so ``try: import scipy / except ImportError`` keeps working; the engine records the denial either way.

Limits are different: once a cell has used its time, ticks or memory it must end, so they derive from
BaseException and the gates re-raise them at every later checkpoint (see limits.py).
"""
from __future__ import annotations

# Set on every refusal and limit the runtime itself raises, with the cell it was raised in. A cell that
# gets hold of a denial's class (type(e)) can make an instance that says anything, and a cell can keep a
# caught denial and raise it again later; without this mark, or with an earlier cell's, the error is
# reported as the cell's own, never as a denial. The name is private: the gates keep cells from it.
_GENUINE = "_sandbox_genuine"
_MARK = object()
_CELL = [0]


def new_cell() -> None:
    """A cell starts (the engine calls this): denials raised before it are no longer this cell's."""
    _CELL[0] += 1


def genuine(exc):
    """Mark `exc` as raised by the sandbox runtime in this cell (returns it, for `raise genuine(...)`)."""
    exc.__dict__[_GENUINE] = (_MARK, _CELL[0])
    return exc


def is_genuine(exc) -> bool:
    """Read through BaseException's own __dict__ descriptor and compared by identity: the engine asks
    this of a cell's exception after the cell, where none of the object's own code may run."""
    if not issubclass(type(exc), BaseException):
        return False
    stamp = _EXCEPTION_DICT.__get__(exc, BaseException).get(_GENUINE)
    return type(stamp) is tuple and len(stamp) == 2 and stamp[0] is _MARK and stamp[1] is _CELL[0]


_EXCEPTION_DICT = BaseException.__dict__["__dict__"]


# Every class name a refusal or a limit can carry: a cell's own exception by one of these names is
# shown as the cell's (see SandboxKernel).
def denial_names() -> frozenset:
    return frozenset(name for name, value in globals().items()
                     if isinstance(value, type) and issubclass(value, (SandboxViolation, LimitExceeded)))


# What the runtime was handling when it refused (a lookup's KeyError whose key holds the raw class of the object
# read: review 12, R12-3) is not the cell's to read: on the sandbox's refusals the chain reads as empty. The
# interpreter's own chaining, and the engine's report (it reads BaseException's descriptors), are unchanged.
_CONTEXT = BaseException.__dict__["__context__"]
_CAUSE = BaseException.__dict__["__cause__"]
_UNCHAINED = {"__context__": property(lambda self: None, lambda self, value: _CONTEXT.__set__(self, value)),
              "__cause__": property(lambda self: None, lambda self, value: _CAUSE.__set__(self, value))}


class SandboxViolation(Exception):
    """Base of every refusal that a cell may observe and handle."""

    kind = "policy"
    __context__ = _UNCHAINED["__context__"]
    __cause__ = _UNCHAINED["__cause__"]

    def __init__(self, target: str, rule: str, *, policy: str | None = None, hint: str | None = None):
        self.target = target
        self.rule = rule
        self.policy = policy
        self.hint = hint
        self.line: int | None = None
        super().__init__(self.sentence())

    def describe(self) -> str:  # overridden per kind
        return f"{self.target} is not allowed"

    def sentence(self) -> str:
        s = self.describe()
        if self.policy:
            s += f" by policy '{self.policy}'"
        if self.line:
            s += f" (line {self.line})"
        if self.rule:
            s += f": {self.rule}"
        if self.hint:
            s += f". {self.hint}"
        return s

    def set_line(self, line: int | None) -> None:
        if line and not self.line:
            self.line = line
            self.refresh()

    def refresh(self) -> None:
        """The text after the policy or line was filled in. ImportError's str() is its `msg`, set once by its
        constructor: a caught ImportDenied said neither policy nor line."""
        self.args = (self.sentence(),)
        if isinstance(self, ImportError):
            self.msg = self.args[0]

    def record(self) -> dict:
        return {
            "kind": self.kind,
            "target": self.target,
            "rule": self.rule,
            "line": self.line,
            "policy": self.policy,
            "hint": self.hint,
            "message": self.sentence(),
        }

    def __reduce__(self):  # never pickled; keeps copy.copy from reaching internals
        raise TypeError("denials cannot be pickled")


class ValidationDenied(SandboxViolation, SyntaxError):
    """The cell uses a construct the rewriter does not accept (refused before anything runs)."""

    kind = "syntax"

    def describe(self) -> str:
        return f"{self.target} is not allowed in the sandbox"


class NameDenied(ValidationDenied):
    """A name in the reserved gate namespace, or one that would reach the runtime's internals."""

    kind = "name"

    def describe(self) -> str:
        return f"the name '{self.target}' is reserved"


class AttributeDenied(SandboxViolation, AttributeError):
    kind = "attribute"

    def describe(self) -> str:
        return f"access to attribute {self.target} is not allowed"


class ImportDenied(SandboxViolation, ImportError):
    kind = "import"

    def describe(self) -> str:
        return f"import of '{self.target}' is not allowed"


class BuiltinDenied(SandboxViolation, NameError):
    kind = "builtin"

    def describe(self) -> str:
        return f"the builtin '{self.target}' is not available"


class FileDenied(SandboxViolation, PermissionError):
    kind = "file"

    def describe(self) -> str:
        return f"file access to '{self.target}' is not allowed"


class NetworkDenied(SandboxViolation, PermissionError):
    kind = "network"

    def describe(self) -> str:
        return f"network access to {self.target} is not allowed"


class OperationDenied(SandboxViolation, PermissionError):
    """An operation of the process itself (start a process, load native code, unpickle), refused
    whoever asks for it while a cell runs: the cell or a library it called."""

    kind = "process"

    def describe(self) -> str:
        return f"the operation '{self.target}' is not allowed"


class SizeDenied(SandboxViolation, MemoryError):
    """An operation whose result would be too large is refused before it starts."""

    kind = "limit"

    def describe(self) -> str:
        return f"{self.target} would be too large"

    def sentence(self) -> str:
        s = self.describe()
        if self.line:
            s += f" (line {self.line})"
        return s + f": {self.rule}"


class CallDenied(SandboxViolation, TypeError):
    """A granted function called with an argument the policy forbids (allow_pickle=True)."""

    kind = "attribute"

    def describe(self) -> str:
        return f"the call {self.target} is not allowed"


class LimitExceeded(BaseException):
    """A cell ran out of a budget. Not an Exception: ``except Exception`` cannot swallow it."""

    kind = "limit"
    __context__ = _UNCHAINED["__context__"]
    __cause__ = _UNCHAINED["__cause__"]
    limit = "limit"

    def __init__(self, detail: str, *, policy: str | None = None):
        self.detail = detail
        self.policy = policy
        self.line: int | None = None
        super().__init__(detail)

    def set_line(self, line: int | None) -> None:
        if line and not self.line:
            self.line = line

    def sentence(self) -> str:
        s = self.detail
        if self.line:
            s += f" (line {self.line})"
        return s

    def record(self) -> dict:
        return {
            "kind": "limit",
            "target": self.limit,
            "rule": self.detail,
            "line": self.line,
            "policy": self.policy,
            "hint": None,
            "message": self.sentence(),
        }


class TimeLimitExceeded(LimitExceeded):
    limit = "timeout"


class TickLimitExceeded(LimitExceeded):
    limit = "ticks"


class MemoryLimitExceeded(LimitExceeded):
    limit = "memory"


class Cancelled(LimitExceeded):
    limit = "cancelled"
