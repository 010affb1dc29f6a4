"""Command line: ``python -m pyllama_yield info``."""

from __future__ import annotations

import argparse
import json
import sys


def cmd_info(args: argparse.Namespace) -> int:
    import pyllama_yield
    from pyllama_yield.backends import backends, build_info, system_info

    info = {
        "version": pyllama_yield.__version__,
        "build": build_info(),
        "backends": [{"name": b.name, "devices": [d.__dict__ for d in b.devices]} for b in backends()],
        "system_info": system_info(),
    }
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    build = info["build"]
    print(f"pyllama-yield {info['version']}")
    print(
        f"llama.cpp     commit {build['llama_cpp_commit']} (ggml {build['ggml_version']}, {build['build_type']}, "
        f"{build['compiler']})"
    )
    for b in info["backends"]:
        print(f"backend       {b['name']}")
        for d in b["devices"]:
            mib = d["memory_total"] // (1 << 20)
            print(f"  device      {d['name']} [{d['type']}] {d['description']} ({mib} MiB)")
    print(f"system        {info['system_info']}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pyllama_yield", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p_info = sub.add_parser("info", help="version, llama.cpp build, backends, devices, system info")
    p_info.add_argument("--json", action="store_true", help="machine-readable output")
    p_info.set_defaults(func=cmd_info)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
