"""Command line: launch the kernel, install its kernelspec, or run a notebook through it.

    python -m sandbox_kernel -f CONNECTION_FILE [--SandboxKernel.policy=NAME ...]   (Jupyter does this)
    python -m sandbox_kernel install [--user | --sys-prefix | --prefix P] [--name N] [--display-name D]
    python -m sandbox_kernel run NOTEBOOK.ipynb [--kernel NAME] [--timeout S]
    python -m sandbox_kernel mcp [--transport stdio|http] [--policy NAME] [--isolation LEVEL] ...
                                                         (MCP server; needs the `mcp` extra)
    python -m sandbox_kernel audit [--policy P] [--isolation L] [--json]   (the self-audit's canaries)
    python -P -m sandbox_kernel eg-launch --kernel-id ID --response-address IP:PORT --public-key KEY
                                          [--port-range L..H] [kernel options]
                             (Enterprise Gateway's kernel launcher protocol; needs the `gateway` extra)
"""
from __future__ import annotations

import argparse
import os
import sys


def _strip_cwd_from_path() -> None:
    """Sandboxed cells may write files in the working directory; the kernel must never import them."""
    cwd = os.getcwd()
    sys.path[:] = [p for p in sys.path if p not in ("", ".") and os.path.abspath(p) != cwd]


def launch(argv: list[str]) -> None:
    _strip_cwd_from_path()
    # The debugger is off in this kernel (kernel.do_debug_request refuses; kernel_info advertises none), and
    # debugpy is the largest import of ipykernel's start (about a quarter second here): never loaded.
    sys.modules.setdefault("debugpy", None)
    from ipykernel.kernelapp import IPKernelApp

    from .kernel import SandboxKernel

    class SandboxKernelApp(IPKernelApp):
        """IPKernelApp whose IPython shell never runs startup files, extensions or exec_lines and
        never puts the working directory on sys.path: none of that is sandboxed."""

        name = "sandbox-kernel"

        def init_path(self):
            _strip_cwd_from_path()

        def init_extensions(self):
            pass

        def init_code(self):
            pass

    # IPython's history database would record cell text on disk; the kernel keeps history in memory.
    SandboxKernelApp.launch_instance(argv=["--HistoryManager.enabled=False", *argv],
                                     kernel_class=SandboxKernel)


def _install(args: list[str]) -> int:
    from .install import DEFAULT_DISPLAY_NAME, DEFAULT_NAME, install

    parser = argparse.ArgumentParser(prog="python -m sandbox_kernel install",
                                     description="Register the Sandboxed Python kernelspec with Jupyter.")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--user", action="store_true", help="install for the current user")
    where.add_argument("--sys-prefix", action="store_true", help="install into this Python environment")
    where.add_argument("--prefix", help="install under this prefix")
    parser.add_argument("--name", default=DEFAULT_NAME, help=f"kernelspec name (default {DEFAULT_NAME})")
    parser.add_argument("--display-name", default=DEFAULT_DISPLAY_NAME,
                        help=f"name shown in the launcher (default '{DEFAULT_DISPLAY_NAME}')")
    parser.add_argument("--policy", help="bake --SandboxKernel.policy=NAME into the kernel's argv")
    parser.add_argument("--ceiling-policy", help="bake --SandboxKernel.ceiling_policy=NAME")
    parser.add_argument("--isolation", help="bake --SandboxKernel.isolation=LEVEL")
    parser.add_argument("--policies-dir", help="bake --SandboxKernel.policies_dir=DIR")
    ns = parser.parse_args(args)
    options = [f"--SandboxKernel.{trait}={value}" for trait, value in (
        ("policy", ns.policy), ("ceiling_policy", ns.ceiling_policy), ("isolation", ns.isolation),
        ("policies_dir", os.path.abspath(ns.policies_dir) if ns.policies_dir else None)) if value]
    prefix = sys.prefix if ns.sys_prefix else ns.prefix
    path = install(user=ns.user, prefix=prefix, name=ns.name, display_name=ns.display_name, options=options)
    print(f"Installed kernelspec '{ns.name}' ({ns.display_name}) in {path}")
    return 0


