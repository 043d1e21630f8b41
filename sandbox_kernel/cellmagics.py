"""The IPython syntax the engine runs itself: %time, %timeit, %%time, %%timeit, %%writefile, `obj?`.

Each is turned into ordinary Python *before* the rewriter sees the cell, so the timed statement is
parsed, validated, rewritten and run exactly like the rest of the cell, under the cell's limits. The
magic line is replaced by `pass` (same indentation, same line), the cell is parsed, and each of those
`pass` statements is then replaced by the magic's statements:

    %time STMT        '%time_start'(site); try: STMT  finally: '%time_end'(site)
    x = %time EXPR    ... try: '%time_keep'(site, EXPR) finally: ...; x = '%time_value'(site)
    %timeit STMT      def '%timeit'(_it, _timer): setup; _t0 = _timer(); for _i in _it: STMT; ...
                      try: '%timeit_run'('%timeit', site, number, repeat, ...) finally: del '%timeit'
    obj?              '%help_on'(lambda: obj, 'obj')
    %%writefile f     '%writefile'('f', <the rest of the cell, as text>, append)

(IPython's own template for timeit.) The '%...' names cannot be written in a cell (they are not
identifiers); they are the engine's helpers below, in the cell's builtins. A cell that shadows nothing
can do nothing with them it could not do by calling time.perf_counter itself.
"""
from __future__ import annotations

import ast
import itertools
import math
import re
import resource
import shlex
import time
from dataclasses import dataclass

from .magics import ENGINE_CELL_MAGICS, ENGINE_MAGICS, help_target, scan_lines, statement_indent

TIMEIT_DEFAULT_REPEAT = 7
_NO_TYPE_PARAMS = {"type_params": []} if "type_params" in ast.FunctionDef._fields else {}
AUTORANGE_SECONDS = 0.2
# An automatic %timeit spends at most this share of what is left of the cell's time and ticks.
BUDGET_SHARE = 0.5


@dataclass
class Site:
    kind: str          # time | timeit | help
    line: int          # 1-based line of the magic in the cell
    col: int           # its indentation
    args: str = ""     # what follows the magic's name (the statement, with options for timeit)
    args_col: int = 0
    target: str = ""   # `x` in `x = %time ...`
    cell: bool = False
    detail: int = 1    # `?` or `??`
    body: str = ""     # %%writefile: the text to write


MagicSyntaxError = SyntaxError   # what IPython reports as a UsageError: the cell does not run


def prepare(source: str) -> tuple[str, list[Site]]:
    """The cell with each engine magic line replaced by `pass`, and where they were."""
    if "%" not in source and "?" not in source:
        return source, []
    lines = source.split("\n")
    sites: list[Site] = []
    seen_code = False
    for line in scan_lines(source):
        text = line.text
        indent = statement_indent(text, lines[:line.index])
        if line.kind == "cell_magic" and line.name in ENGINE_CELL_MAGICS and not seen_code and not line.indented:
            args_at = text.index("%%") + 2 + len(line.name)
            site = Site(line.name, line.index + 1, 0, text[args_at:].strip(), args_at, cell=True)
            if line.name in ("writefile", "file"):   # the body is text, not Python
                site.kind, site.body = "writefile", "\n".join(lines[line.index + 1:]) + "\n"
                lines[line.index + 1:] = [""] * (len(lines) - line.index - 1)
            sites.append(site)
            lines[line.index] = "pass"
            break
        if line.kind in ("line_magic", "assign_magic") and line.name in ENGINE_MAGICS:
            target = text.split("=", 1)[0].strip() if line.kind == "assign_magic" else ""
            at = text.index("%") + 1 + len(line.name)
            args = text[at:]
            sites.append(Site(line.name, line.index + 1, indent, args.strip(), at + len(args) - len(args.lstrip()),
                              target=target))
            lines[line.index] = " " * indent + "pass"
        elif line.kind == "help":
            name, detail = help_target(text)
            sites.append(Site("help", line.index + 1, indent, name, detail=detail))
            lines[line.index] = " " * indent + "pass"
        if text.strip() and not text.lstrip().startswith("#"):
            seen_code = True
    return "\n".join(lines), sites


