"""Policies: what a cell may do, as plain data.

A policy is JSON-serialisable so that an operator can write one in a file, the kernel can ship one to a
worker process, and an agent can read the effective one from ``execute_reply`` metadata. Nothing here
enforces anything; the gates read these tables.

Module rules name a module and the attribute patterns (``fnmatch``) allowed and denied on it. A rule for
``numpy`` also covers its submodules unless the submodule is denied or has a rule of its own.
Object rules name ``module.Class.attribute`` paths that are refused on every instance and subclass
(``pandas.DataFrame.query``): they close the dangerous corners of granted libraries.
"""
from __future__ import annotations

import dataclasses
import fnmatch
import json
import os
from dataclasses import dataclass, field
from typing import Any, Mapping

ISOLATION_LEVELS = ("none", "process", "kernel")


@dataclass(frozen=True)
class ModuleRule:
    name: str
    allow: tuple[str, ...] = ("*",)
    deny: tuple[str, ...] = ()

    def attribute_allowed(self, attr: str) -> bool:
        if any(fnmatch.fnmatchcase(attr, p) for p in self.deny):
            return False
        return any(fnmatch.fnmatchcase(attr, p) for p in self.allow)


@dataclass(frozen=True)
class Limits:
    """Per-cell limits. ``None`` means unlimited (only an operator may configure that)."""

    ticks: int | None = 100_000_000
    timeout: float | None = 60.0
    memory_mb: int | None = 2048
    output_bytes: int = 1_000_000

    def tighten(self, other: "Limits") -> "Limits":
        """The stricter of two limit sets, field by field."""

        def low(a, b):
            if a is None:
                return b
            if b is None:
                return a
            return min(a, b)

        return Limits(
            ticks=low(self.ticks, other.ticks),
            timeout=low(self.timeout, other.timeout),
            memory_mb=low(self.memory_mb, other.memory_mb),
            output_bytes=low(self.output_bytes, other.output_bytes),
        )

    def within(self, ceiling: "Limits") -> bool:
        def le(a, b):
            if b is None:
                return True
            return a is not None and a <= b

        return (
            le(self.ticks, ceiling.ticks)
            and le(self.timeout, ceiling.timeout)
            and le(self.memory_mb, ceiling.memory_mb)
            and le(self.output_bytes, ceiling.output_bytes)
        )


@dataclass(frozen=True)
class Policy:
    name: str
    description: str = ""
    modules: tuple[ModuleRule, ...] = ()
    denied_modules: tuple[str, ...] = ()
    object_deny: tuple[str, ...] = ()
    limits: Limits = field(default_factory=Limits)
    files: bool = False
    network: bool = False

    # -- lookups used by the gates -------------------------------------------------------------

    def module_rule(self, modname: str) -> ModuleRule | None:
        """The rule that covers ``modname``, or None when the module is not granted."""
        public = _PUBLIC_FACES.get(modname.split(".", 1)[0])
        if public is not None:
            # plotly.colors *is* _plotly_utils.colors: the same rules as the public package
            modname = public + modname[len(modname.split(".", 1)[0]):]
        if modname.startswith("_") or any(part.startswith("_") for part in modname.split(".")):
            # Private submodules (numpy._core, pandas._libs) are implementation detail.
            return None
        for denied in self.denied_modules:
            if modname == denied or modname.startswith(denied + "."):
                return None
        best = None
        for rule in self.modules:
            if modname == rule.name or modname.startswith(rule.name + "."):
                if best is None or len(rule.name) > len(best.name):
                    best = rule
        return best

    def module_allowed(self, modname: str) -> bool:
        return self.module_rule(modname) is not None

    def allowed_top_modules(self) -> list[str]:
        return sorted({r.name for r in self.modules})

    # -- comparison against a ceiling ----------------------------------------------------------

    def exceeds(self, ceiling: "Policy") -> list[str]:
        """What in this policy grants more than ``ceiling`` (empty when it is within)."""
        why = []
        if self.files and not ceiling.files:
            why.append("files")
        if self.network and not ceiling.network:
            why.append("network")
        for rule in self.modules:
            crule = ceiling.module_rule(rule.name)
            if crule is None:
                why.append(f"module {rule.name}")
            elif set(rule.allow) - set(crule.allow) or set(crule.deny) - set(rule.deny):
                why.append(f"attributes of module {rule.name}")
        # A denial only matters for modules this policy grants: strict need not repeat the rules
        # data-science has for pandas, which strict does not grant at all.
        if any(self.module_allowed(m) for m in set(ceiling.denied_modules) - set(self.denied_modules)):
            why.append("denied modules")
        if any(self.module_allowed(rule.rsplit(".", 1)[0].split(".")[0])
               for rule in set(ceiling.object_deny) - set(self.object_deny)):
            why.append("object rules")
        if not self.limits.within(ceiling.limits):
            why.append("limits")
        return why

    def with_limits(self, **changes: Any) -> "Policy":
        return dataclasses.replace(self, limits=dataclasses.replace(self.limits, **changes))

    # -- serialisation -------------------------------------------------------------------------

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["modules"] = [dataclasses.asdict(m) for m in self.modules]
        return json.loads(json.dumps(d))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Policy":
        known = {f.name for f in dataclasses.fields(cls)} | {"extends"}
        unknown = set(data) - known
        if unknown:
            raise PolicyError(f"unknown policy keys: {', '.join(sorted(unknown))}")
        base: dict[str, Any] = {}
        if "extends" in data:
            parent = PRESETS.get(data["extends"])
            if parent is None:
                raise PolicyError(f"policy extends unknown preset {data['extends']!r}")
            base = parent.to_dict()
        merged = {**base, **{k: v for k, v in data.items() if k != "extends"}}
        if "name" not in merged:
            raise PolicyError("a policy needs a 'name'")
        try:
            modules = tuple(
                ModuleRule(
                    name=m["name"] if isinstance(m, dict) else m,
                    allow=tuple(m.get("allow", ("*",))) if isinstance(m, dict) else ("*",),
                    deny=tuple(m.get("deny", ())) if isinstance(m, dict) else (),
                )
                for m in merged.get("modules", ())
            )
            limits = Limits(**merged.get("limits", {}))
            return cls(
                name=str(merged["name"]),
                description=str(merged.get("description", "")),
                modules=modules,
                denied_modules=tuple(merged.get("denied_modules", ())),
                object_deny=tuple(merged.get("object_deny", ())),
                limits=limits,
                files=bool(merged.get("files", False)),
                network=bool(merged.get("network", False)),
            )
        except (TypeError, KeyError) as exc:
            raise PolicyError(f"malformed policy {merged.get('name')!r}: {exc}") from None


