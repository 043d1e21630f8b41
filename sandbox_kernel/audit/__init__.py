"""The self-audit: canary attacks, each a real attempt that must fail, run under one configuration
(policy, isolation level, worker options) against the real engine and workers; see docs/security.md,
"The self-audit".

    python -m sandbox_kernel audit [--policy P] [--isolation L] [--json]

cells.py     the canaries run as cells (processes, network, files, signals, gadget routes, frames,
             limits, output for the browser) and how each is judged
native.py    the same attempts as native code inside a worker (an engine that runs nothing else)
scene.py     what the host sets up and reads as evidence (files, listener, victim)
run.py       run_audit(): one configuration, one report
report.py    the table; cli.py the command; onstart.py the kernel's audit at start-up
"""
from .run import run_audit

__all__ = ["run_audit"]