def apply(tree: ast.Module, sites: list[Site], filename: str) -> ast.Module:
    """Replace each site's `pass` with the magic's statements (before the rewriter runs)."""
    if not sites:
        return tree
    by_place = {(s.line, s.col): s for s in sites}
    _Replacer(by_place, filename).visit(tree)
    return tree


class _Replacer(ast.NodeVisitor):
    def __init__(self, sites: dict, filename: str):
        self.sites = sites
        self.filename = filename

    def generic_visit(self, node):
        for field in ("body", "orelse", "finalbody"):
            stmts = getattr(node, field, None)
            if isinstance(stmts, list) and stmts and isinstance(stmts[0], ast.stmt):
                setattr(node, field, self._statements(stmts))
        super().generic_visit(node)

    def _statements(self, stmts: list) -> list:
        out = []
        for i, stmt in enumerate(stmts):
            site = self.sites.get((stmt.lineno, stmt.col_offset)) if isinstance(stmt, ast.Pass) else None
            if site is None:
                out.append(stmt)
            elif site.cell:
                out.extend(self._cell(site, stmts[i + 1:]))
                break
            else:
                out.extend(self._line(site))
        return out

    # -- building the replacements ------------------------------------------------------------------

    def _parse(self, text: str, line: int, col: int) -> list:
        try:
            tree = ast.parse(text, mode="exec")
        except SyntaxError as exc:
            error = MagicSyntaxError(exc.msg, (self.filename, line + (exc.lineno or 1) - 1,
                                               (exc.offset or 0) + col, exc.text, None, None))
            raise error from None
        for node in ast.walk(tree):
            if hasattr(node, "lineno"):
                if node.lineno == 1:
                    node.col_offset += col
                    if getattr(node, "end_lineno", None) == 1:
                        node.end_col_offset += col
                node.lineno += line - 1
                if getattr(node, "end_lineno", None) is not None:
                    node.end_lineno += line - 1
        return tree.body

    def _line(self, site: Site) -> list:
        if site.kind == "help":
            getter = self._parse(site.args, site.line, site.col)[0].value
            return [_at(site, ast.Expr(_helper("%help_on", ast.Lambda(args=_no_arguments(), body=getter),
                                               ast.Constant(site.args), ast.Constant(site.detail))))]
        if site.kind == "time":
            body = self._parse(site.args, site.line, site.args_col) if site.args else []
            return self._timed(site, body)
        options, statement, at = _timeit_options(site.args, site.line)
        body = self._parse(statement, site.line, site.args_col + at) if statement.strip() else []
        return self._timeit(site, options, [], body)

    def _cell(self, site: Site, body: list) -> list:
        if site.kind == "writefile":
            append, name = _writefile_options(site.args, site.line)
            return [_at(site, ast.Expr(_helper("%writefile", ast.Constant(name), ast.Constant(site.body),
                                               ast.Constant(append))))]
        if site.kind == "time":
            if site.args:
                raise MagicSyntaxError("Can't use statement directly after '%%time'!",
                                       (self.filename, site.line, 1, None, None, None))
            return self._timed(site, body, cell=True)
        options, setup, at = _timeit_options(site.args, site.line)
        setup_body = self._parse(setup, site.line, site.args_col + at) if setup.strip() else []
        return self._timeit(site, options, setup_body, body)

    def _timed(self, site: Site, body: list, cell: bool = False) -> list:
        key = ast.Constant(f"{self.filename}:{site.line}")
        keeps = bool(body) and isinstance(body[-1], ast.Expr) and (cell or site.target or len(body) == 1)
        if keeps:
            last = body[-1]
            body = body[:-1] + [ast.copy_location(ast.Expr(_helper("%time_keep", key, last.value)), last)]
        out = [_at(site, ast.Expr(_helper("%time_start", key))),
               _at(site, ast.Try(body=body or [_at(site, ast.Pass())], handlers=[], orelse=[],
                                 finalbody=[_at(site, ast.Expr(_helper("%time_end", key)))]))]
        if site.target:
            assign = self._parse(f"{site.target} = None", site.line, site.col)[0]
            assign.value = _helper("%time_value", key)
            out.append(_at(site, assign))
        elif keeps:
            out.append(_at(site, ast.Expr(_helper("%time_value", key))))   # shown when it ends the cell
        return out

    def _timeit(self, site: Site, options: dict, setup: list, body: list) -> list:
        if not body:
            return [_at(site, ast.Pass())]
        loop = ast.For(target=ast.Name("_i", ast.Store()), iter=ast.Name("_it", ast.Load()), body=body,
                       orelse=[])
        inner = ast.FunctionDef(
            name="%timeit", args=_arguments("_it", "_timer"), decorator_list=[], returns=None, **_NO_TYPE_PARAMS,
            body=setup + [_assign("_t0", ast.Call(ast.Name("_timer", ast.Load()), [], [])), loop,
                          _assign("_t1", ast.Call(ast.Name("_timer", ast.Load()), [], [])),
                          ast.Return(ast.BinOp(ast.Name("_t1", ast.Load()), ast.Sub(), ast.Name("_t0", ast.Load())))])
        key = ast.Constant(f"{self.filename}:{site.line}")
        run = _helper("%timeit_run", ast.Name("%timeit", ast.Load()), key,
                      *(ast.Constant(options[k]) for k in ("number", "repeat", "precision", "quiet")))
        shown = []
        if site.target or options["save"]:
            ran = self._parse(f"{site.target or options['save']} = None", site.line, site.col)[0]
            ran.value = run
        elif options["result"]:
            ran = ast.Expr(_helper("%time_keep", key, run))
            shown = [_at(site, ast.Expr(_helper("%time_value", key)))]   # shown when it ends the cell
        else:
            ran = ast.Expr(run)
        return [_located(site, inner),
                _at(site, ast.Try(body=[_at(site, ran)], handlers=[], orelse=[],
                                  finalbody=[_at(site, ast.Delete([ast.Name("%timeit", ast.Del())]))]))] + shown