# Private packages that a granted library re-exports as its public modules.
_PUBLIC_FACES = {"_plotly_utils": "plotly"}


class PolicyError(ValueError):
    """A policy file or name that cannot be used."""


# --------------------------------------------------------------------------------------------
# Presets
# --------------------------------------------------------------------------------------------

_STRICT_MODULES = (
    ModuleRule("math"),
    ModuleRule("cmath"),
    ModuleRule("statistics"),
    ModuleRule("json"),
    ModuleRule("datetime"),
    # clocks, sleep and formatting; not tzset (changes the process's time zone), clock_settime & co.
    ModuleRule("time", allow=("time", "perf_counter", "monotonic", "strftime", "strptime", "gmtime", "localtime",
                              "mktime", "struct_time", "time_ns", "perf_counter_ns", "monotonic_ns", "sleep",
                              "process_time", "process_time_ns", "thread_time", "thread_time_ns", "asctime",
                              "ctime", "timezone", "altzone", "daylight", "tzname", "get_clock_info")),
    ModuleRule("calendar"),
    ModuleRule("zoneinfo", allow=("ZoneInfo",)),
    ModuleRule("collections"),
    ModuleRule("itertools"),
    # singledispatchmethod's register() evaluates string annotations with eval() (unrewritten code);
    # singledispatch is handed out with a register() that refuses them.
    ModuleRule("functools", deny=("singledispatchmethod",)),
    ModuleRule("contextlib", deny=("chdir",)),
    # filters are process-wide in-process, which is harmless; showwarning & co. stay the host's
    ModuleRule("warnings", allow=("warn", "filterwarnings", "simplefilter", "catch_warnings", "resetwarnings",
                                  "*Warning")),
    # attrgetter/methodcaller read through the attribute gate; mul/pow/lshift/mod (and in-place) are
    # handed out size-checked like the operators they name (guards.py). The dunder aliases stay hidden.
    ModuleRule("operator", deny=("__*",)),
    ModuleRule("re"),
    ModuleRule("random"),
    ModuleRule("string", deny=("Formatter",)),
    ModuleRule("textwrap"),
    ModuleRule("html"),                      # escape/unescape and the pure-Python HTML parser
    ModuleRule("decimal"),
    ModuleRule("fractions"),
    ModuleRule("numbers"),
    # make_dataclass builds a class from a namespace dict the cell chose.
    ModuleRule("dataclasses", deny=("make_dataclass",)),
    # get_type_hints / ForwardRef evaluate annotation strings with eval() (unrewritten code).
    ModuleRule("typing", deny=("get_type_hints", "ForwardRef", "evaluate_forward_ref")),
    ModuleRule("enum"),
    ModuleRule("abc"),
    ModuleRule("heapq"),
    ModuleRule("bisect"),
    ModuleRule("copy"),
    ModuleRule("pprint"),
    ModuleRule("uuid", allow=("UUID", "uuid4", "uuid5", "uuid3", "NAMESPACE_*")),
    ModuleRule("hashlib"),
    ModuleRule("base64"),
    ModuleRule("unicodedata"),
    ModuleRule("difflib"),
    ModuleRule("array"),
    ModuleRule("io", allow=("StringIO", "BytesIO")),
)