def _run(args: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m sandbox_kernel run",
                                     description="Execute a notebook with the Sandboxed Python kernel "
                                                 "and print each cell's outputs.")
    parser.add_argument("notebook")
    parser.add_argument("--kernel", default="sandboxed-python", help="kernelspec name")
    parser.add_argument("--timeout", type=float, default=120, help="seconds allowed per cell")
    parser.add_argument("--here", action="store_true",
                        help="run in the notebook's own directory (files the cells write stay there); "
                             "by default the notebook runs in a fresh temporary working directory")
    ns = parser.parse_args(args)
    return run_notebook(ns.notebook, kernel_name=ns.kernel, timeout=ns.timeout, in_place=ns.here)


def _mcp(args: list[str]) -> int:
    try:
        from .mcp_server import main as mcp_main
    except ImportError as exc:
        print(f"the MCP server needs the MCP Python SDK: pip install 'sandbox_kernel[mcp]' ({exc})", file=sys.stderr)
        return 2
    return mcp_main(args)


def run_notebook(path: str, *, kernel_name: str = "sandboxed-python", timeout: float = 120,
                 in_place: bool = False, out=None) -> int:
    """Execute a notebook and print every cell's outputs. Cells tagged `raises-exception` may fail;
    any other failure ends the run with exit status 1. The working directory is a fresh temporary one
    unless `in_place`, so a demo run leaves no files behind."""
    import tempfile

    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    out = out or sys.stdout
    nb = nbformat.read(path, as_version=4)
    status = 0
    with tempfile.TemporaryDirectory(prefix="sandbox-run-") as tmp:
        workdir = os.path.dirname(os.path.abspath(path)) if in_place else tmp
        print(f"Running {path} with kernel '{kernel_name}' (working directory: "
              f"{'the notebook' + chr(39) + 's' if in_place else 'a temporary directory'})", file=out)
        client = NotebookClient(nb, kernel_name=kernel_name, timeout=timeout,
                                resources={"metadata": {"path": workdir}})
        try:
            client.execute()
        except CellExecutionError as exc:
            status = 1
            failure = str(exc).strip().splitlines()
            print("\nA cell failed:\n" + "\n".join(failure[-20:]), file=out)
    for cell in nb.cells:
        if cell.cell_type == "markdown":   # the notebook's own explanations, as text: the run reads as a tour
            print("\n" + cell.source.strip(), file=out)
            continue
        if cell.cell_type != "code":
            continue
        tag = " [raises-exception]" if "raises-exception" in cell.metadata.get("tags", []) else ""
        # numbered as the kernel numbers it (In [n]), which is the number denials and %sandbox_audit give
        count = cell.get("execution_count")
        print(f"\n--- cell In [{count if count is not None else ' '}]{tag} ---", file=out)
        print(_indent(cell.source), file=out)
        for output in cell.get("outputs", []):
            print(_indent(_output_text(output), "  | "), file=out)
    return status


def _indent(text: str, prefix: str = "  > ") -> str:
    return "\n".join(prefix + line for line in str(text).rstrip("\n").splitlines()) if text else prefix.rstrip()


def _output_text(output) -> str:
    kind = output.get("output_type")
    if kind == "stream":
        return output.get("text", "")
    if kind == "error":
        return "\n".join(output.get("traceback") or [f"{output.get('ename')}: {output.get('evalue')}"])
    data = output.get("data", {})
    text = data.get("text/plain", "")
    others = [m for m in data if m != "text/plain"]
    return text + (f"\n[{', '.join(others)}]" if others else "")


def main(argv: list[str] | None = None) -> int | None:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "install":
        return _install(argv[1:])
    if argv and argv[0] == "run":
        return _run(argv[1:])
    if argv and argv[0] == "mcp":
        return _mcp(argv[1:])
    if argv and argv[0] == "audit":
        _strip_cwd_from_path()  # the audit's engine may import modules: never one from the current directory
        from .audit.cli import main as audit_main

        return audit_main(argv[1:])
    if argv and argv[0] == "eg-launch":
        _strip_cwd_from_path()
        from .gateway_launcher import main as eg_launch_main

        return eg_launch_main(argv[1:])
    if argv and argv[0] in ("-h", "--help", "help"):
        print(__doc__)
        return 0
    launch(argv)
    return None


if __name__ == "__main__":
    sys.exit(main())