def _timeit_options(args: str, line: int) -> tuple[dict, str, int]:
    """IPython's timeit options (-n N -r R -p P -q -o -v NAME; -t -c accepted and ignored), then the
    statement; returns (options, statement, where the statement starts in args)."""
    options = {"number": 0, "repeat": TIMEIT_DEFAULT_REPEAT, "precision": 3, "quiet": False, "result": False,
               "save": ""}
    at = 0
    valued = {"n": "number", "r": "repeat", "p": "precision", "v": "save"}
    while True:
        m = re.match(r"\s*-(\w)(\S*)", args[at:])
        if not m or args[at:].lstrip().startswith("--"):
            break
        flag, rest = m.group(1), m.group(2)
        end = at + m.end()
        if flag in valued:
            if not rest:
                value = re.match(r"\s*(\S+)", args[end:])
                if not value:
                    raise MagicSyntaxError(f"timeit: option -{flag} needs a value", (None, line, 1, None, None, None))
                rest, end = value.group(1), end + value.end()
            if flag == "v":
                options["save"] = rest
            else:
                try:
                    options[valued[flag]] = int(rest)
                except ValueError:
                    raise MagicSyntaxError(f"timeit: option -{flag} takes a number, not {rest!r}",
                                           (None, line, 1, None, None, None)) from None
        else:
            for letter in flag + rest:
                if letter not in "qotc":
                    raise MagicSyntaxError(f"timeit: option -{letter} not recognized",
                                           (None, line, 1, None, None, None))
                options["quiet"] |= letter == "q"
                options["result"] |= letter == "o"
        at = end
    if options["repeat"] < 1 or options["number"] < 0:
        raise MagicSyntaxError("timeit: -n and -r take positive numbers", (None, line, 1, None, None, None))
    statement = args[at:]
    return options, statement.strip(), at + len(statement) - len(statement.lstrip())