# Modules a sandboxed cell never reaches, even through a granted library (np.lib... -> os).
ALWAYS_DENIED_MODULES = (
    "os", "posix", "nt", "sys", "subprocess", "importlib", "ctypes", "gc", "inspect", "builtins",
    "pickle", "marshal", "shutil", "socket", "ssl", "urllib", "http", "ftplib", "smtplib", "multiprocessing",
    "signal", "pty", "code", "codeop", "runpy", "webbrowser", "threading", "asyncio", "concurrent",
    "tempfile", "pathlib", "sqlite3", "mmap", "resource", "platform", "sysconfig", "site",
    "pkgutil", "zipimport", "atexit", "faulthandler", "tracemalloc", "dis", "pdb", "bdb", "trace",
    "timeit", "doctest", "unittest", "pydoc", "IPython", "ipykernel", "jupyter_client", "zmq",
    "traitlets", "sandbox_kernel", "cffi", "types", "weakref", "copyreg", "shelve", "dbm", "tarfile",
    "zipfile", "fcntl", "termios", "select", "selectors", "logging", "contextvars",
    "numpy.ctypeslib", "numpy.f2py", "numpy.distutils", "numpy.testing", "numpy.lib.format",
    "numpy.lib.npyio", "pandas.compat", "numpy.core",
    # pandas' internals: apply machinery that reaches eval/query by name, I/O plumbing, helpers
    "pandas.core", "pandas.io", "pandas.util",
    "pandas.core.accessor", "pandas.io.pytables", "pandas.io.sql", "pandas.io.parquet",
    "pandas.io.feather_format", "pandas.io.orc", "typing_extensions",
    "pandas.io.clipboard", "pandas.io.clipboards", "pandas.io.pickle", "pandas.core.computation",
    "pandas.util._print_versions", "plotly.io.kaleido", "plotly.io.orca", "plotly.io.base_renderers",
    "plotly.offline", "scipy.weave", "scipy._lib", "distutils", "setuptools", "pip",
    # raw LAPACK/BLAS: f2py wrappers take pivots, sizes and leading dimensions from the caller unchecked and
    # write read-only arrays in place (dlaswp swapped any address, lapack_lite.dgeqrf overflowed the heap:
    # review 10, N10-12); scipy.linalg's own functions are the way in
    "scipy.linalg.lapack", "scipy.linalg.blas", "scipy.linalg.cython_lapack", "scipy.linalg.cython_blas",
    "scipy.linalg._flapack", "scipy.linalg._fblas", "numpy.linalg.lapack_lite",
    "dateutil.tz.win", "dateutil.tzwin", "dateutil.zoneinfo",
)

