#!/usr/bin/env bash
# Builds the DocC documentation of every library module with the toolchain's `docc` and fails on
# any warning (an unresolved ``link``, a documented parameter that does not exist, a bad
# directive, ...). No package plugin is needed.
#
#   bash scripts/build-docs.sh [--scratch-path DIR] [--output DIR]
#
# 1. `swift build` emits one symbol graph per module (public symbols only) into
#    <scratch>/symbol-graphs.
# 2. For each catalog Sources/<Module>/Documentation.docc, the module's own graphs
#    (<Module>.symbols.json and its extension graphs <Module>@<Other>.symbols.json) are staged
#    into a directory of their own, so that other modules' graphs (SyncPrimitives, the
#    executables) never leak into the catalog, and `docc convert --warnings-as-errors` builds
#    <output>/<Module>.doccarchive.
# 3. AlipayBridge, AuthCoordinatorOAuth2 and AuthCoordinatorTestKit link to AuthCoordinator
#    symbols as ``/AuthCoordinator/...``: they are converted with the AuthCoordinator archive as
#    a `--dependency`.
#
# Defaults: scratch path .build/docs, output <scratch>/archives. Run from anywhere in the repo.
set -euo pipefail

cd "$(dirname "$0")/.."
scratch=".build/docs"
output=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --scratch-path) scratch="$2"; shift 2 ;;
    --output) output="$2"; shift 2 ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "build-docs: unknown argument $1" >&2; exit 2 ;;
  esac
done
output="${output:-$scratch/archives}"
graphs="$scratch/symbol-graphs"
staging="$scratch/docc-input"

# The modules with a catalog, dependencies first. "Module:Dependency ..." per entry.
modules=(
  "TokenStore:"
  "AuthCoordinator:"
  "AlipayBridge:AuthCoordinator"
  "AuthCoordinatorOAuth2:AuthCoordinator"
  "AuthCoordinatorTestKit:AuthCoordinator AuthCoordinatorOAuth2"
  "AppConfigDoctor:"
  "AlipayBridgeServer:AuthCoordinator AuthCoordinatorOAuth2 TokenStore"
)

docc_bin="$(dirname "$(command -v swift)")/docc"
[[ -x "$docc_bin" ]] || docc_bin="$(command -v docc || true)"
if [[ -z "$docc_bin" || ! -x "$docc_bin" ]]; then
  echo "build-docs: no docc next to $(command -v swift) or on PATH" >&2
  exit 1
fi

started=$SECONDS
echo "build-docs: emitting public symbol graphs into $graphs (swift build)"
# Graphs are written by the compile jobs, so an up-to-date module keeps its existing graph:
# the directory is not wiped between runs.
mkdir -p "$graphs"
swift build --scratch-path "$scratch" \
  -Xswiftc -emit-symbol-graph \
  -Xswiftc -emit-symbol-graph-dir -Xswiftc "$graphs" \
  -Xswiftc -symbol-graph-minimum-access-level -Xswiftc public \
  -Xswiftc -emit-extension-block-symbols

rm -rf "$staging" "$output"
mkdir -p "$staging" "$output"
failed=0
for entry in "${modules[@]}"; do
  module="${entry%%:*}"
  dependencies="${entry#*:}"
  catalog="Sources/$module/Documentation.docc"
  if [[ ! -f "$graphs/$module.symbols.json" ]]; then
    echo "build-docs: $graphs/$module.symbols.json is missing; delete $scratch and rerun" >&2
    exit 1
  fi
  mkdir -p "$staging/$module"
  cp "$graphs/$module.symbols.json" "$staging/$module/"
  shopt -s nullglob
  for extension in "$graphs/$module@"*.symbols.json; do cp "$extension" "$staging/$module/"; done
  shopt -u nullglob

  arguments=(
    convert "$catalog"
    --additional-symbol-graph-dir "$staging/$module"
    --fallback-display-name "$module"
    --fallback-bundle-identifier "com.github.authcoordinator.$module"
    --fallback-default-module-kind "Framework"
    --output-path "$output/$module.doccarchive"
    --enable-experimental-external-link-support
    --warnings-as-errors
  )
  for dependency in $dependencies; do
    arguments+=(--dependency "$output/$dependency.doccarchive")
  done
  articles=$(find "$catalog" -name '*.md' | wc -l | tr -d ' ')
  echo "build-docs: docc convert $catalog ($articles pages; symbol graphs:" \
    "$(cd "$staging/$module" && echo *.json)${dependencies:+; links into $dependencies})"
  log="$staging/$module.log"
  status=0
  "$docc_bin" "${arguments[@]}" >"$log" 2>&1 || status=$?
  if [[ $status -ne 0 ]] || grep -qE '(^|[^a-z])(warning|error):' "$log"; then
    cat "$log" >&2
    echo "build-docs: $module FAILED (docc exit status $status, warnings are errors)" >&2
    failed=1
  else
    echo "build-docs: $module OK -> $output/$module.doccarchive"
  fi
done

elapsed=$((SECONDS - started))
if [[ $failed -ne 0 ]]; then
  echo "build-docs: FAILED after ${elapsed}s" >&2
  exit 1
fi
echo "build-docs: OK, ${#modules[@]} catalogs, zero warnings, ${elapsed}s"
