#!/usr/bin/env bash
# Builds every DocC catalog with warnings as errors, then fails on any undocumented public
# symbol.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build-docs.sh --scratch-path .build/docs
python3 scripts/check-doc-coverage.py --no-build --scratch-path .build/docs