_DATA_OBJECT_DENY = (
    # pickle loading and writing
    "pandas.read_pickle", "pandas.to_pickle", "pandas.io.pickle.to_pickle", "pandas.DataFrame.to_pickle",
    "pandas.Series.to_pickle",
    "pandas.core.generic.NDFrame.to_pickle", "numpy.ndarray.dump", "numpy.ndarray.dumps",
    # clipboard (spawns xclip/xsel) and formats read through C-level file access
    "pandas.read_clipboard", "pandas.DataFrame.to_clipboard", "pandas.Series.to_clipboard",
    "pandas.core.generic.NDFrame.to_clipboard",
    "pandas.read_hdf", "pandas.HDFStore", "pandas.DataFrame.to_hdf", "pandas.core.generic.NDFrame.to_hdf",
    "pandas.read_parquet", "pandas.DataFrame.to_parquet", "pandas.read_feather", "pandas.DataFrame.to_feather",
    "pandas.read_orc", "pandas.DataFrame.to_orc", "pandas.read_sql", "pandas.read_sql_query",
    "pandas.read_sql_table", "pandas.DataFrame.to_sql", "pandas.core.generic.NDFrame.to_sql",
    "pandas.show_versions", "pandas.read_spss", "pandas.read_sas",
    # numpy raw file access in C and loaders that can unpickle
    "numpy.ndarray.tofile", "numpy.fromfile", "numpy.memmap", "numpy.lib.npyio.DataSource",
    "numpy.DataSource", "numpy.ndarray.ctypes", "numpy.lib.stride_tricks.as_strided",
    # foreign-function handles of a bit generator's state (ctypes: CFUNCTYPE, from_address; cffi: an FFI)
    "numpy.random.BitGenerator.ctypes", "numpy.random.BitGenerator.cffi",
    # plotly's import helpers import any module by the caller's name and hand back it or its attributes
    # (relative_import('x', [], ['ctypes.CDLL']) gave a cell ctypes.CDLL)
    "plotly.relative_import", "_plotly_utils.importers.relative_import", "plotly.optional_imports.get_module",
    "_plotly_utils.optional_imports.get_module",
    # the test runners by their other names (ModuleRule deny=("test",) above covers the module attributes)
    "numpy._pytesttester.PytestTester", "pandas.util._tester.test",
    # builds a spline with none of the constructor's checks: coefficients shorter than the knots read past
    # their buffer (review none4, N4-9)
    "scipy.interpolate.BSpline.construct_fast",
    # evaluates a string in its caller's globals
    "numpy.bmat",
    # import a module named by a string and write C-level docstrings into the host's objects
    "numpy.lib.add_newdoc", "numpy.lib.add_docstring",
    # extension registries change pandas for the whole process
    "pandas.api.extensions.register_dataframe_accessor", "pandas.api.extensions.register_series_accessor",
    "pandas.api.extensions.register_index_accessor", "pandas.api.extensions.register_extension_dtype",
    "scipy.LowLevelCallable",
    # hand out the raw LAPACK/BLAS wrappers above by name
    "scipy.linalg.get_lapack_funcs", "scipy.linalg.get_blas_funcs", "scipy.linalg.find_best_blas_type",
    # plotly: image export starts a browser process; renderers open browsers
    "plotly.io.write_image", "plotly.io.to_image", "plotly.io.full_figure_for_development",
    "plotly.io.renderers", "plotly.basedatatypes.BaseFigure.write_image",
    "plotly.basedatatypes.BaseFigure.to_image", "plotly.basedatatypes.BaseFigure.full_figure_for_development",
)

STRICT = Policy(
    name="strict",
    description="Pure Python with the safe standard library helpers; no files, no network.",
    modules=_STRICT_MODULES,
    denied_modules=ALWAYS_DENIED_MODULES,
    object_deny=(),
    limits=Limits(ticks=50_000_000, timeout=30.0, memory_mb=1024, output_bytes=1_000_000),
    files=False,
    network=False,
)

DATA_SCIENCE = Policy(
    name="data-science",
    description="strict plus numpy, pandas, scipy and plotly; files inside the working directory.",
    modules=_STRICT_MODULES + (
        # `test` (numpy's and scipy's PytestTester in every subpackage, pandas' test()): pytest in the
        # kernel's process imports and runs the files a cell wrote (conftest.py, test modules) as plain
        # Python and puts the working directory on sys.path; no notebook runs a library's test suite.
        ModuleRule("numpy", deny=("test",)),
        ModuleRule("pandas", deny=("test",)),
        ModuleRule("scipy", deny=("test",)),
        ModuleRule("plotly"),
        ModuleRule("csv"),
        # pandas' date parser and time zones; its Windows registry and tarball corners stay denied, and
        # its objects are read-only (gates.write): the default parser and the UTC singleton are the process's
        ModuleRule("dateutil"),
        # listing the working directory: every directory read goes through the files confinement
        ModuleRule("glob", allow=("glob", "iglob", "escape", "has_magic")),
    ),
    denied_modules=ALWAYS_DENIED_MODULES,
    object_deny=_DATA_OBJECT_DENY,
    limits=Limits(ticks=200_000_000, timeout=60.0, memory_mb=2048, output_bytes=1_000_000),
    files=True,
    network=False,
)

PRESETS: dict[str, Policy] = {p.name: p for p in (STRICT, DATA_SCIENCE)}
DEFAULT_POLICY = "data-science"


def load_policy_file(path: str) -> Policy:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, json.JSONDecodeError) as exc:
        raise PolicyError(f"cannot read policy file {os.path.basename(path)}: {exc}") from None
    if not isinstance(data, dict):
        raise PolicyError(f"policy file {os.path.basename(path)} must hold a JSON object")
    return Policy.from_dict(data)


def load_policies(directory: str | None = None) -> dict[str, Policy]:
    """The presets plus every ``*.json`` policy in ``directory`` (operator policies win on name)."""
    policies = dict(PRESETS)
    if directory and os.path.isdir(directory):
        for entry in sorted(os.listdir(directory)):
            if entry.endswith(".json"):
                p = load_policy_file(os.path.join(directory, entry))
                policies[p.name] = p
    return policies
