"""``python -m sandbox_kernel audit``: run the canaries under one configuration and print the table."""
from __future__ import annotations

import argparse
import json
import sys


def _policy(name: str, policies_dir: str | None):
    import os

    from ..policy import PolicyError, load_policies, load_policy_file

    if name.endswith(".json") and os.path.isfile(name):
        return load_policy_file(name)
    policies = load_policies(policies_dir)
    if name not in policies:
        raise PolicyError(f"unknown policy '{name}'; available: {', '.join(sorted(policies))}")
    return policies[name]


def main(argv: list[str]) -> int:
    from ..isolation import default_isolation
    from ..policy import DEFAULT_POLICY, ISOLATION_LEVELS, PolicyError

    parser = argparse.ArgumentParser(
        prog="python -m sandbox_kernel audit",
        description="Run canary attacks (each a real attempt that must fail) under one policy and isolation "
                    "level, and print held/breached per canary. Exit status 1 if anything the level promises "
                    "was breached or could not be checked.")
    parser.add_argument("--policy", default=DEFAULT_POLICY, help="a policy name, or a policy .json file")
    parser.add_argument("--policies-dir", help="directory of *.json policies (as the kernel's policies_dir)")
    parser.add_argument("--isolation", choices=ISOLATION_LEVELS, default=default_isolation(),
                        help="isolation level (default: this platform's default)")
    parser.add_argument("--degraded", action="store_true", help="let level kernel run with the layers that apply")
    parser.add_argument("--landlock-abi", type=int, help="handle no more than this Landlock ABI (0: none)")
    parser.add_argument("--options", default="{}", help="worker options as JSON (the kernel's isolation_options)")
    parser.add_argument("--mime-allowlist", help="comma-separated MIME types the output filter publishes")
    parser.add_argument("--json", action="store_true", help="print the report as JSON (for agents)")
    ns = parser.parse_args(argv)
    try:
        policy = _policy(ns.policy, ns.policies_dir)
        options = json.loads(ns.options)
        if not isinstance(options, dict):
            raise ValueError("--options must be a JSON object")
    except (PolicyError, ValueError, OSError) as exc:
        print(f"audit: {exc}", file=sys.stderr)
        return 2
    if ns.degraded:
        options["degraded"] = True
    if ns.landlock_abi is not None:
        options["landlock_abi"] = ns.landlock_abi
    allowlist = [m.strip() for m in ns.mime_allowlist.split(",") if m.strip()] if ns.mime_allowlist else None

    from .report import table
    from .run import run_audit

    report = run_audit(policy, ns.isolation, options, mime_allowlist=allowlist)
    sys.stdout.write(json.dumps(report, indent=1) + "\n" if ns.json else table(report))
    return 0 if report["passed"] else 1
