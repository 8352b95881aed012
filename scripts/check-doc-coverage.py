#!/usr/bin/env python3
"""Fails when a public symbol of our library modules has no documentation comment.

Reads the symbol graphs that `scripts/build-docs.sh` emits (`<Module>.symbols.json` and the
module's extension graphs `<Module>@<Other>.symbols.json`) and checks every public or open
symbol declared in `Sources/<Module>/`:

  * it has a `///` doc comment with a one-line summary;
  * a function, initializer or subscript with parameters documents them
    (`- Parameter x:` or `- Parameters:`);
  * one that throws has `- Throws:`;
  * one that returns something other than `Void` has `- Returns:`.

Symbols without a source location are compiler-synthesized (`hashValue`, `init(rawValue:)`,
`Codable`, literal initializers) or inherited from the standard library; they are counted and
skipped. A symbol that appears in several graphs (a re-exported module) is checked once.

Usage (from anywhere in the repository):
  python3 scripts/check-doc-coverage.py [--scratch-path DIR] [--no-build] [--modules A,B,...]

By default it first runs the same incremental `swift build` as `scripts/build-docs.sh`
(scratch path `.build/docs`), so it works from a clean clone and never reads stale graphs;
`--no-build` reads `<scratch>/symbol-graphs` as it is.

Exits 0 when everything is documented, 1 when something is not, 2 on a usage error.
Only the Python standard library is used.
"""

import argparse
import glob
import json
import os
import re
import subprocess
import sys

DEFAULT_MODULES = [
    "TokenStore", "AuthCoordinator", "AlipayBridge", "AuthCoordinatorOAuth2",
    "AuthCoordinatorTestKit", "AppConfigDoctor", "AlipayBridgeServer",
]
PUBLIC = {"public", "open"}
CALLABLE_KINDS = {
    "swift.func", "swift.func.op", "swift.method", "swift.type.method", "swift.init",
    "swift.subscript", "swift.type.subscript",
}


def doc_text(symbol):
    comment = symbol.get("docComment") or {}
    return "\n".join(line.get("text", "") for line in comment.get("lines", []))


def source_path(symbol):
    uri = (symbol.get("location") or {}).get("uri", "")
    return uri[len("file://"):] if uri.startswith("file://") else uri


def declared_module(path, modules):
    """The module whose `Sources/<Module>/` folder holds `path`, or None."""
    parts = path.split("/")
    for index in range(len(parts) - 1):
        if parts[index] == "Sources" and parts[index + 1] in modules:
            return parts[index + 1]
    return None


def is_throwing(symbol):
    return any(
        fragment.get("kind") == "keyword" and fragment.get("text") in ("throws", "rethrows")
        for fragment in symbol.get("declarationFragments", [])
    )


def returns_value(symbol):
    if symbol["kind"]["identifier"] in ("swift.init",):
        return False
    returns = (symbol.get("functionSignature") or {}).get("returns", [])
    text = "".join(fragment.get("text", "") for fragment in returns).strip()
    return text not in ("", "()", "Void")


def problems_of(symbol):
    text = doc_text(symbol)
    summary = text.strip().split("\n", 1)[0].strip() if text.strip() else ""
    if not summary:
        return ["no doc comment"]
    if symbol["kind"]["identifier"] not in CALLABLE_KINDS:
        return []
    problems = []
    parameters = (symbol.get("functionSignature") or {}).get("parameters", [])
    if parameters and not re.search(r"^\s*- Parameters?\b", text, re.MULTILINE):
        names = ", ".join(parameter.get("name", "?") for parameter in parameters)
        problems.append(f"parameters not documented ({names})")
    if is_throwing(symbol) and not re.search(r"^\s*- Throws:", text, re.MULTILINE):
        problems.append("throws, but no '- Throws:'")
    if returns_value(symbol) and not re.search(r"^\s*- Returns:", text, re.MULTILINE):
        problems.append("returns a value, but no '- Returns:'")
    return problems


def build_symbol_graphs(scratch, directory):
    os.makedirs(directory, exist_ok=True)
    command = [
        "swift", "build", "--scratch-path", scratch,
        "-Xswiftc", "-emit-symbol-graph",
        "-Xswiftc", "-emit-symbol-graph-dir", "-Xswiftc", directory,
        "-Xswiftc", "-symbol-graph-minimum-access-level", "-Xswiftc", "public",
    ]
    print("check-doc-coverage: " + " ".join(command), flush=True)
    return subprocess.call(command)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scratch-path", default=".build/docs")
    parser.add_argument("--symbol-graph-dir", help="default: <scratch-path>/symbol-graphs")
    parser.add_argument("--no-build", action="store_true", help="read the graphs as they are")
    parser.add_argument("--modules", default=",".join(DEFAULT_MODULES))
    arguments = parser.parse_args()

    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    modules = [name for name in arguments.modules.split(",") if name]
    directory = arguments.symbol_graph_dir or os.path.join(arguments.scratch_path, "symbol-graphs")
    if not arguments.no_build and build_symbol_graphs(arguments.scratch_path, directory) != 0:
        print("check-doc-coverage: swift build failed", file=sys.stderr)
        return 2
    if not os.path.isdir(directory):
        print(f"error: no symbol graph directory at {directory}; run scripts/build-docs.sh first",
              file=sys.stderr)
        return 2

    seen = set()
    checked = {name: 0 for name in modules}
    synthesized = 0
    failures = []
    for module in modules:
        graphs = [os.path.join(directory, f"{module}.symbols.json")]
        graphs += sorted(glob.glob(os.path.join(directory, f"{module}@*.symbols.json")))
        if not os.path.isfile(graphs[0]):
            print(f"error: missing symbol graph {graphs[0]}", file=sys.stderr)
            return 2
        for graph in graphs:
            with open(graph, encoding="utf-8") as handle:
                symbols = json.load(handle).get("symbols", [])
            for symbol in symbols:
                if symbol.get("accessLevel") not in PUBLIC:
                    continue
                identifier = symbol["identifier"]["precise"]
                if identifier in seen:
                    continue
                seen.add(identifier)
                path = source_path(symbol)
                if not path:
                    synthesized += 1
                    continue
                owner = declared_module(path, modules)
                if owner is None:
                    continue
                checked[owner] += 1
                name = ".".join(symbol.get("pathComponents", [symbol["names"]["title"]]))
                line = (symbol.get("location") or {}).get("position", {}).get("line", -1) + 1
                for problem in problems_of(symbol):
                    relative = path[path.rfind("/Sources/") + 1:]
                    failures.append(f"{relative}:{line}: {owner}.{name}: {problem}")

    total = sum(checked.values())
    print("check-doc-coverage: public symbols declared in " + ", ".join(
        f"{name} ({count})" for name, count in checked.items()))
    print(f"check-doc-coverage: {total} checked (summary; Parameters, Throws and Returns on "
          f"callables); {synthesized} synthesized or inherited symbols skipped")
    if failures:
        for failure in sorted(failures):
            print(f"undocumented: {failure}")
        print(f"check-doc-coverage: FAILED, {len(failures)} problem(s)")
        return 1
    print("check-doc-coverage: OK, every public symbol is documented")
    return 0


if __name__ == "__main__":
    sys.exit(main())