def _writefile_options(args: str, line: int) -> tuple[bool, str]:
    """`%%writefile [-a] name` (the name may be quoted)."""
    try:
        words = shlex.split(args)
    except ValueError as exc:
        raise MagicSyntaxError(f"writefile: {exc}", (None, line, 1, None, None, None)) from None
    append = bool(words) and words[0] in ("-a", "--append")
    words = words[1:] if append else words
    if len(words) != 1:
        raise MagicSyntaxError("writefile: give one file name (%%writefile [-a] name)",
                               (None, line, 1, None, None, None))
    return append, words[0]


def _helper(name: str, *args) -> ast.Call:
    return ast.Call(ast.Name(name, ast.Load()), list(args), [])


def _assign(name: str, value) -> ast.Assign:
    return ast.Assign(targets=[ast.Name(name, ast.Store())], value=value)


def _no_arguments() -> ast.arguments:
    return ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None,
                         defaults=[])


def _arguments(*names: str) -> ast.arguments:
    a = _no_arguments()
    a.args = [ast.arg(n) for n in names]
    return a


def _at(site: Site, node):
    """node (and whatever it holds without a place yet) at the magic's line."""
    return _located(site, node)


def _located(site: Site, node):
    for child in ast.walk(node):
        if "lineno" in child._attributes and getattr(child, "lineno", None) is None:
            child.lineno, child.col_offset = site.line, site.col
            child.end_lineno, child.end_col_offset = site.line, site.col
    return node


# -- what the helpers do when the cell runs -------------------------------------------------------------

def format_time(seconds: float, precision: int = 3) -> str:
    """A duration as IPython prints one (`1.23 ms`, `456 ns`, `1min 3s`)."""
    if seconds >= 60.0:
        parts, left = [], seconds
        for suffix, length in (("d", 86400), ("h", 3600), ("min", 60), ("s", 1)):
            value = int(left / length)
            if value > 0:
                left %= length
                parts.append(f"{value}{suffix}")
            if left < 1:
                break
        return " ".join(parts)
    order = min(-int(math.floor(math.log10(seconds)) // 3), 3) if seconds > 0 else 3
    return "%.*g %s" % (precision, seconds * (1, 1e3, 1e6, 1e9)[order], ("s", "ms", "\u03bcs", "ns")[order])


class TimeitResult:
    """What `%timeit -o` returns: the same fields as IPython's."""

    def __init__(self, loops: int, repeat: int, all_runs: list, precision: int):
        self.loops, self.repeat, self.all_runs = loops, repeat, list(all_runs)
        self.timings = [run / loops for run in all_runs]
        self.best, self.worst = min(self.timings), max(self.timings)
        self.average = math.fsum(self.timings) / len(self.timings)
        self.stdev = (math.fsum((t - self.average) ** 2 for t in self.timings) / len(self.timings)) ** 0.5
        self.compile_time = 0.0
        self._precision = precision

    def __str__(self) -> str:
        return (f"{format_time(self.average, self._precision)} \u00b1 {format_time(self.stdev, self._precision)} "
                f"per loop (mean \u00b1 std. dev. of {self.repeat} run{'' if self.repeat == 1 else 's'}, "
                f"{self.loops:,} loop{'' if self.loops == 1 else 's'} each)")

    def __repr__(self) -> str:
        return f"<TimeitResult : {self}>"


class MagicRuntime:
    """The helpers behind the '%...' names; one per engine."""

    def __init__(self, engine):
        self.engine = engine
        self._started: dict = {}
        self._kept: dict = {}

    def new_cell(self) -> None:
        self._started.clear()
        self._kept.clear()

    # %time
    def time_start(self, key: str) -> None:
        self._kept.pop(key, None)
        usage = resource.getrusage(resource.RUSAGE_SELF)
        self._started[key] = (usage.ru_utime, usage.ru_stime, time.perf_counter())

    def time_keep(self, key: str, value) -> None:
        self._kept[key] = value

    def time_end(self, key: str) -> None:
        started = self._started.pop(key, None)
        if started is None:
            return
        usage, wall = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        user, system = usage.ru_utime - started[0], usage.ru_stime - started[1]
        print(f"CPU times: user {format_time(user)}, sys: {format_time(system)}, total: {format_time(user + system)}")
        print(f"Wall time: {format_time(wall - started[2])}")

    def time_value(self, key: str):
        return self._kept.pop(key, None)

    # %%writefile
    def writefile(self, name: str, text: str, append: bool) -> None:
        """Writes through the cell's own open(): the working directory only, and only when the policy
        grants files."""
        opener = self.engine.builtins["open"]
        try:
            opener(name, "rb").close()
            exists = True
        except FileNotFoundError:
            exists = False
        with opener(name, "a" if append else "w", encoding="utf-8") as fh:
            fh.write(text)
        print(f"{'Appending to' if append and exists else 'Overwriting' if exists else 'Writing'} {name}")

    # %timeit
    def timeit_run(self, inner, key: str, number: int, repeat: int, precision: int, quiet: bool):
        clock = time.perf_counter
        if number == 0:
            number, spent, ticks = self._autorange(inner, clock)
            number, repeat = self._within_budget(number, repeat, spent, ticks)
        runs = [inner(itertools.repeat(None, number), clock) for _ in range(repeat)]
        result = TimeitResult(number, repeat, runs, precision)
        if not quiet:
            if result.worst > 4 * result.best and result.best > 0 and result.worst > 1e-6:
                print(f"The slowest run took {result.worst / result.best:0.2f} times longer than the fastest. "
                      f"This could mean that an intermediate result is being cached.")
            print(result)
        return result

    def _autorange(self, inner, clock):
        """IPython's: 1, 10, 100 ... loops until one run takes 0.2 s, stopping early where ten times the
        last run would not fit in the cell's budget; (loops, seconds, ticks) of the last run."""
        budget = self.engine.budget
        for index in range(10):
            number = 10 ** index
            before = budget.ticks_used()
            spent = inner(itertools.repeat(None, number), clock)
            ticks = max(budget.ticks_used() - before, 1)
            if spent >= AUTORANGE_SECONDS or self._runs_that_fit(10 * spent, 10 * ticks) < 1:
                break
        return number, spent, ticks

    def _runs_that_fit(self, seconds: float, ticks: int) -> float:
        """How many runs of this cost fit in BUDGET_SHARE of what the cell has left."""
        budget = self.engine.budget
        room = [float("inf")]
        if budget.deadline is not None:
            room.append(BUDGET_SHARE * max(budget.deadline - time.monotonic(), 0.0) / max(seconds, 1e-9))
        if budget.tick_limit is not None:
            room.append(BUDGET_SHARE * max(budget.tick_limit - budget.ticks_used(), 0) / max(ticks, 1))
        return min(room)

    def _within_budget(self, number: int, repeat: int, spent: float, ticks: int) -> tuple[int, int]:
        """Fewer loops per run, then fewer runs, so that the runs take at most BUDGET_SHARE of the time and
        ticks the cell has left (IPython would take 7 runs whatever they cost)."""
        runs_that_fit = self._runs_that_fit(spent, ticks)     # runs of `number` loops
        while number > 1 and repeat > runs_that_fit:
            number //= 10
            runs_that_fit *= 10
        return number, max(1, min(repeat, int(runs_that_fit)))
